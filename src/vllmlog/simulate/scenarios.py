"""Named scenarios: each produces the log signature of one diagnosis category."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from ..errors import ConfigError
from .config import DEFAULT_START, Burst, ClientConfig, EngineConfig, Fault, SimConfig, StepTimeModel, WorkloadConfig

FORMATS = ("handbook", "v0", "v1", "v1-0.15", "v1-0.10", "v1-json")


@dataclass(frozen=True)
class Scenario:
    """A named recipe for a `SimConfig`."""

    name: str
    """CLI name."""
    category: str
    """Diagnosis category its log should be classified as."""
    description: str
    """One line for `--help` and docs."""
    duration_s: float
    """Default seconds of traffic."""
    build: Callable[[SimConfig], None]
    """Mutates a default config into this scenario (`duration_s` is already set)."""


def _healthy(c: SimConfig) -> None:
    c.workload.rate = 2.0


def _overload(c: SimConfig) -> None:
    d = c.duration_s
    c.engine.max_num_seqs = 32
    c.workload.rate = 2.0
    c.workload.output_median = 300
    c.workload.bursts = [Burst(0.1 * d, 0.7 * d, 9.0)]
    c.client.timeout_s = 60.0


def _kv_pressure(c: SimConfig) -> None:
    c.engine.gpu_memory_utilization = 0.32
    c.engine.max_model_len = 16384
    c.engine.preemption_mode = "recompute" if c.fmt.startswith("v1") else "swap"
    c.workload.rate = 2.1
    c.workload.prompt_median = 1500
    c.workload.prompt_sigma = 0.6
    c.workload.output_median = 600
    c.workload.output_sigma = 0.5
    c.workload.max_tokens_choices = (1024, 2048)


def _startup_oom(c: SimConfig) -> None:
    c.engine.gpu_memory_utilization = 0.95
    c.engine.max_model_len = 131072
    c.faults = [Fault("startup_oom")]


def _kv_too_small(c: SimConfig) -> None:
    c.engine.gpu_memory_utilization = 0.4
    c.engine.max_model_len = 131072
    c.faults = [Fault("kv_too_small")]


def _engine_crash(c: SimConfig) -> None:
    c.workload.rate = 2.0
    c.faults = [Fault("engine_death", at_s=0.5 * c.duration_s, cause="illegal_memory_access")]


def _nccl_hang(c: SimConfig) -> None:
    c.engine.tensor_parallel_size = 2
    c.engine.weights_gib = 14.99
    c.workload.rate = 2.0
    c.faults = [Fault("nccl_hang", at_s=0.3 * c.duration_s, timeout_s=600.0)]


def _client_disconnects(c: SimConfig) -> None:
    c.workload.rate = 2.0
    c.workload.arrival = "bursty"
    c.workload.burst_cv = 2.0
    c.workload.output_median = 300
    c.client.disconnect_fraction = 0.3
    c.client.disconnect_after_s = (0.5, 10.0)


def _slow_decode(c: SimConfig) -> None:
    c.workload.rate = 0.5
    c.workload.prompt_median = 4000
    c.workload.prompt_sigma = 0.3
    c.step.slowdown = 4.0
    c.step.decode_slowdown = 1.5


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("healthy", "healthy", "steady Poisson traffic well within capacity", 600, _healthy),
        Scenario("overload", "queue_backlog", "an arrival burst above capacity: running pinned at max_num_seqs=32, "
                 "waiting grows, requests wait > 30 s, some clients time out", 300, _overload),
        Scenario("kv-pressure", "kv_cache_pressure_preemption", "small KV cache, long requests: KV ≥ 95 %, "
                 "preemptions (swap in V0, recompute in V1)", 300, _kv_pressure),
        Scenario("startup-oom", "startup_oom", "CUDA out of memory while profiling; the server never becomes ready",
                 60, _startup_oom),
        Scenario("kv-too-small", "kv_cache_capacity_error", "max_model_len needs more KV cache than is available; "
                 "the engine refuses to start", 60, _kv_too_small),
        Scenario("engine-crash", "engine_dead", "a CUDA illegal memory access kills the engine mid-run; in-flight requests fail, 500s",
                 300, _engine_crash),
        Scenario("nccl-hang", "distributed_nccl", "TP=2: a collective hangs; shm-broadcast warnings, then the NCCL "
                 "watchdog kills the workers", 300, _nccl_hang),
        Scenario("client-disconnects", "client_abort", "bursty traffic; 30 % of clients disconnect early",
                 300, _client_disconnects),
        Scenario("slow-decode", "slow_throughput", "steps 4x slower (decode 6x): generation < 20 tokens/s, TTFT > 1 s",
                 300, _slow_decode),
    )
}

FAULT_KINDS = ("startup_oom", "kv_too_small", "engine_death", "nccl_hang", "stuck_request")


def build_config(
    scenario: str,
    fmt: str = "handbook",
    seed: int = 0,
    duration_s: float | None = None,
    start: datetime | None = None,
    rate: float | None = None,
    max_requests: int | None = None,
    max_lines: int | None = None,
    faults: list[Fault] | None = None,
    log_outputs: bool = False,
) -> SimConfig:
    """A ready-to-run configuration for a named scenario, with optional overrides."""
    if scenario not in SCENARIOS:
        raise ConfigError(f"unknown scenario {scenario!r}", hint="choose one of: " + ", ".join(SCENARIOS))
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}", hint="choose one of: " + ", ".join(FORMATS))
    sc = SCENARIOS[scenario]
    cfg = SimConfig(
        scenario=scenario, fmt=fmt, seed=seed, start=start or DEFAULT_START,
        duration_s=sc.duration_s if duration_s is None else duration_s,
        workload=WorkloadConfig(), client=ClientConfig(), engine=EngineConfig(), step=StepTimeModel(),
        max_requests=max_requests, max_lines=max_lines, log_outputs=log_outputs,
    )
    sc.build(cfg)
    if duration_s is None and (max_requests is not None or max_lines is not None):
        cfg.duration_s = 1e9  # sized by requests/lines: arrivals stop on the count, not the clock
    if rate is not None:
        cfg.workload.rate = rate
    if faults:
        for f in faults:
            if f.kind not in FAULT_KINDS:
                raise ConfigError(f"unknown fault {f.kind!r}", hint="choose one of: " + ", ".join(FAULT_KINDS))
        cfg.faults = list(cfg.faults) + list(faults)
        if any(f.kind == "nccl_hang" for f in faults) and cfg.engine.tensor_parallel_size < 2:
            cfg.engine.tensor_parallel_size = 2
    return cfg
