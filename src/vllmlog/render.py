"""Rich terminal rendering of an ``Analysis`` (formatting only: the numbers come from ``analyze``).

Fits in one screen and in 100 columns: verdict, server runs, the top findings with evidence and
fix, a compact RED/USE table, and where the HTML report went.
"""

from __future__ import annotations

import os
import re
import textwrap
from collections import Counter
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .analyze import Analysis
from .fmt import fmt_number, fmt_seconds
from .redact import DEFAULT as DEFAULT_REDACTOR
from .redact import Redactor

SEV_STYLE = {"critical": "bold white on red", "error": "bold red", "warning": "bold yellow", "info": "cyan"}
VERDICT_STYLE = {"healthy": "bold white on green", "degraded": "bold black on yellow",
                 "failing": "bold white on red", "unknown": "bold white on grey42"}
KEY_ARGS = ("max_num_seqs", "max_model_len", "gpu_memory_utilization", "max_num_batched_tokens",
            "tensor_parallel_size", "num_gpu_blocks_override", "enable_prefix_caching", "swap_space")


_s = fmt_seconds  # 12.34s, 340ms
_n = fmt_number  # 1,234 · 1,234.5 · 45% (pct)


_PREFIX = re.compile(
    r"^(?:\([^)]*\)\s+)?(?:(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+)?\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+"
    r"(?:\[[^\]]*\]|\S+\])\s?")


def _line(text: str, style: str = "", width: int = 98) -> Text:
    t = Text(text.replace("\n", " ⏎ "), style=style, no_wrap=True, overflow="ellipsis")
    t.truncate(width, overflow="ellipsis")
    return t


def _oneline(v: Any) -> str:
    if isinstance(v, list):
        return " · ".join(str(x) for x in v)
    return " ".join(str(v or "").split())


def _para(label: str, text: str, width: int, max_lines: int, style: str = "", indent: str = "  ") -> Text:
    """``label`` + text wrapped to ``width`` with a hanging indent, at most ``max_lines`` lines."""
    lines = textwrap.wrap(text, width=width - 2, initial_indent=indent + label, subsequent_indent="    ",
                          break_on_hyphens=False, break_long_words=True) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: width - 3].rstrip() + " …"
    out = Text("\n".join(lines), style=style)
    if label:
        out.stylize("bold", len(indent), len(indent) + len(label))
    return out


def short_evidence(e: dict[str, Any], rd: Redactor) -> str:
    """``file.log:123  LEVEL message`` without the process tag, timestamp and source prefix."""
    text = rd(str(e.get("text") or "")).split("\n", 1)[0]
    m = _PREFIX.match(text)
    if m:
        text = ((m.group(1) + " ") if m.group(1) and m.group(1) != "INFO" else "") + text[m.end():]
    loc = f"{os.path.basename(str(e['file']))}:{e['line']}" if e.get("file") and e.get("line") else ""
    return f"{rd(loc)}  {text}".strip()


