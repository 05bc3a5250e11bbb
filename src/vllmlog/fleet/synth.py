"""Synthetic fleets from real logs: each replica is a real vLLM log copied with its clock shifted (so the
replicas run side by side) and its request ids tagged (so no two replicas share one), byte for byte otherwise.

A plan names, per replica, the source log and an offset in seconds from the fleet's start; putting one fault
log among copies of a healthy one makes "one bad replica", putting the same overload log on most replicas at
the same time makes "a fleet-wide event". ``truth`` records what was injected where, for tests and practice.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Iterable, Sequence

# vLLM's envelope time: `INFO 11-30 02:58:29 [api_utils.py:347] …`
_TS = re.compile(rb"(?<![\d-])(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?![\d])")
# glog / c10 (torch) lines: `[W1130 03:38:42.715245156 utils.cpp:68] …`
_GLOG = re.compile(rb"(?<![\w])([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?=[. ])")
_ID = re.compile(rb"\bclient-(\d{4}-[0-9a-f]{8})")


@dataclass
class Replica:
    """One replica of a synthetic fleet: a real log, when it starts (seconds after the fleet's start), and what
    it shows (``healthy`` or the fault it carries)."""

    name: str
    source: str
    offset_s: float = 0.0
    truth: str = "healthy"
    pieces: int = 1
    """Split the copy into this many rotated pieces (``name.log.N.gz`` … ``name.log``)."""


@dataclass
class Plan:
    replicas: list[Replica]
    start: datetime = field(default_factory=lambda: datetime(2026, 11, 30, 10, 0, 0))
    events: list[dict[str, Any]] = field(default_factory=list)
    """Fleet-wide events injected (kind, replicas) — ground truth for ``fleet``."""


def _read(path: str) -> bytes:
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        return f.read()


def first_ts(data: bytes, year: int) -> datetime | None:
    m = _TS.search(data)
    if not m:
        return None
    mo, d, h, mi, s = (int(x) for x in m.groups())
    return datetime(year, mo, d, h, mi, s)


def shift_log(data: bytes, delta: timedelta, tag: str, year: int) -> bytes:
    """The log with every envelope timestamp moved by ``delta`` and request ids tagged ``client-<tag>-…``."""

    def ts(m: re.Match[bytes]) -> bytes:
        mo, d, h, mi, s = (int(x) for x in m.groups())
        t = datetime(year, mo, d, h, mi, s) + delta
        return t.strftime("%m-%d %H:%M:%S").encode()

    def glog(m: re.Match[bytes]) -> bytes:
        mo, d, h, mi, s = (int(x) for x in m.groups()[1:])
        t = datetime(year, mo, d, h, mi, s) + delta
        return m.group(1) + t.strftime("%m%d %H:%M:%S").encode()

    out = _GLOG.sub(glog, _TS.sub(ts, data))
    if tag:
        out = _ID.sub(lambda m: b"client-" + tag.encode() + b"-" + m.group(1), out)
    return out


def _split(data: bytes, n: int) -> list[bytes]:
    lines = data.splitlines(keepends=True)
    k = max(1, -(-len(lines) // n))
    return [b"".join(lines[i:i + k]) for i in range(0, len(lines), k)][:n] if n > 1 else [data]


def write_fleet(plan: Plan, out_dir: str, *, year: int = 2026) -> dict[str, Any]:
    """Write the plan's replicas under ``out_dir`` (``<name>.log``, or rotated pieces) and ``truth.json``."""
    os.makedirs(out_dir, exist_ok=True)
    truth: dict[str, Any] = {"start": plan.start.isoformat(), "replicas": {}, "events": plan.events}
    for r in plan.replicas:
        data = _read(r.source)
        t0 = first_ts(data, year)
        delta = (plan.start + timedelta(seconds=r.offset_s) - t0) if t0 else timedelta(0)
        body = shift_log(data, delta, r.name, year)
        parts = _split(body, r.pieces)
        files = []
        for i, part in enumerate(parts):
            age = len(parts) - 1 - i  # oldest piece has the highest number
            if age == 0:
                p = os.path.join(out_dir, f"{r.name}.log")
                with open(p, "wb") as f:
                    f.write(part)
            elif age >= 2:
                p = os.path.join(out_dir, f"{r.name}.log.{age}.gz")
                with open(p, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
                    f.write(part)
            else:
                p = os.path.join(out_dir, f"{r.name}.log.{age}")
                with open(p, "wb") as f:
                    f.write(part)
            files.append(os.path.basename(p))
        truth["replicas"][r.name] = {"source": os.path.basename(r.source), "offset_s": r.offset_s, "truth": r.truth,
                                     "files": files}
    with open(os.path.join(out_dir, "truth.json"), "w", encoding="utf-8") as f:
        json.dump(truth, f, indent=1, sort_keys=True)
    return truth


def one_bad(healthy: str, bad: str, n: int = 6, truth: str = "bad") -> Plan:
    """``n - 1`` copies of a healthy log and one replica (the last) running ``bad``, all started together."""
    reps = [Replica(f"replica-{i:02d}", healthy, offset_s=2.0 * i) for i in range(n - 1)]
    reps.append(Replica(f"replica-{n - 1:02d}", bad, offset_s=2.0 * (n - 1), truth=truth))
    return Plan(reps)


def fleet_wide(event_log: str, healthy: str, n: int = 6, affected: int = 4, kind: str = "queueing") -> Plan:
    """``affected`` replicas running ``event_log`` together (onsets within seconds), the others ``healthy``."""
    reps = [Replica(f"replica-{i:02d}", event_log, offset_s=3.0 * i, truth=f"fleet-wide {kind}") for i in range(affected)]
    reps += [Replica(f"replica-{i:02d}", healthy, offset_s=3.0 * i) for i in range(affected, n)]
    return Plan(reps, events=[{"kind": kind, "replicas": [r.name for r in reps[:affected]]}])


def names(plan: Plan, truth: str | None = None) -> list[str]:
    """The plan's replica names (with the given truth)."""
    return [r.name for r in plan.replicas if truth is None or r.truth == truth]


def sources(paths: Iterable[str]) -> Sequence[str]:  # pragma: no cover - convenience for the bench
    return sorted(paths)
