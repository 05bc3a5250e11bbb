"""Shared helpers for rules: per-server views of a Run, evidence lines inside multi-line records,
graceful-shutdown context, stretch sampling, number formatting."""

from __future__ import annotations

import bisect
import re
import weakref
from dataclasses import dataclass, field
from datetime import datetime
from statistics import median
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..model import Event
from ..run import is_offline_progress  # noqa: F401 - the fold's own test, used by ServerView and was_serving
from .base import Evidence

if TYPE_CHECKING:
    from ..journeys import Journey
    from ..run import Run, ServerRun
    from ..series import DecodeSecond, StatsSample

#: Lines that start a deliberate stop (SIGTERM, Ctrl-C, uvicorn shutdown); errors after them are noise.
GRACEFUL = re.compile(
    # a signal that was received — not any mention ("SIGTERM handler is not set because current thread is not the
    # main thread", Ray's start-up warning, is no shutdown)
    r"shutdown triggered|received signal|signal=SIG(?:TERM|INT)|(?:received|got|caught|sending|sent)\s+SIG(?:TERM|INT)\b|"
    r"\bSIG(?:TERM|INT)\b(?!\s+handler)(?=.*(?:received|shutting|terminat|stop|exit))|KeyboardInterrupt|"
    r"^(?:\S+ )?INFO:\s+Shutting down|Shutting down\.?$|Shutting down FastAPI HTTP server|gracefully shutting down",
)
UNEXPECTED = re.compile(r"unexpected", re.I)
#: literals one of which every ``GRACEFUL`` match contains (a cheap prefilter: the regex has no literal prefix and
#: searching it on every kept event's first line was ~2 s of a 1 M-line analysis)
_GRACEFUL_LITERALS = ("SIG", "hutting down", "KeyboardInterrupt", "shutdown triggered", "received signal")


def is_graceful(first_line: str) -> bool:
    """The line tells of a requested shutdown (``GRACEFUL``), prefiltered by its literals."""
    for lit in _GRACEFUL_LITERALS:
        if lit in first_line:
            return GRACEFUL.search(first_line) is not None
    return False


def kinds_of(e: Event) -> set[str]:
    """The event's kind plus the kinds its exception messages matched (``exc_kind``, and ``exc_kinds`` for
    a chain whose earlier exception — the cause — matched too)."""
    k = {e.kind}
    x = e.fields.get("exc_kind")
    if x:
        k.add(x)
    xs = e.fields.get("exc_kinds")
    if xs:
        k.update(xs)
    return k


