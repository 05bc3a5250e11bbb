"""Shortcuts taken for speed answer exactly as what they replace (the prefiltered shutdown regex, the redaction memo,
the chart clock)."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from vllmlog.export.charts import wall
from vllmlog.redact import Redactor
from vllmlog.rules._util import GRACEFUL, is_graceful

CORPUS = [p for root in (Path(__file__).resolve().parents[2] / "shared" / "corpus", Path(__file__).parent / "data" / "corpus")
          for p in sorted(root.glob("**/*.log"))]
_WORDS = ["SIGTERM", "SIGINT", "SIG", "received", "signal", "shutdown triggered", "Shutting down", "shutting down",
          "KeyboardInterrupt", "INFO:", " handler", "gracefully", "stop", "exit", "=", ".", " ", "x", "\n"]


def _lines() -> list[str]:
    out = []
    for p in CORPUS[:400]:
        out += p.read_text("utf-8", "replace").splitlines()
    return out


def test_corpus_has_lines() -> None:
    assert len(_lines()) > 1000


def test_graceful_prefilter_agrees_on_corpus() -> None:
    hits = 0
    for line in _lines():
        want = GRACEFUL.search(line) is not None
        assert is_graceful(line) == want, line
        hits += want
    assert hits  # the corpus has shutdowns: the test sees both answers


@given(st.lists(st.sampled_from(_WORDS), max_size=12).map("".join))
@settings(max_examples=400, deadline=None)
def test_graceful_prefilter_agrees(s: str) -> None:
    assert is_graceful(s) == (GRACEFUL.search(s) is not None)


@given(st.text(max_size=300), st.booleans(), st.booleans())
@settings(max_examples=300, deadline=None)
def test_redaction_memo_is_the_computation(s: str, show: bool, ips: bool) -> None:
    r = Redactor(show_prompts=show, mask_ips=ips)
    first = r(s)
    assert first == (r._redact(s) if s else "")
    assert r(s) == first  # from the memo
    assert Redactor(show_prompts=not show, mask_ips=ips)(s) == (Redactor(not show, ips)._redact(s) if s else "")


def test_redaction_memo_on_corpus() -> None:
    r = Redactor()
    for line in _lines()[:20000]:
        assert r(line) == r._redact(line)
        assert r(line) == r._redact(line)


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_wall_is_timegm(ts: datetime) -> None:
    assert wall(ts) == calendar.timegm(ts.timetuple()) + ts.microsecond / 1e6
    aware = ts.replace(tzinfo=timezone(timedelta(hours=5)))
    assert wall(aware) == calendar.timegm(aware.timetuple()) + aware.microsecond / 1e6


def _old_is_oom(e) -> bool:  # the definition before the shortcut (kinds_of's set, the text read first)
    from vllmlog.rules._util import kinds_of

    if "cuda_oom" in kinds_of(e):
        return True
    head = str(e.fields.get("exc_message") or e.fields.get("error") or e.text.split("\n", 1)[0])
    return e.kind in ("cuda_error", "engine_fatal", "worker_exception", "traceback") and "out of memory" in head.lower()


def test_is_oom_is_the_old_test_on_corpus_events() -> None:
    from vllmlog.reader import parse
    from vllmlog.rules._util import is_oom

    n = hits = 0
    for p in CORPUS:
        for e in parse([str(p)], year=2026):
            assert is_oom(e) == _old_is_oom(e), (p.name, e.line)
            n += 1
            hits += is_oom(e)
    assert n > 10000 and hits  # OOM logs are in the corpus


_S = st.one_of(st.none(), st.sampled_from(["cuda_oom", "CUDA out of memory", "x", ""]))


@given(st.sampled_from(["cuda_oom", "cuda_error", "traceback", "log", "engine_fatal"]),
       st.fixed_dictionaries({}, optional={"exc_kind": _S, "exc_message": _S, "error": _S,
                                           "exc_kinds": st.one_of(st.none(), st.lists(st.sampled_from(["cuda_oom", "x"]), max_size=2))}),
       st.sampled_from(["", "RuntimeError: CUDA out of memory. Tried", "x\nout of memory"]))
def test_is_oom_is_the_old_test(kind: str, fields: dict, text: str) -> None:
    from vllmlog.model import Event
    from vllmlog.rules._util import is_oom

    e = Event("f", 1, 1, None, "ERROR", None, None, kind, None, fields, text)
    assert is_oom(e) == _old_is_oom(e)
