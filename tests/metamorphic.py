"""Transformations of real vLLM logs, for metamorphic tests of the diagnosis (tests/test_metamorphic*.py).

A ``Log`` is a file's lines (split on ``\\n`` only: the ``\\r`` that ends the inner lines of vLLM's
multi-line records stays part of the line) plus, per line, the time it was written: its own vLLM /
JSON timestamp, or for a line without one (uvicorn access lines, tracebacks, tqdm bars) the time of
the last stamped line before it. Every transformation returns a new ``Log`` and rewrites only what the
real server would have written differently, in the wording of the log's own release:

* format-only — ``shift_time``, ``rename_ids``, ``rename_hosts``, ``retag_processes``, ``wrap`` (journald /
  kubectl / docker prefixes), CRLF and gzip (``write``), ``interleave_warnings``: nothing the server did
  changed, so the whole diagnosis must be the same;
* same service, other facts — ``insert_idle`` / ``trim_span`` (a quiet span added or cut), ``duplicate``
  (a healthy stretch happens twice), ``merge_stats`` / ``drop_stats`` (another stats interval),
  ``set_kv`` + ``set_kv_capacity`` (KV steady at 90–99 % of a smaller cache), ``set_arg`` (a higher
  ``max_num_seqs`` with the same traffic): the verdict must not move;
* a real fault added — ``insert_5xx``, ``stall``, ``never_ready``, ``engine_death``, ``grow_queue``,
  ``preempt_v0``: the verdict must move.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable, Iterable

YEAR = 2026

# "(APIServer pid=1) INFO 11-30 03:08:04 [x.py:1] m" (V1), "INFO 10-24 10:55:01 api_server.py:526] m" (V0)
_VLLM_TS = re.compile(r"(?P<pre>(?:^|\) |\x1b\[0;0m |\x1b\[0m )(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) )"
                      r"(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?P<post> \[?[^\]\s]+:\d+\])")
# JSON records: "timestamp": "2026-11-30 03:08:04,271" / "asctime": "…"
_JSON_TS = re.compile(r'(?P<pre>"(?:timestamp|asctime)": ")(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d) '
                      r'(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?P<post>[.,]\d+")')
# torch / glog C++ lines: "[W1201 18:30:49.312630007 utils.cpp:68]" (also after "[rank0]:")
_GLOG_TS = re.compile(r"(?P<pre>\[[WEIF])(?P<mo>\d\d)(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?P<post>\.\d+ )")

STATS_V1 = re.compile(r"Avg prompt throughput: (?P<p>[\d.]+) tokens/s, Avg generation throughput: (?P<g>[\d.]+) tokens/s, "
                      r"Running: (?P<r>\d+) reqs, (?:Swapped: (?P<sw>\d+) reqs, )?(?P<wl>Waiting|Pending): (?P<w>\d+) reqs")
KV_FIELD = re.compile(r"(?P<dev>GPU|CPU|XPU) KV cache usage: (?P<kv>[\d.]+)%")
ACCESS = re.compile(r'^(?P<pre>.*?INFO:\s+)(?P<host>[\d.]+):(?P<port>\d+) - "(?P<req>[A-Z]+ \S+ HTTP/[\d.]+)" (?P<st>\d{3})')
REQ_ID = re.compile(r"\b(?:chatcmpl|cmpl|chat|embd)-[\w-]+")
RECEIVED = re.compile(r"Received request (?P<id>\S+?):")


def _mk(year: int, mo: str, d: str, h: str, mi: str, s: str) -> datetime:
    return datetime(year, int(mo), int(d), int(h), int(mi), int(s))


@dataclass
class Log:
    """A log's lines and the time each was written (``None`` before the first stamped line)."""

    lines: list[str]
    _times_: list[datetime | None] | None = None
    year: int = YEAR

    @property
    def times(self) -> list[datetime | None]:
        """Per line, when it was written (computed on first use: most transformations never ask)."""
        if self._times_ is None:
            self._times_ = self._times()
        return self._times_

    @classmethod
    def read(cls, path: str | Path, year: int = YEAR) -> "Log":
        raw = Path(path).read_bytes().decode("utf-8")
        lines = raw.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return cls.of(lines, year)

    @classmethod
    def of(cls, lines: list[str], year: int = YEAR) -> "Log":
        return cls(list(lines), None, year)

    # ---- time ------------------------------------------------------------------------------------
    def _times(self) -> list[datetime | None]:
        out: list[datetime | None] = []
        year, last = self.year, None
        for line in self.lines:
            t = None
            m = _JSON_TS.search(line) if '"' in line else None
            if m:
                t = _mk(int(m["y"]), m["mo"], m["d"], m["h"], m["mi"], m["s"])
            else:
                m = _VLLM_TS.search(line) or _GLOG_TS.search(line)
                if m:
                    t = _mk(year, m["mo"], m["d"], m["h"], m["mi"], m["s"])
                    if last is not None and (last - t).days > 180:  # Dec → Jan
                        year += 1
                        t = t.replace(year=year)
            if t is not None and (last is None or t >= last - timedelta(hours=1)):
                last = t
            out.append(t or last)
        return out

    def stamped(self, i: int) -> bool:
        return bool(_VLLM_TS.search(self.lines[i]) or _JSON_TS.search(self.lines[i]) or _GLOG_TS.search(self.lines[i]))

    def text(self, eol: str = "\n") -> str:
        return eol.join(self.lines) + eol

    def write(self, path: str | Path, *, crlf: bool = False, gz: bool = False) -> str:
        """Write the log (``crlf``: every ``\\n`` becomes ``\\r\\n``, as unix2dos does; ``gz``: gzip it)."""
        data = self.text("\r\n" if crlf else "\n").encode("utf-8")
        path = Path(path)
        if gz:
            path = path.with_name(path.name + ".gz") if not path.name.endswith(".gz") else path
            path.write_bytes(gzip.compress(data, mtime=0))
        else:
            path.write_bytes(data)
        return str(path)

    # ---- finding things ------------------------------------------------------------------------
    def find(self, pred: Callable[[str], bool] | str, start: int = 0) -> int:
        """Index of the first line at or after ``start`` that matches (a substring or a predicate), or -1."""
        f = (lambda s: pred in s) if isinstance(pred, str) else pred
        for i in range(start, len(self.lines)):
            if f(self.lines[i]):
                return i
        return -1

    def rfind(self, pred: Callable[[str], bool] | str) -> int:
        f = (lambda s: pred in s) if isinstance(pred, str) else pred
        for i in range(len(self.lines) - 1, -1, -1):
            if f(self.lines[i]):
                return i
        return -1

    def stats(self) -> list[int]:
        """Indexes of the periodic stats lines."""
        return [i for i, s in enumerate(self.lines) if STATS_V1.search(s)]

    def stats_of(self, i: int) -> dict[str, float]:
        m = STATS_V1.search(self.lines[i])
        assert m, self.lines[i]
        kv = KV_FIELD.search(self.lines[i])
        return {"prompt": float(m["p"]), "gen": float(m["g"]), "running": int(m["r"]), "waiting": int(m["w"]),
                "kv": float(kv["kv"]) if kv else 0.0}

    def busy_stats(self) -> list[int]:
        return [i for i in self.stats() if self.stats_of(i)["running"] > 0]

    def active_stats(self) -> list[int]:
        """Stats lines of intervals that did work (requests running, or tokens produced)."""
        return [i for i in self.stats() if any(self.stats_of(i)[k] > 0 for k in ("running", "gen", "prompt"))]

    def ready_index(self) -> int:
        """The line that says the server is ready (``Application startup complete.``), or -1."""
        return self.find("Application startup complete")

    def shutdown_index(self) -> int:
        """The first line of a requested shutdown (SIGTERM), or ``len(lines)`` when there is none."""
        for key in ("[shutdown] API server: shutdown triggered", "Shutting down FastAPI HTTP server",
                    "INFO:     Shutting down"):
            i = self.find(key)
            if i >= 0:
                return i
        return len(self.lines)

    def proc_tag(self, name: str = "APIServer") -> str:
        """The ``(Name pid=N) `` prefix of that process in this log ('' when the log has none, as V0)."""
        m = re.search(r"\((%s[^()]*?pid=\d+)\) " % re.escape(name), self.text())
        return f"({m.group(1)}) " if m else ""

    def access_prefix(self) -> str:
        """How this log's uvicorn access lines begin (``INFO:     `` with the stream prefix of its release)."""
        for s in self.lines:
            m = ACCESS.match(s)
            if m:
                return m["pre"]
        return "INFO:     "

    def client_host(self) -> str:
        for s in self.lines:
            m = ACCESS.match(s)
            if m and "POST" in m["req"]:
                return m["host"]
        return "127.0.0.1"

    def api_route(self) -> str:
        for s in self.lines:
            m = ACCESS.match(s)
            if m and m["req"].startswith("POST /v1/"):
                return m["req"].split()[1]
        return "/v1/completions"

    def like(self, i: int, t: datetime, msg: str, level: str | None = None, where: str | None = None) -> str:
        """A line in the style of stamped line ``i`` (its stream prefix and process tag) at time ``t`` with
        ``msg``, and optionally another level and ``file.py:N``."""
        src = self.lines[i]
        m = _VLLM_TS.search(src)
        assert m, src
        head = src[:m.start("mo")]
        if level:
            head = re.sub(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) $", level + " ", head)
        post = m["post"]
        if where:
            post = f" [{where}]" if "[" in post else f" {where}]"
        return f"{head}{t:%m-%d %H:%M:%S}{post} {msg}"

    def stamp(self, i: int, t: datetime) -> str:
        """Line ``i`` with its timestamp set to ``t`` (unchanged when it has none)."""
        return _restamp(self.lines[i], lambda _: t, self.year, self.times[i])


