"""Per-request journeys: queue → prefill → decode → finish.  (Minimal first version; see issue 3.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .model import Event


@dataclass(slots=True)
class Journey:
    """One request's path through the server, with where each number came from."""

    request_id: str
    file: str
    server: int = 0
    status: str = "unfinished"
    reason: str | None = None
    arrival_ts: datetime | None = None
    scheduled_ts: datetime | None = None
    first_token_ts: datetime | None = None
    finish_ts: datetime | None = None
    queue_s: float | None = None
    prefill_s: float | None = None
    ttft_s: float | None = None
    decode_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    preemptions: int = 0
    http_status: int | None = None
    first_line: int = 0
    last_line: int = 0
    sources: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (``vllmlog requests --json``)."""
        out: dict[str, Any] = {}
        for k in self.__slots__:  # type: ignore[attr-defined]
            v = getattr(self, k)
            out[k] = v.isoformat() if isinstance(v, datetime) else v
        return out


class JourneyBuilder:
    """Builds journeys incrementally from events."""

    def __init__(self) -> None:
        self.open: dict[str, Journey] = {}
        self.done: list[Journey] = []
        self.server = 0

    def new_server(self, file: str) -> None:
        """A server restart: in-flight journeys of the old run end as unfinished."""
        self.done.extend(self.open.values())
        self.open.clear()
        self.server += 1

    def add(self, e: Event) -> None:
        """Fold one request-related event in."""
        rid = e.request_id
        if rid is None:
            return
        j = self.open.get(rid)
        if j is None:
            j = Journey(rid, e.file, self.server, first_line=e.line)
            j.arrival_ts = e.ts
            self.open[rid] = j
        j.last_line = e.line_end
        k = e.kind
        f = e.fields
        if k == "request_finished":
            j.status = f.get("status") or "success"
            j.reason = f.get("reason")
            j.finish_ts = e.ts
            for name in ("ttft_s", "tpot_s", "e2e_s"):
                if f.get(name) is not None:
                    setattr(j, name, f[name])
                    j.sources[name] = "logged"
            self.done.append(self.open.pop(rid))
        elif k in ("request_aborted", "request_failed"):
            j.status = f.get("status") or "aborted"
            j.reason = f.get("reason")
            j.finish_ts = e.ts
            self.done.append(self.open.pop(rid))

    def finish(self) -> list[Journey]:
        """End of input: everything still open is unfinished; return all journeys."""
        self.done.extend(self.open.values())
        self.open.clear()
        return self.done
