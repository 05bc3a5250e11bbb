"""Simulated fleets: N replicas' logs from the serving simulator, with ground truth and chosen faults.

``vllmlog simulate --replicas N -o DIR`` writes ``DIR/replica-NN.log`` (one simulated server each, own seed,
started within seconds of each other) and ``DIR/truth.json`` (what was injected where). On top of healthy traffic:

* ``bad``: replica index → a scenario (``engine-crash``, ``slow-decode``, …) or a fault (``engine_death@90s``):
  that replica alone is unhealthy;
* ``event``: one scenario or fault on the first ⌈share × N⌉ replicas at the same moment — a fleet-wide event
  (``overload`` is a traffic surge hitting them together, ``engine_death@2m`` a rollout killing them);
* ``skew``: replica index → a factor on its arrival rate (router imbalance: 3 makes it hot, 0.2 cold).

``fleet`` must find every bad replica (unhealthy, worst first), the event as one fleet-wide incident, the skewed
replicas as hot/cold, and flag no healthy replica (``tests/test_fleet_sim.py``).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable

#: Seconds between consecutive replicas' starts (a rollout is never perfectly simultaneous).
STAGGER_S = 2.0


@dataclass
class FleetSpec:
    """What to simulate."""

    replicas: int
    fmt: str = "v1"
    seed: int = 0
    duration_s: float | None = None
    rate: float | None = None
    start: datetime | None = None
    bad: dict[int, str] = field(default_factory=dict)
    """Replica index → a scenario name or a fault spec (``KIND[:CAUSE][@TIME]``)."""
    event: str | None = None
    """A scenario or fault applied to the first ⌈``event_share`` × N⌉ replicas at once."""
    event_share: float = 0.5
    skew: dict[int, float] = field(default_factory=dict)
    """Replica index → a factor on its arrival rate."""


def _is_fault(spec: str) -> bool:
    from ..simulate import FAULT_KINDS

    head = spec.partition("@")[0].partition(":")[0].strip().replace("-", "_")
    return head in FAULT_KINDS


def write_sim_fleet(spec: FleetSpec, out_dir: str, parse_fault: Callable[[str], Any]) -> dict[str, Any]:
    """Simulate every replica into ``out_dir``; returns (and writes as ``truth.json``) the ground truth.

    ``parse_fault``: ``KIND[:CAUSE][@TIME]`` → ``simulate.Fault`` (the CLI's parser, so both read specs alike)."""
    from ..errors import ConfigError
    from ..simulate import DEFAULT_START, SCENARIOS, build_config, simulate

    n = spec.replicas
    if n < 1:
        raise ConfigError("--replicas must be ≥ 1")
    for i in list(spec.bad) + list(spec.skew):
        if not 0 <= i < n:
            raise ConfigError(f"replica index {i} is outside 0…{n - 1}", hint="replicas are numbered from 0")
    affected = set(range(math.ceil(spec.event_share * n))) if spec.event else set()
    if affected & set(spec.bad):
        raise ConfigError("a replica cannot be both the bad one and part of the fleet-wide event",
                          hint=f"the event takes replicas 0…{len(affected) - 1}; choose a bad replica after them")
    for s in list(spec.bad.values()) + ([spec.event] if spec.event else []):
        if not _is_fault(s) and s not in SCENARIOS:
            raise ConfigError(f"unknown scenario or fault {s!r}", hint="a scenario (see `vllmlog simulate --list`) "
                              "or a fault KIND[:CAUSE][@TIME]")
    os.makedirs(out_dir, exist_ok=True)
    start = spec.start or DEFAULT_START
    truth: dict[str, Any] = {"replicas": {}, "events": [], "format": spec.fmt, "seed": spec.seed}
    width = max(2, len(str(n - 1)))
    names = [f"replica-{i:0{width}d}" for i in range(n)]
    for i, name in enumerate(names):
        what = spec.bad.get(i) or (spec.event if i in affected else None)
        scenario = what if what and not _is_fault(what) else "healthy"
        faults = [parse_fault(what)] if what and _is_fault(what) else None
        # the event's replicas start together, so the same fault/burst lands at the same moment on each
        offset = 0.0 if i in affected else STAGGER_S * i
        cfg = build_config(scenario, fmt=spec.fmt, seed=spec.seed * 1000 + i, duration_s=spec.duration_s,
                           start=start + timedelta(seconds=offset), faults=faults)
        if spec.rate is not None:
            cfg.workload.rate = spec.rate
        factor = spec.skew.get(i, 1.0)
        cfg.workload.rate *= factor
        with open(os.path.join(out_dir, name + ".log"), "w", encoding="utf-8", newline="") as fp:
            rep = simulate(cfg, fp)
        kind = ("bad" if i in spec.bad else "fleet-wide" if i in affected else "healthy")
        truth["replicas"][name] = {
            "truth": kind, "scenario": scenario, "faults": [f.__dict__ for f in cfg.faults],
            "rate": cfg.workload.rate, "skew": factor, "start": cfg.start.isoformat(),
            "incidents": rep.truth.get("incidents", []), "lines": rep.lines,
        }
    if spec.event:
        truth["events"].append({"what": spec.event, "replicas": [names[i] for i in sorted(affected)]})
    truth["bad"] = [names[i] for i in sorted(spec.bad)]
    truth["skewed"] = {names[i]: f for i, f in sorted(spec.skew.items())}
    with open(os.path.join(out_dir, "truth.json"), "w", encoding="utf-8") as f:
        json.dump(truth, f, indent=1, sort_keys=True, default=str)
    return truth
