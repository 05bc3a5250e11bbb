"""Configuration of one simulation run: workload, clients, engine, step-time model, faults."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

#: Simulated start time used when none is given, so output is reproducible.
DEFAULT_START = datetime(2026, 11, 30, 10, 0, 0)

GIB = 1024**3


@dataclass
class Burst:
    """A window of the run during which arrivals come at a different rate (an overload burst)."""

    start_s: float
    """Seconds after the server became ready."""
    end_s: float
    """Seconds after the server became ready."""
    rate: float
    """Arrivals per second inside the window (replaces the base rate)."""


@dataclass
class WorkloadConfig:
    """How requests arrive and how long their prompts and outputs are."""

    rate: float = 2.0
    """Mean arrivals per second outside bursts."""
    arrival: str = "poisson"
    """`poisson` (exponential gaps) or `bursty` (gamma gaps with coefficient of variation `burst_cv`)."""
    burst_cv: float = 3.0
    """Coefficient of variation of inter-arrival gaps when `arrival == "bursty"`."""
    bursts: list[Burst] = field(default_factory=list)
    """Windows with a different arrival rate."""
    prompt_median: int = 600
    """Median prompt length in tokens (log-normal)."""
    prompt_sigma: float = 0.8
    """Log-normal sigma of the prompt length."""
    prompt_min: int = 16
    """Shortest prompt in tokens."""
    prompt_max: int = 8192
    """Longest prompt in tokens (also capped by max_model_len)."""
    output_median: int = 200
    """Median natural output length in tokens (log-normal)."""
    output_sigma: float = 0.7
    """Log-normal sigma of the output length."""
    output_min: int = 2
    """Shortest output in tokens."""
    max_tokens_choices: tuple[int, ...] = (256, 512, 1024, 2048)
    """`max_tokens` values clients send; the output is cut at this length (finish_reason=length)."""
    stream_fraction: float = 0.8
    """Share of streaming requests."""
    chat_fraction: float = 0.5
    """Share of /v1/chat/completions (the rest are /v1/completions)."""


@dataclass
class ClientConfig:
    """Client behaviour: timeouts and disconnects."""

    timeout_s: float | None = None
    """Client gives up after this many seconds (handbook: `CANCELLED … Timeout after Ns`)."""
    disconnect_fraction: float = 0.0
    """Share of requests whose client disconnects early."""
    disconnect_after_s: tuple[float, float] = (0.5, 8.0)
    """Uniform range of seconds after arrival at which a disconnecting client goes away."""


@dataclass
class EngineConfig:
    """The serving engine: model, memory, KV cache and scheduler limits."""

    model: str = "meta-llama/Llama-3.1-8B-Instruct"
    """Served model name."""
    max_model_len: int = 32768
    """Maximum sequence length."""
    block_size: int = 16
    """Tokens per KV-cache block."""
    gpu_memory_utilization: float = 0.9
    """Fraction of GPU memory vLLM may use."""
    total_gpu_gib: float = 79.19
    """Total GPU memory (GiB) as torch reports it (an 80 GB card)."""
    weights_gib: float = 14.99
    """Model weights (GiB): an 8B model in bf16."""
    non_torch_gib: float = 0.53
    """Non-torch memory (GiB) measured at profiling."""
    activation_peak_gib: float = 4.36
    """PyTorch activation peak (GiB) during profiling."""
    kv_bytes_per_token: int = 131072
    """KV bytes per token: 2 × 32 layers × 8 KV heads × 128 dims × 2 bytes for Llama-3-8B."""
    num_gpu_blocks_override: int | None = None
    """Force the number of GPU blocks (`--num-gpu-blocks-override`)."""
    swap_space_gib: float = 4.0
    """CPU swap space (V0 `--swap-space`)."""
    max_num_seqs: int = 256
    """Maximum running sequences per step."""
    max_num_batched_tokens: int | None = None
    """Token budget per step (None: V1 8192, V0 max(max_model_len, 2048))."""
    preemption_mode: str = "recompute"
    """`recompute` or `swap` (V0 only)."""
    tensor_parallel_size: int = 1
    """Number of GPUs (TP workers)."""
    watermark: float = 0.01
    """Fraction of blocks kept free when admitting new sequences (V0 block manager)."""

    @property
    def kv_cache_gib(self) -> float:
        """KV-cache memory left after weights, non-torch memory and activations."""
        return (
            self.total_gpu_gib * self.gpu_memory_utilization
            - self.weights_gib
            - self.non_torch_gib
            - self.activation_peak_gib
        )

    @property
    def block_bytes(self) -> int:
        """Bytes of one KV block."""
        return self.block_size * self.kv_bytes_per_token

    @property
    def num_gpu_blocks(self) -> int:
        """GPU KV blocks (derived from memory unless overridden)."""
        if self.num_gpu_blocks_override is not None:
            return self.num_gpu_blocks_override
        return max(0, int(self.kv_cache_gib * GIB * self.tensor_parallel_size // self.block_bytes))

    @property
    def num_cpu_blocks(self) -> int:
        """CPU swap blocks."""
        return int(self.swap_space_gib * GIB // self.block_bytes)

    def budget(self, v1: bool) -> int:
        """Per-step token budget."""
        if self.max_num_batched_tokens is not None:
            return self.max_num_batched_tokens
        return 8192 if v1 else max(self.max_model_len, 2048)

    def kv_needed_gib(self) -> float:
        """KV memory (GiB) one max-length request needs."""
        blocks = math.ceil(self.max_model_len / self.block_size)
        return blocks * self.block_bytes / GIB / self.tensor_parallel_size


@dataclass
class StepTimeModel:
    """Engine step duration as a simple function of batch shape (defaults: an 8B model on one 80 GB GPU)."""

    base_s: float = 0.008
    """Fixed cost of one step (kernel launches, sampling)."""
    prefill_per_token_s: float = 0.00005
    """Seconds per prefill token (≈ 20k prompt tokens/s)."""
    decode_per_seq_s: float = 0.00012
    """Seconds per decoding sequence in the batch."""
    per_context_token_s: float = 3e-8
    """Seconds per cached context token read by decoding sequences (attention)."""
    jitter: float = 0.03
    """Relative uniform jitter of each step."""
    slowdown: float = 1.0
    """Multiplier on every step (a slow GPU, thermal throttling, a noisy neighbour)."""
    decode_slowdown: float = 1.0
    """Extra multiplier on the decode part of a step (memory-bandwidth starved decode)."""

    def step_time(self, prefill_tokens: int, decode_seqs: int, context_tokens: int, u: float) -> float:
        """Duration of one step; `u` is a uniform random number in [0, 1)."""
        t = prefill_tokens * self.prefill_per_token_s + self.decode_slowdown * (
            self.base_s + decode_seqs * self.decode_per_seq_s + context_tokens * self.per_context_token_s
        )
        return t * self.slowdown * (1.0 + self.jitter * (2.0 * u - 1.0))


@dataclass
class Fault:
    """An injected fault."""

    kind: str
    """`startup_oom`, `kv_too_small`, `engine_death`, `nccl_hang`, `stuck_request`."""
    at_s: float = 0.0
    """Seconds after the server became ready (ignored for startup faults)."""
    cause: str = ""
    """Detail: for engine_death `cuda_oom` or `illegal_memory_access`."""
    timeout_s: float = 600.0
    """NCCL watchdog timeout for nccl_hang (Timeout(ms) = 1000 × this)."""


@dataclass
class SimConfig:
    """Everything one run needs."""

    scenario: str = "healthy"
    """Scenario name (recorded in the truth)."""
    fmt: str = "handbook"
    """Output format: handbook, v0, v1, v1-0.10."""
    seed: int = 0
    """Random seed; the same seed gives identical bytes."""
    start: datetime = DEFAULT_START
    """Wall-clock time of the first log line."""
    duration_s: float = 600.0
    """Seconds of traffic after the server is ready."""
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    """Arrivals and lengths."""
    client: ClientConfig = field(default_factory=ClientConfig)
    """Client timeouts and disconnects."""
    engine: EngineConfig = field(default_factory=EngineConfig)
    """Engine and memory."""
    step: StepTimeModel = field(default_factory=StepTimeModel)
    """Step time model."""
    faults: list[Fault] = field(default_factory=list)
    """Injected faults."""
    max_requests: int | None = None
    """Stop arrivals after this many requests."""
    max_lines: int | None = None
    """Stop arrivals once this many lines were written (the drain adds a few more)."""
    drain_limit_s: float = 300.0
    """After arrivals stop, wait at most this long for in-flight requests, then shut down."""
    slow_threshold_tps: float = 20.0
    """Handbook `Token generation speed … below threshold` level."""
    waiting_warn_s: float = 30.0
    """Handbook `waiting time exceeds` level."""
    log_outputs: bool = False
    """V1 0.32 only: `--enable-log-outputs` (`Generated response` lines; 0.32 logs them for chat requests only)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view of the configuration (for the truth file)."""
        d = asdict(self)
        d["start"] = self.start.isoformat()
        d["engine"]["num_gpu_blocks"] = self.engine.num_gpu_blocks
        d["engine"]["num_cpu_blocks"] = self.engine.num_cpu_blocks
        d["engine"]["kv_cache_gib"] = round(self.engine.kv_cache_gib, 4)
        d["engine"]["max_num_batched_tokens"] = self.engine.budget(self.fmt.startswith("v1"))
        d["workload"]["max_tokens_choices"] = list(self.workload.max_tokens_choices)
        d["client"]["disconnect_after_s"] = list(self.client.disconnect_after_s)
        return d
