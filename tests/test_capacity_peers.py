"""The capacity plan's peer lists (runs of the same model and device that pool their step-time fit and predict each
other): the old all-pairs computation on a log of a few runs, the nearest ``MAX_PEERS`` on a log of many, and the
fits' work linear in server runs (counted, not timed)."""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from vllmlog.capacity.plan import MAX_PEERS, SESSION_S, _peer_lists, _peers, plan
from vllmlog.run import load
from vllmlog.state import service_states

REPO = Path(__file__).resolve().parents[1]
cplan = importlib.import_module("vllmlog.capacity.plan")  # the module (vllmlog.capacity.plan is also the function)
cmodel = importlib.import_module("vllmlog.capacity.model")


def _real_log(path: Path, lines: int) -> Path:
    spec = importlib.util.spec_from_file_location("vllmlog_bench_make_real_log", REPO / "bench" / "make_real_log.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(path, "wb") as f:
        mod.generate(f, lines, "info")
    return path


@pytest.fixture(scope="module")
def few(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The real CPU runs repeated: a handful of server runs of one model (fewer peers than MAX_PEERS)."""
    return load([str(_real_log(tmp_path_factory.mktemp("few") / "few.log", 20_000))], year=2026)


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The same repeated to several times MAX_PEERS server runs of one model, within one session."""
    return load([str(_real_log(tmp_path_factory.mktemp("many") / "many.log", 80_000))], year=2026)


def _serving(run: Any) -> list[Any]:
    return [st for st in service_states(run) if st.lifecycle.serving and st.intervals]


def _old_peer_lists(states: Any, limit: int = 0) -> dict[int, list[Any]]:
    """The computation before the lists were bounded: every other state with ``_peers``, in states order."""
    return {id(st): [o for o in states if o is not st and _peers(o, st)] for st in states}


def _nearest_ref(st: Any, peers: list[Any], states: list[Any], limit: int) -> list[Any]:
    """Brute force: the ``limit`` peers nearest in start time (equal distance: an earlier start first, then the
    nearer in start order), then the untimed ones in states order; an untimed run: the nearest in states order."""
    pos = {id(o): i for i, o in enumerate(states)}
    me = st.lifecycle.start_ts
    order = sorted((o for o in states if o.lifecycle.start_ts is not None), key=lambda o: (o.lifecycle.start_ts, pos[id(o)]))
    at = {id(o): k for k, o in enumerate(order)}

    def key(o: Any) -> tuple[Any, ...]:
        t = o.lifecycle.start_ts
        if me is None:
            return (0, abs(pos[id(o)] - pos[id(st)]), pos[id(o)])
        if t is None:
            return (1, 0.0, 0, pos[id(o)])
        left = at[id(o)] < at[id(st)]
        return (0, abs((t - me).total_seconds()), 0 if left else 1, abs(at[id(o)] - at[id(st)]))

    return sorted(sorted(peers, key=key)[:limit], key=lambda o: pos[id(o)])


def _near(peers: dict[int, Any]) -> dict[int, list[Any]]:
    return {k: v.near for k, v in peers.items()}


def _old_plan_peers(states: Any, limit: int = 0) -> dict[int, Any]:
    return {k: cplan.Peers(v) for k, v in _old_peer_lists(states).items()}


def test_few_runs_peer_lists_are_the_old_ones(few):
    states = _serving(few)
    assert 3 <= len(states) and all(len(v) <= MAX_PEERS for v in _old_peer_lists(states).values())
    got = _peer_lists(states)
    assert _near(got) == _old_peer_lists(states) and all(p.session is None for p in got.values())


def test_few_runs_plan_is_the_old_computation(few, monkeypatch):
    new = json.dumps(plan(few).to_dict(), default=str)
    monkeypatch.setattr(cplan, "_peer_lists", _old_plan_peers)
    old = json.dumps(plan(few).to_dict(), default=str)
    assert new == old


def test_many_runs_pool_their_session_and_check_on_the_nearest(many):
    states = _serving(many)
    old = _old_peer_lists(states)
    assert max(len(v) for v in old.values()) > 2 * MAX_PEERS  # the case the bound is for
    got = _peer_lists(states)
    for st in states:
        assert got[id(st)].near == _nearest_ref(st, old[id(st)], states, MAX_PEERS)
        if len(old[id(st)]) > MAX_PEERS:  # the log spans < SESSION_S: the session is the run and all its peers
            assert got[id(st)].session == [o for o in states if o is st or o in old[id(st)]]
        else:
            assert got[id(st)].session is None
    # unbounded, the lists are the old ones
    assert _near(_peer_lists(states, limit=len(states))) == old


def test_many_runs_use_one_fit_per_session(many):
    states = _serving(many)
    got = _peer_lists(states)
    p = plan(many)
    by = {(sc.file, sc.server): sc for sc in p.servers}
    pooled = 0
    for st in states:
        own = cmodel.fit_throughput(st.intervals)
        sess = got[id(st)].session
        if sess is None or (own is not None and len(own.batch_sizes) >= 2):
            continue
        ref = cmodel.fit_throughput(sess[0].intervals, [o.intervals for o in sess[1:]])
        if ref is not None and len(ref.batch_sizes) >= 2:
            assert by[(st.file, st.index)].throughput == ref
            pooled += 1
    assert pooled


def test_nearest_respects_the_session_and_untimed_runs():
    from datetime import datetime, timedelta
    from types import SimpleNamespace as NS

    t0 = datetime(2026, 1, 1)

    def st(t: Any, model: str = "m") -> Any:
        return NS(config=NS(model=model, device="cpu", world_size=1), lifecycle=NS(start_ts=t))

    xs = [st(t0), st(t0 + timedelta(seconds=10)), st(t0 + timedelta(seconds=2 * SESSION_S)), st(None),
          st(t0 + timedelta(seconds=5), model="other"), st(t0 + timedelta(seconds=20))]
    assert _near(_peer_lists(xs)) == _old_peer_lists(xs)
    got = _peer_lists(xs, limit=2)
    assert got[id(xs[0])].near == [xs[1], xs[5]]   # 10 s and 20 s away; the untimed run not needed
    assert got[id(xs[2])].near == [xs[3]]          # no timed run within the session: the untimed one
    assert got[id(xs[3])].near == [xs[1], xs[2]]   # untimed: nearest in order (2 is 1 away; 1 and 5 2: the left one)
    assert got[id(xs[4])].near == []
    # sessions: 0, 1, 5 (and the untimed 3) start within SESSION_S of the first; 2 starts another
    assert got[id(xs[0])].session == [xs[0], xs[1], xs[3], xs[5]] and got[id(xs[0])].session is got[id(xs[1])].session
    assert got[id(xs[2])].session is None          # 1 peer (the untimed run): at most the limit
    assert got[id(xs[3])].session == [xs[0], xs[1], xs[2], xs[3], xs[5]]
    assert got[id(xs[4])].session is None


def test_fit_work_is_linear_in_server_runs(many, few, monkeypatch):
    """Points the step-time fits read per interval of the log: bounded by the pool size, not by the run count."""
    seen = {"points": 0}
    real = cmodel.fit_throughput

    def counting(xs: Any, pooled: Any = ()) -> Any:
        seen["points"] += len(xs) + sum(len(p) for p in pooled)
        return real(xs, pooled)

    monkeypatch.setattr(cplan, "fit_throughput", counting)
    per = {}
    for name, run in (("few", few), ("many", many)):
        seen["points"] = 0
        plan(run)
        per[name] = seen["points"] / sum(len(st.intervals) for st in _serving(run))
    assert per["many"] <= 2 * (MAX_PEERS + 2), per
    assert per["many"] <= 4 * max(per["few"], 1.0), per
