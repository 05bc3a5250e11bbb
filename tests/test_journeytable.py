"""Kept journeys as columns (``journeytable.JourneyTable``): the same journeys, in the same order, as the list of
``Journey`` objects the builder kept before — on every corpus log and on random journeys built to sit on the
edges of each column's encoding (None, NaN, ints past 64 bits, aware datetimes, ids that are not strings)."""

from __future__ import annotations

import math
import operator
import pickle
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllmlog import journeys as J
from vllmlog.journeys import Journey
from vllmlog.journeytable import BATCH, FIELDS, JourneyTable
from vllmlog.rules import _util as u
from vllmlog.run import load

from .conftest import corpus_logs

_ORDER = operator.attrgetter("file", "server", "first_line")


def _as_lists(monkeypatch) -> None:
    orig = J.JourneyBuilder.__init__

    def init(self, *a, compact=False, **kw):  # noqa: ANN001
        orig(self, *a, compact=False, **kw)

    monkeypatch.setattr(J.JourneyBuilder, "__init__", init)


def _values(j) -> tuple:
    return tuple(getattr(j, n) for n in FIELDS)


def _same(a, b) -> bool:
    """Field by field, NaN equal to NaN, and the same types (1 is not 1.0, True is not 1)."""
    for x, y in zip(_values(a), _values(b)):
        if type(x) is not type(y):
            return False
        if isinstance(x, float) and math.isnan(x):
            if not math.isnan(y):
                return False
        elif x != y:
            return False
        if isinstance(x, datetime) and (x.tzinfo != y.tzinfo or x.isoformat() != y.isoformat()):
            return False
    return True


@pytest.mark.parametrize("path", corpus_logs()[:40], ids=lambda p: p.name)
def test_corpus_journeys_read_the_same(path, monkeypatch):
    run = load([str(path)], year=2026)
    assert isinstance(run.journeys, JourneyTable)
    with monkeypatch.context() as m:
        _as_lists(m)
        ref = load([str(path)], year=2026).journeys
    assert type(ref) is list
    assert len(run.journeys) == len(ref)
    for a, b in zip(run.journeys, ref):
        assert _same(a, b) and a == b and b == a
        assert a.to_dict() == b.to_dict()
        assert _same(a.materialize(), b)


def test_views_are_the_table_ranges(monkeypatch):
    path = next(p for p in corpus_logs() if p.name == "04-client-aborts.log")
    run = load([str(path), str(path)], year=2026)  # two files of the same name: one key, rows of both
    idx = u.run_index(run)
    with monkeypatch.context() as m:
        _as_lists(m)
        ref = load([str(path), str(path)], year=2026)
    ridx = u.run_index(ref)
    for v, rv in zip(idx.views, ridx.views):
        assert len(v.journeys) == len(rv.journeys)
        assert all(_same(a, b) for a, b in zip(v.journeys, rv.journeys))
    for f, fi in idx.files.items():
        rf = ridx.files[f]
        assert [j.request_id for j in fi.journeys] == [j.request_id for j in rf.journeys]
        br, rbr = fi.by_request(), rf.by_request()
        for rid, j in rbr.items():
            assert _same(br.get(rid), j)
        assert br.get("no such request") is None and br.get(None) is None


_TS = st.one_of(
    st.none(),
    st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2027, 1, 1)),
    st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2027, 1, 1),
                 timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=2))])),
)
_FLOAT = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3))
_INT = st.one_of(st.none(), st.integers(-(1 << 70), 1 << 70), st.integers(-2, 300), st.booleans())
_STR = st.one_of(st.none(), st.text(max_size=6), st.sampled_from(["a", "b", "a\x00b", "\ud800"]), st.integers(0, 2))


