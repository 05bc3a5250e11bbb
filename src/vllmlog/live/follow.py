"""Following a growing log like ``tail -F``, or a stream (stdin, a pipe), in complete lines.

Poll-based (no inotify dependency): each ``poll()`` reads whatever bytes arrived, splits complete
lines and keeps a partial last line until its newline arrives. A file is tracked by identity
(device, inode), size and a fingerprint of its first bytes (as Vector and Filebeat do):

* **rotation by rename** / **replacement**: the path now names another inode → the rest of the old
  file is drained, then the new one is read from its start (a new *generation*);
* **copytruncate** / **truncation**: same inode, and the size is below our offset *or* the first
  bytes (up to ``FINGERPRINT_BYTES``) changed — a file truncated and regrown past our offset between
  two polls → read from 0 again, nothing lost. A line the writer was in the middle of when the file
  was truncated (its first part read, no newline yet) continues in the truncated file: its two parts
  are joined into one line, not counted twice;
* **missing file** (not created yet, or between rename and re-create): keep polling;
* **not a regular file** (a directory, a socket …) where the file was: logged, counted
  (``FollowStats.bad_type``), and polled until a file is back (``tail -F`` does the same); a **FIFO** is
  read as a stream; a read error is logged, counted (``FollowStats.errors``) and the file reopened at the
  offset it was read to when it is still the same file.

Line numbers count from 1 in each generation, as ``wc -l`` counts that generation's file.
What remains impossible (docs/watch.md): lines logrotate's copytruncate writes between its copy and its
truncate are in neither file we can see; a truncation that rewrites the same first bytes and grows past
our offset between two polls looks like growth.
"""

from __future__ import annotations

import os
import select
import stat as stat_mod
from dataclasses import dataclass, field
from typing import BinaryIO

MAX_LINE = 1 << 20
"""Bytes of one physical line that are kept (the rest of an over-long line is dropped and counted)."""
READ_CHUNK = 1 << 20
"""Bytes asked of ``os.read`` at a time."""
FINGERPRINT_BYTES = 1024
"""First bytes of a file compared at each poll to see a truncation the size cannot show."""


@dataclass(slots=True)
class Segment:
    """Complete lines read from one generation of the input."""

    generation: int
    """0 for the first file (or the stream), +1 at each rotation / truncation / replacement."""
    lines: list[tuple[int, str]]
    """``(line_number, text)`` with the newline removed; numbers count from 1 per generation."""
    new_generation: bool = False
    """True when these are the first lines after a rotation / truncation (parser state restarts)."""


@dataclass
class FollowStats:
    """What the follower did (exported as the watcher's health metrics)."""

    bytes_read: int = 0
    lines_read: int = 0
    rotations: int = 0
    """The path began to name another file (rename rotation, replacement, re-creation)."""
    truncations: int = 0
    """The file shrank below the read offset (copytruncate, ``> file``)."""
    missing_polls: int = 0
    truncated_lines: int = 0
    """Lines longer than ``MAX_LINE`` bytes (kept truncated)."""
    invalid_utf8_lines: int = 0
    nul_bytes_skipped: int = 0
    """NUL bytes at the start of a truncated file (the hole a non-appending writer leaves)."""
    bad_type: int = 0
    """Polls that found something other than a regular file or a FIFO at the path (a directory …)."""
    errors: int = 0
    """Read errors (the file was reopened)."""
    joined_lines: int = 0
    """Lines cut by a truncation mid-write whose two parts were joined."""
    events: list[str] = field(default_factory=list)
    """Recent human-readable notes (rotation, truncation, file appeared); the caller drains them."""