def num(v: Any) -> float | None:
    """A field value as a float (fields may arrive as strings); None when not a number."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def _lines(e: Event) -> list[str] | None:
    lines = e.text.split("\n")
    return lines if len(lines) == e.line_end - e.line + 1 else None


def ev(e: Event, *needles: str, last: bool = True) -> Evidence:
    """Evidence for a record: the physical line holding one of ``needles`` (searched from the bottom,
    in order of preference), else the exception line, else the first line."""
    lines = _lines(e)
    if lines is None or len(lines) == 1:
        return Evidence(e.file, e.line, e.text.split("\n", 1)[0])
    order = range(len(lines) - 1, -1, -1) if last else range(len(lines))
    cands = [n for n in needles if n]
    xt, xm = e.fields.get("exc_type"), e.fields.get("exc_message")
    if xm:
        cands.append(str(xm)[:60])
    if xt:
        cands.append(f"{str(xt).rsplit('.', 1)[-1]}:")
    for n in cands:
        for i in order:
            if n in lines[i]:
                return Evidence(e.file, e.line + i, lines[i])
    return Evidence(e.file, e.line, lines[0])


def first(e: Event) -> Evidence:
    """Evidence for the first physical line of a record."""
    return Evidence(e.file, e.line, e.text.split("\n", 1)[0])


def find_line(e: Event, pattern: re.Pattern[str]) -> Evidence | None:
    """The first physical line of a record matching ``pattern`` (None when none does)."""
    lines = _lines(e) or [e.text.split("\n", 1)[0]]
    for i, ln in enumerate(lines):
        if pattern.search(ln):
            return Evidence(e.file, e.line + i, ln)
    return None


def dedupe(evs: Iterable[Evidence | None], limit: int = 12) -> list[Evidence]:
    """Evidence without duplicates (same file and line) or Nones, order kept, at most ``limit``."""
    seen: set[tuple[str, int]] = set()
    out: list[Evidence] = []
    for x in evs:
        if x is None or (x.file, x.line) in seen:
            continue
        seen.add((x.file, x.line))
        out.append(x)
        if len(out) >= limit:
            break
    return out


def sample_ev(s: StatsSample) -> Evidence:
    """Evidence for a stats sample (text filled in later by ``diagnose``; a rendering when it cannot be)."""
    parts = []
    if s.prompt_throughput is not None:
        parts.append(f"Avg prompt throughput: {s.prompt_throughput:.1f} tokens/s")
    if s.generation_throughput is not None:
        parts.append(f"Avg generation throughput: {s.generation_throughput:.1f} tokens/s")
    for name, val in (("Running", s.running), ("Waiting", s.waiting), ("Swapped", s.swapped)):
        if val is not None:
            parts.append(f"{name}: {val} reqs")
    if s.kv_cache_usage is not None:
        parts.append(f"KV cache usage: {s.kv_cache_usage * 100:.1f}%")
    return Evidence(s.file, s.line, "", fallback="[stats] " + ", ".join(parts))


class FileIndex:
    """The journeys and decode seconds of one input file, indexed once per Run and shared by the views of
    that file's server runs (rules that look at a whole file read these instead of filtering the Run's lists
    per server run, which made the diagnosis quadratic in server runs). Sequences are tuples: shared, not
    to be changed."""

    __slots__ = ("journeys", "decode", "_arrivals", "_by_request", "_kv_at_least", "_kv_max")

    def __init__(self) -> None:
        self.journeys: list[Journey] | tuple[Journey, ...] = []
        """Journeys of the file, in ``run.journeys`` order."""
        self.decode: list[DecodeSecond] | tuple[DecodeSecond, ...] = []
        """Handbook decode seconds of the file, in ``run.series.decode`` order."""
        self._arrivals: list[datetime] | None = None
        self._by_request: dict[str, Journey] | None = None
        self._kv_at_least: dict[float, tuple[DecodeSecond, ...]] = {}
        self._kv_max: float | None = None

    def arrivals(self) -> list[datetime]:
        """Arrival times of the file's journeys, sorted (computed once; do not change the list)."""
        if self._arrivals is None:
            self._arrivals = sorted(j.arrival_ts for j in self.journeys if j.arrival_ts is not None)
        return self._arrivals

    def by_request(self) -> dict[str, Journey]:
        """The file's journeys by request id (the last one of an id wins; computed once)."""
        if self._by_request is None:
            index = getattr(self.journeys, "by_request", None)  # a JourneyTable range: an index, not a dict of rows
            self._by_request = index() if index is not None else {j.request_id: j for j in self.journeys}
        return self._by_request

    def decode_kv_at_least(self, kv: float) -> tuple[DecodeSecond, ...]:
        """Decode seconds whose peak KV usage is ≥ ``kv`` (file order; computed once per threshold)."""
        hit = self._kv_at_least.get(kv)
        if hit is None:
            hit = self._kv_at_least[kv] = tuple(d for d in self.decode if d.kv_max >= kv)
        return hit

    def decode_kv_max(self) -> float | None:
        """Peak KV usage of the file's decode seconds (None without any)."""
        if self._kv_max is None and self.decode:
            self._kv_max = max(d.kv_max for d in self.decode)
        return self._kv_max


@dataclass
class ServerView:
    """One server run (start → end) of one file, with its notable events and stats samples, and its
    journeys and decode seconds indexed once (``servers()``), so a rule's pass over all server runs is
    linear in the Run, not in (server runs × Run)."""

    srv: ServerRun
    events: list[Event] = field(default_factory=list)
    stats: list[StatsSample] = field(default_factory=list)
    journeys: list[Journey] = field(default_factory=list)
    """Journeys of this server run (``j.file == file and j.server == index``), in ``run.journeys`` order."""
    decode: list[DecodeSecond] = field(default_factory=list)
    """Handbook decode seconds of this server run, in ``run.series.decode`` order."""
    in_file: FileIndex = field(default_factory=FileIndex)
    """Journeys and decode seconds of the whole input file (shared by the file's server runs)."""
    ready_line: int | None = None
    """First line that shows the server serving (ready line, or first stats line); None if it never did."""
    graceful_line: int | None = None
    """First line of a deliberate shutdown (SIGTERM, Ctrl-C); None when the run did not stop that way."""
    peer_serving: list[tuple[datetime, datetime | None]] = field(default_factory=list)
    """For a worker/engine-only log (no API-server line of its own, another input file is the API
    server's log): when the servers of the other files were serving (ready time, end time)."""
    _kinds: Any = field(default=None, repr=False, compare=False)
    """``of``'s index: (events indexed, kind → positions, lines when in order)."""

    @property
    def file(self) -> str:
        """Input file of this server run."""
        return self.srv.file

    @property
    def index(self) -> int:
        """Index of the server run within its file."""
        return self.srv.index

    def of(self, *kinds: str, before: int | None = None, after: int | None = None) -> list[Event]:
        """Events whose kind, exc_kind or one of exc_kinds is one of ``kinds`` (optionally between two lines)."""
        evs = self.events
        idx = self._kinds
        if idx is None or idx[0] != len(evs):  # by kind once per view (rules ask a view many times)
            by: dict[str, list[int]] = {}
            for p, e in enumerate(evs):
                for k in kinds_of(e):
                    by.setdefault(k, []).append(p)
            lines = [e.line for e in evs]
            ordered = all(a <= b for a, b in zip(lines, lines[1:]))
            idx = self._kinds = (len(evs), by, lines if ordered else None)
        by, lines = idx[1], idx[2]
        if len(kinds) == 1:
            pos: Sequence[int] = by.get(kinds[0], ())
        else:
            pos = sorted({p for k in kinds for p in by.get(k, ())})
        cut = len(evs)
        if before is not None:  # the scan stopped at the first event at or after ``before``
            if lines is not None:
                cut = bisect.bisect_left(lines, before)
            else:
                cut = next((p for p, e in enumerate(evs) if e.line >= before), cut)
        return [evs[p] for p in pos if p < cut and (after is None or evs[p].line > after)]

    def serving(self, line: int) -> bool:
        """True when ``line`` comes after the server became ready."""
        return self.ready_line is not None and line > self.ready_line

    def in_shutdown(self, line: int) -> bool:
        """True when ``line`` comes after a deliberate shutdown started."""
        return self.graceful_line is not None and line >= self.graceful_line

    def by_engine(self) -> dict[Any, list[StatsSample]]:
        """Stats samples grouped by engine index (stats lines, or Prometheus history merged with
        ``--prometheus``; time order)."""
        groups: dict[Any, list[StatsSample]] = {}
        for s in self.stats:
            if s.source_kind != "engine_stats" and s.source_kind != "prometheus":
                continue
            groups.setdefault((s.engine, s.process if s.engine is None else None), []).append(s)
        return groups


