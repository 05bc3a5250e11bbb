"""What the server has: its KV capacity, seat limit, token budget, context length, parallelism and device, from
its own start-up lines (``state.ServerConfig``), plus the KV facts capacity needs that the config does not keep
(blocks before a ``--num-gpu-blocks-override``, bytes per KV token, the memory the KV cache may grow into)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .figure import DEFAULT, DERIVED, LOGGED, Figure

if TYPE_CHECKING:  # pragma: no cover
    from ..state import ServerConfig, ServiceState

GIB = 1024**3
_OVERRIDE = re.compile(r"Overriding num_gpu_blocks=(\d+) with num_gpu_blocks_override=(\d+)")
#: vLLM's default --max-num-seqs for the API server when none is logged (``EngineArgs.get_batch_defaults``): 128 ×
#: world size on CPU, 256 on GPUs (1024 on ≥ 70 GiB GPUs other than the A100, which the log rarely lets us tell).
DEFAULT_SEATS_CPU = 128
DEFAULT_SEATS = 256


def default_seats(cfg: ServerConfig, total_gib: float | None) -> tuple[int, str]:
    """vLLM's default --max-num-seqs for this server and why."""
    if cfg.cpu:
        return DEFAULT_SEATS_CPU * cfg.world_size, f"CPU API server: 128 × world size {cfg.world_size}"
    if total_gib and total_gib >= 70:
        return 1024, f"GPU with {total_gib:g} GiB (≥ 70 GiB, not an A100)"
    return DEFAULT_SEATS, "GPU API server (1024 on ≥ 70 GiB GPUs other than the A100)"


@dataclass
class KvFacts:
    """KV-cache facts for what-ifs."""

    tokens: int | None = None
    block_size: int = 16
    blocks_unforced: int | None = None
    """The blocks vLLM had sized before ``--num-gpu-blocks-override`` replaced them (logged)."""
    bytes_per_token: float | None = None
    """KV bytes per token of context: KV memory ÷ the tokens it holds (derived)."""
    memory_gib: float | None = None
    """Memory the KV cache was given (CPU: VLLM_CPU_KVCACHE_SPACE; GPU: available KV memory)."""
    total_memory_gib: float | None = None
    """Total device memory (GPU) or node memory (CPU), as logged."""
    line: int | None = None
    """The 'KV cache size' line."""


@dataclass
class Server:
    """The server's facts as figures, and the KV facts behind them."""

    config: ServerConfig
    kv: KvFacts
    figures: list[Figure] = field(default_factory=list)
    seats: int | None = None
    seats_basis: str = LOGGED

    def get(self, key: str) -> Figure | None:
        return next((f for f in self.figures if f.key == key), None)


def _basis(cfg: ServerConfig, name: str) -> str:
    return {"logged": LOGGED, "derived": DERIVED, "default": DEFAULT}.get(cfg.sources.get(name, ""), LOGGED)


