"""Output plumbing shared by every format: line sinks (fast or paced), a timestamp clock, the writer base."""

from __future__ import annotations

import random
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from ..config import Fault, SimConfig
    from ..model import SimRequest
    from ..scheduler import StatsSnapshot


class Sink:
    """Buffered line output; `lines` counts physical lines written so far."""

    def __init__(self, stream: TextIO, chunk: int = 8192) -> None:
        self.stream = stream
        self.buf: list[str] = []
        self.lines = 0
        self.chunk = chunk

    def emit(self, t: float, line: str) -> None:
        """Write one physical line (must end with a newline)."""
        self.buf.append(line)
        self.lines += 1
        if len(self.buf) >= self.chunk:
            self.flush()

    def emit_many(self, t: float, lines: list[str]) -> None:
        """Write several one-line strings with the same timestamp."""
        self.buf.extend(lines)
        self.lines += len(lines)
        if len(self.buf) >= self.chunk:
            self.flush()

    def emit_text(self, t: float, text: str) -> None:
        """Write a block of several physical lines."""
        self.buf.append(text)
        self.lines += text.count("\n")
        if len(self.buf) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        """Push buffered text to the stream."""
        if self.buf:
            self.stream.write("".join(self.buf))
            self.buf.clear()

    def start_clock(self, t: float) -> None:
        """The server is ready at simulated time `t` (paced sinks start pacing here)."""


class PacedSink(Sink):
    """Writes each line when its simulated time comes (`speed` × real time), flushing every line."""

    def __init__(self, stream: TextIO, speed: float = 1.0) -> None:
        super().__init__(stream, chunk=1)
        self.speed = speed
        self.origin: float | None = None  # start-up lines are written at once, traffic in real time
        self.wall0 = time.monotonic()

    def start_clock(self, t: float) -> None:
        """Pace every later line relative to now = simulated `t`."""
        self.origin = t
        self.wall0 = time.monotonic()

    def _wait(self, t: float) -> None:
        if self.origin is None:
            return
        due = self.wall0 + (t - self.origin) / self.speed
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    def emit(self, t: float, line: str) -> None:
        """Wait for `t`, then write and flush one line."""
        self._wait(t)
        self.stream.write(line)
        self.stream.flush()
        self.lines += 1

    def emit_many(self, t: float, lines: list[str]) -> None:
        """Wait for `t`, then write and flush the lines."""
        self._wait(t)
        self.stream.write("".join(lines))
        self.stream.flush()
        self.lines += len(lines)

    def emit_text(self, t: float, text: str) -> None:
        """Wait for `t`, then write and flush a block."""
        self._wait(t)
        self.stream.write(text)
        self.stream.flush()
        self.lines += text.count("\n")