def render_analysis(
    a: Analysis,
    console: Console,
    *,
    redactor: Redactor = DEFAULT_REDACTOR,
    top: int = 5,
    evidence_lines: int = 2,
    report_path: str | None = None,
    report_bytes: int | None = None,
) -> None:
    """Print the analysis: verdict, servers, top findings, RED/USE, report location."""
    rd = redactor
    run = a.run
    width = min(console.width, 100) - 2
    v = a.verdict
    head = Text()
    head.append(f" {v.upper()} ", style=VERDICT_STYLE.get(v, "bold"))
    counts = Counter(f["severity"] for f in a.findings or [])
    if a.findings is None:
        head.append("  diagnosis unavailable", style="yellow")
    elif not a.findings:
        head.append("  no problems found", style="green")
    else:
        head.append("  " + ", ".join(f"{counts[s]} {s}" for s in ("critical", "error", "warning", "info") if counts.get(s)))
    console.print(head)
    where = []
    if run.start_ts and run.end_ts:
        dur = (run.end_ts - run.start_ts).total_seconds()
        where.append(f"{run.start_ts:%Y-%m-%d %H:%M:%S} → {run.end_ts:%Y-%m-%d %H:%M:%S} ({_s(dur)})")
    where.append(f"{run.parse_stats.lines:,} lines")
    names = [os.path.basename(f) for f in run.files]
    where.append(", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else ""))
    console.print(_line(" · ".join(where), "dim", width))
    for s in run.servers[:4]:
        args = {**{k: s.config[k] for k in ("num_gpu_blocks", "kv_cache_tokens") if k in s.config},
                **{k: s.args[k] for k in KEY_ARGS if k in s.args}}
        state = "ready" if s.ready else "never ready"
        txt = (f"server {s.index}: vLLM {s.version or '?'} · {rd(s.model or '?')} · {s.generation or '?'} · {state}"
               + (" · " + " ".join(f"{k}={rd(str(x))}" for k, x in args.items()) if args else ""))
        console.print(_para("", txt, width + 2, 2, "dim" if s.ready else "yellow", indent=""))
    if len(run.servers) > 4:
        console.print(Text(f"… {len(run.servers) - 4} more server runs", style="dim"))

    if a.findings is None:
        console.print(Text(f"diagnosis unavailable: {a.unavailable.get('diagnosis', '')}", style="yellow"))
    for f in a.views()[:top]:
        console.print()
        t = Text()
        t.append(f"{f['severity'].upper():9}", style=SEV_STYLE.get(f["severity"], ""))
        t.append(rd(str(f["title"])), style="bold")
        if f["code"]:
            t.append(f"  [{f['code']}]", style="dim")
        t.truncate(width, overflow="ellipsis")
        console.print(t)
        if f["message"]:
            console.print(_para("", rd(_oneline(f["message"])), width, 2))
        for e in f["evidence"][:evidence_lines]:
            console.print(_line("  │ " + short_evidence(e, rd), "grey62", width))
        if f["fix"]:
            console.print(_para("fix: ", rd(_oneline(f["fix"])), width, 3, "green"))
    rest = a.views()[top:]
    if rest:
        console.print()
        for f in rest[:6]:
            console.print(_line(f"{f['severity'].upper():9}{rd(str(f['title']))}  [{f['code']}]", "dim", width))
        more = len(rest) - 6
        console.print(Text(f"{'… ' + str(more) + ' more; ' if more > 0 else ''}details, evidence and fixes of all "
                           f"{len(a.findings or [])} findings: the report or --json", style="dim"))
    console.print()
    ru = a.red_use
    if not ru["requests"]["total"] and not any((ru["use"].get(k) or {}).get("count") for k in ("running", "kv_cache_usage")):
        console.print(Text("no requests and no engine stats in this log", style="dim"))
    else:
        console.print(red_use_table(a))
    if report_path:
        size = f" ({report_bytes / 1e6:.1f} MB)" if report_bytes else ""
        console.print(Text.assemble(("report: ", "bold"), (report_path, "underline"), (size, "dim"),
                                    ("  — open it in a browser", "dim")))


def red_use_table(a: Analysis) -> Table:
    """Compact RED (rate, errors, durations) / USE (running, waiting, KV, preemptions) table."""
    s = a.red_use
    r, d, u = s["requests"], s["durations"], s["use"]
    t = Table(show_edge=False, box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for col, just in (("requests", "left"), ("", "right"), ("latency", "left"), ("p50", "right"), ("p90", "right"),
                      ("p99", "right"), ("engine", "left"), ("mean", "right"), ("max", "right")):
        t.add_column(col, justify=just, no_wrap=True)
    red = [("total", _n(r["total"])), ("rate/s", f"{r['rate_per_s']:.2f}" if r["rate_per_s"] else "–"),
           ("failed/aborted", _n(r["failed_or_aborted"])), ("HTTP errors", f"{r['http']['errors']:,}/{r['http']['total']:,}")]
    lat = [(lbl, d[m]) for m, lbl in (("queue_s", "queue"), ("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "e2e"))]
    use = []
    for k, lbl, pct in (("running", "running", False), ("waiting", "waiting", False),
                        ("kv_cache_usage", "KV cache", True), ("generation_throughput", "gen tok/s", False)):
        m = u.get(k) or {}
        use.append((lbl, _n(m.get("mean"), pct) if m.get("count") else "–", _n(m.get("max"), pct) if m.get("count") else "–"))
    approx = False
    for i in range(4):
        ld = lat[i][1]
        mark = ""
        if (ld.get("estimated") or 0) > 0.5 and (ld.get("ts_resolution_s") or 0) >= 1:
            mark, approx = "≈", True
        t.add_row(red[i][0], red[i][1], lat[i][0] + mark, _s(ld.get("p50")), _s(ld.get("p90")), _s(ld.get("p99")), *use[i])
    extra = []
    if approx:
        extra.append("≈ estimated from 1-second log timestamps")
    if u.get("preemptions") is not None:
        extra.append(f"preemptions {u['preemptions']:,}")
    if u.get("preempted_requests"):
        extra.append(f"preempted requests {u['preempted_requests']:,}")
    if extra:
        return Group(t, Text("  ".join(extra), style="dim"))  # type: ignore[return-value]
    return t
