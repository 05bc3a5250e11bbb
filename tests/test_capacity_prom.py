"""`vllmlog capacity --prometheus`: request-length and queue-time distributions from vLLM's /metrics histograms
(vllm:request_prompt_tokens, vllm:request_generation_tokens, vllm:request_queue_time_seconds), on the real CPU runs
02 and 03 with the /metrics snapshots recorded beside them (tests/data/metrics, from ../corpus/vllm-cpu)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from vllmlog.capacity import plan, sizing
from vllmlog.capacity.prom import distributions
from vllmlog.cli import main
from vllmlog.prommetrics.exposition import load_snapshot_files
from vllmlog.prommetrics.merge import add_history
from vllmlog.run import load
from vllmlog.state import service_states

from .snapshots import free_port, serve_snapshots

DATA = Path(__file__).parent / "data"
METRICS = DATA / "metrics"
RUNS = {"02": ("02-overload-queueing.log", ["metrics-02-overload-1", "metrics-02-overload-2", "metrics-02-overload-4",
                                             "metrics-02-overload-9"]),
        "03": ("03-kv-cache-pressure-preemption.log", ["metrics-03-kv-pressure-1", "metrics-03-kv-pressure-4",
                                                        "metrics-03-kv-pressure-7"])}


def _snaps(key: str):
    return load_snapshot_files([METRICS / f"{n}.prom" for n in RUNS[key][1]])


def _truth(key: str) -> tuple[float, float, int]:
    rows = [r for r in csv.DictReader((DATA / "corpus" / "vllm-cpu" / f"{key}-client-truth.csv").open())
            if r["http_status"] == "200"]
    return (sum(float(r["prompt_tokens"]) for r in rows) / len(rows),
            sum(float(r["completion_tokens"]) for r in rows) / len(rows), len(rows))


def _with_metrics(key: str):
    run = load(str(DATA / "corpus" / "vllm-cpu" / RUNS[key][0]), year=2026)
    add_history(run, {"127.0.0.1:8000": _snaps(key)})
    return run


@pytest.mark.parametrize("key", ["02", "03"])
def test_lengths_from_the_histograms_are_the_clients_exactly(key: str) -> None:
    prompt, output, n = _truth(key)
    p = plan(_with_metrics(key))
    sc = next(s for s in p.servers if not s.file.startswith("prometheus:"))
    L = sc.load.lengths
    assert L.basis == "logged" and "/metrics histograms" in L.source and L.count == n
    assert L.prompt == pytest.approx(prompt, rel=1e-9) and L.output == pytest.approx(output, rel=1e-9)
    # without /metrics the same log only estimates them from the stats lines' throughput
    bare = next(s for s in plan(load(str(DATA / "corpus" / "vllm-cpu" / RUNS[key][0]), year=2026)).servers)
    assert bare.load.lengths.basis == "estimated" and abs(bare.load.lengths.output - output) > 1
    keys = {f.key: f for f in sc.load.figures}
    for k in ("request_prompt_tokens_p50", "request_prompt_tokens_p95", "request_generation_tokens_p95",
              "queue_time_mean", "queue_time_p95"):
        assert k in keys, k
    assert keys["request_prompt_tokens_p95"].basis == "estimated" and keys["queue_time_mean"].basis == "logged"
    assert keys["request_prompt_tokens_p50"].value < keys["request_prompt_tokens_p95"].value
    # the plan's JSON carries them
    d = p.to_dict()["servers"][0]["load"]
    assert d["queue_time_mean"]["unit"] == "s"


def test_queue_time_tells_the_overload_from_the_kv_run() -> None:
    q02 = distributions(_snaps("02"))["queue_time"]
    q03 = distributions(_snaps("03"))["queue_time"]
    # 02: 60 wait behind 4 seats (~6.5 s each); 03: the cache holds ~6 of 16 (under a second)
    assert q02.count == q03.count == 240
    assert 5.0 < q02.mean < 8.0 and q03.mean < 1.5 and q02.p95 > q03.p95


def test_a_window_before_the_load_has_no_distribution() -> None:
    snaps = _snaps("02")
    assert distributions(snaps, end=snaps[0].time) == {}
    part = distributions(snaps, start=snaps[1].time)["request_prompt_tokens"]
    assert 0 < part.count < 240  # the increase from the 2nd snapshot on


def test_sizing_sees_the_histograms_through_the_run() -> None:
    run = _with_metrics("03")
    st = next(s for s in service_states(run) if not s.file.startswith("prometheus:"))
    a, b = sizing.of(st), sizing.of(st, run)
    assert a is not b and b is sizing.of(st, run)
    assert b.core.load.lengths.basis == "logged" and a.core.load.lengths.basis == "estimated"


@pytest.mark.slow
def test_capacity_cli_reads_the_histograms_from_a_real_prometheus(tmp_path: Path, capsys) -> None:
    """A local prometheus scrapes the 02 snapshots one after another; `capacity --prometheus` pulls the histogram
    series (now part of the history selector) and plans the target from them."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus not installed")
    bodies = [(METRICS / f"{n}.prom").read_bytes() for n in RUNS["02"][1]]
    srv = serve_snapshots(bodies)
    served = srv.RequestHandlerClass
    port = free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 500ms\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{srv.server_address[1]}']\n")
    proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            time.sleep(0.25)
            if served.hits > len(bodies) + 1:
                try:
                    r = httpx.get(base + "/api/v1/query", params={"query": "count(vllm:request_prompt_tokens_count)"})
                    if r.status_code == 200 and r.json()["data"]["result"]:
                        break
                except httpx.HTTPError:
                    pass
        else:
            pytest.fail("prometheus did not scrape: " + (tmp_path / "prometheus.log").read_text()[-2000:])
        time.sleep(1.0)
        log = str(DATA / "corpus" / "vllm-cpu" / RUNS["02"][0])
        rc = main(["capacity", log, "--year", "2026", "--prometheus", base, "--since", "2m", "--json"])
        assert rc == 0
        doc = json.loads(capsys.readouterr().out)
        tgt = next(s for s in doc["servers"] if s["file"].startswith("prometheus:"))
        ld = tgt["load"]
        # the increase from the first point of the range to the last: Prometheus's 1-s steps over 0.5-s scrapes may
        # start at any snapshot before the last (the first one, with 0 requests, gives the clients' mean exactly)
        snaps = _snaps("02")
        want = [distributions([a, snaps[-1]]) for a in snaps[:-1]]
        got = (ld["prompt_tokens_mean"]["value"], ld["output_tokens_mean"]["value"])
        assert any(got == pytest.approx((w["request_prompt_tokens"].mean, w["request_generation_tokens"].mean))
                   for w in want), (got, [(w["request_prompt_tokens"].mean, w["request_generation_tokens"].count)
                                          for w in want])
        assert ld["prompt_tokens_mean"]["basis"] == "logged" and "queue_time_p95" in ld
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("key", ["02", "03"])
def test_e2e_from_the_histogram_gives_the_carried_rate(key: str) -> None:
    """The log states no latency; vllm:e2e_request_latency_seconds does (the clients' mean within 1 %), and Little's
    law over the requests in the server (Running + Waiting) ÷ that latency gives the rate the replica carried."""
    rows = [r for r in csv.DictReader((DATA / "corpus" / "vllm-cpu" / f"{key}-client-truth.csv").open())
            if r["http_status"] == "200"]
    client_e2e = sum(float(r["latency_s"]) for r in rows) / len(rows)
    sc = next(s for s in plan(_with_metrics(key)).servers if not s.file.startswith("prometheus:"))
    assert sc.load.e2e_basis == "/metrics" and sc.load.e2e_mean_s == pytest.approx(client_e2e, rel=0.01)
    carried = sc.replicas.observed
    assert carried is not None and "Running + Waiting" in carried.source
    assert carried.value == pytest.approx(sc.load.get("rate_mean").value, rel=0.1)  # 02: 9.1 vs 10.0; 03: 9.0 vs 8.9
