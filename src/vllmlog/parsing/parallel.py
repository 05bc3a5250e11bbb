"""Parse one large plain file on several cores, keeping the output byte-for-byte what one process writes.

The file is cut into chunks at *safe boundaries*: a line that certainly starts a new record whatever came
before it — a vLLM-enveloped line whose message a pattern recognises, that is not part of a traceback, and
whose previous line does not end in ``\\r`` (NewLineFormatter's continuation mark). At such a line the
sequential parser would finish the open record, so a worker can start there with an empty state. Each worker
publishes the newline count of the chunk it has just read; a chunk's first line number is one more than the
counts of the chunks before it. The parent carries the year across chunks (Dec → Jan rollover between chunk
boundaries). Workers write their JSON lines straight to the output file descriptor,
in chunk order (a turn counter), so no event crosses a pipe; only small counters come back.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..ingest import MAX_LINE, InputStats, decode_lines, write_all
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


def _safe_line(line: bytes, prev: bytes) -> int | None:
    """Month of ``line`` if it is a safe chunk boundary, else None."""
    if prev.endswith(b"\r"):
        return None
    m = _BOUNDARY.match(line)
    if m is None:
        return None
    try:
        msg = line[m.end():].decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        return None
    if not msg or is_tb_continuation(msg) or MESSAGES.match(msg) is None:
        return None
    return int(m.group(1))


def plan(path: str, chunk: int = CHUNK_BYTES) -> list[tuple[int, int, int]]:
    """``[(start_offset, end_offset, month_at_start)]`` covering the file; month 0 = unknown (first chunk)."""
    size = os.path.getsize(path)
    cuts: list[tuple[int, int]] = [(0, 0)]
    with open(path, "rb") as f:
        target = chunk
        while target < size:
            f.seek(target)
            buf = f.read(_SCAN)
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


def _init(turn: Any, cond: Any, fd: int | None, counts: Any) -> None:
    _W["turn"], _W["cond"], _W["fd"], _W["counts"] = turn, cond, fd, counts
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
    res = ChunkResult(idx)
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    res.bytes = len(data)
    first = _first_line(idx, fast.count_nl(data))
    task = (idx, path, start, end, first, year, month, hint, keep_text, mode)
    if data.endswith(b"\n"):
        data = data[:-1]
    if fast.AVAILABLE and (data or end > start):
        return _work_raw(res, task, data)
    lines = _decode(res, data) if data or end > start else []
    del data
    p = _chunk_parser(path, year, month, hint, keep_text)
    pieces: list[bytes] = []
    for k in range(0, len(lines), _SLICE):  # slices: buffers malloc can reuse (a whole chunk's would be mmapped anew)
        if mode == 1:
            pieces.append(p.feed_lines_jsonb(first + k, lines[k:k + _SLICE]))
        else:
            p.feed_lines_count(first + k, lines[k:k + _SLICE])
    if mode == 1:
        pieces.append(p.close_jsonl().encode())
    else:
        p.close()
    del lines
    return _finish_chunk(res, p, idx, mode, pieces)


def _work_raw(res: ChunkResult, task: tuple[int, str, int, int, int, int, int, int, bool, int], data: bytes) -> ChunkResult:
    """``_work`` feeding the compiled scanner undecoded pieces of the chunk (cut at newlines)."""
    idx, path, start, end, first, year, month, hint, keep_text, mode = task
    p = _chunk_parser(path, year, month, hint, keep_text)
    pieces: list[bytes] = []
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
    return _finish_chunk(res, p, idx, mode, pieces)


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
        p._last_month = month  # the chunk starts mid-file: no mtime hint, rollover relative to its first month
    return p


def _finish_chunk(res: ChunkResult, p: LineParser, idx: int, mode: int, pieces: list[bytes]) -> ChunkResult:
    res.lines = p.lines
    res.covered = p.covered
    res.kinds = p.kinds
    res.unknown_templates = p.unknown_templates
    res.template_lines = {k: v for k in p.unknown_templates if (v := p.template_example_line(k)) is not None}
    if mode == 1:
        turn, cond, fd = _W["turn"], _W["cond"], _W["fd"]
        with cond:
            while turn.value != idx:
                cond.wait(1.0)
        try:
            for k in range(0, len(pieces), 512):
                write_all(fd, pieces[k:k + 512])
        finally:
            with cond:
                turn.value = idx + 1
                cond.notify_all()
    return res


# ------------------------------------------------------------------ parent side
def _first_year(path: str, year: int | None) -> tuple[int, int]:
    """(year, month) the sequential parser reaches at the file's first timestamp."""
    from ..reader import mtime_of

    mt = mtime_of(path)
    p = LineParser(path, year if year is not None else mt.year, keep_text=False)
    if year is None:
        p.end_hint(mt.month)
    with open(path, "rb") as f:
        head = f.read(1 << 20).decode("utf-8", "replace").split("\n")[:-1]
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
) -> Iterator[ChunkResult]:
    """Parse ``path`` with ``jobs`` processes; JSON lines go to ``fd`` (None: count only). Yields chunk results in order."""
    spans = plan(path, chunk)
    y0, m0 = _first_year(path, year)
    from ..reader import mtime_of

    mt = mtime_of(path)
    mode = 1 if fd is not None else 2
    tasks = _tasks(spans, path, year, y0, m0, mt.year, mt.month, keep_text, mode)
    ctx = mp.get_context("fork")
    turn = ctx.Value("i", 0)
    cond = ctx.Condition()
    counts = ctx.Array("q", [-1] * len(spans), lock=False)
    with ctx.Pool(jobs, initializer=_init, initargs=(turn, cond, fd, counts)) as pool:
        for res in pool.imap(_work, tasks, chunksize=1):
            if progress is not None:
                progress(res.bytes)
            yield res


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
