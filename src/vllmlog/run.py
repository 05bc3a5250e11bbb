"""One pipeline, two drivers: events → journeys, series, server runs and notable events → ``Run``.

``analyze`` feeds it a file as fast as it can; ``watch`` feeds it whatever arrived in the last
moment. Both call ``Pipeline.feed(batch)``; rules read the resulting ``Run``.
"""

from __future__ import annotations

import os
import re

import gc
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Iterator, Sequence

from .journeys import Journey, JourneyBuilder
from .model import Event
from .reader import ParseStats, iter_batches
from .compact import Sharer
from .series import DecodeSecond, SeriesBuilder

#: Kinds that can come in millions and are summarised (journeys, series, counters), not kept.
HIGH_VOLUME = frozenset({
    "decode_step", "response_generated", "request_received", "request_added", "request_queued",
    "request_scheduled", "prefill_started", "prefill_completed", "http_access", "engine_stats",
    "nccl_debug", "progress", "server_route", "blank", "request_details", "iteration_stats",
    "batch_debug",  # DEBUG "Running batch with cudagraph_mode …": ~80 % of a real DEBUG log, no rule reads it
})


_OFFLINE_DONE = re.compile(r"\|\s{0,4}(\d{1,12})/\d{1,12} ")


def is_offline_progress(e: Event) -> bool:
    """An offline ``LLM.generate`` progress bar that shows prompts processed ('Processed prompts:  41%|…| 842/2048')."""
    if e.kind != "progress" or "Processed prompts" not in e.text:
        return False
    m = _OFFLINE_DONE.search(e.text)
    return bool(m and int(m.group(1)) > 0) or (e.fields.get("percent") or 0) > 0


#: Records of a start-up failing (a traceback counts when it names an exception).
_START_FAIL = frozenset({"traceback", "engine_start_failed", "process_crashed", "engine_fatal", "worker_exception",
                         "model_load_error", "cuda_oom", "config_error", "engine_dead"})
#: Kinds that mark the life of a server process.
LIFECYCLE = frozenset({
    "server_version", "server_args", "engine_config", "server_starting", "server_ready",
    "server_process_started", "server_shutdown", "server_stopped", "engine_initialized",
    "kv_cache_size", "kv_cache_blocks", "kv_cache_memory", "model_loading", "model_loaded",
    "max_model_len", "model_architecture",
})


@dataclass
class ServerRun:
    """One start of a vLLM server within an input file (a restart begins a new one)."""

    file: str
    index: int
    start_ts: datetime | None = None
    ready_ts: datetime | None = None
    end_ts: datetime | None = None
    first_line: int = 0
    last_line: int = 0
    version: str | None = None
    model: str | None = None
    generation: str | None = None
    """``v0``, ``v1`` or ``handbook`` (the line style seen)."""
    args: dict[str, Any] = field(default_factory=dict)
    """Key server arguments (max_num_seqs, max_model_len, gpu_memory_utilization, …)."""
    config: dict[str, Any] = field(default_factory=dict)
    """Facts from start-up lines: kv_cache_tokens, num_gpu_blocks, max_concurrency, …"""
    ready: bool = False
    shutdown: bool = False
    api_pid: str | None = None
    """The API server's pid (``(APIServer pid=N)``): its trace spans carry it as ``vllm.process_id``."""
    http_status: Counter[int] = field(default_factory=Counter)
    """HTTP answers of this server run by status code (uvicorn access lines)."""
    api_requests: int = 0
    """POST requests among them (the API's work, not health checks and scrapes)."""
    served_hosts: set[str] = field(default_factory=set)
    """Client hosts answered 2xx on a POST (at most ``SERVED_HOSTS_CAP``): tells one client's errors from everyone's."""
    offline_last: Any = None
    """The latest offline ``Processed prompts`` progress bar (``LLM.generate``, RL rollouts), if any."""

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {
            "file": self.file, "index": self.index,
            "start_ts": self.start_ts.isoformat() if self.start_ts else None,
            "ready_ts": self.ready_ts.isoformat() if self.ready_ts else None,
            "end_ts": self.end_ts.isoformat() if self.end_ts else None,
            "first_line": self.first_line, "last_line": self.last_line, "version": self.version,
            "model": self.model, "generation": self.generation, "args": self.args, "config": self.config,
            "ready": self.ready, "shutdown": self.shutdown, "api_pid": self.api_pid,
        }


