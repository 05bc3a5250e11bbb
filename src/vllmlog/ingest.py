"""Reading inputs: files, ``-`` for stdin, gzip; bad input becomes a clear error or a counted skip.

Lines are numbered as ``wc -l`` and editors number them: only ``\\n`` ends a line (a lone ``\\r``
inside a line does not). Memory stays flat: a line longer than ``MAX_LINE`` bytes is read in
pieces and kept truncated.
"""

from __future__ import annotations

import gzip
import os
import stat
import sys
import zlib
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterator

from .errors import InputError

MAX_LINE = 1 << 20  # bytes of one physical line that are kept; the rest is skipped and counted
_SNIFF = 8192


@dataclass
class InputStats:
    """What happened while reading one input."""

    path: str
    lines: int = 0
    bytes: int = 0
    invalid_utf8_lines: int = 0
    truncated_lines: int = 0
    truncated_bytes: int = 0
    gzip: bool = False
    incomplete: str | None = None
    """Set when the input ended early (truncated gzip, read error): what happened."""
    skipped: str | None = None
    """Set when the input could not be read at all and was skipped from a list (missing, binary, …): why."""
    notes: list[str] = field(default_factory=list)


def check_path(path: str) -> None:
    """Raise ``InputError`` unless ``path`` is ``-`` or a readable regular file (or FIFO)."""
    if path == "-":
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file", hint="check the path; use - to read standard input") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path}: is a directory", hint=f"pass the log files inside it, e.g. {path.rstrip('/')}/*.log")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        raise InputError(f"{path}: not a regular file")


def _open(path: str) -> tuple[BinaryIO, bool]:
    if path == "-":
        raw: BinaryIO = sys.stdin.buffer
    else:
        try:
            raw = open(path, "rb")  # noqa: SIM115
        except OSError as exc:
            raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None
    head = raw.peek(_SNIFF)[:_SNIFF] if hasattr(raw, "peek") else b""
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb"), True  # type: ignore[return-value]
    try:
        check_head(path, head)
    except InputError:
        raw.close() if path != "-" else None
        raise
    return raw, False


def check_head(path: str, head: bytes) -> None:
    """Raise ``InputError`` when the first bytes of a plain input look like a binary file."""
    if _looks_binary(head):
        raise InputError(
            f"{path}: looks like a binary file, not a text log",
            hint="pass the vLLM server's text output (stdout/stderr capture), plain or .gz",
        )


def _looks_binary(head: bytes) -> bool:
    # a leading NUL run is the hole a copytruncate leaves under a writer without O_APPEND: the log follows
    head = head.lstrip(b"\x00")
    if not head:
        return False
    if b"\x00" in head:
        return True
    ctrl = sum(1 for b in head if b < 9 or 13 < b < 27 or 27 < b < 32)
    return ctrl > len(head) * 0.10


