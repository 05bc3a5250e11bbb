"""The public parsing entry points: paths → events, in batches, with counts of what was read."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from .errors import InputError
from .ingest import InputStats, check_path, read_blocks, write_all
from .model import Event
from .parsing.parser import LineParser

if TYPE_CHECKING:
    from .redact import Redactor
from .parsing.fields import dumps_safe

BATCH_LINES = 8192
BLOCK_BYTES = 1 << 20
RAW_BLOCK_BYTES = 1 << 19  # undecoded blocks for the compiled scanner: small enough to stay under MAX_LINE


@dataclass
class ParseStats:
    """Counts gathered while parsing: lines in, events out, kinds, unknown templates, input problems."""

    inputs: list[InputStats] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    unknown_templates: Counter[str] = field(default_factory=Counter)
    template_first_line: dict[str, tuple[str, int]] = field(default_factory=dict)
    lines: int = 0
    events: int = 0
    lines_in_events: int = 0

    def merge_parser(self, p: LineParser) -> None:
        """Fold one finished file parser's counters in."""
        self.kinds.update(p.kinds)
        self.unknown_templates.update(p.unknown_templates)
        for key in p.unknown_templates:
            ln = p.template_example_line(key)
            if ln is not None:
                self.template_first_line.setdefault(key, (p.file, ln))

    def to_dict(self, top: int = 20) -> dict[str, Any]:
        """JSON shape of ``vllmlog parse --stats --json``."""
        return {
            "lines": self.lines,
            "events": self.events,
            "lines_accounted_for": self.lines_in_events,
            "kinds": dict(self.kinds.most_common()),
            "unknown_templates": [
                {"kind": k.split("\t", 1)[0], "template": k.split("\t", 1)[1], "count": c,
                 "first": {"file": self.template_first_line.get(k, ("", 0))[0], "line": self.template_first_line.get(k, ("", 0))[1]}}
                for k, c in self.unknown_templates.most_common(top)
            ],
            "inputs": [
                {"path": s.path, "lines": s.lines, "bytes": s.bytes, "gzip": s.gzip,
                 "invalid_utf8_lines": s.invalid_utf8_lines, "truncated_lines": s.truncated_lines,
                 "incomplete": s.incomplete, "skipped": s.skipped}
                for s in self.inputs
            ],
        }


def mtime_of(path: str) -> datetime:
    """When the input was last written (now for stdin): the year year-less timestamps belong to."""
    if path == "-":
        return datetime.now()
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime)
    except OSError:
        return datetime.now()


