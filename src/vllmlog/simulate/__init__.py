"""vLLM serving simulator: realistic logs (handbook, V0, V1) with ground truth, deterministic per seed.

    from vllmlog.simulate import build_config, simulate
    cfg = build_config("kv-pressure", fmt="v1", seed=1, duration_s=120)
    with open("run.log", "w") as fp:
        report = simulate(cfg, fp)
    report.truth["incidents"]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

from .config import DEFAULT_START, Burst, ClientConfig, EngineConfig, Fault, SimConfig, StepTimeModel, WorkloadConfig
from .formats import WRITERS
from .formats.base import PacedSink, Sink
from .scenarios import FAULT_KINDS, FORMATS, SCENARIOS, Scenario, build_config
from .scheduler import Engine, SimResult
from .truth import build_truth, write_truth

__all__ = [
    "DEFAULT_START", "Burst", "ClientConfig", "EngineConfig", "Fault", "SimConfig", "StepTimeModel",
    "WorkloadConfig", "FAULT_KINDS", "FORMATS", "SCENARIOS", "Scenario", "SimulationReport", "build_config",
    "simulate", "write_truth", "generate",
]


@dataclass
class SimulationReport:
    """What a run produced besides the log: the truth document and a few counters."""

    truth: dict[str, Any]
    """The ground-truth document (see `truth.build_truth`)."""
    lines: int
    """Physical lines written."""
    result: SimResult
    """The engine's raw result (request objects, incidents)."""


def simulate(cfg: SimConfig, out: TextIO, follow: bool = False, speed: float = 1.0) -> SimulationReport:
    """Run one simulation, streaming the log to `out`; `follow` paces lines in real time (× `speed`)."""
    sink: Sink = PacedSink(out, speed=speed) if follow else Sink(out)
    writer = WRITERS[cfg.fmt](cfg, sink)
    result = Engine(cfg, writer).run()
    sink.flush()
    category = SCENARIOS[cfg.scenario].category if cfg.scenario in SCENARIOS else ""
    truth = build_truth(cfg, result, writer.clock, sink.lines, category, writer.version)
    return SimulationReport(truth, sink.lines, result)


def generate(log_path: str, truth_path: str | None = None, scenario: str = "healthy", fmt: str = "handbook",
             seed: int = 0, **overrides: Any) -> dict[str, Any]:
    """Write a simulated log (and optionally its truth JSON) to files; returns the truth (handy for tests/bench)."""
    cfg = build_config(scenario, fmt=fmt, seed=seed, **overrides)
    with open(log_path, "w", encoding="utf-8", newline="") as fp:
        report = simulate(cfg, fp)
    if truth_path:
        with open(truth_path, "w", encoding="utf-8") as fp:
            write_truth(report.truth, fp)
    return report.truth
