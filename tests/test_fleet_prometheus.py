"""`fleet --prometheus`: each replica's /metrics history (a real Prometheus on loopback, backfilled with promtool at
the logs' own times; or saved exposition snapshots) joined to its replica by the instance label, feeding the
fleet's KV / queue series where the log has no stats line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from vllmlog.errors import InputError
from vllmlog.fleet import analyze_fleet, synth
from vllmlog.fleet.inputs import ReplicaSpec
from vllmlog.fleet.prom import owner, with_prometheus

from .snapshots import free_port

DATA = Path(__file__).parent / "data" / "fleet"
LIGHT = str(DATA / "light-load.log.gz")
OVERLOAD = str(DATA / "overload-queueing.log.gz")
DEAD = str(DATA / "engine-dead-kill9.log.gz")
#: Per replica: constant KV usage and Waiting its /metrics report (distinct, so a mix-up shows).
VALUES = {"a": (0.11, 1), "b": (0.22, 7), "c": (0.33, 2)}


def _bin(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{name} is required in CI (apt-get install prometheus)")
        pytest.skip(f"{name} not installed")
    return path


def _points(rng: dict, step: float = 5.0) -> list[float]:
    t, out = rng["start_s"], []
    while t <= rng["end_s"]:
        out.append(t)
        t += step
    return out


def _exposition(name: str, ts: float | None = None, instance: bool = True) -> str:
    kv, waiting = VALUES[name]
    lab = f'instance="{name}:8000",job="vllm",model_name="m"' if instance else 'model_name="m"'
    stamp = f" {ts:.3f}" if ts is not None else ""
    return (f"# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{{lab}}} {kv}{stamp}\n"
            f"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{lab}}} {waiting}{stamp}\n"
            f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{lab}}} 1{stamp}\n")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """Three replicas; `b`'s log has its stats lines removed (its KV / queue are known only from /metrics)."""
    root = tmp_path_factory.mktemp("fleetprom")
    synth.write_fleet(synth.Plan([synth.Replica("a", LIGHT, 0), synth.Replica("b", OVERLOAD, 1),
                                  synth.Replica("c", DEAD, 2)]), str(root / "logs"))
    b = root / "logs" / "b.log"
    b.write_bytes(b"".join(ln for ln in b.read_bytes().splitlines(keepends=True) if b"Avg prompt throughput" not in ln))
    (root / "logs" / "truth.json").unlink()
    plain = analyze_fleet([str(root / "logs")], workers=0, out_dir=str(root / "plain"))
    return root, {r["replica"]: r for r in plain.replicas}


