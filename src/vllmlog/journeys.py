"""Per-request journeys: queue → scheduled → first token → last token (vLLM's own phases).

One ``Journey`` per request (per attempt, per server run). Every number carries where it came from in
``sources``: ``traced`` (vLLM's ``llm_request`` OpenTelemetry span states it, exactly), ``logged`` (a line
states it), ``derived`` (from sub-second timestamps or from traced/logged numbers) or ``estimated`` (from
1-second log timestamps, counted stream lines, or inference such as "no end line, but the server shut
down cleanly"). ``seen_in`` says where the request was seen: ``log``, ``trace`` or ``log+trace``.

Conventions (``vllm bench serve``): TTFT = arrival → first token, e2e = arrival → finish,
TPOT = (e2e − TTFT) / (output tokens − 1) only when output tokens > 1, decode = e2e − TTFT.

Status rules:

* a finish / abort / failure line decides the status (``logged``); the handbook's
  ``Status: ERROR. Reason: Client disconnected`` is counted as ``aborted`` (vLLM's finish reason for a
  client that went away), with ``sources["status"] = "derived"``;
* a chat response line with a ``finish_reason`` (``streaming complete`` or a last delta) → ``success``;
* no end evidence, but the request reached the engine and its server run then shut down cleanly
  (uvicorn's shutdown lines) → ``success`` with ``sources["status"] = "estimated"``: vLLM 0.32 prints no
  finish line for ``/v1/completions``, while it does print every abort and failure when request logging
  is on, so a request that was neither aborted nor failed before a graceful shutdown has completed;
* otherwise (end of input, restart, crash) → ``unfinished``.
"""

from __future__ import annotations

import operator
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable

from .model import Event

#: Ranking of number provenance, best first.
SOURCE_RANK = {"traced": 0, "logged": 1, "derived": 2, "estimated": 3}
STATUSES = ("success", "aborted", "error", "cancelled", "unfinished")

_ENGINE_SUFFIX = re.compile(r"^(?P<api>.+)-[0-9a-f]{8}$")
_CHILD_PREFIX = re.compile(r"^\d+_(?P<api>.+)$")
_ABORT_REASON = re.compile(r"client (?:disconnect|abort|closed|went away)|aborted", re.I)
#: Event kinds that start a request (a second one for an ended id is a retry).
START_KINDS = frozenset({"request_received", "request_queued"})
#: Kinds that only enrich a journey that already exists.
ENRICH_ONLY = frozenset({"request_details"})
#: ``finish_reason`` values vLLM prints that are not finish reasons.
_NOT_FINISH = frozenset({"streaming_complete", "None"})
_END_KINDS = frozenset({"request_finished", "request_failed", "request_rejected", "request_exception", "response_generated"})
_GEN_PATH = re.compile(r"/v1/(?:chat/)?completions|/generate|/v1/embeddings|/v1/responses|/pooling|/score|/rerank")

#: ``Journey.reason`` of an open request closed because the in-flight bound was reached.
EVICTED_REASON = "no end line before the tracking limit"

#: Column order of the requests table (``to_dict`` / CSV / Parquet).
COLUMNS = (
    "request_id", "engine_request_id", "file", "server", "attempt", "status", "reason", "finish_reason",
    "http_status", "arrival_ts", "scheduled_ts", "prefill_start_ts", "prefill_end_ts", "first_token_ts",
    "last_token_ts", "finish_ts", "queue_s", "prefill_s", "ttft_s", "decode_s", "tpot_s", "e2e_s",
    "prompt_tokens", "output_tokens", "max_tokens", "blocks", "decode_steps", "preemptions",
    "queue_wait_exceeded", "ts_resolution_s", "first_line", "last_line", "inference_s", "trace_id", "seen_in",
    "client_ttft_s", "client_e2e_s", "client_overhead_ttft_s", "client_overhead_e2e_s", "sources",
)
TS_COLUMNS = ("arrival_ts", "scheduled_ts", "prefill_start_ts", "prefill_end_ts", "first_token_ts",
              "last_token_ts", "finish_ts")