def _parsers(
    paths: Sequence[str] | str, year: int | None, st: ParseStats, keep_text: bool, block: int, raw: bool = False,
    skip_unreadable: bool = False,
) -> Iterator[tuple[LineParser, InputStats, Iterator[tuple[int, Any]]]]:
    """One parser per input. ``skip_unreadable``: an input that cannot be read (missing, a directory,
    binary, no permission) is recorded as skipped (``InputStats.skipped``) instead of ending the run —
    unless no input at all could be read, which is still an ``InputError``."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]  # type: ignore[list-item]
    paths = [os.fspath(p) for p in paths]  # the library accepts pathlib.Path
    bad: dict[str, str] = {}
    for p in paths:  # fail fast, before any output, on a bad path
        try:
            check_path(p)
        except InputError as exc:
            if not skip_unreadable:
                raise
            bad[p] = exc.message
    if skip_unreadable and bad and len(bad) == len(paths):
        _nothing_readable(list(bad.values()))
    for path in paths:
        ist = InputStats(path)
        st.inputs.append(ist)
        if path in bad:
            ist.skipped = bad[path]
            continue
        mt = mtime_of(path)
        parser = LineParser(path, year if year is not None else mt.year, keep_text=keep_text)
        if year is None and path != "-":
            parser.end_hint(mt.month)
        blocks = read_blocks(path, ist, block, raw=raw)
        yield parser, ist, (_skipping(blocks, ist) if skip_unreadable else blocks)
        st.lines += ist.lines
        st.merge_parser(parser)
    if skip_unreadable and all(i.skipped for i in st.inputs[-len(paths):]):
        _nothing_readable([i.skipped or "" for i in st.inputs[-len(paths):]])


def _skipping(blocks: Iterator[tuple[int, Any]], ist: InputStats) -> Iterator[tuple[int, Any]]:
    """The blocks of one input; an ``InputError`` on opening it (binary content) marks it skipped."""
    try:
        yield from blocks
    except InputError as exc:
        if ist.lines:
            raise
        ist.skipped = exc.message


def _nothing_readable(reasons: list[str]) -> None:
    more = f" (and {len(reasons) - 1} more unreadable)" if len(reasons) > 1 else ""
    raise InputError(f"nothing readable: {reasons[0]}{more}",
                     hint="pass vLLM server logs (plain or .gz), or - for standard input")


def iter_batches(
    paths: Sequence[str] | str,
    *,
    year: int | None = None,
    stats: ParseStats | None = None,
    keep_text: bool = True,
    progress: Callable[[int], None] | None = None,
    batch_lines: int = BATCH_LINES,
    skip_unreadable: bool = False,
) -> Iterator[list[Event]]:
    """Parse inputs in order, yielding lists of events (memory stays flat on any file size).

    ``skip_unreadable``: an unreadable input in a list is skipped and recorded (see ``_parsers``)."""
    st = stats if stats is not None else ParseStats()
    block = max(64 * 1024, batch_lines * 128)
    for parser, ist, blocks in _parsers(paths, year, st, keep_text, block, skip_unreadable=skip_unreadable):
        done_bytes = 0
        for first, lines in blocks:
            evs = parser.feed_lines(first, lines)
            if evs:
                _account(st, evs)
                yield evs
            if progress is not None and ist.bytes != done_bytes:
                progress(ist.bytes - done_bytes)
                done_bytes = ist.bytes
        tail = parser.close()
        if tail:
            _account(st, tail)
            yield tail


def iter_jsonl(
    paths: Sequence[str] | str,
    *,
    year: int | None = None,
    stats: ParseStats | None = None,
    keep_text: bool = True,
    progress: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """Parse inputs in order, yielding chunks of JSON lines (one ``Event.to_dict`` object per line)."""
    for chunk in _iter_jsonb(paths, year=year, stats=stats, keep_text=keep_text, progress=progress):
        yield chunk.decode()


def _iter_jsonb(
    paths: Sequence[str] | str,
    *,
    year: int | None = None,
    stats: ParseStats | None = None,
    keep_text: bool = True,
    progress: Callable[[int], None] | None = None,
) -> Iterator[bytes]:
    """``iter_jsonl`` as UTF-8 bytes (for writers: no decode/encode round trip)."""
    st = stats if stats is not None else ParseStats()
    for parser, ist, blocks in _parsers(paths, year, st, keep_text, RAW_BLOCK_BYTES, raw=True):
        done_bytes = 0
        for first, lines in blocks:
            if isinstance(lines, bytes):
                pieces: list[bytes] = []
                ist.invalid_utf8_lines += parser.feed_raw_pieces(first, lines, pieces)
                yield from pieces
            else:
                chunk = parser.feed_lines_jsonb(first, lines)
                if chunk:
                    yield chunk
            if progress is not None and ist.bytes != done_bytes:
                progress(ist.bytes - done_bytes)
                done_bytes = ist.bytes
        yield parser.close_jsonl().encode()
        st.events += sum(parser.kinds.values())
        st.lines_in_events += parser.covered


def default_jobs() -> int:
    """Worker processes for one large plain file: the usable cores, at most 4."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 4))


def _parallel(path: str, year: int | None, st: ParseStats, jobs: int, fd: int | None, keep_text: bool,
              progress: Callable[[int], None] | None, redactor: Redactor | None = None) -> None:
    from .parsing import parallel

    ist = InputStats(path)
    st.inputs.append(ist)
    kinds, unknown, first, covered = parallel.merge(
        parallel.run(path, year=year, jobs=jobs, fd=fd, keep_text=keep_text, progress=progress, redactor=redactor), ist)
    st.lines += ist.lines
    st.kinds.update(kinds)
    st.unknown_templates.update(unknown)
    for k, ln in first.items():
        st.template_first_line.setdefault(k, (path, ln))
    st.events += sum(kinds.values())
    st.lines_in_events += covered


