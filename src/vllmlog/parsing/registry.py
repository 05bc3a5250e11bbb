"""The line-pattern registry: patterns are data, converters are tiny pure functions.

Every pattern is anchored, uses named groups (named after catalogue fields, see ``fields.py``),
carries real example lines, and is reached through a cheap literal dispatch before any regex runs:
``prefix`` patterns are indexed by the first word of the message, ``contains`` patterns are tried
(literal test first) only when no prefix pattern matched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from .fields import converter

Post = Callable[[dict[str, Any]], None]

SEARCH_LIMIT = 65536
"""Characters of a message an unanchored (``contains``) pattern may scan: what an event keeps of its text
(``parser.MAX_TEXT``), so evidence always shows what matched. Anchored (``prefix``) patterns read the
whole message (a request-logger line's parameters follow its prompt); every pattern is linear in the
text it scans (tests/test_robust_regex.py feeds each a 1 MB adversarial line)."""


@dataclass(slots=True)
class LinePattern:
    """One message shape vLLM (or the handbook, uvicorn, PyTorch) prints."""

    id: str
    """Stable id, e.g. ``v1.engine_stats`` (golden files contain it)."""
    kind: str
    """Event kind it produces."""
    regex: str
    """Anchored regex with named groups; ``request_id`` fills the event's request id."""
    examples: list[str]
    """Real example messages (without the log prefix); a test checks each one matches."""
    prefix: str | None = None
    """Literal the message starts with (dispatch key); None → ``contains`` must be set."""
    contains: str | None = None
    """Literal the message contains (checked before the regex) for patterns with no fixed start."""
    post: Post | None = None
    """Optional converter run on the typed fields dict (may add/remove fields)."""
    doc: str = ""
    """What the line means (shown by ``vllmlog kinds``)."""
    source: str = ""
    """Who prints it: handbook, v0, v1, uvicorn, torch, …"""
    dynamic_fields: bool = False
    """True when ``post`` adds one field per ``Label: value`` pair it finds (names not fixed in advance)."""
    fast: str | None = None
    """Optional template of the same message for the compiled fast path (see ``parsing/fast.py``)."""
    fast_conv: dict[str, Callable[[str], Any]] | None = None
    """Converters the fast path uses instead of the catalogue's (to mirror what ``post`` does)."""
    fast_post: str | None = None
    """Name of the compiled twin of ``post`` (``fast.POSTS``) the fast path runs on the template's last hole."""
    _compiled: re.Pattern[str] | None = field(init=False, repr=False, default=None)
    _groups: list[tuple[int, str, Callable[[str], Any] | None]] = field(init=False, repr=False, default_factory=list)
    _rid: int = field(init=False, repr=False, default=0)

    def __post_init__(self) -> None:
        if not self.prefix:
            self.prefix = None
        if self.prefix is None and self.contains is None:
            raise ValueError(f"pattern {self.id} needs a prefix or a contains literal")

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled regex (compiled on first use: ~300 patterns, most never tried by a given log)."""
        c = self._compiled
        if c is None:
            c = re.compile(self.regex)
            # (group index, field name, converter) once, instead of a catalogue lookup per match
            self._groups = [
                (i, k, converter(k)) for k, i in sorted(c.groupindex.items(), key=lambda kv: kv[1])
                if k != "request_id" and not k.startswith("_")
            ]
            self._rid = c.groupindex.get("request_id", 0)
            self._compiled = c
        return c

    def match(self, msg: str) -> tuple[str | None, dict[str, Any]] | None:
        """Match a message; return ``(request_id, typed fields)`` or None."""
        if self.contains is not None and self.contains not in msg:
            return None
        c = self._compiled or self.compiled
        m = c.match(msg) if self.prefix is not None else c.search(msg, 0, SEARCH_LIMIT)
        if m is None:
            return None
        rid = m.group(self._rid) if self._rid else None
        out: dict[str, Any] = {}
        g = m.groups()
        for i, k, conv in self._groups:
            v = g[i - 1]
            if v is not None:
                out[k] = conv(v) if conv is not None else v
        if self.post is not None:
            self.post(out)
            rid = out.pop("request_id", rid)
        return rid, out


class Registry:
    """An ordered set of patterns with literal dispatch."""

    def __init__(self) -> None:
        self.patterns: list[LinePattern] = []
        self._by_word: dict[str, list[LinePattern]] = {}
        self._contains: list[LinePattern] = []
        self._ids: set[str] = set()

    def add(self, p: LinePattern, before: str | None = None) -> LinePattern:
        """Register a pattern (ids are unique and never reused); ``before``: try it ahead of that pattern id."""
        if p.id in self._ids:
            raise ValueError(f"duplicate pattern id {p.id}")
        self._ids.add(p.id)
        self.patterns.append(p)
        if p.prefix is not None:
            lst = self._by_word.setdefault(_first_word(p.prefix), [])
        else:
            lst = self._contains
        idx = next((i for i, q in enumerate(lst) if q.id == before), None) if before else None
        if idx is None:
            lst.append(p)
        else:
            lst.insert(idx, p)
        return p

    def match(self, msg: str) -> tuple[LinePattern, str | None, dict[str, Any]] | None:
        """Find the first pattern matching a message."""
        cands = self._by_word.get(msg.partition(" ")[0])
        if cands:
            for p in cands:
                if msg.startswith(p.prefix):  # type: ignore[arg-type]
                    r = p.match(msg)
                    if r is not None:
                        return p, r[0], r[1]
        for p in self._contains:
            if p.contains in msg:  # type: ignore[operator]
                r = p.match(msg)
                if r is not None:
                    return p, r[0], r[1]
        return None

    def kinds(self) -> dict[str, list[LinePattern]]:
        """Kind → patterns producing it."""
        out: dict[str, list[LinePattern]] = {}
        for p in self.patterns:
            out.setdefault(p.kind, []).append(p)
        return out


def _first_word(s: str) -> str:
    i = s.find(" ")
    return s if i < 0 else s[:i]


#: Patterns matched against the message part of a line (after the envelope).
MESSAGES = Registry()
#: Patterns matched against whole raw lines that carry no vLLM envelope (C++ NCCL, tqdm, …).
RAW = Registry()
