"""Bad input never raises a traceback, never hangs, never silently drops a line."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllmlog.errors import InputError
from vllmlog.parsing.parser import LineParser
from vllmlog.reader import ParseStats, parse

CLI = [sys.executable, "-m", "vllmlog"]


def run(*args, input=None):
    return subprocess.run(CLI + list(args), capture_output=True, input=input, timeout=120)


def test_missing_file_exit_2(tmp_path):
    r = run("parse", str(tmp_path / "nope.log"))
    assert r.returncode == 2
    assert r.stderr.decode().startswith("error: ") and "Traceback" not in r.stderr.decode()


def test_directory_exit_2(tmp_path):
    r = run("parse", str(tmp_path))
    assert r.returncode == 2
    assert "is a directory" in r.stderr.decode()


def test_binary_exit_2(tmp_path):
    p = tmp_path / "x.bin"
    p.write_bytes(bytes(range(256)) * 100)
    r = run("parse", str(p))
    assert r.returncode == 2 and "binary" in r.stderr.decode()


def test_empty_file(tmp_path):
    p = tmp_path / "empty.log"
    p.write_bytes(b"")
    r = run("parse", "--stats", "--json", str(p))
    assert r.returncode == 0
    assert b'"lines": 0' in r.stdout


def test_invalid_utf8_counted(tmp_path):
    p = tmp_path / "bad.log"
    p.write_bytes(b"INFO 03-25 10:15:23 scheduler.py:456] Added request req_\xff\xfe to waiting queue. Queue size: 1\nplain\n")
    st = ParseStats()
    evs = list(parse(str(p), year=2026, stats=st))
    assert len(evs) == 2 and st.inputs[0].invalid_utf8_lines == 1


def test_truncated_gzip_reported(tmp_path):
    body = b"".join(b"INFO 03-25 10:15:%02d scheduler.py:456] Added request req_%d to waiting queue. Queue size: 1\n" % (i % 60, i) for i in range(20000))
    data = gzip.compress(body)
    p = tmp_path / "t.log.gz"
    p.write_bytes(data[: len(data) // 2])
    st = ParseStats()
    evs = list(parse(str(p), year=2026, stats=st))
    assert st.inputs[0].incomplete
    assert 0 < len(evs) < 20000
    assert st.lines_in_events == st.lines
    r = run("parse", "--stats", str(p))
    assert r.returncode == 0 and b"incomplete" in r.stdout


def test_huge_single_line_is_truncated_not_loaded(tmp_path):
    p = tmp_path / "huge.log"
    with open(p, "wb") as f:
        f.write(b"INFO 03-25 10:15:23 x.py:1] start\n")
        f.write(b"A" * (50 * 1024 * 1024))
        f.write(b"\nINFO 03-25 10:15:24 x.py:1] end\n")
    st = ParseStats()
    evs = list(parse(str(p), year=2026, stats=st))
    assert [e.line for e in evs] == [1, 2, 3]
    assert st.inputs[0].truncated_lines == 1
    assert len(evs[1].text) < 100_000


def test_stdin(tmp_path):
    r = run("parse", "-", input=b"INFO 03-25 10:15:23 model_runner.py:312] Decode step 1 for req_001. Batch size: 8, KV cache usage: 45%\n")
    assert r.returncode == 0
    assert b'"kind":"decode_step"' in r.stdout and b'"kv_cache_usage":0.45' in r.stdout


def test_crlf_and_lone_cr(tmp_path):
    p = tmp_path / "crlf.log"
    p.write_bytes(b"INFO 03-25 10:15:23 a.py:1] one\r\nLoading: 10%|#  | 1/10\rLoading: 100%|###| 10/10\nINFO 03-25 10:15:24 a.py:1] two\r\n")
    evs = list(parse(str(p), year=2026))
    assert [(e.line, e.line_end) for e in evs] == [(1, 1), (2, 2), (3, 3)]
    assert evs[1].kind == "progress" and evs[1].fields["percent"] == 100


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=30))
def test_random_bytes_never_raise(chunks):
    p = LineParser("x", 2026)
    lines = [(i + 1, c.decode("utf-8", "replace").replace("\n", " ")) for i, c in enumerate(chunks)]
    evs = p.feed(lines) + p.close()
    covered = sorted(n for e in evs for n in range(e.line, e.line_end + 1))
    assert covered == list(range(1, len(lines) + 1))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=30))
def test_random_text_never_raises(texts):
    p = LineParser("x", 2026)
    lines = [(i + 1, t.replace("\n", " ")) for i, t in enumerate(texts)]
    evs = p.feed(lines) + p.close()
    assert sum(e.line_end - e.line + 1 for e in evs) == len(lines)


def test_dec_jan_rollover():
    p = LineParser("x", 2025)
    evs = p.feed([(1, "INFO 12-31 23:59:59 a.py:1] a"), (2, "INFO 01-01 00:00:01 a.py:1] b")]) + p.close()
    assert evs[0].ts.year == 2025 and evs[1].ts.year == 2026


def test_wrappers_stripped():
    lines = [
        "vllm-1  | INFO 03-25 10:15:23 model_runner.py:312] Decode step 1 for req_001. Batch size: 8, KV cache usage: 45%",
        "2026-03-25T10:15:23.123456789Z INFO 03-25 10:15:23 model_runner.py:312] Decode step 2 for req_001. Batch size: 8, KV cache usage: 46%",
        "\x1b[36m(RayWorkerWrapper pid=123, ip=10.0.0.2)\x1b[0m INFO 03-25 10:15:23 worker.py:1] hello [repeated 6x across cluster]",
        "\x1b[1;36m(VllmWorker rank=0 pid=77)\x1b[0;0m INFO 03-25 10:15:23 [gpu_worker.py:1] Available KV cache memory: 1.5 GiB",
    ]
    p = LineParser("x", 2026)
    evs = p.feed(list(enumerate(lines, 1))) + p.close()
    assert [e.kind for e in evs] == ["decode_step", "decode_step", "log", "kv_cache_memory"]
    assert evs[2].process == "RayWorkerWrapper pid=123, ip=10.0.0.2" and evs[2].fields["repeated"] == 6
    assert evs[3].process == "VllmWorker rank=0 pid=77"
