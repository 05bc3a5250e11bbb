"""`vllmlog analyze`: the main job — parse, diagnose, print the verdict, write the HTML report."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import orjson
import typer
from rich.markup import escape
from rich.console import Console

from ..analyze import FAIL_ON_CHOICES, analyze, example_names, example_path, should_fail
from ..errors import ConfigError
from ..redact import Redactor
from ._app import app
from .common import (
    ClientOpt, EXIT_HELP, OptInt, OptPaths, OptStr, PrometheusOpt, SinceOpt, TracesOpt, YearOpt, exit_reason, exit_status,
    merge_prometheus_opt, progress_bar, stderr_console, stdout_console,
)
from ..parsing.fields import dumps_safe

DEFAULT_REPORT = "vllmlog-report.html"


@app.command("analyze", epilog=EXIT_HELP)
def analyze_cmd(
    logs: Optional[List[str]] = typer.Argument(None, help="vLLM log files (plain or .gz); - reads standard input.",
                                               metavar="LOG..."),
    output: OptStr = typer.Option(None, "--output", "-o", help=f"Where to write the HTML report (default ./{DEFAULT_REPORT}; "
                                  "- writes it to standard output and the text summary to standard error)."),
    no_html: bool = typer.Option(False, "--no-html", help="Do not write the HTML report."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON document (summary + findings + timeline) instead of the text summary; the HTML report is still written unless --no-html."),
    fail_on: str = typer.Option("never", "--fail-on", help="Exit 1 when a finding is at least this severe: "
                                + ", ".join(FAIL_ON_CHOICES) + " (default never: analyze reports; "
                                "`vllmlog diagnose` gates, failing on warnings)."),
    config: OptStr = typer.Option(None, "--config", "-c", help="TOML file with diagnosis thresholds ([thresholds], "
                                  "[rules.CODE]), as for `vllmlog diagnose`."),
    show_prompts: bool = typer.Option(False, "--show-prompts", help="Include prompt and output text (redacted by default)."),
    mask_ips: bool = typer.Option(False, "--mask-ips", help="Replace IP addresses with <ip>."),
    example: OptStr = typer.Option(None, "--example", help="Analyze a bundled example log ('list' shows them)."),
    top: int = typer.Option(3, "--top", help="How many findings to print in full (the rest get one line each)."),
    year: OptInt = YearOpt,
    prometheus: OptStr = PrometheusOpt,
    since: OptStr = SinceOpt,
    traces: OptPaths = TracesOpt,
    client: OptStr = ClientOpt,
) -> None:
    """Is the service healthy, what went wrong, what to change — and an HTML report to share."""
    if fail_on not in FAIL_ON_CHOICES:
        raise ConfigError(f"unknown severity {fail_on!r} for --fail-on", hint="use one of " + ", ".join(FAIL_ON_CHOICES))
    if example == "list":
        for name in example_names():
            typer.echo(name)
        return
    paths = list(logs or [])
    if example:
        paths.append(example_path(example))
    if not paths:
        raise ConfigError("no log given", hint="vllmlog analyze server.log (or --example list)")
    to_stdout = output == "-" and not no_html
    if to_stdout and json_out:
        raise ConfigError("-o - and --json both write to standard output", hint="pick one, or -o FILE with --json")
    from ..rules import load_config

    cfg = load_config(config)
    rd = Redactor(show_prompts=show_prompts, mask_ips=mask_ips)
    with progress_bar(paths) as prog:
        if prometheus:
            from ..run import load

            run = load(paths, year=year, progress=prog, traces=traces)
            merge_prometheus_opt(run, prometheus, since)
            result = analyze(paths, year=year, run=run, config=cfg, client=client)
        else:
            merge_prometheus_opt(None, None, since)  # --since alone is a usage error
            result = analyze(paths, year=year, progress=prog, traces=traces, config=cfg, client=client)  # type: ignore[arg-type]
    report_path = None
    size = None
    if not no_html:
        from ..export.html import render_report, write_report

        if to_stdout:
            data = render_report(result, redactor=rd).encode("utf-8")
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            report_path, size = "<stdout>", len(data)
        else:
            report_path = output or DEFAULT_REPORT
            size = write_report(result, report_path, redactor=rd)
    if json_out:
        doc = result.to_dict(rd)
        doc["report"] = os.path.abspath(report_path) if report_path else None
        sys.stdout.buffer.write(dumps_safe(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE))
        sys.stdout.flush()
    else:
        from ..render import render_analysis

        con: Console = stderr_console() if to_stdout else stdout_console()
        render_analysis(result, con, redactor=rd, top=top, report_path=report_path, report_bytes=size)
    code = exit_status(should_fail(result.findings, fail_on), result.coverage)
    if code and not json_out:
        (stderr_console() if to_stdout else con).print(f"[dim]{escape(exit_reason(code, fail_on))}[/]", markup=True)
    if code:
        raise typer.Exit(code)

