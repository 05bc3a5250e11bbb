"""`vllmlog summary`, `vllmlog requests`, `vllmlog series`: the morning read, per-request journeys, engine series."""

from __future__ import annotations

import sys
from typing import Any, List, Optional

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from ..errors import ConfigError
from ..export.tables import (
    DECODE_COLUMNS, STATS_COLUMNS, JourneyWriter, dump_journeys, dump_rows, format_of, write_journeys, write_series,
)
from ..journeys import STATUSES, Journey
from ..run import load
from ..summary import SloTargets, summarize_paths
from ._app import app
from .common import (
    ClientOpt, EXIT_HELP_NO_FINDINGS, exit_status, JsonOpt, ShowPromptsOpt, OptInt, OptPaths, OptStr, OutOpt, PathsArg, PathsT, TracesOpt, YearOpt, progress_bar, stderr,
    stdout_console,
)

ByOpt = typer.Option(None, "--by", help="Add a digest per `day` or `hour` (the handbook's morning read).")
SloOpt = typer.Option(None, "--slo", help="SLO target NAME=VALUE (ttft_s=1, tokens_per_s=20, queue_s=30, e2e_s=…); repeatable.")


def _out(text: str, output: str | None) -> None:
    if output and output != "-":
        with open(output, "w", encoding="utf-8") as fp:
            fp.write(text)
    else:
        sys.stdout.write(text)


def _f(v: Any, unit: str = "", digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}{unit}"
    return f"{v}{unit}"


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.1f}%"