@pytest.fixture(scope="module")
def prometheus(fleet) -> Iterator[str]:
    """A real prometheus on 127.0.0.1 whose TSDB promtool backfilled with the replicas' metrics at their logs' times
    (plus a target that is no replica)."""
    root, plain = fleet
    promtool, binary = _bin("promtool"), _bin("prometheus")
    om = []
    for name, r in plain.items():
        for t in _points(r["time_range"]):
            om.append(_exposition(name, t).replace("# TYPE", "#TYPE"))
    body = "".join(om)
    # OpenMetrics wants one TYPE line per family, before its samples: regroup by family
    fams: dict[str, list[str]] = {}
    for ln in body.splitlines():
        if not ln.startswith("#"):
            fams.setdefault(ln.split("{", 1)[0], []).append(ln)
    t0 = plain["a"]["time_range"]["start_s"]
    fams["vllm:num_requests_waiting"].append(f'vllm:num_requests_waiting{{instance="zzz:8000",job="vllm"}} 0 {t0:.3f}')
    text = "".join(f"# TYPE {f} gauge\n" + "\n".join(sorted(v, key=lambda s: float(s.rsplit(' ', 1)[1]))) + "\n"
                   for f, v in fams.items()) + "# EOF\n"
    tmp = root / "prom"
    tmp.mkdir()
    (tmp / "data.om").write_text(text)
    p = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(tmp / "data.om"), str(tmp / "data")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    port = free_port()
    (tmp / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\n")
    proc = subprocess.Popen([binary, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
                             "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=(tmp / "prometheus.log").open("w"))
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp / "prometheus.log").read_text()[-2000:]
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _kv(r: dict) -> list[tuple[int, float]]:
    g = r["grid"]
    return [(i, g["kv_sum"][i] / g["kv_n"][i]) for i in range(g["n"]) if g["kv_n"][i]]


def test_prometheus_api_feeds_each_replicas_series(fleet, prometheus: str, tmp_path: Path) -> None:
    root, plain = fleet
    assert not _kv(plain["b"])  # without /metrics, b's log says nothing of its KV cache
    fa = analyze_fleet([str(root / "logs")], workers=2, out_dir=str(tmp_path / "o"), prometheus=[prometheus])
    m = fa.report["metrics"]
    assert m["replicas_with_metrics"] == ["a", "b", "c"] and m["replicas_without"] == []
    assert m["unmapped_targets"] == [f"{prometheus} zzz:8000"] and m["points"] > 0
    got = {r["replica"]: r for r in fa.replicas}
    for name, (kv, waiting) in VALUES.items():
        r = got[name]
        assert r["error"] is None and r["metrics"]["points"] > 0
        assert r["metrics"]["targets"][0]["target"] == f"{name}:8000"
    # b: every observed bucket is /metrics's, with b's own values (not a's or c's)
    b = got["b"]["grid"]
    assert _kv(got["b"]) and all(abs(v - VALUES["b"][0]) < 1e-9 for _, v in _kv(got["b"]))
    assert {w for w in b["waiting_max"] if w is not None} == {VALUES["b"][1]}
    assert sum(b["metrics_n"]) > 0
    # a and c: the buckets their logs' stats lines cover keep the log's values
    for name in ("a", "c"):
        before = dict(_kv(plain[name]))
        after = dict(_kv(got[name]))
        assert before and all(after[i] == v for i, v in before.items())
        g = got[name]["grid"]
        assert all(g["metrics_n"][i] == 0 for i in before)
    # the fleet's series (the heat-maps' and charts' input) now see b's KV cache and queue
    fleet_grid = fa.report["grid"]
    assert max(v for v in fleet_grid["kv_max"] if v is not None) == VALUES["b"][0]
    assert sum(fleet_grid["metrics_n"]) == sum(sum(r["grid"]["metrics_n"]) for r in fa.replicas)


def test_saved_snapshots_named_after_replicas(fleet, tmp_path: Path) -> None:
    """Saved /metrics snapshots (no instance label): joined by file name, timed by their index CSV."""
    root, plain = fleet
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    rows = ["file,snapshot_epoch"]
    for name, r in plain.items():
        for i, t in enumerate(_points(r["time_range"], 10.0)):
            f = f"{name}-metrics-{i:03d}.prom"
            (snaps / f).write_text(_exposition(name, instance=False))
            rows.append(f"{f},{t}")
    (snaps / "index.csv").write_text("\n".join(rows) + "\n")
    fa = analyze_fleet([str(root / "logs")], workers=0, out_dir=str(tmp_path / "o"), prometheus=[str(snaps)])
    got = {r["replica"]: r for r in fa.replicas}
    assert fa.report["metrics"]["replicas_with_metrics"] == ["a", "b", "c"]
    b = got["b"]
    assert b["metrics"]["targets"][0]["kind"] == "snapshots"
    assert _kv(b) and all(abs(v - VALUES["b"][0]) < 1e-9 for _, v in _kv(b))
    assert {w for w in b["grid"]["waiting_max"] if w is not None} == {VALUES["b"][1]}
    p = subprocess.run([sys.executable, "-m", "vllmlog", "fleet", str(root / "logs"), "--prometheus", str(snaps),
                        "--out", str(tmp_path / "cli"), "--no-html", "-j", "0"], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, COLUMNS="160"))
    assert p.returncode == 0, p.stderr
    assert "/metrics history: " in p.stdout and "points for 3 replica(s)" in p.stdout


def test_mapping_by_labels_and_federated_snapshot(tmp_path: Path) -> None:
    names = ["gpu-07", "ns/vllm-abc", "vllm-x"]
    assert owner({"instance": "gpu-07:8000"}, names) == "gpu-07"
    assert owner({"instance": "10.0.0.5:8000", "pod": "vllm-abc"}, names) == "ns/vllm-abc"
    assert owner({"instance": "10.0.0.5:8000"}, names) is None
    fed = tmp_path / "federate.prom"
    fed.write_text(_exposition("a") + _exposition("b").replace('"b:8000"', '"other:8000"'))
    reps, summary = with_prometheus([ReplicaSpec("a", ("a.log",)), ReplicaSpec("c", ("c.log",))], [str(fed)])
    assert reps[0].metrics == ({"files": [str(fed)], "instance": "a:8000", "target": "a:8000"},)
    assert reps[1].metrics == () and summary["replicas_without"] == ["c"]
    assert summary["unmapped_targets"] == [f"{fed} instance=other:8000"]
    (tmp_path / "lost.prom").write_text(_exposition("a", instance=False))
    with pytest.raises(InputError, match="names no replica"):
        with_prometheus([ReplicaSpec("c", ("c.log",))], [str(tmp_path / "lost.prom")])
