"""Start-up lines: version, arguments, engine config, model loading, KV-cache sizing, readiness."""

from __future__ import annotations

import ast
import re
from typing import Any

from .fields import bounded, to_int
from .registry import MESSAGES, LinePattern

_CFG = {
    "model": re.compile(r"\bmodel='([^']*)'"),
    "max_seq_len": re.compile(r"\bmax_seq_len=(\d+)"),
    "tensor_parallel_size": re.compile(r"\btensor_parallel_size=(\d+)"),
    "pipeline_parallel_size": re.compile(r"\bpipeline_parallel_size=(\d+)"),
    "data_parallel_size": re.compile(r"\bdata_parallel_size=(\d+)"),
    "dtype": re.compile(r"\bdtype=([\w.]+)"),
    "quantization": re.compile(r"\bquantization=(\w+)"),
    "enforce_eager": re.compile(r"\benforce_eager=(\w+)"),
    "enable_prefix_caching": re.compile(r"\benable_prefix_caching=(\w+)"),
    "kv_cache_dtype": re.compile(r"\bkv_cache_dtype=(\w+)"),
    "device_config": re.compile(r"\bdevice_config=(\w+)"),
    "trust_remote_code": re.compile(r"\btrust_remote_code=(\w+)"),
}
_INTS = {"max_seq_len", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"}
_BOOLS = {"enforce_eager", "enable_prefix_caching", "trust_remote_code"}

# argument names worth lifting out of `non-default args` / `args: Namespace(...)`
KEY_ARGS = (
    "model", "served_model_name", "max_num_seqs", "max_model_len", "max_num_batched_tokens",
    "gpu_memory_utilization", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
    "enable_chunked_prefill", "enable_prefix_caching", "swap_space", "block_size", "dtype",
    "quantization", "enforce_eager", "kv_cache_dtype", "max_logprobs", "port", "host",
    "num_gpu_blocks_override", "trust_remote_code", "disable_log_requests", "enable_log_requests",
    "speculative_config", "distributed_executor_backend", "api_server_count", "enable_lora", "max_loras",
    "cpu_offload_gb", "attention_backend", "scheduling_policy",
)


def _engine_config(f: dict[str, Any]) -> None:
    cfg = f.pop("config", "")
    for name, rx in _CFG.items():
        m = rx.search(cfg)
        if m:
            v: Any = m.group(1)
            if name in _INTS:
                v = to_int(v)
            elif name in _BOOLS:
                v = v == "True"
            elif v == "None":
                v = None
            f[name] = v
    if "max_seq_len" in f:
        f["max_model_len"] = f["max_seq_len"]


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _jsonable(v: Any) -> Any:
    if isinstance(v, (int, float)):
        return bounded(v)  # a literal of 300 digits is not a setting
    if isinstance(v, str) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [_jsonable(x) for x in v]
    return repr(v)


_REDACT = {"api_key", "hf_token", "ssl_keyfile"}


def _args_dict(f: dict[str, Any]) -> None:
    d = _literal(f.pop("args"))
    if isinstance(d, dict):
        d = {k: ("***" if k in _REDACT and d[k] else bounded(v)) for k, v in d.items()}
        f["args"] = _jsonable(d)
        _lift(f, d)


_NS_ITEM = re.compile(r"(?<!\w)(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|\[[^\]]*\]|\{[^}]*\}|[^,()]+)")


_NUMBERISH = re.compile(r"[-+]?[0-9][0-9_.eE+-]*")


def _namespace(f: dict[str, Any]) -> None:
    body = f.pop("ns")
    d: dict[str, Any] = {}
    for k, v in _NS_ITEM.findall(body):
        raw = v.strip()
        lit = _literal(raw)
        # a number literal_eval refused (beyond Python's 4300 digits) is out of range, not a string setting
        d[k] = lit if lit is not None or raw == "None" or _NUMBERISH.fullmatch(raw) else raw
    d = {k: ("***" if k in _REDACT and d[k] else bounded(v)) for k, v in d.items()}
    f["args"] = _jsonable(d)
    _lift(f, d)


def _lift(f: dict[str, Any], d: dict[str, Any]) -> None:
    for k in KEY_ARGS:
        if k in d and d[k] is not None:
            f[k] = _jsonable(d[k])
    if "model" not in f and d.get("model_tag"):
        f["model"] = d["model_tag"]


for _p in [
    LinePattern(
        id="startup.version",
        kind="server_version",
        prefix="vLLM API server version ",
        regex=r"^vLLM API server version (?P<version>\S+)$",
        examples=["vLLM API server version 0.4.3"],
        doc="API server banner with the vLLM version (0.4–0.14).",
        source="v0/v1",
    ),
    LinePattern(
        id="startup.version_line",
        kind="server_version",
        prefix="vLLM server version ",
        regex=r"^vLLM server version (?P<version>\S+), serving model (?P<model>.+)$",
        examples=["vLLM server version 0.32.0, serving model /models/tiny"],
        doc="One-line banner (logo disabled or JSON logging).",
        source="v1",
    ),
    LinePattern(
        id="startup.logo_version",
        kind="server_version",
        prefix=None,
        contains="  version ",
        regex=r"^.*[█▄▀].*\s{2}version (?P<version>\d+\.\d+\S*)\s*$",
        examples=[" ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0"],
        doc="ASCII-art logo line carrying the version (0.15+).",
        source="v1",
    ),
    LinePattern(
        id="startup.logo_model",
        kind="server_model",
        prefix=None,
        contains="  model ",
        regex=r"^.*[█▄▀].*\s{2}model\s+(?P<model>\S.*?)\s*$",
        examples=["  █▄█▀ █     █     █     █  model   /models/tiny"],
        doc="ASCII-art logo line carrying the model (0.15+).",
        source="v1",
    ),
    LinePattern(
        id="startup.logo_art",
        kind="server_banner",
        prefix=None,
        contains="█",
        regex=r"^[\s█▄▀]*$",
        examples=["       █     █     █▄   ▄█"],
        doc="ASCII-art logo line.",
        source="v1",
    ),
    LinePattern(
        id="startup.logo_art2",
        kind="server_banner",
        prefix=None,
        contains="▀",
        regex=r"^[\s█▄▀]*$",
        examples=["   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀"],
        doc="ASCII-art logo line.",
        source="v1",
    ),
    LinePattern(
        id="startup.non_default_args",
        kind="server_args",
        prefix="non-default args: ",
        regex=r"^non-default args: (?P<args>\{.*\})$",
        post=_args_dict,
        examples=["non-default args: {'model_tag': '/models/tiny', 'host': '127.0.0.1', 'port': 8021, 'max_model_len': 512, 'max_num_seqs': 4}"],
        doc="The server's non-default arguments (0.9+); key ones lifted into fields.",
        source="v1",
    ),
    LinePattern(
        id="startup.args_namespace",
        kind="server_args",
        prefix="args: ",
        regex=r"^args: Namespace\((?P<ns>.*)\)$",
        post=_namespace,
        examples=["args: Namespace(model='meta-llama/Llama-3.1-8B-Instruct', pipeline_parallel_size=2, tensor_parallel_size=1, distributed_executor_backend='mp', max_model_len=16384)"],
        doc="The server's full arguments (0.4.2–0.8.x).",
        source="v0",
    ),
    LinePattern(
        id="startup.engine_config",
        kind="engine_config",
        prefix="Initializing ",
        regex=r"^Initializing an? (?:V[01] )?LLM engine(?: \(v(?P<version>[^)]+)\))? with config: (?P<config>.*)$",
        post=_engine_config,
        examples=[
            "Initializing a V1 LLM engine (v0.32.0) with config: model='/models/tiny', speculative_config=None, tokenizer='/models/tiny', dtype=torch.bfloat16, max_seq_len=512, tensor_parallel_size=1, enable_prefix_caching=True",
            "Initializing an LLM engine with config: model='/home/lab/models/chinese-alpaca-2-7b', tokenizer='/home/lab/models/chinese-alpaca-2-7b', tokenizer_mode=auto, dtype=torch.float16, max_seq_len=4096",
        ],
        doc="Engine construction: the best version fingerprint and the effective config.",
        source="v0/v1",
    ),
    LinePattern(
        id="startup.architecture",
        kind="model_architecture",
        prefix="Resolved architecture: ",
        regex=r"^Resolved architecture: (?P<architecture>\S+)$",
        examples=["Resolved architecture: LlamaForCausalLM"],
        doc="Model architecture.",
        source="v1",
    ),
    LinePattern(
        id="startup.max_model_len",
        kind="max_model_len",
        prefix="Using max model len ",
        regex=r"^Using max model len (?P<max_model_len>\d+)$",
        examples=["Using max model len 512"],
        doc="Effective max model length.",
        source="v1",
    ),
    LinePattern(
        id="startup.chunked_prefill",
        kind="chunked_prefill",
        prefix="Chunked prefill is enabled",
        regex=r"^Chunked prefill is enabled with max_num_batched_tokens=(?P<max_num_batched_tokens>\d+)\.?$",
        examples=["Chunked prefill is enabled with max_num_batched_tokens=512."],
        doc="Chunked prefill and its token budget.",
        source="v0/v1",
    ),
    LinePattern(
        id="startup.platform",
        kind="platform",
        prefix="Automatically detected platform",
        regex=r"^Automatically detected platform (?P<platform>\w+)\.?$",
        examples=["Automatically detected platform cuda."],
        doc="Detected device platform.",
        source="v1",
    ),
    LinePattern(
        id="startup.gpu_blocks",
        kind="kv_cache_blocks",
        prefix="# ",
        regex=r"^# (?P<kv_device>\w+) blocks: (?P<num_gpu_blocks>\d+)(?:, # CPU blocks: (?P<num_cpu_blocks>\d+))?$",
        examples=["# GPU blocks: 220, # CPU blocks: 512", "# cuda blocks: 1171, # CPU blocks: 7281", "# GPU blocks: 4000"],
        doc="KV-cache capacity in blocks.",
        source="v0/v1",
    ),
    LinePattern(
        id="startup.kv_cache_size",
        kind="kv_cache_size",
        prefix=None,
        contains="KV cache size: ",
        regex=r"^(?P<kv_device>[\w +]+?) KV cache size: (?P<kv_cache_tokens>[\d,]+) tokens(?:, Maximum concurrency for (?P<max_concurrency_tokens>[\d,]+) tokens per request: (?P<max_concurrency>[\d.]+)x)?$",
        examples=["GPU KV cache size: 381,024 tokens", "CPU KV cache size: 524,288 tokens, Maximum concurrency for 512 tokens per request: 1024.00x"],
        doc="KV-cache capacity in tokens (and max concurrency, 0.28+).",
        source="v1",
    ),
    LinePattern(
        id="startup.max_concurrency",
        kind="kv_cache_size",
        prefix="Maximum concurrency ",
        regex=r"^Maximum concurrency for (?P<max_concurrency_tokens>[\d,]+) tokens per request: (?P<max_concurrency>[\d.]+)x$",
        examples=["Maximum concurrency for 32,768 tokens per request: 11.63x"],
        doc="How many max-length requests fit in the KV cache at once.",
        source="v0/v1",
    ),
    LinePattern(
        id="startup.kv_cache_memory",
        kind="kv_cache_memory",
        prefix="Available KV cache memory",
        regex=r"^Available KV cache memory: (?P<kv_cache_memory_gib>[\d.]+) GiB$",
        examples=["Available KV cache memory: 1.0 GiB"],
        doc="Memory left for the KV cache after profiling.",
        source="v1",
    ),
    LinePattern(
        id="startup.loading_model",
        kind="model_loading",
        prefix="Starting to load model",
        regex=r"^Starting to load model (?P<model>.+?)\.\.\.$",
        examples=["Starting to load model /models/tiny..."],
        doc="Model weight loading starts.",
        source="v0/v1",
    ),
    LinePattern(
        id="startup.weights_took",
        kind="model_loaded",
        prefix="Loading weights took",
        regex=r"^Loading weights took (?P<duration_s>[\d.]+ seconds)$",
        examples=["Loading weights took 0.03 seconds"],
        doc="Weights loaded.",
        source="v1",
    ),
    LinePattern(
        id="startup.model_loading_took",
        kind="model_loaded",
        prefix="Model loading took",
        regex=r"^Model loading took (?P<weights_gib>[\d.]+) Gi?B(?: memory)? and (?P<duration_s>[\d.]+ seconds)$",
        examples=["Model loading took 0.01 GiB memory and 0.330 seconds", "Model loading took 14.9595 GB and 5.120000 seconds"],
        doc="Model loaded: memory and time.",
        source="v1",
    ),
    LinePattern(
        id="startup.model_weights_took",
        kind="model_loaded",
        prefix="Loading model weights took",
        regex=r"^Loading model weights took (?P<weights_gib>[\d.]+) GB$",
        examples=["Loading model weights took 0.2389 GB"],
        doc="V0 model loaded (memory).",
        source="v0",
    ),
    LinePattern(
        id="startup.memory_profiling",
        kind="memory_profiling",
        prefix="Memory profiling takes",
        regex=r"^Memory profiling takes (?P<duration_s>[\d.]+ seconds)",
        examples=["Memory profiling takes 4.21 seconds"],
        doc="V0 memory profiling summary (multi-line record).",
        source="v0",
    ),
    LinePattern(
        id="startup.graph_captured",
        kind="cuda_graph_captured",
        prefix="Graph capturing finished",
        regex=r"^Graph capturing finished in (?P<duration_s>[\d.]+) secs?(?:, took (?P<graph_memory_gib>[\d.]+) GiB)?\.?$",
        examples=["Graph capturing finished in 9 secs.", "Graph capturing finished in 21 secs, took 0.52 GiB"],
        doc="CUDA-graph capture done.",
        source="v0/v1",
    ),
    LinePattern(
        id="startup.engine_initialized",
        kind="engine_initialized",
        prefix="init engine ",
        regex=r"^init engine \(profile, create kv cache, warmup model\) took (?P<duration_s>[\d.]+) (?:seconds|s)",
        examples=["init engine (profile, create kv cache, warmup model) took 44.12 seconds", "init engine (profile, create kv cache, warmup model) took 5.61 s (compilation: 3.20 s)"],
        doc="Engine start-up finished.",
        source="v1",
    ),
    LinePattern(
        id="startup.server_starting",
        kind="server_starting",
        prefix="Starting vLLM ",
        regex=r"^Starting vLLM (?:API )?server(?: \d+)? on (?P<url>\S+)$",
        examples=["Starting vLLM server on http://127.0.0.1:8021", "Starting vLLM API server 0 on http://0.0.0.0:8000", "Starting vLLM API server on http://0.0.0.0:8000"],
        doc="API server about to listen.",
        source="v1",
    ),
    LinePattern(
        id="startup.routes",
        kind="server_routes",
        prefix="Available routes are",
        regex=r"^Available routes are:$",
        examples=["Available routes are:"],
        doc="Route listing starts.",
        source="v1",
    ),
    LinePattern(
        id="startup.route",
        kind="server_route",
        prefix="Route: ",
        regex=r"^Route: (?P<path>\S+), (?:Methods|Endpoint): (?P<method>.*)$",
        examples=["Route: /v1/completions, Methods: POST"],
        doc="One API route.",
        source="v1",
    ),
]:
    MESSAGES.add(_p)
