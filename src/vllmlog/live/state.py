"""Incremental, bounded state of a followed log: the same parser and ``Pipeline`` as ``analyze``.

Lines go through ``LineParser.feed`` → ``Pipeline.feed`` (one pipeline, two drivers); on top of
that this module keeps what the exporter shows: counters of physical lines by level and kind,
finished requests by status, preemptions, errors by category, the latest engine stats, and
latency histograms with vLLM's bucket edges.

Memory stays flat: finished journeys are observed into counters/histograms and dropped (a short
ring of recent ones is kept for the rules), in-flight requests are capped (the oldest is evicted
and counted), and the pipeline's notable events and series are trimmed to recent windows.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections import Counter, deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

from ..journeys import Journey
from ..numbers import latency_value
from ..model import Event
from ..parsing.parser import LineParser
from ..reader import ParseStats
from ..run import LIFECYCLE, Pipeline, Run
from .follow import Segment

# vLLM's own bucket edges (0.8.4+; see the formats reference §3.2), so our histograms sit beside /metrics.
TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)
INTER_TOKEN_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)
REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)

#: Journey field → (histogram name, bucket edges).
HISTOGRAMS: dict[str, tuple[str, tuple[float, ...]]] = {
    "queue_s": ("request_queue_time_seconds", REQUEST_LATENCY_BUCKETS),
    "ttft_s": ("time_to_first_token_seconds", TTFT_BUCKETS),
    "tpot_s": ("time_per_output_token_seconds", INTER_TOKEN_BUCKETS),
    "e2e_s": ("e2e_request_latency_seconds", REQUEST_LATENCY_BUCKETS),
}

#: Error event kinds → category (the ``category`` label of ``vllmlog_errors_total``).
ERROR_CATEGORIES: dict[str, str] = {
    **dict.fromkeys((
        "engine_core_died", "engine_dead", "engine_fatal", "engine_start_failed", "engine_start_timeout",
        "engine_iteration_timeout", "worker_died", "worker_exception", "process_crashed",
        "shm_broadcast_timeout", "rpc_timeout",
    ), "engine"),
    **dict.fromkeys((
        "cuda_oom", "oom_killed", "insufficient_free_memory", "kv_cache_no_memory", "kv_cache_insufficient",
        "memory_profiling_error", "block_allocation_failed",
    ), "memory"),
    "cuda_error": "gpu",
    "nccl_error": "distributed",
    "nccl_timeout": "distributed",
    **dict.fromkeys(("config_error", "max_model_len_too_large", "model_load_error", "port_in_use"), "startup"),
    **dict.fromkeys((
        "bad_request_params", "context_length_exceeded", "prompt_too_long", "request_rejected",
        "request_preprocess_error", "request_exception", "request_failed", "stream_error", "queue_wait_exceeded",
    ), "request"),
    "traceback": "traceback",
}
_ERROR_LEVELS = frozenset({"ERROR", "CRITICAL"})

#: Engine-stats fields exported as gauges.
STATS_GAUGES = (
    "running", "waiting", "swapped", "kv_cache_usage", "prompt_throughput", "generation_throughput",
    "prefix_cache_hit_rate",
)


class Histogram:
    """A cumulative-on-read Prometheus histogram (counts per bucket, sum, count)."""

    __slots__ = ("edges", "counts", "sum", "count")

    def __init__(self, edges: Sequence[float]) -> None:
        self.edges = tuple(edges)
        self.counts = [0] * (len(self.edges) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        """Add one value (``le`` semantics: a value equal to an edge falls in that bucket)."""
        self.counts[bisect_left(self.edges, v)] += 1
        self.sum += v
        self.count += 1

    def buckets(self) -> list[tuple[str, int]]:
        """``[(le, cumulative count), …, ("+Inf", count)]``."""
        out: list[tuple[str, int]] = []
        acc = 0
        for e, c in zip(self.edges, self.counts):
            acc += c
            out.append((repr(float(e)), acc))
        out.append(("+Inf", self.count))
        return out


@dataclass
class StatsGauge:
    """The latest periodic stats line of one engine."""

    model: str
    engine: str
    values: dict[str, float]
    ts: datetime | None


FEED_CHUNK = 1_000
"""Lines parsed per hold of the state's lock (a scrape waits for one chunk at most, not for a whole poll)."""