#: How many distinct served client hosts a server run remembers (enough to tell one client from several).
SERVED_HOSTS_CAP = 64


def client_host(client: Any) -> str | None:
    """An access line's ``client`` (``10.0.0.7:51234``) → its host (``10.0.0.7``)."""
    return str(client).rsplit(":", 1)[0] if client else None


class EvictedJourneys:
    """Open requests the in-flight bound closed as unfinished while journeys are kept (``analyze``): folded into
    the counts the numbers show (``numbers.RequestStats``: 8 bytes a value) and counted per server run, never
    kept whole — ``Run.journeys`` holds at most ``JourneyBuilder.max_open`` of them, whatever the log's size."""

    def __init__(self) -> None:
        from .numbers import RequestStats

        self.stats = RequestStats()
        self.servers: Counter[tuple[str, int]] = Counter()
        """(file, server run index) → requests evicted from it."""

    def add(self, j: Journey) -> None:
        """Fold one evicted (finalized, unfinished) journey in."""
        self.stats.add(j)
        self.servers[(j.file, j.server)] += 1

    def __len__(self) -> int:
        return self.stats.total


@dataclass
class Run:
    """Everything the diagnosis rules, timeline and reports read about one analysis."""

    files: list[str]
    servers: list[ServerRun]
    journeys: list[Journey]
    series: SeriesBuilder
    notable: list[Event]
    """Events outside the high-volume kinds (warnings, errors, lifecycle, aborts, 4xx/5xx access lines …)."""
    kinds: Counter[str]
    levels: Counter[str]
    http_status: Counter[int]
    http_paths: Counter[str]
    parse_stats: ParseStats
    start_ts: datetime | None = None
    end_ts: datetime | None = None
    notable_dropped: int = 0
    trace_spans: list[Any] = field(default_factory=list)
    """Trace spans other than ``llm_request`` (start-up spans …), from ``--traces`` or the live receiver."""
    traces: dict[str, Any] | None = None
    """What the trace input held and how it joined (``TraceStats`` + ``SpanJoiner`` counts); None without traces."""
    journeys_evicted: int = 0
    """Open requests closed as unfinished because the in-flight bound was reached."""
    evicted: EvictedJourneys | None = None
    """Those of them not in ``journeys`` (kept as counts only); None when every evicted journey went to a sink
    (streaming ``summary``, ``watch``) or none was evicted."""
    prometheus: dict[str, list[Any]] = field(default_factory=dict)
    """Per-target ``/metrics`` snapshots merged by ``--prometheus`` (``prommetrics.merge``): the histograms the
    stats samples do not carry (request lengths, time in queue) for ``capacity``."""

    @property
    def coverage(self) -> Any:
        """What was read and what was not (``vllmlog.coverage.Coverage``: ``complete``, ``gaps``, ``inputs``)."""
        from .coverage import of_run

        return of_run(self)

    client: dict[str, Any] | None = None
    """Client-observed vs server-side TTFT/e2e per request (``vllmlog.client.compare``); None without ``--client``."""

    def add_client(self, path: str) -> dict[str, Any]:
        """Read a load generator's per-request results and compare them with the journeys."""
        from .client import compare, read_client

        off = (self.traces or {}).get("join", {}).get("clock_offset_s", 0.0)
        self.client = compare(read_client(path), self.journeys, offset_s=off)
        return self.client

    @property
    def startup(self) -> list[Any]:
        """Start-up waterfalls from the loading spans (``traces.startup.Waterfall``), one per server start."""
        if not self.trace_spans:
            return []
        from .traces.startup import waterfalls

        off = (self.traces or {}).get("join", {}).get("clock_offset_s", 0.0)
        return waterfalls(self.trace_spans, offset_s=off)

    def events_of(self, *kinds: str) -> list[Event]:
        """Notable events of the given kinds, in order."""
        ks = set(kinds)
        return [e for e in self.notable if e.kind in ks]

    def server_for(self, e: Event) -> ServerRun | None:
        """The server run an event belongs to (by file and line)."""
        best = None
        for s in self.servers:
            if s.file == e.file and s.first_line <= e.line:
                best = s
        return best