@dataclass
class RunIndex:
    """What the rules look up across a Run, indexed once: the per-server views, per-file indexes,
    notable events by kind, journey counts and the API request count."""

    views: list[ServerView]
    files: dict[str, FileIndex]
    by_kind: dict[str, list[Event]]
    api_requests: int
    """Requests seen in API access lines (``/v1/…`` except ``/v1/models``)."""


_CACHE: list[tuple[Any, tuple[int, ...], RunIndex]] = []
"""(weak reference to a Run, its size, its index): the rules of one diagnose pass share the views."""


def servers(run: Run) -> list[ServerView]:
    """Per-server views of a run (cached per Run object)."""
    return run_index(run).views


def run_index(run: Run) -> RunIndex:
    """The Run's index (built once per Run object; a Run fed more events since is rebuilt)."""
    size = (len(run.notable), len(run.series.stats), len(run.servers), len(run.journeys),
            len(getattr(run.series, "decode", ())))
    for ref, n, idx in _CACHE:
        if ref() is run and n == size:
            return idx
    idx = _build_index(run)
    try:
        _CACHE.append((weakref.ref(run), size, idx))
    except TypeError:  # not weak-referenceable: keep it for this pass only
        _CACHE.append((lambda r=run: r, size, idx))
    if len(_CACHE) > 4:
        _CACHE.pop(0)
    return idx


def _build_index(run: Run) -> RunIndex:
    views = [ServerView(s) for s in run.servers]
    by_file: dict[str, list[ServerView]] = {}
    for v in views:
        by_file.setdefault(v.file, []).append(v)
    files: dict[str, FileIndex] = {}
    for f, vs in by_file.items():
        fi = files[f] = FileIndex()
        for v in vs:
            v.in_file = fi
    by_server = {(v.file, v.index): v for v in views}
    groups = getattr(run.journeys, "groups", None)
    groups = groups() if groups is not None else None
    if groups is not None:  # a JourneyTable: each server run's journeys are one range of it, each file's too
        span: dict[str, list[int]] = {}
        for f, srv, a, b in groups:
            if f not in files:
                files[f] = FileIndex()
            sp = span.setdefault(f, [a, b])
            sp[1] = b
            v = by_server.get((f, srv))
            if v is not None:
                v.journeys = run.journeys[a:b]
        for f, (a, b) in span.items():
            files[f].journeys = run.journeys[a:b]
    for j in (() if groups is not None else run.journeys):
        fi = files.get(j.file)
        if fi is None:
            fi = files[j.file] = FileIndex()
        fi.journeys.append(j)  # type: ignore[union-attr]
        v = by_server.get((j.file, getattr(j, "server", None)))
        if v is not None:
            v.journeys.append(j)
    for d in getattr(run.series, "decode", ()):
        fi = files.get(d.file)
        if fi is None:
            fi = files[d.file] = FileIndex()
        fi.decode.append(d)  # type: ignore[union-attr]
        v = by_server.get((d.file, d.server))
        if v is not None:
            v.decode.append(d)
    for fi in files.values():
        fi.journeys, fi.decode = (tuple(fi.journeys) if type(fi.journeys) is list else fi.journeys), tuple(fi.decode)
    by_kind: dict[str, list[Event]] = {}
    for e in run.notable:
        by_kind.setdefault(e.kind, []).append(e)
    paths = getattr(run, "http_paths", None) or {}
    api = sum(c for p, c in paths.items() if p.startswith("/v1/") and not p.startswith("/v1/models"))
    _fill_views(run, views, by_file)
    return RunIndex(views, files, by_kind, api)