class LiveState:
    """Everything ``watch`` knows about the followed log; ``feed`` segments, read under ``lock``."""

    def __init__(
        self,
        file: str,
        *,
        year: int | None = None,
        max_inflight: int = 10_000,
        recent_journeys: int = 2_000,
        max_notable: int = 5_000,
        max_stats: int = 2_000,
        max_decode_seconds: int = 3_600,
        max_templates: int = 2_000,
        linger_s: float = 1.0,
    ) -> None:
        self.file = file
        self.lock = threading.RLock()
        self._readers = 0
        """Readers waiting for ``lock`` (a hint read without the lock: ``feed`` yields between chunks)."""
        self.parser = LineParser(file, year)
        # finished journeys go to our sink (observed, kept in a short ring), never into a growing list
        self.pipe = Pipeline(journey_sink=self._observe, keep_journeys=False)
        jb = self.pipe.journeys
        if hasattr(jb, "max_open"):
            jb.max_open = max_inflight  # the builder evicts the oldest open journey and counts it
        self.linger_s = linger_s
        self._closing_seen: dict[str, float] = {}
        self.max_inflight = max_inflight
        self.max_notable = max_notable
        self.max_stats = max_stats
        self.max_decode_seconds = max_decode_seconds
        self.max_templates = max_templates
        self.max_attempts = max(4 * max_inflight, 50_000)
        self.recent: deque[Journey] = deque(maxlen=recent_journeys)
        self.lines: Counter[tuple[str, str]] = Counter()
        """Physical lines by (level, kind): every line counted once, when its record completes."""
        self.unparsed_lines = 0
        self.events = 0
        self.requests: Counter[tuple[str, str]] = Counter()
        """Finished journeys by (model, status)."""
        self.preemptions: Counter[str] = Counter()
        self.errors: Counter[tuple[str, str]] = Counter()
        """Error events by (model, category)."""
        self.hist: dict[tuple[str, str], Histogram] = {}
        """(histogram name, model) → histogram."""
        self.stats: dict[tuple[str, str], StatsGauge] = {}
        self.inflight_evicted = 0
        self.journeys_dropped_unfinished = 0
        self.last_log_ts: datetime | None = None
        self.pending_lines = 0
        """Lines fed to the parser whose record is not complete yet."""
        self._v0_cum_preempt: dict[str, int] = {}
        self._server_count = 0
        self.span_grace_s = 10.0
        """How long a trace span with no journey (yet) waits for its log line before it stands alone."""
        self.max_trace_spans = 2_000
        """Non-request spans kept (the start-up waterfall)."""
        self.traced_journeys = 0

    # ------------------------------------------------------------------ trace spans (OTLP receiver)
    def feed_spans(self, spans: Sequence[Any], now: float | None = None) -> None:
        """Fold received trace spans in: an ``llm_request`` span ends its journey with the exact numbers
        (vLLM V1 logs no finish line for completions: without a span that journey would never end)."""
        if not spans:
            return
        now = time.monotonic() if now is None else now
        with self.lock:
            self.pipe.add_spans(spans, now)
            ts = self.pipe.trace_spans
            if len(ts) > 2 * self.max_trace_spans:
                del ts[: -self.max_trace_spans]
            self._drain_journeys()

    def _span_leftovers(self, now: float) -> None:
        j = self.pipe.joiner
        if j is not None and j.pending:
            j.emit_leftovers(self.pipe.journeys, now, self.span_grace_s)

    # ------------------------------------------------------------------ feeding
    def feed(self, segments: Iterable[Segment]) -> list[Event]:
        """Parse and fold the lines of some segments; return the completed events.

        The lock is held for ``FEED_CHUNK`` lines at a time, and given up to a waiting reader (a scrape)
        between chunks: a 1 MiB poll is many short holds, not one long one (the same events: the parser is
        streaming, a chunk boundary is a poll boundary)."""
        out: list[Event] = []
        for seg in segments:
            lines = seg.lines
            for i in range(0, len(lines) or 1, FEED_CHUNK):
                part = lines[i : i + FEED_CHUNK]
                with self.lock:
                    if i == 0 and seg.new_generation:
                        out += self._fold(self.parser.close())
                    self.pending_lines += len(part)
                    if part and part[-1][0] - part[0][0] == len(part) - 1:  # consecutive: the compiled fast path
                        out += self._fold(self.parser.feed_lines(part[0][0], [t for _, t in part]))
                    else:
                        out += self._fold(self.parser.feed(part))
                if self._readers:
                    time.sleep(0)  # let the waiting reader take the lock before we take it again
        with self.lock:
            self._bound()
        return out

    def acquire_for_read(self, timeout: float) -> bool:
        """Take ``lock`` within ``timeout`` seconds as a reader (a scrape): ``feed`` yields it between chunks
        to a waiting reader. The caller releases ``lock``."""
        self._readers += 1
        try:
            return self.lock.acquire(timeout=timeout)
        finally:
            self._readers -= 1

    def flush(self) -> list[Event]:
        """Complete the open record (input idle: a traceback's last line has arrived)."""
        with self.lock:
            evs = self._fold(self.parser.close())
            self._bound()
        return evs

    def end_of_input(self) -> list[Event]:
        """The input is over (stdin closed): complete the last record and close every journey,
        exactly as ``analyze`` does at the end of a file (so the counts agree)."""
        with self.lock:
            evs = self._fold(self.parser.close())
            self.pipe.journeys.finish()
            self._drain_journeys()
            self._bound()
        return evs

    def _fold(self, events: list[Event]) -> list[Event]:
        if not events:
            return events
        lines = self.lines
        for e in events:
            n = e.line_end - e.line + 1
            k = e.kind
            lines[(e.level or "none", k)] += n
            self.pending_lines -= n
            if k == "unparsed":
                self.unparsed_lines += n
        self.events += len(events)
        self.pipe.feed(events)
        model = self.model
        stopped = False
        for e in events:
            k = e.kind
            if e.ts is not None and (self.last_log_ts is None or e.ts > self.last_log_ts):
                self.last_log_ts = e.ts
            if k == "engine_stats":
                self._stats(model, e)
            elif k == "preemption":
                self._v0_preemption(model, e)
            cat = ERROR_CATEGORIES.get(k)
            if cat is None and e.level in _ERROR_LEVELS:
                cat = "other"
            if cat is not None:
                self.errors[(model, cat)] += 1
            elif k == "server_stopped" or e.pattern == "uvicorn.shutdown_complete":
                stopped = True
        if stopped:
            # the API server finished shutting down: nothing is in flight any more; close every journey as
            # analyze does at the end of the file (a graceful shutdown makes them estimated successes)
            self.pipe.journeys.finish()
        if len(self.pipe.servers) != self._server_count:
            self._server_count = len(self.pipe.servers)
            self.stats.clear()  # a restart: the old engine's gauges are no longer current
        self._drain_journeys()
        return events

    def _stats(self, model: str, e: Event) -> None:
        f = e.fields
        eng = f.get("engine")
        engine = "" if eng is None else str(eng)
        vals = {k: float(f[k]) for k in STATS_GAUGES if f.get(k) is not None}
        self.stats[(model, engine)] = StatsGauge(model, engine, vals, e.ts)
        p = f.get("preemptions")
        if p:
            self.preemptions[model] += int(p)

    def _v0_preemption(self, model: str, e: Event) -> None:
        cum = e.fields.get("cumulative_preemptions")
        if cum is None:
            self.preemptions[model] += 1
            return
        # V0 logs only every 50th preemption but prints the running total: count the difference
        last = self._v0_cum_preempt.get(e.process or "", 0)
        self.preemptions[model] += cum - last if cum > last else 1
        self._v0_cum_preempt[e.process or ""] = max(cum, last)

    def _drain_journeys(self) -> None:
        jb = self.pipe.journeys
        done = jb.done
        if done:  # a builder that keeps journeys anyway: observe and drop them
            for j in done:
                self._observe(j)
            done.clear()
        open_ = jb.open
        if not hasattr(jb, "max_open") and len(open_) > self.max_inflight:
            excess = len(open_) - self.max_inflight
            for rid in list(islice_keys(open_, excess)):
                del open_[rid]
            self.inflight_evicted += excess

    def release_ended(self, now: float | None = None) -> int:
        """Emit journeys that ended at least ``linger_s`` (wall time) ago.

        The builder keeps ended journeys in a count-bounded linger buffer so late lines (an abort
        echo, a trailing access line) still fold in; live, that would delay ``requests_total`` until
        thousands more requests end, so here the linger is bounded in time as well.
        """
        jb = self.pipe.journeys
        now = time.monotonic() if now is None else now
        if self.pipe.joiner is not None and self.pipe.joiner.pending:
            with self.lock:
                self._span_leftovers(now)  # spans whose log line never came stand alone after the grace
        closing = getattr(jb, "closing", None)
        emit = getattr(jb, "_emit", None)
        if not closing or emit is None:
            return 0
        seen = self._closing_seen
        with self.lock:
            for key in reversed(closing):  # newly ended journeys are at the end
                if key in seen:
                    break
                seen[key] = now
            n = 0
            limit = now - self.linger_s
            while closing:
                key = next(iter(closing))
                t = seen.get(key)
                if t is None or t > limit:
                    break
                j = closing.pop(key)
                seen.pop(key, None)
                emit(j)  # finalize + sink (→ _observe); the builder's own release path
                n += 1
            if len(seen) > 2 * len(closing) + 256:
                self._closing_seen = {k: v for k, v in seen.items() if k in closing}
        return n

    def _observe(self, j: Journey) -> None:
        self.recent.append(j)
        if j.seen_in != "log":
            self.traced_journeys += 1
        model = self.model_of_server(getattr(j, "server", 0))
        status = j.status or "unknown"
        self.requests[(model, status)] += 1
        for attr, (name, edges) in HISTOGRAMS.items():
            # the summary's gate (vllm bench serve): successful requests, measured values only — a streaming
            # histogram cannot keep estimated values apart, so 1-second estimates stay out of it
            vb = latency_value(j, attr)
            if vb is None or vb[1] != "measured" or vb[0] < 0:
                continue
            v = vb[0]
            h = self.hist.get((name, model))
            if h is None:
                h = self.hist[(name, model)] = Histogram(edges)
            h.observe(float(v))

    def _bound(self) -> None:
        p = self.pipe
        jb = p.journeys
        att = getattr(jb, "attempts", None)  # request id → attempts; the builder clears it only at a restart
        if att is not None and len(att) > self.max_attempts:
            live = set(jb.open) | set(getattr(jb, "closing", ()))
            keep = dict(list(att.items())[-(self.max_attempts // 2):])
            keep.update((k, att[k]) for k in live if k in att)
            att.clear()
            att.update(keep)
        if len(p.notable) > 2 * self.max_notable:
            old = p.notable[: -self.max_notable]
            keep = [e for e in old if e.kind in LIFECYCLE][-200:]
            p.notable_dropped += len(old) - len(keep)
            p.notable[:] = keep + p.notable[-self.max_notable:]
        s = p.series
        if len(s.stats) > 2 * self.max_stats:
            del s.stats[: -self.max_stats]
        if len(s.decode) > 2 * self.max_decode_seconds:
            del s.decode[: -self.max_decode_seconds]
        if len(p.http_paths) > 2_000:
            p.http_paths = Counter(dict(p.http_paths.most_common(1_000)))
        if len(self.parser.unknown_templates) > 2 * self.max_templates:
            top = self.parser.unknown_templates.most_common(self.max_templates)
            self.parser.unknown_templates = Counter(dict(top))
            ex = self.parser._template_examples  # noqa: SLF001  (bounded with the counter)
            for key in [k for k in ex if k not in self.parser.unknown_templates]:
                del ex[key]

    # ------------------------------------------------------------------ reading
    @property
    def model(self) -> str:
        """Model of the current server run ('' until the banner or args line names it)."""
        s = self.pipe.servers
        return (s[-1].model or "") if s else ""

    def model_of_server(self, index: int) -> str:
        """Model of the ``index``-th server run of the followed file."""
        s = self.pipe.servers
        if 0 <= index < len(s):
            return s[index].model or ""
        return self.model

    @property
    def inflight(self) -> int:
        """Requests seen and not finished yet."""
        return len(self.pipe.journeys.open)

    @property
    def evicted(self) -> int:
        """In-flight requests dropped because the cap bit (the builder's count, or ours)."""
        return int(getattr(self.pipe.journeys, "evicted", 0)) + self.inflight_evicted

    @property
    def lines_counted(self) -> int:
        """Physical lines accounted for in ``lines``."""
        return sum(self.lines.values())

    def snapshot(self) -> Run:
        """The current state as a ``Run`` for the rules (recent finished + in-flight journeys)."""
        with self.lock:
            st = ParseStats()
            st.kinds.update(self.parser.kinds)
            st.lines = self.lines_counted
            run = self.pipe.snapshot(st)
            # the pipeline's snapshot holds (finalized copies of) the lingering and open journeys;
            # the finished ones were observed and dropped: add the recent ring for the rules
            run.journeys = list(self.recent) + list(run.journeys)
            run.notable = list(run.notable)
            return run

    def summary(self) -> dict[str, Any]:
        """Small JSON-able summary (for logs and tests)."""
        with self.lock:
            return {
                "lines": self.lines_counted, "events": self.events, "inflight": self.inflight,
                "requests": {f"{m}|{s}": c for (m, s), c in self.requests.items()},
                "inflight_evicted": self.evicted, "model": self.model,
            }


def islice_keys(d: dict[str, Any], n: int) -> Iterable[str]:
    """The first ``n`` keys of a dict (insertion order = oldest first)."""
    it = iter(d)
    for _ in range(n):
        try:
            yield next(it)
        except StopIteration:
            return