class Pipeline:
    """Incremental analysis state; ``feed`` batches of events, then ``finish`` (or ``snapshot``)."""

    def __init__(
        self,
        max_notable: int = 200_000,
        journey_sink: Callable[[Journey], None] | None = None,
        keep_journeys: bool = True,
        traces: Any = None,
    ) -> None:
        self.journeys = JourneyBuilder(sink=journey_sink, keep=keep_journeys, compact=True)
        self.evicted = EvictedJourneys() if keep_journeys else None
        if self.evicted is not None:
            self.journeys.evicted_sink = self.evicted.add  # memory bounded by max_open, not by the log's size
        self.trace_spans: list[Any] = []
        self.trace_stats: Any = None
        self.joiner: Any = None
        if traces is not None:
            self.use_traces(traces)
        self.series = SeriesBuilder()
        self.notable: list[Event] = []
        self.max_notable = max_notable
        self.notable_dropped = 0
        self._sharer = Sharer()  # one copy of each repeated string/timestamp among the kept events
        self.kinds: Counter[str] = Counter()
        self.levels: Counter[str] = Counter()
        self.http_status: Counter[int] = Counter()
        self.http_paths: Counter[str] = Counter()
        self.servers: list[ServerRun] = []
        self.files: list[str] = []
        self.start_ts: datetime | None = None
        self.end_ts: datetime | None = None
        self._cur_file: str | None = None

    # -- trace spans
    def use_traces(self, traces: Any) -> None:
        """Join trace spans (a ``traces.TraceSet``) into the journeys; its start-up spans go to the Run."""
        from .traces.join import SpanJoiner

        if self.joiner is None:
            self.joiner = SpanJoiner(pid_of=self._pid_of, servers=lambda: self.servers,
                                     startup_spans=lambda: self.trace_spans)
            self.journeys.spans = self.joiner
        self.trace_stats = traces.stats
        for rs in traces.requests:
            self.joiner.add(rs)
        self.trace_spans.extend(traces.spans)

    def add_spans(self, items: Sequence[Any], now: float = 0.0) -> None:
        """Live: spans just received. A request span ends its journey if the builder holds it, else waits."""
        from .traces.otlp import RequestSpan

        if self.joiner is None:
            from .traces.otlp import TraceSet

            self.use_traces(TraceSet())
        for s in items:
            if isinstance(s, RequestSpan):
                if not self.journeys.add_span(s):
                    self.joiner.add(s, now)
            else:
                self.trace_spans.append(s)

    def _pid_of(self, file: str, index: int) -> str | None:
        for s in reversed(self.servers):
            if s.file == file and s.index == index:
                return s.api_pid
        return None

    def _traces_dict(self) -> dict[str, Any] | None:
        if self.joiner is None:
            return None
        d = self.trace_stats.to_dict() if self.trace_stats is not None else {}
        d["join"] = self.joiner.to_dict()
        return d

    # -- server runs
    def _server(self, e: Event) -> ServerRun:
        if self._cur_file != e.file:
            self._cur_file = e.file
            if e.file not in self.files:
                self.files.append(e.file)
            self._start_server(e)
        return self.servers[-1]

    def _start_server(self, e: Event) -> None:
        self.journeys.new_server(e.file)
        if self.servers and self.servers[-1].file == e.file:
            self.series.server += 1
        else:
            self.series.server = 0
        idx = sum(1 for s in self.servers if s.file == e.file)
        self.servers.append(ServerRun(e.file, idx, start_ts=e.ts, first_line=e.line))

    def feed(self, events: Sequence[Event]) -> None:
        """Fold a batch of events into the state.

        Decode-step lines (≈ 93 % of a handbook log) of an open journey take an inlined path: their
        kind/level counts, the server run's last line and the journey / per-second updates are done
        here without per-event method calls (same results as ``_one``, which handles everything else).
        """
        kinds = self.kinds
        jb = self.journeys
        jopen = jb.open
        sb = self.series
        sdec = sb.decode
        max_dec = sb._max_decode
        start = self.start_ts
        end = self.end_ts
        cur_file = self._cur_file
        srv = self.servers[-1] if self.servers else None
        fast_ok = srv is not None and srv.start_ts is not None and end is not None
        d = sdec[-1] if sdec else None
        dts = d.ts if d is not None and d.file == cur_file and d.server == sb.server else None
        nd = 0  # fast decode events not yet counted in kinds/levels
        last_ev: Event | None = None  # last fast event (server run's last line / end time)
        last_j: Journey | None = None  # last journey the fast path touched (JourneyBuilder._last)
        for e in events:
            ts = e.ts
            if fast_ok and e.kind == "decode_step" and e.level == "INFO" and ts is not None and e.file == cur_file:
                rid = e.request_id
                f = e.fields
                try:
                    step = f["step"]
                    bs = f["batch_size"] or 0
                    kv = f["kv_cache_usage"] or 0.0
                except KeyError:
                    rid = None  # a decode line without the usual fields: the general path
                if rid is not None:
                    nd += 1
                    last_ev = e
                    if ts is not end:  # the parser reuses one datetime per second: mostly the same object
                        if ts > end:
                            end = ts
                        elif ts < start:  # type: ignore[operator]
                            start = ts
                    # journey (JourneyBuilder.add's fast path)
                    j = jopen.get(rid)
                    if j is not None and (a := j.arrival_ts) is not None and (a is ts or ts >= a):
                        j.decode_steps += 1
                        if step is not None and step > j.max_step:
                            j.max_step = step
                        if j.first_token_ts is None:
                            j.first_token_ts = ts
                        lt = j.last_token_ts
                        if lt is not ts and (lt is None or ts > lt):
                            j.last_token_ts = ts
                        le = e.line_end
                        if le > j.last_line:
                            j.last_line = le
                        if ts.microsecond:
                            j.ts_resolution_s = 0.001
                        j.last_kind = "decode_step"
                        last_j = j
                    else:
                        if last_j is not None:
                            jb._last, jb._last_kind = last_j, "decode_step"
                            last_j = None
                        jb.add(e)
                    # per-second decode aggregate (SeriesBuilder._decode)
                    if ts is not dts and ts != dts:
                        if len(sdec) >= max_dec:
                            sb.dropped += 1
                            continue
                        d = DecodeSecond(ts, cur_file, e.line, server=sb.server)
                        sdec.append(d)
                        dts = ts
                    d.steps += 1  # type: ignore[union-attr]
                    d.batch_size_sum += bs  # type: ignore[union-attr]
                    if bs > d.batch_size_max:  # type: ignore[union-attr]
                        d.batch_size_max = bs  # type: ignore[union-attr]
                    d.kv_sum += kv  # type: ignore[union-attr]
                    if kv > d.kv_max:  # type: ignore[union-attr]
                        d.kv_max = kv  # type: ignore[union-attr]
                    reqs = d.requests  # type: ignore[union-attr]
                    if len(reqs) < 4096:
                        reqs.add(rid)
                    continue
            # anything else: bring the pending fast-path state up to date, then the general path
            if nd:
                kinds["decode_step"] += nd
                self.levels["INFO"] += nd
                nd = 0
                srv.last_line = last_ev.line_end  # type: ignore[union-attr]
                srv.end_ts = last_ev.ts  # type: ignore[union-attr]
                srv.generation = "handbook"  # type: ignore[union-attr]
            if last_j is not None:
                jb._last, jb._last_kind = last_j, "decode_step"
                last_j = None
            if ts is not None:
                if start is None or ts < start:
                    start = ts
                if end is None or ts > end:
                    end = ts
            self._one(e)
            cur_file = self._cur_file
            srv = self.servers[-1]
            fast_ok = srv.start_ts is not None and end is not None
            d = sdec[-1] if sdec else None
            dts = d.ts if d is not None and d.file == cur_file and d.server == sb.server else None
        if nd:
            kinds["decode_step"] += nd
            self.levels["INFO"] += nd
            srv.last_line = last_ev.line_end  # type: ignore[union-attr]
            srv.end_ts = last_ev.ts  # type: ignore[union-attr]
            srv.generation = "handbook"  # type: ignore[union-attr]
        if last_j is not None:
            jb._last, jb._last_kind = last_j, "decode_step"
        self.start_ts = start
        self.end_ts = end

    def _one(self, e: Event) -> None:
        """Fold one event in (the general path; ``start_ts``/``end_ts`` are kept by ``feed``)."""
        srv = self._server(e)
        k = e.kind
        self.kinds[k] += 1
        if e.level:
            self.levels[e.level] += 1
        ts = e.ts
        if k in LIFECYCLE:
            srv = self._lifecycle(srv, e)
        elif k == "config_error" and (srv.ready or srv.shutdown) and e.text.find(": error: ") >= 0:
            # argparse rejecting the command line ("vllm: error: unrecognized arguments …") after the server had served
            # or stopped: the process was started again (a container restart) and failed before printing a banner
            self._start_server(e)
            srv = self.servers[-1]
        if srv.start_ts is None and ts is not None:
            srv.start_ts = ts
        srv.last_line = e.line_end
        if ts is not None:
            srv.end_ts = ts
        p = e.process
        if p is not None and srv.api_pid is None and p.startswith("APIServer"):
            i = p.find("pid=")
            if i >= 0:
                srv.api_pid = p[i + 4:].split(",")[0].split()[0]
        if srv.generation is None and e.source is not None:
            srv.generation = "v1" if e.text.find("[" + e.source) >= 0 else "v0"
        if k == "decode_step" or k == "request_queued":
            srv.generation = "handbook"
        if e.request_id is not None or k == "http_access" or k == "request_aborted":
            self.journeys.add(e)
        if k == "engine_stats" or k == "decode_step" or k == "request_scheduled":
            self.series.add(e)
        if k == "http_access":
            st = e.fields.get("http_status")
            if st is not None:
                self.http_status[st] += 1
                srv.http_status[st] += 1
                if e.fields.get("method") == "POST":
                    srv.api_requests += 1
                    if st < 300 and len(srv.served_hosts) < SERVED_HOSTS_CAP:
                        host = client_host(e.fields.get("client"))
                        if host:
                            srv.served_hosts.add(host)
                self.http_paths[e.fields.get("path") or "?"] += 1
                if st >= 400:
                    self._keep(e)
            return
        if not srv.ready and "_failed" not in srv.config and k in _START_FAIL and (k != "traceback" or e.fields.get("exc_type")):
            srv.config["_failed"] = e.line  # a start-up that failed: a later engine config is a new attempt
        if k == "progress" and e.text.find("Processed prompts") >= 0:
            srv.offline_last = e  # the latest offline progress bar (a rollout that stops updating it has stalled)
            if "_offline_progress" not in srv.config and is_offline_progress(e):
                srv.config["_offline_progress"] = e.line  # offline LLM.generate at work: the first such bar is kept
                self._keep(e)
        if k == "nccl_debug" and e.fields.get("severity") in ("WARN", "ERROR"):
            self._keep(e)  # NCCL_DEBUG's warnings are the evidence of a transport failure; its INFO lines are volume
        if k not in HIGH_VOLUME:
            if (k == "shutdown_step" and e.fields.get("action") == "shutdown triggered") or (
                k == "log" and e.text.find("[shutdown] API server: shutdown triggered") >= 0
            ):
                self.journeys.shutdown(e)  # V1 0.23+ graceful shutdown (parser kind `shutdown_step`)
            self._keep(e)

    def _keep(self, e: Event) -> None:
        if len(self.notable) < self.max_notable:
            self.notable.append(self._sharer.share(e))
        else:
            self.notable_dropped += 1

    def _lifecycle(self, srv: ServerRun, e: Event) -> ServerRun:
        k = e.kind
        f = e.fields
        # a new banner/args/engine-config after the server was ready or shut down = a restart; so is a
        # second banner or argument line in a run that never got ready (a failed start, then a retry)
        seen = "_banner_seen" if k == "server_version" else "_args_seen"
        if k in ("server_version", "server_args") and (srv.ready or srv.shutdown or srv.config.get(seen)):
            self._start_server(e)
            srv = self.servers[-1]
        if k in ("server_version", "server_args"):
            srv.config[seen] = True
        elif k == "engine_config" and srv.config.get("_engine_config_seen") and (
                srv.ready or srv.config.get("_failed") or (f.get("version") and srv.version and f["version"] != srv.version)):
            # a new engine after the last one served, failed to start, or with another vLLM version: a new start (an
            # offline LLM(...) tried again in the same session, a retried start-up)
            self._start_server(e)
            srv = self.servers[-1]
        if k == "server_version":
            srv.version = srv.version or f.get("version")
            if f.get("model"):
                srv.model = srv.model or f["model"]
        elif k == "server_args":
            for key, v in f.items():
                if key != "args":
                    srv.args.setdefault(key, v)
            if f.get("model"):
                srv.model = srv.model or f["model"]
        elif k == "engine_config":
            srv.config["_engine_config_seen"] = True
            if f.get("version"):
                srv.version = srv.version or f["version"]
            if f.get("model"):
                srv.model = srv.model or f["model"]
            for key in ("max_model_len", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                        "enable_prefix_caching", "dtype", "quantization", "enforce_eager"):
                if key in f:
                    srv.config.setdefault(key, f[key])
        elif k in ("server_ready",):
            srv.ready = True
            srv.ready_ts = srv.ready_ts or e.ts
        elif k in ("server_shutdown", "server_stopped"):
            srv.shutdown = True
            self.journeys.shutdown(e)
        elif k in ("kv_cache_size", "kv_cache_blocks", "kv_cache_memory", "max_model_len", "model_loaded", "model_architecture"):
            for key, v in f.items():
                srv.config[key] = v
        elif k == "server_model":
            srv.model = srv.model or f.get("model")
        return srv

    def snapshot(self, stats: ParseStats | None = None) -> Run:
        """The current state as a ``Run`` (journeys still open are included as unfinished)."""
        return self._run(self.journeys.snapshot(), stats)

    def finish(self, stats: ParseStats | None = None) -> Run:
        """End of input: close open journeys and return the ``Run``."""
        self._sharer.clear()
        return self._run(self.journeys.finish(), stats)

    def _run(self, journeys: list[Journey], stats: ParseStats | None) -> Run:
        return Run(
            files=list(self.files), servers=self.servers, journeys=journeys, series=self.series,
            notable=self.notable, kinds=self.kinds, levels=self.levels, http_status=self.http_status,
            http_paths=self.http_paths, parse_stats=stats or ParseStats(), start_ts=self.start_ts,
            end_ts=self.end_ts, notable_dropped=self.notable_dropped, trace_spans=self.trace_spans,
            traces=self._traces_dict(), journeys_evicted=self.journeys.evicted,
            evicted=self.evicted if self.evicted else None,
        )


