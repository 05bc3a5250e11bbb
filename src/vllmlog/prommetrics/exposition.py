"""Prometheus text exposition → `Snapshot` (parsed with prometheus_client's own parser)."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from ..errors import InputError

LabelKey = tuple[tuple[str, str], ...]


def label_key(labels: dict[str, str], drop: tuple[str, ...] = ()) -> LabelKey:
    """A hashable, sorted form of a label set (optionally without some labels)."""
    return tuple(sorted((k, v) for k, v in labels.items() if k not in drop))


@dataclass(slots=True, frozen=True)
class Sample:
    """One exposed sample."""

    name: str
    """Sample name as exposed (``…_total``, ``…_bucket`` …)."""
    labels: dict[str, str]
    """Label pairs of the sample."""
    value: float
    """Sample value."""


@dataclass(slots=True)
class Snapshot:
    """One scrape of one target at one moment."""

    source: str
    """Where it came from: a URL or a file path."""
    time: float
    """Unix time of the scrape (seconds)."""
    samples: list[Sample]
    """Every sample, in exposition order."""
    families: dict[str, str] = field(default_factory=dict)
    """Declared family name → type (``counter``, ``gauge``, ``histogram``, ``unknown`` …)."""
    text: str = ""
    """The raw exposition text (kept for evidence line lookup)."""
    from_file: bool = False
    """True when read from a saved snapshot file (evidence then carries line numbers)."""
    time_basis: str = "scrape"
    """Where `time` came from: ``scrape``, ``index`` (a sibling index CSV), ``mtime``, ``interval``, ``prometheus``."""

    def series(self, name: str) -> list[Sample]:
        """All samples with this exact sample name."""
        return [s for s in self.samples if s.name == name]

    def has(self, name: str) -> bool:
        """True when a sample or family of that name is present."""
        return name in self.families or any(s.name == name for s in self.samples)

    def sample_names(self) -> set[str]:
        """Distinct sample names in this snapshot."""
        return {s.name for s in self.samples}

    def line_of(self, name: str, labels: dict[str, str] | None = None) -> tuple[int | None, str]:
        """The 1-based line number and text of the first sample line matching name (and labels)."""
        want = labels or {}
        for no, line in enumerate(self.text.splitlines(), 1):
            if not line.startswith(name) or line[len(name): len(name) + 1] not in ("{", " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in want.items()):
                return no, line
        rendered = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(want.items())) + "}" if want else "")
        return None, rendered


def parse_exposition(text: str, source: str, time: float, from_file: bool = False) -> Snapshot:
    """Parse exposition text with prometheus_client; raise InputError when it is not exposition."""
    samples: list[Sample] = []
    families: dict[str, str] = {}
    try:
        for fam in text_string_to_metric_families(text):
            families[fam.name] = fam.type
            if fam.type == "counter":  # the parser strips _total from counter family names
                families[fam.name + "_total"] = fam.type
            for s in fam.samples:
                samples.append(Sample(s.name, dict(s.labels), float(s.value)))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise InputError(f"{source}: not Prometheus text exposition ({exc})",
                         hint="point at vLLM's /metrics endpoint or a file saved from it") from exc
    if not samples and text.strip() and not families:
        raise InputError(f"{source}: no metric samples found",
                         hint="point at vLLM's /metrics endpoint or a file saved from it")
    return Snapshot(source=source, time=time, samples=samples, families=families, text=text, from_file=from_file)


def _index_times(path: Path) -> dict[str, float]:
    """Snapshot times from sibling `*index.csv` files (`file,snapshot_epoch`), as the corpus records them."""
    out: dict[str, float] = {}
    for idx in path.parent.glob("*index.csv"):
        try:
            with idx.open(newline="") as fh:
                for row in csv.DictReader(fh):
                    f, t = row.get("file"), row.get("snapshot_epoch")
                    if f and t:
                        out[f] = float(t)
        except (OSError, ValueError, csv.Error):
            continue
    return out


def load_snapshot_files(paths: list[str | os.PathLike[str]], interval_s: float = 10.0) -> list[Snapshot]:
    """Read saved snapshots (given in time order); times come from an index CSV, else mtimes, else interval."""
    if not paths:
        raise InputError("no snapshot files given", hint="pass --file snapshot.prom (repeatable, in time order)")
    snaps: list[Snapshot] = []
    index_cache: dict[Path, dict[str, float]] = {}
    for i, p in enumerate(paths):
        path = Path(p)
        if not path.is_file():
            raise InputError(f"{path}: no such file", hint="pass saved /metrics snapshots with --file")
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
        times = index_cache.setdefault(path.parent, _index_times(path))
        t = times.get(path.name)
        snap = parse_exposition(text, str(path), t if t is not None else float("nan"), from_file=True)
        snap.time_basis = "index"
        snaps.append(snap)
    _fill_times(snaps, [Path(p) for p in paths], interval_s)
    for a, b in zip(snaps, snaps[1:]):
        if b.time <= a.time:
            raise InputError(f"snapshots are not in time order: {b.source} is not later than {a.source}",
                             hint="pass --file options oldest first (their index CSV gives the times)")
    return snaps


def _fill_times(snaps: list[Snapshot], paths: list[Path], interval_s: float) -> None:
    """Give every snapshot a time: keep index times; else use mtimes when increasing; else a fixed step."""
    if all(s.time == s.time for s in snaps):  # no NaN
        return
    mtimes = [p.stat().st_mtime for p in paths]
    if len(snaps) > 1 and all(b - a >= 0.5 for a, b in zip(mtimes, mtimes[1:])):  # saved one by one, in order
        for s, m in zip(snaps, mtimes):
            s.time, s.time_basis = m, "mtime"
        return
    base = mtimes[0]
    for i, s in enumerate(snaps):
        s.time, s.time_basis = base + i * interval_s, "interval"
