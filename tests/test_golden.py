"""Golden files: tests/golden/NN_slug/input.log parses to exactly events.jsonl (``pytest --update-golden``
rewrites them; the diff is the review). The library (Event objects) and the CLI's fast JSONL path must agree."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from vllmlog.reader import iter_jsonl, parse

from .conftest import GOLDEN

CASES = sorted(p for p in GOLDEN.iterdir() if (p / "input.log").exists()) if GOLDEN.exists() else []


def _jsonl(case) -> str:
    return "".join(iter_jsonl("input.log", year=2026))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_golden(case, monkeypatch, update_golden):
    monkeypatch.chdir(case)
    got = _jsonl(case)
    lib = "".join(orjson.dumps(e.to_dict(), option=orjson.OPT_APPEND_NEWLINE, default=str).decode()
                  for e in parse("input.log", year=2026))
    assert got == lib, "fast JSONL path and Event.to_dict() disagree"
    expected = case / "events.jsonl"
    if update_golden or not expected.exists():
        expected.write_text(got, encoding="utf-8")
        if not update_golden:
            pytest.fail(f"{expected} was missing and has been written; review and commit it")
    want = expected.read_text(encoding="utf-8")
    if got != want:
        for i, (a, b) in enumerate(zip(got.splitlines(), want.splitlines()), 1):
            assert a == b, f"{case.name} event {i} differs (run pytest --update-golden and review the diff)"
        assert got == want, f"{case.name}: different number of events"


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_golden_every_line_once(case):
    rows = [orjson.loads(x) for x in (case / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    n = (case / "input.log").read_bytes().count(b"\n")
    covered = sorted(i for r in rows for i in range(r["line"], r["line_end"] + 1))
    assert covered == list(range(1, n + 1))
    for r in rows:
        assert set(r) == {"file", "line", "line_end", "ts", "level", "process", "source", "kind", "request_id", "fields", "text"}


def test_cli_matches_golden(monkeypatch):
    case = GOLDEN / "01_handbook_journey"
    monkeypatch.chdir(case)
    r = subprocess.run([sys.executable, "-m", "vllmlog", "parse", "--year", "2026", "input.log"], capture_output=True, timeout=60)
    assert r.returncode == 0
    assert r.stdout.decode() == (case / "events.jsonl").read_text(encoding="utf-8")
