"""Parsing one file on several processes writes exactly what one process writes (chunk boundaries, line
numbers, year, multi-line records, counters)."""

from __future__ import annotations

import os

from vllmlog.parsing import parallel
from vllmlog.reader import count, iter_jsonl

from .conftest import corpus_logs


def _big_file(tmp_path):
    p = tmp_path / "all.log"
    with open(p, "wb") as f:
        for _ in range(3):
            for log in corpus_logs():
                data = log.read_bytes()
                f.write(data if data.endswith(b"\n") else data + b"\n")
    return p


def test_parallel_output_identical(tmp_path, monkeypatch):
    p = _big_file(tmp_path)
    seq = "".join(iter_jsonl(str(p), year=2026)).encode()
    out = tmp_path / "par.jsonl"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        results = list(parallel.run(str(p), year=2026, jobs=2, fd=fd, chunk=64 * 1024))
    finally:
        os.close(fd)
    assert len(results) > 10, "the file should have been cut into many chunks"
    assert out.read_bytes() == seq


def test_parallel_counts_identical(tmp_path, monkeypatch):
    p = _big_file(tmp_path)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 1)
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 64 * 1024)
    a = count(str(p), year=2026, jobs=1).to_dict(50)
    b = count(str(p), year=2026, jobs=2).to_dict(50)
    assert a["lines"] == b["lines"] == a["lines_accounted_for"] == b["lines_accounted_for"]
    assert a["kinds"] == b["kinds"]
    assert a["unknown_templates"] == b["unknown_templates"]


def test_plan_boundaries_are_line_starts(tmp_path):
    p = _big_file(tmp_path)
    data = p.read_bytes()
    spans = parallel.plan(str(p), 64 * 1024)
    assert spans[0][0] == 0 and spans[-1][1] == len(data)
    for (s1, e1, _), (s2, _, _) in zip(spans, spans[1:]):
        assert e1 == s2 and data[s2 - 1:s2] == b"\n"


def test_parallel_year_from_mtime_and_rollover(tmp_path):
    """No --year: the mtime hint applies at the file's start, and a Dec → Jan rollover carries to later chunks."""
    import time as _t

    p = tmp_path / "roll.log"
    with open(p, "w") as f:
        for day, mo in ((30, 12), (31, 12), (1, 1), (2, 1)):
            for i in range(3000):
                f.write(f"INFO {mo:02d}-{day:02d} 10:{i // 60 % 60:02d}:{i % 60:02d} model_runner.py:312] Decode step {i} for req_{day}. Batch size: 1, KV cache usage: 5%\n")
                if i % 500 == 0:
                    f.write(f"INFO {mo:02d}-{day:02d} 10:00:00 scheduler.py:456] Added request req_{day}_{i} to waiting queue. Queue size: 1\n")
    mt = _t.mktime((2026, 1, 3, 12, 0, 0, 0, 0, -1))
    os.utime(p, (mt, mt))
    seq = "".join(iter_jsonl(str(p))).encode()
    out = tmp_path / "par.jsonl"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        results = list(parallel.run(str(p), year=None, jobs=2, fd=fd, chunk=32 * 1024))
    finally:
        os.close(fd)
    assert len(results) > 4
    assert out.read_bytes() == seq
    assert b'"ts":"2025-12-30T10:00:00"' in seq and b'"ts":"2026-01-02T10:00:00"' in seq
