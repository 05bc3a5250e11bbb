"""`vllmlog simulate`: write a realistic vLLM log (and its ground truth) for a named scenario."""

from __future__ import annotations

import re
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, List, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import ConfigError, InputError
from ._app import app
from .common import OptStr, OutOpt, stderr, stdout_console

if TYPE_CHECKING:
    from ..simulate import Fault

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(text: str) -> float:
    """`90`, `90s`, `10m`, `1.5h`, `500ms` → seconds."""
    m = _DURATION.match(text)
    if not m:
        raise ConfigError(f"invalid duration {text!r}", hint="use e.g. 90s, 10m or 1h")
    value = float(m.group(1))
    return value * {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]


_CAUSES = ("cuda_oom", "illegal_memory_access")


def parse_fault(text: str) -> Fault:
    """`KIND[:CAUSE][@TIME]` (time after the server is ready, default 60s) → a Fault."""
    from ..simulate import FAULT_KINDS, Fault

    head, _, at = text.partition("@")
    kind, _, cause = head.partition(":")
    kind = kind.strip().replace("-", "_")
    cause = cause.strip().replace("-", "_")
    if kind not in FAULT_KINDS:
        raise ConfigError(f"unknown fault {kind!r}", hint="choose one of: " + ", ".join(FAULT_KINDS))
    if kind == "engine_death":
        cause = cause or "cuda_oom"
        if cause not in _CAUSES:
            raise ConfigError(f"unknown engine_death cause {cause!r}", hint="choose one of: " + ", ".join(_CAUSES))
    elif kind == "kv_too_small" and cause not in ("", "no_blocks"):
        raise ConfigError(f"unknown kv_too_small cause {cause!r}", hint="use kv_too_small or kv_too_small:no_blocks")
    return Fault(kind, at_s=parse_duration(at) if at else 60.0, cause=cause)


def _list_scenarios() -> None:
    from ..simulate import FORMATS, SCENARIOS

    table = Table(title="vllmlog simulate scenarios", show_lines=False)
    table.add_column("scenario", style="bold")
    table.add_column("category")
    table.add_column("default duration", justify="right")
    table.add_column("what happens")
    for sc in SCENARIOS.values():
        table.add_row(sc.name, sc.category, f"{sc.duration_s:g}s", sc.description)
    con = stdout_console()
    con.print(table)
    con.print("formats: " + ", ".join(FORMATS))