def _fill_views(run: Run, views: list[ServerView], by_file: dict[str, list[ServerView]]) -> None:
    starts = {f: [v.srv.first_line for v in vs] for f, vs in by_file.items()}

    def view_for(file: str, line: int, server: int | None = None) -> ServerView | None:
        vs = by_file.get(file)
        if not vs:
            return None
        if server is not None and 0 <= server < len(vs):
            return vs[server]
        i = bisect.bisect_right(starts[file], line) - 1
        return vs[max(i, 0)]

    for e in run.notable:
        v = view_for(e.file, e.line)
        if v is None:
            continue
        v.events.append(e)
        if e.kind == "server_ready" and v.ready_line is None:
            v.ready_line = e.line
        if v.graceful_line is None and is_graceful(e.text.split("\n", 1)[0]) and not UNEXPECTED.search(e.text):
            v.graceful_line = e.line
    for s in run.series.stats:
        v = view_for(s.file, s.line, s.server)
        if v is not None:
            v.stats.append(s)
    firsts: dict[tuple[str, int], int] = {}
    for j in run.journeys:
        if j.first_line:
            key = (j.file, getattr(j, "server", 0) or 0)
            firsts[key] = min(firsts.get(key, j.first_line), j.first_line)
    for v in views:
        if v.ready_line is None:
            if v.srv.ready:
                v.ready_line = v.srv.first_line
            elif v.stats:
                v.ready_line = v.stats[0].line - 1
            elif (v.file, v.index) in firsts:  # an excerpt that starts mid-serving: requests show it was up
                v.ready_line = firsts[(v.file, v.index)] - 1
            else:  # offline inference (LLM.generate, an RL rollout): its progress bar shows prompts processed
                done = next((e for e in v.events if is_offline_progress(e)), None)
                if done is not None:
                    v.ready_line = done.line - 1
    if len(by_file) > 1:
        up = [(w.file, t, w.srv.end_ts) for w in views if w.ready_line is not None
              for t in [w.srv.ready_ts or (w.stats[0].ts if w.stats else None)] if t is not None]
        for v in views:
            if v.ready_line is None and not any(e.kind in _API_KINDS for e in v.events):
                v.peer_serving = [(t, end) for f, t, end in up if f != v.file]


def interval_s(samples: Sequence[StatsSample]) -> float:
    """Typical seconds between consecutive stats samples (10 s when unknown)."""
    d = [
        (b.ts - a.ts).total_seconds() for a, b in zip(samples, samples[1:])
        if a.ts is not None and b.ts is not None and b.ts > a.ts
    ]
    return median(d) if d else 10.0


def stretches(samples: Sequence[Any], pred: Callable[[Any], bool]) -> list[list[Any]]:
    """Maximal runs of consecutive items satisfying ``pred``."""
    out: list[list[Any]] = []
    cur: list[Any] = []
    for s in samples:
        if pred(s):
            cur.append(s)
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def duration_s(items: Sequence[Any]) -> float:
    """Seconds from the first to the last item's ``ts``."""
    if not items or items[0].ts is None or items[-1].ts is None:
        return 0.0
    return (items[-1].ts - items[0].ts).total_seconds()


