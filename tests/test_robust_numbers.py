"""Issue 15 §1: one number must not kill anything. Every number a line carries is range-checked where it
is converted (``parsing.fields``: |int| < 2**63, |float| ≤ 1e38, at most 40 characters): a 309-digit
"Running: 999…9 reqs" converts to None instead of raising OverflowError later in a float sum.

The corpus logs are rewritten with every number after the envelope replaced by a hostile one (300 and 5000
digits, 1e999, inf, nan, 19 ones, a leading-zero run…) and run through analyze, summary, timeline,
requests, diagnose and the live watcher + exporter: no exception, no rule failing, exit 0."""

from __future__ import annotations

import itertools
import logging
import re
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from vllmlog.cli import main
from vllmlog.live import AlertConfig, AlertEngine, FileFollower, LiveCollector, LiveState, Watcher, default_evaluator
from vllmlog.live.exporter import make_registry
from vllmlog.parsing.fields import bounded, to_float, to_int, to_ratio

from .conftest import CORPUS

HOSTILE = ["9" * 320, "9" * 5000, "1e999", "inf", "nan", "-1", "1" * 19, "0" * 400 + "1", "1" + "0" * 30 + ".5",
           "-" + "9" * 320, "18446744073709551616", "1.7976931348623157e309"]
_NUM = re.compile(r"(?<![A-Za-z_])\d+(?:\.\d+)?")
LOGS = [CORPUS / "vllm-cpu" / "01-startup-and-light-load.log", CORPUS / "vllm-cpu" / "03-kv-cache-pressure-preemption.log",
        CORPUS / "vllm-cpu" / "07b-json-logging-builtin-formatter.log", CORPUS / "vllm-cpu" / "08-debug-level-light-load.log",
        CORPUS / "vllm-cpu" / "06d-startup-fail-max-model-len-over-model-limit.log",
        CORPUS / "incidents" / "46-healthy-v0-burst-drains-one-cancel.log",
        CORPUS / "incidents" / "41-v0-chunked-prefill-tiny-budget-slow-ttft.log"]

STATS = ("INFO 04-10 09:31:21 [loggers.py:111] Engine 000: Avg prompt throughput: {a} tokens/s, Avg generation "
         "throughput: 1.0 tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache usage: {k}%, Prefix cache hit rate: 8.4%")


def _hostile(src: Path, dst: Path, k: int) -> Path:
    it = itertools.cycle(HOSTILE[k:] + HOSTILE[:k])
    out = []
    for line in src.read_text(errors="replace").splitlines(keepends=True):
        i = max(0, line.find("] "))  # the envelope's timestamp stays readable
        out.append(line[:i] + _NUM.sub(lambda m: next(it), line[i:]))
    for v in HOSTILE:  # the issue's own recipe, in each field of a stats line
        out += [STATS.format(a=v, r=1, k=1) + "\n", STATS.format(a=1, r=v, k=1) + "\n", STATS.format(a=1, r=1, k=v) + "\n"]
    dst.write_text("".join(out))
    return dst


def test_converters_range_check() -> None:
    for v in ("9" * 320, "9" * 5000, "1e999", "inf", "-inf", "nan", "9223372036854775808", "1e19", "-" + "9" * 30):
        assert to_int(v) is None, v
    assert to_int("9223372036854775807") == (1 << 63) - 1
    assert to_int("381,024") == 381024 and to_int("1e3") == 1000
    for v in ("9" * 320, "1e999", "inf", "-inf", "1e39", "9" * 41):
        assert to_float(v) is None, v
    assert to_ratio("9" * 320) is None
    assert to_float("1e38") == 1e38 and to_float("0.5") == 0.5
    f = to_float("nan")
    assert f is not None and f != f  # documented: nan stays nan
    assert bounded(10 ** 300) is None and bounded(float("inf")) is None and bounded(3) == 3 and bounded("x") == "x"


@pytest.mark.parametrize("k,src", list(enumerate(LOGS)), ids=[p.stem for p in LOGS])
def test_hostile_numbers_every_command(tmp_path: Path, k: int, src: Path, capfd, caplog) -> None:
    log = _hostile(src, tmp_path / "h.log", k)
    caplog.set_level(logging.ERROR)
    assert main(["analyze", str(log), "--json", "--no-html", "--year", "2026"]) == 0
    for cmd in (["summary"], ["timeline"], ["requests"], ["diagnose"], ["capacity"], ["parse", "-o", str(tmp_path / "ev.jsonl")]):
        assert main(cmd + [str(log)]) in (0, 1), cmd  # diagnose exits 1 when it finds a problem
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Error" not in err.replace("error:", "")
    # a failing rule is logged, not raised: none may fail on these numbers
    assert not [r for r in caplog.records if "failed" in r.getMessage()], [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("k,src", list(enumerate(LOGS[:4])), ids=[p.stem for p in LOGS[:4]])
def test_hostile_numbers_live(tmp_path: Path, k: int, src: Path) -> None:
    log = _hostile(src, tmp_path / "h.log", k)
    state = LiveState(str(log), year=2026)
    eng = AlertEngine(AlertConfig())
    w = Watcher(FileFollower(str(log)), state, evaluate=default_evaluator(), engine=eng)
    reg = make_registry(LiveCollector(state, health=w.health, alerts=eng))
    while w.step():
        pass
    w.finish(eof=True)  # completes the last record, diagnoses
    text = generate_latest(reg).decode()
    assert w.health.diagnose_errors == 0 and w.health.diagnose_runs
    assert "vllmlog_num_requests_running" in text
    n = sum(1 for _ in log.open("rb"))
    assert w.health.lines_read == n and sum(state.lines.values()) == n
