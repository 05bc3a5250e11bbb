"""`vllmlog fleet`: many replicas' logs at once — which replicas are unhealthy, is it one or all of them."""

from __future__ import annotations

from rich.markup import escape

import os
import sys
from typing import List, Optional

import orjson
import typer

from ..analyze import FAIL_ON_CHOICES, SEVERITIES
from ..errors import ConfigError, InputError
from ..parsing.fields import dumps_safe
from ._app import app
from .common import EXIT_INCOMPLETE, OptInt, OptStr, YearOpt, stderr_console, stdout_console

DEFAULT_OUT = "vllmlog-fleet"
FLEET_EXIT_HELP = ("Exit status: 0 done; 1 an incident (a replica's or a fleet-wide one) at or above --fail-on; "
                   f"2 usage error or no replica readable; {EXIT_INCOMPLETE} a replica not read in full (or "
                   "unreadable) and no incident reached --fail-on.")


@app.command("fleet", epilog=FLEET_EXIT_HELP)
def fleet_cmd(
    inputs: List[str] = typer.Argument(..., help="Replica logs: files (plain or .gz), directories (walked), globs "
                                       "(quoted), or fsspec URLs. Rotated pieces of one replica (x.log.2.gz, x.log.1, "
                                       "x.log) are read in order as one stream.", metavar="PATH|GLOB|DIR..."),
    engine: str = typer.Option("local", "--engine", help="local (a process pool on this machine), ray (Ray tasks) "
                               "or ray-data (a Ray Data map over the replicas; pip install 'vllmlog\\[ray]')."),
    address: OptStr = typer.Option(None, "--address", help="With --engine ray / ray-data: the cluster (auto, ray://host:10001); "
                                   "default: start a local Ray on this machine."),
    workers: OptInt = typer.Option(None, "--workers", "-j", help="Worker processes (default: this machine's CPUs; "
                                   "0 runs in this process)."),
    out_dir: str = typer.Option(DEFAULT_OUT, "--out", help="Directory for the per-request rows (rows/*.parquet)."),
    json_out: bool = typer.Option(False, "--json", help="Print the fleet document as JSON (the HTML report is still "
                                  "written unless --no-html)."),
    output: OptStr = typer.Option(None, "--output", "-o", help="Where to write the fleet HTML report (default "
                                  "OUT/fleet-report.html)."),
    no_html: bool = typer.Option(False, "--no-html", help="No HTML report (and no per-replica reports)."),
    replica_reports: bool = typer.Option(True, "--replica-reports/--no-replica-reports", help="Write each replica's "
                                         "own report (OUT/replicas/*.html), linked from the fleet report."),
    grid: float = typer.Option(60.0, "--grid", help="Step of the fleet's time grid, seconds."),
    window: float = typer.Option(300.0, "--window", help="Onsets of one symptom within this many seconds on many "
                                 "replicas make one fleet-wide incident."),
    min_share: float = typer.Option(0.25, "--min-share", help="…on at least this share of the replicas (at least 2; 5 replicas always count as many)."),
    config: OptStr = typer.Option(None, "--config", "-c", help="Diagnosis thresholds (TOML), as for `vllmlog diagnose`."),
    fail_on: str = typer.Option("never", "--fail-on", help="Exit 1 when an incident is at least this severe: "
                                + ", ".join(FAIL_ON_CHOICES) + "."),
    top: int = typer.Option(30, "--top", help="Replicas shown in the table (worst first)."),
    show_prompts: bool = typer.Option(False, "--show-prompts", help="Include prompt and output text (redacted by default)."),
    mask_ips: bool = typer.Option(False, "--mask-ips", help="Replace IP addresses with <ip>."),
    traces: Optional[List[str]] = typer.Option(None, "--traces", help="OpenTelemetry traces (OTLP JSON lines files, "
                                               "directories, globs); a trace file joins the replica it is named after "
                                               "(<replica>-traces.otlp.jsonl). Repeatable.", metavar="TRACES"),
    prometheus: Optional[List[str]] = typer.Option(None, "--prometheus", help="Each replica's /metrics history: a "
                                                   "Prometheus server URL (targets joined to replicas by their pod / "
                                                   "instance label) or saved exposition snapshots (files, directories, "
                                                   "globs; named after the replica or with an instance label). Feeds "
                                                   "the KV / queue series and the diagnosis. Repeatable.",
                                                   metavar="URL|SNAPSHOTS"),
    percentiles: str = typer.Option("exact", "--percentiles", help="Fleet latency percentiles: exact (Polars over "
                                    "the per-request Parquet rows) or sketch (the replicas' DDSketches merged, ±1 %; "
                                    "no rows written: for workers without storage the driver can read)."),
    year: OptInt = YearOpt,
) -> None:
    """Many replicas at once: the fleet's RED/USE, replicas worst first, outliers, router skew, fleet-wide incidents."""
    from ..fleet import ENGINES, analyze_fleet

    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}", hint="use --engine local, ray or ray-data")
    if fail_on not in FAIL_ON_CHOICES:
        raise ConfigError(f"unknown severity {fail_on!r} for --fail-on", hint="use one of " + ", ".join(FAIL_ON_CHOICES))
    if grid <= 0 or window <= 0 or not 0 < min_share <= 1:
        raise ConfigError("--grid and --window must be > 0 and --min-share in (0, 1]")
    if workers is not None and workers < 0:
        raise ConfigError("--workers must be ≥ 0")
    err = stderr_console()
    done = [0]

    def progress(r: dict) -> None:
        done[0] += 1
        if not json_out and err.is_terminal:
            err.print(f"[dim]{done[0]} replica(s) done: {escape(str(r['replica']))}[/]", end="\r", markup=True)

    fa = analyze_fleet(inputs, engine=engine, workers=workers, address=address, out_dir=out_dir, year=year,
                       grid_s=grid, window_s=window, min_share=min_share, config=config, show_prompts=show_prompts,
                       mask_ips=mask_ips, replica_reports=replica_reports and not no_html, traces=traces,
                       prometheus=prometheus, percentiles=percentiles, progress=progress)
    doc = fa.to_dict()
    if not fa.report["replicas_read"]:
        first = fa.report["coverage"]["unreadable"][0]
        raise InputError(f"no replica readable: {first['replica']}: {first['error']}",
                         hint="pass vLLM server logs (plain or .gz), a directory of them, or a quoted glob")
    report_path = None
    if not no_html:
        from ..fleet.html import write_fleet_report

        report_path = output or os.path.join(out_dir, "fleet-report.html")
        write_fleet_report(fa.report, fa.replicas, report_path,
                           reports_dir=fa.reports_dir if replica_reports else None)
        doc["report"] = os.path.abspath(report_path)
    if json_out:
        sys.stdout.buffer.write(dumps_safe(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        sys.stdout.flush()
    else:
        from ..fleet.view import render_fleet

        con = stdout_console()
        render_fleet(fa.report, con, top=top)
        con.print(f"[dim]per-request rows: {escape(os.path.join(fa.out_dir, 'rows'))}[/]", markup=True)
        if report_path:
            con.print(f"report: {report_path}")
    code = 0
    if fail_on != "never":
        floor = SEVERITIES.index(fail_on)
        sevs = [i["severity"] for r in fa.replicas if not r.get("error") for i in r["incidents"]]
        sevs += [f["severity"] for f in fa.report["incidents"]]
        if any(SEVERITIES.index(s) >= floor for s in sevs if s in SEVERITIES):
            code = 1
    if not code and not fa.report["coverage"]["complete"]:
        code = EXIT_INCOMPLETE
    if code:
        raise typer.Exit(code)
