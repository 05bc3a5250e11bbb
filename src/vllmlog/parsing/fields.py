"""Typed field converters and the global field catalogue (name → type, unit, meaning).

A field name means the same thing, with the same type, whatever pattern produced it; the docs of
`vllmlog kinds` are generated from this table.
"""

from __future__ import annotations

from typing import Any, Callable

import orjson


#: Largest magnitude a number read from a log may have; anything beyond is not a measurement (a
#: 309-digit "Running: 999…9 reqs" would overflow every float sum downstream) and converts to None.
#: 2**63: what Prometheus, JSON consumers and numpy int64 hold; 1e38 for floats keeps sums (and
#: sums of squares) of millions of values finite, and is what the compiled scanner's native number
#: reader (at most 38 digits) can produce, so both parsers agree.
INT_LIMIT = 1 << 63
FLOAT_LIMIT = 1e38
_MAX_DIGITS = 40
"""Longer digit runs are out of range whatever they say (and never reach ``int()``'s quadratic path)."""


def to_int(s: str) -> int | None:
    """'381,024' → 381024; 'None' → None; out of range (|v| ≥ 2**63, inf, nan) → None."""
    s = s.strip().replace(",", "")
    if not s or s == "None" or len(s) > _MAX_DIGITS:
        return None
    try:
        v = int(s)
    except ValueError:
        try:
            f = float(s)
        except ValueError:
            return None
        if not -FLOAT_LIMIT <= f <= FLOAT_LIMIT:  # also inf and nan
            return None
        v = int(f)
    return v if -INT_LIMIT < v < INT_LIMIT else None


def to_float(s: str) -> float | None:
    """'1,234.5' → 1234.5; 'nan' stays nan; junk or out of range (|v| > 1e38, inf) → None."""
    s = s.strip().replace(",", "")
    if len(s) > _MAX_DIGITS:
        return None
    try:
        v = float(s)
    except ValueError:
        return None
    if -FLOAT_LIMIT <= v <= FLOAT_LIMIT or v != v:
        return v
    return None


def bounded(v: Any) -> Any:
    """A number read from a log as it is when in range (see ``INT_LIMIT``/``FLOAT_LIMIT``), else None;
    anything else unchanged. For values that did not go through ``to_int``/``to_float`` (literals)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if -INT_LIMIT < v < INT_LIMIT else None
    if isinstance(v, float):
        return v if -FLOAT_LIMIT <= v <= FLOAT_LIMIT else None
    return v


def to_ratio(s: str) -> float | None:
    """A percentage as vLLM prints it ('45.3', '45.3%') → 0.453."""
    v = to_float(s.rstrip("%"))
    return None if v is None else v / 100.0


def to_seconds(s: str) -> float | None:
    """'0.342s', '60s', '12 ms', '1.5 seconds' → seconds."""
    s = s.strip()
    mult = 1.0
    for suffix, m in (("ms", 1e-3), ("seconds", 1.0), ("secs", 1.0), ("sec", 1.0), ("s", 1.0)):
        if s.endswith(suffix):
            s = s[: -len(suffix)].strip()
            mult = m
            break
    v = to_float(s)
    return None if v is None else v * mult


def _json_safe(v: Any) -> Any:
    """``v`` with integers orjson cannot write (outside int64/uint64) as strings of their digits."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 64) else str(v)
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    return v


def dumps_safe(obj: Any, option: int | None = None) -> bytes:
    """``orjson.dumps(obj, default=str)``, writing integers beyond 64 bits as strings instead of raising."""
    try:
        return orjson.dumps(obj, option=option, default=str)
    except TypeError:
        return orjson.dumps(_json_safe(obj), option=option, default=str)


def to_bool(s: str) -> bool | None:
    """'True' → True, 'False' → False."""
    s = s.strip()
    return True if s == "True" else False if s == "False" else None


def to_str(s: str) -> str:
    """Identity (stripped)."""
    return s.strip()


CONVERTERS: dict[str, Callable[[str], Any]] = {
    "int": to_int,
    "float": to_float,
    "ratio": to_ratio,
    "seconds": to_seconds,
    "str": to_str,
    "bool": to_bool,
}

