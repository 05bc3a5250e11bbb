"""Chart data of the HTML report (``vllmlog.export.charts``) and the timeline's repeat folding
(``vllmlog.collapse``): gaps, thinning, histograms, incident windows — no browser needed."""

from __future__ import annotations

import random
from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from vllmlog.analyze import analyze, example_path
from vllmlog.collapse import collapse_repeats
from vllmlog.export.charts import (build_charts, gapped_series, histogram, incident_windows, split_gaps, thin,
                                   time_range, wall)


def test_wall_clock_is_the_logs_own_reading() -> None:
    assert wall(datetime(2026, 4, 10, 9, 32, 46)) == 1775813566.0
    assert wall(datetime(1970, 1, 1, 0, 0, 1, 500000)) == 1.5


def test_split_gaps_cuts_where_neighbours_are_far_apart() -> None:
    pts = [(0, 1), (10, 2), (20, 3), (60, 4), (70, 5)]
    assert split_gaps(pts, 15) == [[(0, 1), (10, 2), (20, 3)], [(60, 4), (70, 5)]]
    assert split_gaps(pts, 100) == [pts]


def test_gapped_series_puts_one_null_between_runs() -> None:
    pts = [(float(t), float(t)) for t in (0, 10, 20, 60, 70, 200)]
    xs, ys = gapped_series(pts, 15, 2000)
    assert ys == [0.0, 10.0, 20.0, None, 60.0, 70.0, None, 200.0]
    assert xs[3] == 40.0 and xs[6] == 135.0  # the null sits between the runs
    assert gapped_series([], 15, 10) == ([], [])


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=3000), st.integers(4, 400))
def test_thin_keeps_extremes_ends_and_order(ys: list[float], n_out: int) -> None:
    pts = [(float(i), y) for i, y in enumerate(ys)]
    out = thin(pts, n_out)
    assert len(out) <= max(len(pts) if len(pts) <= n_out else 0, n_out + 2)
    assert out[0] == pts[0] and out[-1] == pts[-1]
    assert [p[0] for p in out] == sorted(p[0] for p in out) and len({p[0] for p in out}) == len(out)
    assert max(p[1] for p in out) == max(ys) and min(p[1] for p in out) == min(ys)  # spikes survive


def test_histogram_round_edges_counts_and_clipping() -> None:
    rnd = random.Random(1)
    vals = [rnd.uniform(0.1, 0.9) for _ in range(1000)] + [50.0]
    h = histogram(vals)
    assert sum(h["counts"]) == len(vals)
    assert h["clipped"] >= 1 and h["edges"][-1] < 50  # the outlier is folded into the last bar
    step = h["edges"][1] - h["edges"][0]
    assert abs(step - 0.05) < 1e-9  # a round width (1, 2 or 5 × 10^k)


def test_degenerate_histograms() -> None:
    one = histogram([0.25])
    assert one["counts"] == [1] and one["edges"][0] < 0.25 < one["edges"][1] and one.get("single")
    same = histogram([3.0] * 40)
    assert same["counts"] == [40] and abs((same["edges"][1] - same["edges"][0]) - 0.3) < 1e-9
    zeros = histogram([0.0, 0.0])
    assert zeros["counts"] == [2] and zeros["edges"][1] - zeros["edges"][0] == 1e-3
    # estimated at 1-second resolution: integer seconds sit in the middle of bars at least 1 s wide
    est = histogram([0.0, 1.0, 1.0, 2.0, 5.0, 12.0], resolution=1.0)
    assert est["edges"][1] - est["edges"][0] >= 1.0 and est["edges"][0] == -0.5
    assert histogram([]) == {"edges": [], "counts": [], "clipped": 0}


def test_incident_windows_follow_the_findings() -> None:
    a = analyze([example_path("kv-pressure")])
    w = incident_windows(a)
    seen = [f for f in a.findings if f.get("first_seen")]
    assert len(w) == len(seen) >= 1
    for win in w:
        assert set(win) == {"start", "end", "onset", "label", "severity"}
        assert win["start"] <= win["onset"] <= win["end"] or win["start"] == win["onset"]
    f = seen[0]
    assert w[0]["onset"] == wall(datetime.fromisoformat(f["first_seen"]))
    assert w[0]["label"].startswith(f["code"])
    tr = time_range(a)
    assert tr is not None and tr["min"] <= w[0]["start"] <= w[0]["end"] <= tr["max"]


