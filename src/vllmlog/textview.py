"""Plain-text pieces every renderer shares: durations at their resolution, plurals, middle elision,
hanging-indent paragraphs, and the sentences that state the shared numbers (``vllmlog.numbers``).

No Rich here and no logic beyond wording: the terminal (``render``, the CLI), the HTML report and
``diagnose`` print the same words for the same numbers.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from .fmt import fmt_number, fmt_seconds

ELLIPSIS = "…"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 finding``, ``2 findings``, ``1,234 requests`` (``many`` for irregular plurals)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def fmt_duration(v: float | None, resolution_s: float | None = None, sep: str = "") -> str:
    """A duration; below the timestamp resolution it was measured at, ``< 1 s`` (never ``0.0 ms``)."""
    if v is None:
        return "–"
    if resolution_s and v < resolution_s:
        return f"< {resolution_text(resolution_s)}"
    return fmt_seconds(v, sep=sep)


def span_text(v: float | None) -> str:
    """A length of time for people: ``850 ms``, ``27 s``, ``4.5 s``, ``12 min 5 s``, ``3 h 4 min``."""
    if v is None:
        return "–"
    if v < 1:
        return f"{v * 1000:.0f} ms"
    if v < 10:
        return f"{v:.1f} s".replace(".0 s", " s")
    if v < 60:
        return f"{v:.0f} s"
    m, sec = divmod(round(v), 60)
    if m < 60:
        return f"{m} min {sec} s" if sec else f"{m} min"
    h, m = divmod(m, 60)
    return f"{h} h {m} min" if m else f"{h} h"


def resolution_text(r: float) -> str:
    """A timestamp resolution: ``1 s``, ``1 ms``."""
    return f"{r:g} s" if r >= 1 else f"{r * 1000:g} ms"


def elide_middle(text: str, width: int, min_head: int = 12) -> str:
    """``text`` in at most ``width`` characters, cutting from the middle (`` … ``), never the end:
    the end of a vLLM line carries its numbers (``… Running: 7 reqs, Waiting: 9 reqs, KV cache usage:
    100.0%``). Cuts fall on ``, `` or spaces when one is near."""
    if len(text) <= width:
        return text
    if width <= 3:
        return text[:width]
    room = width - 3  # " … "
    head_n = max(min(min_head, room // 2), room // 4)
    tail_n = room - head_n
    head = text[:head_n]
    sp = head.rfind(" ")
    if sp >= head_n * 2 // 3:
        head = head[:sp]
    tail = text[len(text) - tail_n:]
    for sepr in (", ", " "):
        i = tail.find(sepr)
        if 0 <= i <= tail_n // 3:
            tail = tail[i + len(sepr):]
            break
    return f"{head.rstrip()} {ELLIPSIS} {tail.lstrip()}"


def hanging(text: str, width: int | None, first: str = "", indent: str = "    ", max_lines: int | None = None) -> list[str]:
    """``first`` + ``text`` wrapped to ``width`` with a hanging ``indent``; ``width=None``: one line (piped
    output is never hard-wrapped). With ``max_lines`` the middle of an over-long text is elided so
    its end still shows."""
    text = " ".join(text.split())
    if width is None:
        return [first + text]
    avail = max(20, width)
    lines = textwrap.wrap(text, width=avail, initial_indent=first, subsequent_indent=indent,
                          break_on_hyphens=False, break_long_words=True) or [first.rstrip()]
    if max_lines is not None and len(lines) > max_lines:
        # room for the text in max_lines lines, then wrap the elided text again
        budget = (avail - len(first)) + (max_lines - 1) * (avail - len(indent)) - 8 * max_lines
        lines = textwrap.wrap(elide_middle(text, max(budget, 10)), width=avail, initial_indent=first,
                              subsequent_indent=indent, break_on_hyphens=False, break_long_words=True)
        while len(lines) > max_lines:  # wrapping at word boundaries can lose a few characters of room
            budget -= 10
            lines = textwrap.wrap(elide_middle(text, max(budget, 10)), width=avail, initial_indent=first,
                                  subsequent_indent=indent, break_on_hyphens=False, break_long_words=True)
    return lines


# ----------------------------------------------------------------------------- the shared numbers, in words
def rate_text(req: dict[str, Any]) -> str:
    """``8.89/s (240 arrivals in 27 s)`` — the arrival rate and the window it was measured over."""
    r = req.get("rate") or {}
    if req.get("rate_per_s") is None:
        return "rate – (fewer than two arrivals)" if req.get("total") else "rate –"
    w = r.get("window_s")
    return f"{req['rate_per_s']:.2f}/s" + (f" ({r.get('arrivals', req['total']):,} arrivals in {span_text(w)})" if w else "")


def ratio_text(n: int, of: int) -> str:
    """``12.5% (1 of 8)``."""
    return "–" if not of else f"{n / of * 100:.1f}% ({n:,} of {of:,})"


def requests_text(req: dict[str, Any]) -> str:
    """One line: total, rate, outcomes, error and abort ratios over the finished requests."""
    tot = req["total"]
    if not tot:
        return "0 requests"
    st = ", ".join(f"{v:,} {k}" for k, v in req["by_status"].items() if v)
    fin = req["finished"]
    ev = evicted_text(req)
    return (f"{plural(tot, 'request')} · {rate_text(req)} · {st} · errors {ratio_text(req['failed'], fin)}"
            f" · aborts {ratio_text(req['aborted'], fin)} of finished" + (f" · {ev}" if ev else ""))


def evicted_text(req: dict[str, Any]) -> str:
    """``1,000 requests never finished; 900 evicted from memory, their timings are not in the percentiles``
    — or '' when the in-flight bound evicted none (every output says so when it did)."""
    ev = req.get("evicted") or 0
    if not ev:
        return ""
    unf = (req.get("by_status") or {}).get("unfinished", req.get("unfinished", 0)) or 0
    return (f"{plural(unf, 'request')} never finished; {ev:,} evicted from memory (the in-flight limit), "
            "their timings are not in the percentiles")


def preemptions_text(pre: dict[str, Any], versions: list[str] | None = None) -> str:
    """``Preemptions: 45 (V0 cumulative counter)`` or, when the log cannot tell, what it shows instead."""
    silent = pre.get("silent") or {}
    if pre["total"] is None:
        rel = f"vLLM {', '.join(sorted(set(versions)))}" if versions else "this vLLM release"
        s = f"Preemptions: not logged ({rel} prints no preemption count)"
        if silent.get("inferred"):
            s += f"; silent preemption inferred in {plural(silent['intervals'], 'stats interval')}"
            if silent.get("first_ts"):
                a, b = silent["first_ts"][11:19], silent["last_ts"][11:19]
                s += f" ({a}–{b})" if a != b else f" ({a})"
            s += ": Running fell while Waiting > 0 at a full KV cache"
        return s + "; exact count: vllm:num_preemptions_total (--prometheus URL)"
    src = {"requests": "per-request lines", "v0_cumulative": "V0 cumulative counter", "warning_lines": "warning lines",
           "stats": "stats lines"}.get(pre.get("source") or "", "")
    s = f"Preemptions: {pre['total']:,}" + (f" ({src})" if src and pre["total"] else "")
    if pre.get("requests_preempted"):
        s += f", {plural(pre['requests_preempted'], 'request')} preempted"
    if silent.get("inferred"):
        s += f"; silent preemption also inferred in {plural(silent['intervals'], 'stats interval')}"
    return s


def waiting_text(n: dict[str, Any]) -> str:
    """``Waiting > 0 for 20 s of 64 s observed (max 11)``."""
    w = n["waiting"]
    if not w.get("observed_s"):
        return "Waiting: not logged"
    if not w.get("time_above_0_s"):
        return f"Waiting never > 0 ({span_text(w['observed_s'])} observed)"
    mx = w["max"]
    out = (f"Waiting > 0 for {span_text(w['time_above_0_s'])} of {span_text(w['observed_s'])} observed "
           f"(max {int(mx) if mx is not None and float(mx).is_integer() else fmt_number(mx)}")
    if w.get("first_ts") and w.get("span_s") and w["span_s"] > (w["time_above_0_s"] or 0) * 1.5:
        out += f"; between {w['first_ts'][11:19]} and {w['last_ts'][11:19]}"
    if w.get("stats_gaps"):
        g = w["stats_gaps"]
        out += (f"; a {span_text(w['unobserved_s'])} gap" if g == 1 else
                f"; {g} gaps ({span_text(w['unobserved_s'])} in all)") + " without stats lines, not counted"
    return out + ")"


def latency_cell(d: dict[str, Any], key: str) -> str:
    """One percentile of a latency block, at its resolution (``< 1 s`` below a 1-second estimate)."""
    return fmt_duration(d.get(key), d.get("resolution_s") if d.get("basis") == "estimated" else None)


def basis_text(d: dict[str, Any]) -> str:
    """Where a latency block's values came from: ``logged 4``, ``estimated 17 (1-s timestamps)``, and
    what was left out."""
    if not d.get("count"):
        return ""
    src = ", ".join(f"{k} {v:,}" for k, v in (d.get("sources") or {}).items())
    if d.get("basis") == "estimated":
        src = src or f"estimated {d['count']:,}"
        if d.get("resolution_s"):
            src += f" ({resolution_text(d['resolution_s']).replace(' ', '-')} timestamps)"
    ex = d.get("excluded") or {}
    if ex.get("estimated"):
        src += f"; {ex['estimated']:,} estimated left out"
    return src


def unmeasured_lines(items: list[dict[str, Any]], what: str | tuple[str, ...] | None = None) -> list[tuple[str, str]]:
    """``(label, text)`` pairs saying what the log could not tell and how to get it (``what`` filters)."""
    out = []
    whats = (what,) if isinstance(what, str) else what
    for u in items:
        if whats is not None and u["what"] not in whats:
            continue
        label = {"latency": "latency not measured", "requests": "requests not logged",
                 "preemptions": "preemptions not logged"}.get(u["what"], u["what"])
        out.append((label, f"{u['why']}. To get it: {u['remedy']}."))
        h = u.get("hint")
        if h:
            out.append(("the log says", f"{_strip_prefix(h['text'])} ({h['file'].rsplit('/', 1)[-1]}:{h['line']})"))
    return out


_PREFIX = re.compile(
    r"^(?:\([^)]*\)\s+)?(?:(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+)?\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+"
    r"(?:\[[^\]]*\]|\S+\])\s?")


def _strip_prefix(text: str) -> str:
    m = _PREFIX.match(text)
    return text[m.end():] if m else text


def strip_envelope(text: str) -> str:
    """A vLLM line without its process tag, timestamp and ``[file.py:N]`` (the level is kept unless INFO)."""
    m = _PREFIX.match(text)
    if not m:
        return text
    return ((m.group(1) + " ") if m.group(1) and m.group(1) != "INFO" else "") + text[m.end():]
