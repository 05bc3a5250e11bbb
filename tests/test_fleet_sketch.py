"""The streaming path's fleet percentiles (`--percentiles sketch`): the replicas' DDSketches merged, within the
stated relative error of the exact values; every fleet distribution says whether it is exact or a sketch."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from vllmlog.fleet import analyze_fleet, synth
from vllmlog.fleet.sketch import RELATIVE_ACCURACY, SketchMerger, merged_latency

DATA = Path(__file__).parent / "data" / "fleet"
LIGHT = str(DATA / "light-load.log.gz")
OVERLOAD = str(DATA / "overload-queueing.log.gz")
DEAD = str(DATA / "engine-dead-kill9.log.gz")


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("sketch")
    synth.write_fleet(synth.Plan([synth.Replica(f"r{i}", src, 2.0 * i) for i, src in
                                  enumerate([LIGHT, OVERLOAD, LIGHT, DEAD, OVERLOAD])]), str(root / "logs"))
    exact = analyze_fleet([str(root / "logs")], workers=2, out_dir=str(root / "exact"))
    sketch = analyze_fleet([str(root / "logs")], workers=2, out_dir=str(root / "sketch"), percentiles="sketch")
    return root, exact, sketch


def test_sketch_within_its_stated_error_of_the_exact_values(both) -> None:
    import polars as pl

    root, exact, sketch = both
    rows = pl.read_parquet([str(root / "exact" / "rows" / r["rows"]["file"]) for r in exact.replicas])
    checked = 0
    for m in ("ttft_s", "e2e_s", "tpot_s", "queue_s", "prefill_s", "decode_s"):
        e, s = exact.report["red"]["latency"][m], sketch.report["red"]["latency"][m]
        assert e["from"] == "rows" and e["exact"] is True
        assert s["from"] == "sketch" and s["exact"] is False and s["relative_accuracy"] == RELATIVE_ACCURACY
        assert s["count"] == e["count"] and s["basis"] == e["basis"] and s["sources"] == e["sources"]
        assert s["min"] == e["min"] and s["max"] == e["max"] and s["excluded"] == e["excluded"]
        if not e["count"]:
            assert s["p50"] is None and s["mean"] is None
            continue
        assert math.isclose(s["mean"], e["mean"], rel_tol=1e-12)
        vals = sorted(rows.filter(pl.col(m + "_basis") == e["basis"]).get_column(m).drop_nulls().to_list())
        assert len(vals) == e["count"]
        for p in (50, 90, 95, 99):
            at_rank = vals[math.floor(p / 100 * (len(vals) - 1))]
            assert abs(s[f"p{p}"] - at_rank) <= RELATIVE_ACCURACY * at_rank + 1e-12, (m, p, s[f"p{p}"], at_rank)
            checked += 1
    assert checked >= 12  # ttft, e2e, tpot (0.32 CPU logs state no queue/prefill/decode split)
    assert sketch.report["red"]["latency"]["time_to_abort_s"]["count"] == \
        exact.report["red"]["latency"]["time_to_abort_s"]["count"]
    # everything else is the same document
    for k in ("replicas", "outliers", "imbalance", "incidents", "verdict", "use"):
        assert json.dumps(sketch.report[k], sort_keys=True) == json.dumps(exact.report[k], sort_keys=True)
    assert exact.report["provenance"]["red.latency"].startswith("exact:")
    assert sketch.report["provenance"]["red.latency"].startswith("sketch:")
    assert all(v.split(":")[0] in ("exact", "sketch") for v in exact.report["provenance"].values())


def test_sketch_path_needs_no_rows_and_merges_in_any_order(both) -> None:
    root, exact, sketch = both
    assert all(r["rows"] is None for r in sketch.replicas) and not list((root / "sketch" / "rows").iterdir())
    assert all(len(json.dumps(r["sketches"])) < 40_000 for r in sketch.replicas)  # a few KB a replica
    m = SketchMerger()
    for r in reversed(sketch.replicas):  # as results stream in, in any order
        m.add(r)
    assert json.dumps(m.latency(), sort_keys=True) == json.dumps(merged_latency(sketch.replicas), sort_keys=True)
    assert json.dumps(m.latency(), sort_keys=True) == json.dumps(sketch.report["red"]["latency"], sort_keys=True)
