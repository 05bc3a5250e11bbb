"""`vllmlog parse`: logs → typed events (JSON lines) or counts of what was read."""

from __future__ import annotations

import sys

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from ..reader import ParseStats, count, write_jsonl
from ._app import app
from .common import (
    JsonOpt, OptInt, OptStr, OutOpt, PathsArg, PathsT, ShowPromptsOpt, YearOpt, close_output, open_output, progress_bar, stdout_console,
)


@app.command("parse")
def parse_cmd(
    logs: PathsT = PathsArg,
    jsonl: bool = typer.Option(False, "--jsonl", help="Write one JSON object per event (the default output)."),
    stats: bool = typer.Option(False, "--stats", help="Print counts per kind and the top unknown-line templates instead of events."),
    json_out: bool = JsonOpt,
    output: OptStr = OutOpt,
    year: OptInt = YearOpt,
    top: int = typer.Option(20, "--top", help="How many unknown templates --stats lists."),
    jobs: OptInt = typer.Option(None, "--jobs", "-j", help="Processes for a large plain file (default: usable cores, at most 4; 1 = no parallelism)."),
    show_prompts: bool = ShowPromptsOpt,
) -> None:
    """Parse vLLM logs into typed events: every line lands in exactly one event."""
    st = ParseStats()
    out = open_output(output)
    try:
        with progress_bar(logs) as prog:
            if stats and not jsonl:
                count(logs, year=year, stats=st, progress=prog, jobs=jobs)
            else:
                out.flush()
                from ..redact import Redactor

                write_jsonl(logs, out.fileno(), year=year, stats=st, progress=prog, jobs=jobs,
                            redactor=Redactor(show_prompts=show_prompts))
    except BrokenPipeError:
        return
    finally:
        close_output(out, output)
    if stats:
        _print_stats(st, json_out, top, to_stderr=jsonl and not output, show_prompts=show_prompts)


def _print_stats(st: ParseStats, as_json: bool, top: int, to_stderr: bool, show_prompts: bool = False) -> None:
    from ..redact import Redactor

    d = Redactor(show_prompts=show_prompts).value(st.to_dict(top))  # unknown templates are log text: redacted
    if as_json:
        data = orjson.dumps(d, option=orjson.OPT_INDENT_2).decode()
        print(data, file=sys.stderr if to_stderr else sys.stdout)
        return
    con = stdout_console()
    from ..parsing import fast

    con.print(f"[bold]{d['lines']:,}[/] lines → [bold]{d['events']:,}[/] events "
              f"({d['lines_accounted_for']:,} lines accounted for; "
              f"{'compiled fast path' if fast.AVAILABLE else 'pure-Python parser'})", markup=True)
    for inp in d["inputs"]:
        notes = []
        if inp["gzip"]:
            notes.append("gzip")
        if inp["invalid_utf8_lines"]:
            notes.append(f"{inp['invalid_utf8_lines']} lines with invalid UTF-8 (replaced)")
        if inp["truncated_lines"]:
            notes.append(f"{inp['truncated_lines']} over-long lines truncated")
        if inp["incomplete"]:
            notes.append(f"[yellow]incomplete: {escape(str(inp['incomplete']))}[/]")
        con.print(f"  {escape(inp['path'])}: {inp['lines']:,} lines" + (f" ({'; '.join(notes)})" if notes else ""), markup=True)
    t = Table(title="events by kind", show_edge=False)
    t.add_column("kind")
    t.add_column("count", justify="right")
    for k, c in d["kinds"].items():
        t.add_row(k, f"{c:,}")
    con.print(t)
    if d["unknown_templates"]:
        u = Table(title=f"top unknown templates (of {len(st.unknown_templates):,})", show_edge=False)
        u.add_column("count", justify="right")
        u.add_column("kind")
        u.add_column("template", overflow="fold")
        u.add_column("first seen")
        for row in d["unknown_templates"]:
            u.add_row(f"{row['count']:,}", row["kind"], escape(row["template"][:160]), escape(f"{row['first']['file']}:{row['first']['line']}"))
        con.print(u)
