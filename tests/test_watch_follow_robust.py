"""Issue 15 §3 and §6: the followed path changing type (a directory, a FIFO) never kills the follower or
the watcher, and copytruncate loses and doubles nothing the follower could have seen."""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from pathlib import Path

from vllmlog.live import FileFollower, LiveState, Watcher
from vllmlog.live.follow import FINGERPRINT_BYTES

from .conftest import CORPUS

LIGHT = CORPUS / "vllm-cpu" / "01-startup-and-light-load.log"


def _texts(segs) -> list[str]:
    return [t for s in segs for _, t in s.lines]


def _drain(f: FileFollower, n: int = 3) -> list[str]:
    out: list[str] = []
    for _ in range(n):
        out += _texts(f.poll())
    return out


def test_file_replaced_by_a_directory_and_back(tmp_path: Path) -> None:
    p = tmp_path / "server.log"
    p.write_text("a\nb\n")
    f = FileFollower(str(p))
    assert _drain(f) == ["a", "b"]
    p.unlink()
    p.mkdir()  # IsADirectoryError used to escape poll() and kill watch
    assert _drain(f, 5) == []
    assert f.stats.bad_type >= 1 and not f.is_open
    assert any("directory" in e for e in f.stats.events)
    p.rmdir()
    p.write_text("c\nd\n")
    assert _drain(f) == ["c", "d"]
    assert f.is_open and f.stats.lines_read == 4


def test_started_on_a_directory_waits_for_the_file(tmp_path: Path) -> None:
    p = tmp_path / "d"
    p.mkdir()
    f = FileFollower(str(p))
    assert _drain(f) == [] and f.stats.bad_type == 3 and len([e for e in f.stats.events if "directory" in e]) == 1
    p.rmdir()
    p.write_text("x\n")
    assert _drain(f) == ["x"]


def test_fifo_is_read_as_a_stream(tmp_path: Path) -> None:
    p = tmp_path / "pipe"
    os.mkfifo(p)
    f = FileFollower(str(p))
    assert _drain(f) == []  # no writer yet: neither blocks nor raises ('Illegal seek' before)
    w = os.open(p, os.O_WRONLY)
    os.write(w, b"one\ntw")
    assert _drain(f) == ["one"]
    os.write(w, b"o\n")
    os.close(w)  # the writer goes away …
    assert _drain(f) == ["two"]
    w = os.open(p, os.O_WRONLY)  # … and another comes
    os.write(w, b"three\n")
    os.close(w)
    assert _drain(f) == ["three"]
    assert f.stats.errors == 0 and f.stats.lines_read == 3


def test_watcher_survives_type_changes(tmp_path: Path) -> None:
    p = tmp_path / "server.log"
    lines = LIGHT.read_text().splitlines(keepends=True)
    p.write_text("".join(lines[:50]))
    st = LiveState(str(p), year=2026)
    w = Watcher(FileFollower(str(p)), st, poll_interval=0.01, flush_after_s=0.02)
    stop = threading.Event()
    th = threading.Thread(target=w.run, args=(stop,), daemon=True)
    th.start()

    def wait(pred, what: str) -> None:
        t0 = time.monotonic()
        while not pred():
            assert th.is_alive(), "the watcher died"
            assert time.monotonic() - t0 < 20, what
            time.sleep(0.01)

    wait(lambda: w.health.lines_read == 50, "first lines")
    p.unlink()
    p.mkdir()
    wait(lambda: w.source.stats.bad_type >= 3, "directory seen")
    p.rmdir()
    fifo = p
    os.mkfifo(fifo)
    wait(lambda: w.source.is_open, "fifo opened")
    fd = os.open(fifo, os.O_WRONLY)
    os.write(fd, "".join(lines[50:80]).encode())
    os.close(fd)
    wait(lambda: w.health.lines_read == 80, "fifo lines")
    fifo.unlink()
    p.write_text("".join(lines[80:]))
    wait(lambda: w.health.lines_read == len(lines), "file back")
    stop.set()
    th.join(10)
    assert not th.is_alive()
    assert sum(st.lines.values()) == len(lines)


