"""The compiled scanner writes float fields as Python's repr when it has no exponent: that must be exactly
what orjson writes for the same float (the pure-Python path dumps with orjson)."""

from __future__ import annotations

import math

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from vllmlog.parsing import fast
from vllmlog.parsing.parser import LineParser


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_repr_without_exponent_is_orjson(v: float) -> None:
    r = repr(v)
    if "e" in r:
        return  # the scanner hands such values to Python
    assert orjson.dumps(v).decode() == r


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 10**9), st.integers(0, 10**6), st.sampled_from(["s", "ms", " ms", "  s"]))
def test_prefill_latency_fields_match_the_python_path(whole: int, frac: int, unit: str) -> None:
    raw = f"{whole}.{frac:06d}".rstrip("0") + unit
    line = f"INFO 03-25 10:00:00 model_runner.py:278] Prefill completed for r1. Latency: {raw}, Throughput: {whole},{frac} tokens/s"
    lines = [line, "INFO 03-25 10:00:01 a.py:1] next"]
    c = LineParser("x.log", 2026)
    got = c.feed_lines_jsonb(1, lines) + c.close_jsonl().encode()
    saved = fast.scan
    try:
        fast.scan = None
        p = LineParser("x.log", 2026)
        want = p.feed_lines_jsonb(1, lines) + p.close_jsonl().encode()
    finally:
        fast.scan = saved
    assert got == want
    assert math.isfinite(orjson.loads(got.split(b"\n")[0])["fields"]["prefill_s"])