@st.composite
def _journey(draw) -> Journey:
    rid = draw(st.one_of(st.sampled_from(["r1", "r2", "cmpl-x-0"]), st.text(max_size=5)))
    j = Journey(rid, draw(st.sampled_from(["a.log", "b.log"])), draw(st.integers(0, 3)))
    j.first_line = draw(st.integers(0, 50))
    for n in FIELDS:
        hint = J.Journey.__annotations__[n]
        if n in ("request_id", "file", "server", "first_line") or draw(st.integers(0, 3)) == 0:
            continue  # most fields keep their defaults, as most of a real journey's do
        if "datetime" in hint:
            setattr(j, n, draw(_TS))
        elif hint.startswith("float"):
            setattr(j, n, draw(_FLOAT))
        elif hint.startswith("int"):
            setattr(j, n, draw(_INT))
        elif hint == "bool":
            setattr(j, n, draw(st.one_of(st.booleans(), st.just(1))))
        elif n == "aliases":
            eng = j.engine_request_id
            setattr(j, n, draw(st.sampled_from([[], [eng] if isinstance(eng, str) else ["e"], ["x", "y"], [rid]])))
        elif n == "engine_request_id":
            setattr(j, n, draw(st.one_of(_STR, st.just(rid + "-0a1b2c3d") if isinstance(rid, str) else st.none())))
        elif n == "sources":
            setattr(j, n, draw(st.sampled_from([{}, {"ttft_s": "logged"}, {"e2e_s": "estimated"}])))
        else:
            setattr(j, n, draw(_STR))
    return j


@settings(max_examples=60, deadline=None)
@given(st.lists(_journey(), max_size=40), st.integers(1, 7))
def test_random_journeys_round_trip_in_the_builders_order(js, batch):
    import vllmlog.journeytable as T

    old = T.BATCH
    T.BATCH = batch  # several batches: columns change their encoding between them
    try:
        t = JourneyTable()
        for j in js:
            t.append(j)
        t.seal()
    finally:
        T.BATCH = old
    ref = sorted(js, key=_ORDER)
    assert len(t) == len(ref)
    for a, b in zip(t, ref):
        assert _same(a, b)
        assert _same(pickle.loads(pickle.dumps(a)), b)
    got = {(f, s): [r.first_line for r in t[a:b]] for f, s, a, b in t.groups()}
    want: dict = {}
    for j in ref:
        want.setdefault((j.file, j.server), []).append(j.first_line)
    assert got == want


def test_copies_while_building_rows_written_and_appended_after_sealing():
    t = JourneyTable()
    js = [Journey(f"r{i}", "f.log", 0, first_line=100 - i, e2e_s=i * 0.5) for i in range(BATCH + 5)]
    for j in js:
        t.append(j)
    assert [c.request_id for c in t.copies()] == [j.request_id for j in js]  # added order, before sealing
    assert [r.request_id for r in t] == [j.request_id for j in sorted(js, key=_ORDER)]
    assert t[-1].request_id == "r0" and t[1:3][0].request_id == js[-2].request_id
    m = t[0].materialize()
    m.status = "error"
    assert t[0].status == "unfinished"  # a copy
    r = t[1]
    r.status, r.e2e_s, r.client_ttft_s = "error", 7, 0.25  # client.compare writes the client's times into rows
    assert (t[1].status, t[1].e2e_s, t[1].client_ttft_s) == ("error", 7, 0.25) and type(t[1].e2e_s) is int
    assert [x.status for x in t].count("error") == 1 and t[2].e2e_s == sorted(js, key=_ORDER)[2].e2e_s
    with pytest.raises(AttributeError):
        r.no_such_field = 1
    import dataclasses

    c = dataclasses.replace(t[0], ttft_s=0.5)  # a Journey, as replace() on a Journey gives
    assert type(c) is Journey and c.ttft_s == 0.5 and c.request_id == t[0].request_id
    assert dataclasses.asdict(t[0])["request_id"] == t[0].request_id
    n = len(t)
    t.append(js[0])  # after sealing: list.append, at the end, as it is
    assert len(t) == n + 1 and t[-1] is js[0] and list(t)[-1] is js[0] and t.groups() is None
