"""`vllmlog fleet`: discovery, map → reduce on synthetic fleets built from real vLLM logs, exact fleet numbers."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vllmlog.fleet import analyze_fleet, discover, map_replica, synth
from vllmlog.fleet.reduce import reduce_fleet
from vllmlog.numbers import LATENCIES, compute, latency_value
from vllmlog.run import load

DATA = Path(__file__).parent / "data" / "fleet"
LIGHT = str(DATA / "light-load.log.gz")
OVERLOAD = str(DATA / "overload-queueing.log.gz")
DEAD = str(DATA / "engine-dead-kill9.log.gz")
OOM = str(DATA / "oom-runtime.log.gz")


# --------------------------------------------------------------------------- discovery

def _touch(p: Path, data: bytes = b"x\n") -> str:
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.name.endswith(".gz"):
        with gzip.open(p, "wb") as f:
            f.write(data)
    else:
        p.write_bytes(data)
    return str(p)


def test_discover_rotated_pieces_oldest_first(tmp_path: Path) -> None:
    for n in ("web-0.log", "web-0.log.1", "web-0.log.2.gz", "web-0.log.10.gz", "web-1.log", "truth.json", "x.csv"):
        _touch(tmp_path / n)
    d = discover([str(tmp_path)])
    assert [s.name for s in d.replicas] == ["web-0", "web-1"]
    assert [os.path.basename(p) for p in d.replicas[0].paths] == ["web-0.log.10.gz", "web-0.log.2.gz", "web-0.log.1",
                                                                 "web-0.log"]
    assert sorted(os.path.basename(p) for p in d.ignored) == ["truth.json", "x.csv"]


def test_discover_dateext_kubernetes_and_collisions(tmp_path: Path) -> None:
    _touch(tmp_path / "a" / "srv.log-20261129.gz")
    _touch(tmp_path / "a" / "srv.log-20261130")
    _touch(tmp_path / "a" / "srv.log")
    _touch(tmp_path / "b" / "srv.log")
    pod = tmp_path / "pods" / "prod_vllm-7d9f-abcde_0f1e2d3c-aaaa-bbbb-cccc-123456789abc" / "vllm"
    _touch(pod / "0.log")
    _touch(pod / "1.log")
    d = discover([str(tmp_path)])
    by = {s.name: [os.path.basename(p) for p in s.paths] for s in d.replicas}
    assert by["a/srv"] == ["srv.log-20261129.gz", "srv.log-20261130", "srv.log"]
    assert by["b/srv"] == ["srv.log"]
    assert sorted(by["vllm-7d9f-abcde"]) == ["0.log", "1.log"]


def test_discover_globs_and_errors(tmp_path: Path) -> None:
    from vllmlog.errors import InputError

    _touch(tmp_path / "r1.log")
    _touch(tmp_path / "r2.log")
    assert [s.name for s in discover([str(tmp_path / "r*.log")]).replicas] == ["r1", "r2"]
    with pytest.raises(InputError):
        discover([str(tmp_path / "nothing-*.log")])
    with pytest.raises(InputError):
        discover([str(tmp_path / "missing.log")])


# --------------------------------------------------------------------------- synthetic fleets from real logs

@pytest.fixture(scope="module")
def one_bad(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("one_bad")
    plan = synth.one_bad(LIGHT, DEAD, n=6, truth="engine dead")
    synth.write_fleet(plan, str(root / "logs"))
    fa = analyze_fleet([str(root / "logs")], workers=2, out_dir=str(root / "out"))
    return plan, fa


@pytest.fixture(scope="module")
def fleet_wide(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("fleet_wide")
    plan = synth.fleet_wide(OVERLOAD, LIGHT, n=6, affected=4)
    synth.write_fleet(plan, str(root / "logs"))
    fa = analyze_fleet([str(root / "logs")], workers=2, out_dir=str(root / "out"))
    return plan, fa


def test_synth_shifts_clock_and_ids_only() -> None:
    data = synth._read(LIGHT)
    t0 = synth.first_ts(data, 2026)
    from datetime import timedelta

    out = synth.shift_log(data, timedelta(hours=7, seconds=3), "r9", 2026)
    assert out.count(b"\n") == data.count(b"\n")
    assert synth.first_ts(out, 2026) == t0 + timedelta(hours=7, seconds=3)
    assert b"client-r9-0000-" in out and b"cmpl-client-0000-" not in out
    assert b"W1130 09:58:" in out  # torch's glog line moved too


def test_one_bad_replica_found_and_no_healthy_flagged(one_bad) -> None:
    plan, fa = one_bad
    rep = fa.report
    bad = synth.names(plan, "engine dead")
    assert bad == ["replica-05"]
    rows = rep["replicas"]
    assert rows[0]["replica"] == "replica-05"  # worst first
    assert rows[0]["status"] in ("failing", "down")
    assert rows[0]["worst_incident"]["severity"] in ("error", "critical")
    for r in rows[1:]:
        assert r["status"] == "healthy", r
        assert r["flags"] == [], r
    assert not [o for o in rep["outliers"] if o["replica"] not in bad]
    assert rep["incidents"] == []  # one replica is that replica's problem, not a fleet-wide one
    assert rep["verdict"]["status"] == "degraded"
    assert rep["verdict"]["replicas_by_status"] == {rows[0]["status"]: 1, "healthy": 5}
    assert rep["coverage"]["complete"]


def test_fleet_wide_event_is_one_incident(fleet_wide) -> None:
    plan, fa = fleet_wide
    rep = fa.report
    assert len(rep["incidents"]) == 1
    f = rep["incidents"][0]
    assert f["id"] == "F1" and f["kind"] == "queueing"
    assert sorted(m["replica"] for m in f["replicas"]) == plan.events[0]["replicas"]
    assert f["replicas_affected"] == 4 and f["replicas_total"] == 6
    assert f["onset_spread_s"] <= 12
    assert f["upstream_hypothesis"] and "load" in f["upstream_hypothesis"][-1]
    assert f["common_cause"] == "Q301"
    healthy = synth.names(plan, "healthy")
    for r in rep["replicas"]:
        if r["replica"] in healthy:
            assert r["status"] == "healthy" and r["flags"] == []
        else:
            assert r["flags"] == ["fleet-wide F1"]


def test_fleet_counters_are_the_replicas_numbers(one_bad) -> None:
    plan, fa = one_bad
    red = fa.report["red"]["requests"]
    per = [r["red_use"]["requests"] for r in fa.replicas]
    assert red["total"] == sum(p["total"] for p in per) == 5 * 50 + 213
    assert red["failed"] == sum(p["failed"] for p in per)
    assert red["error_rate"] == pytest.approx(red["failed"] / red["finished"])
    # the single replica's numbers are exactly what `analyze` computes for its log
    run = load(str(Path(fa.replicas[-1]["files"][0])))
    n = compute(run)
    assert fa.replicas[-1]["red_use"]["requests"]["total"] == n["requests"]["total"]
    assert fa.replicas[-1]["red_use"]["requests"]["failed"] == n["requests"]["failed"]
    assert fa.report["red"]["http"]["5xx"] == sum(int(v) for r in fa.replicas
                                                  for k, v in r["red_use"]["requests"]["http"]["by_status"].items()
                                                  if int(k) >= 500)


def test_rows_are_parquet_one_per_replica(one_bad) -> None:
    import polars as pl

    _, fa = one_bad
    rows_dir = Path(fa.out_dir) / "rows"
    files = sorted(p.name for p in rows_dir.glob("*.parquet"))
    assert files == sorted(r["rows"]["file"] for r in fa.replicas)
    df = pl.read_parquet(rows_dir / fa.replicas[-1]["rows"]["file"])
    assert df.height == 213 and set(df.get_column("replica").to_list()) == {"replica-05"}


def test_local_engine_in_process_and_pool_identical(one_bad, tmp_path: Path) -> None:
    _, fa = one_bad
    logs = os.path.dirname(fa.replicas[0]["files"][0])
    fa0 = analyze_fleet([logs], workers=0, out_dir=fa.out_dir)
    assert json.dumps(fa0.to_dict(), sort_keys=True, default=str) == json.dumps(fa.to_dict(), sort_keys=True, default=str)


# --------------------------------------------------------------------------- exact percentiles

@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory):
    from vllmlog.simulate import build_config, simulate

    root = tmp_path_factory.mktemp("measured")
    paths = []
    for seed, rate in ((1, None), (2, 3.0)):
        p = root / "logs" / f"sim-{seed}.log"
        p.parent.mkdir(exist_ok=True)
        cfg = build_config("healthy", fmt="handbook", seed=seed, duration_s=30, rate=rate)
        with open(p, "w", encoding="utf-8", newline="") as f:
            simulate(cfg, f)
        paths.append(str(p))
    fa = analyze_fleet([str(root / "logs")], workers=0, out_dir=str(root / "out"))
    return paths, fa


def test_fleet_percentiles_exact_over_union(measured) -> None:
    paths, fa = measured
    runs = [load(p) for p in paths]
    lat = fa.report["red"]["latency"]
    for m in LATENCIES:
        vals = {"measured": [], "estimated": []}
        for run in runs:
            for j in run.journeys:
                vb = latency_value(j, m)
                if vb:
                    vals[vb[1]].append(vb[0])
        basis = "measured" if vals["measured"] else "estimated"
        xs = vals[basis]
        assert lat[m]["count"] == len(xs), m
        assert lat[m]["basis"] == (basis if xs else None)
        if xs:
            for p in (50, 90, 95, 99):
                assert lat[m][f"p{p}"] == float(np.percentile(xs, p)), (m, p)  # numpy-linear, bit for bit
    assert lat["ttft_s"]["basis"] == "measured" and lat["ttft_s"]["count"] > 50


def test_one_replica_fleet_equals_analyze(measured, tmp_path: Path) -> None:
    paths, _ = measured
    fa = analyze_fleet([paths[0]], workers=0, out_dir=str(tmp_path))
    n = compute(load(paths[0]))
    for m in LATENCIES:
        for k in ("count", "p50", "p90", "p99", "mean", "basis"):
            assert fa.report["red"]["latency"][m][k] == n["latency"][m][k], (m, k)
    assert fa.report["red"]["requests"]["rate_per_s"] == pytest.approx(n["requests"]["rate_per_s"])


# --------------------------------------------------------------------------- rotation, bad input

def test_rotated_pieces_are_one_stream(tmp_path: Path) -> None:
    whole = synth.Plan([synth.Replica("one", OVERLOAD)])
    split = synth.Plan([synth.Replica("one", OVERLOAD, pieces=3)])
    synth.write_fleet(whole, str(tmp_path / "whole"))
    synth.write_fleet(split, str(tmp_path / "split"))
    d = discover([str(tmp_path / "split")])
    assert [os.path.basename(p) for p in d.replicas[0].paths] == ["one.log.2.gz", "one.log.1", "one.log"]
    a = map_replica(discover([str(tmp_path / "whole")]).replicas[0].to_dict(), {})
    b = map_replica(d.replicas[0].to_dict(), {})
    assert b["error"] is None
    assert "vllmlog-fleet-" not in json.dumps(b)  # the joined copy's temporary path does not leak
    assert b["lines"] == a["lines"]
    assert b["red_use"]["requests"] == a["red_use"]["requests"]
    assert b["verdict"] == a["verdict"]
    assert [i["headline"] for i in b["incidents"]] == [i["headline"] for i in a["incidents"]]
    # evidence points into the piece the line came from, at that piece's own line number
    for inc_a, inc_b in zip(a["incidents"], b["incidents"]):
        for ea, eb in zip(inc_a["evidence"], inc_b["evidence"]):
            assert eb["text"] == ea["text"]
            assert os.path.dirname(eb["file"]) == str(tmp_path / "split")
            with open(eb["file"], "rb") as f:
                lines = f.read().decode("utf-8").splitlines()
            assert eb["text"].strip() in lines[eb["line"] - 1]


def test_unreadable_and_truncated_replicas_are_reported(tmp_path: Path) -> None:
    synth.write_fleet(synth.Plan([synth.Replica("good", LIGHT)]), str(tmp_path))
    (tmp_path / "binary.log").write_bytes(bytes(range(256)) * 64)
    data = gzip.compress(synth._read(OVERLOAD))
    (tmp_path / "cut.log.1.gz").write_bytes(data[: len(data) // 2])
    (tmp_path / "cut.log").write_bytes(b"")
    fa = analyze_fleet([str(tmp_path)], workers=0, out_dir=str(tmp_path / "out"))
    rep = fa.report
    assert rep["replicas_total"] == 3
    by = {r["replica"]: r for r in rep["replicas"]}
    assert by["good"]["status"] == "healthy"
    assert by["binary"]["status"] == "error" and rep["coverage"]["unreadable"][0]["replica"] == "binary"
    assert by["cut"]["status"] != "healthy" and not by["cut"]["complete"]
    assert sorted(rep["coverage"]["incomplete_replicas"]) == ["binary", "cut"]
    assert rep["verdict"]["status"] != "healthy"


# --------------------------------------------------------------------------- reduce on hand-made results

def _fake(name: str, *, status: str = "healthy", ttft: float | None = 0.2, err: float = 0.0, kv: float = 0.3,
          arrivals: int = 100) -> dict:
    lat = {m: {"count": 0, "basis": None} for m in LATENCIES}
    lat["ttft_s"] = {"count": 10, "p50": ttft, "p99": ttft, "basis": "measured"} if ttft is not None else lat["ttft_s"]
    fin = arrivals
    return {
        "replica": name, "files": [f"{name}.log"], "error": None, "lines": 1000, "events": 900, "restarts": 0,
        "verdict": {"status": status, "label": status.upper(), "reason": ""},
        "coverage": {"complete": True},
        "time_range": {"start": "2026-11-30T10:00:00", "end": "2026-11-30T10:10:00", "start_s": 0.0, "end_s": 600.0},
        "red_use": {"requests": {"total": arrivals, "finished": fin, "failed": round(err * fin), "aborted": 0,
                                 "error_rate": err, "abort_rate": 0.0, "rate_per_s": arrivals / 600,
                                 "by_status": {"success": fin}, "rate": {"arrivals": arrivals},
                                 "http": {"by_status": {}}},
                    "durations": lat,
                    "use": {"kv_cache_usage": {"mean": kv, "max": kv}, "waiting": {"max": 0}, "running": {"max": 4},
                            "generation_throughput": {"mean": 100.0}, "prompt_throughput": {"mean": 50.0},
                            "preemptions": 0}},
        "slo": {"targets": {}}, "grid": {"step": 60.0, "t0": 0.0, "n": 10, "arrivals": [arrivals // 10] * 10,
                                         **{k: [0] * 10 for k in ("success", "failed", "aborted", "unfinished",
                                                                  "kv_sum", "kv_n", "gen_sum", "gen_n")},
                                         **{k: [None] * 10 for k in ("kv_max", "waiting_max", "running_max")}},
        "incidents": [], "symptoms": [], "findings": [], "rows": None,
    }


def test_outliers_against_peers() -> None:
    res = [_fake(f"r{i}", ttft=0.2 + 0.01 * i) for i in range(8)] + [_fake("slow", ttft=2.5), _fake("errs", err=0.3),
                                                                     _fake("kvfull", kv=0.98)]
    rep = reduce_fleet(res)
    got = {(o["replica"], o["metric"]) for o in rep["outliers"]}
    assert got == {("slow", "ttft_p50"), ("slow", "ttft_p99"), ("errs", "error_rate"), ("kvfull", "kv_mean")}
    # identical peers (MAD 0) flag nothing
    assert reduce_fleet([_fake(f"r{i}") for i in range(5)])["outliers"] == []


def test_router_imbalance() -> None:
    res = [_fake(f"r{i}", arrivals=100) for i in range(5)] + [_fake("hot", arrivals=400), _fake("cold", arrivals=20)]
    imb = reduce_fleet(res)["imbalance"]
    assert imb["skewed"] and imb["hot"] == ["hot"] and imb["cold"] == ["cold"]
    assert imb["max_over_median"] == pytest.approx(4.0)
    even = reduce_fleet([_fake(f"r{i}", arrivals=100 + i) for i in range(5)])["imbalance"]
    assert not even["skewed"] and even["hot"] == even["cold"] == []


def test_fleet_wide_needs_many_replicas() -> None:
    def with_symptom(name: str, t: float, kind: str = "dead") -> dict:
        r = _fake(name, status="down")
        r["symptoms"] = [{"kind": kind, "severity": "critical", "headline": "engine died", "onset": "x", "end": None,
                          "onset_s": t, "end_s": None, "trend": "stable", "server": 0}]
        r["incidents"] = [{"id": "I1", "severity": "critical", "impact": kind, "headline": "engine died",
                           "onset_s": t, "onset": "x", "cause": {"code": "E403", "title": "t"}, "symptoms": [kind]}]
        return r

    healthy = [_fake(f"h{i}") for i in range(6)]
    together = reduce_fleet(healthy + [with_symptom("a", 100), with_symptom("b", 130), with_symptom("c", 190)])
    assert len(together["incidents"]) == 1 and together["incidents"][0]["replicas_affected"] == 3
    assert together["incidents"][0]["common_cause"] == "E403"
    apart = reduce_fleet(healthy + [with_symptom("a", 100), with_symptom("b", 5000), with_symptom("c", 20000)])
    assert apart["incidents"] == []
    alone = reduce_fleet(healthy + [with_symptom("a", 100)])
    assert alone["incidents"] == []
    # in a big fleet five replicas at once are many (a node's GPUs), though far below 25 %
    big = [_fake(f"h{i:02d}") for i in range(60)]
    node = reduce_fleet(big + [with_symptom(f"n{i}", 100 + 5 * i) for i in range(5)])
    assert len(node["incidents"]) == 1 and node["incidents"][0]["replicas_affected"] == 5
    assert node["incidents"][0]["confidence"] == "medium"  # a small share, but onsets within a minute
    four = reduce_fleet(big + [with_symptom(f"n{i}", 100 + 5 * i) for i in range(4)])
    assert four["incidents"] == []


# --------------------------------------------------------------------------- the command

def _cli(*args: str, cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vllmlog", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_cli_terminal_and_json(fleet_wide, tmp_path: Path) -> None:
    _, fa = fleet_wide
    logs = os.path.dirname(fa.replicas[0]["files"][0])
    p = _cli("fleet", logs, "-j", "0", "--out", str(tmp_path / "o"), cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "DEGRADED" in p.stdout and "F1" in p.stdout and "queueing on 4 of 6 replicas" in p.stdout
    p = _cli("fleet", logs, "-j", "0", "--json", "--out", str(tmp_path / "o"), "--fail-on", "warning", cwd=str(tmp_path))
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == "vllmlog.fleet/1" and len(doc["replica_results"]) == 6
    assert doc["incidents"][0]["kind"] == "queueing"


def test_cli_usage_errors(tmp_path: Path) -> None:
    p = _cli("fleet", str(tmp_path / "missing"), cwd=str(tmp_path))
    assert p.returncode == 2 and p.stderr.startswith("error: ")
    p = _cli("fleet", LIGHT, "--engine", "spark", cwd=str(tmp_path))
    assert p.returncode == 2 and "unknown engine" in p.stderr
    (tmp_path / "junk.log").write_bytes(bytes(range(256)) * 16)
    p = _cli("fleet", str(tmp_path / "junk.log"), cwd=str(tmp_path))
    assert p.returncode == 2 and "no replica readable" in p.stderr


# --------------------------------------------------------------------------- other readers of the same data

def test_rows_agree_with_duckdb(measured) -> None:
    """The Parquet rows are plain data: DuckDB's own quantile over them gives the fleet's percentiles."""
    duckdb = pytest.importorskip("duckdb")
    _, fa = measured
    glob = str(Path(fa.out_dir) / "rows" / "*.parquet")
    lat = fa.report["red"]["latency"]
    for m in ("ttft_s", "e2e_s", "tpot_s"):
        n, p50, p99 = duckdb.execute(f"SELECT count(*), quantile_cont({m}, 0.5), quantile_cont({m}, 0.99) "
                                 f"FROM read_parquet('{glob}') WHERE {m}_basis = 'measured'").fetchone()
        assert n == lat[m]["count"]
        assert p50 == pytest.approx(lat[m]["p50"], rel=1e-12) and p99 == pytest.approx(lat[m]["p99"], rel=1e-12)


def test_fsspec_urls_read_by_the_workers(tmp_path: Path) -> None:
    """``file://`` URLs (any fsspec filesystem: s3://, gs://) are listed through fsspec and opened by the workers;
    the result is the local paths' result."""
    pytest.importorskip("fsspec")
    synth.write_fleet(synth.one_bad(LIGHT, DEAD, n=3), str(tmp_path / "logs"))
    a = analyze_fleet([str(tmp_path / "logs")], workers=2, out_dir=str(tmp_path / "o1"))
    b = analyze_fleet([(tmp_path / "logs").as_uri() + "/"], workers=2, out_dir=str(tmp_path / "o2"))
    assert b.ignored == [(tmp_path / "logs" / "truth.json").as_uri()]
    assert [r["files"] for r in b.replicas] == [[(tmp_path / "logs" / f"replica-0{i}.log").as_uri()] for i in range(3)]
    url, local = (tmp_path / "logs").as_uri(), str(tmp_path / "logs")
    for x, y in zip(a.replicas, b.replicas):
        assert y["error"] is None
        for k in ("red_use", "incidents", "symptoms", "verdict", "grid"):  # the same, but for naming the file by URL
            assert json.dumps(y[k]).replace(url, local) == json.dumps(x[k]), k
    assert a.report["verdict"] == b.report["verdict"]