def _restamp(line: str, f: Callable[[datetime], datetime], year: int, hint: datetime | None) -> str:
    def sub(m: re.Match, with_year: bool) -> str:
        y = int(m["y"]) if with_year else (hint.year if hint else year)
        t = f(_mk(y, m["mo"], m["d"], m["h"], m["mi"], m["s"]))
        if with_year:
            return f"{m['pre']}{t:%Y-%m-%d %H:%M:%S}{m['post']}"
        if m.re is _GLOG_TS:
            return f"{m['pre']}{t:%m%d %H:%M:%S}{m['post']}"
        return f"{m['pre']}{t:%m-%d %H:%M:%S}{m['post']}"

    out = _JSON_TS.sub(lambda m: sub(m, True), line)
    if out is line or out == line:
        out = _VLLM_TS.sub(lambda m: sub(m, False), line, count=1)
        out = _GLOG_TS.sub(lambda m: sub(m, False), out)
    return out


def _shifted(log: Log, idx: Iterable[int], delta: timedelta) -> dict[int, str]:
    return {i: _restamp(log.lines[i], lambda t: t + delta, log.year, log.times[i]) for i in idx}


def _rebuild(log: Log, lines: list[str]) -> Log:
    return Log.of(lines, log.year)


# ==== format-only ====================================================================================