def pick(items: Sequence[Any], interval: float | None = None, limit: int = 10) -> list[Any]:
    """A telling sample of a stretch: the first three, the middle, quintiles, the first item after
    each time gap, and the last (at most ``limit``)."""
    n = len(items)
    if n <= 7:
        return list(items)
    idx = {0, 1, 2, n // 2, n - 1}
    idx.update(round(k * (n - 1) / 5) for k in range(6))
    if interval:
        for i in range(1, n):
            a, b = items[i - 1].ts, items[i].ts
            if a is not None and b is not None and (b - a).total_seconds() > 3 * interval:
                idx.add(i)
    keep = sorted(idx)
    if len(keep) > limit:
        must = {0, n - 1} | {i for i in keep if i not in (0, n - 1)}
        keep = sorted(must)[: limit - 1] + [n - 1]
    return [items[i] for i in sorted(set(keep))]


def pct(x: float | None) -> str:
    """0.953 → '95.3%'."""
    return "?" if x is None else f"{x * 100:.1f}%"


def ints(x: float | int | None) -> str:
    """28672 → '28,672'."""
    return "?" if x is None else f"{int(x):,}"


def secs(x: float | None) -> str:
    """A duration in words: 75 → '75 s', 3900 → '65 min'."""
    if x is None:
        return "?"
    if x >= 600:
        return f"{x / 60:.0f} min"
    return f"{x:.0f} s" if x >= 10 else f"{x:.1f} s"


def ts_range(items: Sequence[Any]) -> tuple[datetime | None, datetime | None]:
    """(first ts, last ts) of events/samples that have one."""
    tss = [x.ts for x in items if getattr(x, "ts", None) is not None]
    return (min(tss), max(tss)) if tss else (None, None)


def request_count(run: Run, file: str | None = None) -> int:
    """Number of distinct requests seen (journeys, or API access lines when larger)."""
    idx = run_index(run)
    if file is None:
        j = len(run.journeys)
    else:
        fi = idx.files.get(file)
        j = len(fi.journeys) if fi is not None else 0
    if file is not None and len(run.files) > 1:
        return j  # access-line counts are not kept per file
    return max(j, idx.api_requests)


def arg(v: ServerView, *names: str) -> Any:
    """A server argument or start-up fact (args first, then config)."""
    for n in names:
        if n in v.srv.args and v.srv.args[n] is not None:
            return v.srv.args[n]
        if n in v.srv.config and v.srv.config[n] is not None:
            return v.srv.config[n]
    return None


MEMORY_HINT = re.compile(r"memory|profil|cache|max_num|too short|too long|exceed|oom|mm tokens|multi-modal", re.I)


def context_warnings(v: ServerView, before_line: int, ts: datetime | None, limit: int = 2, window_s: float = 60) -> list[Evidence]:
    """WARNING lines shortly before a failure that mention memory/profiling/cache (the usual hints)."""
    out: list[Evidence] = []
    for e in reversed(v.events):
        if e.line >= before_line:
            continue
        if ts is not None and e.ts is not None and (ts - e.ts).total_seconds() > window_s:
            break
        if e.level == "WARNING" and e.kind != "python_warning" and MEMORY_HINT.search(e.text):
            out.append(first(e))
            if len(out) >= limit:
                break
    return list(reversed(out))


STARTUP_FAIL = ("engine_start_failed", "process_crashed", "engine_start_timeout")


def startup_failure_lines(v: ServerView, after_line: int, limit: int = 8) -> list[Evidence]:
    """The 'engine failed to start' lines that follow a start-up root cause."""
    out: list[Evidence] = []
    for e in v.events:
        if e.line <= after_line:
            continue
        if e.kind in STARTUP_FAIL or e.fields.get("exc_kind") == "engine_start_failed":
            if e.kind == "engine_start_failed" and e.level == "ERROR":
                out.append(first(e))
            out.append(ev(e, "initialization failed", "failed to start"))
            if e.line != e.line_end and e.fields.get("exc_message"):
                out.append(ev(e))
                out += exc_lines(e)
            if len(out) >= limit:
                break
    return out


def rid_base(rid: str) -> str:
    """Request id without V1's engine suffix (``-1a2b3c4d``)."""
    m = re.match(r"^(.+)-[0-9a-f]{8}$", rid)
    return m.group(1) if m else rid


_AFTER = re.compile(r"Dumping (?:input data|scheduler stats)|Parent process exited|terminating worker")


@dataclass
class Aftermath:
    """What followed an engine death: telling lines and the damage (failed requests, HTTP 5xx)."""

    evidence: list[Evidence]
    failed_requests: int
    http_5xx: int
    last_ts: datetime | None


def aftermath(v: ServerView, root: Event, window_s: float = 120.0) -> Aftermath:
    """Lines after an engine death (fatal error, EngineDeadError, failed requests, 500s) in order of value."""
    t0 = root.ts
    key: list[Evidence] = []
    ctx: list[Evidence] = []
    failed: list[Event] = []
    e500: list[Event] = []
    tail: list[Evidence] = []
    last = t0
    for e in v.events:
        if e.line < root.line - 12 or e is root:
            continue
        if t0 is not None and e.ts is not None and (e.ts - t0).total_seconds() > window_s:
            break
        if e.line < root.line:
            head = e.text.split("\n", 1)[0]
            if e.process == root.process and (e.kind == "engine_dump" or (e.kind == "log" and _AFTER.search(head))) \
                    and "scheduler output" not in head:
                ctx.append(first(e))
            continue
        if e.kind in ("server_shutdown", "server_stopped"):
            if e.kind == "server_stopped" or "Shutting down" in e.text:
                tail.append(first(e))
            continue
        if v.in_shutdown(e.line) and e.kind not in ("request_failed", "http_access", "engine_dead"):
            continue
        k = kinds_of(e)
        if "engine_fatal" in k:
            key.append(first(e))
            key.append(ev(e, "Error:", "error"))
            key += exc_lines(e, 2)
        elif e.kind == "engine_dead":
            key.append(first(e))
            if e.line != e.line_end:
                key.append(ev(e, "EngineDeadError", "Background loop", "dead"))
        elif e.kind in ("engine_core_died", "worker_exiting", "oom_killed") or (e.kind == "log" and _AFTER.search(e.text)):
            ctx.append(first(e))
        elif e.kind == "request_failed" and e.fields.get("reason") == "engine_dead":
            failed.append(e)
        elif e.kind == "http_access" and (e.fields.get("http_status") or 0) >= 500:
            e500.append(e)
        else:
            continue
        if e.ts is not None:
            last = e.ts
    evid = key[:6] + ctx[:3] + [first(e) for e in failed[:2]] + [first(e) for e in e500[:3]] + tail[:2]
    return Aftermath(evid, len(failed), len(e500), last)


def distinct_requests(events: Iterable[Event]) -> int:
    """Distinct requests named by events; V1's engine id (``<api id>-<8 hex>``) counts with its API id."""
    ids: set[str] = set()
    for e in events:
        for rid in (e.fields.get("request_ids") or [e.request_id or f"@{e.file}:{e.line}"]):
            ids.add(str(rid))
    n = 0
    for i in ids:
        m = re.match(r"^(.+)-[0-9a-f]{8}$", i)
        if m and m.group(1) in ids:
            continue
        n += 1
    return n


_STARTUP_FRAMES = re.compile(r"profile_run|determine_num_available_blocks|_dummy_run|load_model|load_weights|"
                             r"capture_model|_initialize_kv_caches|initialize_from_config|warming up|warmup|"
                             r"_init_cache|init_device|from_engine_args|from_vllm_config|EngineCore.__init__|"
                             r"wait_for_engine_startup|init_cache_engine|allocate_gpu_cache", re.I)
# (V0's _run_workers runs both the start-up calls and every step: it says nothing about the stage)
_SERVING_FRAMES = re.compile(r"execute_model|step_fn|run_busy_loop|_process_engine_step|engine_step|step_async|"
                             r"run_engine_loop|sample_tokens", re.I)


def stage_of(e: Event) -> str | None:
    """``startup`` or ``serving`` from the traceback's frames; None when it does not say."""
    st = bool(_STARTUP_FRAMES.search(e.text))
    sv = bool(_SERVING_FRAMES.search(e.text))
    if st and not sv:
        return "startup"
    if sv and not st:
        return "serving"
    return None


def while_serving(v: ServerView, e: Event) -> bool:
    """Did this failure happen while serving? The traceback's frames win over the position in the log;
    in a worker-only log (never ready by itself) the API server's log, given too, tells by the time."""
    st = stage_of(e)
    if st is not None:
        return st == "serving"
    if v.ready_line is None and v.peer_serving and e.ts is not None:
        return any(t <= e.ts and (end is None or (e.ts - end).total_seconds() <= _PEER_SLACK_S)
                   for t, end in v.peer_serving)
    return v.serving(e.line)


#: Events only an API server's log has (a worker/engine-only log has none of them).
_API_KINDS = frozenset({"server_version", "server_args", "server_starting", "server_process_started", "server_startup",
                        "server_ready", "server_routes", "http_access"})
#: A worker may log its failure a little after the API server's last line.
_PEER_SLACK_S = 120.0


_OOM_KINDS = frozenset(("cuda_error", "engine_fatal", "worker_exception", "traceback"))


def is_oom(e: Event) -> bool:
    """CUDA/HIP out-of-memory, whatever kind the parser gave it."""
    # ``"cuda_oom" in kinds_of(e)`` without building the set, and the kind tested before the text is read: the rules
    # ask this of every kept event of a run
    k = e.kind
    if k == "cuda_oom":
        return True
    f = e.fields
    if f.get("exc_kind") == "cuda_oom":
        return True
    xs = f.get("exc_kinds")
    if xs and "cuda_oom" in (xs if isinstance(xs, (list, tuple)) else set(xs)):
        return True
    if k not in _OOM_KINDS:
        return False
    head = str(f.get("exc_message") or f.get("error") or e.text.split("\n", 1)[0])
    return "out of memory" in head.lower()


_PID = re.compile(r"pid=(\d+)")


def kernel_ooms(run: Run, v: ServerView) -> list[Event]:
    """Kernel OOM-killer reports (dmesg lines, any input file) about a process of this server run.

    Matched by pid when the log names its processes' pids; otherwise every report counts."""
    kills = run_index(run).by_kind.get("oom_killed", [])
    if not kills:
        return []
    pids = {m.group(1) for e in v.events if e.process for m in [_PID.search(e.process)] if m}
    pids |= {str(e.fields.get("pid")) for e in v.events if e.kind == "worker_died" and e.fields.get("pid")}
    if not pids:
        return kills
    return [k for k in kills if str(k.fields.get("pid")) in pids]


def was_serving(v: ServerView) -> bool:
    """The server run served traffic (ready line, stats, requests, HTTP answers, offline progress or a serving-time
    traceback)."""
    if v.ready_line is not None:
        return True
    for e in v.events:
        if e.kind in ("request_failed", "http_access", "request_aborted", "stream_error"):
            return True
        if e.kind in ("engine_fatal", "engine_dead", "cuda_oom", "worker_exception") and stage_of(e) == "serving":
            return True  # it failed in a forward step: it was generating (an offline engine never prints "ready")
    return False


_OOM_NUMS = re.compile(r"Tried to allocate ([\d.]+) ([GMK]i?B).*?total capacity of ([\d.]+) ([GMK]i?B)(?:.*?of which ([\d.]+) ([GMK]i?B) is free)?")
_UNIT = {"GiB": 1.0, "GB": 1.0, "MiB": 1 / 1024, "MB": 1 / 1024, "KiB": 1 / 1048576, "KB": 1 / 1048576}


def oom_numbers(e: Event) -> tuple[float | None, float | None, float | None]:
    """(tried to allocate, total, free) in GiB from an OOM record's fields or text."""
    f = e.fields
    vals = tuple(num(f.get(k)) for k in ("tried_to_allocate_gib", "total_capacity_gib", "free_gib"))
    if any(x is not None for x in vals):
        return vals  # type: ignore[return-value]
    m = _OOM_NUMS.search(e.text)
    if not m:
        return None, None, None
    g = lambda i: float(m.group(i)) * _UNIT.get(m.group(i + 1), 1.0) if m.group(i) else None  # noqa: E731
    return g(1), g(3), g(5)


_ENVELOPE = re.compile(r"^(?:\([^)]*\)\s*)?(?:(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+(?:\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+)?"
                       r"(?:\[[^\]]*\]\s*|\S+\.py:\d+\]\s*)?)?")


def pooling(v: "ServerView") -> bool:
    """The server run serves a pooling model (embed / classify / score / reward): it never generates tokens."""
    from ..state.config import _pooling

    got = None
    for e in v.of("server_args", "model_tasks"):
        p = _pooling(e)
        if p is not None:
            got = p
    return bool(got)


def msg_of(e: Event) -> str:
    """The record's message without the vLLM envelope (process tag, level, time, [file:line]) and without the
    wrappers a deployment adds before it (docker compose ``name  | ``, journald, ``kubectl --prefix`` and
    ``--timestamps``, colour codes) — what a headline quotes."""
    from ..parsing.envelope import ANSI, CONSOLE, DOCKER, FASTCHAT, JOURNAL, K8S_PREFIX, K8S_TS, LOGURU

    m = ANSI.sub("", e.message)
    for _ in range(4):
        m2 = m
        for rx in (LOGURU, FASTCHAT, CONSOLE, DOCKER, JOURNAL, K8S_TS, K8S_PREFIX):
            m2 = rx.sub("", m2, count=1)
        if m2 == m:
            break
        m = m2
    return _ENVELOPE.sub("", m, count=1).strip()


def jval(j: Any, name: str) -> float | None:
    """A journey number, made conservative when it was estimated from 1-second timestamps
    (lowered by the timestamp resolution, so rounding cannot make a request look slow)."""
    v = getattr(j, name, None)
    if v is None:
        return None
    src = (getattr(j, "sources", None) or {}).get(name)
    if src == "estimated":
        res = getattr(j, "ts_resolution_s", None) or 1.0
        return max(0.0, v - res)
    return v


LENGTH_TEXT = re.compile(r"maximum context length|is too large: \d+|longer than the maximum model length|"
                         r"is too long and exceeds|is too long to fit into the model", re.I)


def is_length_rejection(e: Event) -> bool:
    """A rejection whose text says the request is longer than --max-model-len."""
    k = kinds_of(e)
    if "context_length_exceeded" in k or "prompt_too_long" in k:
        return True
    return e.kind in ("request_failed", "request_exception", "request_rejected") and bool(LENGTH_TEXT.search(e.text))


_EXC_LINE = re.compile(r"(?:^|\] |\s)(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?::|$)")


def exc_lines(e: Event, limit: int = 4) -> list[Evidence]:
    """The exception lines of a traceback record (chained causes included), each with the ``raise`` line
    just above it — the lines a reader looks for first."""
    lines = _lines(e)
    if lines is None or len(lines) < 2:
        return []
    out: list[Evidence] = []
    for i, ln in enumerate(lines):
        body = ln.split("] ", 1)[-1] if "] " in ln[:80] else ln
        if i == 0 or not _EXC_LINE.search(body) or body.lstrip().startswith(("File ", "raise ", "^")):
            continue
        if i > 0 and "raise " in lines[i - 1]:
            out.append(Evidence(e.file, e.line + i - 1, lines[i - 1]))
        out.append(Evidence(e.file, e.line + i, ln))
    return out[-limit:]


def _load_patterns() -> list[Any]:
    from ..parsing.registry import MESSAGES

    return [p for p in MESSAGES.patterns if p.kind == "model_load_error"]


def load_reason(e: Event, max_lines: int = 80) -> str | None:
    """The model-load reason a record states on any of its lines (a validation error whose detail says the
    checkpoint's model type is unknown is the model failing to load, not a bad flag); None when none does."""
    if e.kind == "model_load_error" or "model_load_error" in (e.fields.get("exc_kinds") or ()):
        return str(e.fields.get("reason") or "model_load_error")
    pats = _load_patterns()
    for ln in e.text.split("\n")[:max_lines]:
        body = _ENVELOPE.sub("", ln.split("] ", 1)[-1] if "] " in ln[:120] else ln, count=1).strip()
        for p in pats:
            r = p.match(body)
            if r is not None:
                return str(r[1].get("reason") or "model_load_error")
    return None


def exit_code_text(code: Any) -> str:
    """``exit code -9`` — or, when the log says ``(exit code: None)`` or nothing, ``no exit code``
    (the process vanished without one), never ``exit code None``."""
    return "no exit code" if code is None or str(code) == "None" else f"exit code {code}"


#: Attention backends far slower than FlashAttention/FlashInfer on the GPUs that have those.
_SLOW_BACKENDS = re.compile(r"TRITON_ATTN|XFORMERS|TORCH_SDPA|Torch SDPA|xFormers|Triton attention", re.I)
_FORCED = re.compile(r"Forcing \S+ backend|falling back to|not supported.*?(?:using|fall)", re.I)
SLOW_FIX = {
    "attention": "use a faster attention backend where the model allows it (`--attention-backend FLASH_ATTN` or "
                 "FLASHINFER; the log says why this one was chosen) or a vLLM release that supports the model on it",
    "enforce-eager": "drop `--enforce-eager` (CUDA graphs speed up decode several times for small batches)",
    "cpu-offload": "avoid `--cpu-offload-gb` (weights stream over PCIe every step): more GPUs or a quantized model",
    "no-p2p": "tensor-parallel GPUs without P2P/NVLink: every all-reduce goes through host memory (custom all-reduce is "
              "off) — use GPUs linked by NVLink/P2P, or fewer tensor-parallel ranks (a quantized model on fewer GPUs, "
              "`--pipeline-parallel-size` across PCIe)",
}
#: vLLM's warning that tensor-parallel all-reduce falls back to NCCL through the host (no GPU peer-to-peer access).
_NO_P2P = "Custom allreduce is disabled because your platform lacks GPU P2P"


def is_cpu(v: ServerView) -> bool:
    """The server run uses vLLM's CPU backend (``state.config.server_config``: the platform line, a CPU KV cache,
    ``device_config=cpu``, records of the CPU executor / worker / model runner, or ``--device cpu``)."""
    from ..state.config import server_config

    return server_config(v).cpu


def slow_settings(v: ServerView) -> list[tuple[Any, str]]:
    """Start-up settings known to slow decode, with the line that shows each: a slow or forced attention backend,
    eager mode, CPU weight offload, tensor parallelism over GPUs without peer-to-peer access."""
    out: list[tuple[Any, str]] = []
    cpu = is_cpu(v)
    for e in ([] if cpu else v.events):  # the CPU backend's attention is TORCH_SDPA by design
        head = e.text.split("\n", 1)[0]
        if (e.kind == "attention_backend" or "backend" in head) and _SLOW_BACKENDS.search(head) and not any(
                w.startswith("attention") for _, w in out):
            out.append((e, "attention backend " + (_SLOW_BACKENDS.search(head).group(0))))
        elif _FORCED.search(head) and "backend" in head.lower() and not any(w.startswith("attention") for _, w in out):
            out.append((e, "attention backend (forced)"))
    if arg(v, "enforce_eager") in (True, "True", "true") and not cpu:  # the CPU backend has no CUDA graphs to lose
        out.append((v.events[0] if v.events else None, "enforce-eager"))
    if num(arg(v, "cpu_offload_gb")):
        out.append((v.events[0] if v.events else None, "cpu-offload"))
    if not cpu and (num(arg(v, "tensor_parallel_size")) or 1) > 1:
        e = next((e for e in v.events if e.text.find(_NO_P2P) >= 0), None)
        if e is not None:
            out.append((e, "no-p2p (custom all-reduce off)"))
    return [(e, w) for e, w in out if e is not None]


