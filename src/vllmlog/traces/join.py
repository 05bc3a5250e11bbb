"""Spans ↔ journeys: vLLM's ``llm_request`` spans joined with the log's request journeys.

The key is the request id: the span's ``gen_ai.request.id`` is the API-level id the log's
``Received request`` line names (``cmpl-<X-Request-Id>-0``, ``chatcmpl-…``); the engine's
``<id>-<8 hex>`` form and the log's aliases match too. When one id has several candidates (a retry, a
restarted server reusing ids, several servers), the span of the same API-server process
(``vllm.process_id`` = the log's ``(APIServer pid=N)``) whose arrival is closest to the journey's wins.

Clocks: spans carry UTC nanoseconds, vLLM logs naive local time. The offset is learned from the joined
pairs (log arrival − span arrival, rounded to 15 minutes: time zones are whole quarter hours, the rest
is the log's 1-second truncation); without a joined pair, from the start-up spans against the log's
ready line; without either, spans are taken as UTC and ``clock`` says so.

A joined journey takes the span's numbers as ``traced`` (exact): arrival, TTFT, e2e, queue, prefill,
inference, tokens; the times derived from them (first token = arrival + TTFT …) are ``derived``. A span
with no log line becomes a journey of its own (``seen_in = "trace"``); a log journey without a span keeps
the log's status (``aborted``, ``error`` … vLLM traces only finished requests) and, when its server was
traced, says ``no llm_request span`` in ``reason``.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .otlp import RequestSpan, Span

if TYPE_CHECKING:
    from ..journeys import Journey, JourneyBuilder
    from ..run import ServerRun

_EPOCH = datetime(1970, 1, 1)
_ENGINE_SUFFIX = re.compile(r"^(?P<api>.+)-[0-9a-f]{8}$")
_CHOICE_SUFFIX = re.compile(r"^(?P<api>.+)-\d+$")
#: Time zones are whole quarter hours.
TZ_STEP_S = 900
#: With a known clock offset, a candidate whose arrival is further than this from the journey's is
#: another request (the log's own line lags the arrival by well under a second).
TOLERANCE_S = 120.0
NO_SPAN = "no llm_request span (vLLM traces finished requests only)"


def utc_naive(ns: int, offset_s: float = 0.0) -> datetime:
    """Nanoseconds since the epoch → naive datetime in the log's clock (UTC + ``offset_s``)."""
    return _EPOCH + timedelta(microseconds=ns // 1000, seconds=offset_s)


def span_keys(rid: str) -> list[str]:
    """The ids a span can be found by: its own, and the API id of an engine id (``<id>-<8 hex>``)."""
    out = [rid]
    m = _ENGINE_SUFFIX.match(rid)
    if m:
        out.append(m["api"])
    return out


def journey_keys(j: Journey) -> list[str]:
    """The ids a journey is known by (API id, engine id, aliases, and the id without ``-0``)."""
    out = [j.request_id]
    if j.engine_request_id:
        out.append(j.engine_request_id)
    out += j.aliases
    m = _CHOICE_SUFFIX.match(j.request_id)
    if m:
        out.append(m["api"])
    return out


class SpanJoiner:
    """Request spans waiting for their journeys; folds a span into the journey it belongs to.

    Batch: every span of the trace files is added first, journeys take theirs as they are emitted, the
    rest become span-only journeys at the end. Live: a span that arrives for a journey still held by the
    builder ends it at once (``JourneyBuilder.add_span``); one that finds none waits ``grace_s`` for its
    log line, then becomes a span-only journey. ``max_pending`` bounds the wait list.
    """

    def __init__(
        self,
        pid_of: Callable[[str, int], str | None] | None = None,
        servers: Callable[[], Sequence[ServerRun]] | None = None,
        startup_spans: Callable[[], Sequence[Span]] | None = None,
        max_pending: int = 1_000_000,
    ) -> None:
        self.index: dict[str, list[RequestSpan]] = {}
        self.pid_of = pid_of
        self.servers = servers
        self.startup_spans = startup_spans
        self.max_pending = max_pending
        self.pending = 0
        self._order: deque[tuple[float, RequestSpan]] = deque()
        self._taken: set[int] = set()
        self.offsets: Counter[int] = Counter()
        self.pids: set[str] = set()
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.joined = 0
        self.span_only = 0
        self.no_span = 0
        self.rejected = 0
        self._server_keys: dict[tuple[str | None, str | None], int] = {}
        self._fallback: float | None = None

    # ------------------------------------------------------------------ spans in
    def add(self, rs: RequestSpan, now: float = 0.0) -> None:
        """Make a request span available to journeys (``now``: wall time, for the live grace period)."""
        for k in span_keys(rs.request_id):
            self.index.setdefault(k, []).append(rs)
        self._order.append((now, rs))
        self.pending += 1
        if rs.pid is not None:
            self.pids.add(rs.pid)
        if self.first_ns is None or rs.start_ns < self.first_ns:
            self.first_ns = rs.start_ns
        if self.last_ns is None or rs.end_ns > self.last_ns:
            self.last_ns = rs.end_ns

    def _remove(self, rs: RequestSpan) -> None:
        for k in span_keys(rs.request_id):
            lst = self.index.get(k)
            if lst is None:
                continue
            for i, x in enumerate(lst):
                if x is rs:
                    del lst[i]
                    break
            if not lst:
                del self.index[k]
        self._taken.add(id(rs))
        self.pending -= 1

    # ------------------------------------------------------------------ clocks
    @property
    def offset_s(self) -> float:
        """Log clock − UTC, seconds (learned from joined pairs, else start-up spans, else 0)."""
        if self.offsets:
            return float(self.offsets.most_common(1)[0][0])
        fb = self._fallback_offset()
        return fb if fb is not None else 0.0

    @property
    def clock(self) -> str:
        """How the offset was found: ``joined requests``, ``start-up spans`` or ``assumed UTC``."""
        if self.offsets:
            return "joined requests"
        return "start-up spans" if self._fallback_offset() is not None else "assumed UTC"

    def _fallback_offset(self) -> float | None:
        """The log's ready time against the end of the start-up spans (``Overall Loading``)."""
        if self._fallback is not None:
            return self._fallback
        if self.servers is None or self.startup_spans is None:
            return None
        ends = sorted(s.end_ns for s in self.startup_spans() if s.name == "Overall Loading")
        readies = [s.ready_ts for s in self.servers() if s.ready_ts is not None]
        if not ends or not readies:
            return None
        diff = (readies[0] - utc_naive(ends[0])).total_seconds()
        self._fallback = float(round(diff / TZ_STEP_S) * TZ_STEP_S)
        return self._fallback

    def _observe_offset(self, j: Journey, rs: RequestSpan) -> None:
        if j.arrival_ts is None or j.sources.get("arrival_ts") is not None:
            return  # only a logged start line is a clock reading
        diff = (j.arrival_ts - utc_naive(rs.start_ns)).total_seconds()
        self.offsets[int(round(diff / TZ_STEP_S) * TZ_STEP_S)] += 1

    # ------------------------------------------------------------------ matching
    def match(self, j: Journey) -> RequestSpan | None:
        """Take the span of journey ``j`` (or None): same id, same API server, nearest arrival."""
        if not self.index:
            return None
        cands: list[RequestSpan] = []
        for k in journey_keys(j):
            for rs in self.index.get(k, ()):
                if not any(rs is c for c in cands):
                    cands.append(rs)
        if not cands:
            return None
        pid = self.pid_of(j.file, j.server) if self.pid_of is not None else None
        if pid is not None:
            cands = [rs for rs in cands if rs.pid is None or rs.pid == pid]
            if not cands:
                self.rejected += 1
                return None
        best = cands[0]
        if j.arrival_ts is not None:
            known = bool(self.offsets)
            off = self.offset_s
            best_res = None
            for rs in cands:
                diff = (j.arrival_ts - utc_naive(rs.start_ns)).total_seconds()
                res = abs(diff - (off if known else round(diff / TZ_STEP_S) * TZ_STEP_S))
                if best_res is None or res < best_res:
                    best, best_res = rs, res
            if known and best_res is not None and best_res > TOLERANCE_S:
                self.rejected += 1
                return None
        self._remove(best)
        self._observe_offset(j, best)
        return best

    def attach(self, j: Journey, rs: RequestSpan) -> bool:
        """Live: fold a span that just arrived into journey ``j`` unless it is another server's or time's."""
        pid = self.pid_of(j.file, j.server) if self.pid_of is not None else None
        if pid is not None and rs.pid is not None and rs.pid != pid:
            return False
        if j.arrival_ts is not None and self.offsets:
            diff = (j.arrival_ts - utc_naive(rs.start_ns)).total_seconds()
            if abs(diff - self.offset_s) > TOLERANCE_S:
                return False
        self._observe_offset(j, rs)
        self.fold(j, rs)
        self.joined += 1
        return True

    def covers(self, j: Journey) -> bool:
        """Was the journey's server traced (its API-server pid sent spans, or spans span its arrival)?"""
        pid = self.pid_of(j.file, j.server) if self.pid_of is not None else None
        if pid is not None:
            return pid in self.pids
        if j.arrival_ts is None or self.first_ns is None or self.last_ns is None:
            return False
        a = j.arrival_ts - timedelta(seconds=self.offset_s)
        return utc_naive(self.first_ns) - timedelta(seconds=60) <= a <= utc_naive(self.last_ns) + timedelta(seconds=60)

    # ------------------------------------------------------------------ folding
    def fold(self, j: Journey, rs: RequestSpan) -> None:
        """The span's exact numbers into the journey (``traced``), and what follows from them (``derived``)."""
        src = j.sources
        a = utc_naive(rs.start_ns, self.offset_s)
        j.arrival_ts = a
        src["arrival_ts"] = "traced"
        if rs.queue_s is not None:
            j.queue_s = rs.queue_s
            src["queue_s"] = "traced"
            j.scheduled_ts = a + timedelta(seconds=rs.queue_s)
        if rs.prefill_s is not None:
            j.prefill_s = rs.prefill_s
            src["prefill_s"] = "traced"
            if j.scheduled_ts is not None:
                j.prefill_start_ts = j.scheduled_ts
                j.prefill_end_ts = j.scheduled_ts + timedelta(seconds=rs.prefill_s)
        if rs.ttft_s is not None:
            j.ttft_s = rs.ttft_s
            src["ttft_s"] = "traced"
            j.first_token_ts = a + timedelta(seconds=rs.ttft_s)
            src["first_token_ts"] = "derived"
        if rs.e2e_s is not None:
            j.e2e_s = rs.e2e_s
            src["e2e_s"] = "traced"
            j.finish_ts = a + timedelta(seconds=rs.e2e_s)
        else:
            j.finish_ts = utc_naive(rs.end_ns, self.offset_s)
        j.last_token_ts = j.finish_ts
        for name in ("decode_s", "tpot_s"):  # recomputed from the traced TTFT/e2e unless a line stated them
            if src.get(name) != "logged":
                setattr(j, name, None)
                src.pop(name, None)
        if rs.inference_s is not None:
            j.inference_s = rs.inference_s
            src["inference_s"] = "traced"
        if rs.prompt_tokens is not None:
            j.prompt_tokens = rs.prompt_tokens
            src["prompt_tokens"] = "traced"
        if rs.output_tokens is not None:
            j.output_tokens = rs.output_tokens
            src["output_tokens"] = "traced"
        if rs.max_tokens is not None:
            j.max_tokens = rs.max_tokens
        if rs.finish_reason:
            j.finish_reason = rs.finish_reason
        j.trace_id = rs.trace_id
        j.seen_in = "log+trace" if j.seen_in != "trace" else "trace"
        j.ts_resolution_s = 1e-6
        j.reached_engine = True
        if not (j.ended and j.status in ("aborted", "error", "cancelled")):
            j.status = "error" if rs.status == "error" else "success"
            src["status"] = "traced"
            j.ended = True
            if j.reason == NO_SPAN:
                j.reason = None

    def on_emit(self, j: Journey) -> None:
        """A journey leaves the builder: join its span, or note that a traced server sent none."""
        if j.seen_in != "log":
            return
        rs = self.match(j)
        if rs is not None:
            self.fold(j, rs)
            self.joined += 1
        elif self.covers(j):
            self.no_span += 1
            if j.status in ("success", "unfinished") and not j.reason:
                j.reason = NO_SPAN

    # ------------------------------------------------------------------ spans without a log line
    def _place(self, rs: RequestSpan) -> tuple[str, int]:
        """(file, server) of a span-only journey: the log's server run with the span's API-server pid,
        else the trace file and the span's server process in order of appearance."""
        if self.servers is not None and rs.pid is not None and self.pid_of is not None:
            for s in self.servers():
                if self.pid_of(s.file, s.index) == rs.pid:
                    return s.file, s.index
        key = rs.server_key
        n = self._server_keys.get(key)
        if n is None:
            n = self._server_keys[key] = len(self._server_keys)
        return rs.file, n

    def span_journey(self, rs: RequestSpan) -> Journey:
        """A journey from a span alone (no log line named the request)."""
        from ..journeys import Journey

        file, server = self._place(rs)
        j = Journey(rs.request_id, file, server, first_line=rs.line, last_line=rs.line)
        j.seen_in = "trace"
        self.fold(j, rs)
        self.span_only += 1
        return j

    def leftovers(self, now: float | None = None, grace_s: float = 0.0) -> list[RequestSpan]:
        """Spans no journey took: all of them (``now`` None), or those waiting longer than ``grace_s``
        (and the oldest beyond ``max_pending``)."""
        out: list[RequestSpan] = []
        order = self._order
        while order:
            t, rs = order[0]
            if id(rs) in self._taken:
                order.popleft()
                self._taken.discard(id(rs))
                continue
            if now is not None and t > now - grace_s and self.pending <= self.max_pending:
                break
            order.popleft()
            self._remove(rs)
            self._taken.discard(id(rs))
            out.append(rs)
        return out

    def emit_leftovers(self, builder: JourneyBuilder, now: float | None = None, grace_s: float = 0.0) -> int:
        """Hand span-only journeys to the builder's sink (finalized like every other journey)."""
        n = 0
        for rs in self.leftovers(now, grace_s):
            builder._emit(self.span_journey(rs), clean=False)  # noqa: SLF001  (the builder's release path)
            n += 1
        return n

    def to_dict(self) -> dict[str, Any]:
        """Join counts and the clock used (the analysis JSON's ``traces.join``)."""
        return {"joined": self.joined, "span_only": self.span_only, "log_without_span": self.no_span,
                "rejected_candidates": self.rejected, "pending": self.pending,
                "clock_offset_s": self.offset_s, "clock": self.clock}


def add_all(joiner: SpanJoiner, spans: Iterable[RequestSpan]) -> None:
    """Add request spans (batch: before the log is read)."""
    for rs in spans:
        joiner.add(rs)