def shift_time(log: Log, delta: timedelta) -> Log:
    """Every timestamp moved by ``delta`` (vLLM's ``MM-DD HH:MM:SS``, JSON ``asctime``, torch's ``[W…]``)."""
    new = _shifted(log, range(len(log.lines)), delta)
    return _rebuild(log, [new[i] for i in range(len(log.lines))])


def shift_to(log: Log, when: datetime) -> Log:
    """The log moved so that its first stamped line is at ``when`` (e.g. just before midnight, New Year)."""
    first = next(t for t in log.times if t is not None)
    return shift_time(log, when - first)


def _hexmap(run: str, salt: str) -> str:
    h = hashlib.sha1((salt + run).encode()).hexdigest()
    while len(h) < len(run):
        h += hashlib.sha1(h.encode()).hexdigest()
    return h[: len(run)]


def rename_ids(log: Log, salt: str = "m") -> Log:
    """Request ids renamed consistently: every hex run (≥ 8) inside an id maps to another one of the same
    length, and the load generator's ``client-`` becomes ``batch-`` (a prefix relation — ``Added request
    <id>-<8 hex>`` vs ``Received request <id>`` — survives)."""
    def one(m: re.Match) -> str:
        s = m.group(0).replace("-client-", "-batch-")
        return re.sub(r"[0-9a-f]{8,}", lambda h: _hexmap(h.group(0), salt), s)
    return _rebuild(log, [REQ_ID.sub(one, s) for s in log.lines])


_IP_PORT = re.compile(r"(?<![\w.])(\d{1,3}(?:\.\d{1,3}){3}):(\d{2,5})\b")


def rename_hosts(log: Log, host: str = "10.42.7.13") -> Log:
    """Client and server addresses changed (``ip:port`` of access lines, ``'host': …``, ``http://ip:port``);
    client ports remapped one to one."""
    def one(m: re.Match) -> str:
        port = int(m.group(2))
        return f"{host}:{(port * 7919) % 50000 + 10000 if port > 9999 else port}"
    out = []
    for s in log.lines:
        s = _IP_PORT.sub(one, s)
        s = re.sub(r"'host': '[\d.]+'", f"'host': '{host}'", s)
        out.append(s)
    return _rebuild(log, out)


def retag_processes(log: Log, *, names: bool = False, base: int = 40000) -> Log:
    """New pids for every process (``pid=N``, ``process [N]``, ``pid N``, ``PID N``), consistently; with
    ``names``, the 0.18+ tags of a V1 log become their 0.10.2–0.17 form (``EngineCore`` →
    ``EngineCore_DP0``, ``Worker`` → ``Worker_TP0``)."""
    text = log.text()
    pids = sorted({int(p) for p in re.findall(r"\bpid=(\d+)", text)}
                  | {int(p) for p in re.findall(r"(?:server process \[|engine process with PID )(\d+)", text)})
    new = {p: base + 37 * n + 3 for n, p in enumerate(pids)}
    pat = re.compile(r"(\bpid=|\bpid |server process \[|with PID |\bPID )(\d+)\b")

    def one(m: re.Match) -> str:
        p = int(m.group(2))
        return m.group(1) + str(new.get(p, p))
    out = []
    for s in log.lines:
        if "pid" in s or "PID" in s or "process [" in s:
            s = pat.sub(one, s)
        if names and "pid=" in s:
            s = re.sub(r"\(EngineCore pid=", "(EngineCore_DP0 pid=", s)
            s = re.sub(r"\(Worker pid=", "(Worker_TP0 pid=", s)
        out.append(s)
    return _rebuild(log, out)


def wrap(log: Log, style: str) -> Log:
    """Every line as a log collector shows it: ``journald`` (``Nov 30 03:08:04 node vllm[4242]: ``),
    ``kubectl`` (``--timestamps``: RFC 3339 with nanoseconds), ``kubectl-prefix`` (``--prefix
    --timestamps``), ``docker`` (``docker compose logs``: ``vllm-1  | ``), ``docker-t`` (``docker logs -t``)."""
    out = []
    first = next((t for t in log.times if t is not None), datetime(log.year, 1, 1))
    times = [t or first for t in log.times]
    per_second: dict[datetime, int] = {}
    for t in times:
        per_second[t] = per_second.get(t, 0) + 1
    seen: dict[datetime, int] = {}
    for s, t in zip(log.lines, times):
        k = seen[t] = seen.get(t, 0) + 1
        ns = (k * 10**9) // (per_second[t] + 1)  # increasing within the second, as a collector's clock
        if style == "journald":
            out.append(f"{t:%b %d %H:%M:%S} gpu-node-3 vllm[4242]: {s}")
        elif style in ("kubectl", "docker-t"):
            out.append(f"{t:%Y-%m-%dT%H:%M:%S}.{ns:09d}Z {s}")
        elif style == "kubectl-prefix":
            out.append(f"[pod/vllm-7d9f8c-x2kq/vllm] {t:%Y-%m-%dT%H:%M:%S}.{ns:09d}Z {s}")
        elif style == "docker":
            out.append(f"vllm-1  | {s}")
        else:
            raise ValueError(style)
    return Log(out, list(log.times), log.year)