@app.command("simulate")
def simulate_cmd(
    scenario: str = typer.Option("healthy", "--scenario", "-s", help="Scenario name (see --list)."),
    fmt: str = typer.Option("handbook", "--format", "-f", help="handbook, v0 (0.6.1), v1 (0.32), v1-0.15, v1-0.10 or v1-json (0.32 JSON logging)."),
    duration: OptStr = typer.Option(None, "--duration", "-d", help="Traffic duration after the server is ready, e.g. 10m (default: per scenario)."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same seed gives byte-identical output."),
    output: OptStr = OutOpt,
    truth: OptStr = typer.Option(None, "--truth", help="Write the ground truth (requests, incidents, counts) as JSON here."),
    start: OptStr = typer.Option(None, "--start", help="Simulated time of the first line, ISO 8601 (default 2026-11-30T10:00:00)."),
    rate: Optional[float] = typer.Option(None, "--rate", help="Override the base arrival rate (requests/s)."),
    requests: Optional[int] = typer.Option(None, "--requests", help="Stop arrivals after this many requests."),
    lines: Optional[int] = typer.Option(None, "--lines", help="Stop arrivals once about this many lines are written."),
    fault: Optional[List[str]] = typer.Option(None, "--fault", help="Inject a fault (repeatable): KIND or KIND:CAUSE, optionally followed by @TIME after the server is ready (default 60s). Kinds: stuck_request, engine_death (causes cuda_oom, illegal_memory_access), nccl_hang, startup_oom, kv_too_small (cause no_blocks)."),
    log_outputs: bool = typer.Option(False, "--log-outputs", help="v1 only: --enable-log-outputs lines (Generated response, per-token deltas for streamed chat)."),
    follow: bool = typer.Option(False, "--follow", help="Write lines in real time, paced by their simulated timestamps."),
    speed: float = typer.Option(1.0, "--speed", help="With --follow: simulated seconds per real second."),
    list_: bool = typer.Option(False, "--list", help="List scenarios and formats, then exit."),
    replicas: Optional[int] = typer.Option(None, "--replicas", help="A fleet: N replicas' logs into the directory -o "
                                           "(replica-NN.log + truth.json), healthy unless --bad/--fleet-event/--skew."),
    bad: Optional[List[str]] = typer.Option(None, "--bad", help="With --replicas: I:SCENARIO or I:FAULT[@TIME] makes "
                                            "replica I alone unhealthy (e.g. 3:engine-crash, 5:slow-decode). Repeatable."),
    fleet_event: OptStr = typer.Option(None, "--fleet-event", help="With --replicas: a scenario or fault on the first "
                                       "half of the replicas at once (SPEC or SPEC,SHARE: overload, engine_death@2m,0.75)."),
    skew: Optional[List[str]] = typer.Option(None, "--skew", help="With --replicas: I:FACTOR multiplies replica I's "
                                             "arrival rate (router imbalance: 3 hot, 0.2 cold). Repeatable."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary on stderr."),
) -> None:
    """Simulate a vLLM server and write its log: realistic lines, deterministic per seed, with ground truth."""
    from ..simulate import build_config, simulate, write_truth

    if list_:
        _list_scenarios()
        return
    if replicas is not None or bad or fleet_event or skew:
        _fleet(replicas, bad, fleet_event, skew, fmt, seed, duration, rate, start, output, quiet)
        return
    if speed <= 0:
        raise ConfigError("--speed must be positive")
    try:
        start_dt = datetime.fromisoformat(start) if start else None
    except ValueError as exc:
        raise ConfigError(f"invalid --start {start!r}", hint="use ISO 8601, e.g. 2026-11-30T10:00:00") from exc
    cfg = build_config(
        scenario, fmt=fmt, seed=seed, duration_s=parse_duration(duration) if duration else None, start=start_dt,
        rate=rate, max_requests=requests, max_lines=lines,
        faults=[parse_fault(f) for f in fault] if fault else None,
        log_outputs=log_outputs,
    )
    t0 = time.perf_counter()
    to_file = bool(output and output != "-")
    try:
        out = open(output, "w", encoding="utf-8", newline="") if to_file else sys.stdout  # noqa: SIM115
    except OSError as exc:
        raise InputError(f"cannot write {output}: {exc.strerror}") from exc
    try:
        report = simulate(cfg, out, follow=follow, speed=speed)
        if not to_file:
            out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise InputError(f"cannot write {output or 'standard output'}: {exc.strerror}") from exc
    finally:
        if to_file:
            out.close()
    elapsed = time.perf_counter() - t0
    if truth:
        with open(truth, "w", encoding="utf-8") as fp:
            write_truth(report.truth, fp)
    if not quiet and (to_file or not sys.stdout.isatty()):
        c = report.truth["counts"]
        cats = ", ".join(i["category"] for i in report.truth["incidents"]) or "none"
        stderr.print(
            f"[bold]{escape(str(cfg.scenario))}[/] ({cfg.fmt}, seed {cfg.seed}): {report.lines:,} lines, {c['requests']:,} requests "
            f"in {elapsed:.2f}s → {escape(str(output)) if to_file else 'stdout'}; incidents: {escape(str(cats))}"
            + (f"; truth → {escape(str(truth))}" if truth else ""),
            highlight=False, markup=True,
        )


def _fleet(replicas: Optional[int], bad: Optional[List[str]], event: Optional[str], skew: Optional[List[str]], fmt: str,
           seed: int, duration: Optional[str], rate: Optional[float], start: Optional[str], output: Optional[str],
           quiet: bool) -> None:
    """`simulate --replicas N -o DIR`: a simulated fleet (``vllmlog.fleet.simfleet``)."""
    from ..fleet.simfleet import FleetSpec, write_sim_fleet

    if replicas is None:
        raise ConfigError("--bad, --fleet-event and --skew need --replicas N")
    if not output or output == "-":
        raise ConfigError("--replicas writes a directory", hint="add -o DIR")

    def pairs(items: Optional[List[str]], what: str) -> dict[int, str]:
        out: dict[int, str] = {}
        for it in items or []:
            i, sep, v = it.partition(":")
            if not sep or not i.strip().isdigit() or not v.strip():
                raise ConfigError(f"bad {what} {it!r}", hint=f"use INDEX:VALUE, e.g. 3:{'engine-crash' if what == '--bad' else '3'}")
            out[int(i)] = v.strip()
        return out

    share = 0.5
    if event and "," in event:
        event, _, sh = event.rpartition(",")
        try:
            share = float(sh)
        except ValueError:
            raise ConfigError(f"bad share in --fleet-event {sh!r}", hint="a number in (0, 1], e.g. overload,0.75") from None
        if not 0 < share <= 1:
            raise ConfigError("the --fleet-event share must be in (0, 1]")
    try:
        skews = {i: float(v) for i, v in pairs(skew, "--skew").items()}
    except ValueError:
        raise ConfigError("--skew factors must be numbers", hint="e.g. --skew 2:3") from None
    try:
        start_dt = datetime.fromisoformat(start) if start else None
    except ValueError as exc:
        raise ConfigError(f"invalid --start {start!r}", hint="use ISO 8601, e.g. 2026-11-30T10:00:00") from exc
    spec = FleetSpec(replicas=replicas, fmt=fmt, seed=seed, duration_s=parse_duration(duration) if duration else None,
                     rate=rate, start=start_dt, bad=pairs(bad, "--bad"), event=event, event_share=share, skew=skews)
    truth = write_sim_fleet(spec, output, parse_fault)
    if not quiet:
        kinds = [r["truth"] for r in truth["replicas"].values()]
        stderr.print(f"[dim]{len(kinds)} replicas → {escape(str(output))}/ ({kinds.count('bad')} bad, "
                     f"{kinds.count('fleet-wide')} in the fleet-wide event, {len(truth['skewed'])} skewed); "
                     f"truth: {escape(str(output))}/truth.json[/]", markup=True)
