"""`vllmlog diagnose`, `rules`, `rule CODE`, `timeline`: findings with evidence, the rule catalogue, the
incident story. Exit codes of `diagnose`: 0 nothing at or above --fail-on, 1 something is, 2 usage/input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import orjson
import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..errors import ConfigError
from ._app import app
from .common import (
    EXIT_HELP, exit_status,
    JsonOpt, OptInt, OptPaths, OptStr, PathsArg, PathsT, PrometheusOpt, ShowPromptsOpt, SinceOpt, TracesOpt, YearOpt,
    merge_prometheus_opt, progress_bar, stdout_console,
)

ConfigOpt = typer.Option(None, "--config", "-c", help="TOML file with thresholds ([thresholds], [rules.CODE]).")
_STYLE = {"critical": "bold white on red", "error": "bold red", "warning": "yellow", "info": "cyan"}


def _load(logs: list[str], year: Optional[int], traces: Optional[list[str]] = None):
    from ..run import load

    with progress_bar(logs) as prog:
        return load(logs, year=year, progress=prog, traces=traces)


def _dump(obj: object) -> None:
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")


@app.command("diagnose", epilog=EXIT_HELP)
def diagnose_cmd(
    logs: PathsT = PathsArg,
    json_out: bool = JsonOpt,
    fail_on: str = typer.Option("warning", "--fail-on", help="Exit 1 when a finding is at or above this severity "
                                "(critical, error, warning, info); 'never' always exits 0."),
    config: OptStr = ConfigOpt,
    year: OptInt = YearOpt,
    min_severity: str = typer.Option("info", "--min-severity", help="Hide findings below this severity (human output)."),
    traces: OptPaths = TracesOpt,
) -> None:
    """Diagnose vLLM logs: what broke, the lines that show it, the root cause and the flag that fixes it."""
    from ..diagnose import at_or_above, run_diagnosis, summarize
    from ..rules import Severity, load_config

    try:
        threshold = None if fail_on.lower() == "never" else Severity.parse(fail_on)
        floor = Severity.parse(min_severity)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    cfg = load_config(config)
    run = _load(logs, year, traces)
    d = run_diagnosis(run, cfg)
    findings = d.findings
    from ..numbers import compute

    numbers = compute(run)
    coverage = run.coverage
    summ = summarize(findings, run)
    if not coverage.complete and summ["verdict"] == "healthy":
        summ["verdict"] = "incomplete"  # never healthy on input that was not read in full
    if json_out:
        _dump({"incidents": [i.to_dict() for i in d.incidents], "findings": [f.to_dict() for f in findings],
               "verdict": d.verdict.to_dict(), "summary": summ, "coverage": coverage.to_dict(), "numbers": numbers})
    else:
        _render_incidents(d, summ, floor, numbers, coverage)
    code = exit_status(threshold is not None and bool(at_or_above(findings, threshold)), coverage)
    if code:
        raise typer.Exit(code)


def _render_incidents(d, summary, floor, numbers=None, coverage=None) -> None:
    """The verdict, then each incident (what clients felt, its cause, evidence, the whole fix), then the notes."""
    from ..analyze import finding_dict, finding_view
    from ..redact import DEFAULT
    from ..render import finding_block, incident_block, para, text_width
    from ..textview import requests_text

    con = stdout_console()
    width = text_width(con)
    files = summary.get("files") or []
    v = d.verdict
    style = {"down": "bold red", "failing": "red", "degraded": "yellow", "healthy": "green", "incomplete": "bold"}
    open_ = [i for i in d.incidents if i.severity >= floor and i.severity >= 1]
    con.print(Text.assemble(("verdict: ", "bold"), (v.label, style.get(v.status, "bold")),
                            f"  ({len(open_)} incident{'s' if len(open_) != 1 else ''}, {len(d.findings)} finding"
                            f"{'s' if len(d.findings) != 1 else ''}; {len(files)} file{'s' if len(files) != 1 else ''})"))
    if coverage is not None and not coverage.complete:
        con.print(para("", coverage.headline(), width, "bold yellow", indent="", cont="  "))
    if numbers is not None and numbers["requests"]["total"]:
        con.print(para("", requests_text(numbers["requests"]), width, "dim", indent=""))
    if v.reason and not open_:
        con.print(para("", v.reason, width, "dim", indent="  "))
    for inc in open_:
        con.print()
        idict = inc.to_dict()
        cause = finding_view(finding_dict(inc.cause.to_dict())) | {"code": inc.cause.code} if inc.cause else None
        for t in incident_block(idict, cause, DEFAULT, width, evidence_lines=8):
            con.print(t)
    notes = [f for f in d.findings if f.incident is None and f.severity >= floor]
    if notes:
        con.print()
        con.print(Text("notes (outside any incident):", style="bold dim"))
        for f in notes:
            for t in finding_block(finding_view(finding_dict(f.to_dict())), DEFAULT, width, 1):
                con.print(t)
    if not open_ and not notes:
        con.print("[green]No problems found.[/]" if not d.findings else f"[green]Nothing at or above {floor.label}.[/]",
                  markup=True)
    if not open_ and v.checks:
        con.print()
        for c in v.checks:
            mark = {"passed": "[green]✔[/]", "failed": "[red]✘[/]"}.get(c.status, "[dim]·[/]")
            con.print(f"  {mark} {escape(c.name)}: [dim]{escape(c.detail)}[/]", markup=True)


def _render(findings, summary, floor, numbers=None, coverage=None) -> None:
    """The findings alone (the view before incidents; kept for library callers)."""
    from ..render import para, text_width
    from ..textview import plural, requests_text

    con = stdout_console()
    width = text_width(con)
    files = summary.get("files") or []
    verdict = summary["verdict"]
    style = {"down": "bold red", "failing": "red", "degraded": "yellow", "healthy": "green",
             "incomplete": "bold yellow"}.get(verdict, "bold")
    counts = ", ".join(f"{n} {k}" for k, n in summary["by_severity"].items() if n)
    con.print(Text.assemble(("verdict: ", "bold"), (verdict, style),
                            f"  ({counts or 'no findings'}; {plural(len(files), 'file')})"))
    if coverage is not None and not coverage.complete:
        con.print(para("", coverage.headline(), width, "bold yellow", indent="", cont="  "))
    if numbers is not None and numbers["requests"]["total"]:
        con.print(para("", requests_text(numbers["requests"]), width, "dim", indent=""))
    shown = [f for f in findings if f.severity >= floor]
    if not shown:
        done = coverage is None or coverage.complete
        con.print(("[green]No problems found.[/]" if done else "[yellow]No problems found in what was read.[/]")
                  if not findings else f"[green]Nothing at or above {floor.label}.[/]", markup=True)
        return
    multi = len(files) > 1
    for f in shown:
        sev = f.severity.label
        con.print()
        head = Text.assemble((f" {sev.upper()} ", _STYLE[sev]), " ", (f.code, "bold"), f" {f.category}  ", (f.title, "bold"))
        con.print(head)
        where = []
        if multi and f.file:
            where.append(Path(f.file).name)
        if f.process:
            where.append(f.process)
        if f.first_seen:
            span = f.first_seen.strftime("%m-%d %H:%M:%S")
            if f.last_seen and f.last_seen != f.first_seen:
                span += f" → {f.last_seen.strftime('%H:%M:%S')}"
            where.append(span)
        if f.count > 1:
            where.append(f"×{f.count}")
        if where:
            con.print(f"  [dim]{escape(' · '.join(where))}[/]")
        con.print(para("", f.message, width, indent="  "))
        for e in f.evidence[:8]:
            loc = f"{Path(e.file).name}:{e.line}" if multi else f"{e.line:>6}"
            # the middle of a long line is elided, never its end (where vLLM puts the numbers)
            con.print(para(f"{loc} ", e.text.strip(), width, "dim" if not e.text else "", indent="  ",
                           max_lines=2, cont="  " + " " * (len(loc) + 1)))
        if len(f.evidence) > 8:
            con.print(f"  [dim]… {len(f.evidence) - 8} more evidence lines (--json)[/]")
        if f.root_cause:
            con.print(para("cause: ", f.root_cause, width, indent="  "))
        if f.remediation:
            con.print(para("fix: ", f.remediation, width, "green", indent="  "))  # the whole fix, never cut


@app.command("rules")
def rules_cmd(
    json_out: bool = JsonOpt,
    markdown: bool = typer.Option(False, "--markdown", help="Write the rule reference as Markdown (docs are generated from it)."),
) -> None:
    """List the diagnosis rules: code, slug, category, default severity, thresholds."""
    from ..rules import all_rules

    rules = all_rules()
    if markdown:
        out = ["# Diagnosis rules", "", "Generated by `vllmlog rules --markdown` from the rules' docstrings.", "",
               "| code | slug | category | severity | title |", "|---|---|---|---|---|"]
        out += [f"| {r.code} | `{r.slug}` | {r.category} | {r.severity.label} | {r.title} |" for r in rules]
        for r in rules:
            out += ["", f"## {r.code} `{r.slug}` — {r.title}", "",
                    f"Category `{r.category}`, default severity `{r.severity.label}`.", ""]
            out += [line.replace("## ", "### ", 1) if line.startswith("## ") else line for line in r.doc().splitlines()]
            if r.options:
                out += ["", "Options (`[rules." + r.code + "]` in `--config`): "
                        + ", ".join(f"`{k} = {v!r}`" for k, v in r.options.items())]
        sys.stdout.write("\n".join(out) + "\n")
        return
    if json_out:
        _dump([{"code": r.code, "slug": r.slug, "category": r.category, "severity": r.severity.label, "title": r.title,
                "options": r.options, "default_on": r.default_on, "what": r.section("What it detects")} for r in rules])
        return
    con = stdout_console()
    wide = con.width >= 120  # the category column only where the title still fits beside it
    t = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 1), header_style="bold",
              caption=None if wide else "categories: --json or `vllmlog rule CODE`", caption_justify="left")
    for c in ("code", "slug") + (("category",) if wide else ()) + ("severity",):
        t.add_column(c, no_wrap=True)
    t.add_column("title", ratio=1)  # wraps (under itself) rather than pushing the code column out
    for r in rules:
        t.add_row(r.code, r.slug, *((r.category,) if wide else ()), r.severity.label, r.title)
    con.print(t)


@app.command("rule")
def rule_cmd(code: str = typer.Argument(..., help="Rule code (K202) or slug (kv-cache-pressure)."), json_out: bool = JsonOpt) -> None:
    """Explain one rule: what it detects, why it matters, how to fix, its thresholds."""
    from ..errors import ConfigError
    from ..rules import get_rule

    try:
        r = get_rule(code)
    except ConfigError:
        if _metric_check(code, json_out):  # M1xx: checks `vllmlog scrape` applies to /metrics
            return
        raise
    if json_out:
        _dump({"code": r.code, "slug": r.slug, "category": r.category, "severity": r.severity.label, "title": r.title,
               "options": r.options, "doc": r.doc()})
        return
    con = stdout_console()
    con.print(Text.assemble((r.code, "bold"), f"  {r.slug}  ", (r.category, "cyan"), f"  default severity {r.severity.label}"))
    con.print(Text(r.title, style="bold"))
    con.print()
    con.print(escape(r.doc()))
    if r.options:
        con.print()
        con.print("[bold]Options[/] " + escape(f"(set in --config under [rules.{r.code}]):"), markup=True)
        for k, v in r.options.items():
            con.print(f"  {k} = {v!r}")


def _metric_check(code: str, json_out: bool) -> bool:
    """Explain a /metrics check (``M1xx``, used by `vllmlog scrape` and the generated alert rules)."""
    from ..prommetrics.judge import CHECKS

    key = code.strip()
    chk = CHECKS.get(key.upper()) or next((c for c in CHECKS.values() if c.slug == key.lower()), None)
    if chk is None:
        return False
    if json_out:
        _dump({"code": chk.code, "slug": chk.slug, "category": chk.category, "severity": chk.severity,
               "source": "metrics", "doc": chk.doc})
        return True
    con = stdout_console()
    con.print(Text.assemble((chk.code, "bold"), f"  {chk.slug}  ", (chk.category, "cyan"),
                            f"  default severity {chk.severity}  (a /metrics check: `vllmlog scrape`)"))
    con.print()
    con.print(escape(chk.doc))
    return True


@app.command("timeline")
def timeline_cmd(
    logs: PathsT = PathsArg,
    around: OptStr = typer.Option(None, "--around", help="Centre on this time (HH:MM:SS, 'MM-DD HH:MM:SS' or ISO)."),
    finding: OptStr = typer.Option(None, "--finding", help="Centre on an incident (its id, I1) or the first occurrence of a finding (code or category)."),
    window: str = typer.Option("10m", "--window", help="Width of the window around --around/--finding (90s, 10m, 1h)."),
    json_out: bool = JsonOpt,
    config: OptStr = ConfigOpt,
    year: OptInt = YearOpt,
    all_entries: bool = typer.Option(False, "--all", help="Also show info-level entries (lifecycle details, metric notes)."),
    prometheus: OptStr = PrometheusOpt,
    since: OptStr = SinceOpt,
    traces: OptPaths = TracesOpt,
    show_prompts: bool = ShowPromptsOpt,
) -> None:
    """The incident story: incidents opening and ending, lifecycle, warnings/errors, metric turning points and
    findings, in order."""
    from ..diagnose import run_diagnosis
    from ..rules import load_config
    from ..timeline import around_finding, build_timeline, parse_window

    cfg = load_config(config)
    win = parse_window(window)
    run = _load(logs, year, traces)
    merge_prometheus_opt(run, prometheus, since)
    dg = run_diagnosis(run, cfg)
    findings = list(dg.findings)
    centre = around
    if finding:
        centre = around_finding(findings, finding, dg.incidents)
    entries = build_timeline(run, findings, around=centre, window=win if centre is not None else None,
                             incidents=dg.incidents)
    from ..redact import Redactor

    rd = Redactor(show_prompts=show_prompts)
    if json_out:
        _dump({"entries": [rd.value(e.to_dict()) for e in entries], "around": str(centre) if centre else None,
               "window_s": win.total_seconds() if centre is not None else None})
        return
    con = stdout_console()
    multi = len(run.files) > 1
    if not entries:
        con.print("[dim]No timeline entries in this window.[/]", markup=True)
    for e in entries:
        if not all_entries and e.kind == "warning" and e.severity == "info":
            continue
        ts = e.ts.strftime("%m-%d %H:%M:%S") if e.ts else "--"
        style = {"incident": "bold magenta", "finding": "bold", "error": "red", "warning": "yellow", "metric": "cyan", "lifecycle": "green"}.get(e.kind, "")
        if e.kind in ("finding", "incident"):
            style = _STYLE.get(e.severity or "info", "bold")
        loc = (f"{Path(e.file).name}:" if multi else "") + str(e.line)
        con.print(Text.assemble((ts, "dim"), " ", (f"{e.kind:<9}", style), " ", rd(e.text)[:220], (f"  [{loc}]", "dim")),
                  overflow="ellipsis", no_wrap=True)