@app.command("summary", epilog=EXIT_HELP_NO_FINDINGS)
def summary_cmd(
    logs: PathsT = PathsArg,
    json_out: bool = JsonOpt,
    by: OptStr = ByOpt,
    slo: Optional[List[str]] = SloOpt,
    journeys: OptStr = typer.Option(None, "--journeys", help="Also write every journey, as it completes, to this .csv/.jsonl/.json/.parquet file."),
    top: int = typer.Option(15, "--top", help="How many warning/error templates to list."),
    output: OptStr = OutOpt,
    year: OptInt = YearOpt,
    traces: OptPaths = TracesOpt,
    show_prompts: bool = ShowPromptsOpt,
) -> None:
    """Service summary: runs, RED (rate, errors, latency percentiles), USE (KV cache, queue), SLOs, warnings."""
    targets = SloTargets.parse(slo)
    if by is not None and by not in ("day", "hour"):
        raise ConfigError(f"--by {by!r} is not supported", hint="use --by day or --by hour")
    writer = JourneyWriter(journeys) if journeys else None
    try:
        with progress_bar(logs) as prog:
            doc = summarize_paths(logs, year=year, slo=targets, by=by, top=top, progress=prog, journey_sink=writer,
                                  traces=traces)
    finally:
        if writer is not None:
            writer.close()
    from ..redact import Redactor

    doc = Redactor(show_prompts=show_prompts).value(doc)  # templates, warnings, errors: log text, redacted
    code = exit_status(False, doc["coverage"])
    if json_out:
        _out(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n", output)
    else:
        con = stdout_console()
        if output and output != "-":
            from rich.console import Console

            fp = open(output, "w", encoding="utf-8")  # noqa: SIM115
            con = Console(file=fp, width=100, soft_wrap=False, markup=False)
        _render(con, doc)
        if output and output != "-":
            fp.close()
    if code:
        raise typer.Exit(code)


def _render(con: Any, d: dict[str, Any]) -> None:
    from ..render import para, text_width
    from ..textview import basis_text, latency_cell, preemptions_text, requests_text, unmeasured_lines, waiting_text

    width = text_width(con)
    cov = d.get("coverage") or {}
    if cov and not cov.get("complete", True):
        con.print(para("", cov["headline"], width, "bold yellow", indent="", cont="  "))
        for r in cov["reasons"][1:4]:
            con.print(para("", r, width, "yellow", indent="  "))
    tr = d["time_range"]
    con.print(f"[bold]Time range[/] {escape(str(tr['start']))} → {escape(str(tr['end']))} ({_f(tr['duration_s'], ' s', 0)}), "
              f"{d['lines']:,} lines", markup=True)
    for r in d["runs"]:
        args = ", ".join(f"{k}={v}" for k, v in r["args"].items())
        state = "ready" if r["ready"] else "never ready"
        state += ", shut down" if r["shutdown"] else ""
        what = ", ".join(x for x in (f"vLLM {r['version']}" if r["version"] else "vLLM version not logged",
                                     r["generation"], f"model {r['model']}" if r["model"] else None) if x)
        con.print(para("", f"run {r['index']} of {r['file']}: {what}; {state}" + (f"; {args}" if args else ""),
                       width, indent="  "))
    q = d["requests"]
    con.print()
    con.print(para("", requests_text(q), width, "bold", indent=""))
    est = q["status_sources"].get("estimated", 0)
    if est:
        con.print(para("", f"{est} status(es) estimated: no end line (vLLM logs none for /v1/completions), "
                       "server shut down cleanly without aborting them", width, "dim"))
    for k, v in list(q["by_reason"].items())[:8]:
        con.print(f"  {v} × {k}")
    h = d["http"]
    if h["total"]:
        con.print(para("", "HTTP: " + ", ".join(f"{k} × {v}" for k, v in h["by_status"].items()), width))
    t = Table(title="Latency of successful requests (s)", show_lines=False)
    for c in ("metric", "n", "p50", "p90", "p95", "p99", "mean", "max", "from"):
        t.add_column(c, justify="right" if c not in ("metric", "from") else "left",
                     no_wrap=c != "from", overflow="fold")
    for m, s in d["latency"].items():
        if not s["count"]:
            continue
        mark = " ≈" if s.get("basis") == "estimated" else ""
        t.add_row(m + mark, str(s["count"]), *(latency_cell(s, k) for k in ("p50", "p90", "p95", "p99", "mean", "max")),
                  basis_text(s))
    if t.row_count:
        con.print(t)
    un = unmeasured_lines(d.get("unmeasured") or [], "latency")
    for label, text in un:
        con.print(para(label + ": ", text, width, "yellow", indent="  "))
    if not t.row_count and not un:
        con.print("[dim]  No per-request latencies in these logs.[/]", markup=True)
    tta = d.get("time_to_abort_s") or {}
    if tta.get("count"):
        con.print(para("", f"time to abort ({tta['count']:,} aborted, {tta['basis']}): p50 {latency_cell(tta, 'p50')}, "
                       f"p99 {latency_cell(tta, 'p99')}, max {latency_cell(tta, 'max')}", width, "dim"))
    kv = d["kv_cache_usage"]
    qq = d["queue"]
    con.print()
    con.print(para("KV cache ", f"({kv['source']}): mean {_pct(kv['time_weighted_mean'])}, p95 {_pct(kv['p95'])}, "
                   f"max {_pct(kv['max'])}; above 80 % for {_f(kv['time_above_80_s'], ' s', 0)}, above 95 % for "
                   f"{_f(kv['time_above_95_s'], ' s', 0)}", width, indent=""))
    cap = f" of max-num-seqs {qq['max_num_seqs']}" if qq["max_num_seqs"] else ""
    con.print(para("Queue: ", f"running max {_f(qq['running']['max'], '', 0)}{cap}; {waiting_text(d)}; "
                   f"swapped max {_f(qq['swapped']['max'], '', 0)}; {qq['queue_wait_exceeded']} queue-wait warnings",
                   width, indent=""))
    th = d["throughput"]
    con.print(para("Throughput: ", f"prompt {_f(th['prompt_tokens_per_s']['time_weighted_mean'], ' tok/s', 1)}, "
                   f"generation {_f(th['generation_tokens_per_s']['time_weighted_mean'], ' tok/s', 1)} "
                   f"(max {_f(th['generation_tokens_per_s']['max'], '', 1)})", width, indent=""))
    vers = [r["version"] for r in d["runs"] if r["version"] and r["generation"] == "v1"]
    con.print(para("", preemptions_text(d["preemptions"], vers), width, indent=""))
    for label, text in unmeasured_lines(d.get("unmeasured") or [], "requests"):
        con.print(para(label + ": ", text, width, "yellow", indent=""))
    s = d["slo"]
    tg = s["targets"]

    def slo(name: str) -> str:
        x = s[name]
        return f"{_pct(x['attainment'])} of {x['total']}" + (" (estimated)" if x.get("basis") == "estimated" else "")

    con.print()
    con.print(para("SLO ", f"TTFT < {tg['ttft_s']:g} s: {slo('ttft')}; ≥ {tg['tokens_per_s']:g} tok/s: "
                   f"{slo('generation_speed')}; queue < {tg['queue_s']:g} s: {slo('queue')}; all: {slo('all')}",
                   width, indent=""))
    for title, rows in (("Errors", d["errors"]), ("Warnings", d["warnings"])):
        if not rows:
            continue
        con.print()
        con.print(f"[bold]{escape(title)}[/] (count · kind · template · first → last seen)", markup=True)
        for g in rows:
            span = _span(g["first_seen"], g["last_seen"])
            con.print(para(f"{g['count']:>5} ", f"{g['kind']} · {g['template'][:300]} · {span}", width, indent="",
                           max_lines=3, cont=" " * 8))
    noise = d.get("shutdown_errors") or []
    if noise:
        n = sum(g["count"] for g in noise)
        con.print(para("", f"{n} error line{'s' if n != 1 else ''} after a requested shutdown (not errors of the run): "
                       + "; ".join(f"{g['count']} × {g['template'][:80]}" for g in noise[:3]), width, "dim", indent=""))
    if d.get("buckets"):
        t = Table(title="Digest (requests by arrival; errors/warnings: log lines)", title_justify="left", box=None,
                  show_edge=False, pad_edge=False, padding=(0, 1), header_style="bold")
        for c in ("from", "reqs", "ok", "abort", "err", "TTFT p95", "e2e p95", "KV max", "wait", "errs", "warns"):
            t.add_column(c, no_wrap=c == "from", justify="left" if c == "from" else "right")
        for b in d["buckets"]:
            r = b["requests"]["by_status"]
            lat = b["latency"]
            t.add_row(b["start"][:16].replace("T", " ") if b["end"][11:13] != b["start"][11:13] or b["end"][:10] == b["start"][:10] else b["start"][:10], str(b["requests"]["total"]), str(r["success"]), str(r["aborted"]),
                      str(r["error"] + r["cancelled"]), latency_cell(lat["ttft_s"], "p95"),
                      latency_cell(lat["e2e_s"], "p95"), _pct(b["kv_cache_usage"]["max"]),
                      _f(b["queue"]["waiting"]["max"], "", 0), str(b["error_count"]), str(b["warning_count"]))
        con.print(t)


def _span(first: str | None, last: str | None) -> str:
    if not first:
        return "–"
    f = first.replace("T", " ")[:19]
    if not last or last == first:
        return f
    lt = last.replace("T", " ")[:19]
    return f"{f} → {lt[11:] if lt[:10] == f[:10] else lt}"


def _select(journeys: list[Journey], status: list[str] | None, slowest: int | None, metric: str) -> list[Journey]:
    if status:
        bad = [s for s in status if s not in STATUSES]
        if bad:
            raise ConfigError(f"unknown status {bad[0]!r}", hint="use one of " + ", ".join(STATUSES))
        js = [j for j in journeys if j.status in status]
    else:
        js = list(journeys)
    if slowest:
        js = [j for j in js if getattr(j, metric) is not None]
        js.sort(key=lambda j: getattr(j, metric), reverse=True)
        js = js[:slowest]
    return js


@app.command("requests")
def requests_cmd(
    logs: PathsT = PathsArg,
    json_out: bool = JsonOpt,
    csv_out: bool = typer.Option(False, "--csv", help="CSV output (flat; one <number>_source column per number)."),
    status: Optional[List[str]] = typer.Option(None, "--status", help="Only these statuses (success, aborted, error, cancelled, unfinished); repeatable."),
    slowest: OptInt = typer.Option(None, "--slowest", help="Only the N slowest requests (by --metric)."),
    metric: str = typer.Option("e2e_s", "--metric", help="Number --slowest sorts by: e2e_s, ttft_s, tpot_s, queue_s, prefill_s, decode_s."),
    fmt: OptStr = typer.Option(None, "--format", help="Table format: csv, json, jsonl (to standard output without -o), "
                               "parquet (needs -o); default: from -o's extension."),
    output: OptStr = OutOpt,
    year: OptInt = YearOpt,
    traces: OptPaths = TracesOpt,
    client: OptStr = ClientOpt,
) -> None:
    """One row per request: queue → prefill → first token → finish, with where each number came from."""
    if metric not in ("e2e_s", "ttft_s", "tpot_s", "queue_s", "prefill_s", "decode_s"):
        raise ConfigError(f"--metric {metric!r} is not a journey duration", hint="use e2e_s, ttft_s, tpot_s, queue_s, prefill_s or decode_s")
    with progress_bar(logs) as prog:
        run = load(logs, year=year, progress=prog, traces=traces)
    if client:
        run.add_client(client)  # client_ttft_s / client_e2e_s columns
    js = _select(run.journeys, status, slowest, metric)
    f = _table_format(fmt, json_out, csv_out, output)
    evicted = run.journeys_evicted if run.evicted is not None else 0
    note = (f"{evicted:,} never-finished requests were evicted from memory (the in-flight limit) and are not listed; "
            "they are counted in `summary` and `analyze`") if evicted else ""
    if f is not None:
        if note:
            stderr.print(f"note: {note}", markup=False)  # the table on stdout stays data only
        if output and output != "-":
            if f in ("parquet",) or fmt or not (json_out or csv_out):
                write_journeys(js, output, f)
            else:
                with open(output, "w", encoding="utf-8", newline="") as fp:
                    dump_journeys(js, fp, f)
        else:
            dump_journeys(js, sys.stdout, f)  # parquet: a one-line error (it needs a file)
        return
    con = stdout_console()
    con.print(requests_table(js, con.width))
    from ..render import para, text_width

    con.print(para("", "~ = estimated (1-second log timestamps, counted stream lines, or no end line after a clean "
                   "shutdown)", text_width(con), "dim", indent=""))
    if note:
        con.print(para("", note, text_width(con), "yellow", indent=""))


def _table_format(fmt: str | None, json_out: bool, csv_out: bool, output: str | None) -> str | None:
    """The machine format to write (``--format`` > ``--json``/``--csv`` > ``-o`` file extension), or None
    for the human table. ``--format csv`` without ``-o`` prints CSV."""
    if fmt:
        return format_of(output if output and output != "-" else "x", fmt)
    if json_out or csv_out:
        return "json" if json_out else "csv"
    if output and output != "-":
        return format_of(output)
    if output == "-":
        return "csv"
    return None


#: Columns of the human requests table, least important last (dropped first when the terminal is narrow).
_REQ_COLS = ("request", "status", "arrival", "e2e", "TTFT", "queue", "TPOT", "out", "in", "HTTP")
#: With ``--client``: the client's own e2e/TTFT and the difference (frontend, network, queue before the engine).
_REQ_COLS_CLIENT = ("request", "status", "arrival", "e2e", "client e2e", "Δ e2e", "TTFT", "client TTFT", "Δ TTFT",
                    "queue", "TPOT", "out", "in", "HTTP")


def requests_table(js: list[Journey], width: int) -> Table:
    """The human requests table: ids never wrapped; columns dropped from the least important until it fits."""
    from ..textview import fmt_duration

    days = {j.arrival_ts.date() for j in js if j.arrival_ts}

    def n(j: Journey, name: str) -> str:
        v = getattr(j, name)
        if v is None or (name == "tpot_s" and j.output_tokens is not None and j.output_tokens <= 1):
            return "–"  # vllm bench serve: no TPOT for a one-token output
        est = j.sources.get(name, "") == "estimated"
        mark = "~" if est else ""
        if isinstance(v, float):
            return mark + fmt_duration(v, j.ts_resolution_s if est else None).replace("< ", "<")
        return f"{mark}{v}"

    def signed(v: float | None) -> str:  # client − server: + the client waited longer
        return "–" if v is None else ("+" if v >= 0 else "−") + fmt_duration(abs(v))

    has_client = any(j.client_ttft_s is not None or j.client_e2e_s is not None for j in js)
    rows = []
    for j in js:
        st = j.status + ("~" if j.sources.get("status") == "estimated" else "")
        arr = (j.arrival_ts.strftime("%H:%M:%S") if len(days) <= 1 else j.arrival_ts.strftime("%m-%d %H:%M:%S")) \
            if j.arrival_ts else "–"
        rows.append({"request": j.request_id, "status": st, "arrival": arr, "queue": n(j, "queue_s"),
                     "TTFT": n(j, "ttft_s"), "TPOT": n(j, "tpot_s"), "e2e": n(j, "e2e_s"), "in": n(j, "prompt_tokens"),
                     "out": n(j, "output_tokens"), "HTTP": n(j, "http_status"),
                     "client e2e": fmt_duration(j.client_e2e_s), "Δ e2e": signed(j.client_overhead_e2e_s),
                     "client TTFT": fmt_duration(j.client_ttft_s), "Δ TTFT": signed(j.client_overhead_ttft_s)})
    order = _REQ_COLS_CLIENT if has_client else _REQ_COLS
    cols = list(order)
    need = {c: max([len(c)] + [len(r[c]) for r in rows]) for c in cols}
    while len(cols) > 3 and sum(need[c] + 2 for c in cols) > width:
        cols.pop()
    day = f" on {next(iter(days))}" if len(days) == 1 else ""
    dropped = [c for c in order if c not in cols]
    title = f"{len(js):,} requests{day}" + (f" (narrow terminal: {', '.join(dropped)} left out; --csv has all)" if dropped else "")
    if has_client:
        title += " · client = the load generator's own measurement, Δ = client − server"
    t = Table(title=title, box=None, show_edge=False, pad_edge=False, padding=(0, 1), header_style="bold",
              title_justify="left")
    for c in cols:
        t.add_column(c, no_wrap=True, justify="left" if c in ("request", "status", "arrival") else "right")
    for r in rows:
        t.add_row(*(r[c] for c in cols))
    return t


@app.command("series")
def series_cmd(
    logs: PathsT = PathsArg,
    decode: bool = typer.Option(False, "--decode", help="The per-second decode-step series (batch size, KV usage) instead of stats lines."),
    json_out: bool = JsonOpt,
    csv_out: bool = typer.Option(False, "--csv", help="CSV output."),
    fmt: OptStr = typer.Option(None, "--format", help="Table format for -o: csv, json, jsonl, parquet (default: from the extension)."),
    output: OptStr = OutOpt,
    year: OptInt = YearOpt,
) -> None:
    """Engine time series per engine and server run: running, waiting, swapped, KV usage, throughput."""
    with progress_bar(logs) as prog:
        run = load(logs, year=year, progress=prog)
    f = _table_format(fmt, json_out, csv_out, output) or "csv"
    if output and output != "-" and (fmt or not (json_out or csv_out)):
        write_series(run.series, output, f, decode=decode)
        return
    rows = run.series.decode_rows() if decode else run.series.stats_rows()
    cols = DECODE_COLUMNS if decode else STATS_COLUMNS
    if output and output != "-":
        with open(output, "w", encoding="utf-8", newline="") as fp:
            dump_rows(rows, cols, fp, f)
    else:
        dump_rows(rows, cols, sys.stdout, f)
