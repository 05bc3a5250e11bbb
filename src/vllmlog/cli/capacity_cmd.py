"""`vllmlog capacity`: capacity planning and parameter tuning from the logs."""

from __future__ import annotations

from rich.markup import escape

import os
import sys
from contextlib import ExitStack
from typing import Optional

import typer

from ..errors import ConfigError
from ._app import app
from .common import (
    EXIT_HELP_NO_FINDINGS, ClientOpt, JsonOpt, OptInt, OptPaths, OptStr, PathsArg, PathsT, PrometheusOpt, SinceOpt,
    TracesOpt, YearOpt, exit_status, merge_prometheus_opt, progress_bar, stdout_console,
)

_SLO_KEYS = {"ttft": "ttft_s", "ttft_p95": "ttft_s", "e2e": "e2e_s", "e2e_p95": "e2e_s", "queue": "queue_s",
             "tokens_per_s": "tokens_per_s", "tps": "tokens_per_s", "tpot": "tpot"}


def parse_slo(text: str | None):
    """``ttft_p95=1s,e2e_p95=30s,tokens_per_s=20`` (also ``tpot=50ms``) → ``SloTargets``."""
    from ..numbers import SloTargets

    if not text:
        return SloTargets()
    specs = []
    for part in text.split(","):
        name, sep, val = part.partition("=")
        key = _SLO_KEYS.get(name.strip().lower().replace("-", "_"))
        if not sep or key is None:
            raise ConfigError(f"bad --slo target {part!r}",
                              hint="use e.g. --slo ttft_p95=1s,e2e_p95=30s,tokens_per_s=20 (or tpot=50ms)")
        v = val.strip().lower()
        try:
            if key == "tpot":
                ms = float(v[:-2]) / 1000 if v.endswith("ms") else float(v.rstrip("s"))
                specs.append(f"tokens_per_s={1 / ms:g}")
                continue
            num = float(v[:-2]) / 1000 if v.endswith("ms") else float(v.rstrip("s"))
        except (ValueError, ZeroDivisionError):
            raise ConfigError(f"bad --slo value in {part!r}", hint="the value must be a number (s or ms)") from None
        specs.append(f"{key}={num:g}")
    return SloTargets.parse(specs)


@app.command("capacity", epilog=EXIT_HELP_NO_FINDINGS)
def capacity_cmd(
    logs: PathsT = PathsArg,
    target_rate: Optional[float] = typer.Option(None, "--target-rate", help="Requests per second to plan replicas "
                                                "for."),
    slo: OptStr = typer.Option(None, "--slo", help="SLO targets, e.g. ttft_p95=1s,e2e_p95=30s,tokens_per_s=20 "
                               "(default: TTFT 1 s, 20 tokens/s per request, queue 30 s)."),
    headroom: float = typer.Option(0.1, "--headroom", help="Share of the SLO-holding rate kept free on every replica (0–0.9)."),
    client: OptStr = ClientOpt,
    json_out: bool = JsonOpt,
    year: OptInt = YearOpt,
    traces: OptPaths = TracesOpt,
    prometheus: OptStr = PrometheusOpt,
    since: OptStr = SinceOpt,
    width: OptInt = typer.Option(None, "--width", help="Render at this many columns."),
) -> None:
    """Capacity and tuning from the logs: what the server has, what the load needs, which limit binds and when,
    what-ifs over --max-num-seqs / KV cache size / fp8 / --max-model-len / prefix caching, replicas for a target.
    A directory or glob reads a fleet (one log, or rotated pieces, per replica): each replica's throughput within
    the SLO, the trend of the peak rate over days and when it reaches the fleet's capacity."""

    if not 0 <= headroom < 0.9:
        raise ConfigError(f"--headroom {headroom:g} is out of range", hint="use a share between 0 and 0.9, e.g. 0.2")
    if target_rate is not None and target_rate <= 0:
        raise ConfigError("--target-rate must be > 0")
    targets = parse_slo(slo)
    with ExitStack() as stack:
        logs, names = _fleet_inputs(logs, stack)
        _plan_and_show(logs, names, year, traces, prometheus, since, client, targets, target_rate, headroom,
                       json_out, width)


def _fleet_inputs(logs: list[str], stack: ExitStack) -> tuple[list[str], dict[str, str] | None]:
    """A directory or glob among the arguments: a fleet's logs, one replica per log (rotated pieces of one replica
    read as one stream, as ``vllmlog fleet`` reads them), named as ``fleet`` names them."""
    # a path that exists is itself (a log named 'x[1].log' is no glob)
    if not any(a != "-" and (os.path.isdir(a) or (not os.path.exists(a) and any(c in a for c in "*?[")))
               for a in logs):
        return logs, None
    from ..fleet.inputs import discover
    from ..fleet.mapper import stream_of

    paths: list[str] = []
    names: dict[str, str] = {}
    for spec in discover(logs).replicas:
        local, _pieces, _problems = stack.enter_context(stream_of(spec.name, spec.paths))
        for p in local:
            paths.append(p)
            names[p] = spec.name
    return paths, names


def _plan_and_show(logs, names, year, traces, prometheus, since, client, targets, target_rate, headroom, json_out,
                   width) -> None:
    from ..capacity import plan
    from ..capacity.view import PlanView
    from ..run import load

    with progress_bar(logs) as prog:
        run = load(logs, year=year, progress=prog, traces=traces)
    merge_prometheus_opt(run, prometheus, since)
    recs = []
    if client:
        from ..client import read_client

        recs = read_client(client)
    from ..numbers import compute

    p = plan(run, slo=targets, target_rate=target_rate, headroom=headroom, client=recs,
             numbers=compute(run, slo=targets) if len(run.servers) == 1 else None, replica_names=names)
    if json_out:
        import orjson

        doc = p.to_dict()
        doc["coverage"] = run.coverage.to_dict()
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")
    else:
        con = stdout_console(width)
        if not run.coverage.complete:
            con.print(f"[bold yellow]{escape(run.coverage.headline())}[/]", markup=True)
        con.print(PlanView(p))
    code = exit_status(False, run.coverage)
    if code:
        raise typer.Exit(code)