def _min(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a <= b else b


def _max(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a >= b else b


def _worst(*srcs: str | None) -> str:
    best = "traced"
    for s in srcs:
        if s is not None and SOURCE_RANK.get(s, 3) > SOURCE_RANK[best]:
            best = s
    return best


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
    """Field → its basis (``traced``, ``logged``, ``derived``, ``estimated``). The kept journeys share equal dicts
    (``JourneyBuilder._emit``): to change one journey's, assign a new dict."""
    engine_request_id: str | None = None
    attempt: int = 1
    finish_reason: str | None = None
    prefill_start_ts: datetime | None = None
    prefill_end_ts: datetime | None = None
    last_token_ts: datetime | None = None
    max_tokens: int | None = None
    blocks: int | None = None
    decode_steps: int = 0
    queue_wait_exceeded: bool = False
    ts_resolution_s: float = 1.0
    """1.0 for text logs (``MM-DD HH:MM:SS``), 0.001 when any timestamp had sub-second digits, 1e-6 when a
    trace span gave the request's times."""
    inference_s: float | None = None
    """vLLM's ``time_in_model_inference`` (scheduled → finished in the engine; traced)."""
    trace_id: str | None = None
    """The OpenTelemetry trace id of the request's ``llm_request`` span (to open it in Jaeger/Tempo)."""
    seen_in: str = "log"
    """``log``, ``trace`` (a span, no log line) or ``log+trace``."""
    client_ttft_s: float | None = None
    """TTFT as the client measured it (``--client``: vllm bench serve / GuideLLM results)."""
    client_e2e_s: float | None = None
    """End-to-end latency as the client measured it."""
    client_overhead_ttft_s: float | None = None
    """Client − server TTFT (frontend, network, anything before the engine); None when the server's TTFT was
    estimated (1-second timestamps) or either side is missing. Source ``derived``."""
    client_overhead_e2e_s: float | None = None
    """Client − server e2e latency (same rules)."""
    # working state (not exported)
    ended: bool = False
    reached_engine: bool = False
    starts: int = 0
    max_step: int = -1
    deltas: int = 0
    total_tokens: int | None = None
    aliases: list[str] = field(default_factory=list)
    last_kind: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (``vllmlog requests --json``): timestamps ISO 8601 or null."""
        out: dict[str, Any] = {}
        for k in COLUMNS:
            v = getattr(self, k)
            out[k] = v.isoformat() if isinstance(v, datetime) else v
        out["sources"] = dict(self.sources)
        return out

    def finalize(self, clean_shutdown: bool = False) -> None:
        """Decide the status of a journey without end evidence and compute the derived numbers."""
        src = self.sources
        if not self.ended:
            if clean_shutdown and self.reached_engine:
                self.status = "success"
                src["status"] = "estimated"
            else:
                self.status = "unfinished"
                src.pop("status", None)
        tsrc = "derived" if self.ts_resolution_s < 1.0 else "estimated"
        if self.arrival_ts is not None and self.scheduled_ts is not None and self.queue_s is None:
            self.queue_s = max(0.0, (self.scheduled_ts - self.arrival_ts).total_seconds())
            src["queue_s"] = tsrc
        if self.prefill_s is None and self.prefill_start_ts is not None and self.prefill_end_ts is not None:
            self.prefill_s = max(0.0, (self.prefill_end_ts - self.prefill_start_ts).total_seconds())
            src["prefill_s"] = tsrc
        if self.ttft_s is None and self.arrival_ts is not None and self.first_token_ts is not None:
            self.ttft_s = max(0.0, (self.first_token_ts - self.arrival_ts).total_seconds())
            src["ttft_s"] = tsrc
        if self.e2e_s is None and self.arrival_ts is not None and self.finish_ts is not None:
            self.e2e_s = max(0.0, (self.finish_ts - self.arrival_ts).total_seconds())
            src["e2e_s"] = tsrc
        # output tokens: logged ids > total − prompt > decode steps / stream deltas
        if self.output_tokens is None:
            if self.total_tokens is not None and self.prompt_tokens is not None:
                self.output_tokens = self.total_tokens - self.prompt_tokens
                src["output_tokens"] = "derived"
            elif self.max_step >= 0:
                self.output_tokens = self.max_step + 1
                src["output_tokens"] = "estimated"
            elif self.deltas:
                self.output_tokens = self.deltas
                src["output_tokens"] = "estimated"
        if self.status == "success" and self.e2e_s is not None and self.ttft_s is not None:
            if self.decode_s is None:
                self.decode_s = max(0.0, self.e2e_s - self.ttft_s)
                src["decode_s"] = _worst("derived", src.get("e2e_s"), src.get("ttft_s"))
            # from 1-second timestamps a decode time is only worth a TPOT when the ±1 s error is ≤ 20 %
            measurable = src.get("decode_s") != "estimated" or self.decode_s >= 5 * self.ts_resolution_s
            if self.tpot_s is None and measurable and self.output_tokens is not None and self.output_tokens > 1:
                self.tpot_s = self.decode_s / (self.output_tokens - 1)
                src["tpot_s"] = _worst("derived", src.get("decode_s"), src.get("output_tokens"))


def _make_copier() -> Callable[[Journey], Journey]:
    """A straight-line copy of a ``Journey`` (every slot; ``sources``/``aliases`` copied too):
    ~10× cheaper than ``copy.copy`` on a slots dataclass, which goes through ``__reduce_ex__``."""
    names = [n for n in Journey.__slots__ if n not in ("sources", "aliases")]  # type: ignore[attr-defined]
    body = "\n".join(f"    c.{n} = j.{n}" for n in names)
    src = (f"def copy_journey(j):\n    c = new(Journey)\n{body}\n"
           "    c.sources = dict(j.sources)\n    c.aliases = list(j.aliases)\n    return c\n")
    ns: dict[str, Any] = {"new": object.__new__, "Journey": Journey}
    exec(compile(src, "<journey-copy>", "exec"), ns)  # noqa: S102 - generated from the class's own slots
    return ns["copy_journey"]  # type: ignore[no-any-return]


_copy_journey = _make_copier()
_ARRIVAL_ORDER = operator.attrgetter("file", "server", "first_line")  # (file, server run, first line), built in C


class JourneyBuilder:
    """Builds journeys incrementally from events (bounded: ended journeys go to ``sink`` or ``done``).

    Ended journeys wait in a small buffer (``linger`` of them) so late lines — ``Request X aborted.``
    after the engine's ``Aborted request(s) X-hex.``, a trailing access line — still fold in.
    """

    def __init__(
        self,
        sink: Callable[[Journey], None] | None = None,
        keep: bool = True,
        linger: int = 2048,
        max_open: int = 200_000,
        compact: bool = False,
    ) -> None:
        self.open: OrderedDict[str, Journey] = OrderedDict()
        """Open journeys, oldest first. Ordered so the oldest leaves in O(1) when ``max_open`` bites: in a plain
        dict the slots of the removed oldest entries stay at the front until the next resize and every
        ``next(iter(...))`` walks over them (600k never-finished requests: 23 s instead of 2.5 s)."""
        self.done: list[Journey] = []
        """Kept journeys; with ``compact`` a ``journeytable.JourneyTable`` (columns, ~1/7 of the memory)."""
        if compact and keep:
            from .journeytable import JourneyTable

            self.done = JourneyTable()  # type: ignore[assignment]
        self._sources: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        """One ``sources`` dict per distinct content among the kept journeys (a log has a handful: ~180 B each)."""
        self.server = 0
        self.file: str | None = None
        self.sink = sink
        self.keep = keep
        self.linger = linger
        self.max_open = max_open
        self.evicted = 0
        self.evicted_sink: Callable[[Journey], None] | None = None
        """Where an evicted journey goes instead of ``done`` when journeys are kept (``analyze``: folded into
        counts, not kept whole, so memory stays bounded by ``max_open``); None: kept like any other."""
        self.closing: OrderedDict[str, Journey] = OrderedDict()
        self.alias: dict[str, str] = {}
        self.clean_shutdown = False
        self.emitted = 0
        self.spans: Any = None
        """A ``traces.join.SpanJoiner`` when trace spans are joined in (``Pipeline(traces=…)``)."""
        self._last: Journey | None = None
        self._last_kind: str | None = None

    # -- lifecycle
    def new_server(self, file: str) -> None:
        """A server restart: in-flight journeys of the old run are closed (ids may be reused)."""
        self._flush_all()
        self.server = self.server + 1 if file == self.file else 0
        self.file = file
        self.clean_shutdown = False

    def shutdown(self, e: Event | None = None) -> None:
        """The current server run is shutting down gracefully."""
        self.clean_shutdown = True

    def finish(self) -> list[Journey]:
        """End of input: close everything; return all kept journeys (in arrival order)."""
        self._flush_all()
        if self.spans is not None:
            self.spans.emit_leftovers(self)  # spans no log line named: journeys of their own
        if type(self.done) is not list:
            return self.done.seal()  # type: ignore[attr-defined,no-any-return]  # the same order, by columns
        self.done.sort(key=_ARRIVAL_ORDER)
        return self.done

    def snapshot(self) -> list[Journey]:
        """Kept journeys plus finalized copies of the lingering and open ones (open = unfinished so far)."""
        out = list(self.done) if type(self.done) is list else self.done.copies()  # type: ignore[attr-defined]
        for j in list(self.closing.values()) + list(self.open.values()):
            c = _copy_journey(j)
            c.finalize(False)
            out.append(c)
        return out

    def _flush_all(self) -> None:
        for j in list(self.open.values()):
            self._close(j)
        self.open.clear()
        while self.closing:
            self._emit(self.closing.popitem(last=False)[1])
        self.alias.clear()
        self._last = None

    def _emit(self, j: Journey, clean: bool | None = None, keep: bool = True) -> None:
        """Finalize a journey and hand it on (sink, kept list); ``clean`` overrides the shutdown verdict,
        ``keep=False`` leaves it out of the kept list."""
        if self.spans is not None:
            self.spans.on_emit(j)  # its llm_request span, if the traces have one
        j.finalize((self.clean_shutdown if j.server == self.server else False) if clean is None else clean)
        self.emitted += 1
        if self.sink is not None:
            self.sink(j)
        if self._last is j:  # an access line after this no longer ties to it: it left the builder
            self._last = None
        if self.keep and keep:
            j.sources = self._sources.setdefault(tuple(j.sources.items()), j.sources)
            self.done.append(j)

    def _close(self, j: Journey) -> None:
        """Move an ended (or abandoned) journey to the linger buffer."""
        for a in j.aliases:
            if self.alias.get(a) == j.request_id:
                del self.alias[a]
        self.open.pop(j.request_id, None)
        old = self.closing.pop(j.request_id, None)
        if old is not None and old is not j:
            self._emit(old)
        self.closing[j.request_id] = j
        while len(self.closing) > self.linger:
            self._emit(self.closing.popitem(last=False)[1])

    def _evict(self) -> None:
        """Bound memory: the oldest open journey (no end line for a long time) leaves as unfinished — to the
        sink and to ``evicted_sink`` when one is set (then not into ``done``: the kept list stays bounded)."""
        _key, old = self.open.popitem(last=False)
        old.reason = old.reason or EVICTED_REASON
        self.evicted += 1
        for a in old.aliases:
            self.alias.pop(a, None)
        es = self.evicted_sink
        self._emit(old, clean=False, keep=es is None)
        if es is not None:
            es(old)

    def add_span(self, rs: Any) -> bool:
        """Live: a request span for a journey still held (open or lingering) ends it with the span's numbers.

        Returns False when no journey here has the span's id (the caller lets it wait for its log line)."""
        sp = self.spans
        if sp is None:
            return False
        from .traces.join import span_keys

        for rid in span_keys(rs.request_id):
            key = self._resolve(rid)
            j = self.open.get(key)
            if j is None:
                j = self.closing.get(key)
            if j is None or j.seen_in != "log" or not sp.attach(j, rs):
                continue
            if key in self.open:
                self._close(j)
            return True
        return False

    # -- events
    def _resolve(self, rid: str) -> str:
        a = self.alias.get(rid)
        if a is not None:
            return a
        if rid in self.open or rid in self.closing:
            return rid
        m = _ENGINE_SUFFIX.match(rid)
        if m and (m["api"] in self.open or m["api"] in self.closing):
            return m["api"]
        m = _CHILD_PREFIX.match(rid)
        if m and (m["api"] in self.open or m["api"] in self.closing):
            return m["api"]
        c = rid + "-0"  # completions: `cmpl-<id>-0`; exception lines may name `cmpl-<id>`
        if c in self.open or c in self.closing:
            return c
        if rid.endswith("-0") and (rid[:-2] in self.open or rid[:-2] in self.closing):
            return rid[:-2]  # the engine's `cmpl-<id>-0` for a request the API server logged as `cmpl-<id>`
        return rid

    def _journey(self, rid: str, e: Event) -> Journey:
        key = self._resolve(rid)
        j = self.open.get(key)
        start = e.kind in START_KINDS
        n = 1
        if j is not None and start and j.starts and (j.reached_engine or j.ended):
            # the same id arrives again while the first is still open: a retry (or a reused id);
            # the first attempt's outcome is unknown
            j.reason = j.reason or "request id received again (retry?)"
            j.ended = True
            self._close(j)
            n = j.attempt + 1
            j = None
        if j is None:
            c = self.closing.get(key)
            if c is not None and not start:
                return c  # a late line of an ended request
            if c is not None:
                n = c.attempt + 1
                self.closing.pop(key)
                self._emit(c)
            j = Journey(key, e.file, self.server, first_line=e.line, attempt=n)
            self.open[key] = j
            if len(self.open) > self.max_open:
                self._evict()
        if key != rid and rid not in j.aliases:
            j.aliases.append(rid)
            self.alias[rid] = key
            if j.engine_request_id is None:
                j.engine_request_id = rid
        return j

    def add(self, e: Event) -> None:
        """Fold one request-related event (or an uvicorn access line) in."""
        k = e.kind
        if k == "http_access":
            self._access(e)
            return
        if k in ENRICH_ONLY:
            # DEBUG body/details lines may name the HTTP-level id (never seen again): no new journey
            rid = e.request_id
            key = self._resolve(rid) if rid is not None else None
            j = self.open.get(key) if key is not None else None
            if j is not None and e.line < j.first_line:
                j.first_line = e.line
            return
        f = e.fields
        rid = e.request_id
        if k == "decode_step" and rid is not None:
            # fast path: most lines of a handbook log are decode steps of an open request
            j = self.open.get(rid)
            ts = e.ts
            if j is not None and j.arrival_ts is not None and ts is not None and ts >= j.arrival_ts:
                j.decode_steps += 1
                step = f.get("step")
                if step is not None and step > j.max_step:
                    j.max_step = step
                if j.first_token_ts is None:
                    j.first_token_ts = ts
                if j.last_token_ts is None or ts > j.last_token_ts:
                    j.last_token_ts = ts
                if e.line_end > j.last_line:
                    j.last_line = e.line_end
                if ts.microsecond:
                    j.ts_resolution_s = 0.001
                j.last_kind = k
                self._last, self._last_kind = j, k
                return
        if rid == "None":
            return  # `Exception caught. Request id: None`
        if rid is None:
            ids = f.get("request_ids") if k == "request_aborted" else None
            if not ids:
                return
            for r in ids:
                self._fold(self._journey(r, e), r, e)
            return
        self._fold(self._journey(rid, e), rid, e)

    def _fold(self, j: Journey, rid: str, e: Event) -> None:
        k = e.kind
        f = e.fields
        ts = e.ts
        src = j.sources
        if e.line_end > j.last_line:
            j.last_line = e.line_end
        if e.line < j.first_line:
            j.first_line = e.line
        if ts is not None and ts.microsecond:
            j.ts_resolution_s = 0.001
        prev_kind = j.last_kind
        j.last_kind = k
        self._last, self._last_kind = j, k
        if k in START_KINDS:
            j.starts += 1
            if j.arrival_ts is None or (ts is not None and ts <= j.arrival_ts):
                src.pop("arrival_ts", None)
            j.arrival_ts = _min(j.arrival_ts, ts)
            if f.get("prompt_tokens") is not None and j.prompt_tokens is None:
                j.prompt_tokens = f["prompt_tokens"]
                src["prompt_tokens"] = "logged"
            if f.get("max_tokens") is not None:
                j.max_tokens = f["max_tokens"]
            if k == "request_queued":
                j.reached_engine = True
            return
        if j.arrival_ts is None or (ts is not None and ts < j.arrival_ts):
            # no start line seen (yet): the earliest line stands in for arrival
            j.arrival_ts = _min(j.arrival_ts, ts)
            src["arrival_ts"] = "estimated"
        if k == "request_added":
            j.reached_engine = True
            if rid != j.request_id:
                j.engine_request_id = rid
        elif k == "request_scheduled":
            j.reached_engine = True
            j.scheduled_ts = _min(j.scheduled_ts, ts)
        elif k == "prefill_started":
            j.reached_engine = True
            j.scheduled_ts = _min(j.scheduled_ts, ts)
            j.prefill_start_ts = _min(j.prefill_start_ts, ts)
            if f.get("prompt_tokens") is not None:
                j.prompt_tokens = f["prompt_tokens"]
                src["prompt_tokens"] = "logged"
            if f.get("blocks") is not None:
                j.blocks = f["blocks"]
        elif k == "prefill_completed":
            j.prefill_end_ts = _max(j.prefill_end_ts, ts)
            j.first_token_ts = _min(j.first_token_ts, ts)
            j.last_token_ts = _max(j.last_token_ts, ts)
            if f.get("prefill_s") is not None:
                j.prefill_s = f["prefill_s"]
                src["prefill_s"] = "logged"
        elif k == "decode_step" or k == "slow_generation":
            if k == "decode_step":
                j.decode_steps += 1
            step = f.get("step")
            if step is not None and step > j.max_step:
                j.max_step = step
            if j.first_token_ts is None:
                j.first_token_ts = ts
            j.last_token_ts = _max(j.last_token_ts, ts)
        elif k == "response_generated":
            self._generated(j, e)
        elif k == "preemption" or k == "block_allocation_failed":
            # the handbook prints "Failed to allocate blocks" and V0 then its preemption warning: count once
            if not (k == "preemption" and prev_kind == "block_allocation_failed"):
                j.preemptions += 1
            src["preemptions"] = "logged"
        elif k == "queue_wait_exceeded":
            j.queue_wait_exceeded = True
        elif k == "request_finished":
            self._finished(j, e)
        elif k == "request_aborted":
            if not j.ended:
                self._end(j, e, "aborted", f.get("reason"))
                src["status"] = "logged"
        elif k in ("request_failed", "request_rejected", "request_exception"):
            if not j.ended or j.status == "aborted":
                self._end(j, e, "error", f.get("reason") or f.get("error") or k)
                src["status"] = "logged"

    def _end(self, j: Journey, e: Event, status: str, reason: str | None) -> None:
        j.status = status
        j.reason = reason if reason is not None else j.reason
        j.finish_ts = e.ts if j.finish_ts is None else j.finish_ts
        j.ended = True
        self._close(j)

    def _generated(self, j: Journey, e: Event) -> None:
        f = e.fields
        ts = e.ts
        mode = f.get("streaming")
        if mode == "delta":
            j.deltas += 1
            if j.first_token_ts is None or (ts is not None and ts < j.first_token_ts):
                j.first_token_ts = ts
                j.sources["first_token_ts"] = "logged"
            j.last_token_ts = _max(j.last_token_ts, ts)
        if f.get("output_tokens") is not None and "output_token_ids: None" not in e.text:
            j.output_tokens = f["output_tokens"]
            j.sources["output_tokens"] = "logged"
        fr = f.get("finish_reason")
        if fr in _NOT_FINISH:
            fr = None
        if fr is not None or mode != "delta":
            j.finish_reason = fr or j.finish_reason
            if mode is None and j.first_token_ts is None:
                pass  # non-streaming: the first token is not visible
            if not j.ended:
                j.last_token_ts = _max(j.last_token_ts, ts)
                status = "aborted" if fr == "abort" else "success"
                self._end(j, e, status, None)
                j.sources["status"] = "logged"

    def _finished(self, j: Journey, e: Event) -> None:
        f = e.fields
        src = j.sources
        status = (f.get("status") or "success").lower()
        reason = f.get("reason")
        if status == "error" and reason and _ABORT_REASON.search(reason):
            status = "aborted"
            src["status"] = "derived"
        else:
            src["status"] = "logged"
        if status not in STATUSES:
            status = "error" if status in ("failed", "failure") else status
        for name in ("ttft_s", "tpot_s", "e2e_s"):
            if f.get(name) is not None:
                setattr(j, name, f[name])
                src[name] = "logged"
        if f.get("total_tokens") is not None:
            j.total_tokens = f["total_tokens"]
        if status == "success":
            j.last_token_ts = _max(j.last_token_ts, e.ts)
        j.ended = False
        self._end(j, e, status, reason)
        j.finish_ts = e.ts

    def _access(self, e: Event) -> None:
        """Tie an access line to the request whose start or end line came just before it."""
        j, k = self._last, self._last_kind
        self._last = None
        st = e.fields.get("http_status")
        path = e.fields.get("path") or ""
        if j is None or st is None or j.http_status is not None or not _GEN_PATH.search(path):
            return
        if k in START_KINDS or (j.ended and k in _END_KINDS):
            j.http_status = st
            j.sources["http_status"] = "estimated"