def load(
    paths: Sequence[str] | str,
    *,
    year: int | None = None,
    progress: Callable[[int], None] | None = None,
    traces: Sequence[str] | Any = None,
) -> Run:
    """Parse inputs and build the ``Run`` (journeys, series, server runs, notable events).

    ``traces``: OTLP JSON trace files (or a ``traces.TraceSet``) whose spans join the journeys."""
    st = ParseStats()
    pipe = Pipeline(traces=read_trace_input(traces))
    paths = [os.fspath(paths)] if isinstance(paths, (str, os.PathLike)) else [os.fspath(p) for p in paths]
    many = len(paths) > 1
    with bulk_gc():
        for batch in iter_batches(paths, year=year, stats=st, progress=progress, skip_unreadable=many):
            pipe.feed(batch)
        return pipe.finish(st)


def read_trace_input(traces: Sequence[str] | Any) -> Any:
    """``--traces`` paths → a ``TraceSet`` (None/empty → None; a ``TraceSet`` passes through)."""
    if traces is None or (not isinstance(traces, str) and hasattr(traces, "__len__") and len(traces) == 0):
        return None
    if hasattr(traces, "requests") and hasattr(traces, "stats"):
        return traces
    from .traces.otlp import read_traces

    return read_traces(traces)


#: Generation-0 threshold while a file is parsed in bulk (Python's default is 700).
BULK_GC_THRESHOLD = 50_000


@contextmanager
def bulk_gc() -> Iterator[None]:
    """Fewer cyclic-GC passes while batches of events are parsed and folded.

    A batch holds ~8k ``Event`` objects (plus their field dicts) until it is folded, so with the default
    threshold (700) every event outlives a few young-generation passes and is promoted and traversed
    again in older generations — 15–20 % of the CPU of ``load`` on a decode-heavy log, for nothing
    (events form no cycles). A larger young-generation threshold lets them die young; cycles are still
    collected. The previous thresholds are restored afterwards.
    """
    old = gc.get_threshold()
    if old[0] and old[0] < BULK_GC_THRESHOLD:
        gc.set_threshold(BULK_GC_THRESHOLD, max(old[1], 20), max(old[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*old)
