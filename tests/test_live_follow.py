"""The follower reads every complete line exactly once across rotation, truncation and replacement."""

from __future__ import annotations

import os
from pathlib import Path

from vllmlog.live.follow import MAX_LINE, FileFollower, StreamFollower

from .conftest import CORPUS

REAL = (CORPUS / "vllm-cpu" / "04-client-aborts.log").read_text(encoding="utf-8").splitlines()


def _texts(segs) -> list[str]:
    return [t for s in segs for _, t in s.lines]


def _append(p: Path, data: str) -> None:
    with open(p, "a", encoding="utf-8") as f:
        f.write(data)


def test_partial_line_waits_for_newline(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    p.write_text(REAL[0] + "\n" + REAL[1][:10])
    f = FileFollower(str(p))
    segs = f.poll()
    assert _texts(segs) == [REAL[0]]
    assert segs[0].lines[0][0] == 1
    assert f.poll() == []
    _append(p, REAL[1][10:] + "\n")
    segs = f.poll()
    assert segs[0].lines == [(2, REAL[1])]


def test_late_file_rename_rotation_copytruncate_replacement(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    f = FileFollower(str(p))
    assert f.poll() == [] and not f.is_open  # the file appears late
    seen: list[str] = []
    p.write_text("\n".join(REAL[:10]) + "\n")
    segs = f.poll()
    seen += _texts(segs)
    assert [n for n, _ in segs[0].lines] == list(range(1, 11))
    # rename rotation: lines written to the old file before the rename are not lost
    _append(p, REAL[10] + "\n" + REAL[11])  # the last one still without its newline
    os.rename(p, tmp_path / "s.log.1")
    p.write_text("\n".join(REAL[12:20]) + "\n")
    segs = f.poll()
    seen += _texts(segs)
    assert seen == REAL[:20]
    assert segs[-1].new_generation and segs[-1].generation == 1 and segs[-1].lines[0][0] == 1
    # copytruncate (after we caught up)
    with open(p, "r+") as fh:
        fh.truncate(0)
    _append(p, "\n".join(REAL[20:25]) + "\n")
    segs = f.poll()
    seen += _texts(segs)
    assert seen == REAL[:25]
    assert segs[-1].generation == 2 and segs[-1].lines[0][0] == 1
    # replaced (new inode, written by a different writer with os.replace)
    tmp = tmp_path / "new"
    tmp.write_text("\n".join(REAL[25:40]) + "\n")
    os.replace(tmp, p)
    segs = f.poll()
    seen += _texts(segs)
    assert seen == REAL[:40]
    assert f.stats.rotations == 2 and f.stats.truncations == 1
    # deleted and re-created later
    p.unlink()
    assert f.poll() == []
    p.write_text(REAL[40] + "\n")
    seen += _texts(f.poll())
    assert seen == REAL[:41]
    assert f.stats.lines_read == 41


def test_from_end_skips_existing_lines_and_keeps_numbering(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    p.write_text("\n".join(REAL[:5]) + "\n" + "half a li")
    f = FileFollower(str(p), from_end=True)
    assert f.poll() == []
    _append(p, "ne\n" + REAL[6] + "\n")
    segs = f.poll()
    assert segs[0].lines == [(7, REAL[6])]


def test_overlong_line_is_truncated_once(tmp_path: Path) -> None:
    p = tmp_path / "s.log"
    f = FileFollower(str(p))
    p.write_bytes(b"x" * (MAX_LINE + 10))
    assert f.poll() == []
    _append(p, "yyy\nnext\n")
    lines = [ln for s in f.poll() for ln in s.lines]
    assert [(n, len(t)) for n, t in lines] == [(1, MAX_LINE), (2, 4)]
    assert f.stats.truncated_lines == 1


def test_stream_follower_reads_pipe_until_eof() -> None:
    r, w = os.pipe()
    s = StreamFollower(r)
    assert s.poll(0.01) == []
    os.write(w, ("\n".join(REAL[:3]) + "\nno newline").encode())
    assert _texts(s.poll(0.5)) == REAL[:3]
    os.close(w)
    assert _texts(s.poll(0.5)) == ["no newline"]
    assert s.eof
    os.close(r)


def test_copytruncate_with_a_non_appending_writer_skips_the_hole(tmp_path: Path) -> None:
    """``vllm serve > log`` (no O_APPEND) keeps writing at its offset after a copytruncate."""
    p = tmp_path / "s.log"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # like a shell's `>` redirection
    os.write(fd, ("\n".join(REAL[:5]) + "\n").encode())
    f = FileFollower(str(p))
    assert _texts(f.poll()) == REAL[:5]
    os.truncate(p, 0)  # logrotate copytruncate
    assert f.poll() == []  # size 0 < offset: noticed
    os.write(fd, (REAL[5] + "\n").encode())  # lands after a hole of NUL bytes
    os.close(fd)
    segs = f.poll()
    assert _texts(segs) == [REAL[5]] and segs[0].lines[0][0] == 1
    assert f.stats.truncations == 1 and f.stats.nul_bytes_skipped > 0