def test_traces_join_the_replica_they_are_named_after(tmp_path: Path) -> None:
    from vllmlog.analyze import analyze
    from vllmlog.errors import InputError

    d = Path(__file__).parent / "data" / "corpus" / "vllm-cpu-traced"
    logs = [str(d / "T1-traced-light.log"), str(d / "T2-traced-overload-aborts.log")]
    fa = analyze_fleet(logs, traces=[str(d)], workers=0, out_dir=str(tmp_path))
    by = {r["replica"]: r for r in fa.replicas}
    assert [Path(p).name for p in by["T1-traced-light"]["traces_files"]] == ["T1-traced-light-traces.otlp.jsonl"]
    one = analyze([logs[0]], traces=[str(d / "T1-traced-light-traces.otlp.jsonl")])
    assert by["T1-traced-light"]["red_use"]["durations"]["ttft_s"] == one.red_use["durations"]["ttft_s"]
    assert one.red_use["durations"]["ttft_s"]["basis"] == "measured"
    lat = fa.report["red"]["latency"]["ttft_s"]
    assert lat["basis"] == "measured" and lat["count"] == sum(
        r["red_use"]["durations"]["ttft_s"]["count"] for r in fa.replicas)
    stray = tmp_path / "nobody-traces.otlp.jsonl"
    stray.write_text("")
    with pytest.raises(InputError, match="names no replica"):
        analyze_fleet(logs, traces=[str(stray)], workers=0, out_dir=str(tmp_path / "x"))


