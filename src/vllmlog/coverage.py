"""What was read and what was not: the input side of the verdict.

An analysis is only as good as what it saw. ``Coverage`` lists, per input, what happened while
reading it (read in full, partly, empty, skipped) and every reason the analysis did not see all of
the input — a truncated gzip, an empty file, over-long lines cut, a binary or unreadable file
skipped from a list, lines with invalid UTF-8, events or requests dropped by a memory bound.
``complete`` is True only when there is no such reason; ``analyze``, ``diagnose`` and ``summary``
then never call the run HEALTHY, print ``INCOMPLETE: <reason>`` and exit with ``EXIT_INCOMPLETE``.

Nothing readable at all is not an incomplete analysis but an input error (exit 2): the reader
raises ``InputError`` before any output.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .reader import ParseStats
    from .run import Run

#: Exit status of ``analyze`` / ``diagnose`` / ``summary`` when the input was not read in full (and no
#: finding reached ``--fail-on``): distinct from 1 (findings) and 2 (usage or unreadable input).
EXIT_INCOMPLETE = 3

#: Gap codes, stable (JSON consumers match on them).
GAP_CODES = ("unreadable", "empty", "truncated", "read_error", "long_lines", "invalid_utf8", "no_vllm_lines",
             "nothing_observed", "events_dropped", "series_dropped", "requests_evicted")


@dataclass(frozen=True)
class Gap:
    """One reason the analysis did not see all of its input."""

    code: str
    """One of ``GAP_CODES``."""
    message: str
    """One line for people, with the file and the numbers."""
    file: str | None = None
    count: int | None = None
    """How many lines / events / requests it concerns, when countable."""


@dataclass(frozen=True)
class InputCoverage:
    """What happened to one input."""

    path: str
    status: str
    """``read`` (in full), ``partial``, ``empty`` or ``skipped``."""
    lines: int = 0
    bytes: int = 0
    reason: str | None = None


@dataclass
class Coverage:
    """What the analysis read; ``complete`` when nothing was lost or left out."""

    inputs: list[InputCoverage] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when every input was read in full and nothing was dropped."""
        return not self.gaps

    @property
    def reasons(self) -> list[str]:
        """The gaps' messages, in input order."""
        return [g.message for g in self.gaps]

    def headline(self) -> str:
        """``INCOMPLETE: <first reason> (+N more)``, or ``complete``."""
        if self.complete:
            return "complete"
        more = f" (+{len(self.gaps) - 1} more)" if len(self.gaps) > 1 else ""
        return f"INCOMPLETE: {self.gaps[0].message}{more}"

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (``coverage`` in ``analyze``/``diagnose``/``summary --json``)."""
        return {"complete": self.complete, "headline": self.headline(), "reasons": self.reasons,
                "gaps": [asdict(g) for g in self.gaps], "inputs": [asdict(i) for i in self.inputs]}


def _name(path: str) -> str:
    return "stdin" if path == "-" else os.path.basename(path) or path


def of_stats(stats: ParseStats, recognised: int | None = None) -> Coverage:
    """Coverage from the reader's counts (``ParseStats.inputs``); ``recognised``: how many events were
    something other than unrecognised text (None: not known)."""
    cov = Coverage()
    for s in stats.inputs:
        name = _name(s.path)
        skipped = getattr(s, "skipped", None)
        if skipped:
            cov.inputs.append(InputCoverage(s.path, "skipped", 0, 0, skipped))
            cov.gaps.append(Gap("unreadable", f"{skipped} (skipped)", s.path))
            continue
        status = "read"
        if s.incomplete:
            status = "partial"
            code = "truncated" if "compressed" in s.incomplete else "read_error"
            cov.gaps.append(Gap(code, f"{name}: {s.incomplete}", s.path, s.lines))
        elif s.lines == 0:
            status = "empty"
            cov.gaps.append(Gap("empty", f"{name}: empty input (0 lines)", s.path, 0))
        if s.truncated_lines:
            status = "partial"
            cov.gaps.append(Gap("long_lines", f"{name}: {s.truncated_lines:,} over-long line"
                                f"{'s' if s.truncated_lines != 1 else ''} cut to 1 MiB "
                                f"({s.truncated_bytes:,} bytes not read)", s.path, s.truncated_lines))
        if s.invalid_utf8_lines:
            cov.gaps.append(Gap("invalid_utf8", f"{name}: {s.invalid_utf8_lines:,} line"
                                f"{'s' if s.invalid_utf8_lines != 1 else ''} not valid UTF-8 (bytes replaced)",
                                s.path, s.invalid_utf8_lines))
        cov.inputs.append(InputCoverage(s.path, status, s.lines, s.bytes, s.incomplete))
    if recognised == 0 and stats.lines > 0:
        cov.gaps.append(Gap("no_vllm_lines", f"no vLLM log line among {stats.lines:,} lines", None, stats.lines))
    return cov


def _observed(run: Run) -> bool:
    """Whether the input shows the service at all: a server start (banner, arguments, ready, start-up
    facts), an error or traceback, an engine stats line, an HTTP response, or a request whose outcome is
    known."""
    if any(s.version or s.args or s.ready or s.config for s in run.servers):
        return True
    if run.series.stats or run.http_status:
        return True
    if any(e.kind not in GENERIC or e.level in ("ERROR", "CRITICAL") for e in run.notable):
        return True  # a typed vLLM record (platform, config error, traceback, …) says something
    return any(j.status != "unfinished" for j in run.journeys)


#: Event kinds that are not recognised vLLM (or uvicorn, or traceback) records.
UNRECOGNISED = frozenset({"unparsed", "blank"})
#: Kinds that say nothing about the service by themselves (an untyped vLLM line, a progress bar).
GENERIC = UNRECOGNISED | {"log", "progress"}


def of_run(run: Run) -> Coverage:
    """Coverage of an analysis: the reader's counts plus what the pipeline's memory bounds dropped."""
    kinds = run.kinds
    recognised = sum(n for k, n in kinds.items() if k not in UNRECOGNISED) if kinds else 0
    cov = of_stats(run.parse_stats, recognised)
    if recognised and not _observed(run):
        cov.gaps.append(Gap("nothing_observed", f"nothing to judge the service by among {run.parse_stats.lines:,} lines: "
                            "no server start-up, stats line or finished request", None, run.parse_stats.lines))
    if run.notable_dropped:
        cov.gaps.append(Gap("events_dropped", f"{run.notable_dropped:,} warning/error/lifecycle events beyond the "
                            "analysis' memory bound were not kept (counted, not diagnosed)", None, run.notable_dropped))
    dropped = getattr(run.series, "dropped", 0)
    if dropped:
        cov.gaps.append(Gap("series_dropped", f"{dropped:,} engine samples beyond the series' memory bound were not "
                            "kept", None, dropped))
    evicted = getattr(run, "journeys_evicted", 0)
    if evicted:
        cov.gaps.append(Gap("requests_evicted", f"{evicted:,} requests were still open when the in-flight limit was "
                            "reached and were closed as unfinished (evicted from memory: counted, their timings "
                            "are not in the percentiles)", None, evicted))
    return cov