def write_jsonl(
    paths: Sequence[str] | str,
    fd: int,
    *,
    year: int | None = None,
    stats: ParseStats | None = None,
    keep_text: bool = True,
    progress: Callable[[int], None] | None = None,
    jobs: int | None = None,
    redactor: Redactor | None = None,
) -> ParseStats:
    """Parse inputs and write their JSON lines to file descriptor ``fd``; large plain files use ``jobs`` processes.
    ``redactor``: every line passes through ``Redactor.jsonl`` on its way out (the CLI's default)."""
    from .parsing import parallel

    st = stats if stats is not None else ParseStats()
    if isinstance(paths, str):
        paths = [paths]
    for p in paths:
        check_path(p)
    parallel.tune_malloc()
    jobs = default_jobs() if jobs is None else jobs
    for path in paths:
        if jobs > 1 and parallel.usable(path):
            _parallel(path, year, st, jobs, fd, keep_text, progress, redactor)
            continue
        batch: list[bytes] = []
        size = 0
        for chunk in _iter_jsonb(path, year=year, stats=st, keep_text=keep_text, progress=progress):
            if redactor is not None:
                chunk = redactor.jsonl(chunk)
            batch.append(chunk)
            size += len(chunk)
            if size >= 1 << 20 or len(batch) >= 512:
                write_all(fd, batch)
                batch, size = [], 0
        write_all(fd, batch)
    return st


def count(
    paths: Sequence[str] | str,
    *,
    year: int | None = None,
    stats: ParseStats | None = None,
    progress: Callable[[int], None] | None = None,
    jobs: int | None = 1,
) -> ParseStats:
    """Parse inputs only to count kinds and unknown templates (what ``vllmlog parse --stats`` prints)."""
    from .parsing import parallel

    st = stats if stats is not None else ParseStats()
    if isinstance(paths, str):
        paths = [paths]
    jobs = default_jobs() if jobs is None else jobs
    if jobs > 1 and any(parallel.usable(p) for p in paths):
        for p in paths:
            check_path(p)
        for p in paths:
            if parallel.usable(p):
                _parallel(p, year, st, jobs, None, False, progress)
            else:
                count(p, year=year, stats=st, progress=progress, jobs=1)
        return st
    for parser, ist, blocks in _parsers(paths, year, st, False, RAW_BLOCK_BYTES, raw=True):
        done_bytes = 0
        for first, lines in blocks:
            if isinstance(lines, bytes):
                ist.invalid_utf8_lines += parser.feed_raw_count(first, lines)
            else:
                parser.feed_lines_count(first, lines)
            if progress is not None and ist.bytes != done_bytes:
                progress(ist.bytes - done_bytes)
                done_bytes = ist.bytes
        parser.close()
        st.events += sum(parser.kinds.values())
        st.lines_in_events += parser.covered
    return st


def _account(st: ParseStats, evs: list[Event]) -> None:
    st.events += len(evs)
    st.lines_in_events += sum(e.line_end - e.line + 1 for e in evs)


def parse(paths: Sequence[str] | str, **kwargs: Any) -> Iterator[Event]:
    """Parse vLLM logs into typed events, lazily: ``for ev in vllmlog.parse("server.log"): …``."""
    for batch in iter_batches(paths, **kwargs):
        yield from batch


def to_frame(events: Iterable[Event]):  # -> polars.DataFrame
    """Columnar form of events for notebooks (polars); ``fields`` becomes a JSON string column."""
    import polars as pl

    rows: dict[str, list[Any]] = {k: [] for k in ("file", "line", "line_end", "ts", "level", "process", "source", "kind", "request_id", "fields", "text")}
    for e in events:
        rows["file"].append(e.file)
        rows["line"].append(e.line)
        rows["line_end"].append(e.line_end)
        rows["ts"].append(e.ts)
        rows["level"].append(e.level)
        rows["process"].append(e.process)
        rows["source"].append(e.source)
        rows["kind"].append(e.kind)
        rows["request_id"].append(e.request_id)
        rows["fields"].append(dumps_safe(e.fields).decode())
        rows["text"].append(e.text)
    return pl.DataFrame(rows, schema_overrides={"ts": pl.Datetime("ms")})
