"""The summary: numpy-exact percentiles, stable JSON keys, SLOs, digest, CLI commands and table exports."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllmlog.cli import main
from vllmlog.errors import ConfigError
from vllmlog.run import load
from vllmlog.summary import SloTargets, describe, percentile, summarize, summarize_paths

from .conftest import CORPUS, DATA

HB = DATA / "journeys" / "handbook-small.log"
CPU = CORPUS / "vllm-cpu"


# ----------------------------------------------------------------------------- percentiles
def test_percentile_equals_numpy_bit_for_bit() -> None:
    rng = random.Random(7)
    for n in list(range(1, 40)) + [97, 100, 101, 1000]:
        xs = sorted(rng.choice([rng.random() * 10, rng.expovariate(3), float(rng.randint(0, 5))]) for _ in range(n))
        for p in (0, 1, 25, 50, 90, 95, 99, 99.9, 100, rng.uniform(0, 100)):
            assert percentile(xs, p) == float(np.percentile(xs, p)), (n, p)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=60),
       st.floats(min_value=0, max_value=100))
def test_percentile_property(xs: list[float], p: float) -> None:
    assert percentile(sorted(xs), p) == float(np.percentile(xs, p))


def test_describe_empty_and_mean() -> None:
    assert describe([])["p50"] is None and describe([])["count"] == 0
    d = describe([3.0, 1.0, 2.0])
    assert d["p50"] == 2.0 and d["max"] == 3.0 and d["mean"] == pytest.approx(np.mean([1, 2, 3]))


# ----------------------------------------------------------------------------- summary document
KEYS = ("requests", "latency", "throughput", "kv_cache_usage", "queue", "preemptions", "errors", "warnings", "slo",
        "runs", "time_range")


def test_summary_keys_and_handbook_fixture() -> None:
    d = summarize(load(str(HB), year=2026))
    for k in KEYS:
        assert k in d
    assert d["requests"]["total"] == 8
    assert d["requests"]["by_status"] == {"success": 4, "aborted": 1, "error": 0, "cancelled": 1, "unfinished": 2}
    for m in ("ttft_s", "tpot_s", "e2e_s", "queue_s"):
        assert set(("p50", "p90", "p95", "p99", "mean", "max")) <= set(d["latency"][m])
    # vllm bench serve: over successful requests only, and never mixed with estimated values
    logged_ttft = [1.25, 1.1, 0.9, 0.4]
    ttft = d["latency"]["ttft_s"]
    assert ttft["p95"] == float(np.percentile(logged_ttft, 95)) and ttft["count"] == 4
    assert ttft["basis"] == "measured" and ttft["sources"] == {"logged": 4}
    # TPOT only for outputs > 1 token (req_4 logged TPOT 0 for its one token)
    assert d["latency"]["tpot_s"]["count"] == 3
    assert len(d["runs"]) == 2 and d["runs"][0]["version"] == "0.6.1.post2"
    assert d["preemptions"]["total"] == 1 and d["preemptions"]["requests_preempted"] == 1
    assert d["queue"]["queue_wait_exceeded"] == 1
    assert d["kv_cache_usage"]["source"] == "decode_steps" and d["kv_cache_usage"]["max"] == 0.85
    assert d["kv_cache_usage"]["time_above_80_s"] > 0
    assert any(g["kind"] == "block_allocation_failed" for g in d["errors"])
    slo = d["slo"]
    assert slo["targets"] == {"ttft_s": 1.0, "tokens_per_s": 20.0, "queue_s": 30.0, "e2e_s": None}
    assert slo["ttft"] == {"met": 2, "total": 4, "attainment": 0.5, "basis": "measured"}
    # req_5's first attempt waited > 30 s and was cancelled: a failed request, not a latency sample; it misses
    # the SLO in `all` (goodput), while the queue SLO is over the successful requests (estimated queue times)
    assert slo["queue"] == {"met": 4, "total": 4, "attainment": 1.0, "basis": "estimated"}
    assert slo["all"]["total"] == 5 and slo["all"]["met"] < 5


def test_slo_targets_parse() -> None:
    t = SloTargets.parse(["ttft_s=0.5", "tokens_per_s=30", "e2e_s=20s"])
    assert (t.ttft_s, t.tokens_per_s, t.e2e_s, t.queue_s) == (0.5, 30.0, 20.0, 30.0)
    with pytest.raises(ConfigError):
        SloTargets.parse(["latency=3"])
    with pytest.raises(ConfigError):
        SloTargets.parse(["ttft_s=fast"])


def test_streaming_summary_equals_loaded_summary() -> None:
    seen = []
    a = summarize_paths(str(HB), year=2026, by="day", journey_sink=seen.append)
    b = summarize(load(str(HB), year=2026), by="day")
    assert len(seen) == 8
    for k in ("requests", "latency", "slo", "kv_cache_usage", "queue", "buckets"):
        assert a[k] == b[k], k
    [day] = a["buckets"]
    assert day["start"] == "2026-11-30T00:00:00" and day["requests"]["total"] == 8


def test_real_v1_summary() -> None:
    d = summarize_paths(str(CPU / "02-overload-queueing.log"), year=2026, by="hour")
    assert d["requests"]["total"] == 240 and d["requests"]["by_status"]["success"] == 240
    assert d["requests"]["status_sources"] == {"estimated": 240}
    q = d["queue"]
    assert q["max_num_seqs"] == 4 and q["running"]["max"] == 4 and q["waiting"]["max"] == 60
    assert q["time_running_at_max_num_seqs_s"] > 0 and q["waiting"]["time_above_0_s"] > 0
    assert d["runs"][0]["version"] == "0.32.0" and d["runs"][0]["args"]["max_num_seqs"] == 4
    assert d["throughput"]["generation_tokens_per_s"]["max"] > 1000
    assert d["kv_cache_usage"]["source"] == "engine_stats"
    assert len(d["buckets"]) == 1
    [eng] = d["engines"]
    assert (eng["server"], eng["engine"], eng["source"]) == (0, 0, "engine_stats")
    assert eng["running"]["max"] == 4 and eng["waiting"]["max"] == 60


def test_engines_per_server_run_in_handbook_fixture() -> None:
    d = summarize(load(str(HB), year=2026))
    runs = {(e["server"], e["source"]) for e in d["engines"]}
    assert runs == {(0, "request_scheduled"), (1, "request_scheduled"), (0, "decode_steps")}  # run 1 decodes nothing
    dec0 = next(e for e in d["engines"] if e["source"] == "decode_steps" and e["server"] == 0)
    assert dec0["batch_size"]["max"] == 2 and dec0["kv_cache_usage"]["max"] == 0.85


# ----------------------------------------------------------------------------- handbook logs from the simulator
_FIN = re.compile(r"Request (\S+) finished\. Status: SUCCESS\. Total tokens: (\d+), Total latency: ([\d.]+)s, "
                  r"TTFT: ([\d.]+)s, TPOT: ([\d.]+)s")


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    sim = pytest.importorskip("vllmlog.simulate")
    cfg = sim.build_config("kv-pressure", fmt="handbook", seed=11, duration_s=40)
    path = tmp_path_factory.mktemp("sim") / "hb.log"
    with open(path, "w") as fp:
        rep = sim.simulate(cfg, fp)
    return path, rep.truth


def test_handbook_percentiles_equal_numpy_on_logged_values(simulated) -> None:
    path, _truth = simulated
    ttft, e2e, tpot = [], [], []
    prompt = {m.group(1): int(m.group(2)) for m in re.finditer(r"Prefill started for (\S+)\. Input tokens: (\d+)",
                                                                path.read_text())}
    for m in _FIN.finditer(path.read_text()):
        e2e.append(float(m.group(3)))
        ttft.append(float(m.group(4)))
        if int(m.group(2)) - prompt[m.group(1)] > 1:
            tpot.append(float(m.group(5)))
    d = summarize_paths(str(path), year=2026)
    lat = d["latency"]
    assert lat["ttft_s"]["sources"] == {"logged": len(ttft)} and len(ttft) > 50
    for name, vals in (("ttft_s", ttft), ("e2e_s", e2e), ("tpot_s", tpot)):
        for p in (50, 90, 95, 99):
            assert lat[name][f"p{p}"] == float(np.percentile(vals, p)), (name, p)
        assert lat[name]["max"] == max(vals)
        assert lat[name]["mean"] == pytest.approx(float(np.mean(vals)), rel=1e-12)


def test_handbook_journeys_match_simulator_truth(simulated) -> None:
    path, truth = simulated
    run = load(str(path), year=2026)
    js = {j.request_id: j for j in run.journeys}
    assert len(js) == len(truth["requests"])
    for t in truth["requests"]:
        j = js[t["request_id"]]
        assert j.status == t["status"], t["request_id"]
        assert j.preemptions == t["preemptions"], t["request_id"]
        if t["status"] == "success":
            assert j.output_tokens == t["output_tokens"] and j.prompt_tokens == t["prompt_tokens"]
            assert abs(j.ttft_s - t["ttft_s"]) <= 0.0005 + 1e-9 and abs(j.e2e_s - t["e2e_s"]) <= 0.0005 + 1e-9
        if t["queue_s"] is not None and j.queue_s is not None:
            assert abs(j.queue_s - t["queue_s"]) < 1.0 + 1e-6  # 1-second timestamps
        if j.http_status is not None:
            assert j.http_status == t["http_status"]


# ----------------------------------------------------------------------------- CLI and tables
def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_summary_json_and_human(capsys) -> None:
    code, out, _ = _run(["summary", str(HB), "--year", "2026", "--json", "--by", "day"], capsys)
    assert code == 0
    d = json.loads(out)
    assert all(k in d for k in KEYS) and d["buckets"]
    code, out, _ = _run(["summary", str(HB), "--year", "2026"], capsys)
    assert code == 0 and "Latency" in out and "SLO" in out and "KV cache" in out
    code, _, err = _run(["summary", str(HB), "--by", "week"], capsys)
    assert code == 2 and "error:" in err and "hint:" in err
    code, _, err = _run(["summary", str(HB), "--slo", "nonsense"], capsys)
    assert code == 2 and "error:" in err


REQUIRED = ("request_id", "status", "reason", "arrival_ts", "scheduled_ts", "first_token_ts", "finish_ts", "queue_s",
            "prefill_s", "ttft_s", "decode_s", "tpot_s", "e2e_s", "prompt_tokens", "output_tokens", "preemptions",
            "sources")


def test_cli_requests_json_csv_filters(capsys) -> None:
    code, out, _ = _run(["requests", str(HB), "--year", "2026", "--json"], capsys)
    rows = json.loads(out)
    assert code == 0 and len(rows) == 8 and all(all(k in r for k in REQUIRED) for r in rows)
    code, out, _ = _run(["requests", str(HB), "--year", "2026", "--json", "--status", "aborted", "--status", "cancelled"], capsys)
    assert sorted(r["status"] for r in json.loads(out)) == ["aborted", "cancelled"]
    code, out, _ = _run(["requests", str(HB), "--year", "2026", "--json", "--slowest", "2"], capsys)
    assert [r["e2e_s"] for r in json.loads(out)] == [60.0, 4.0]
    code, out, _ = _run(["requests", str(HB), "--year", "2026", "--csv"], capsys)
    lines = out.strip().splitlines()
    assert len(lines) == 9 and lines[0].startswith("request_id,") and "ttft_s_source" in lines[0]
    code, out, _ = _run(["requests", str(HB), "--year", "2026"], capsys)
    assert code == 0 and "req_5" in out
    code, _, err = _run(["requests", str(HB), "--status", "weird"], capsys)
    assert code == 2 and "error:" in err


def test_parquet_exports_query_with_duckdb_and_polars(tmp_path: Path, capsys) -> None:
    duckdb = pytest.importorskip("duckdb")
    import polars as pl

    jp, sp, dp = tmp_path / "j.parquet", tmp_path / "s.parquet", tmp_path / "d.parquet"
    assert _run(["requests", str(HB), "--year", "2026", "-o", str(jp)], capsys)[0] == 0
    assert _run(["series", str(CPU / "02-overload-queueing.log"), "--year", "2026", "-o", str(sp)], capsys)[0] == 0
    assert _run(["series", str(HB), "--year", "2026", "--decode", "-o", str(dp)], capsys)[0] == 0
    con = duckdb.connect()
    n, p50 = con.execute(f"select count(*), quantile_cont(ttft_s, 0.5) from '{jp}' where status = 'success'").fetchone()
    assert n == 4 and p50 == pytest.approx(float(np.percentile([1.25, 1.1, 0.9, 0.4], 50)))
    assert con.execute(f"select max(waiting) from '{sp}'").fetchone()[0] == 60
    df = pl.read_parquet(jp)
    assert df.schema["arrival_ts"] == pl.Datetime("us") and df.height == 8
    assert pl.read_parquet(dp)["kv_cache_usage_max"].max() == 0.85


def test_summary_writes_journeys_while_streaming(tmp_path: Path, capsys) -> None:
    out = tmp_path / "j.jsonl"
    code, _, _ = _run(["summary", str(CPU / "04-client-aborts.log"), "--year", "2026", "--json",
                       "--journeys", str(out)], capsys)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert code == 0 and len(rows) == 80 and sum(r["status"] == "aborted" for r in rows) == 25
