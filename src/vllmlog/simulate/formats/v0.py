"""vLLM V0 engine logs as 0.6.1 prints them (`INFO MM-DD HH:MM:SS file.py:N] msg`, no brackets)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from .base import (
    Clock, LogWriter, Sink, id_pool, illegal_memory_access, prompt_text, record, token_ids, uvicorn_shutdown,
)

if TYPE_CHECKING:
    from ..config import Fault, SimConfig
    from ..model import SimRequest
    from ..scheduler import StatsSnapshot

V0_VERSION = "0.6.1.post2"
PY = "/usr/local/lib/python3.10/dist-packages"
ANSI_PREFIX = "\x1b[1;36m(VllmWorkerProcess pid={pid})\x1b[0;0m "

OOM_TAIL = (
    "CUDA out of memory. Tried to allocate {alloc:.2f} GiB. GPU 0 has a total capacity of {total:.2f} GiB of which "
    "{free} is free. Including non-PyTorch memory, this process has {inuse:.2f} GiB memory in use. Of the allocated "
    "memory {alloc_pt:.2f} GiB is allocated by PyTorch, and {reserved} is reserved by PyTorch but unallocated. If "
    "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
    "fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)

SAMPLING_V0 = (
    "SamplingParams(n=1, best_of=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, "
    "temperature=0.7, top_p=1.0, top_k=-1, min_p=0.0, seed=None, use_beam_search=False, length_penalty=1.0, "
    "early_stopping=False, stop=[], stop_token_ids=[], include_stop_str_in_output=False, ignore_eos=False, "
    "max_tokens={max_tokens}, min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, "
    "spaces_between_special_tokens=True, truncate_prompt_tokens=None)"
)

ROUTES_V0 = [
    ("/openapi.json", "HEAD, GET"), ("/docs", "HEAD, GET"), ("/docs/oauth2-redirect", "HEAD, GET"),
    ("/redoc", "HEAD, GET"), ("/health", "GET"), ("/tokenize", "POST"), ("/detokenize", "POST"),
    ("/v1/models", "GET"), ("/version", "GET"), ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"), ("/v1/embeddings", "POST"),
]


def oom_message(rng_alloc: float, total: float, free_mib: float) -> str:
    """PyTorch's CUDA OOM text (without the exception name)."""
    inuse = total - free_mib / 1024
    return OOM_TAIL.format(
        alloc=rng_alloc, total=total, free=f"{free_mib:.2f} MiB", inuse=inuse,
        alloc_pt=inuse - 1.1, reserved="612.45 MiB",
    )


def watchdog_lines(clock: Clock, rng: random.Random, t: float, fault: Fault, ranks: int) -> str:
    """PyTorch C++ NCCL watchdog output of every rank (never prefixed by vLLM)."""
    ms = int(fault.timeout_s * 1000)
    ran = ms + 31
    seq = 8 + int(rng.random() * 90000)
    numel = 4096 * 256
    out = []
    frac = rng.random() * 0.9
    for rank in range(ranks):
        g = clock.glog(t + frac + 0.000173 * rank)
        work = (f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn={numel}, NumelOut={numel}, "
                f"Timeout(ms)={ms})")
        out += [
            f"[rank{rank}]:[{g} ProcessGroupNCCL.cpp:607] [Rank {rank}] Watchdog caught collective operation "
            f"timeout: {work} ran for {ran} milliseconds before timing out.",
            f"[rank{rank}]:[{g} ProcessGroupNCCL.cpp:1664] [PG 3 Rank {rank}] Exception (either an error or "
            f"timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL "
            f"work: {seq - 1}.",
            f"[rank{rank}]:[{g} ProcessGroupNCCL.cpp:621] [Rank {rank}] Some NCCL operations have failed or timed "
            "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
            "corrupted/incomplete data.",
            f"[rank{rank}]:[{g} ProcessGroupNCCL.cpp:627] [Rank {rank}] To avoid data inconsistency, we are "
            "taking the entire process down.",
            f"[rank{rank}]:[{g} ProcessGroupNCCL.cpp:1515] [PG 3 Rank {rank}] Process group watchdog thread "
            f"terminated with exception: [Rank {rank}] Watchdog caught collective operation timeout: {work} ran "
            f"for {ran} milliseconds before timing out.",
        ]
    return "\n".join(out) + "\n"


