"""The Python path's classification memo (``parser._classify_memo``) answers as ``_classify`` itself: every corpus log
parsed twice with the memo (the second time from it) gives the events, kinds and unknown templates of a parse without
it, on the pure path and on the compiled one."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllmlog.parsing import fast
from vllmlog.parsing import parser as P

from .conftest import CORPUS

LOGS = sorted(p for p in Path(CORPUS).rglob("*.log"))


def _parse(path: Path, scan: object) -> tuple[list[dict], dict, dict]:
    old = fast.scan
    fast.scan = scan  # type: ignore[assignment]
    try:
        lp = P.LineParser(str(path), year=2026)
        lines = path.read_text("utf-8", "replace").split("\n")
        evs = lp.feed_lines(1, lines) + lp.close()
    finally:
        fast.scan = old  # type: ignore[assignment]
    return [e.to_dict() for e in evs], dict(lp.kinds), dict(lp.unknown_templates)


def test_corpus_found() -> None:
    assert len(LOGS) > 10
    assert any("json-logging" in p.name for p in LOGS)  # JSON records: the memo's main customer


@pytest.mark.parametrize("scan", [None, fast.scan], ids=["pure", "compiled"])
def test_memo_changes_nothing(monkeypatch: pytest.MonkeyPatch, scan: object) -> None:
    hits = 0
    for path in LOGS:
        monkeypatch.setattr(P, "_classify_memo", P._classify)
        want = _parse(path, scan)
        monkeypatch.undo()
        P._MEMO.clear()
        first = _parse(path, scan)
        n = len(P._MEMO)
        again = _parse(path, scan)  # from the memo
        hits += n
        assert first == want, path.name
        assert again == want, path.name
    assert hits > 100


def test_memo_hit_is_a_copy() -> None:
    P._MEMO.clear()
    lp = P.LineParser("x.log", year=2026)
    line = '{"timestamp": "2026-11-30 03:07:34,596", "level": "INFO", "name": "v", "message": "Available KV cache memory: 1.5 GiB"}'
    a = lp.feed([(1, line), (2, line), (3, line)]) + lp.close()
    assert len(a) == 3 and a[1].fields == a[2].fields and a[1].fields is not a[2].fields
    a[1].fields["x"] = 1
    assert "x" not in a[2].fields


_MSGS = ["Available KV cache memory: 1.5 GiB", "", "  ", "Traceback (most recent call last):", "hello world",
         "Started server process [12]", "Application startup complete.", 'Received request cmpl-1: prompt: "x"',
         "ValueError: bad", "NCCL watchdog timeout"]
_LEVELS = [None, "INFO", "WARNING", "ERROR", "warn"]


def _line(shape: str, level: str | None, msg: str, rid: bool) -> str:
    import json

    if shape == "json":
        d = {"timestamp": "2026-11-30 03:07:34,596", "message": msg}
        if level:
            d["level"] = level
        if rid:
            d["request_id"] = "r1"
        return json.dumps(d)
    if shape == "env":
        return f"{(level or 'INFO').upper()} 11-30 03:07:34 [a.py:1] {msg}"
    if shape == "uvicorn":
        return f"{(level or 'INFO').upper()}:     {msg}"
    return msg


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(st.lists(st.tuples(st.sampled_from(["json", "env", "uvicorn", "raw"]), st.sampled_from(_LEVELS),
                          st.sampled_from(_MSGS), st.booleans()), min_size=1, max_size=20))
@settings(max_examples=200, deadline=None)
def test_memo_changes_nothing_on_mixed_records(recs: list) -> None:
    lines = [_line(*r) for r in recs]

    def run(memo: bool) -> tuple:
        saved = P._classify_memo
        if not memo:
            P._classify_memo = P._classify
        try:
            lp = P.LineParser("m.log", year=2026)
            evs = lp.feed(list(enumerate(lines, 1))) + lp.close()
        finally:
            P._classify_memo = saved
        return [e.to_dict() for e in evs], dict(lp.kinds), dict(lp.unknown_templates)

    want = run(False)
    assert run(True) == want
    assert run(True) == want  # the memo filled by the run before