def facts(st: ServiceState) -> Server:
    """The facts of one server run."""
    cfg = st.config
    kv = KvFacts(tokens=cfg.kv_cache_tokens, block_size=cfg.block_size or 16, memory_gib=cfg.kv_cache_memory_gib)
    for e in st.view.events:
        if e.kind == "kv_cache_blocks":
            m = _OVERRIDE.search(e.text or "")
            if m:
                kv.blocks_unforced = int(m.group(1))
        elif e.kind in ("kv_cache_memory", "memory_profiling", "memory_usage"):
            t = e.fields.get("total_gpu_memory_gib")
            if t:
                kv.total_memory_gib = float(t)
            if e.fields.get("kv_cache_memory_gib") and not kv.memory_gib:
                kv.memory_gib = float(e.fields["kv_cache_memory_gib"])
        elif e.kind == "kv_cache_size":
            kv.line = e.line
    # bytes per token: the memory the cache was given ÷ the tokens it holds — only when no override cut the
    # tokens below what that memory holds (then the un-forced blocks hold the memory)
    if kv.memory_gib:
        toks = kv.blocks_unforced * kv.block_size if kv.blocks_unforced else (None if cfg.num_gpu_blocks_override
                                                                              else kv.tokens)
        if toks:
            kv.bytes_per_token = kv.memory_gib * GIB / toks
    s = Server(config=cfg, kv=kv)
    f = s.figures
    src_line = f" (line {kv.line})" if kv.line else ""
    if cfg.kv_cache_tokens:
        f.append(Figure("kv_cache_tokens", "KV cache capacity", cfg.kv_cache_tokens, "tokens",
                        _basis(cfg, "kv_cache_tokens"), "'KV cache size' start-up line" + src_line
                        if _basis(cfg, "kv_cache_tokens") == LOGGED else "blocks × block size"))
        f.append(Figure("kv_cache_blocks", "KV cache blocks", cfg.kv_cache_tokens // (cfg.block_size or 16), "blocks",
                        LOGGED if cfg.num_gpu_blocks and _basis(cfg, "num_gpu_blocks") == LOGGED else DERIVED,
                        "start-up lines" if cfg.num_gpu_blocks and _basis(cfg, "num_gpu_blocks") == LOGGED
                        else f"capacity ÷ block size {cfg.block_size}"))
    f.append(Figure("block_size", "block size", cfg.block_size, "tokens", _basis(cfg, "block_size"),
                    "start-up lines" if _basis(cfg, "block_size") != DEFAULT else
                    f"vLLM's default on {'CPU' if cfg.cpu else 'GPU'} (not logged)"))
    if cfg.num_gpu_blocks_override:
        f.append(Figure("num_gpu_blocks_override", "--num-gpu-blocks-override", cfg.num_gpu_blocks_override, "blocks",
                        LOGGED, "arguments" + (f"; vLLM had sized {kv.blocks_unforced:,} blocks" if kv.blocks_unforced
                                               else "")))
    if kv.memory_gib:
        f.append(Figure("kv_cache_memory", "KV cache memory", kv.memory_gib, "GiB", LOGGED,
                        "VLLM_CPU_KVCACHE_SPACE ('Explicitly set … GiB for KV cache')" if cfg.cpu
                        else "'Available KV cache memory' line"))
    if kv.bytes_per_token:
        f.append(Figure("kv_bytes_per_token", "KV bytes per token", kv.bytes_per_token, "B", DERIVED,
                        "KV memory ÷ the tokens it holds" + (" (the blocks before the override)" if kv.blocks_unforced
                                                             else "")))
    if cfg.max_concurrency:
        f.append(Figure("vllm_max_concurrency", f"vLLM: max concurrency at {cfg.max_model_len or '?'} tokens/request",
                        cfg.max_concurrency, "×", _basis(cfg, "max_concurrency"),
                        "'Maximum concurrency for N tokens per request' line" if _basis(cfg, "max_concurrency") == LOGGED
                        else "capacity ÷ max_model_len"))
    if cfg.max_num_seqs:
        s.seats, s.seats_basis = cfg.max_num_seqs, _basis(cfg, "max_num_seqs")
        f.append(Figure("max_num_seqs", "--max-num-seqs", cfg.max_num_seqs, "seqs", s.seats_basis, "arguments"))
    elif st.cap:
        s.seats, s.seats_basis = st.cap, DERIVED
        f.append(Figure("max_num_seqs", "--max-num-seqs (observed plateau)", st.cap, "seqs", DERIVED,
                        "Running never exceeded it while requests waited"))
    else:
        n, why = default_seats(cfg, kv.total_memory_gib)
        s.seats, s.seats_basis = n, DEFAULT
        f.append(Figure("max_num_seqs", "--max-num-seqs", n, "seqs", DEFAULT, f"not logged: vLLM's default ({why})"))
    if cfg.max_num_batched_tokens:
        f.append(Figure("max_num_batched_tokens", "--max-num-batched-tokens", cfg.max_num_batched_tokens, "tokens",
                        _basis(cfg, "max_num_batched_tokens"), "start-up lines"))
    if cfg.max_model_len:
        f.append(Figure("max_model_len", "--max-model-len", cfg.max_model_len, "tokens", _basis(cfg, "max_model_len"),
                        "arguments / engine config"))
    f.append(Figure("parallelism", "tensor × pipeline parallel", f"TP {cfg.tensor_parallel_size} × PP "
                    f"{cfg.pipeline_parallel_size}", "", LOGGED if "tensor_parallel_size" in cfg.sources else DEFAULT,
                    "engine config" if "tensor_parallel_size" in cfg.sources else "not logged: 1 × 1"))
    dev = (cfg.device or "unknown").upper() if cfg.device in ("cpu", None) else cfg.device.upper()
    mem = f", {kv.total_memory_gib:g} GiB" if kv.total_memory_gib else ""
    f.append(Figure("device", "device", f"{dev}{mem}", "", LOGGED if cfg.device else DEFAULT,
                    "platform / KV cache lines" if cfg.device else "not logged"))
    if cfg.model:
        f.append(Figure("model", "model", cfg.model, "", LOGGED, "arguments"))
    return s
