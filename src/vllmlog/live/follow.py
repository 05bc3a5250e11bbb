"""Following a growing log like ``tail -F``, or a stream (stdin, a pipe), in complete lines.

Poll-based (no inotify dependency): each ``poll()`` reads whatever bytes arrived, splits complete
lines and keeps a partial last line until its newline arrives. A file is tracked by identity
(device, inode) and size:

* **rotation by rename** / **replacement**: the path now names another inode → the rest of the old
  file is drained, then the new one is read from its start (a new *generation*);
* **copytruncate** / **truncation**: same inode, size below our offset → read from 0 again;
* **missing file** (not created yet, or between rename and re-create): keep polling.

Line numbers count from 1 in each generation, as ``wc -l`` counts that generation's file.
Limitation shared with ``tail -F``: a truncation followed by more writes than we had read, all
between two polls, cannot be seen (poll often, 0.1 s by default).
"""

from __future__ import annotations

import os
import select
from dataclasses import dataclass, field
from typing import BinaryIO

MAX_LINE = 1 << 20
"""Bytes of one physical line that are kept (the rest of an over-long line is dropped and counted)."""
READ_CHUNK = 1 << 20
"""Bytes asked of ``os.read`` at a time."""


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
        """Read whatever arrived since the last call; never blocks."""
        out: list[Segment] = []
        if self._fd is None:
            if not self._open(out):
                return out
        self._read(out, self.max_bytes_per_poll)
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self.stats.missing_polls += 1
            return out  # renamed away and not yet re-created: keep reading the old inode
        except OSError:
            return out
        if (st.st_dev, st.st_ino) != self._id:
            # rotated by rename / replaced: finish the old file, then start the new one
            self._read(out, None)
            self._end_generation(out)
            self.stats.rotations += 1
            self.stats.events.append(f"{self.path}: file replaced (rotation); reading the new file from its start")
            self._close()
            if self._open(out):
                self._read(out, self.max_bytes_per_poll)
            return out
        if st.st_size < self._pos:
            self._end_generation(out)
            self.stats.truncations += 1
            self.stats.events.append(f"{self.path}: truncated ({st.st_size} < {self._pos} bytes); reading from the start")
            self._pos = 0
            self.generation += 1
            self._split.lineno = 0
            self._new_gen = True
            # a writer without O_APPEND (``vllm serve > log``) keeps writing at its old offset after a
            # copytruncate: the file then starts with a hole that reads as NUL bytes
            self._strip_nul = True
            os.lseek(self._fd, 0, os.SEEK_SET)  # type: ignore[arg-type]
            self._read(out, self.max_bytes_per_poll)
        self._size = st.st_size
        return out

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
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            self.stats.missing_polls += 1
            return False
        st = os.fstat(fd)
        self._fd = fd
        self._id = (st.st_dev, st.st_ino)
        self._pos = 0
        self._size = st.st_size
        self.generation += 1
        self._new_gen = self.generation > 0
        self._split = _LineSplitter(self.stats)
        if self._first_open and self.from_end and st.st_size:
            # start at the end, but number lines as the file numbers them
            n = 0
            while True:
                b = os.read(fd, READ_CHUNK)
                if not b:
                    break
                n += b.count(b"\n")
                self._pos += len(b)
            self._split.lineno = n
            if self._pos and not _ends_with_newline(fd, self._pos):
                self._skip_partial = True  # we are inside a line: drop the rest of it
        self._first_open = False
        if self.generation > 0:
            self.stats.events.append(f"{self.path}: opened (generation {self.generation})")
        return True

    _skip_partial = False
    _new_gen = False
    _strip_nul = False

    def _read(self, out: list[Segment], limit: int | None) -> None:
        fd = self._fd
        if fd is None:
            return
        got = 0
        chunks: list[bytes] = []
        while limit is None or got < limit:
            b = os.read(fd, READ_CHUNK)
            if not b:
                break
            chunks.append(b)
            got += len(b)
        if not chunks:
            return
        data = b"".join(chunks)
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
