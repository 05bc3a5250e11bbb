"""Simulated requests and incidents: the state the engine mutates and the truth is built from."""

from __future__ import annotations

from dataclasses import dataclass

# Request states.
WAITING = 0
RUNNING = 1
SWAPPED = 2
DONE = 3


class SimRequest:
    """One client request travelling through the simulated server (times are seconds from log start)."""

    __slots__ = (
        "idx", "rid", "engine_rid", "arrival", "prompt", "target", "max_tokens", "stream", "chat",
        "port", "scheduled", "first_token", "finish", "out", "computed", "prefill_target", "blocks",
        "preemptions", "status", "reason", "http_status", "finish_reason", "state", "deadline",
        "deadline_kind", "warned", "prefill_start", "stuck",
    )

    def __init__(
        self, idx: int, rid: str, engine_rid: str, arrival: float, prompt: int, target: int,
        max_tokens: int, stream: bool, chat: bool, port: int,
    ) -> None:
        self.idx = idx
        self.rid = rid
        self.engine_rid = engine_rid
        self.arrival = arrival
        self.prompt = prompt
        self.target = target
        self.max_tokens = max_tokens
        self.stream = stream
        self.chat = chat
        self.port = port
        self.scheduled: float | None = None
        self.first_token: float | None = None
        self.finish: float | None = None
        self.out = 0
        self.computed = 0
        self.prefill_target = prompt
        self.blocks = 0
        self.preemptions = 0
        self.status = "unfinished"
        self.reason = ""
        self.http_status: int | None = None
        self.finish_reason: str | None = None
        self.state = WAITING
        self.deadline: float | None = None
        self.deadline_kind = ""
        self.warned = False
        self.prefill_start = 0.0
        self.stuck = False

    @property
    def endpoint(self) -> str:
        """HTTP path of the request."""
        return "/v1/chat/completions" if self.chat else "/v1/completions"


@dataclass
class Incident:
    """A ground-truth incident: a diagnosis category active between two times."""

    category: str
    """Diagnosis category, e.g. `engine_dead`."""
    start: float
    """Seconds from log start."""
    end: float
    """Seconds from log start."""
    description: str
    """What happened, in one sentence."""
