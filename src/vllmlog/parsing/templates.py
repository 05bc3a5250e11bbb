"""Masking as data (Drain3-style): ``(regex, placeholder)`` pairs turn a message into a template,
so lines we do not recognise are grouped and the report can show which new messages appeared."""

from __future__ import annotations

import re
from functools import lru_cache

MASKS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:cmpl|chatcmpl|chat|req|embd|resp|client|batch)[-_][\w.-]+"), "<ID>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<UUID>"),
    (re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"), "<IP>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.@+~-]+){2,}/?"), "<PATH>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<HEX>"),
    (re.compile(r"\b[0-9a-fA-F]*\d[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\b|\b[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\d[0-9a-fA-F]*\b"), "<HEX>"),
    (re.compile(r"(?<![\w<])[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?"), "<NUM>"),
]

_MAX = 400


@lru_cache(maxsize=8192)  # a log repeats a few hundred messages: the masks run once per distinct message
def template(message: str) -> str:
    """Mask ids, hex, IPs, paths and numbers in a message (truncated to a sane length)."""
    t = message[:_MAX]
    for rx, repl in MASKS:
        t = rx.sub(repl, t)
    return t.strip()