class _LineSplitter:
    """Bytes in, complete decoded lines out; remembers the partial last line."""

    __slots__ = ("partial", "skipping", "lineno", "stats")

    def __init__(self, stats: FollowStats) -> None:
        self.partial = b""
        self.skipping = False
        self.lineno = 0
        self.stats = stats

    def feed(self, data: bytes) -> list[tuple[int, str]]:
        """Complete lines in ``data`` (joined to the partial line kept from before)."""
        out: list[tuple[int, str]] = []
        if not data:
            return out
        parts = data.split(b"\n")
        rest = parts.pop()
        if parts:
            if self.skipping:  # an over-long line ends here: keep its first MAX_LINE bytes
                parts[0] = self.partial
                self.skipping = False
            elif self.partial:
                parts[0] = self.partial + parts[0]
            self.partial = b""
            line = self._line
            for raw in parts:
                out.append(line(raw))
        if rest and not self.skipping:
            p = self.partial + rest if self.partial else rest
            if len(p) > MAX_LINE:
                self.partial = p[:MAX_LINE]
                self.skipping = True
                self.stats.truncated_lines += 1
            else:
                self.partial = p
        return out

    def _line(self, raw: bytes) -> tuple[int, str]:
        self.lineno += 1
        if len(raw) > MAX_LINE:  # arrived whole in one read
            raw = raw[:MAX_LINE]
            self.stats.truncated_lines += 1
        try:
            s = raw.decode("utf-8")
        except UnicodeDecodeError:
            s = raw.decode("utf-8", "replace")
            self.stats.invalid_utf8_lines += 1
        return self.lineno, s

    def flush(self) -> list[tuple[int, str]]:
        """The partial last line as a line of its own (end of a generation / of the stream)."""
        if not self.partial:
            self.skipping = False
            return []
        raw, self.partial, self.skipping = self.partial, b"", False
        return [self._line(raw)]


