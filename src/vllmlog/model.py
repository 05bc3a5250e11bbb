"""Core data types shared by every layer: the parsed ``Event``.

Conventions (vLLM's own): durations in seconds (float, field names end in ``_s``), ratios 0..1
(KV-cache usage, hit rates), throughputs in tokens/s, token counts as ints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: Levels in increasing order of severity, as vLLM/Python logging prints them.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclass(slots=True)
class Event:
    """One logical log record: a single line, or a multi-line record (traceback, banner) grouped."""

    file: str
    """Path of the input as given (``-`` for stdin)."""
    line: int
    """1-based number of the first physical line (counted as ``wc -l`` counts)."""
    line_end: int
    """1-based number of the last physical line of the record (== ``line`` for one-line events)."""
    ts: datetime | None
    """Timestamp (naive local time as vLLM prints it), inherited from the previous line when absent."""
    level: str | None
    """DEBUG/INFO/WARNING/ERROR/CRITICAL or None."""
    process: str | None
    """vLLM/Ray process tag such as ``APIServer pid=31488`` or ``EngineCore_DP0 pid=2500``."""
    source: str | None
    """vLLM's ``file.py:N`` (or the relative path at DEBUG level)."""
    kind: str
    """Stable snake_case event kind (see ``vllmlog kinds``); ``log`` / ``unparsed`` for unknown lines."""
    request_id: str | None = None
    """Request id the record is about, when it names one."""
    fields: dict[str, Any] = field(default_factory=dict)
    """Typed values extracted from the message (numbers as numbers, ratios 0..1, seconds)."""
    text: str = ""
    """The raw line(s), ANSI codes and wrappers removed, joined with ``\\n``."""
    pattern: str | None = None
    """Id of the registry pattern that matched (``v1.stats``), or None."""
    template: str | None = None
    """Masked message template for ``log``/``unparsed`` events (numbers, ids, paths replaced)."""
    ts_inherited: bool = False
    """True when the line carried no timestamp of its own (uvicorn, raw traceback, C++ lines)."""

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape of an event (``vllmlog parse --jsonl``)."""
        return {
            "file": self.file,
            "line": self.line,
            "line_end": self.line_end,
            "ts": self.ts.isoformat() if self.ts is not None else None,
            "level": self.level,
            "process": self.process,
            "source": self.source,
            "kind": self.kind,
            "request_id": self.request_id,
            "fields": self.fields,
            "text": self.text,
        }

    @property
    def message(self) -> str:
        """The first line of the record without any prefix (best effort)."""
        return self.fields.get("_message", self.text.split("\n", 1)[0])