_COLOUR_LEVEL = {"DEBUG": "37", "INFO": "32", "WARNING": "33", "ERROR": "31", "CRITICAL": "35"}
_PREFIXED = re.compile(r"^\((?P<tag>[^()]*?pid=\d+[^()]*)\) (?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                       r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d) (?P<where>\[[^\]\s]+:\d+\])(?P<rest>.*)$", re.S)
_TAG_ONLY = re.compile(r"^\((?P<tag>[^()]*?pid=\d+[^()]*)\) ")


def colour(log: Log, style: str = "0.31") -> Log:
    """The ANSI colour codes a container's log keeps: ``0.31`` — vLLM 0.31+'s ColoredFormatter (cyan process
    tag, green/yellow/red level, grey time and ``[file:line]``; uvicorn lines and raw tracebacks untouched);
    ``0.4.3`` — the stream wrapper of 0.4.3–0.11, which wraps every tagged line's ``(Name pid=N)`` in bold cyan
    even in files. Apply it last: the other transformations read uncoloured lines."""
    out = []
    for s in log.lines:
        if style == "0.31":
            m = _PREFIXED.match(s)
            if m:
                s = (f"\x1b[0;36m({m['tag']})\x1b[0;0m \x1b[{_COLOUR_LEVEL[m['lvl']]}m{m['lvl']}\x1b[0m "
                     f"\x1b[90m{m['ts']}\x1b[0m \x1b[90m{m['where']}\x1b[0m{m['rest']}")
        elif style == "0.4.3":
            s = _TAG_ONLY.sub(lambda m: f"\x1b[1;36m({m['tag']})\x1b[0;0m ", s)
        else:
            raise ValueError(style)
        out.append(s)
    return Log(out, list(log.times), log.year)


#: Python warnings that a vLLM server's stderr carries at any time (deprecations of its libraries); the
#: FutureWarning pair is verbatim from the real 0.32 logs of ../shared/corpus/vllm-cpu.
PY_WARNINGS = (
    ("/opt/vllm/lib/python3.11/site-packages/vllm/triton_utils/dispatcher.py:138: FutureWarning: "
     "`torch.distributed.reduce_op` is deprecated, please use `torch.distributed.ReduceOp` instead",
     '  if hasattr(value, "__dict__"):'),
    ("/usr/local/lib/python3.11/site-packages/transformers/tokenization_utils_base.py:1601: FutureWarning: "
     "`clean_up_tokenization_spaces` was not set. It will be set to `True` by default. This behavior will be "
     "deprecated in transformers v4.45, and will be then set to `False` by default.",
     "  warnings.warn("),
)


def _own_warnings(log: Log) -> list[int]:
    """Single-line WARNING records of the log itself that say nothing about its health (start-up notices)."""
    bad = ("shutdown", "preempt", "KV cache", "memory", "timeout", "Timeout", "fail", "error", "Error", "kill",
           "hang", "No available", "abort", "exceed", "too long", "Compiling model again")
    out = []
    for i, s in enumerate(log.lines):
        m = _VLLM_TS.search(s)
        if m and "WARNING" in m["pre"] and not s.endswith("\r") and not any(b in s for b in bad):
            out.append(i)
    return out


