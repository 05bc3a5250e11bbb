"""Options shared by many commands, declared once; console helpers; progress bars on stderr."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import BinaryIO, Iterator, List, Optional

import typer
from rich.console import Console

PathsArg = typer.Argument(..., help="vLLM log files (plain or .gz); - reads standard input.", metavar="LOG...")
YearOpt = typer.Option(None, "--year", help="Year of the log's MM-DD timestamps (default: the file's modification year).")
JsonOpt = typer.Option(False, "--json", help="Machine-readable JSON output.")
OutOpt = typer.Option(None, "--output", "-o", help="Write to this file instead of standard output.")
TracesOpt = typer.Option(None, "--traces", help="OpenTelemetry traces of the same server (OTLP JSON lines, the "
                         "Collector file exporter's format; plain or .gz): vLLM's llm_request spans give exact "
                         "per-request timings, its loading spans the start-up waterfall. Repeatable.",
                         metavar="TRACES")

PathsT = List[str]
OptInt = Optional[int]
OptStr = Optional[str]
OptPaths = Optional[List[str]]

stderr = Console(stderr=True)


def open_output(output: str | None) -> BinaryIO:
    """Where a command writes bytes: the file `output` (`-o`), else standard output."""
    return open(output, "wb") if output else sys.stdout.buffer  # noqa: SIM115


def close_output(out: BinaryIO, output: str | None) -> None:
    """Close the `-o` file, or flush standard output (a reader that went away is not an error)."""
    if output:
        out.close()
    else:
        try:
            out.flush()
        except BrokenPipeError:
            pass


def stdout_console(width: int | None = None) -> Console:
    """The console for human output (100 columns when not a terminal, so output fits reports)."""
    return Console(width=width or (None if sys.stdout.isatty() else 100), soft_wrap=False)


@contextmanager
def progress_bar(paths: list[str], enabled: bool = True) -> Iterator[object]:
    """A byte-based progress bar on stderr for long inputs (quiet for small files and pipes)."""
    import os

    total = 0
    for p in paths:
        if p == "-":
            total = 0
            break
        try:
            total += os.path.getsize(p)
        except OSError:
            pass
    if not enabled or total < 32 * 1024 * 1024 or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    with Progress(
        TextColumn("[bold]reading"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
        console=stderr, transient=True,
    ) as prog:
        task = prog.add_task("read", total=total)
        yield lambda n: prog.advance(task, n)

PrometheusOpt = typer.Option(None, "--prometheus", help="Merge this Prometheus server's vLLM metric history "
                             "(query_range) into the analysis, e.g. http://127.0.0.1:9090.")
SinceOpt = typer.Option(None, "--since", help="With --prometheus: how far back (30m, 1h, 2d); default: "
                        "the log's own time range ±5 min (log times taken as UTC).")


def merge_prometheus_opt(run: object, url: str | None, since: str | None) -> int:
    """Apply --prometheus/--since to a loaded run (shared by analyze and timeline)."""
    if not url:
        if since:
            from ..errors import ConfigError

            raise ConfigError("--since needs --prometheus URL")
        return 0
    from ..prommetrics.merge import merge_prometheus
    from ..prommetrics.scrape import parse_duration

    n = merge_prometheus(run, url, since_s=parse_duration(since) if since else None)
    stderr.print(f"[dim]merged {n} Prometheus points from {url}[/]")
    return n