class FileFollower:
    """Follow one path across rotation, truncation, late creation and replacement."""

    def __init__(self, path: str, *, from_end: bool = False, max_bytes_per_poll: int = 1 << 20) -> None:
        self.path = path
        self.from_end = from_end
        self.max_bytes_per_poll = max_bytes_per_poll
        self.stats = FollowStats()
        self.generation = -1
        self._fd: int | None = None
        self._id: tuple[int, int] | None = None
        self._pos = 0
        self._split = _LineSplitter(self.stats)
        self._first_open = True
        self._size = 0

    # ------------------------------------------------------------------ public
    @property
    def lag_bytes(self) -> int:
        """Bytes in the file beyond what was read (as of the last poll)."""
        return max(0, self._size - self._pos)

    @property
    def is_open(self) -> bool:
        """Whether a file is currently being followed."""
        return self._fd is not None

    def poll(self) -> list[Segment]:
        """Read whatever arrived since the last call; never blocks, never raises on the file's account."""
        out: list[Segment] = []
        try:
            self._poll(out)
        except OSError as exc:  # EIO, a file turned into a directory between stat and read, …
            self.stats.errors += 1
            self._note(f"{self.path}: read error ({exc.strerror or exc}); reopening")
            self._resume = (self._id, self._pos, self._fp, self.generation) if self._id is not None else None
            self._close()
        return out

    def _poll(self, out: list[Segment]) -> None:
        if self._fd is None:
            if self._open(out):
                self._read(out, self.max_bytes_per_poll)
            return
        try:
            st = os.stat(self.path)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                self.stats.missing_polls += 1
            self._read(out, self.max_bytes_per_poll)  # renamed away, not yet re-created: read the old inode
            return
        if (st.st_dev, st.st_ino) != self._id or not (stat_mod.S_ISREG(st.st_mode) or stat_mod.S_ISFIFO(st.st_mode)):
            # rotated by rename / replaced: finish the old file, then start the new one
            self._read(out, None)
            self._end_generation(out)
            self.stats.rotations += 1
            self._note(f"{self.path}: file replaced (rotation); reading the new file from its start")
            self._close()
            if self._open(out):
                self._read(out, self.max_bytes_per_poll)
            return
        # checked before reading: a file truncated and regrown past our offset must not be read from that
        # offset (the middle of the new content)
        if not self._fifo and (st.st_size < self._pos or not self._same_head()):
            why = f"{st.st_size} < {self._pos} bytes" if st.st_size < self._pos else "its first bytes changed"
            carry = self._split.partial if not self._split.skipping else b""
            self._split.partial = b""
            self._end_generation(out)
            self.stats.truncations += 1
            self._note(f"{self.path}: truncated ({why}); reading from the start")
            self._pos = 0
            self._fp = b""
            self.generation += 1
            self._split.lineno = 0
            self._new_gen = True
            if carry:  # the writer was mid-line: the rest of that line is the truncated file's first bytes
                self._split.partial = carry
                self._carry = True
            # a writer without O_APPEND (``vllm serve > log``) keeps writing at its old offset after a
            # copytruncate: the file then starts with a hole that reads as NUL bytes
            self._strip_nul = True
            os.lseek(self._fd, 0, os.SEEK_SET)
        self._read(out, self.max_bytes_per_poll)
        self._size = max(st.st_size, self._pos)

    def _same_head(self) -> bool:
        """Whether the file still starts with the bytes we read from its start."""
        fp = self._fp
        if not fp or self._fd is None:
            return True
        return os.pread(self._fd, len(fp), 0) == fp

    def _note(self, msg: str) -> None:
        ev = self.stats.events
        ev.append(msg)
        del ev[:-100]

    def close(self) -> list[Segment]:
        """Stop following; return the partial last line, if any, as a final segment."""
        out: list[Segment] = []
        if self._fd is not None:
            self._end_generation(out)
            self._close()
        return out

    # ------------------------------------------------------------------ internals
    def _open(self, out: list[Segment]) -> bool:
        try:
            # O_NONBLOCK: opening a FIFO with no writer must not block the loop
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            self.stats.missing_polls += 1
            return False
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            return False
        if not (stat_mod.S_ISREG(st.st_mode) or stat_mod.S_ISFIFO(st.st_mode)):
            os.close(fd)
            self.stats.bad_type += 1
            if self._bad_type_noted != st.st_mode:
                self._bad_type_noted = st.st_mode
                kind = "a directory" if stat_mod.S_ISDIR(st.st_mode) else "not a regular file"
                self._note(f"{self.path}: is {kind}; waiting for a file to come back")
            return False
        self._bad_type_noted = 0
        self._fifo = stat_mod.S_ISFIFO(st.st_mode)
        self._fd = fd
        self._id = (st.st_dev, st.st_ino)
        resume, self._resume = self._resume, None
        if resume is not None and not self._fifo and resume[0] == self._id and st.st_size >= resume[1]:
            # reopened after a read error: the same file, not truncated → carry on where we were
            self._pos, self._fp, self.generation = resume[1], resume[2], resume[3]
            if self._same_head():
                os.lseek(fd, self._pos, os.SEEK_SET)
                self._size = st.st_size
                return True
        self._pos = 0
        self._fp = b""
        self._size = st.st_size
        self.generation += 1
        self._new_gen = self.generation > 0
        self._split = _LineSplitter(self.stats)
        if self._first_open and self.from_end and st.st_size and not self._fifo:
            # start at the end, but number lines as the file numbers them
            n = 0
            while True:
                b = os.read(fd, READ_CHUNK)
                if not b:
                    break
                if len(self._fp) < FINGERPRINT_BYTES:
                    self._fp += b[: FINGERPRINT_BYTES - len(self._fp)]
                n += b.count(b"\n")
                self._pos += len(b)
            self._split.lineno = n
            if self._pos and not _ends_with_newline(fd, self._pos):
                self._skip_partial = True  # we are inside a line: drop the rest of it
        self._first_open = False
        if self.generation > 0:
            self._note(f"{self.path}: opened (generation {self.generation})")
        return True

    _skip_partial = False
    _new_gen = False
    _strip_nul = False
    _fifo = False
    _carry = False
    _fp = b""
    _resume: tuple | None = None  # type: ignore[type-arg]
    _bad_type_noted = 0

    def _read(self, out: list[Segment], limit: int | None) -> None:
        fd = self._fd
        if fd is None:
            return
        got = 0
        chunks: list[bytes] = []
        while limit is None or got < limit:
            try:
                b = os.read(fd, READ_CHUNK)
            except BlockingIOError:  # a FIFO with a writer and nothing written yet
                break
            if not b:
                break
            chunks.append(b)
            got += len(b)
        if not chunks:
            return
        data = b"".join(chunks)
        if len(self._fp) < FINGERPRINT_BYTES and self._pos == len(self._fp) and not self._fifo:
            self._fp += data[: FINGERPRINT_BYTES - len(self._fp)]
        self._pos += len(data)
        if self._pos > self._size:
            self._size = self._pos
        self.stats.bytes_read += len(data)
        if self._strip_nul:
            stripped = data.lstrip(b"\x00")
            self.stats.nul_bytes_skipped += len(data) - len(stripped)
            data = stripped
            if not data:
                return
            self._strip_nul = False
        if self._carry:
            self._carry = False
            self.stats.joined_lines += 1
        if self._skip_partial:
            i = data.find(b"\n")
            if i < 0:
                return
            data = data[i + 1 :]
            self._skip_partial = False
            self._split.lineno += 1
        lines = self._split.feed(data)
        self._emit(out, lines)

    def _emit(self, out: list[Segment], lines: list[tuple[int, str]]) -> None:
        if not lines:
            return
        self.stats.lines_read += len(lines)
        if out and out[-1].generation == self.generation:
            out[-1].lines.extend(lines)
        else:
            out.append(Segment(self.generation, lines, self._new_gen))
            self._new_gen = False

    def _end_generation(self, out: list[Segment]) -> None:
        self._emit(out, self._split.flush())
        self._skip_partial = False

    def _close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd = None
        self._id = None


