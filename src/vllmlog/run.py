"""One pipeline, two drivers: events → journeys, series, server runs and notable events → ``Run``.

``analyze`` feeds it a file as fast as it can; ``watch`` feeds it whatever arrived in the last
moment. Both call ``Pipeline.feed(batch)``; rules read the resulting ``Run``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Sequence

from .journeys import Journey, JourneyBuilder
from .model import Event
from .reader import ParseStats, iter_batches
from .series import SeriesBuilder

#: Kinds that can come in millions and are summarised (journeys, series, counters), not kept.
HIGH_VOLUME = frozenset({
    "decode_step", "response_generated", "request_received", "request_added", "request_queued",
    "request_scheduled", "prefill_started", "prefill_completed", "http_access", "engine_stats",
    "nccl_debug", "progress", "server_route", "blank", "request_details", "iteration_stats",
})
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

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {
            "file": self.file, "index": self.index,
            "start_ts": self.start_ts.isoformat() if self.start_ts else None,
            "ready_ts": self.ready_ts.isoformat() if self.ready_ts else None,
            "end_ts": self.end_ts.isoformat() if self.end_ts else None,
            "first_line": self.first_line, "last_line": self.last_line, "version": self.version,
            "model": self.model, "generation": self.generation, "args": self.args, "config": self.config,
            "ready": self.ready, "shutdown": self.shutdown,
        }


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
    ) -> None:
        self.journeys = JourneyBuilder(sink=journey_sink, keep=keep_journeys)
        self.series = SeriesBuilder()
        self.notable: list[Event] = []
        self.max_notable = max_notable
        self.notable_dropped = 0
        self.kinds: Counter[str] = Counter()
        self.levels: Counter[str] = Counter()
        self.http_status: Counter[int] = Counter()
        self.http_paths: Counter[str] = Counter()
        self.servers: list[ServerRun] = []
        self.files: list[str] = []
        self.start_ts: datetime | None = None
        self.end_ts: datetime | None = None
        self._cur_file: str | None = None

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
        """Fold a batch of events into the state."""
        for e in events:
            srv = self._server(e)
            k = e.kind
            self.kinds[k] += 1
            if e.level:
                self.levels[e.level] += 1
            ts = e.ts
            if ts is not None:
                if self.start_ts is None or ts < self.start_ts:
                    self.start_ts = ts
                if self.end_ts is None or ts > self.end_ts:
                    self.end_ts = ts
            if k in LIFECYCLE:
                srv = self._lifecycle(srv, e)
            if srv.start_ts is None and ts is not None:
                srv.start_ts = ts
            srv.last_line = e.line_end
            if ts is not None:
                srv.end_ts = ts
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
                    self.http_paths[e.fields.get("path") or "?"] += 1
                    if st >= 400:
                        self._keep(e)
                continue
            if k not in HIGH_VOLUME:
                if (k == "shutdown_step" and e.fields.get("action") == "shutdown triggered") or (
                    k == "log" and e.text.find("[shutdown] API server: shutdown triggered") >= 0
                ):
                    self.journeys.shutdown(e)  # V1 0.23+ graceful shutdown (parser kind `shutdown_step`)
                self._keep(e)

    def _keep(self, e: Event) -> None:
        if len(self.notable) < self.max_notable:
            self.notable.append(e)
        else:
            self.notable_dropped += 1

    def _lifecycle(self, srv: ServerRun, e: Event) -> ServerRun:
        k = e.kind
        f = e.fields
        # a new banner/args/engine-config after the server was ready or shut down = a restart
        if k in ("server_version", "server_args") and (srv.ready or srv.shutdown):
            self._start_server(e)
            srv = self.servers[-1]
        elif k == "engine_config" and srv.ready and srv.config.get("_engine_config_seen"):
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
        return self._run(self.journeys.finish(), stats)

    def _run(self, journeys: list[Journey], stats: ParseStats | None) -> Run:
        return Run(
            files=list(self.files), servers=self.servers, journeys=journeys, series=self.series,
            notable=self.notable, kinds=self.kinds, levels=self.levels, http_status=self.http_status,
            http_paths=self.http_paths, parse_stats=stats or ParseStats(), start_ts=self.start_ts,
            end_ts=self.end_ts, notable_dropped=self.notable_dropped,
        )


def load(
    paths: Sequence[str] | str,
    *,
    year: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Run:
    """Parse inputs and build the ``Run`` (journeys, series, server runs, notable events)."""
    st = ParseStats()
    pipe = Pipeline()
    for batch in iter_batches(paths, year=year, stats=st, progress=progress):
        pipe.feed(batch)
    return pipe.finish(st)
