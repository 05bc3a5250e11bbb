"""Property tests: format random values with vLLM's (or the handbook's) own format strings, parse them back."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllmlog.parsing import parser as P
from vllmlog.parsing.parser import LineParser

V0_STATS = ("Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, "
            "Swapped: %d reqs, Pending: %d reqs, GPU KV cache usage: %.1f%%, CPU KV cache usage: %.1f%%.")
V1_STATS = "Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d reqs, Waiting: %d reqs"
HB_DECODE = "Decode step %d for %s. Batch size: %d, KV cache usage: %d%%"
HB_FINISHED = "Request %s finished. Status: SUCCESS. Total tokens: %d, Total latency: %.3fs, TTFT: %.3fs, TPOT: %.4fs"

tput = st.floats(min_value=0, max_value=1e6, allow_nan=False)
pct = st.floats(min_value=0, max_value=100, allow_nan=False)
count = st.integers(min_value=0, max_value=100_000)
rid = st.from_regex(r"(req|cmpl|chatcmpl)[-_][0-9a-zA-Z_-]{1,40}", fullmatch=True)
secs = st.floats(min_value=0, max_value=1e5, allow_nan=False)


def one(line: str, prefix: str = "INFO 03-25 10:15:23 metrics.py:341] "):
    p = LineParser("x", 2026)
    evs = p.feed([(1, prefix + line)]) + p.close()
    assert len(evs) == 1
    return evs[0]


@settings(max_examples=150, deadline=None)
@given(tput, tput, count, count, count, pct, pct)
def test_v0_stats_roundtrip(pt, gt, run, sw, pend, gpu, cpu):
    e = one(V0_STATS % (pt, gt, run, sw, pend, gpu, cpu))
    f = e.fields
    assert e.kind == "engine_stats"
    assert f["prompt_throughput"] == float("%.1f" % pt) and f["generation_throughput"] == float("%.1f" % gt)
    assert (f["running"], f["swapped"], f["waiting"]) == (run, sw, pend)
    assert f["kv_cache_usage"] == pytest.approx(float("%.1f" % gpu) / 100)
    assert f["cpu_kv_cache_usage"] == pytest.approx(float("%.1f" % cpu) / 100)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 999), tput, tput, count, count, st.one_of(st.none(), count), pct, st.one_of(st.none(), pct))
def test_v1_stats_roundtrip(eng, pt, gt, run, wait, pre, kv, hit):
    msg = V1_STATS % (eng, pt, gt, run, wait)
    if pre is not None:
        msg += ", Preemptions: %d" % pre
    msg += ", GPU KV cache usage: %.1f%%" % kv
    if hit is not None:
        msg += ", Prefix cache hit rate: %.1f%%" % hit
    e = one(msg, "(APIServer pid=7) INFO 11-30 10:15:23 [loggers.py:334] ")
    f = e.fields
    assert e.kind == "engine_stats" and e.process == "APIServer pid=7"
    assert f["engine"] == eng and f["running"] == run and f["waiting"] == wait
    assert f.get("preemptions") == pre
    assert f["kv_cache_usage"] == pytest.approx(float("%.1f" % kv) / 100) and f["kv_device"] == "GPU"
    if hit is not None:
        assert f["prefix_cache_hit_rate"] == pytest.approx(float("%.1f" % hit) / 100)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**7), rid, st.integers(1, 4096), st.integers(0, 100))
def test_handbook_decode_roundtrip_fast_and_slow(step, r, bs, kv):
    line = "INFO 03-25 10:15:23 model_runner.py:312] " + HB_DECODE % (step, r, bs, kv)
    p = LineParser("x", 2026)
    fast = p.feed_jsonl([(1, line)]) + p.close_jsonl()
    d = orjson.loads(fast)
    assert d["kind"] == "decode_step" and d["request_id"] == r
    assert d["fields"] == {"step": step, "batch_size": bs, "kv_cache_usage": kv / 100}
    # the general path (no fast path) gives the same JSON
    old = P._FAST_DECODE
    try:
        P._FAST_DECODE = _NoMatch()
        q = LineParser("x", 2026)
        slow = "".join(P._jsonl(e) for e in q.feed([(1, line)]) + q.close())
    finally:
        P._FAST_DECODE = old
    assert slow == fast


class _NoMatch:
    def match(self, _s):
        return None


@settings(max_examples=150, deadline=None)
@given(rid, st.integers(1, 10**6), secs, secs, secs)
def test_handbook_finished_roundtrip(r, tokens, e2e, ttft, tpot):
    e = one(HB_FINISHED % (r, tokens, e2e, ttft, tpot), "INFO 03-25 10:15:26 scheduler.py:612] ")
    f = e.fields
    assert e.kind == "request_finished" and e.request_id == r and f["status"] == "success"
    assert f["total_tokens"] == tokens
    assert f["e2e_s"] == float("%.3f" % e2e) and f["ttft_s"] == float("%.3f" % ttft) and f["tpot_s"] == float("%.4f" % tpot)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 12), st.integers(1, 28), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_envelope_timestamp_roundtrip(mo, dd, hh, mi, ss):
    e = one("hello", "WARNING %02d-%02d %02d:%02d:%02d [x.py:1] " % (mo, dd, hh, mi, ss))
    assert (e.ts.month, e.ts.day, e.ts.hour, e.ts.minute, e.ts.second) == (mo, dd, hh, mi, ss)
    assert e.level == "WARNING" and e.source == "x.py:1"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), rid, st.integers(0, 300), st.integers(1, 64),
                          st.sampled_from(["0", "5", "45", "50", "100", "45.5", "07"]), st.booleans()), min_size=1, max_size=60))
def test_decode_runs_fast_equals_general(rows):
    """Runs of Decode lines (same second and source → the cached-prefix path) give the general path's JSON."""
    lines = []
    for sec, src, r, step, bs, kv, other in rows:
        head = f"INFO 03-25 10:15:{20 + sec:02d} {'[' if src == 2 else ''}model_runner.py:{312 + src}] "
        lines.append(head + f"Decode step {step} for {r}. Batch size: {bs}, KV cache usage: {kv}%")
        if other:
            lines.append(head + f"Decode step {step} for {r}. Token generation speed: 12.5 tokens/s (below threshold 20 tokens/s)")
    it = list(enumerate(lines, 1))
    p = LineParser("x", 2026)
    fast = p.feed_jsonl(it) + p.close_jsonl()
    old = P._FAST_DECODE
    try:
        P._FAST_DECODE = _NoMatch()
        q = LineParser("x", 2026)
        slow = q.feed_jsonl(it) + q.close_jsonl()
    finally:
        P._FAST_DECODE = old
    assert fast == slow
    ev = LineParser("x", 2026)
    objs = "".join(P._jsonl(e) for e in ev.feed(it) + ev.close())
    assert objs == fast