def _ends_with_newline(fd: int, pos: int) -> bool:
    try:
        return os.pread(fd, 1, pos - 1) == b"\n"
    except OSError:
        return True


class StreamFollower:
    """Read a stream (stdin, a pipe) without blocking: ``poll(timeout)`` returns the lines that arrived."""

    def __init__(self, stream: BinaryIO | int, *, max_bytes_per_poll: int = 1 << 20) -> None:
        self.fd = stream if isinstance(stream, int) else stream.fileno()
        self.max_bytes_per_poll = max_bytes_per_poll
        self.stats = FollowStats()
        self.generation = 0
        self.eof = False
        self._split = _LineSplitter(self.stats)

    @property
    def lag_bytes(self) -> int:
        """Unknown for a stream: always 0."""
        return 0

    def poll(self, timeout: float = 0.0) -> list[Segment]:
        """Lines that arrived (waits up to ``timeout`` seconds for the first byte)."""
        if self.eof:
            return []
        got = 0
        chunks: list[bytes] = []
        wait = timeout
        while got < self.max_bytes_per_poll:
            try:
                r, _, _ = select.select([self.fd], [], [], wait)
            except (OSError, ValueError):
                r = [self.fd]
            if not r:
                break
            b = os.read(self.fd, READ_CHUNK)
            if not b:
                self.eof = True
                break
            chunks.append(b)
            got += len(b)
            wait = 0.0
        lines = self._split.feed(b"".join(chunks)) if chunks else []
        self.stats.bytes_read += got
        if self.eof:
            lines += self._split.flush()
        self.stats.lines_read += len(lines)
        return [Segment(0, lines)] if lines else []

    def close(self) -> list[Segment]:
        """The partial last line, if any."""
        lines = self._split.flush()
        self.stats.lines_read += len(lines)
        return [Segment(0, lines)] if lines else []
