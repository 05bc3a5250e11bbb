"""Options shared by many commands, declared once; console helpers; progress bars on stderr."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import BinaryIO, Iterator, List, Optional

import typer
from rich.markup import escape
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
ClientOpt = typer.Option(None, "--client", help="The load generator's per-request results: vllm bench serve "
                         "--save-result --save-detailed JSON, a GuideLLM report JSON, or a CSV with request id, "
                         "ttft_s and latency_s columns; compared with the server's numbers per request.",
                         metavar="FILE")

# markup off: every string printed is text (log lines, request ids, paths may hold "[/]" or "[link=…]");
# the few styled messages pass markup=True and escape() what they interpolate
stderr = Console(stderr=True, markup=False)
ShowPromptsOpt = typer.Option(False, "--show-prompts", help="Keep prompt and output text (redacted by default; "
                              "secrets are always masked).")

from ..coverage import EXIT_INCOMPLETE  # noqa: E402  (exit status when the input was not read in full)

_INCOMPLETE_WHAT = ("the input was not read in full (INCOMPLETE: a truncated gzip, an empty input, over-long lines "
                    "cut, a binary or unreadable file skipped from a list, invalid UTF-8)")
EXIT_HELP = ("Exit status: 0 done; 1 a finding at or above --fail-on; 2 usage error or nothing readable; "
             f"{EXIT_INCOMPLETE} {_INCOMPLETE_WHAT} and no finding reached --fail-on.")
EXIT_HELP_NO_FINDINGS = f"Exit status: 0 done; 2 usage error or nothing readable; {EXIT_INCOMPLETE} {_INCOMPLETE_WHAT}."


def exit_status(failed: bool, coverage: object) -> int:
    """1 when a finding reached ``--fail-on``, else ``EXIT_INCOMPLETE`` when the input was not read in full, else 0.

    ``coverage``: a ``Coverage`` or its ``to_dict()``."""
    if failed:
        return 1
    complete = coverage.get("complete", True) if isinstance(coverage, dict) else getattr(coverage, "complete", True)
    return 0 if complete else EXIT_INCOMPLETE


def exit_reason(code: int, fail_on: str) -> str:
    """Why the command exits non-zero, in one line."""
    if code == 1:
        return f"exit status 1: a finding at or above --fail-on {fail_on}"
    return f"exit status {code}: the input was not read in full (see INCOMPLETE above)"


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


#: Width of tables in piped output (prose is not wrapped at all there).
PIPE_WIDTH = 160


def _console(stream: object, is_tty: bool, width: int | None) -> Console:
    import os

    if width or is_tty:
        return Console(file=stream, width=width, soft_wrap=False, markup=False)  # type: ignore[arg-type]
    cols = os.environ.get("COLUMNS", "")
    # piped: prose is never hard-wrapped (grep sees whole lines); tables fit COLUMNS or 160 columns
    return Console(file=stream, width=int(cols) if cols.isdigit() and int(cols) >= 40 else PIPE_WIDTH,  # type: ignore[arg-type]
                   soft_wrap=True, markup=False)


def stdout_console(width: int | None = None) -> Console:
    """The console for human output: the terminal's width; piped, prose is not hard-wrapped."""
    return _console(sys.stdout, sys.stdout.isatty(), width)


def stderr_console(width: int | None = None) -> Console:
    """Like ``stdout_console``, on standard error."""
    return _console(sys.stderr, sys.stderr.isatty(), width)


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
    stderr.print(f"[dim]merged {n} Prometheus points from {escape(str(url))}[/]", markup=True)
    return n
