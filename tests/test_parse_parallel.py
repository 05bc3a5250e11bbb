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


# ------------------------------------------------------------------ -j N equals -j 1 on adversarial files
def _par(path, tmp_path, *, year=2026, chunk=16 * 1024, jobs=2):
    out = tmp_path / "par.jsonl"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        results = list(parallel.run(str(path), year=year, jobs=jobs, fd=fd, chunk=chunk))
    finally:
        os.close(fd)
    return out.read_bytes(), results


def _adversarial(path, n=6000, seed=3):
    """Lines that sit on the chunk-boundary rules: tqdm \\r updates whose visible part has no envelope, invalid
    and leap-day dates, lines without a timestamp (they inherit one), JSON records of another year, a Dec → Jan
    rollover inside a chunk, ANSI colours, tracebacks."""
    import random

    rnd = random.Random(seed)
    mo, dd = 12, 30
    out = []
    for i in range(n):
        if i == n // 3:
            mo, dd = 1, 2  # rollover mid-file; the next safe boundary is in another month
        if i == n // 2:
            mo, dd = 3, 4
        ts = f"{mo:02d}-{dd:02d} 10:{i // 60 % 60:02d}:{i % 60:02d}"
        x = rnd.random()
        if x < 0.08:
            out.append(f"INFO {ts} [loader.py:10] Loading shards 10%\r  30%|███       | 3/10 [00:01<00:02]")
        elif x < 0.12:
            out.append(f"INFO 02-29 10:00:00 [a.py:1] Added request leap-{i}.")
        elif x < 0.15:
            out.append(f"INFO 13-45 25:61:61 [a.py:1] Added request bad-{i}.")
        elif x < 0.35:
            out.append(f'INFO:     127.0.0.1:{40000 + i} - "POST /v1/completions HTTP/1.1" 200 OK')
        elif x < 0.38:
            out.append('{"timestamp": "2024-06-01 10:00:00,123", "level": "INFO", "message": "Added request j-%d."}' % i)
        elif x < 0.41:
            out.append(f"\x1b[36m(RayWorkerVllm pid=7)\x1b[0m INFO {ts} [w.py:3] Added request ray-{i}.")
        elif x < 0.44:
            out += [f"ERROR {ts} [core.py:9] Traceback (most recent call last):",
                    f'ERROR {ts} [core.py:9]   File "x.py", line 1, in f',
                    f"ERROR {ts} [core.py:9] RuntimeError: boom {i}"]
        elif x < 0.46:
            out.append("  30%|███       | 3/10 [00:01<00:02]")
        else:
            out.append(f"INFO {ts} [async_llm.py:578] Added request cmpl-{i}-0-1a2b3c4d.")
    path.write_text("\n".join(out) + "\n")


def _seq(path, year=2026, pure=False, monkeypatch=None):
    from vllmlog.parsing import fast

    if pure:
        monkeypatch.setattr(fast, "scan", None)
        monkeypatch.setattr(fast, "AVAILABLE", False)
    return "".join(iter_jsonl(str(path), year=year)).encode()


def test_parallel_adversarial_equals_sequential(tmp_path, monkeypatch):
    p = tmp_path / "adv.log"
    _adversarial(p)
    for year in (2026, None):
        seq = _seq(p, year)
        par, results = _par(p, tmp_path, year=year)
        assert len(results) > 8
        assert par == seq, f"year={year}"
        assert par.count(b'"ts":null') == seq.count(b'"ts":null')


def test_parallel_adversarial_pure_python(tmp_path, monkeypatch):
    p = tmp_path / "adv.log"
    _adversarial(p, seed=5)
    seq_c = _seq(p)
    seq = _seq(p, pure=True, monkeypatch=monkeypatch)
    par, results = _par(p, tmp_path)
    assert len(results) > 8 and par == seq == seq_c


def test_parallel_start_state_corrected(tmp_path):
    """A chunk whose guessed start year is wrong (rollover inside the chunk before it, JSON record of another
    year) is parsed again from the real state: same bytes as one process."""
    p = tmp_path / "years.log"
    lines = []
    for i in range(4000):
        mo, dd = (12, 31) if i < 1000 else (1, 1) if i < 1100 else (2, 1) if i < 3000 else (2, 2)
        if i == 3500:
            lines.append('{"timestamp": "2030-02-02 10:00:00,000", "level": "INFO", "message": "Added request j."}')
        lines.append(f"INFO {mo:02d}-{dd:02d} 10:{i // 60 % 60:02d}:{i % 60:02d} [a.py:1] Added request r{i}.")
    p.write_text("\n".join(lines) + "\n")
    seq = _seq(p, 2026)
    par, results = _par(p, tmp_path, chunk=8 * 1024)
    assert len(results) > 10 and par == seq
    assert b'"ts":"2027-02-01T10:' in seq and b'"ts":"2030-02-02T10:' in seq


def test_parallel_counts_adversarial(tmp_path, monkeypatch):
    p = tmp_path / "adv.log"
    _adversarial(p, seed=7)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 1)
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 16 * 1024)
    a = count(str(p), year=2026, jobs=1).to_dict(50)
    b = count(str(p), year=2026, jobs=2).to_dict(50)
    assert a == b


def test_parallel_survives_rotation(tmp_path):
    """The file is read from the descriptor opened at the start: renaming it and writing a new one mid-parse
    changes nothing (it used to reopen the path in each worker)."""
    p = _big_file(tmp_path)
    seq = "".join(iter_jsonl(str(p), year=2026)).encode()
    out = tmp_path / "par.jsonl"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        it = parallel.run(str(p), year=2026, jobs=2, fd=fd, chunk=64 * 1024)
        next(it)
        os.rename(p, tmp_path / "all.log.1")
        p.write_text("INFO 01-01 00:00:00 [a.py:1] rotated\n")
        rest = list(it)
    finally:
        os.close(fd)
    assert len(rest) > 5
    assert out.read_bytes() == seq


def test_parallel_binary_check(tmp_path, monkeypatch):
    """The parallel path refuses a binary file like the one-process path (it used to skip the check)."""
    import pytest

    from vllmlog.errors import InputError
    from vllmlog.reader import write_jsonl

    p = tmp_path / "bin.log"
    p.write_bytes(b"\x00\x01\x02binary\x00" * 4096 + b"INFO 01-01 00:00:00 [a.py:1] x\n" * 3000)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 1)
    errs = []
    for jobs in (1, 2):
        fd = os.open(tmp_path / f"o{jobs}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            with pytest.raises(InputError) as ei:
                write_jsonl([str(p)], fd, year=2026, jobs=jobs)
            errs.append(str(ei.value))
        finally:
            os.close(fd)
        assert (tmp_path / f"o{jobs}").read_bytes() == b""
    assert errs[0] == errs[1]
