"""The compiled fast path of the parser: fast templates → the C scanner's table.

A pattern may declare ``fast=``: the same message as its regex, written as literal text with typed holes
(``"Added request {request_id:id} to waiting queue. Queue size: {queue_size:digits}"``). The C extension
``vllmlog._speedups`` (built at install when a C compiler is present) matches such lines — envelope, template,
next-line check — and writes their JSON lines, byte for byte what the Python path writes: numbers are
converted by the pattern's own Python converters (memoised per distinct raw text), strings are copied. It
handles a subset of what the regex accepts and stops at anything else (control characters, quotes in an
enveloped line, a line the previous one could continue, another month, …); the Python state machine parses
those. ``tests/test_fast_path.py`` checks both paths give identical output on every corpus log and on
random lines. Set ``VLLMLOG_PURE=1`` to run the pure-Python parser.

Hole types (each one is exactly the regex piece in the pattern, same greediness):

=========  ======================  =========================================================
type       regex                   note
=========  ======================  =========================================================
digits     ``\\d+``                ASCII digits (other Unicode digits → Python path)
num        ``[\\d.]+``
numc       ``[\\d,]+``
numcd      ``[\\d.,]+``
id         ``\\S+?``               lazy: must be followed by a literal containing a space
tok        ``\\S+``                greedy: must be followed by a literal starting with a space
word       ``[A-Za-z_]+``
upper      ``[A-Z]+``
sec        ``[\\d.]+\\s*m?s``      (one or more spaces only)
d3         ``\\d{3}``
tail       ``(?: .*)?$``           last hole only; never output
idend      ``\\S+?`` + last literal   lazy up to the template's final literal at the end of the line
w          ``\\w+``                ASCII word characters
rest       ``.*$``                 last hole only; never output
=========  ======================  =========================================================

A hole named ``request_id`` fills the event's request id; names starting with ``_`` are not output.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Callable

import orjson

from .fields import converter, dumps_safe, to_float, to_int, to_ratio, to_seconds, to_str
from .registry import MESSAGES, LinePattern, Registry

try:  # pragma: no cover - depends on the build
    from .. import _speedups
except ImportError:  # no C compiler at install time: pure Python
    _speedups = None  # type: ignore[assignment]

HOLE_TYPES = {"digits": 1, "num": 2, "numc": 3, "numcd": 4, "id": 5, "tok": 6, "word": 7, "upper": 8, "sec": 9, "d3": 10, "tail": 11,
              "idend": 12, "w": 13, "rest": 14}
_NUMERIC = {"digits", "num", "numc", "numcd"}
#: Native twins (in ``_speedups.c``) of patterns' Python ``post`` functions, for the busiest lines.
POSTS = {"received": 1, "generated": 2, "aborted_many": 3}
_HOLE = re.compile(r"\{(\w+):(\w+)\}")
_MEMO_MAX = 1 << 16


class Memo(dict):  # type: ignore[type-arg]
    """raw text → JSON text of ``conv(raw)``; None when orjson cannot write it (the Python path takes the line)."""

    def __init__(self, conv: Callable[[str], Any]) -> None:
        super().__init__()
        self.conv = conv

    def __missing__(self, raw: str) -> str | None:
        try:
            j: str | None = dumps_safe(self.conv(raw)).decode()
        except (TypeError, ValueError, orjson.JSONEncodeError):
            j = None
        if len(self) >= _MEMO_MAX:
            self.clear()
        if j is not None:
            self[raw] = j
        return j


def parse_template(t: str) -> list[tuple[str, str, str]]:
    """``[("lit", text, ""), ("hole", name, type), …]``, always starting with a literal (maybe empty)."""
    parts: list[tuple[str, str, str]] = []
    pos = 0
    for m in _HOLE.finditer(t):
        lit = t[pos:m.start()]
        if lit or not parts:
            parts.append(("lit", lit, ""))
        elif parts[-1][0] == "hole" and m.group(2) not in ("tail", "rest"):
            raise ValueError(f"template {t!r}: two holes side by side")
        if m.group(2) not in HOLE_TYPES:
            raise ValueError(f"template {t!r}: unknown hole type {m.group(2)!r}")
        parts.append(("hole", m.group(1), m.group(2)))
        pos = m.end()
    if t[pos:]:
        parts.append(("lit", t[pos:], ""))
    for i, (k, name, typ) in enumerate(parts):
        if k != "hole":
            continue
        nxt = parts[i + 1] if i + 1 < len(parts) else None
        if typ == "id" and (nxt is None or " " not in nxt[1]):
            raise ValueError(f"template {t!r}: an id hole must be followed by a literal containing a space")
        if typ == "tok" and (nxt is None or not nxt[1].startswith(" ")):
            raise ValueError(f"template {t!r}: a tok hole must be followed by a literal starting with a space")
        if typ in ("tail", "rest") and nxt is not None:
            raise ValueError(f"template {t!r}: {typ} must be last")
        if typ == "idend" and (nxt is None or i + 2 != len(parts)):
            raise ValueError(f"template {t!r}: an idend hole must be followed by the final literal")
        if typ == "w" and nxt is not None and (nxt[1][:1].isalnum() or nxt[1][:1] == "_"):
            raise ValueError(f"template {t!r}: a w hole followed by a word character")
        if typ in _NUMERIC and nxt is not None and nxt[1][:1].isdigit():
            raise ValueError(f"template {t!r}: a number hole followed by a digit")
    return parts


def _entry(p: LinePattern, index: int, src: int) -> tuple[Any, ...]:
    assert p.fast is not None
    parts = parse_template(p.fast)
    if src == 0 and (not parts[0][1] or not parts[0][1].startswith(p.prefix or "\0") or " " not in parts[0][1]):
        raise ValueError(f"{p.id}: the template must start with the pattern's prefix and its first word")
    out = []
    for kind, a, typ in parts:
        if kind == "lit":
            out.append((0, a.encode(), None, 0, 0, None, 0, None, None))
            continue
        name = a
        shown = name != "request_id" and not name.startswith("_")
        conv = (p.fast_conv or {}).get(name, converter(name)) if shown else None
        is_str = shown and (conv is None or conv is to_str)
        memo = Memo(conv) if shown and not is_str else None  # type: ignore[arg-type]
        native = 0
        if shown and typ in ("digits", "numc") and conv is to_int:
            native = 1
        elif shown and typ in ("digits", "num", "numc", "numcd"):
            native = {to_float: 2, to_ratio: 3, to_seconds: 4}.get(conv, 0)  # type: ignore[arg-type]
        elif shown and typ == "sec" and conv is to_seconds:
            native = 4
        out.append((HOLE_TYPES[typ], None, f',"{name}":'.encode() if shown else None, int(name == "request_id"), int(is_str), memo,
                    native, sys.intern(name) if shown else None, conv if shown and not is_str else None))
    kind_json = f',"kind":{orjson.dumps(p.kind).decode()},"request_id":'.encode()
    strict = int(p.id == "handbook.decode_step")
    post = POSTS[p.fast_post] if p.fast_post else 0  # (other templates mirror their post with fast_conv)
    return ("tmpl", index, src, kind_json, post, strict, out, sys.intern(p.kind), p.id)


def build(registry: Registry = MESSAGES, access: LinePattern | None = None) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The scanner's entries (registry dispatch order, guards for patterns without a template) and the kind of
    each template index."""
    entries: list[tuple[Any, ...]] = []
    kinds: list[str] = []
    for cands in registry._by_word.values():
        last = max((i for i, p in enumerate(cands) if p.fast), default=-1)
        for p in cands[: last + 1]:
            if p.fast:
                entries.append(_entry(p, len(kinds), 0))
                kinds.append(p.kind)
            else:
                entries.append(("guard", (p.prefix or "").encode(), p.contains.encode() if p.contains else None))
    if access is not None and access.fast:
        entries.append(_entry(access, len(kinds), 1))
        kinds.append(access.kind)
    return entries, kinds


def _access_pattern() -> LinePattern:
    return next(p for p in MESSAGES.patterns if p.id == "uvicorn.access")


ENTRIES, KINDS = build(MESSAGES, _access_pattern())
AVAILABLE = _speedups is not None and os.environ.get("VLLMLOG_PURE", "").strip().lower() in ("", "0", "false", "no", "off")
TABLE = _speedups.compile(ENTRIES) if _speedups is not None else None
scan = _speedups.scan if AVAILABLE else None


def _count_nl_py(b: bytes) -> int:
    return b.count(b"\n")


count_nl: Callable[[bytes], int] = _speedups.count_nl if _speedups is not None else _count_nl_py
"""Newlines in a bytes block (memchr when compiled: ~4x bytes.count)."""