def _copytruncate_run(tmp_path: Path, seed: int, append: bool) -> tuple[list[str], list[str], FileFollower]:
    """100 truncations: lines written, polled, the file truncated and regrown (often past the old offset)
    before the next poll; some truncations land in the middle of a line the writer is writing."""
    rnd = random.Random(seed)
    p = tmp_path / f"c{seed}{append}.log"
    p.write_bytes(b"")
    flags = os.O_WRONLY | (os.O_APPEND if append else 0)
    fd = os.open(p, flags)
    f = FileFollower(str(p))
    want: list[str] = []
    got: list[str] = []
    n = 0

    def line() -> bytes:
        nonlocal n
        n += 1
        return f"INFO 01-01 00:00:00 [x.py:1] line {n} {'x' * rnd.randint(0, 300)}".encode()

    for _ in range(100):
        for _ in range(rnd.randint(1, 40)):
            b = line()
            os.write(fd, b + b"\n")
            want.append(b.decode())
        mid = rnd.random() < 0.3
        if mid:  # the writer is half-way through a line when the file is truncated
            b = line()
            k = rnd.randint(1, len(b) - 1)
            os.write(fd, b[:k])
            want.append(b.decode())
        got += _texts(f.poll())  # caught up: what the copy has, we have
        os.ftruncate(fd, 0)  # logrotate's copytruncate
        if not append:  # '> log' keeps its offset: the rest lands after a hole of NULs
            pass
        if mid:
            os.write(fd, b[k:] + b"\n")
        # regrow past the old offset before the next poll (the case that lost 1,578 of 38,476 lines)
        for _ in range(rnd.randint(0, 80)):
            b = line()
            os.write(fd, b + b"\n")
            want.append(b.decode())
        if rnd.random() < 0.5:
            got += _texts(f.poll())
    got += _drain(f)
    got += _texts(f.close())
    os.close(fd)
    return want, got, f


def test_copytruncate_100_times_nothing_lost_nothing_doubled(tmp_path: Path) -> None:
    for seed in range(3):
        want, got, f = _copytruncate_run(tmp_path, seed, append=True)
        assert got == want, (seed, len(want), len(got))
        assert f.stats.truncations >= 90  # a truncation + regrow to the same first bytes is impossible to see
        assert f.stats.joined_lines > 0


def test_copytruncate_non_appending_writer(tmp_path: Path) -> None:
    for seed in range(2):
        want, got, f = _copytruncate_run(tmp_path, seed, append=False)
        assert got == want, (seed, len(want), len(got))
        assert f.stats.nul_bytes_skipped > 0


def test_regrown_past_offset_is_seen_by_the_fingerprint(tmp_path: Path) -> None:
    p = tmp_path / "x.log"
    p.write_text("INFO first line of the old file\n")
    f = FileFollower(str(p))
    assert _drain(f, 1) == ["INFO first line of the old file"]
    with open(p, "r+") as fh:  # truncate and regrow, longer than before, between two polls
        fh.truncate(0)
        fh.write("WARNING a new first line, longer than the whole old file was\nsecond\n")
    assert _drain(f, 1) == ["WARNING a new first line, longer than the whole old file was", "second"]
    assert f.stats.truncations == 1 and FINGERPRINT_BYTES >= 64


def test_watch_cli_survives_the_file_becoming_a_directory(tmp_path: Path) -> None:
    """(A directory given at start is refused with a one-line error, exit 2: that is a usage error.)"""
    import subprocess
    import sys

    p = tmp_path / "server.log"
    p.write_text("INFO 01-01 00:00:00 [x.py:1] hello\n")
    proc = subprocess.Popen([sys.executable, "-m", "vllmlog", "watch", str(p), "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert b"watching" in proc.stderr.readline()  # started (and past its start-up check of the path)
        time.sleep(0.5)
        p.unlink()
        p.mkdir()
        time.sleep(1.0)
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        shutil.rmtree(p)
        p.write_text("INFO 01-01 00:00:01 [x.py:1] back\n")
        time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
    finally:
        proc.terminate()
        proc.wait(10)