def interleave_warnings(log: Log, every: int = 25) -> Log:
    """Unrelated warnings in the serving part: the log's own start-up WARNING lines re-emitted (same
    process tag, current time) and Python deprecation notices, one every ``every`` lines."""
    own = _own_warnings(log)
    ready = max(log.ready_index(), 0)
    out: list[str] = []
    k = 0
    for i, s in enumerate(log.lines):
        out.append(s)
        if i > ready and i % every == 0 and log.times[i] is not None and not s.endswith("\r"):
            nxt = log.lines[i + 1] if i + 1 < len(log.lines) else ""
            if nxt.startswith((" ", "\t")) or "Traceback" in nxt:
                continue
            if own and k % 2 == 0:
                out.append(log.stamp(own[(k // 2) % len(own)], log.times[i]))
            else:
                out.extend(PY_WARNINGS[(k // 2) % len(PY_WARNINGS)])
            k += 1
    return _rebuild(log, out)


# ==== same service, other facts ======================================================================

def _interval(log: Log) -> timedelta:
    """The stats interval of the log (the median gap between its stats lines; 10 s without two)."""
    st = [log.times[i] for i in log.stats() if log.times[i] is not None]
    gaps = sorted((b - a) for a, b in zip(st, st[1:]) if b > a)
    return gaps[len(gaps) // 2] if gaps else timedelta(seconds=10)


def _health_line(log: Log) -> str:
    for s in log.lines:
        m = ACCESS.match(s)
        if m and "GET /health" in m["req"]:
            return s
    return f'{log.access_prefix()}{log.client_host()}:51234 - "GET /health HTTP/1.1" 200 OK'


def _idle_stats(log: Log, i: int) -> str:
    """Stats line ``i`` as an idle interval says it (no throughput, nothing running or waiting, KV 0 %)."""
    s = log.lines[i]
    s = re.sub(r"Avg prompt throughput: [\d.]+", "Avg prompt throughput: 0.0", s)
    s = re.sub(r"Avg generation throughput: [\d.]+", "Avg generation throughput: 0.0", s)
    s = re.sub(r"Running: \d+", "Running: 0", s)
    s = re.sub(r"(Waiting|Pending): \d+", r"\1: 0", s)
    s = re.sub(r"Swapped: \d+", "Swapped: 0", s)
    return re.sub(r"(GPU|CPU|XPU) KV cache usage: [\d.]+%", r"\1 KV cache usage: 0.0%", s)


def prints_idle_stats(log: Log) -> bool:
    """True when the log's release prints idle stats intervals at INFO (two idle lines in a row), False when
    they go to DEBUG (V0 0.6.5+, V1 0.8.5+: an idle span is a stretch without stats lines)."""
    idle = [all(v == 0 for k, v in log.stats_of(i).items() if k != "kv") for i in log.stats()]
    return any(a and b for a, b in zip(idle, idle[1:]))


def insert_idle(log: Log, at: int, minutes: float, *, health_every_s: float = 5.0) -> Log:
    """A quiet span of ``minutes`` before line ``at``: what follows is shifted; in between, health checks and
    (when the release prints them at INFO) idle stats lines at the log's interval."""
    delta = timedelta(minutes=minutes)
    t0 = log.times[at - 1] if at > 0 else None
    assert t0 is not None, "insert_idle needs a stamped line before the insertion point"
    before = [i for i in log.stats() if i < at]
    stats_line = before[-1] if before and prints_idle_stats(log) else None
    step = _interval(log)
    health = _health_line(log)
    filler: list[str] = []
    n_health = max(1, int(step.total_seconds() // health_every_s))
    k = 1
    while step * k < delta:
        filler += [health] * n_health
        if stats_line is not None:
            filler.append(_restamp(_idle_stats(log, stats_line), lambda _: t0 + step * k, log.year, t0))
        k += 1
    rest = _shifted(log, range(at, len(log.lines)), delta)
    return _rebuild(log, log.lines[:at] + filler + [rest[i] for i in range(at, len(log.lines))])


def quiet_point(log: Log) -> int:
    """Where a quiet span fits: after the last idle stats line before the shutdown (or the end), else just
    before the shutdown."""
    end = log.shutdown_index()
    idle = [i for i in log.stats() if i < end and all(v == 0 for k, v in log.stats_of(i).items() if k != "kv")]
    if idle:
        i = idle[-1] + 1
        while i < end and (ACCESS.match(log.lines[i]) and "GET " in log.lines[i]):
            i += 1
        return i
    return end


def trim_span(log: Log, i: int, j: int, *, close_gap: bool = True) -> Log:
    """Lines ``[i, j)`` cut out; with ``close_gap`` what follows moves back by the time they covered (a
    shorter quiet span), else a hole stays in the timeline (a lost piece of the log)."""
    lines = log.lines[:i]
    if close_gap and j < len(log.lines) and log.times[j] is not None and log.times[i] is not None:
        delta = log.times[i] - log.times[j]
        rest = _shifted(log, range(j, len(log.lines)), delta)
        lines += [rest[k] for k in range(j, len(log.lines))]
    else:
        lines += log.lines[j:]
    return _rebuild(log, lines)


def duplicate(log: Log, i: int, j: int) -> Log:
    """Lines ``[i, j)`` happen twice: a copy (new request ids and client ports) follows them, later lines move
    on by the time the stretch covered."""
    t_i, t_j = log.times[i], log.times[j]
    assert t_i is not None and t_j is not None and t_j > t_i
    delta = t_j - t_i
    copy = rename_ids(Log.of(log.lines[i:j], log.year), salt="dup")
    copy_lines = [_restamp(s, lambda t: t + delta, log.year, log.times[i + n]) for n, s in enumerate(copy.lines)]
    rest = _shifted(log, range(j, len(log.lines)), delta)
    return _rebuild(log, log.lines[:j] + copy_lines + [rest[k] for k in range(j, len(log.lines))])


def _set_stats(s: str, **kw: float | int) -> str:
    if "prompt" in kw:
        s = re.sub(r"Avg prompt throughput: [\d.]+", f"Avg prompt throughput: {kw['prompt']:.1f}", s)
    if "gen" in kw:
        s = re.sub(r"Avg generation throughput: [\d.]+", f"Avg generation throughput: {kw['gen']:.1f}", s)
    if "running" in kw:
        s = re.sub(r"Running: \d+", f"Running: {kw['running']}", s)
    if "waiting" in kw:
        s = re.sub(r"(Waiting|Pending): \d+", lambda m: f"{m.group(1)}: {kw['waiting']}", s)
    if "kv" in kw:
        s = re.sub(r"(GPU|CPU|XPU) KV cache usage: [\d.]+%", lambda m: f"{m.group(1)} KV cache usage: {kw['kv']:.1f}%", s,
                   count=1)
    return s


def merge_stats(log: Log) -> Log:
    """The stats interval doubled, as ``VLLM_LOG_STATS_INTERVAL=20`` prints it: of each pair of stats lines
    the first goes, the second reports the pair's mean throughput (Running/Waiting/KV are gauges: its own)."""
    st = log.stats()
    drop, new = set(), {}
    for a, b in zip(st[0::2], st[1::2]):
        sa, sb = log.stats_of(a), log.stats_of(b)
        drop.add(a)
        new[b] = _set_stats(log.lines[b], prompt=(sa["prompt"] + sb["prompt"]) / 2, gen=(sa["gen"] + sb["gen"]) / 2)
    return _rebuild(log, [new.get(i, s) for i, s in enumerate(log.lines) if i not in drop])


def drop_stats(log: Log, keep_last: bool = True) -> Log:
    """Every other stats line dropped (the first, third, …; the last one kept)."""
    st = log.stats()
    drop = set(st[0::2])
    if keep_last and st:
        drop.discard(st[-1])
    return _rebuild(log, [s for i, s in enumerate(log.lines) if i not in drop])


#: A steady KV usage between 90 and 99 % (deterministic, a little jitter like a real full cache).
KV_STEADY = (93.4, 95.1, 94.2, 96.8, 92.7, 95.9, 97.3, 94.6, 93.9, 96.1, 95.5, 98.2, 91.8, 94.9)


def set_kv(log: Log, values: tuple[float, ...] = KV_STEADY, *, busy_only: bool = True) -> Log:
    """KV usage of the (busy) stats lines set to ``values`` in turn (no preemption added)."""
    out = list(log.lines)
    k = 0
    for i in log.stats():
        if busy_only and log.stats_of(i)["running"] == 0:
            continue
        out[i] = _set_stats(out[i], kv=values[k % len(values)])
        k += 1
    return _rebuild(log, out)


def set_kv_capacity(log: Log, tokens: int) -> Log:
    """The KV cache's size at start-up set to ``tokens`` (V1 ``… KV cache size: N tokens`` and ``Maximum
    concurrency``; V0 ``# GPU blocks: N`` at 16 tokens a block)."""
    out = []
    for s in log.lines:
        s = re.sub(r"(KV cache size: )[\d,]+( tokens)", lambda m: f"{m.group(1)}{tokens:,}{m.group(2)}", s)
        s = re.sub(r"(# GPU blocks: )\d+", lambda m: f"{m.group(1)}{tokens // 16}", s)
        s = re.sub(r"(Maximum concurrency for )([\d,]+)( tokens per request: )[\d.]+x",
                   lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{tokens / int(m.group(2).replace(',', '')):.2f}x", s)
        out.append(s)
    return _rebuild(log, out)


def set_arg(log: Log, name: str, value: int | str) -> Log:
    """A server argument set in the args line (V1 ``non-default args: {…}``, V0 ``args: Namespace(…)``)."""
    out = []
    for s in log.lines:
        if "non-default args: {" in s:
            if f"'{name}': " in s:
                s = re.sub(r"'%s': [^,}]+" % name, f"'{name}': {value!r}", s)
            else:
                s = s[: s.rindex("}")] + f", '{name}': {value!r}" + s[s.rindex("}"):]
        elif "args: Namespace(" in s:
            s = re.sub(r"\b%s=[^,)]+" % name, f"{name}={value!r}", s)
        out.append(s)
    return _rebuild(log, out)


# ==== a real fault added ===============================================================================

def _arrival_template(log: Log) -> tuple[list[int], str] | None:
    """The lines a request's arrival writes in this log (``Received request``, ``Added request``, its access
    line when it comes right after), and the request id they carry."""
    r = log.find(lambda s: RECEIVED.search(s) is not None)
    if r < 0:
        return None
    rid = RECEIVED.search(log.lines[r])["id"]
    idx = [r]
    for k in range(r + 1, min(r + 4, len(log.lines))):
        s = log.lines[k]
        if (rid in s and "Added request" in s) or (ACCESS.match(s) and "POST" in s and k == r + 1):
            idx.append(k)
    return idx, rid


def arrivals(log: Log, t: datetime, n: int, salt: str) -> list[str]:
    """``n`` new requests arriving at ``t``, in the wording of the log's own arrival lines (access lines only
    when the log has no request logging)."""
    tpl = _arrival_template(log)
    out: list[str] = []
    for k in range(n):
        if tpl is None:
            out.append(f'{log.access_prefix()}{log.client_host()}:{40000 + (hash((salt, k)) % 20000)} - '
                       f'"POST {log.api_route()} HTTP/1.1" 200 OK')
            continue
        idx, _ = tpl
        for i in idx:  # every hex run of the ids (API id, engine suffix) renewed with one salt: prefixes still match
            s = REQ_ID.sub(lambda m: re.sub(r"[0-9a-f]{8,}", lambda h: _hexmap(h.group(0), f"{salt}.{k}"), m.group(0)),
                           log.lines[i])
            out.append(_restamp(s, lambda _: t, log.year, log.times[i]))
    return out


_JSON_ACCESS = re.compile(r'"message": "(?P<host>[\d.]+):(?P<port>\d+) - \\"(?P<req>POST \S+ HTTP/[\d.]+)\\" (?P<st>\d{3})"')


def _post_access(log: Log) -> int:
    """A POST access line of this log (uvicorn text or JSON record) to copy, or -1."""
    return log.find(lambda s: bool((ACCESS.match(s) and '"POST ' in s) or _JSON_ACCESS.search(s)))


def insert_5xx(log: Log, at: int, n: int = 12, *, code: int = 500) -> Log:
    """A burst of ``n`` HTTP 5xx answers before line ``at`` while the engine keeps serving: copies of one of
    the log's own POST access lines (text ``… 500 Internal Server Error``, or a JSON ``uvicorn.access``
    record ``… 500``, stamped at the time of the insertion point), new client ports."""
    reason = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}[code]
    i = _post_access(log)
    if i >= 0:
        tpl = log.lines[i]
    else:  # only health checks so far: the same line as a completion request
        i = log.find(lambda s: ACCESS.match(s) is not None)
        assert i >= 0, "the log has no access line to copy"
        tpl = re.sub(r'"[A-Z]+ \S+ HTTP', f'"POST {log.api_route()} HTTP', log.lines[i])
    t = next(x for x in reversed(log.times[:at]) if x is not None)
    burst = []
    for k in range(n):
        port = 41000 + 17 * k
        if _JSON_ACCESS.search(tpl):
            s = _JSON_ACCESS.sub(lambda m: m.group(0).replace(f":{m['port']} ", f":{port} ")
                                 .replace(f'\\" {m["st"]}"', f'\\" {code}"'), tpl)
            s = _restamp(s, lambda _: t, log.year, t)
        else:
            s = ACCESS.sub(lambda m: f'{m["pre"]}{m["host"]}:{port} - "{m["req"]}" {code}', tpl)
            s = re.sub(r'" %d\b.*$' % code, f'" {code} {reason}', s)
        burst.append(s)
    return _rebuild(log, log.lines[:at] + burst + log.lines[at:])


def stall(log: Log, after: int, minutes: float = 10.0, *, every_s: float = 15.0, running: int | None = None,
          zero_line: bool = False) -> Log:
    """From stats line ``after`` on (a busy interval: its Running set to ``running`` if given), no stats line for
    ``minutes`` while requests keep arriving (the log's own arrival lines every ``every_s``); then the rest of
    the log, later by as much.

    ``zero_line``: first one more stats line, an interval later, at 0 tokens/s with the same Running — what V1
    0.8.5+ prints when its engine wedges (the first interval without tokens is logged at INFO, the next ones
    count as idle and go to DEBUG; P2's SIGSTOP shows it). Without it, the stats simply stop, as in V0, whose
    engine loop writes them (the API process goes on logging arrivals)."""
    t0 = log.times[after]
    assert t0 is not None
    delta = timedelta(minutes=minutes)
    nxt = log.find(lambda s: STATS_V1.search(s) is not None, after + 1)
    cut = nxt if nxt >= 0 else log.shutdown_index()
    # what came between this stats line and the next happens first; then the engine stops
    head = list(log.lines[:cut])
    if running is not None:
        head[after] = _set_stats(head[after], running=running)
    filler: list[str] = []
    if zero_line:
        iv = _interval(log)
        filler.append(_restamp(_set_stats(head[after], prompt=0.0, gen=0.0), lambda _: t0 + iv, log.year, t0))
    k = 1
    while timedelta(seconds=every_s * k) < delta:
        filler += arrivals(log, t0 + timedelta(seconds=every_s * k), 1, f"stall{k}")
        k += 1
    rest = _shifted(log, range(cut, len(log.lines)), delta)
    return _rebuild(log, head + filler + [rest[i] for i in range(cut, len(log.lines))])


def _pids_by_name(log: Log) -> dict[str, str]:
    out: dict[str, str] = {}
    for s in log.lines:
        for name, pid in re.findall(r"\(([A-Za-z_]+?)(?:[-_ ]\w+)? pid=(\d+)\)", s):
            out.setdefault(name, pid)
    return out


def _tags_by_name(log: Log) -> dict[str, str]:
    """Process name → this log's full tag for it (``EngineCore`` → ``EngineCore_DP0``)."""
    out: dict[str, str] = {}
    for s in log.lines:
        for tag, name in re.findall(r"\((([A-Za-z]+?)(?:[-_ ]\w+)?) pid=\d+\)", s):
            out.setdefault(name, tag)
    return out


def graft(log: Log, cut: int, donor: Log, start: int, end: int | None = None, *, ids: dict[str, str] | None = None) -> Log:
    """``log`` up to line ``cut``, then ``donor``'s lines ``[start, end)`` as if this server wrote them: moved
    to the time of the cut, the donor's process pids replaced by this log's (by process name), request ids
    mapped by ``ids``."""
    t_cut = next(t for t in reversed(log.times[:cut]) if t is not None)
    t_don = next(t for t in donor.times[start:] if t is not None)
    delta = t_cut - t_don
    ours, theirs = _pids_by_name(log), _pids_by_name(donor)
    pid_map = {theirs[n]: ours[n] for n in theirs if n in ours}
    tag_map = {t: u for n, t in _tags_by_name(donor).items() for m, u in _tags_by_name(log).items() if n == m and t != u}
    api_ours, api_theirs = ours.get("APIServer"), theirs.get("APIServer")
    out = []
    for n in range(start, len(donor.lines) if end is None else end):
        s = _restamp(donor.lines[n], lambda t: t + delta, donor.year, donor.times[n])
        s = re.sub(r"\bpid=(\d+)", lambda m: "pid=" + pid_map.get(m.group(1), m.group(1)), s)
        s = re.sub(r"\bpid (\d+)", lambda m: "pid " + pid_map.get(m.group(1), m.group(1)), s)
        for a, b in tag_map.items():
            s = s.replace(f"({a} pid=", f"({b} pid=")
        if api_ours and api_theirs:
            s = s.replace(f"server process [{api_theirs}]", f"server process [{api_ours}]")
        for a, b in (ids or {}).items():
            s = s.replace(a, b)
        out.append(s)
    return _rebuild(log, log.lines[:cut] + out)


def in_flight(log: Log, before: int, n: int) -> list[str]:
    """The API-level ids of the last ``n`` requests received before line ``before``."""
    ids = [m["id"] for s in log.lines[:before] for m in [RECEIVED.search(s)] if m]
    return ids[-n:]


def grow_queue(log: Log, from_stats: int, *, running: int, minutes: float = 3.0, step: int = 7,
               admitted: int = 3, waiting: int | None = None, prompt: float | None = None,
               gen: float | None = None) -> Log:
    """From busy stats line ``from_stats`` on, the queue grows and never drains: every interval Running stays at
    ``running``, Waiting grows by ``step``, throughput as in that line, ``step + admitted`` new requests arrive;
    the log then ends as it did (its shutdown, if any, moved after the growth). ``waiting`` sets where the
    queue starts; ``prompt`` / ``gen`` replace the line's throughputs (``step=0, admitted=0, prompt=0``: a
    queue that sits there, nothing admitted)."""
    t0 = log.times[from_stats]
    assert t0 is not None
    st = log.stats_of(from_stats)
    iv = _interval(log)
    tail_at = log.shutdown_index()
    w = waiting if waiting is not None else max(st["waiting"], step)
    tput = {k: v for k, v in (("prompt", prompt), ("gen", gen)) if v is not None}
    lines = log.lines[: from_stats + 1]
    lines[from_stats] = _set_stats(lines[from_stats], running=running, waiting=w, **tput)
    k = 1
    while iv * k <= timedelta(minutes=minutes):
        t = t0 + iv * k
        lines += arrivals(log, t - iv / 2, step + admitted, f"q{k}")
        w += step
        lines.append(_restamp(_set_stats(log.lines[from_stats], running=running, waiting=w, **tput), lambda _: t,
                              log.year, t0))
        k += 1
    if tail_at < len(log.lines):
        t_end = t0 + iv * (k - 1) + timedelta(seconds=2)
        t_tail = log.times[tail_at]
        rest = _shifted(log, range(tail_at, len(log.lines)), t_end - t_tail)
        lines += [rest[i] for i in range(tail_at, len(log.lines))]
    return _rebuild(log, lines)


V0_PREEMPT = ("Sequence group {sid} is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache "
              "space. This can affect the end-to-end performance. Increase gpu_memory_utilization or "
              "tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption={n}")


def preempt_v0(log: Log, *, per_interval: int = 50) -> Log:
    """V0 (0.4.3–0.10): busy stats lines at ``GPU KV cache usage: 100.0%`` and after each the scheduler's
    preemption warning (logged for every 50th preemption: its counter says how many)."""
    ids = [m["id"] for s in log.lines for m in [RECEIVED.search(s)] if m] or ["cmpl-0"]
    out: list[str] = []
    total = 1
    k = 0
    for i, s in enumerate(log.lines):
        if STATS_V1.search(s) and log.stats_of(i)["running"] > 0:
            out.append(_set_stats(s, kv=100.0))
            t = log.times[i]
            assert t is not None
            out.append(log.like(i, t, V0_PREEMPT.format(sid=ids[k % len(ids)], n=total), level="WARNING",
                                where="scheduler.py:1089"))
            total += per_interval
            k += 1
        else:
            out.append(s)
    return _rebuild(log, out)


def _is_idle(log: Log, i: int) -> bool:
    return all(v == 0 for k, v in log.stats_of(i).items() if k != "kv")


def idle_run(log: Log) -> tuple[int, int] | None:
    """The longest quiet span of the log: from its first idle stats line to the line before the next busy
    stats line, request or shutdown (``(i, j)``, ``j`` exclusive), or None."""
    end = log.shutdown_index()
    best = None
    st = [i for i in log.stats() if i < end]
    k = 0
    while k < len(st):
        if not _is_idle(log, st[k]):
            k += 1
            continue
        i = st[k]
        while k + 1 < len(st) and _is_idle(log, st[k + 1]):
            k += 1
        j = st[k] + 1
        while j < end and not STATS_V1.search(log.lines[j]) and not RECEIVED.search(log.lines[j]) \
                and not (ACCESS.match(log.lines[j]) and "POST" in log.lines[j]):
            j += 1
        if best is None or (log.times[j - 1] - log.times[i]) > (log.times[best[1] - 1] - log.times[best[0]]):
            best = (i, j)
        k += 1
    return best


def then(first: Log, second: Log, pause: timedelta = timedelta(minutes=5)) -> Log:
    """One file: ``first``, then ``second`` started ``pause`` after ``first``'s last line (a restart: systemd or
    a container writing both runs to one log)."""
    end = next(t for t in reversed(first.times) if t is not None)
    return Log.of(first.lines + shift_to(second, end + pause).lines, first.year)


def scale_throughput(log: Log, factor: float) -> Log:
    """Every stats line's prompt and generation throughput × ``factor`` (the same service on slower or faster
    hardware: the run's own baseline moves with it)."""
    out = list(log.lines)
    for i in log.stats():
        st = log.stats_of(i)
        out[i] = _set_stats(out[i], prompt=st["prompt"] * factor, gen=st["gen"] * factor)
    return _rebuild(log, out)


def second_engine(log: Log) -> Log:
    """Data parallel 2 (V1 0.8.3+): every ``Engine 000:`` stats line followed by the same line for ``Engine 001``
    (a second engine under the same load: the same service twice as wide)."""
    out: list[str] = []
    for s in log.lines:
        out.append(s)
        if "Engine 000: " in s and STATS_V1.search(s):
            out.append(s.replace("Engine 000: ", "Engine 001: "))
    return _rebuild(log, out)


def stall_engine(log: Log, engine: str, after: int) -> Log:
    """One engine of several wedges: its stats line after line ``after`` reports 0 tokens/s with the same
    Running, and it prints none after that (the other engines go on)."""
    tag = f"Engine {engine}: "
    out: list[str] = []
    seen = False
    for i, s in enumerate(log.lines):
        if tag in s and STATS_V1.search(s) and i > after:
            if seen:
                continue
            seen = True
            s = _set_stats(s, prompt=0.0, gen=0.0)
        out.append(s)
    return _rebuild(log, out)
