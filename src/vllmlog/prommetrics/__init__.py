"""vLLM's own `/metrics`: a version catalog of metric names, exposition parsing, rates, judging."""

from __future__ import annotations

from .catalog import CATALOG, MetricSpec, names_for, parse_version, role_names
from .exposition import Snapshot, load_snapshot_files, parse_exposition
from .judge import CHECKS, judge
from .report import TargetReport, summarize
from .scrape import scrape_files, scrape_targets
from .versions import VersionGuess, guess_version

__all__ = [
    "CATALOG", "CHECKS", "MetricSpec", "Snapshot", "TargetReport", "VersionGuess", "guess_version", "judge",
    "load_snapshot_files", "names_for", "parse_exposition", "parse_version", "role_names", "scrape_files",
    "scrape_targets", "summarize",
]