def read_lines(path: str, stats: InputStats | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` for every physical line of an input (``\\n`` removed)."""
    check_path(path)
    st = stats if stats is not None else InputStats(path)
    f, is_gz = _open(path)
    st.gzip = is_gz
    n = 0
    readline = f.readline
    try:
        if is_gz:
            sniffed = False
        while True:
            try:
                b = readline(MAX_LINE)
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                st.incomplete = f"compressed stream ends early or is corrupt ({type(exc).__name__}); read {n} lines"
                break
            except OSError as exc:
                st.incomplete = f"read error: {exc}"
                break
            if not b:
                break
            if is_gz and not sniffed:
                sniffed = True
                if _looks_binary(b[:_SNIFF]):
                    raise InputError(f"{path}: decompresses to binary data, not a text log")
            st.bytes += len(b)
            if len(b) >= MAX_LINE and not b.endswith(b"\n"):
                # an over-long line: keep the first MAX_LINE bytes, skip the rest of it
                extra = 0
                while True:
                    try:
                        more = readline(MAX_LINE)
                    except (EOFError, zlib.error, gzip.BadGzipFile, OSError) as exc:
                        st.incomplete = f"compressed stream ends early or is corrupt ({type(exc).__name__})"
                        more = b""
                    extra += len(more)
                    if not more or more.endswith(b"\n"):
                        break
                st.bytes += extra
                st.truncated_lines += 1
                st.truncated_bytes += extra
            n += 1
            if b.endswith(b"\n"):
                b = b[:-1]
            try:
                s = b.decode("utf-8")
            except UnicodeDecodeError:
                s = b.decode("utf-8", "replace")
                st.invalid_utf8_lines += 1
            yield n, s
            if st.incomplete:
                break
    finally:
        st.lines = n
        if path != "-":
            f.close()


BLOCK = 8 << 20  # bytes read at a time by ``read_blocks``


def read_blocks(path: str, stats: InputStats | None = None, block: int = BLOCK, raw: bool = False) -> Iterator[tuple[int, Any]]:
    """Yield ``(first_line_number, lines)`` batches (``\\n`` removed) read ``block`` bytes at a time.

    Same numbering, truncation and invalid-UTF-8 accounting as ``read_lines``, but one ``read`` and one
    ``decode`` per block instead of per line: the fast path of ``vllmlog parse``.

    ``raw=True``: a block whose lines are all short enough comes as undecoded ``bytes`` (lines joined by
    ``\\n``, no final newline) — the consumer decodes it and must add the lines with invalid UTF-8 to
    ``stats.invalid_utf8_lines`` itself (``LineParser.feed_raw_jsonb`` returns that count); other blocks
    come as lists of str as usual.
    """
    check_path(path)
    st = stats if stats is not None else InputStats(path)
    f, is_gz = _open(path)
    st.gzip = is_gz
    n = 0
    rest = b""
    skipping = False  # inside an over-long line, dropping bytes until its newline
    sniffed = not is_gz
    if raw:
        from .parsing.fast import count_nl
    read = f.read1 if hasattr(f, "read1") else f.read  # read1: a truncated gzip loses at most one piece
    try:
        while True:
            try:
                b = read(block)
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                st.incomplete = f"compressed stream ends early or is corrupt ({type(exc).__name__}); read {n} lines"
                b = b""
            except OSError as exc:
                st.incomplete = f"read error: {exc}"
                b = b""
            if not sniffed and b:
                sniffed = True
                if _looks_binary(b[:_SNIFF]):
                    raise InputError(f"{path}: decompresses to binary data, not a text log")
            st.bytes += len(b)
            if skipping:
                i = b.find(b"\n")
                if i < 0:
                    if b:
                        st.truncated_bytes += len(b)
                        continue
                else:
                    st.truncated_bytes += i
                    b = b[i:]
                    skipping = False
            if not b:
                if rest:
                    n += 1
                    yield n, [_dec(rest, st)]
                break
            data = rest + b if rest else b
            cut = data.rfind(b"\n")
            if cut < 0:
                if len(data) >= MAX_LINE:
                    rest = data[:MAX_LINE]
                    st.truncated_lines += 1
                    st.truncated_bytes += len(data) - MAX_LINE
                    skipping = True
                    # the kept head is emitted when its newline arrives
                    continue
                rest = data
                continue
            body = data[:cut]
            rest = data[cut + 1:]
            if raw and len(body) <= MAX_LINE:
                first = n + 1
                n += count_nl(body) + 1
                if len(rest) >= MAX_LINE:
                    st.truncated_bytes += len(rest) - MAX_LINE
                    rest = rest[:MAX_LINE]
                    st.truncated_lines += 1
                    skipping = True
                yield first, body
                continue
            lines, bad = decode_lines(body)
            st.invalid_utf8_lines += bad
            if len(body) > MAX_LINE and max(map(len, lines)) > MAX_LINE:
                for i, x in enumerate(lines):
                    if len(x) > MAX_LINE:
                        st.truncated_lines += 1
                        st.truncated_bytes += len(x) - MAX_LINE
                        lines[i] = x[:MAX_LINE]
            if len(rest) >= MAX_LINE:
                st.truncated_bytes += len(rest) - MAX_LINE
                rest = rest[:MAX_LINE]
                st.truncated_lines += 1
                skipping = True
            first = n + 1
            n += len(lines)
            yield first, lines
    finally:
        st.lines = n
        if path != "-":
            f.close()


def _dec(b: bytes, st: InputStats) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        st.invalid_utf8_lines += 1
        return b.decode("utf-8", "replace")


def decode_lines(body: bytes) -> tuple[list[str], int]:
    """``\\n``-joined lines → str lines, and how many had invalid UTF-8 (those decoded with replacement)."""
    try:
        return body.decode("utf-8").split("\n"), 0
    except UnicodeDecodeError:
        lines: list[str] = []
        bad = 0
        for x in body.split(b"\n"):
            try:
                lines.append(x.decode("utf-8"))
            except UnicodeDecodeError:
                bad += 1
                lines.append(x.decode("utf-8", "replace"))
        return lines, bad


def write_all(fd: int, pieces: list[bytes]) -> None:
    """Write every byte of ``pieces`` to ``fd`` (one ``writev`` when it takes them all)."""
    if not pieces:
        return
    total = sum(map(len, pieces))
    done = os.writev(fd, pieces) if hasattr(os, "writev") and len(pieces) > 1 else 0
    if done == total:
        return
    for piece in pieces:
        if done >= len(piece):
            done -= len(piece)
            continue
        data = memoryview(piece)[done:]
        done = 0
        while data:
            data = data[os.write(fd, data):]
