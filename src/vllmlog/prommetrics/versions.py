"""Guess the vLLM release range from which metric names (and labels) a scrape exposes."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InputError

from .catalog import CATALOG, LATEST, Version, engines_for, format_version, parse_version
from .exposition import Snapshot

#: Releases the reference examined (§0); the guess is a range over these.
RELEASES: tuple[Version, ...] = tuple(parse_version(v) for v in (
    "0.2.3 0.2.7 0.3.0 0.3.3 0.4.0 0.4.1 0.4.2 0.4.3 0.5.0 0.5.3 0.5.4 0.5.5 0.6.0 0.6.1 0.6.2 0.6.3 0.6.4 "
    "0.6.5 0.6.6 0.7.0 0.7.1 0.7.2 0.7.3 0.8.0 0.8.2 0.8.3 0.8.4 0.8.5 0.9.0 0.9.1 0.9.2 0.10.0 0.10.1 "
    "0.10.2 0.11.0 0.11.2 0.12.0 0.13.0 0.14.0 0.15.0 0.16.0 0.17.0 0.18.0 0.19.0 0.20.0 0.22.0 0.24.0 "
    "0.26.0 0.28.0 0.30.0 0.31.0 0.32.0 0.33.0"
).split())


@dataclass(slots=True, frozen=True)
class VersionGuess:
    """A release range consistent with a scrape."""

    low: Version | None
    """Oldest consistent release (None when nothing fits)."""
    high: Version | None
    """Newest consistent release."""
    engine: str | None
    """``v0`` or ``v1`` when it can be told."""

    def __str__(self) -> str:
        if self.low is None or self.high is None:
            return "unknown"
        if self.low == self.high:
            return format_version(self.low)
        if self.high >= LATEST:
            return f">={format_version(self.low)}"
        return f"{format_version(self.low)}-{format_version(self.high)}"

    def representative(self) -> Version | None:
        """The newest consistent release: the one whose names alerts/dashboards should use."""
        return self.high


def _contradictions(present: set[str], has_engine_label: bool, version: Version, engine: str) -> int:
    """How many facts of the scrape disagree with (version, engine)."""
    n = 0
    known = {s.name for s in CATALOG}
    live = {s.name: s for s in CATALOG if s.exists_in(version) and s.engines & {engine, "frontend"}}
    for name in present & known:
        if name not in live:
            n += 1
    for name, spec in live.items():
        if not spec.conditional and name.startswith("vllm:") and name not in present:
            n += 1
    engine_label_expected = engine == "v1" and version >= (0, 8, 3)
    if has_engine_label != engine_label_expected:
        n += 1
    return n


def guess_version(snap: Snapshot) -> VersionGuess:
    """The release range (and engine) whose catalog best explains this scrape's vLLM names."""
    present: set[str] = set()
    for s in snap.samples:
        base = s.name
        for suffix in ("_bucket", "_count", "_sum"):
            if base.endswith(suffix) and snap.families.get(base[: -len(suffix)]) == "histogram":
                base = base[: -len(suffix)]
        present.add(base)
    present |= {n for n, t in snap.families.items() if t != "counter" or n.endswith("_total")}
    vllm = {n for n in present if n.startswith("vllm:")}
    if not vllm:
        return VersionGuess(None, None, None)
    has_engine = any("engine" in s.labels for s in snap.samples if s.name.startswith("vllm:"))
    scored: list[tuple[int, Version, str]] = []
    for v in RELEASES:
        for eng in sorted(engines_for(v) - {"frontend"}):
            scored.append((_contradictions(present, has_engine, v, eng), v, eng))
    best = min(c for c, _, _ in scored)
    fits = [(v, e) for c, v, e in scored if c == best]
    engines = {e for _, e in fits}
    return VersionGuess(min(v for v, _ in fits), max(v for v, _ in fits),
                        engines.pop() if len(engines) == 1 else None)


_LOG_VERSION = re.compile(
    r"(?:Initializing an? (?:V[01] )?LLM engine \(v|vLLM API server version |vLLM server version |"
    r"version )(?P<v>\d+\.\d+(?:\.\d+)?)")


def version_from_log(path: str, max_bytes: int = 8 << 20) -> Version | None:
    """The release a vLLM log announces (engine init line, API-server/banner version), or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(max_bytes).decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    for line in head.splitlines():
        if "LLM engine (v" in line or ("ersion" in line and ("vLLM" in line or "vllm" in line)):
            m = _LOG_VERSION.search(line)
            if m:
                return parse_version(m.group("v"))
    return None