def test_kubectl_prefix_dump_is_split_by_pod(tmp_path: Path) -> None:
    """`kubectl logs -l app=vllm --prefix` interleaves every pod behind `[pod/<pod>/<container>] `: one replica per
    pod, split by a worker, each pod's numbers those of its own log."""
    import heapq
    import re

    plan = synth.Plan([synth.Replica("vllm-7d9f-aaaaa", LIGHT, 0), synth.Replica("vllm-7d9f-bbbbb", LIGHT, 1),
                       synth.Replica("vllm-7d9f-ccccc", DEAD, 2, truth="bad")])
    synth.write_fleet(plan, str(tmp_path / "pods"))
    streams = []
    for r in plan.replicas:
        last, st = b"", []
        for i, ln in enumerate((tmp_path / "pods" / f"{r.name}.log").read_bytes().splitlines(keepends=True)):
            m = re.search(rb"\d\d-\d\d \d\d:\d\d:\d\d", ln)
            last = m.group(0) if m else last
            st.append((last, r.name, i, b"[pod/" + r.name.encode() + b"/vllm] " + ln))
        streams.append(st)
    (tmp_path / "dump").mkdir()
    (tmp_path / "dump" / "all-pods.log").write_bytes(b"".join(x[3] for x in heapq.merge(*streams)))
    merged = analyze_fleet([str(tmp_path / "dump")], workers=2, out_dir=str(tmp_path / "o1"))
    apart = analyze_fleet([str(tmp_path / "pods")], workers=2, out_dir=str(tmp_path / "o2"))
    assert [r["replica"] for r in merged.replicas] == [r.name for r in plan.replicas]
    for x, y in zip(merged.replicas, apart.replicas):
        assert x["red_use"]["requests"] == y["red_use"]["requests"]
        assert x["verdict"]["status"] == y["verdict"]["status"]
        assert x["lines"] == y["lines"]
    assert merged.report["replicas"][0]["replica"] == "vllm-7d9f-ccccc"


def die_on_killer(spec: dict, opts: dict) -> dict:
    """A map whose worker process dies on the replica named ``killer`` (as an OOM kill would end it)."""
    if spec["name"] == "killer":
        os._exit(137)
    return map_replica(spec, opts)


def test_a_worker_that_dies_takes_only_its_replica(tmp_path: Path) -> None:
    from vllmlog.fleet.engines import run_local
    from vllmlog.fleet.inputs import ReplicaSpec

    specs = [ReplicaSpec(n, (LIGHT,)) for n in ("a", "b", "killer", "c")]
    out = run_local(specs, {"rows_dir": str(tmp_path)}, 2, fn=die_on_killer)
    assert [r["replica"] for r in out] == ["a", "b", "c", "killer"]
    assert [r["error"] is None for r in out] == [True, True, True, False]
    assert "died" in out[-1]["error"]
    rep = reduce_fleet(out, rows_dir=str(tmp_path))
    assert rep["replicas"][0]["replica"] == "killer" and rep["replicas"][0]["status"] == "error"
    assert rep["coverage"]["unreadable"] == [{"replica": "killer", "error": out[-1]["error"]}]