def test_every_time_chart_lies_in_the_shared_range() -> None:
    for name in ("kv-pressure", "client-aborts", "healthy"):
        a = analyze([example_path(name)])
        tr = time_range(a)
        for spec in build_charts(a)["over_time"]:
            if isinstance(spec, tuple):
                continue
            bucket = spec.get("bucket_s", 0)
            for s in spec["series"]:
                assert tr["min"] - bucket <= min(s["x"]) and max(s["x"]) <= tr["max"] + bucket, (name, s["label"])
                assert len(s["x"]) == len(s["y"])


def test_distribution_counts_match_the_numbers_analyze_reports() -> None:
    """The histogram pictures the same population the percentiles were computed over."""
    for name in ("kv-pressure", "client-aborts", "healthy"):
        a = analyze([example_path(name)])
        for spec in build_charts(a)["distributions"]:
            if isinstance(spec, tuple):
                continue
            metric = spec["id"].removeprefix("chart-dist-")
            d = a.red_use["durations"][metric]
            assert sum(spec["counts"]) == d["count"], (name, metric)
            assert [m["value"] for m in spec["markers"]] == [d[q] for q in ("p50", "p90", "p99") if d.get(q) is not None]


def _e(ts: str, kind: str, text: str, sev: str = "error", file: str = "a.log", count: int = 1) -> dict:
    return {"ts": f"2026-01-01T{ts}", "kind": kind, "text": text, "severity": sev, "file": file, "count": count}


def test_collapse_repeats_folds_look_alikes_within_a_window() -> None:
    es = [_e("10:00:00", "error", "block allocation failed for req_1"),
          _e("10:00:01", "metric", "KV-cache usage reaches 82.0%", "warning"),
          _e("10:00:05", "error", "block allocation failed for req_2"),
          _e("10:00:06", "metric", "KV-cache usage reaches 95.0%", "warning"),
          _e("10:00:30", "error", "block allocation failed for req_3", count=3),
          _e("10:00:40", "finding", "K203 …", "warning"),
          _e("10:00:41", "finding", "K203 …", "warning"),
          _e("10:05:00", "error", "block allocation failed for req_9"),
          _e("10:05:01", "error", "block allocation failed for req_10", file="b.log")]
    out = collapse_repeats(es)
    texts = [(e["text"], e["repeats"] if "repeats" in e else None) for e in out]
    assert texts == [("block allocation failed for req_1", 3), ("KV-cache usage reaches 82.0%", 1),
                     ("KV-cache usage reaches 95.0%", 1),  # turning points keep their numbers
                     ("K203 …", None), ("K203 …", None),  # findings are never merged
                     ("block allocation failed for req_9", 1),  # more than 60 s after the last one
                     ("block allocation failed for req_10", 1)]  # another file
    assert out[0]["count"] == 5 and out[0]["last_ts"] == "2026-01-01T10:00:30"
    assert es[0].get("repeats") is None  # the input is not modified
    exact = [_e("10:00:00", "metric", "queue drained", "info"), _e("10:00:20", "metric", "queue drained", "info")]
    assert [e["repeats"] for e in collapse_repeats(exact)] == [2]


def test_incident_windows_come_from_incidents_when_the_analysis_has_them() -> None:
    a = analyze([example_path("kv-pressure")])
    a.incidents = [{"onset": "2026-11-30T03:11:20", "end": "2026-11-30T03:11:40", "headline": "requests preempted",
                    "severity": "error", "cause": {"code": "K202"}},
                   {"onset": "2026-11-30T03:11:50", "end": None, "headline": "queue", "severity": "warning", "cause": None},
                   {"onset": None, "end": None, "headline": "no time", "severity": "info", "cause": None}]
    w = incident_windows(a)
    assert [(x["label"], x["severity"]) for x in w] == [("K202 requests preempted", "error"), ("queue", "warning")]
    assert w[0]["end"] - w[0]["start"] == 20.0 and w[1]["start"] == w[1]["end"] == w[1]["onset"]
    a.incidents = []  # a healthy run: incidents are the truth, nothing is shaded
    assert incident_windows(a) == []
