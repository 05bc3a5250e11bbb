"""What clients feel, nothing about why: a ``Symptom`` has a kind, an onset, an end, a trend and the lines
that show it. Detectors (one module each) read a ``ServiceState``; explainers (the rules) propose causes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..rules.base import Evidence, Severity

if TYPE_CHECKING:  # pragma: no cover
    from ..run import Run
    from ..state import ServiceState

#: Symptom kinds, worst impact first (the incident headline is its worst symptom). Thrashing ranks above a
#: queue: a queue alone can be plain overload, preemption means the server wastes its compute redoing work.
KINDS = ("dead", "never_ready", "stalled", "failing", "rejected", "thrashing", "queueing", "aborting", "slow")
IMPACT = {k: len(KINDS) - i for i, k in enumerate(KINDS)}
#: What a symptom can lead to (a stall makes the queue grow and clients give up …).
LEADS_TO: dict[str, tuple[str, ...]] = {
    "dead": ("failing", "aborting", "rejected"),
    "never_ready": (),
    "stalled": ("queueing", "aborting", "failing", "slow", "dead"),
    "failing": ("aborting",),
    "rejected": (),
    "queueing": ("aborting", "slow", "failing"),
    "thrashing": ("queueing", "slow", "aborting"),
    "aborting": (),
    "slow": ("queueing", "aborting"),
}
#: The category of a symptom no explainer accounts for.
DEFAULT_CATEGORY = {
    "dead": "engine_dead", "never_ready": "engine_dead", "stalled": "engine_hang", "failing": "engine_dead",
    "rejected": "bad_request_params", "queueing": "queue_backlog", "thrashing": "kv_cache_pressure_preemption",
    "aborting": "client_abort", "slow": "slow_throughput",
}
TRENDS = ("degrading", "stable", "recovering", "recovered")
#: What to do about a symptom no explainer accounts for (the detector may say something more precise in
#: ``data['fix']``).
DEFAULT_FIX = {
    "dead": "read the first exception of the engine process (the first evidence line); check `dmesg -T` for OOM kills "
            "or Xid errors; run vLLM under a supervisor that restarts it",
    "never_ready": "read the first error of the start-up (the first evidence line); rerun with `VLLM_LOGGING_LEVEL=DEBUG`",
    "stalled": "dump the stacks of the engine processes while it is stuck (`py-spy dump --pid <EngineCore pid>`); set "
               "`VLLM_RPC_TIMEOUT` / `VLLM_ENGINE_ITERATION_TIMEOUT_S` so a hang fails fast",
    "failing": "read the exception logged with the failed requests (`--log-error-stack` on 0.11+ logs it)",
    "rejected": "read the 400 body on the client side (it names the problem) or restart with `--log-error-stack`; fix "
                "the client's requests",
    "queueing": "add replicas or admission control in front of vLLM; raise `--max-num-seqs` if the KV cache has room",
    "thrashing": "lower `--max-num-seqs` or give the KV cache more memory",
    "aborting": "raise the client/proxy timeout above the observed latency, or make requests cheaper",
    "slow": "compare with the run's own earlier speed; check the attention backend, `--enforce-eager`, KV pressure",
}


@dataclass
class Symptom:
    """One thing clients feel in one server run, over a time window."""

    kind: str
    file: str
    server: int
    severity: Severity
    headline: str
    """One line with the numbers: 'Waiting grew 12 → 340 over 6 min; Running pinned at 256'."""
    onset: datetime | None
    end: datetime | None = None
    trend: str = "stable"
    evidence: list[Evidence] = field(default_factory=list)
    category: str | None = None
    """The category when no explainer accounts for it (``DEFAULT_CATEGORY`` unless the detector knows better)."""
    data: dict[str, Any] = field(default_factory=dict)
    process: str | None = None

    @property
    def impact(self) -> int:
        return IMPACT[self.kind]

    @property
    def fix(self) -> str:
        """What to do when no explainer says more."""
        return str(self.data.get("fix") or DEFAULT_FIX[self.kind])

    @property
    def default_category(self) -> str:
        return self.category or DEFAULT_CATEGORY[self.kind]

    def sort_key(self) -> tuple[Any, ...]:
        return (-int(self.severity), -self.impact, self.onset or datetime.max)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity.label, "headline": self.headline,
                "onset": self.onset.isoformat() if self.onset else None,
                "end": self.end.isoformat() if self.end else None, "trend": self.trend,
                "file": self.file, "server": self.server, "evidence": [e.to_dict() for e in self.evidence],
                "data": self.data}


Detector = Callable[["Run", "ServiceState", dict], Iterator[Symptom]]
#: kind → detector, in registration order.
DETECTORS: dict[str, Detector] = {}


def detector(kind: str) -> Callable[[Detector], Detector]:
    """Register a symptom detector for ``kind``."""
    if kind not in KINDS:
        raise ValueError(f"unknown symptom kind {kind!r}")

    def deco(fn: Detector) -> Detector:
        DETECTORS[kind] = fn
        return fn
    return deco


def trend_of(values: list[float], *, recovered: bool = False) -> str:
    """degrading / stable / recovering / recovered from a sequence of badness values (higher = worse)."""
    if recovered:
        return "recovered"
    if len(values) < 2:
        return "stable"
    k = max(1, len(values) // 3)
    head, tail = sum(values[:k]) / k, sum(values[-k:]) / k
    if tail > head * 1.2 + 1e-9:
        return "degrading"
    if tail < head * 0.8:
        return "recovering"
    return "stable"
