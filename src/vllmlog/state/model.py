"""The service-state model of one server run: per stats interval, what the engine admitted, how fast it
progressed and against which limit, plus the run's lifecycle and what the log let us observe.

Built once per ``Run`` (``state.build.service_states``); symptoms, explainers and the verdict read it.
Signals are normalised to the server's own configuration (``ServerConfig``) and to the run's own baseline,
so "Running 4" means *at its cap* on a ``--max-num-seqs 4`` server and *idle* on a 256-seat one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .config import ServerConfig

if TYPE_CHECKING:  # pragma: no cover
    from ..rules._util import ServerView
    from ..series import StatsSample

#: KV-cache usage at which the cache, not the seat count, limits admission (vLLM admits a request only when
#: its blocks fit; a cache this full has no room for a typical prompt).
KV_FULL = 0.90
#: vLLM's default --max-num-seqs: 256 (V0, and V1 on most GPUs), 1024 (V1 API server on ≥ 70 GiB GPUs, 0.9+),
#: 128 on some CPU/TPU builds.
DEFAULT_MAX_NUM_SEQS = (256, 1024, 128)


@dataclass(slots=True)
class Interval:
    """One stats interval of one engine, with signals derived against the server's configuration."""

    sample: StatsSample
    dt_s: float
    """Seconds this sample covers (time since the previous one; the typical interval for the first)."""
    gap_before_s: float | None = None
    """Seconds without a stats line before this one, when that is well above the usual interval (stats stop
    when the engine is idle at DEBUG level — or stuck)."""
    cap: int | None = None
    """The seat limit in force (``--max-num-seqs``), when known."""

    @property
    def ts(self) -> datetime | None:
        return self.sample.ts

    @property
    def running(self) -> int:
        return self.sample.running or 0

    @property
    def waiting(self) -> int:
        return self.sample.waiting or 0

    @property
    def kv(self) -> float | None:
        return self.sample.kv_cache_usage

    @property
    def prompt_tps(self) -> float:
        return self.sample.prompt_throughput or 0.0

    @property
    def gen_tps(self) -> float:
        return self.sample.generation_throughput or 0.0

    @property
    def preemptions(self) -> int:
        return self.sample.preemptions or 0

    @property
    def busy(self) -> bool:
        """Requests are running."""
        return self.running > 0

    @property
    def stuck(self) -> bool:
        """Requests running but not a single token produced or prefilled in the interval."""
        return self.running > 0 and self.prompt_tps == 0 and self.sample.generation_throughput is not None \
            and self.gen_tps == 0

    @property
    def admitting(self) -> bool:
        """Prompt tokens were processed (new or re-prefilled requests)."""
        return self.prompt_tps > 0

    @property
    def gen_per_seq(self) -> float | None:
        """Generation tokens/s per running request (the speed each user sees)."""
        return self.gen_tps / self.running if self.running and self.sample.generation_throughput is not None else None

    @property
    def seat_util(self) -> float | None:
        """Running ÷ ``--max-num-seqs``."""
        return self.running / self.cap if self.cap else None

    @property
    def binding(self) -> str | None:
        """Which limit keeps waiting requests out: ``max_num_seqs`` (every seat taken), ``kv_cache`` (seats
        free but the cache is full, or requests are being preempted), ``unknown`` (requests wait, no limit
        visible: compute, a batched-token budget, a stall); None when nobody waits."""
        if self.waiting <= 0 and not self.preemptions:
            return None
        if self.cap and self.running >= self.cap:
            return "max_num_seqs"
        if self.preemptions or (self.kv is not None and self.kv >= KV_FULL):
            return "kv_cache"
        return "unknown"


@dataclass
class Lifecycle:
    """Where the server run got to."""

    started: bool = False
    """Start-up lines were seen (banner, arguments, engine config, model loading)."""
    ready_ts: datetime | None = None
    serving: bool = False
    """It served: ready line, stats, requests or HTTP answers."""
    excerpt: bool = False
    """The log starts mid-serving (no start-up lines)."""
    shutdown_ts: datetime | None = None
    """A deliberate stop (SIGTERM, Ctrl-C, uvicorn shutdown) began."""
    restarted: bool = False
    """Another server run follows in the same file."""
    startup_stage: str | None = None
    """The last start-up milestone reached (``args``, ``engine config``, ``loading weights``, ``weights loaded``,
    ``kv cache``, ``graphs captured``, ``engine initialized``, ``api server``)."""
    start_ts: datetime | None = None
    end_ts: datetime | None = None
    failed: bool = False
    """An error or traceback ended the process before it served (e.g. an argument error before any start-up line)."""

    @property
    def never_ready(self) -> bool:
        """Started (or failed outright), never served, and not stopped on request before it could."""
        return (self.started or self.failed) and not self.serving and self.shutdown_ts is None

    def to_dict(self) -> dict[str, Any]:
        return {"started": self.started, "serving": self.serving, "never_ready": self.never_ready,
                "excerpt": self.excerpt, "restarted": self.restarted, "startup_stage": self.startup_stage,
                "ready_ts": _iso(self.ready_ts), "shutdown_ts": _iso(self.shutdown_ts),
                "start_ts": _iso(self.start_ts), "end_ts": _iso(self.end_ts)}


