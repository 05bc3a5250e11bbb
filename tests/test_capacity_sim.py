"""Replicas for a target rate against the simulator: the count `capacity` computes from one simulated log is the
one the simulator needs to hold the SLO (p95 TTFT < 1 s, p95 TPOT ≤ 50 ms) at that rate split over the replicas."""

from __future__ import annotations

import io

import pytest

from vllmlog.capacity import plan
from vllmlog.numbers import SloTargets, percentile
from vllmlog.run import load
from vllmlog.simulate import Burst, build_config, simulate


def _config(rate: float, duration_s: float, seed: int, seats: int, bursts=()):
    c = build_config("healthy", fmt="v1", seed=seed, duration_s=duration_s)
    c.engine.max_num_seqs = seats
    w = c.workload
    w.rate = rate
    w.prompt_median, w.prompt_sigma = 300, 0.5
    w.output_median, w.output_sigma = 150, 0.5
    w.max_tokens_choices = (512,)
    w.bursts = list(bursts)
    return c


def _holds(truth: dict, slo: SloTargets) -> bool:
    ok = [r for r in truth["requests"] if r["status"] == "success"]
    ttft = sorted(r["ttft_s"] for r in ok)
    tpot = sorted(r["tpot_s"] for r in ok if r.get("tpot_s"))
    return percentile(ttft, 95) < slo.ttft_s and percentile(tpot, 95) <= 1 / slo.tokens_per_s


@pytest.mark.parametrize("seats,target", [(64, 100.0), (32, 50.0)])
def test_replicas_match_what_the_simulator_needs(tmp_path, seats, target):
    # one replica observed under a varying load (bursts give the step-time fit its batch sizes)
    log = tmp_path / "obs.log"
    with open(log, "w", encoding="utf-8") as fp:
        simulate(_config(4.0, 600, 1, seats, [Burst(100, 200, 8.0), Burst(300, 400, 12.0)]), fp)
    slo = SloTargets()
    p = plan(load([str(log)], year=2026), slo=slo, target_rate=target)
    r = p.servers[0].replicas
    assert r.per_replica is not None and r.per_replica.basis == "model"
    k = r.needed
    assert k is not None and k >= 2
    # the simulator at the target rate split over k replicas holds the SLO, over k − 1 it does not
    results = {}
    for n in (k, k - 1):
        rep = simulate(_config(target / n, 300, 7, seats), io.StringIO())
        results[n] = _holds(rep.truth, slo)
    assert results == {k: True, k - 1: False}, (k, r.per_replica.value)
    assert r.replicas >= k  # the recommendation adds the headroom on top


def test_fleet_trend_over_days_and_when_it_runs_out(tmp_path):
    """Two replicas logged over four days with the traffic growing 1 → 2.5 req/s a replica: the trend of the daily peak and
    the date it reaches what the two replicas sustain within the SLO."""
    from datetime import datetime

    paths = []
    for rep in range(2):
        for day, rate in enumerate((1.0, 1.5, 2.0, 2.5)):
            c = _config(rate, 240, 10 * rep + day, 16, [Burst(60, 120, rate * 1.5)])
            c.start = datetime(2026, 11, 20 + day, 9, 0, 0)
            path = tmp_path / f"replica{rep}-day{day}.log"
            with open(path, "w", encoding="utf-8") as fp:
                simulate(c, fp)
            paths.append(str(path))
    p = plan(load(paths, year=2026))
    tr = p.trend
    assert tr is not None and tr.period == "day" and len(tr.points) == 4
    peaks = [r for _, r, _ in tr.points]
    assert peaks == sorted(peaks) and tr.slope_per_day > 0
    assert tr.replicas == 2  # two server runs serving at once each day
    assert tr.capacity is not None and tr.capacity.basis == "model"
    assert tr.runs_out is not None and tr.runs_out > tr.points[-1][0]


def test_capacity_over_a_fleet_directory(tmp_path, capsys):
    """`vllmlog capacity DIR`: two replicas, each a daily-rotated log over four days (`replicaN.log-YYYYMMDD`, read
    as one stream per replica, as `vllmlog fleet` reads them): each replica's throughput within the SLO, the trend of
    the daily peak and the date it reaches the fleet's capacity."""
    import json
    from datetime import datetime

    from vllmlog.cli import main

    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for rep in range(2):
        for day, rate in enumerate((1.0, 1.5, 2.0, 2.5)):
            c = _config(rate, 240, 10 * rep + day, 16, [Burst(60, 120, rate * 1.5)])
            c.start = datetime(2026, 11, 20 + day, 9, 0, 0)
            with open(fleet / f"replica{rep}.log-202611{20 + day}", "w", encoding="utf-8") as fp:
                simulate(c, fp)
    (fleet / "notes.csv").write_text("not a log\n")
    assert main(["capacity", str(fleet), "--json", "--year", "2026"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["replica"]: r for r in doc["fleet"]}
    assert set(rows) == {"replica0", "replica1"}
    for name, r in rows.items():
        assert r["server_runs"] == 4 and r["requests"] > 0
        runs = [s for s in doc["servers"] if s.get("replica") == name]
        assert len(runs) == 4  # the four days of one replica, one stream
        rates = sorted(s["replicas"]["per_replica_rate"]["value"] for s in runs)
        assert r["slo_rate"] == pytest.approx((rates[1] + rates[2]) / 2)
        assert r["peak_rate"] < r["slo_rate"]  # the traffic so far fits
    tr = doc["trend"]
    assert tr["period"] == "day" and len(tr["points"]) == 4 and tr["replicas"] == 2
    assert tr["slope_per_day"] > 0 and tr["runs_out"] > tr["points"][-1][0]
    # the terminal view shows the per-replica table
    assert main(["capacity", str(fleet), "--year", "2026", "--width", "140"]) == 0
    out = capsys.readouterr().out
    assert "Fleet: each replica's throughput within the SLO" in out and "replica1" in out
