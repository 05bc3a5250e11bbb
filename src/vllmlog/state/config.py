"""What a server run *has*: its configuration as the log states it (args line, engine config, KV-cache
sizing, platform), each value with where it came from.

Every threshold of the diagnosis that depends on the server (is Running at its cap? is the KV cache the
binding limit? is this speed normal for the device?) reads these facts instead of a global constant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..rules._util import ServerView

#: Provenance of a configuration value.
LOGGED, DERIVED, DEFAULT = "logged", "derived", "default"

_CPU = re.compile(r"\bcpu\b", re.I)
#: source files only vLLM's CPU backend logs from
_CPU_SOURCES = ("cpu_executor.py", "cpu_worker.py", "cpu_model_runner.py")


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def _int(v: Any) -> int | None:
    x = _num(v)
    return int(x) if x is not None and abs(x) < 1e18 else None  # nan, inf and 300-digit values: not a setting


def _truthy(v: Any) -> bool | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("true", "1", "yes")


@dataclass
class ServerConfig:
    """A server run's configuration, from its own start-up lines. ``sources[name]`` says where each value
    came from: ``logged`` (a line states it), ``derived`` (computed from logged values, e.g. KV tokens =
    blocks × block size) or ``default`` (vLLM's default, nothing logged)."""

    model: str | None = None
    version: str | None = None
    device: str | None = None
    """``cpu``, ``cuda``, ``rocm``, ``xpu``, ``tpu``, ``hpu``, ``neuron`` … (None when the log does not say)."""
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    block_size: int | None = None
    num_gpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    """KV-cache capacity in tokens (logged by V1; V0: blocks × block size)."""
    kv_cache_memory_gib: float | None = None
    max_concurrency: float | None = None
    """vLLM's own 'Maximum concurrency for N tokens per request: X×' (max-length requests that fit at once)."""
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    num_gpu_blocks_override: int | None = None
    kv_cache_dtype: str | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    enforce_eager: bool | None = None
    quantization: str | None = None
    dtype: str | None = None
    max_logprobs: int | None = None
    weights_gib: float | None = None
    """Memory the model's weights take on one GPU ('Model loading took N GiB')."""
    pooling: bool | None = None
    """The model is served for pooling (embed, classify, score, reward: ``--convert``/``--task``/``--runner``, or the
    tasks the server says it supports): requests are prefilled and never generate a token."""
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def cpu(self) -> bool:
        """The CPU backend (its advice differs: ``VLLM_CPU_KVCACHE_SPACE``, not ``--gpu-memory-utilization``)."""
        return self.device == "cpu"

    @property
    def world_size(self) -> int:
        """GPUs (or ranks) one replica uses: TP × PP."""
        return max(1, self.tensor_parallel_size) * max(1, self.pipeline_parallel_size)

    def kv_tokens_per_seq(self, running: float | None) -> float | None:
        """KV tokens each of ``running`` sequences can hold when they share the whole cache."""
        if not self.kv_cache_tokens or not running:
            return None
        return self.kv_cache_tokens / running

    def to_dict(self) -> dict[str, Any]:
        """JSON shape: every known value plus ``sources``."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "sources"}
        out = {k: v for k, v in out.items() if v is not None}
        out["sources"] = dict(self.sources)
        return out


def _set(cfg: ServerConfig, name: str, value: Any, source: str) -> None:
    if value is None or getattr(cfg, name) is not None and cfg.sources.get(name) in (LOGGED,):
        return
    setattr(cfg, name, value)
    cfg.sources[name] = source


#: Tasks / runners / conversions under which a model only pools (no token is generated).
POOLING_TASKS = frozenset({"embed", "embedding", "token_embed", "classify", "token_classify", "score", "reward",
                           "pooling", "encode", "rerank"})
_DEFAULT_TASK = re.compile(r"Defaulting to '(\w+)'")
_TASKS = re.compile(r"'(\w+)'")


def _pooling(e: Any) -> bool | None:
    """What one args / tasks line says about pooling (None: nothing)."""
    f = e.fields
    if e.kind == "server_args":
        a = f.get("args") if isinstance(f.get("args"), dict) else {}
        for key in ("runner", "convert", "task"):
            t = str(a.get(key) or f.get(key) or "").strip().lower()
            if t in POOLING_TASKS:
                return True
            if t in ("generate", "draft"):
                return False
        return None
    m = _DEFAULT_TASK.search(e.text)
    if m:
        return m.group(1).lower() in POOLING_TASKS
    tasks = {t.lower() for t in _TASKS.findall(str(f.get("tasks") or ""))}
    if tasks:
        return "generate" not in tasks and bool(tasks & POOLING_TASKS)
    return None


def server_config(v: ServerView) -> ServerConfig:
    """The configuration of one server run (``rules._util.ServerView``) from its args, engine config,
    KV-cache and platform lines."""
    srv = v.srv
    args, facts = srv.args, srv.config
    cfg = ServerConfig(model=srv.model, version=srv.version)

    def pick(*names: str) -> Any:
        for n in names:
            if args.get(n) is not None:
                return args[n]
            if facts.get(n) is not None:
                return facts[n]
        return None

    for name in ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "block_size", "num_gpu_blocks",
                 "kv_cache_tokens", "num_gpu_blocks_override", "max_logprobs"):
        _set(cfg, name, _int(pick(name)), LOGGED)
    for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
        x = _int(pick(name))
        if x:
            setattr(cfg, name, x)
            cfg.sources[name] = LOGGED
    _set(cfg, "gpu_memory_utilization", _num(pick("gpu_memory_utilization")), LOGGED)
    _set(cfg, "kv_cache_memory_gib", _num(pick("kv_cache_memory_gib")), LOGGED)
    _set(cfg, "max_concurrency", _num(pick("max_concurrency")), LOGGED)
    _set(cfg, "weights_gib", _num(pick("weights_gib")), LOGGED)
    for name in ("kv_cache_dtype", "quantization", "dtype"):
        x = pick(name)
        _set(cfg, name, str(x) if x not in (None, "auto", "None") else None, LOGGED)
    for name in ("enable_prefix_caching", "enable_chunked_prefill", "enforce_eager"):
        _set(cfg, name, _truthy(pick(name)), LOGGED)

    device = None
    cpu_records = False
    for e in v.events:
        k = e.kind
        f = e.fields
        if k in ("server_args", "model_tasks"):
            p = _pooling(e)
            if p is not None:
                _set(cfg, "pooling", p, LOGGED)
        if k == "platform" and f.get("platform"):
            device = device or str(f["platform"]).lower()
        elif k in ("kv_cache_size", "kv_cache_blocks") and f.get("kv_device"):
            d = str(f["kv_device"]).strip().lower()
            if d.startswith("cpu"):
                device = "cpu"
            elif device is None and d in ("gpu", "cuda"):
                device = "cuda"
            elif device is None:
                device = d
        elif k == "chunked_prefill" and cfg.max_num_batched_tokens is None:
            _set(cfg, "max_num_batched_tokens", _int(f.get("max_num_batched_tokens")), LOGGED)
            _set(cfg, "enable_chunked_prefill", True, LOGGED)
        elif k == "kv_cache_size":
            _set(cfg, "kv_cache_tokens", _int(f.get("kv_cache_tokens")), LOGGED)
            _set(cfg, "max_concurrency", _num(f.get("max_concurrency")), LOGGED)
        elif k == "engine_config" and f.get("device_config"):
            dc = str(f["device_config"]).lower()
            if dc in ("cpu", "xpu", "tpu", "hpu", "neuron"):
                device = dc
        if e.source is not None and e.source.startswith(_CPU_SOURCES):
            cpu_records = True  # the CPU executor / worker / model runner logged: the CPU backend, whatever else says
    if cpu_records:
        device = "cpu"
    if device is None and args.get("device"):
        device = str(args["device"]).lower()
    if device is not None and device.startswith("cpu"):
        device = "cpu"
    if device is not None:
        cfg.device = device
        cfg.sources["device"] = LOGGED

    # derived capacity: V0 logs blocks, V1 tokens; block size = tokens / blocks when both are known
    if cfg.kv_cache_tokens and cfg.num_gpu_blocks and not cfg.block_size:
        bs = cfg.kv_cache_tokens / cfg.num_gpu_blocks
        if bs == int(bs):
            _set(cfg, "block_size", int(bs), DERIVED)
    if not cfg.block_size:
        _set(cfg, "block_size", 128 if cfg.cpu else 16, DEFAULT)
    if cfg.kv_cache_tokens is None and cfg.num_gpu_blocks:
        _set(cfg, "kv_cache_tokens", cfg.num_gpu_blocks * (cfg.block_size or 16), DERIVED)
    if cfg.max_concurrency is None and cfg.kv_cache_tokens and cfg.max_model_len:
        _set(cfg, "max_concurrency", cfg.kv_cache_tokens / cfg.max_model_len, DERIVED)
    if cfg.gpu_memory_utilization is None and not cfg.cpu:
        _set(cfg, "gpu_memory_utilization", 0.9, DEFAULT)
    return cfg