@dataclass
class Coverage:
    """What the log let us observe of this server run."""

    lines: int = 0
    span_s: float = 0.0
    stats_intervals: int = 0
    interval_s: float | None = None
    """Typical seconds between stats lines."""
    gaps: list[tuple[datetime, datetime, float]] = field(default_factory=list)
    """Stretches with no stats line although the server was serving (start, end, seconds)."""
    trimmed: list[int] = field(default_factory=list)
    """Lines where the excerpt says output was cut (``...``, ``[N lines omitted]``)."""
    requests: int = 0
    max_running: int = 0
    max_waiting: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"lines": self.lines, "span_s": self.span_s, "stats_intervals": self.stats_intervals,
                "interval_s": self.interval_s, "gaps": [[_iso(a), _iso(b), s] for a, b, s in self.gaps],
                "trimmed_lines": list(self.trimmed), "requests": self.requests, "max_running": self.max_running,
                "max_waiting": self.max_waiting}


@dataclass
class Baseline:
    """The run's own normal, for relative thresholds."""

    gen_per_seq: float | None = None
    """Median generation tokens/s per running request over busy, unstuck intervals (upper half of the run's
    speeds: the speed the server shows when nothing is wrong)."""
    prompt_tps: float | None = None
    """Median prompt throughput over intervals that admitted work."""
    busy_intervals: int = 0


@dataclass
class ServiceState:
    """One server run: configuration, per-interval signals, lifecycle, coverage, baseline, request facts."""

    view: ServerView
    config: ServerConfig
    engines: dict[Any, list[Interval]]
    lifecycle: Lifecycle
    coverage: Coverage
    baseline: Baseline
    http: dict[int, int] = field(default_factory=dict)
    """HTTP answers of this server run by status code (all codes, when counted; else only ≥ 400)."""
    statuses: dict[str, int] = field(default_factory=dict)
    """Journeys by status (success, aborted, error, cancelled, unfinished)."""

    @property
    def file(self) -> str:
        return self.view.file

    @property
    def index(self) -> int:
        return self.view.index

    @property
    def intervals(self) -> list[Interval]:
        """All engines' intervals in time order (one list, built once: read it, do not change it)."""
        n = sum(map(len, self.engines.values()))
        got = self.__dict__.get("_intervals")
        if got is not None and got[0] == n:
            return got[1]
        out = [x for xs in self.engines.values() for x in xs]
        out.sort(key=lambda x: (x.ts or datetime.min, x.sample.line))
        self.__dict__["_intervals"] = (n, out)
        return out

    @property
    def cap(self) -> int | None:
        """The seat limit: ``--max-num-seqs`` when logged, else a plateau Running never exceeded while requests
        waited (observed), else None."""
        if self.config.max_num_seqs and self.config.sources.get("max_num_seqs") == "logged":
            return self.config.max_num_seqs
        xs = self.intervals
        top = max((x.running for x in xs), default=0)
        if top in DEFAULT_MAX_NUM_SEQS and any(x.running == top and x.waiting > 0 for x in xs):
            return top  # Running reached one of vLLM's default seat limits exactly, with requests waiting
        return _plateau(xs)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (``vllmlog diagnose --json`` → ``states``)."""
        return {"file": self.file, "server": self.index, "config": self.config.to_dict(),
                "lifecycle": self.lifecycle.to_dict(), "coverage": self.coverage.to_dict(),
                "baseline": {"gen_per_seq_tps": self.baseline.gen_per_seq, "prompt_tps": self.baseline.prompt_tps,
                             "busy_intervals": self.baseline.busy_intervals},
                "cap": self.cap, "http": {str(k): v for k, v in sorted(self.http.items())},
                "requests": dict(self.statuses)}


#: How long Running must sit at its maximum with requests waiting to be taken as the seat limit.
PLATEAU_S = 20.0


def _plateau(xs: list[Interval]) -> int | None:
    """A Running value that is the maximum of the run, held while requests waited for ≥ 3 stats intervals or
    ≥ 20 s (two 10 s intervals: the stats interval is a setting, the time the limit held is the evidence)."""
    if not xs:
        return None
    top = max(x.running for x in xs)
    if top <= 0:
        return None
    held = [x for x in xs if x.running == top and x.waiting > 0]
    return top if len(held) >= 3 or sum(x.dt_s for x in held) >= PLATEAU_S else None


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts else None
