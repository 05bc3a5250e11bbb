"""`vllmlog fleet --engine ray` on a real local Ray cluster (loopback) gives the same document as `--engine local`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllmlog.fleet import analyze_fleet, synth

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'vllmlog[ray]')")

DATA = Path(__file__).parent / "data" / "fleet"


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ray_fleet")
    plan = synth.Plan(
        [synth.Replica(f"replica-{i:02d}", str(DATA / "overload-queueing.log.gz"), offset_s=2.0 * i, truth="queueing")
         for i in range(3)]
        + [synth.Replica("replica-03", str(DATA / "light-load.log.gz"), offset_s=6.0),
           synth.Replica("replica-04", str(DATA / "engine-dead-kill9.log.gz"), offset_s=8.0, truth="engine dead"),
           synth.Replica("replica-05", str(DATA / "light-load.log.gz"), offset_s=10.0, pieces=3)],
        events=[{"kind": "queueing", "replicas": ["replica-00", "replica-01", "replica-02"]}])
    synth.write_fleet(plan, str(root / "logs"))
    return root


def _doc(fa) -> str:
    return json.dumps(fa.to_dict(), sort_keys=True, default=str)


def _run(fleet: Path, engine: str, out: Path):  # type: ignore[no-untyped-def]
    """The fleet analysed by ``engine`` into ``out``, and the Parquet rows it wrote (name → bytes)."""
    fa = analyze_fleet([str(fleet / "logs")], engine=engine, workers=2, out_dir=str(out))
    return fa, {p.name: p.read_bytes() for p in (out / "rows").glob("*.parquet")}


def test_ray_and_local_identical(cluster, fleet: Path) -> None:
    local, rows_local = _run(fleet, "local", fleet / "out")
    on_ray, rows_ray = _run(fleet, "ray", fleet / "out")
    assert _doc(on_ray) == _doc(local)
    assert rows_ray.keys() == rows_local.keys() and len(rows_ray) == 6
    # the tasks really ran in Ray's worker processes: the cluster saw them
    assert cluster.is_initialized() and cluster.cluster_resources().get("CPU") == 2
    rep = on_ray.report
    assert rep["incidents"] and rep["incidents"][0]["kind"] == "queueing"
    assert sorted(m["replica"] for m in rep["incidents"][0]["replicas"]) == ["replica-00", "replica-01", "replica-02"]
    assert rep["replicas"][0]["replica"] == "replica-04"
    assert {r["replica"] for r in rep["replicas"] if r["status"] == "healthy"} == {"replica-03", "replica-05"}


def test_cli_engine_ray_starts_its_own_loopback_ray(fleet: Path, tmp_path: Path) -> None:
    """The command starts (and stops) a Ray of its own when no --address is given; same JSON as local."""
    args = [sys.executable, "-m", "vllmlog", "fleet", str(fleet / "logs"), "--json", "-j", "2", "--out", str(tmp_path)]
    loc = subprocess.run(args + ["--engine", "local"], capture_output=True, text=True, timeout=600)
    rr = subprocess.run(args + ["--engine", "ray"], capture_output=True, text=True, timeout=600)
    assert loc.returncode == rr.returncode == 0, rr.stderr[-2000:]
    assert json.loads(rr.stdout) == json.loads(loc.stdout)
    rd = subprocess.run(args + ["--engine", "ray-data"], capture_output=True, text=True, timeout=600)
    assert rd.returncode == 0, rd.stderr[-2000:]
    assert json.loads(rd.stdout) == json.loads(loc.stdout)  # stdout holds the document and nothing else


def test_ray_data_and_local_identical(cluster, fleet: Path, tmp_path: Path) -> None:
    """`--engine ray-data`: a Ray Data map over the replicas' specs on the same real local Ray: the same document
    and rows as `--engine local`."""
    local, rows_local = _run(fleet, "local", tmp_path / "out")
    on_data, rows_data = _run(fleet, "ray-data", tmp_path / "out")
    assert _doc(on_data) == _doc(local)
    assert rows_data == rows_local and len(rows_data) == 6


def where_am_i(spec: dict, opts: dict) -> dict:
    """A map that says which process ran it."""
    import os

    return {"replica": spec["name"], "pid": os.getpid(), "opts": opts}


def test_ray_data_runs_the_map_in_ray_workers(cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from vllmlog.fleet import engines
    from vllmlog.fleet.inputs import ReplicaSpec

    def no_fallback(*a, **k):
        raise AssertionError("Ray Data failed and fell back to Ray tasks")

    monkeypatch.setattr(engines, "run_ray", no_fallback)
    specs = [ReplicaSpec(f"r{i}", (f"r{i}.log",)) for i in range(4)]
    got = engines.run_ray_data(specs, {"k": 1}, fn=where_am_i)
    assert [g["replica"] for g in got] == ["r0", "r1", "r2", "r3"]
    assert all(g["opts"] == {"k": 1} and g["pid"] != os.getpid() for g in got)