class V0Writer(LogWriter):
    """V0 `AsyncLLMEngine` server (0.6.1): request logger on, `Finished request` lines, stats every 5 s."""

    name = "v0"
    v1 = False
    version = V0_VERSION
    stats_interval = 5.0
    stats_tick = 10.0
    stats_periodic = False
    max_log_len = 100

    def __init__(self, cfg: SimConfig, sink: Sink) -> None:
        super().__init__(cfg, sink)
        self.tp = cfg.engine.tensor_parallel_size
        self._ids: list[str] | None = None

    # ------------------------------------------------------------------ prefix helpers
    def p(self, t: float, level: str, where: str) -> str:
        """`LEVEL MM-DD HH:MM:SS file.py:N] `."""
        return f"{level} {self.clock.stamp(t)} {where}] "

    def line(self, t: float, level: str, where: str, msg: str) -> None:
        """Emit one vLLM record."""
        self.sink.emit(t, f"{level} {self.clock.stamp(t)} {where}] {msg}\n")

    def wline(self, t: float, rank: int, level: str, where: str, msg: str) -> None:
        """Emit a line from a TP worker process (ANSI-coloured prefix, as 0.4.3–0.11 always print it)."""
        pre = ANSI_PREFIX.format(pid=self.worker_pids[rank])
        self.sink.emit(t, f"{pre}{level} {self.clock.stamp(t)} {where}] {msg}\n")

    def raw(self, t: float, text: str) -> None:
        """Emit lines that bypass vLLM's formatter (tracebacks, tqdm, uvicorn, C++)."""
        self.sink.emit_text(t, text if text.endswith("\n") else text + "\n")

    # ------------------------------------------------------------------ start-up
    def _args(self) -> str:
        e = self.cfg.engine
        return (
            "args: Namespace(host=None, port=8000, uvicorn_log_level='info', allow_credentials=False, "
            "allowed_origins=['*'], allowed_methods=['*'], allowed_headers=['*'], api_key=None, lora_modules=None, "
            "prompt_adapters=None, chat_template=None, response_role='assistant', ssl_keyfile=None, ssl_certfile=None, "
            "ssl_ca_certs=None, ssl_cert_reqs=0, root_path=None, middleware=[], return_tokens_as_token_ids=False, "
            "disable_frontend_multiprocessing=False, enable_auto_tool_choice=False, tool_call_parser=None, "
            f"model='{e.model}', tokenizer=None, skip_tokenizer_init=False, revision=None, code_revision=None, "
            "tokenizer_revision=None, tokenizer_mode='auto', trust_remote_code=False, download_dir=None, "
            "load_format='auto', config_format='auto', dtype='auto', kv_cache_dtype='auto', "
            f"quantization_param_path=None, max_model_len={e.max_model_len}, guided_decoding_backend='outlines', "
            "distributed_executor_backend=None, worker_use_ray=False, pipeline_parallel_size=1, "
            f"tensor_parallel_size={e.tensor_parallel_size}, max_parallel_loading_workers=None, "
            f"ray_workers_use_nsight=False, block_size={e.block_size}, enable_prefix_caching=False, "
            "disable_sliding_window=False, use_v2_block_manager=False, num_lookahead_slots=0, seed=0, "
            f"swap_space={e.swap_space_gib:g}, cpu_offload_gb=0, gpu_memory_utilization={e.gpu_memory_utilization}, "
            f"num_gpu_blocks_override={e.num_gpu_blocks_override}, max_num_batched_tokens={e.max_num_batched_tokens}, "
            f"max_num_seqs={e.max_num_seqs}, max_logprobs=20, disable_log_stats=False, quantization=None, "
            "rope_scaling=None, rope_theta=None, enforce_eager=False, max_context_len_to_capture=None, "
            "max_seq_len_to_capture=8192, disable_custom_all_reduce=False, tokenizer_pool_size=0, "
            "tokenizer_pool_type='ray', tokenizer_pool_extra_config=None, limit_mm_per_prompt=None, "
            "mm_processor_kwargs=None, enable_lora=False, max_loras=1, max_lora_rank=16, lora_extra_vocab_size=256, "
            "lora_dtype='auto', long_lora_scaling_factors=None, max_cpu_loras=None, fully_sharded_loras=False, "
            "enable_prompt_adapter=False, max_prompt_adapters=1, max_prompt_adapter_token=0, device='auto', "
            "num_scheduler_steps=1, multi_step_stream_outputs=False, scheduler_delay_factor=0.0, "
            "enable_chunked_prefill=None, speculative_model=None, num_speculative_tokens=None, "
            f"preemption_mode={e.preemption_mode!r}, served_model_name=None, otlp_traces_endpoint=None, "
            "collect_detailed_traces=None, disable_async_output_proc=False, override_neuron_config=None, "
            f"disable_log_requests=False, max_log_len={self.max_log_len})"
        )

    def _engine_config(self) -> str:
        e = self.cfg.engine
        return (
            f"Initializing an LLM engine (v{V0_VERSION}) with config: model='{e.model}', speculative_config=None, "
            f"tokenizer='{e.model}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
            "override_neuron_config=None, rope_scaling=None, rope_theta=None, tokenizer_revision=None, "
            f"trust_remote_code=False, dtype=torch.bfloat16, max_seq_len={e.max_model_len}, download_dir=None, "
            f"load_format=LoadFormat.AUTO, tensor_parallel_size={e.tensor_parallel_size}, pipeline_parallel_size=1, "
            "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=auto, "
            "quantization_param_path=None, device_config=cuda, "
            "decoding_config=DecodingConfig(guided_decoding_backend='outlines'), "
            "observability_config=ObservabilityConfig(otlp_traces_endpoint=None, collect_model_forward_time=False, "
            f"collect_model_execute_time=False), seed=0, served_model_name={e.model}, use_v2_block_manager=False, "
            "num_scheduler_steps=1, enable_prefix_caching=False, use_async_output_proc=True)"
        )

    def _load_model(self, t: float) -> float:
        """Engine init up to weights loaded; returns the time after loading."""
        e = self.cfg.engine
        self.line(t, "INFO", "api_server.py:495", f"vLLM API server version {V0_VERSION}")
        self.line(t, "INFO", "api_server.py:496", self._args())
        self.line(t, "INFO", "api_server.py:166",
                  f"Multiprocessing frontend to use ipc:///tmp/{self.hex(8)}-{self.hex(4)}-{self.hex(4)}-"
                  f"{self.hex(4)}-{self.hex(12)} for RPC Path.")
        self.line(t + 0.4, "INFO", "api_server.py:182", f"Started engine process with PID {self.engine_pid}")
        t += 5.2
        self.line(t, "INFO", "llm_engine.py:232", self._engine_config())
        if self.tp > 1:
            self.line(t, "WARNING", "multiproc_gpu_executor.py:56",
                      "Reducing Torch parallelism from 32 threads to 1 to avoid unnecessary CPU contention. "
                      "Set OMP_NUM_THREADS in the external environment to tune this value as needed.")
            for rank in range(1, self.tp):
                self.wline(t + 1, rank, "INFO", "multiproc_worker_utils.py:215", "Worker ready; awaiting tasks")
            self.line(t + 1.3, "INFO", "utils.py:977", "Found nccl from library libnccl.so.2")
            self.line(t + 1.3, "INFO", "pynccl.py:63", "vLLM is using nccl==2.20.5")
            for rank in range(1, self.tp):
                self.wline(t + 1.3, rank, "INFO", "pynccl.py:63", "vLLM is using nccl==2.20.5")
            t += 2.0
        self.line(t + 0.6, "INFO", "model_runner.py:997", f"Starting to load model {e.model}...")
        self.line(t + 0.9, "INFO", "weight_utils.py:242", "Using model weights format ['*.safetensors']")
        t += 1.0
        bars = [
            "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
            "Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:00<00:02,  1.19it/s]",
            "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.18it/s]",
            "Loading safetensors checkpoint shards:  75% Completed | 3/4 [00:02<00:00,  1.41it/s]",
            "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00,  1.30it/s]",
            "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00,  1.27it/s]",
            "",
        ]
        self.raw(t + 3.2, "\n".join(bars))
        t += 3.4
        per_rank = e.weights_gib / self.tp
        self.line(t, "INFO", "model_runner.py:1008", f"Loading model weights took {per_rank * 1.0737:.4f} GB")
        for rank in range(1, self.tp):
            self.wline(t, rank, "INFO", "model_runner.py:1008", f"Loading model weights took {per_rank * 1.0737:.4f} GB")
        return t

    def startup(self, t0: float) -> float:
        """V0 0.6.1 start-up: args, engine config, weights, blocks, CUDA graphs, routes, uvicorn."""
        e = self.cfg.engine
        t = self._load_model(t0)
        t += 2.1
        self.line(t, "INFO", "gpu_executor.py:122" if self.tp == 1 else "distributed_gpu_executor.py:57",
                  f"# GPU blocks: {e.num_gpu_blocks}, # CPU blocks: {e.num_cpu_blocks}")
        t += 1.2
        self.line(t, "INFO", "model_runner.py:1311",
                  "Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not "
                  "static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI.")
        self.line(t, "INFO", "model_runner.py:1315",
                  "CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, consider "
                  "decreasing `gpu_memory_utilization` or enforcing eager mode. You can also reduce the `max_num_seqs` "
                  "as needed to decrease memory usage.")
        t += 11.6
        self.line(t, "INFO", "model_runner.py:1430", "Graph capturing finished in 12 secs.")
        for rank in range(1, self.tp):
            self.wline(t, rank, "INFO", "model_runner.py:1430", "Graph capturing finished in 12 secs.")
        t += 0.8
        self.line(t, "INFO", "launcher.py:19", "Available routes are:")
        for path, methods in ROUTES_V0:
            self.line(t, "INFO", "launcher.py:27", f"Route: {path}, Methods: {methods}")
        self.raw(t, f"INFO:     Started server process [{self.api_pid}]\nINFO:     Waiting for application startup.\n"
                    "INFO:     Application startup complete.\n"
                    "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)")
        return t + 0.5

    def startup_failure(self, t0: float, fault: Fault) -> tuple[float, float]:
        """CUDA OOM while profiling, or a KV cache too small for max_model_len: raw tracebacks, no server."""
        e = self.cfg.engine
        t = self._load_model(t0)
        t += 1.7
        eng = f"{PY}/vllm/engine"
        head = [
            "Process SpawnProcess-1:",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.10/multiprocessing/process.py", line 314, in _bootstrap',
            "    self.run()",
            '  File "/usr/lib/python3.10/multiprocessing/process.py", line 108, in run',
            "    self._target(*self._args, **self._kwargs)",
            f'  File "{PY}/vllm/entrypoints/openai/rpc/server.py", line 236, in run_rpc_server',
            "    server = AsyncEngineRPCServer(async_engine_args, usage_context, rpc_path)",
            f'  File "{PY}/vllm/entrypoints/openai/rpc/server.py", line 34, in __init__',
            "    self.engine = AsyncLLMEngine.from_engine_args(",
            f'  File "{eng}/async_llm_engine.py", line 735, in from_engine_args',
            "    engine = cls(",
            f'  File "{eng}/async_llm_engine.py", line 615, in __init__',
            "    self.engine = self._engine_class(*args, **kwargs)",
            f'  File "{eng}/async_llm_engine.py", line 835, in __init__',
            "    super().__init__(*args, **kwargs)",
            f'  File "{eng}/llm_engine.py", line 319, in __init__',
            "    self._initialize_kv_caches()",
        ]
        if fault.kind == "startup_oom":
            body = [
                f'  File "{eng}/llm_engine.py", line 448, in _initialize_kv_caches',
                "    self.model_executor.determine_num_available_blocks())",
                f'  File "{PY}/vllm/executor/gpu_executor.py", line 114, in determine_num_available_blocks',
                "    return self.driver_worker.determine_num_available_blocks()",
                f'  File "{PY}/torch/utils/_contextlib.py", line 116, in decorate_context',
                "    return func(*args, **kwargs)",
                f'  File "{PY}/vllm/worker/worker.py", line 222, in determine_num_available_blocks',
                "    self.model_runner.profile_run()",
                f'  File "{PY}/torch/utils/_contextlib.py", line 116, in decorate_context',
                "    return func(*args, **kwargs)",
                f'  File "{PY}/vllm/worker/model_runner.py", line 1133, in profile_run',
                "    self.execute_model(model_input, kv_caches, intermediate_tensors)",
                f'  File "{PY}/torch/utils/_contextlib.py", line 116, in decorate_context',
                "    return func(*args, **kwargs)",
                f'  File "{PY}/vllm/worker/model_runner.py", line 1474, in execute_model',
                "    logits = self.model.compute_logits(hidden_or_intermediate_states,",
                f'  File "{PY}/vllm/model_executor/models/llama.py", line 447, in compute_logits',
                "    logits = self.logits_processor(self.lm_head, hidden_states,",
                f'  File "{PY}/vllm/model_executor/layers/logits_processor.py", line 72, in forward',
                "    logits = self._get_logits(hidden_states, lm_head, embedding_bias)",
                f'  File "{PY}/vllm/model_executor/layers/logits_processor.py", line 94, in _get_logits',
                "    logits = lm_head.linear_method.apply(lm_head,",
                f'  File "{PY}/vllm/model_executor/layers/vocab_parallel_embedding.py", line 36, in apply',
                "    return F.linear(x, layer.weight, bias)",
                "torch.cuda.OutOfMemoryError: " + oom_message(3.91, e.total_gpu_gib, 2109.44),
            ]
        else:
            no_blocks = fault.cause == "no_blocks"
            blocks = 0 if no_blocks else e.num_gpu_blocks
            cap = blocks * e.block_size
            self.line(t - 0.4, "INFO", "gpu_executor.py:122", f"# GPU blocks: {blocks}, # CPU blocks: {e.num_cpu_blocks}")
            body = [
                f'  File "{eng}/llm_engine.py", line 461, in _initialize_kv_caches',
                "    self.model_executor.initialize_cache(num_gpu_blocks, num_cpu_blocks)",
                f'  File "{PY}/vllm/executor/gpu_executor.py", line 125, in initialize_cache',
                "    self.driver_worker.initialize_cache(num_gpu_blocks, num_cpu_blocks)",
                f'  File "{PY}/vllm/worker/worker.py", line 258, in initialize_cache',
                "    raise_if_cache_size_invalid(num_gpu_blocks,",
                f'  File "{PY}/vllm/worker/worker.py", line 483, in raise_if_cache_size_invalid',
                "    raise ValueError(",
                "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                "when initializing the engine." if no_blocks else
                f"ValueError: The model's max seq len ({e.max_model_len}) is larger than the maximum number of tokens "
                f"that can be stored in KV cache ({cap}). Try increasing `gpu_memory_utilization` or decreasing "
                "`max_model_len` when initializing the engine.",
            ]
        self.raw(t, "\n".join(head + body))
        t2 = t + 1.0
        api = [
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.10/runpy.py", line 196, in _run_module_as_main',
            '    return _run_code(code, main_globals, None,',
            '  File "/usr/lib/python3.10/runpy.py", line 86, in _run_code',
            "    exec(code, run_globals)",
            f'  File "{PY}/vllm/entrypoints/openai/api_server.py", line 585, in <module>',
            "    uvloop.run(run_server(args))",
            f'  File "{PY}/uvloop/__init__.py", line 82, in run',
            "    return loop.run_until_complete(wrapper())",
            '  File "uvloop/loop.pyx", line 1517, in uvloop.loop.Loop.run_until_complete',
            f'  File "{PY}/uvloop/__init__.py", line 61, in wrapper',
            "    return await main",
            f'  File "{PY}/vllm/entrypoints/openai/api_server.py", line 552, in run_server',
            "    async with build_async_engine_client(args) as engine_client:",
            '  File "/usr/lib/python3.10/contextlib.py", line 199, in __aenter__',
            "    return await anext(self.gen)",
            f'  File "{PY}/vllm/entrypoints/openai/api_server.py", line 107, in build_async_engine_client',
            "    async with build_async_engine_client_from_engine_args(",
            '  File "/usr/lib/python3.10/contextlib.py", line 199, in __aenter__',
            "    return await anext(self.gen)",
            f'  File "{PY}/vllm/entrypoints/openai/api_server.py", line 194, in build_async_engine_client_from_engine_args',
            "    raise RuntimeError(",
            "RuntimeError: RPCServer process died before responding to readiness probe",
        ]
        self.raw(t2, "\n".join(api))
        return t, t2

    # ------------------------------------------------------------------ requests
    def _token_ids(self, n: int) -> str:
        if self._ids is None:
            self._ids = id_pool(self.rng)
        return token_ids(self.rng, min(n, self.max_log_len), self._ids)

    def _prompt_repr(self, req: SimRequest) -> str:
        words = prompt_text(self.rng, 24)
        if req.chat:
            text = (
                "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n" + words
                + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
            )
        else:
            text = words
        return repr(text[: self.max_log_len])

    def on_arrival(self, t: float, req: SimRequest, waiting: int) -> None:
        """Request logger `Received request`, engine `Added request`, streaming access line."""
        self.line(
            t, "INFO", "logger.py:36",
            f"Received request {req.rid}: prompt: {self._prompt_repr(req)}, params: "
            + SAMPLING_V0.format(max_tokens=req.max_tokens)
            + f", prompt_token_ids: {self._token_ids(req.prompt)}, lora_request: None, prompt_adapter_request: None.",
        )
        self.line(t, "INFO", "async_llm_engine.py:201", f"Added request {req.rid}.")
        if req.stream:  # the streaming response starts once the engine has the request
            self.sink.emit(t, self.access(req, 200, t))

    def on_finish(self, t: float, req: SimRequest) -> None:
        """`Finished request` (+ the access line of a non-streaming request)."""
        self.line(t, "INFO", "async_llm_engine.py:140", f"Finished request {req.rid}.")
        if not req.stream:
            self.sink.emit(t, self.access(req, 200, t))

    def on_abort(self, t: float, req: SimRequest) -> None:
        """`Aborted request`."""
        self.line(t, "INFO", "async_llm_engine.py:158", f"Aborted request {req.rid}.")

    def on_preempt(self, t: float, req: SimRequest, mode: str, cumulative: int) -> None:
        """The V0 scheduler warns on the 1st, 51st, 101st … preemption only."""
        if cumulative % 50 == 1:
            m = "PreemptionMode.SWAP" if mode == "swap" else "PreemptionMode.RECOMPUTE"
            self.line(
                t, "WARNING", "scheduler.py:1089",
                f"Sequence group {req.rid} is preempted by {m} mode because there is not enough KV cache space. "
                "This can affect the end-to-end performance. Increase gpu_memory_utilization or "
                f"tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption={cumulative}",
            )

    def on_stats(self, t: float, s: StatsSnapshot) -> None:
        """`metrics.py` stats line (0.4.3–0.10.x wording, final period)."""
        self.line(
            t, "INFO", "metrics.py:351",
            f"Avg prompt throughput: {s.prompt_tps:.1f} tokens/s, Avg generation throughput: {s.gen_tps:.1f} tokens/s, "
            f"Running: {s.running} reqs, Swapped: {s.swapped} reqs, Pending: {s.waiting} reqs, "
            f"GPU KV cache usage: {100 * s.gpu_kv:.1f}%, CPU KV cache usage: {100 * s.cpu_kv:.1f}%.",
        )

    # ------------------------------------------------------------------ faults
    def on_hang_tick(self, t: float) -> None:
        """The driver cannot hand work to a stuck worker (shm_broadcast, 0.5.1–0.8.1 wording)."""
        self.line(t, "WARNING", "shm_broadcast.py:386", "No available block found in 60 second. ")

    def on_nccl_watchdog(self, t: float, fault: Fault) -> float:
        """Watchdog on every rank, then the worker dies with SIGABRT."""
        self.raw(t, watchdog_lines(self.clock, self.rng, t, fault, max(2, self.tp)))
        return t + 0.4

    def death_traceback(self, cause: str) -> list[str]:
        """The exception that killed the engine loop."""
        eng = f"{PY}/vllm/engine"
        frames = [
            "Traceback (most recent call last):",
            f'  File "{eng}/async_llm_engine.py", line 53, in _log_task_completion',
            "    return_value = task.result()",
            f'  File "{eng}/async_llm_engine.py", line 939, in run_engine_loop',
            "    result = task.result()",
            f'  File "{eng}/async_llm_engine.py", line 868, in engine_step',
            "    request_outputs = await self.engine.step_async(virtual_engine)",
            f'  File "{eng}/async_llm_engine.py", line 345, in step_async',
            "    outputs = await self.model_executor.execute_model_async(",
            f'  File "{PY}/vllm/executor/gpu_executor.py", line 185, in execute_model_async',
            "    output = await make_async(self.driver_worker.execute_model",
            '  File "/usr/lib/python3.10/concurrent/futures/thread.py", line 58, in run',
            "    result = self.fn(*self.args, **self.kwargs)",
            f'  File "{PY}/vllm/worker/worker_base.py", line 327, in execute_model',
            "    output = self.model_runner.execute_model(",
            f'  File "{PY}/torch/utils/_contextlib.py", line 116, in decorate_context',
            "    return func(*args, **kwargs)",
            f'  File "{PY}/vllm/worker/model_runner.py", line 1450, in execute_model',
            "    hidden_or_intermediate_states = model_executable(",
        ]
        if cause == "illegal_memory_access":
            frames += illegal_memory_access(wrapped=False)
        else:
            frames.append("torch.cuda.OutOfMemoryError: " + oom_message(1.96, self.cfg.engine.total_gpu_gib, 1431.88))
        return frames

    def on_engine_death(self, t: float, cause: str, inflight: list[SimRequest]) -> float:
        """Background loop dies: error record, asyncio callback traceback, 500s, CRITICAL, uvicorn exit."""
        if cause == "nccl":
            for rank in range(1, max(2, self.tp)):
                self.line(t, "ERROR", "multiproc_worker_utils.py:120",
                          f"Worker VllmWorkerProcess pid {self.worker_pids[rank]} died, exit code: -6")
            self.line(t, "INFO", "multiproc_worker_utils.py:123", "Killing local vLLM worker processes")
            for r in inflight:  # the connection drops: a non-streaming client never gets a status line
                if not r.stream:
                    r.http_status = None
            return t  # the NCCL abort takes the whole process down: nothing else is printed
        self.sink.emit_text(t, record(self.p(t, "ERROR", "async_llm_engine.py:63"),
                                      ["Engine background task failed"] + self.death_traceback(cause)))
        cb = ("functools.partial(<function _log_task_completion at 0x7f3c2c5e1ab0>, error_callback=<bound method "
              "AsyncLLMEngine._error_callback of <vllm.engine.async_llm_engine.AsyncLLMEngine object at 0x7f3c1a2b7d90>>)")
        self.raw(t, "\n".join([
            f"Exception in callback {cb}",
            f"handle: <Handle {cb}>",
            "Traceback (most recent call last):",
            f'  File "{PY}/vllm/engine/async_llm_engine.py", line 53, in _log_task_completion',
            "    return_value = task.result()",
            "vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly. This should never happen! "
            "Please open an issue on Github. See stack trace above for the actual cause.",
        ]))
        self.fail_requests(t, inflight)
        for r in inflight:
            if not r.stream:
                self.sink.emit(t, self.access(r, 500, t))
        t2 = t + 1.2
        self.line(t2, "CRITICAL", "launcher.py:99", "AsyncLLMEngine has failed, terminating server process")
        self.raw(t2, uvicorn_shutdown(self.api_pid))
        return t2

    def fail_requests(self, t: float, inflight: list[SimRequest]) -> None:
        """Per-request lines when the engine dies (V0 prints none)."""

    def on_shutdown(self, t: float) -> float:
        """SIGTERM: uvicorn shutdown lines."""
        self.raw(t, uvicorn_shutdown(self.api_pid))
        return t