# name: (type, unit, meaning)
FIELDS: dict[str, tuple[str, str, str]] = {
    # --- engine state (stats lines, handbook scheduling lines) ---
    "engine": ("int", "", "data-parallel engine index (`Engine 000:`)"),
    "engines_aggregated": ("int", "", "number of engines in an `N Engines Aggregated:` stats line"),
    "prompt_throughput": ("float", "tokens/s", "average prompt (prefill) throughput over the stats interval"),
    "generation_throughput": ("float", "tokens/s", "average generation (decode) throughput over the stats interval"),
    "running": ("int", "requests", "requests in the running batch"),
    "waiting": ("int", "requests", "requests waiting to be scheduled (V0 `Pending`)"),
    "swapped": ("int", "requests", "requests swapped out to CPU (V0 only)"),
    "deferred": ("int", "requests", "deferred requests (0.20+)"),
    "preemptions": ("int", "preemptions", "preemptions in the stats interval (V1 0.11.2+)"),
    "corrupted": ("int", "requests", "requests with NaNs in logits"),
    "kv_cache_usage": ("ratio", "0..1", "device KV-cache usage (GPU/CPU/XPU blocks used / total)"),
    "cpu_kv_cache_usage": ("ratio", "0..1", "V0 CPU swap-space KV usage"),
    "kv_device": ("str", "", "device named in the KV usage label (GPU, CPU, XPU, …)"),
    "prefix_cache_hit_rate": ("ratio", "0..1", "prefix-cache hit rate"),
    "cpu_prefix_cache_hit_rate": ("ratio", "0..1", "V0 CPU prefix-cache hit rate"),
    "external_prefix_cache_hit_rate": ("ratio", "0..1", "KV-connector prefix-cache hit rate"),
    "mm_cache_hit_rate": ("ratio", "0..1", "multimodal cache hit rate"),
    "kv_fetch_waiting": ("int", "requests", "KV fetch: waiting to start"),
    "kv_fetch_in_progress": ("int", "requests", "KV fetch: in progress"),
    "kv_fetch_completed_waiting": ("int", "requests", "KV fetch: completed, waiting"),
    "queue_size": ("int", "requests", "waiting-queue size after adding the request (handbook)"),
    # --- per request ---
    "prompt_tokens": ("int", "tokens", "prompt (input) tokens"),
    "output_tokens": ("int", "tokens", "generated tokens"),
    "total_tokens": ("int", "tokens", "prompt + generated tokens"),
    "max_tokens": ("int", "tokens", "requested max_tokens"),
    "n": ("int", "", "number of sequences requested"),
    "blocks": ("int", "blocks", "KV blocks allocated to the request (handbook `Block tables`)"),
    "step": ("int", "", "decode step number"),
    "batch_size": ("int", "requests", "decode batch size"),
    "prefill_s": ("seconds", "s", "prefill latency as logged"),
    "prefill_throughput": ("float", "tokens/s", "prefill throughput as logged"),
    "generation_speed": ("float", "tokens/s", "per-request token generation speed as logged"),
    "threshold": ("float", "", "threshold printed in the warning"),
    "waiting_threshold_s": ("seconds", "s", "waiting-time threshold printed in the warning"),
    "status": ("str", "", "final status (success, error, cancelled, aborted)"),
    "reason": ("str", "", "reason text"),
    "e2e_s": ("seconds", "s", "end-to-end latency as logged (arrival → finish)"),
    "ttft_s": ("seconds", "s", "time to first token as logged"),
    "tpot_s": ("seconds", "s", "time per output token as logged"),
    "timeout_s": ("seconds", "s", "timeout named in the message"),
    "request_ids": ("str", "", "list of request ids (aborted request(s) line)"),
    "streaming": ("str", "", "`delta` / `complete` for streamed responses, null otherwise"),
    "finish_reason": ("str", "", "stop, length, abort, error, …"),
    "error": ("str", "", "error text"),
    "mode": ("str", "", "mode named in the message: preemption mode (RECOMPUTE / SWAP), shutdown mode (abort / drain)"),
    "cumulative_preemptions": ("int", "preemptions", "total_num_cumulative_preemption in a V0 warning"),
    "limit": ("int", "tokens", "token limit named in the message"),
    # --- http ---
    "client": ("str", "", "client address of an access line"),
    "method": ("str", "", "HTTP method"),
    "path": ("str", "", "HTTP path"),
    "http_status": ("int", "", "HTTP status code"),
    # --- startup / config ---
    "version": ("str", "", "vLLM version"),
    "model": ("str", "", "model name or path"),
    "architecture": ("str", "", "model architecture"),
    "model_type": ("str", "", "the checkpoint's model_type (config.json)"),
    "replica": ("str", "", "Ray Serve replica (id, deployment, app)"),
    "available_blocks": ("int", "blocks", "KV/state cache blocks available"),
    "max_model_len": ("int", "tokens", "max model length"),
    "max_seq_len": ("int", "tokens", "model max sequence length"),
    "num_gpu_blocks": ("int", "blocks", "device KV blocks"),
    "num_cpu_blocks": ("int", "blocks", "CPU swap blocks"),
    "kv_cache_tokens": ("int", "tokens", "KV-cache capacity in tokens"),
    "max_concurrency": ("float", "x", "max-length requests that fit in the KV cache at once"),
    "max_concurrency_tokens": ("int", "tokens", "request length used for the max-concurrency figure"),
    "kv_cache_memory_gib": ("float", "GiB", "memory available for the KV cache"),
    "weights_gib": ("float", "GiB", "memory taken by model weights"),
    "duration_s": ("seconds", "s", "duration named in the message"),
    "url": ("str", "", "listen URL"),
    "pid": ("int", "", "process id"),
    "exit_code": ("int", "", "process exit code (-9 = SIGKILL, e.g. the OOM killer)"),
    "worker": ("str", "", "worker name"),
    "exit_type": ("str", "", "Ray's worker exit type (SYSTEM_ERROR: the process vanished without a Python error)"),
    "rank": ("int", "", "distributed rank"),
    "needed_gib": ("float", "GiB", "memory needed"),
    "available_gib": ("float", "GiB", "memory available"),
    "estimated_max_model_len": ("int", "tokens", "max model length vLLM estimates would fit"),
    "requested_tokens": ("int", "tokens", "tokens a rejected request asked for"),
    "tried_to_allocate_gib": ("float", "GiB", "allocation that failed (CUDA OOM)"),
    "total_capacity_gib": ("float", "GiB", "device capacity (CUDA OOM)"),
    "free_gib": ("float", "GiB", "free device memory (CUDA OOM)"),
    "exc_type": ("str", "", "exception type of a traceback"),
    "exc_message": ("str", "", "exception message of a traceback"),
    "exc_kind": ("str", "", "event kind the exception message matches (e.g. cuda_oom)"),
    "exc_kinds": ("str", "", "every event kind the exceptions of a chain match, first cause first (when more than one)"),
    "repeated": ("int", "", "Ray's `[repeated Nx across cluster]` count"),
    "percent": ("int", "%", "progress-bar percentage"),
    "seq": ("int", "", "NCCL work sequence number"),
    "op": ("str", "", "NCCL collective operation (ALLREDUCE, …)"),
    "severity": ("str", "", "severity letter/word of a C++ or NCCL line (E/W/I, INFO/WARN)"),
    "nccl_src": ("str", "", "NCCL source position a WARN line names (misc/shmutils.cc:72)"),
    "resources": ("str", "", "resources Ray could not schedule ({'GPU': 1.0, 'CPU': 1.0})"),
    "warning": ("str", "", "Python warning category"),
    "platform": ("str", "", "device platform"),
    "max_num_batched_tokens": ("int", "tokens", "token budget per scheduler step"),
    "graph_memory_gib": ("float", "GiB", "memory taken by CUDA graphs"),
    "context_requests": ("int", "requests", "requests in prefill this step"),
    "context_tokens": ("int", "tokens", "prefill tokens this step"),
    "generation_requests": ("int", "requests", "requests in decode this step"),
    "generation_tokens": ("int", "tokens", "decode tokens this step"),
    "elapsed_ms": ("float", "ms", "step time"),
    "port": ("int", "", "TCP port"),
    "gpu_memory_utilization": ("float", "0..1", "--gpu-memory-utilization"),
    "param": ("str", "", "request parameter named in an error"),
    "file": ("str", "", "file named in the message"),
    "advice": ("str", "", "advice text printed with a warning"),
    "architectures": ("str", "", "model architectures"),
    "config": ("str", "", "config class named in a validation error"),
    "signal": ("str", "", "signal named in the message, or implied by an exit code (-9 SIGKILL, -6 SIGABRT)"),
    "exc_chain": ("str", "", "chained exceptions of a traceback, innermost first"),
    "ran_s": ("seconds", "s", "how long the NCCL work ran before the watchdog fired"),
    "args": ("str", "", "server arguments as a dict"),
    # --- engine config / server args lifted from `Initializing … with config:` and `non-default args` ---
    "tensor_parallel_size": ("int", "", "--tensor-parallel-size"),
    "pipeline_parallel_size": ("int", "", "--pipeline-parallel-size"),
    "data_parallel_size": ("int", "", "--data-parallel-size"),
    "dtype": ("str", "", "model dtype"),
    "quantization": ("str", "", "quantization method"),
    "enforce_eager": ("bool", "", "--enforce-eager (no CUDA graphs)"),
    "enable_prefix_caching": ("bool", "", "automatic prefix caching on"),
    "enable_chunked_prefill": ("bool", "", "chunked prefill on"),
    "kv_cache_dtype": ("str", "", "KV-cache dtype"),
    "device_config": ("str", "", "device"),
    "trust_remote_code": ("bool", "", "--trust-remote-code"),
    "served_model_name": ("str", "", "--served-model-name"),
    "max_num_seqs": ("int", "requests", "--max-num-seqs (max running requests)"),
    "swap_space": ("float", "GiB", "--swap-space (V0 CPU swap)"),
    "block_size": ("int", "tokens", "KV-cache block size"),
    "max_logprobs": ("int", "", "--max-logprobs"),
    "num_gpu_blocks_override": ("int", "blocks", "--num-gpu-blocks-override"),
    "disable_log_requests": ("bool", "", "--disable-log-requests"),
    "enable_log_requests": ("bool", "", "--enable-log-requests"),
    "speculative_config": ("str", "", "speculative decoding config"),
    "distributed_executor_backend": ("str", "", "mp / ray / uni"),
    "api_server_count": ("int", "", "--api-server-count"),
    "host": ("str", "", "listen host"),
    # --- run-time / lifecycle (runtime.py) ---
    "component": ("str", "", "component named in a `[shutdown]` step (API server, MPClient, EngineCore, Executor, …)"),
    "action": ("str", "", "what happened: shutdown step text, dump type, compile/warm-up stage"),
    "count": ("int", "", "count named in the message (processes, workers)"),
    "cudagraph_mode": ("str", "", "CUDA-graph mode of a model step (NONE, PIECEWISE, FULL)"),
    "num_tokens": ("int", "tokens", "tokens in a model step's batch"),
    "total_gpu_memory_gib": ("float", "GiB", "total device memory (or total memory for the CPU backend)"),
    "usable_memory_gib": ("float", "GiB", "total memory × gpu_memory_utilization"),
    "non_torch_memory_gib": ("float", "GiB", "memory used outside PyTorch (NCCL, CUDA context)"),
    "activation_peak_gib": ("float", "GiB", "PyTorch activation peak during profiling"),
    "library": ("str", "", "shared library named in the message"),
    "world_size": ("int", "", "distributed world size"),
    "backend": ("str", "", "backend named in the message (gloo/nccl, mp/ray, attention backend)"),
    "tasks": ("str", "", "model tasks as printed"),
    "topic": ("str", "", "what an environment notice is about (triton, ulimit, ld_preload, …)"),
    "state": ("str", "", "engine loop state: idle / active"),
    "leaked": ("int", "", "leaked objects reported at exit"),
}


def convert(name: str, raw: str | None) -> Any:
    """Convert one captured group by the catalogue type of its name (unknown names stay strings)."""
    if raw is None:
        return None
    spec = FIELDS.get(name)
    if spec is None:
        return raw
    return CONVERTERS[spec[0]](raw)


def converter(name: str) -> Callable[[str], Any] | None:
    """The converter of a catalogued field name (None: keep the raw string)."""
    spec = FIELDS.get(name)
    return None if spec is None else CONVERTERS[spec[0]]
