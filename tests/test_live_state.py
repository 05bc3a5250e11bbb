"""Live state and exporter: same numbers as ``analyze`` however the lines arrive; exposition shape."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from vllmlog.live.exporter import LiveCollector, make_registry
from vllmlog.live.follow import FileFollower, Segment
from vllmlog.live.state import INTER_TOKEN_BUCKETS, REQUEST_LATENCY_BUCKETS, TTFT_BUCKETS, Histogram, LiveState
from vllmlog.numbers import latency_value
from vllmlog.run import load

from .conftest import CORPUS

LIGHT = CORPUS / "vllm-cpu" / "01-startup-and-light-load.log"
ABORTS = CORPUS / "vllm-cpu" / "04-client-aborts.log"
JSONLOG = CORPUS / "vllm-cpu" / "07b-json-logging-builtin-formatter.log"
CRASH = CORPUS / "vllm-cpu-faults" / "P5-oom-runtime-cgroup.log"


def _follow_in_pieces(src: Path, dst: Path, seed: int) -> tuple[FileFollower, LiveState]:
    """Append ``src`` to ``dst`` in random byte-sized pieces, polling and feeding in between."""
    data = src.read_bytes()
    rnd = random.Random(seed)
    f = FileFollower(str(dst))
    st = LiveState(str(dst), year=2026)
    i = 0
    with open(dst, "wb") as out:
        while i < len(data):
            n = rnd.choice([1, 7, 100, 4096, 65536])
            out.write(data[i : i + n])
            out.flush()
            i += n
            st.feed(f.poll())
            if rnd.random() < 0.2:
                st.flush()  # an idle moment
            st.release_ended()  # real clock, 1 s linger: late lines of an ended request still fold in
    st.feed(f.poll())
    st.feed(f.close())
    st.end_of_input()
    return f, st


def _metrics(st: LiveState) -> dict[str, list]:
    text = generate_latest(make_registry(LiveCollector(st, instance="t"))).decode()
    return {fam.name: fam.samples for fam in text_string_to_metric_families(text)}


def test_counts_match_analyze_whatever_the_chunking(tmp_path: Path) -> None:
    for k, src in enumerate((LIGHT, ABORTS, JSONLOG, CRASH)):
        f, st = _follow_in_pieces(src, tmp_path / f"{k}.log", seed=k)
        data = src.read_bytes()
        n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        assert f.stats.lines_read == n_lines
        assert st.lines_counted == n_lines  # every line exactly once, despite idle flushes
        run = load(str(src), year=2026)
        assert Counter({s: c for (_, s), c in st.requests.items()}) == Counter(j.status for j in run.journeys)
        m = _metrics(st)
        assert sum(s.value for s in m["vllmlog_log_lines"] if s.name.endswith("_total")) == n_lines
        assert st.pending_lines == 0


def test_exposition_names_labels_and_vllm_buckets(tmp_path: Path) -> None:
    _, st = _follow_in_pieces(LIGHT, tmp_path / "a.log", seed=3)
    m = _metrics(st)
    req = {s.labels["status"]: s.value for s in m["vllmlog_requests"] if s.name == "vllmlog_requests_total"}
    assert req == {"success": 50.0}
    assert all(s.labels["model"] == "/models/tiny" and s.labels["instance"] == "t" for s in m["vllmlog_requests"])
    lines = [s for s in m["vllmlog_log_lines"] if s.name == "vllmlog_log_lines_total"]
    assert {"level", "kind", "instance"} <= set(lines[0].labels)
    assert any(s.labels["level"] == "none" for s in lines)  # uvicorn/raw lines have no vLLM level
    for name, edges in (("vllmlog_time_to_first_token_seconds", TTFT_BUCKETS),
                        ("vllmlog_e2e_request_latency_seconds", REQUEST_LATENCY_BUCKETS),
                        ("vllmlog_time_per_output_token_seconds", INTER_TOKEN_BUCKETS)):
        les = [s.labels["le"] for s in m[name] if s.name.endswith("_bucket")]
        assert les == [str(float(e)) for e in edges] + ["+Inf"]
    count = next(s.value for s in m["vllmlog_time_to_first_token_seconds"] if s.name.endswith("_count"))
    run = load(str(LIGHT), year=2026)
    # the summary's gate: successful requests' measured values (01's TTFTs are 1-second estimates: none)
    assert count == sum(1 for j in run.journeys if (vb := latency_value(j, "ttft_s")) and vb[1] == "measured") == 0
    # gauges from the latest stats line
    assert m["vllmlog_kv_cache_usage_ratio"][0].labels["engine"] == "0"
    assert m["vllmlog_requests_in_flight"][0].value == 0
    assert "vllmlog_watch_lag_bytes" in m and "vllmlog_watch_last_line_time_seconds" in m


def test_histogram_le_semantics() -> None:
    h = Histogram((0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 1.0, 3.0):
        h.observe(v)
    assert h.buckets() == [("0.1", 2), ("1.0", 4), ("+Inf", 5)]
    assert h.sum == 4.65


def test_inflight_cap_counts_evictions(tmp_path: Path) -> None:
    f = FileFollower(str(ABORTS))
    st = LiveState(str(ABORTS), year=2026, max_inflight=5)
    while segs := f.poll():
        st.feed(segs)
    st.flush()
    assert st.inflight <= 5
    assert st.evicted > 0
    assert _metrics(st)["vllmlog_inflight_evicted"][0].value == st.evicted


def test_error_categories_and_bounded_memory(tmp_path: Path) -> None:
    f = FileFollower(str(CRASH))
    st = LiveState(str(CRASH), year=2026, max_notable=10)
    while segs := f.poll():
        st.feed(segs)
    st.end_of_input()
    cats = {c for (_, c) in st.errors}
    assert "engine" in cats and "request" in cats
    assert len(st.pipe.notable) <= 2 * 10 + 200
    run = st.snapshot()
    assert run.servers and run.servers[0].model == "/models/tiny"


def test_ended_journeys_are_released_after_linger_not_at_end(tmp_path: Path) -> None:
    f = FileFollower(str(ABORTS))
    st = LiveState(str(ABORTS), year=2026, linger_s=1.0)
    lines = [ln for seg in f.poll() for ln in seg.lines]
    # up to (not including) the graceful shutdown, which closes every journey
    stop = next(n for n, t in lines if "Application shutdown complete" in t)
    st.feed([Segment(0, lines[: stop - 1])])
    st.flush()
    assert not st.requests  # ended journeys linger (late lines may still fold in)
    st.release_ended(now=0.0)  # first sighting
    assert not st.requests
    st.release_ended(now=2.0)
    assert st.requests == {("/models/tiny", "aborted"): 25}  # before the end of input
    st.feed([Segment(0, lines[stop - 1 :])])
    st.flush()
    assert st.requests == {("/models/tiny", "aborted"): 25, ("/models/tiny", "success"): 55}
    assert st.inflight == 0


def test_memory_stays_bounded_over_many_unique_requests() -> None:
    """16k distinct request ids through a small cap: every structure that grows per request is bounded."""
    text = ABORTS.read_text(encoding="utf-8").split("\n")
    a = next(i for i, t in enumerate(text) if "Application startup complete" in t)
    b = next(i for i, t in enumerate(text) if "Shutting down" in t)
    head, body = text[: a + 1], text[a + 1 : b]
    st = LiveState("x", year=2026, max_inflight=100, recent_journeys=100, max_notable=50, max_stats=20)
    st.max_attempts = 500
    n = 0

    def feed(lines: list[str]) -> None:
        nonlocal n
        st.feed([Segment(0, [(n + i + 1, t) for i, t in enumerate(lines)])])
        n += len(lines)

    feed(head)
    for cycle in range(200):  # 80 requests per cycle → 16k request ids
        feed([t.replace("client-", f"c{cycle}-") for t in body])
    jb = st.pipe.journeys
    assert len(jb.open) <= 100 and len(st.recent) <= 100
    assert len(getattr(jb, "attempts", {})) <= 500 + 100 + len(getattr(jb, "closing", ()))
    assert len(getattr(jb, "closing", ())) <= 2048
    assert len(st.pipe.notable) <= 2 * 50 + 200 and len(st.pipe.series.stats) <= 2 * 20
    assert st.evicted > 10_000  # 0.32 prints no end line for most completions: the cap bites, counted
    assert st.lines_counted + st.pending_lines == n


def test_bounded_live_state_finds_what_analyze_finds_on_the_whole_corpus() -> None:
    """One pipeline, two drivers: the rules on watch's trimmed state agree with a full load."""
    from vllmlog.diagnose import diagnose

    from .conftest import corpus_logs

    for path in corpus_logs():
        f = FileFollower(str(path))
        st = LiveState(str(path), year=2026)
        while segs := f.poll():
            st.feed(segs)
        st.end_of_input()
        live = sorted(x.code for x in diagnose(st.snapshot(), fill_text=False))
        full = sorted(x.code for x in diagnose(load(str(path), year=2026), fill_text=False))
        assert live == full, path.name


def test_histograms_hold_the_summarys_latency_values(tmp_path: Path) -> None:
    """A handbook log with logged TTFT/TPOT/e2e: the live histograms count exactly the values the summary's
    percentiles are over (successful requests, measured), and sum to the same total."""
    from vllmlog.numbers import compute

    src = Path(__file__).parent / "data" / "heldout" / "18-handbook-slow-decode.log"
    _, st = _follow_in_pieces(src, tmp_path / "h.log", seed=5)
    m = _metrics(st)
    n = compute(load(str(src), year=2026))
    for fam, metric in (("vllmlog_time_to_first_token_seconds", "ttft_s"), ("vllmlog_e2e_request_latency_seconds", "e2e_s"),
                        ("vllmlog_time_per_output_token_seconds", "tpot_s")):
        count = next(s.value for s in m[fam] if s.name.endswith("_count"))
        total = next(s.value for s in m[fam] if s.name.endswith("_sum"))
        d = n["latency"][metric]
        assert d["basis"] == "measured" and count == d["count"] > 0
        assert abs(total - d["mean"] * d["count"]) < 1e-6
