"""The per-run index the rules read (``rules/_util.run_index``): per-server and per-file journeys and decode
seconds, built once per Run, equal to filtering the Run's lists — so rules stay linear in server runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllmlog.diagnose import diagnose
from vllmlog.rules import _util as u
from vllmlog.run import load

from .conftest import CORPUS

HERE = Path(__file__).parent
PARTS = [
    CORPUS / "vllm-cpu" / "02-overload-queueing.log",
    CORPUS / "vllm-cpu" / "03-kv-cache-pressure-preemption.log",
    HERE / "golden" / "01_handbook_journey" / "input.log",
    CORPUS / "vllm-cpu" / "04-client-aborts.log",
    HERE / "rules" / "K203.log",
]


@pytest.fixture(scope="module")
def restarts(tmp_path_factory) -> Path:
    """One file holding several server runs (real V1 runs and handbook runs, one after the other)."""
    p = tmp_path_factory.mktemp("idx") / "restarts.log"
    p.write_bytes(b"".join(x.read_bytes() for x in PARTS) * 2)
    return p


def test_views_index_what_filtering_gives(restarts: Path) -> None:
    run = load([str(restarts), str(PARTS[2])], year=2026)
    views = u.servers(run)
    assert len({v.file for v in views}) == 2 and len(views) >= 8
    assert any(v.journeys for v in views if v.index > 0) and any(v.decode for v in views if v.index > 0)
    for v in views:
        assert v.journeys == [j for j in run.journeys if j.file == v.file and j.server == v.index]
        assert v.decode == [d for d in run.series.decode if d.file == v.file and d.server == v.index]
        assert list(v.in_file.journeys) == [j for j in run.journeys if j.file == v.file]
        assert list(v.in_file.decode) == [d for d in run.series.decode if d.file == v.file]
        assert v.in_file.arrivals() == sorted(j.arrival_ts for j in run.journeys if j.file == v.file and j.arrival_ts)
        assert v.in_file.by_request() == {j.request_id: j for j in run.journeys if j.file == v.file}
        assert list(v.in_file.decode_kv_at_least(0.8)) == [d for d in v.in_file.decode if d.kv_max >= 0.8]
        assert v.in_file.decode_kv_max() == max((d.kv_max for d in v.in_file.decode), default=None)
        assert u.request_count(run, v.file) == sum(1 for j in run.journeys if j.file == v.file)
        same = [w for w in views if w.file == v.file]
        assert all(w.in_file is v.in_file for w in same)  # one index per file, shared


def test_index_built_once_per_diagnosis(restarts: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = load([str(restarts)], year=2026)
    calls = []
    real = u._build_index
    monkeypatch.setattr(u, "_build_index", lambda r: calls.append(1) or real(r))
    u._CACHE.clear()
    found = diagnose(run)
    assert found and len(calls) == 1
    # a Run fed more since is indexed again (watch snapshots grow)
    run.journeys.append(run.journeys[0])
    u.servers(run)
    assert len(calls) == 2


def test_findings_per_server_run_repeat(restarts: Path, tmp_path: Path) -> None:
    """The same server runs twice in one file give the same findings twice (per-server scoping holds)."""
    once = tmp_path / "once.log"
    once.write_bytes(b"".join(x.read_bytes() for x in PARTS))
    a = diagnose(load([str(once)], year=2026))
    b = diagnose(load([str(restarts)], year=2026))
    codes_a = sorted(f.code for f in a if f.code not in ("K202", "K203"))  # these two read the whole file
    codes_b = sorted(f.code for f in b if f.code not in ("K202", "K203"))
    assert codes_b == sorted(codes_a * 2)
