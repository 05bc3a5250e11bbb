"""The compiled scanner groups lines into records (tracebacks, NewLineFormatter's ``\\r`` continuations, raw lines
below a message, uvicorn lines) and classifies them through a memo — it must give exactly what the pure-Python
parser gives, whatever the lines, the block boundaries and what the memo already holds.

Every comparison uses ``check`` from ``test_fast_path`` (JSONL from lists and raw bytes, Event objects, count mode,
one block and split blocks)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllmlog.parsing import fast

from .conftest import CORPUS
from .test_fast_path import AFTER, FUZZ, PRELUDE, check, needs_c, parse, split

E = "INFO 03-25 10:00:00 [a.py:1] "
EE = "ERROR 03-25 10:00:00 [serving.py:500] "
P = "(APIServer pid=7) "
# shapes that sit on the record-grouping rules of LineParser._run
SHAPES = [
    E + "hello", E + "Added request r1.", E + "Received request r1: params: SamplingParams(n=1, max_tokens=5).",
    E + "Generated response r1 (streaming delta): output: 'x', finish_reason: None", E + "Aborted request(s) a, b.",
    E + "Config dump:", E + "", E + "Exception in callback foo()", EE + "Traceback (most recent call last):",
    EE + 'File "x.py", line 1, in f', EE + '  File "x.py", line 1, in f', EE + "    raise ValueError(x)",
    EE + "ValueError: boom", EE + "EngineCore hit an exception: Traceback (most recent call last):",
    "ray.exceptions.RayTaskError(RuntimeError): ray::RayWorker.execute_method() (pid=9, ip=10.0.0.7)", "Foo(Bar): no",
    EE + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 350.00 MiB.", EE + "second line of the message", EE + "^^^^^", EE + "During handling of the above exception",
    EE + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.", EE + "Added request r2.",
    "ERROR 03-25 10:00:01 [serving.py:500] ValueError: later", "ERROR 03-25 10:00:00 [other.py:9] ValueError: other",
    P + EE + "Traceback (most recent call last):", P + EE + '  File "y.py", line 2, in g', P + "raw tagged line",
    "(EngineCore pid=8) " + EE + "RuntimeError: x", "Traceback (most recent call last):", '  File "z.py", line 3, in h',
    "    do()", "KeyError: 'k'", "ValueError", "Process EngineCore:", "handle: <Handle foo()>", "nanobind: leaked 3 types!",
    " - leaked type x", "/a/b.py:12: FutureWarning: deprecated", "  warnings.warn('x')", "  File \"w.py\", line 1",
    "terminate called after throwing an instance of 'c10::Error'", "  what():  boom", "frame #0: x",
    "Exception raised from f at a.cpp:1 (most recent call first):", "[W1130 02:55:16.438346222 utils.cpp:68] Warning: x",
    "[E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught collective operation timeout: x",
    '{"message": "Added request j.", "level": "INFO", "timestamp": "2026-03-25 10:00:02,123"}', '{"no": "message"}',
    'INFO:     127.0.0.1:1 - "GET /x HTTP/1.1" 200 OK', "INFO:     Exception in ASGI application", "INFO:\u00a0x",
    "INFO:x", "WARN 03-25 10:00:00 [a.py:1] w", "FATAL 03-25 10:00:00 [a.py:1] f", "INFO 2026-03-25T10:00:00 [a.py:1] d",
    "INFO 03-25 10:00:00,5 [a.py:1] frac", "vllm-1  | " + E + "docker", "Apr 18 09:00:00 host vllm[1]: x",
    "2026-03-25T10:00:00Z " + E + "k8s", "[pod/a/b] " + E + "pod", "[rank0]: Traceback (most recent call last):", "",
    "   ", "\u00a0", "é raw", "█ logo", "x [repeated 3x across cluster]", "a\tb", "(weird) text", "(x pid=é1) y",
    "(\u00e9 pid=1) y", "INFO 03-25 10:00:00 [a.py:1] \u00e9t\u00e9", "Decode", E + "Decode step 1 for r1. Batch size: 8, KV cache usage: 45%",
    "DEBUG 03-25 10:00:00 [gpu_model_runner.py:4043] Running batch with cudagraph_mode: NONE, batch_descriptor: "
    "BatchDescriptor(num_tokens=2, num_reqs=None), should_ubatch: False",
]
SHAPE = st.sampled_from(SHAPES)
LINE = st.one_of(SHAPE, SHAPE.map(lambda s: s + "\r"), SHAPE.map(lambda s: s + "\r\r"),
                 st.tuples(SHAPE, SHAPE).map(lambda t: t[0] + "\r" + t[1]), st.text(max_size=20))


@needs_c
@settings(max_examples=200 * FUZZ, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(lines=st.lists(LINE, min_size=1, max_size=30), cuts=st.lists(st.integers(0, 30), max_size=4))
def test_record_shapes_c_equals_pure(lines: list[str], cuts: list[int]) -> None:
    check([PRELUDE] + [x.replace("\n", " ") for x in lines] + [AFTER], cuts)


def _real_lines() -> list[str]:
    out: list[str] = []
    for name in ("vllm-cpu/04-client-aborts.log", "vllm-cpu/05-bad-input-errors.log", "vllm-cpu-faults/P1-engine-dead-kill9.log",
                 "vllm-cpu/08-debug-level-light-load.log", "vllm-cpu/07b-json-logging-builtin-formatter.log"):
        p = CORPUS / name
        if p.exists():
            out += p.read_text(encoding="utf-8", errors="replace").split("\n")
    return out


@needs_c
@pytest.mark.parametrize("seed", range(6))
def test_real_lines_reordered(seed: int) -> None:
    """Runs of real lines (tracebacks with \\r continuations, request logging, JSON records) cut and put together in
    random order and random blocks: the scanner still agrees with Python (and takes most lines)."""
    lines = _real_lines()
    assert lines, "corpus copy missing"
    rnd = random.Random(seed)
    runs = []
    i = 0
    while i < len(lines):
        k = rnd.randint(1, 40)
        runs.append(lines[i:i + k])
        i += k
    rnd.shuffle(runs)
    mixed = [x for r in runs[:60] for x in r]
    counting = check(mixed, sorted(rnd.randint(0, len(mixed)) for _ in range(5)))
    assert counting.taken > 0.5 * len(mixed)


@needs_c
def test_memo_warm_and_cold_give_the_same_output() -> None:
    """The memo is shared by every parser of the process: a second pass (all hits) and a pass after clearing it
    (all misses) write the same bytes as the pure-Python parser."""
    lines = _real_lines()[:3000]
    one = split(lines)
    ref = parse(one, scan=None)
    fast._speedups.memo_clear()
    cold = parse(one, scan=fast._speedups.scan)
    warm = parse(one, scan=fast._speedups.scan)
    info = fast._speedups.memo_info()
    assert ref == cold == warm
    assert info["entries"] > 10 and info["hits"] > 0


@needs_c
def test_v1_engine_core_hit_an_exception_record_carries_its_exception() -> None:
    """V1 0.7–0.8: 'EngineCore hit an exception: Traceback (most recent call last):' opens a traceback in the
    compiled path as in the Python one, so the record's exception (a CUDA OOM here) types it (blind5/27)."""
    check([PRELUDE, EE + "EngineCore hit an exception: Traceback (most recent call last):",
           EE + '  File "/v/core.py", line 378, in run_engine_core', EE + "    engine_core = EngineCoreProc()",
           EE + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 350.00 MiB.", EE, AFTER], [])
