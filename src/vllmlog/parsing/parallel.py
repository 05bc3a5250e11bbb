"""Parse one large plain file on several cores, keeping the output byte-for-byte what one process writes.

The file is cut into chunks at *safe boundaries*: a line that certainly starts a new record whatever came
before it — a vLLM-enveloped line whose message a pattern recognises, that is not part of a traceback, and
whose previous line does not end in ``\\r`` (NewLineFormatter's continuation mark). At such a line the
sequential parser would finish the open record, so a worker can start there with an empty state. Each worker
publishes the newline count of the chunk it has just read; a chunk's first line number is one more than the
counts of the chunks before it. The parent carries the year across chunks (Dec → Jan rollover between chunk
boundaries). Workers write their JSON lines straight to the output file descriptor,
in chunk order (a turn counter), so no event crosses a pipe; only small counters come back.

The file is opened once, by the parent: workers (forked) read their chunk from that descriptor with ``pread``,
so a rotation or deletion mid-parse changes nothing, and the head gets the binary-file check of the one-process
path. A chunk is parsed from a guessed start state (year, month, pending mtime hint); at its turn — the chunk
before it is written — the worker compares the guess with the state the chunk before it ended in, and parses the
chunk again from that state when they would differ at its first line (a Dec → Jan rollover inside a chunk, a JSON
record's year, a file whose first timestamp comes late), so the output is what one process writes.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..ingest import MAX_LINE, InputStats, check_head, decode_lines, write_all
from . import fast
from .envelope import is_tb_continuation
from .parser import LineParser
from .registry import MESSAGES

CHUNK_BYTES = 8 << 20
_SLICE = 8192  # lines parsed per call inside a chunk
_RAW_PIECE = 512 << 10  # bytes of a chunk given to the compiled scanner per call
MIN_PARALLEL_BYTES = 32 << 20
_BOUNDARY = re.compile(
    rb"(?:\([^()\x1b]*?\bpid=\d+[^()\x1b]*\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-\d\d \d\d:\d\d:\d\d \[?[^\]\s]+:\d+\] "
)
_SCAN = 1 << 20


@dataclass
class ChunkResult:
    """What one worker reports back for its chunk."""

    index: int
    lines: int = 0
    covered: int = 0
    bytes: int = 0
    invalid_utf8_lines: int = 0
    truncated_lines: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    unknown_templates: Counter[str] = field(default_factory=Counter)
    template_lines: dict[str, int] = field(default_factory=dict)


def usable(path: str) -> bool:
    """True when ``path`` is a plain (not gzip) regular file big enough to be worth splitting."""
    if path == "-":
        return False
    try:
        st = os.stat(path)
        if not os.path.isfile(path) or st.st_size < MIN_PARALLEL_BYTES:
            return False
        with open(path, "rb") as f:
            return f.read(2) != b"\x1f\x8b"
    except OSError:
        return False


_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # (Feb 29 is valid only some years: never a boundary)


def _safe_line(line: bytes, prev: bytes) -> int | None:
    """Month of ``line`` if it is a safe chunk boundary, else None: a line that starts a record with a timestamp
    valid in any year (so nothing before it — the last timestamp a line could inherit — matters), no control
    characters (ANSI colours, ``\r`` updates change how the line is read)."""
    if prev.endswith(b"\r"):
        return None
    m = _BOUNDARY.match(line)
    if m is None:
        return None
    if any(b < 0x20 or b == 0x7f for b in line):
        return None
    ts = m.group(0)[m.start(1) - m.start(0):]
    mo, dd, hh, mi, ss = int(ts[0:2]), int(ts[3:5]), int(ts[6:8]), int(ts[9:11]), int(ts[12:14])
    if not (1 <= mo <= 12 and 1 <= dd <= _DAYS[mo - 1] and hh <= 23 and mi <= 59 and ss <= 59):
        return None
    try:
        msg = line[m.end():].decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        return None
    if not msg or is_tb_continuation(msg) or MESSAGES.match(msg) is None:
        return None
    return int(m.group(1))


def plan(path: str | int, chunk: int = CHUNK_BYTES) -> list[tuple[int, int, int]]:
    """``[(start_offset, end_offset, month_at_start)]`` covering the file (a path or an open descriptor);
    month 0 = unknown (first chunk)."""
    if isinstance(path, int):
        return _plan(path, chunk)
    fd = os.open(path, os.O_RDONLY)
    try:
        return _plan(fd, chunk)
    finally:
        os.close(fd)


def _plan(fd: int, chunk: int) -> list[tuple[int, int, int]]:
    size = os.fstat(fd).st_size
    cuts: list[tuple[int, int]] = [(0, 0)]
    target = chunk
    while target < size:
        buf = os.pread(fd, _SCAN, target)
        nl = buf.find(b"\n")
        found = None
        while nl >= 0 and nl + 1 < len(buf):
            end = buf.find(b"\n", nl + 1)
            if end < 0:
                break
            prev_start = buf.rfind(b"\n", 0, nl) + 1
            month = _safe_line(buf[nl + 1:end], buf[prev_start:nl])
            if month is not None and prev_start > 0:
                found = (target + nl + 1, month)
                break
            nl = end
        if found is None:
            target += _SCAN
            continue
        cuts.append(found)
        target = found[0] + chunk
    out = []
    for i, (start, month) in enumerate(cuts):
        end = cuts[i + 1][0] if i + 1 < len(cuts) else size
        out.append((start, end, month))
    return out


def _tasks(spans: list[tuple[int, int, int]], path: str, year: int | None, y0: int, m0: int, mt_year: int, mt_month: int,
           keep_text: bool, mode: int) -> list[tuple[int, str, int, int, int, int, int, int, bool, int]]:
    """The workers' tasks; ``first`` (the chunk's first line number) is 0: the worker learns it from the
    newline counts the workers of the earlier chunks publish (``_first_line``)."""
    tasks = []
    y, last = y0, m0
    for i, (start, end, month) in enumerate(spans):
        if i == 0:  # exactly what the sequential parser does at the file's start
            tasks.append((i, path, start, end, 0, year if year is not None else mt_year, 0,
                          mt_month if year is None else 0, keep_text, mode))
            continue
        if last == 12 and month == 1:
            y += 1
        last = month
        tasks.append((i, path, start, end, 0, y, month, 0, keep_text, mode))
    return tasks


# ------------------------------------------------------------------ worker side
_W: dict[str, Any] = {}


def _init(turn: Any, cond: Any, fd: int | None, counts: Any, src: int, finals: Any, redactor: Any = None) -> None:
    _W["turn"], _W["cond"], _W["fd"], _W["counts"], _W["redactor"] = turn, cond, fd, counts, redactor
    _W["src"], _W["finals"] = src, finals
    tune_malloc()


def _first_line(idx: int, newlines: int) -> int:
    """Publish this chunk's newline count; wait for the earlier chunks' (each worker publishes right after
    reading its chunk, and chunks are handed out in order, so they all arrive); return the first line number."""
    counts, cond = _W["counts"], _W["cond"]
    with cond:
        counts[idx] = newlines
        cond.notify_all()
        while True:
            total = 0
            for k in range(idx):
                c = counts[k]
                if c < 0:
                    break
                total += c
            else:
                return total + 1
            cond.wait(1.0)


def tune_malloc() -> None:
    """glibc: keep freed memory (no trimming, no mmap for blocks up to 32 MB) so the per-block output buffers
    are reused instead of being faulted in from the kernel again for every block (measured: ~20 % of the
    CPU time of a parse went to page faults). A no-op elsewhere."""
    if _W.get("malloc_tuned"):
        return
    _W["malloc_tuned"] = True
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(-1, 512 << 20)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (the largest glibc accepts on 64-bit)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def _work(task: tuple[int, str, int, int, int, int, int, int, bool, int]) -> ChunkResult:
    idx, path, start, end, first, year, month, hint, keep_text, mode = task
    data = _pread(_W["src"], start, end - start)
    first = _first_line(idx, fast.count_nl(data))
    task = (idx, path, start, end, first, year, month, hint, keep_text, mode)
    res, p, pieces = _parse_chunk(task, data)
    with _W["cond"]:
        while _W["turn"].value != idx:  # the chunk before is written and has published its end state
            _W["cond"].wait(1.0)
    try:
        if idx > 0:
            pred = tuple(_W["finals"][3 * (idx - 1):3 * idx])
            if _at_boundary(pred, month) != _at_boundary((year, month, hint), month):
                # the guessed start state would read the first line differently: parse again from the real one
                res, p, pieces = _parse_chunk((idx, path, start, end, first, *pred, keep_text, mode), data, exact=True)
        del data
        _finish_chunk(res, p, mode, pieces)
    finally:
        with _W["cond"]:
            _W["finals"][3 * idx:3 * idx + 3] = [p.year, p._last_month, p._end_hint]
            _W["turn"].value = idx + 1
            _W["cond"].notify_all()
    return res


def _at_boundary(state: tuple[int, ...], month: int) -> tuple[int, int, int]:
    """The parser state after the first timestamp of a chunk (month ``month``) from the start state
    ``(year, last_month, end_hint)`` — what ``LineParser._ts`` does before parsing the date."""
    year, last, hint = state
    if hint:
        if month > hint:
            year -= 1
        hint = 0
    if month < last and last == 12 and month == 1:
        year += 1
    return year, month, hint


def _pread(fd: int, offset: int, n: int) -> bytes:
    """``n`` bytes at ``offset`` (fewer at the end of a file that shrank meanwhile)."""
    parts = []
    while n > 0:
        b = os.pread(fd, min(n, 1 << 30), offset)
        if not b:
            break
        parts.append(b)
        offset += len(b)
        n -= len(b)
    return b"".join(parts) if len(parts) != 1 else parts[0]


def _parse_chunk(task: tuple[int, str, int, int, int, int, int, int, bool, int], data: bytes, exact: bool = False,
                 ) -> tuple[ChunkResult, LineParser, list[bytes]]:
    """Parse one chunk's bytes from the task's start state (``exact``: the state is the previous chunk's end
    state, month included, not a guess from the boundary line)."""
    idx, path, start, end, first, year, month, hint, keep_text, mode = task
    res = ChunkResult(idx)
    res.bytes = len(data)
    if data.endswith(b"\n"):
        data = data[:-1]
    p = _chunk_parser(path, year, month, hint, keep_text)
    pieces: list[bytes] = []
    if fast.AVAILABLE and (data or end > start):
        _work_raw(res, p, first, mode, data, pieces)
        return res, p, pieces
    lines = _decode(res, data) if data or end > start else []
    for k in range(0, len(lines), _SLICE):  # slices: buffers malloc can reuse (a whole chunk's would be mmapped anew)
        if mode == 1:
            pieces.append(p.feed_lines_jsonb(first + k, lines[k:k + _SLICE]))
        else:
            p.feed_lines_count(first + k, lines[k:k + _SLICE])
    if mode == 1:
        pieces.append(p.close_jsonl().encode())
    else:
        p.close()
    return res, p, pieces


def _work_raw(res: ChunkResult, p: LineParser, first: int, mode: int, data: bytes, pieces: list[bytes]) -> None:
    """Feed the compiled scanner undecoded pieces of the chunk (cut at newlines)."""
    pos, n, lineno = 0, len(data), first
    while pos <= n:
        cut = data.find(b"\n", min(pos + _RAW_PIECE, n)) if pos + _RAW_PIECE < n else -1
        piece = data[pos:cut] if cut >= 0 else data[pos:]
        nlines = fast.count_nl(piece) + 1
        if len(piece) > MAX_LINE and any(len(x) > MAX_LINE for x in piece.split(b"\n")):
            lines = _decode(res, piece)
            if mode == 1:
                pieces.append(p.feed_lines_jsonb(lineno, lines))
            else:
                p.feed_lines_count(lineno, lines)
        elif mode == 1:
            res.invalid_utf8_lines += p.feed_raw_pieces(lineno, piece, pieces)
        else:
            res.invalid_utf8_lines += p.feed_raw_count(lineno, piece)
        lineno += nlines
        if cut < 0:
            break
        pos = cut + 1
    if mode == 1:
        pieces.append(p.close_jsonl().encode())
    else:
        p.close()


def _decode(res: ChunkResult, data: bytes) -> list[str]:
    """Lines of ``data`` as str, counting the ones with invalid UTF-8 and truncating over-long ones (as ingest does)."""
    lines, bad = decode_lines(data)
    res.invalid_utf8_lines += bad
    if len(data) > MAX_LINE:
        for i, x in enumerate(lines):
            if len(x) > MAX_LINE:
                res.truncated_lines += 1
                lines[i] = x[:MAX_LINE]
    return lines


def _chunk_parser(path: str, year: int, month: int, hint: int, keep_text: bool) -> LineParser:
    p = LineParser(path, year, keep_text=keep_text)
    if hint:
        p.end_hint(hint)
    if month:
        p._last_month = month  # the chunk starts mid-file: rollover relative to the month before it
    return p


def _finish_chunk(res: ChunkResult, p: LineParser, mode: int, pieces: list[bytes]) -> None:
    """Counters into the result; the JSON lines to the output (the caller holds the chunk's turn)."""
    res.lines = p.lines
    res.covered = p.covered
    res.kinds = p.kinds
    res.unknown_templates = p.unknown_templates
    res.template_lines = {k: v for k in p.unknown_templates if (v := p.template_example_line(k)) is not None}
    if mode == 1:
        rd = _W.get("redactor")
        if rd is not None:
            pieces = [rd.jsonl(x) for x in pieces]
        for k in range(0, len(pieces), 512):
            write_all(_W["fd"], pieces[k:k + 512])


# ------------------------------------------------------------------ parent side
def _first_year(path: str, year: int | None, fd: int) -> tuple[int, int]:
    """(year, month) the sequential parser reaches at the file's first timestamp (a guess for the chunks' start
    years: checked, and corrected, when each chunk's turn comes)."""
    from ..reader import mtime_of

    mt = mtime_of(path)
    p = LineParser(path, year if year is not None else mt.year, keep_text=False)
    if year is None:
        p.end_hint(mt.month)
    head = os.pread(fd, 1 << 20, 0).decode("utf-8", "replace").split("\n")[:-1]
    for i, line in enumerate(head, 1):  # only up to the first timestamp: later rollovers are tracked per chunk
        p.feed_count([(i, line)])
        if p._last_month:
            break
    return p.year, p._last_month


def run(
    path: str,
    *,
    year: int | None,
    jobs: int,
    fd: int | None,
    keep_text: bool = True,
    progress: Callable[[int], None] | None = None,
    chunk: int = CHUNK_BYTES,
    redactor: Any = None,
) -> Iterator[ChunkResult]:
    """Parse ``path`` with ``jobs`` processes; JSON lines go to ``fd`` (None: count only). Yields chunk results in order.

    Raises ``InputError`` (before any output) when the file cannot be opened or looks binary."""
    from ..reader import mtime_of

    src = _open_checked(path)
    try:
        spans = plan(src, chunk)
        y0, m0 = _first_year(path, year, src)
        mt = mtime_of(path)
        mode = 1 if fd is not None else 2
        tasks = _tasks(spans, path, year, y0, m0, mt.year, mt.month, keep_text, mode)
        ctx = mp.get_context("fork")
        turn = ctx.Value("i", 0)
        cond = ctx.Condition()
        counts = ctx.Array("q", [-1] * len(spans), lock=False)
        finals = ctx.Array("q", [0] * (3 * len(spans)), lock=False)
        with ctx.Pool(jobs, initializer=_init, initargs=(turn, cond, fd, counts, src, finals, redactor)) as pool:
            for res in pool.imap(_work, tasks, chunksize=1):
                if progress is not None:
                    progress(res.bytes)
                yield res
    finally:
        os.close(src)


def _open_checked(path: str) -> int:
    """The file opened once for the whole parse, after the same head check as the one-process path."""
    from ..errors import InputError

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise InputError(f"{path}: cannot open ({exc.strerror or exc})") from None
    try:
        check_head(path, os.pread(fd, 8192, 0))
    except BaseException:
        os.close(fd)
        raise
    return fd


def merge(results: list[ChunkResult] | Iterator[ChunkResult], ist: InputStats) -> tuple[Counter[str], Counter[str], dict[str, int], int]:
    """Fold chunk results into one input's stats: (kinds, unknown templates, first line per template, covered)."""
    kinds: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    first: dict[str, int] = {}
    covered = 0
    for r in results:
        ist.lines += r.lines
        ist.bytes += r.bytes
        ist.invalid_utf8_lines += r.invalid_utf8_lines
        ist.truncated_lines += r.truncated_lines
        kinds.update(r.kinds)
        unknown.update(r.unknown_templates)
        for k, v in r.template_lines.items():
            first.setdefault(k, v)
        covered += r.covered
    return kinds, unknown, first, covered