class Clock:
    """Turns simulated seconds into the strings logs print (cached per second: times only move forward)."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self._sec = -1
        self._stamp = ""

    def dt(self, t: float) -> datetime:
        """Absolute time of `t`."""
        return self.start + timedelta(seconds=t)

    def stamp(self, t: float) -> str:
        """`MM-DD HH:MM:SS` (vLLM's `_DATE_FORMAT`, truncated to the second like `logging`)."""
        sec = int(t)
        if sec != self._sec:
            self._sec = sec
            self._stamp = (self.start + timedelta(seconds=sec)).strftime("%m-%d %H:%M:%S")
        return self._stamp

    def iso(self, t: float) -> str:
        """ISO 8601 with microseconds."""
        return self.dt(t).isoformat(timespec="microseconds")

    def glog(self, t: float, level: str = "E") -> str:
        """PyTorch C++ (glog-style) time tag: `E1130 10:12:03.118204311`."""
        d = self.dt(t)
        return f"{level}{d.strftime('%m%d %H:%M:%S')}.{d.microsecond:06d}{int(t * 1e9) % 1000:03d}"


class LogWriter:
    """Base of every format: receives the engine's events and writes log lines. Hooks default to no-ops."""

    name = "base"
    v1 = False
    version = ""
    """vLLM release the format emulates."""
    stats_interval = 5.0
    """Minimum seconds between stats lines."""
    stats_tick = 10.0
    """Period of the timer that may print a stats line while the engine is idle."""
    stats_periodic = False
    """True when stats come from a timer (V1 API server), False when from engine steps (V0)."""
    wants_waiting_warnings = False
    """Whether the engine should report requests waiting longer than `waiting_warn_s`."""
    per_token = False
    """Whether `on_decode` writes anything (if not, the engine may advance many decode steps at once)."""

    def __init__(self, cfg: SimConfig, sink: Sink) -> None:
        self.cfg = cfg
        self.sink = sink
        self.clock = Clock(cfg.start)
        self.rng = random.Random(cfg.seed * 1_000_003 + 17)  # ids, pids, cosmetic numbers
        self.api_pid = self.rng.randrange(1000, 60000)
        self.engine_pid = self.api_pid + self.rng.randrange(150, 600)
        self.worker_pids = [self.engine_pid + 200 + 60 * i + self.rng.randrange(0, 40) for i in range(8)]

    # -- helpers
    def hex(self, n: int) -> str:
        """`n` random lowercase hex digits."""
        return f"{self.rng.getrandbits(4 * n):0{n}x}"

    def make_ids(self, idx: int, chat: bool) -> tuple[str, str]:
        """(id printed by the API layer, id printed by the engine) for request number `idx`."""
        rid = f"chatcmpl-{self.hex(32)}" if chat else f"cmpl-{self.hex(32)}-0"
        return rid, rid

    def access(self, req: SimRequest, status: int, t: float = 0.0) -> str:
        """A uvicorn access line (no timestamp; `t` is for formats that print one)."""
        phrase = {200: "OK", 400: "Bad Request", 500: "Internal Server Error"}[status]
        return f'INFO:     127.0.0.1:{req.port} - "POST {req.endpoint} HTTP/1.1" {status} {phrase}\n'

    # -- lifecycle hooks (overridden per format)
    def startup(self, t0: float) -> float:
        """Write the start-up sequence; return the time the server is ready."""
        return t0

    def startup_failure(self, t0: float, fault: Fault) -> tuple[float, float]:
        """Write a failed start-up; return (time of the failure, time of the last line)."""
        return t0, t0

    def on_arrival(self, t: float, req: SimRequest, waiting: int) -> None:
        """A request reached the server and joined the waiting queue."""

    def on_schedule(self, t: float, req: SimRequest, running: int, waiting: int, swapped: int) -> None:
        """A waiting request was scheduled (its prefill starts now)."""

    def on_prefill_done(self, t: float, req: SimRequest, first: bool) -> None:
        """A prefill finished and produced a token."""

    def on_decode(self, t: float, reqs: list[SimRequest], batch: int, kv: float) -> None:
        """One decode step produced one token for each request in `reqs`."""

    def on_finish(self, t: float, req: SimRequest) -> None:
        """A request completed successfully."""

    def on_abort(self, t: float, req: SimRequest) -> None:
        """The client went away (disconnect or timeout)."""

    def on_preempt(self, t: float, req: SimRequest, mode: str, cumulative: int) -> None:
        """A request was preempted (`recompute` or `swap`)."""

    def on_waiting_warning(self, t: float, req: SimRequest) -> None:
        """A request has waited longer than the warning level."""

    def on_stats(self, t: float, snap: StatsSnapshot) -> None:
        """Periodic stats."""

    def on_hang_start(self, t: float) -> None:
        """The engine stopped making progress (a collective hung)."""

    def on_hang_tick(self, t: float) -> None:
        """Another minute of the hang passed."""

    def on_nccl_watchdog(self, t: float, fault: Fault) -> float:
        """The NCCL watchdog fired; return when the engine is declared dead."""
        return t

    def on_engine_death(self, t: float, cause: str, inflight: list[SimRequest]) -> float:
        """The engine died; write the fallout and server exit; return the time of the last line."""
        return t

    def on_shutdown(self, t: float) -> float:
        """Graceful shutdown (SIGTERM); return the time of the last line."""
        return t


def record(prefix: str, lines: list[str]) -> str:
    """A multi-line record as NewLineFormatter writes it: every line repeats the prefix, `\\r\\n` between lines."""
    return "\r\n".join(prefix + ln for ln in lines) + "\n"


WORDS = (
    "the of and to in is you that it he was for on are as with his they at be this have from or one had by "
    "word but not what all were we when your can said there use an each which she do how their if will up "
    "other about out many then them these so some her would make like him into time has look two more write "
    "go see number no way could people my than first water been call who oil its now find long down day did "
    "get come made may part summarize explain translate write code python function error server request model "
    "latency cache memory token batch queue please describe compare list steps why"
).split()


def token_ids(rng: random.Random, n: int, pool: list[str]) -> str:
    """A printed token-id list of length n (BOS first), cut from a seeded pool (cheap and varied)."""
    if n <= 1:
        return "[128000]"
    start = rng.randrange(len(pool) - n + 1)
    return "[128000, " + ", ".join(pool[start: start + n - 1]) + "]"


def id_pool(rng: random.Random, size: int = 8192) -> list[str]:
    """Random Llama-3 token ids as strings, drawn once per run."""
    return [str(rng.randrange(300, 128000)) for _ in range(size)]


def prompt_text(rng: random.Random, n_words: int) -> str:
    """Some plausible English prompt text."""
    return " ".join(rng.choice(WORDS) for _ in range(n_words)).capitalize() + "."


SHARDS_LOADING = "\n".join([
    "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
    "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:02,  1.21it/s]",
    "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.19it/s]",
    "Loading safetensors checkpoint shards:  75% Completed | 3/4 [00:02<00:00,  1.44it/s]",
    "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00,  1.32it/s]",
    "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00,  1.30it/s]",
    "",
])
"""tqdm progress of loading a 4-shard safetensors checkpoint (the same in every vLLM release)."""


def uvicorn_startup(pid: int) -> str:
    """uvicorn's start-up lines (no trailing newline)."""
    return (f"INFO:     Started server process [{pid}]\nINFO:     Waiting for application startup.\n"
            "INFO:     Application startup complete.")


def uvicorn_shutdown(pid: int) -> str:
    """uvicorn's shutdown lines (no trailing newline)."""
    return ("INFO:     Shutting down\nINFO:     Waiting for application shutdown.\n"
            f"INFO:     Application shutdown complete.\nINFO:     Finished server process [{pid}]")


def illegal_memory_access(wrapped: bool) -> list[str]:
    """The CUDA illegal-memory-access error lines; `wrapped`: re-raised by the V1 executor as `Worker failed`."""
    return [
        ("RuntimeError: Worker failed with error 'CUDA error: an illegal memory access was encountered" if wrapped
         else "RuntimeError: CUDA error: an illegal memory access was encountered"),
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "', please check the stack trace above for the root cause" if wrapped else "",
    ]
