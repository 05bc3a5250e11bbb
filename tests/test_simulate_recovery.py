"""Scenario tests of the whole pipeline on simulated logs: journeys, diagnosis and timeline must recover the truth."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from functools import lru_cache
from pathlib import Path

import pytest

from vllmlog.simulate import SCENARIOS, generate

analyze_mod = pytest.importorskip("vllmlog.analyze")

DURATION = {"overload": 50.0, "kv-pressure": 60.0, "slow-decode": 90.0}
SEED = 22


@lru_cache(maxsize=None)
def analysed(scenario: str, fmt: str, seed: int, tmp: str) -> tuple[dict, object]:
    """Simulate to a file, analyse it, return (truth, Analysis)."""
    path = Path(tmp) / f"{scenario}-{fmt}-{seed}.log"
    truth = generate(str(path), scenario=scenario, fmt=fmt, seed=seed, duration_s=DURATION.get(scenario, 45.0))
    return truth, analyze_mod.analyze([str(path)], year=2026)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("simrec"))


CASES = [(sc, fmt) for sc in SCENARIOS for fmt in ("v1", "handbook")] + [
    (sc, fmt) for sc in ("kv-pressure", "engine-crash", "nccl-hang") for fmt in ("v0", "v1-0.15", "v1-0.10", "v1-json")
]


@pytest.mark.parametrize(("scenario", "fmt"), CASES)
def test_diagnosis_finds_the_scenario_category(scenario: str, fmt: str, tmp: str) -> None:
    truth, an = analysed(scenario, fmt, SEED, tmp)
    cats = {f["category"] for f in an.findings or []}
    if truth["category"] == "healthy":
        assert an.verdict == "healthy", cats
    else:
        assert truth["category"] in cats, (truth["category"], cats)


def _dt(s: str | None) -> datetime | None:
    return None if s is None else datetime.fromisoformat(s)


@pytest.mark.parametrize("scenario", ["healthy", "kv-pressure", "client-disconnects"])
def test_handbook_journeys_recover_the_truth(scenario: str, tmp: str) -> None:
    truth, an = analysed(scenario, "handbook", SEED, tmp)
    got = {j.request_id: j for j in an.run.journeys}
    want = {r["request_id"]: r for r in truth["requests"]}
    assert set(got) == set(want)
    for rid, r in want.items():
        j = got[rid]
        assert j.status == r["status"], (rid, j.status, r["status"])
        assert j.prompt_tokens == r["prompt_tokens"]
        if r["status"] == "success":
            assert j.output_tokens == r["output_tokens"]
            assert math.isclose(j.ttft_s, r["ttft_s"], abs_tol=6e-4)
            assert math.isclose(j.e2e_s, r["e2e_s"], abs_tol=6e-4)
            assert math.isclose(j.tpot_s, r["tpot_s"], abs_tol=6e-5)
        # text timestamps have 1-second resolution
        assert abs((j.arrival_ts - _dt(r["arrival_ts"])).total_seconds()) < 1.0


@pytest.mark.parametrize("fmt", ["v1", "v1-0.15", "v1-0.10", "v0", "v1-json"])
def test_api_server_journeys_recover_ids_and_outcomes(fmt: str, tmp: str) -> None:
    truth, an = analysed("client-disconnects", fmt, SEED, tmp)
    got = {j.request_id: j for j in an.run.journeys}
    want = {r["request_id"]: r for r in truth["requests"]}
    assert set(got) == set(want)
    aborted = {k for k, r in want.items() if r["status"] == "aborted"}
    assert aborted and aborted == {k for k, j in got.items() if j.status == "aborted"}
    tol = 0.0011 if fmt == "v1-json" else 1.0  # JSON records carry milliseconds
    for rid, r in want.items():
        assert abs((got[rid].arrival_ts - _dt(r["arrival_ts"])).total_seconds()) < tol


@pytest.mark.parametrize(("scenario", "fmt"), [("engine-crash", "v1"), ("nccl-hang", "v1"), ("kv-pressure", "v0")])
def test_timeline_places_the_incident(scenario: str, fmt: str, tmp: str) -> None:
    truth, an = analysed(scenario, fmt, SEED, tmp)
    inc = next(i for i in truth["incidents"] if i["primary"])
    lo = datetime.fromisoformat(inc["start"]) - timedelta(seconds=2)
    hi = datetime.fromisoformat(inc["end"]) + timedelta(seconds=2)
    codes = {f["code"] for f in an.findings or [] if f["category"] == truth["category"]}
    hits = [e for e in an.timeline or [] if e.get("code") in codes and lo <= datetime.fromisoformat(e["ts"]) <= hi]
    assert hits, (codes, inc)


@pytest.mark.parametrize("fmt", ["handbook", "v0", "v1", "v1-0.15", "v1-0.10", "v1-json"])
def test_server_run_recovers_version_model_and_readiness(fmt: str, tmp: str) -> None:
    truth, an = analysed("client-disconnects", fmt, SEED, tmp) if fmt != "v1-0.15" else analysed("engine-crash", fmt, SEED, tmp)
    (server,) = an.run.servers
    assert server.version == truth["vllm_version"]
    assert server.model == truth["config"]["engine"]["model"]
    assert server.ready
    truth, an = analysed("startup-oom", "v1" if fmt.startswith("v1") else fmt, SEED, tmp)
    assert not an.run.servers[0].ready
