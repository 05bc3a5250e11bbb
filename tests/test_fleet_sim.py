"""Simulated fleets (`vllmlog simulate --replicas N`): `fleet` recovers what was injected, and flags nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllmlog.fleet import analyze_fleet


def _simulate(out: Path, *args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "vllmlog", "simulate", "-f", "v1", "-d", "3m", "-o", str(out), *args],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads((out / "truth.json").read_text())


def _check_healthy_untouched(rep: dict, truth: dict, allowed_load: set[str] = frozenset()) -> None:
    for r in rep["replicas"]:
        if truth["replicas"][r["replica"]]["truth"] == "healthy":
            assert r["status"] == "healthy", r
            assert r["flags"] == [], r
            if r["replica"] not in allowed_load:
                assert r["load"] is None, r


@pytest.fixture(scope="module")
def bad_and_skew(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("sim_bad")
    truth = _simulate(root / "logs", "--replicas", "6", "--bad", "5:engine-crash", "--skew", "4:3", "--seed", "1")
    return truth, analyze_fleet([str(root / "logs")], workers=2, out_dir=str(root / "out")).report


def test_bad_replica_and_router_skew(bad_and_skew) -> None:
    truth, rep = bad_and_skew
    assert truth["bad"] == ["replica-05"] and truth["skewed"] == {"replica-04": 3.0}
    assert rep["replicas"][0]["replica"] == "replica-05"
    assert rep["replicas"][0]["status"] in ("down", "failing")
    assert rep["incidents"] == []
    assert rep["imbalance"]["skewed"] and rep["imbalance"]["hot"] == ["replica-04"]
    assert rep["imbalance"]["cold"] == []
    assert not [o for o in rep["outliers"] if o["replica"] != "replica-05"]
    _check_healthy_untouched(rep, truth, {"replica-04"})
    assert rep["verdict"]["status"] == "degraded"


def test_fleet_wide_surge_and_a_slow_replica(tmp_path: Path) -> None:
    truth = _simulate(tmp_path / "logs", "--replicas", "6", "--fleet-event", "overload", "--bad", "5:slow-decode",
                      "--seed", "2")
    rep = analyze_fleet([str(tmp_path / "logs")], workers=2, out_dir=str(tmp_path / "out")).report
    event = truth["events"][0]["replicas"]
    assert event == ["replica-00", "replica-01", "replica-02"]
    assert len(rep["incidents"]) == 1  # the queue and the aborts that followed: one incident, not two, not N
    f = rep["incidents"][0]
    assert f["kind"] == "queueing" and sorted(m["replica"] for m in f["replicas"]) == event
    assert "load surge" in f["upstream_hypothesis"][0]
    # the slow replica logs no latency and its own diagnosis sees no incident; its peers show it
    slow = next(r for r in rep["replicas"] if r["replica"] == "replica-05")
    assert "outlier decode_speed" in slow["flags"]
    assert [o["replica"] for o in rep["outliers"]] == ["replica-05"]
    for r in rep["replicas"]:
        if r["replica"] in event:
            assert r["flags"][0] == "fleet-wide F1"
    for r in rep["replicas"]:
        if truth["replicas"][r["replica"]]["truth"] == "healthy":
            assert r["status"] == "healthy" and r["flags"] == [], r
    assert "replica-05" in rep["verdict"]["headline"]


def test_fleet_wide_engine_death(tmp_path: Path) -> None:
    truth = _simulate(tmp_path / "logs", "--replicas", "8", "--fleet-event", "engine_death@60s,0.5", "--seed", "3")
    rep = analyze_fleet([str(tmp_path / "logs")], workers=2, out_dir=str(tmp_path / "out")).report
    assert len(rep["incidents"]) == 1
    f = rep["incidents"][0]
    assert f["kind"] == "dead" and f["severity"] == "critical" and f["replicas_affected"] == 4
    assert sorted(m["replica"] for m in f["replicas"]) == truth["events"][0]["replicas"]
    assert f["onset_spread_s"] <= 5 and f["confidence"] == "high"
    assert "failing" in f["followed_by"]
    assert rep["verdict"]["status"] == "failing"
    _check_healthy_untouched(rep, truth)


def test_simulate_replicas_usage_errors(tmp_path: Path) -> None:
    def run(*a: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "vllmlog", "simulate", *a], capture_output=True, text=True,
                              timeout=120)

    assert run("--replicas", "3").returncode == 2  # needs -o DIR
    p = run("--replicas", "3", "--bad", "7:engine-crash", "-o", str(tmp_path / "x"))
    assert p.returncode == 2 and "outside" in p.stderr
    p = run("--replicas", "3", "--bad", "1:nonsense", "-o", str(tmp_path / "x"))
    assert p.returncode == 2 and "unknown scenario or fault" in p.stderr
    p = run("--bad", "1:engine-crash", "-o", str(tmp_path / "x"))
    assert p.returncode == 2 and "--replicas" in p.stderr


def test_one_bad_replica_a_fleet_wide_event_and_router_skew_at_once(tmp_path: Path) -> None:
    """The three injected faults together: the bad replica first, the event as one fleet-wide incident on exactly
    its replicas, the skewed replica hot (its peers' median not raised by the surge's replicas), and no healthy
    replica flagged, hot or cold."""
    truth = _simulate(tmp_path / "logs", "--replicas", "8", "--fleet-event", "overload,0.375", "--bad", "7:engine-crash",
                      "--skew", "5:3", "--seed", "4")
    rep = analyze_fleet([str(tmp_path / "logs")], workers=2, out_dir=str(tmp_path / "out")).report
    event = truth["events"][0]["replicas"]
    assert event == ["replica-00", "replica-01", "replica-02"] and truth["bad"] == ["replica-07"]
    assert rep["replicas"][0]["replica"] == "replica-07" and rep["replicas"][0]["status"] in ("down", "failing")
    assert len(rep["incidents"]) == 1
    f = rep["incidents"][0]
    assert f["kind"] == "queueing" and sorted(m["replica"] for m in f["replicas"]) == event
    assert rep["imbalance"]["hot"] == ["replica-05"] and rep["imbalance"]["cold"] == []
    assert sorted(rep["imbalance"]["explained"]) == event
    assert not [o for o in rep["outliers"] if o["replica"] != "replica-07"]
    _check_healthy_untouched(rep, truth, {"replica-05"})
    for r in rep["replicas"]:
        if r["replica"] in event:
            assert r["flags"] == ["fleet-wide F1"], r
