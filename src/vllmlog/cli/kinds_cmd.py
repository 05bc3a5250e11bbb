"""`vllmlog kinds`: every event kind, its patterns and fields — generated from the pattern registry."""

from __future__ import annotations

import sys

import orjson
import typer
from rich.table import Table

from ..errors import InputError
from ._app import app
from .common import JsonOpt, stdout_console


@app.command("kinds")
def kinds_cmd(
    kind: str = typer.Argument(None, help="Show one kind in detail (patterns, regexes, examples)."),
    json_out: bool = JsonOpt,
    markdown: bool = typer.Option(False, "--markdown", help="Print the generated docs/kinds.md."),
) -> None:
    """List every event kind `vllmlog parse` produces, with its fields (type, unit, meaning) and an example line."""
    from ..parsing.catalog import catalog, markdown as to_markdown

    if markdown:
        sys.stdout.write(to_markdown())
        return
    cat = catalog()
    if kind:
        cat = [k for k in cat if k["kind"] == kind]
        if not cat:
            raise InputError(f"unknown kind {kind!r}", hint="run `vllmlog kinds` for the list")
    if json_out:
        sys.stdout.write(orjson.dumps(cat, option=orjson.OPT_INDENT_2).decode() + "\n")
        return
    con = stdout_console()
    if kind:
        k = cat[0]
        con.print(f"[bold]{k['kind']}[/] — {k['doc']}", markup=True, highlight=False)
        for f in k["fields"]:
            con.print(f"  {f['name']}: {f['type']}{' (' + f['unit'] + ')' if f['unit'] else ''} — {f['meaning']}", markup=False, highlight=False)
        for p in k["patterns"]:
            con.print(f"\npattern {p['id']} ({p['source']})", markup=False, highlight=False)
            con.print(f"  regex:   {p['regex']}", markup=False, highlight=False)
            con.print(f"  example: {p['example']}", markup=False, highlight=False)
        return
    t = Table(show_edge=False, title=f"{len(cat)} event kinds")
    t.add_column("kind")
    t.add_column("fields", overflow="fold")
    t.add_column("meaning", overflow="fold")
    for k in cat:
        fields = ", ".join(f["name"] for f in k["fields"]) + (", …" if k["dynamic_fields"] else "")
        t.add_row(k["kind"], fields, k["doc"])
    con.print(t)
