"""vLLM V1 engine logs as 0.32.0 prints them: `(APIServer pid=N) INFO MM-DD HH:MM:SS [file.py:N] msg`,
engine-side ids `<id>-<8 hex>` (the 0.10.0 variant lives in `v1_early`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import SHARDS_LOADING, LogWriter, Sink, illegal_memory_access, record, uvicorn_shutdown, uvicorn_startup
from .v0 import oom_message, watchdog_lines

if TYPE_CHECKING:
    from ..config import Fault, SimConfig
    from ..model import SimRequest
    from ..scheduler import StatsSnapshot

PY = "/usr/local/lib/python3.12/dist-packages"
BAR = "██████████"

SAMPLING_032 = (
    "SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, "
    "watermarking=None, top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], "
    "thinking_token_budget=None, include_stop_str_in_output=False, ignore_eos=False, max_tokens={max_tokens}, "
    "min_tokens=0, logprobs=None, prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, "
    "structured_outputs=None, extra_args=None)"
)
SAMPLING_010 = (
    "SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, "
    "top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], "
    "include_stop_str_in_output=False, ignore_eos=False, max_tokens={max_tokens}, min_tokens=0, logprobs=None, "
    "prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, "
    "truncate_prompt_tokens=None, guided_decoding=None, extra_args=None)"
)

ROUTES_032 = [
    ("/openapi.json", "GET, HEAD"), ("/docs", "GET, HEAD"), ("/docs/oauth2-redirect", "GET, HEAD"),
    ("/redoc", "GET, HEAD"), ("/load", "GET"), ("/version", "GET"), ("/health", "GET"), ("/metrics", "GET"),
    ("/tokenize", "POST"), ("/detokenize", "POST"), ("/v1/models", "GET"), ("/ping", "GET"), ("/ping", "POST"),
    ("/invocations", "POST"), ("/v1/chat/completions", "POST"), ("/v1/responses", "POST"),
    ("/v1/responses/{response_id}", "GET"), ("/v1/responses/{response_id}/cancel", "POST"),
    ("/v1/completions", "POST"), ("/v1/messages", "POST"), ("/v1/messages/count_tokens", "POST"),
]
ROUTES_010 = [
    ("/openapi.json", "HEAD, GET"), ("/docs", "HEAD, GET"), ("/docs/oauth2-redirect", "HEAD, GET"),
    ("/redoc", "HEAD, GET"), ("/health", "GET"), ("/load", "GET"), ("/ping", "POST"), ("/ping", "GET"),
    ("/tokenize", "POST"), ("/detokenize", "POST"), ("/v1/models", "GET"), ("/version", "GET"),
    ("/v1/responses", "POST"), ("/v1/chat/completions", "POST"), ("/v1/completions", "POST"),
    ("/invocations", "POST"), ("/metrics", "GET"),
]


WORKER_PROC_FAILED = (
    "WorkerProc hit an exception.",
    "Traceback (most recent call last):",
    f'  File "{PY}/vllm/v1/executor/multiproc_executor.py", line 888, in worker_busy_loop',
    "    output = func(*args, **kwargs)",
    "             ^^^^^^^^^^^^^^^^^^^^^",
)
"""Head of a worker's `WorkerProc hit an exception.` record (0.32)."""

TOKENS = tuple(
    " the| of| and| to| a| in| is| that| for| it| as| with| be| on| not| this| are| by| we| can| model| cache|"
    " request| token| server| latency| memory| batch| queue|.|,|\n| data| value| first| each| more| time| use|"
    "ing|ed|s| GPU| KV| vLLM".split("|")
)


def _commas(n: int) -> str:
    return f"{n:,}"


class V1Writer(LogWriter):
    """V1 server as vLLM 0.32.0 logs it with `--enable-log-requests` (API server, EngineCore, workers)."""

    name = "v1"
    v1 = True
    version = "0.32.0"
    logo_where = "api_utils.py:347"
    args_where = "api_utils.py:286"
    stats_interval = 10.0
    stats_tick = 10.0
    stats_periodic = True

    # per-release wording and source locations used by the shared methods below
    routes = ROUTES_032
    routes_where = ("launcher.py:186", "launcher.py:195")
    """(`Available routes are:`, each `Route:` line)."""
    compile_where = ("backends.py:812", "backends.py:329")
    """(Dynamo transform time, total compile time)."""
    compile_done = "[backbone] torch.compile took 21.33 s in total"
    sampling = SAMPLING_032
    arrival_where = ("request_logger.py:65", "async_llm.py:578")
    """(`Received request`, `Added request`)."""
    abort_where = ("async_llm.py:922", "async_llm.py:783")
    """(`Aborted request(s)`, `Request … aborted.`)."""
    stats_where = "loggers.py:335"
    hang_record = ("INFO", "shm_broadcast.py:871",
                   "No available shared memory broadcast block found in 60 seconds. This typically happens when some "
                   "processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache "
                   "quantization).")
    """(level, where, message) of the shm-broadcast warning printed every minute of a hang."""
    executor_where = "multiproc_executor.py:315"
    watchdog_exit = " (exit code: -6)"
    """Exit-code note on the `Worker proc … died unexpectedly` line after the NCCL watchdog."""
    fatal_where = "core.py:1512"
    fatal_lines = (1496, 1555, 1606, 674)
    """core.py line numbers of run_engine_core, run_busy_loop, _process_engine_step, step."""
    fatal_step = (
        "    model_output = future.result()",
        "                   ^^^^^^^^^^^^^^^",
        f'  File "{PY}/vllm/v1/executor/multiproc_executor.py", line 99, in result',
        "    return super().result()",
        "           ^^^^^^^^^^^^^^^^",
    )
    """Frames below the `step` frame of the fatal-error traceback."""
    fatal_nccl = (
        f'  File "{PY}/vllm/distributed/device_communicators/shm_broadcast.py", line 867, in acquire_read',
        '    raise RuntimeError("cancelled")',
        "RuntimeError: cancelled",
    )
    fatal_wrapped = True
    """Whether a CUDA error reaches EngineCore re-raised by the executor (`Worker failed with error …`)."""
    handler_where = ("async_llm.py:906", 849, 1235)
    """(where, async_llm.py line of output_handler, core_client.py line of get_output_async)."""
    failed_where = "async_llm.py:789"
    stream_errors = True
    """Whether a failed streaming request also logs the stream-generator traceback."""

    def __init__(self, cfg: SimConfig, sink: Sink) -> None:
        super().__init__(cfg, sink)
        self.tp = cfg.engine.tensor_parallel_size
        self.last_tps = (0.0, 0.0)
        self.hit_rate = 0.0
        self.target_hit = round(self.rng.uniform(2.0, 35.0), 1)
        self.n_seen = 0
        self.log_outputs = cfg.log_outputs and self.name == "v1"
        self.per_token = self.log_outputs
        self.outputs: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ prefixes
    def proc(self, who: str, rank: int = 0) -> str:
        """Process prefix for `api`, `core` or `worker`."""
        if who == "api":
            return f"(APIServer pid={self.api_pid}) "
        if who == "core":
            return f"(EngineCore pid={self.engine_pid}) "
        name = "Worker" if self.tp == 1 else f"Worker_TP{rank}"
        return f"({name} pid={self.worker_pids[rank]}) "

    def p(self, t: float, who: str, level: str, where: str, rank: int = 0) -> str:
        """Full record prefix."""
        return f"{self.proc(who, rank)}{level} {self.clock.stamp(t)} [{where}] "

    def line(self, t: float, who: str, level: str, where: str, msg: str, rank: int = 0) -> None:
        """Emit one record."""
        self.sink.emit(t, f"{self.p(t, who, level, where, rank)}{msg}\n")

    def rec(self, t: float, who: str, level: str, where: str, lines: list[str], rank: int = 0) -> None:
        """Emit a multi-line record (prefix on every line, `\\r` before each inner newline)."""
        self.sink.emit_text(t, record(self.p(t, who, level, where, rank), lines))

    def raw(self, t: float, text: str, who: str | None = None) -> None:
        """Lines written around vLLM's formatter (uvicorn, tqdm, tracebacks, C++) by process `who`.

        0.31+ prints them bare; writers for 0.10.1–0.30 override `stream_prefix` (the stdout wrapper).
        """
        pre = self.stream_prefix(who)
        if pre:
            text = "\n".join(pre + ln if ln else ln for ln in text.rstrip("\n").split("\n"))
        self.sink.emit_text(t, text if text.endswith("\n") else text + "\n")

    def stream_prefix(self, who: str | None) -> str:
        """Prefix the process's stdout/stderr wrapper adds to raw lines ('' from 0.31 on)."""
        return ""

    def make_ids(self, idx: int, chat: bool) -> tuple[str, str]:
        """0.12+: 16-hex ids; 0.14+: the engine adds `-<8 hex>`."""
        rid = f"chatcmpl-{self.hex(16)}" if chat else f"cmpl-{self.hex(16)}-0"
        return rid, f"{rid}-{self.hex(8)}"

    # ------------------------------------------------------------------ start-up
    def non_default_args(self) -> str:
        """The `non-default args` dict."""
        e = self.cfg.engine
        d = [f"'model_tag': '{e.model}'", "'enable_log_requests': True", "'host': '0.0.0.0'", f"'model': '{e.model}'",
             f"'max_model_len': {e.max_model_len}"]
        if e.tensor_parallel_size != 1:
            d.append(f"'tensor_parallel_size': {e.tensor_parallel_size}")
        if e.gpu_memory_utilization != 0.9:
            d.append(f"'gpu_memory_utilization': {e.gpu_memory_utilization}")
        if e.max_num_seqs != 256:
            d.append(f"'max_num_seqs': {e.max_num_seqs}")
        if e.num_gpu_blocks_override is not None:
            d.append(f"'num_gpu_blocks_override': {e.num_gpu_blocks_override}")
        return "non-default args: {" + ", ".join(d) + "}"

    def engine_config(self) -> str:
        """`Initializing a V1 LLM engine` config text (0.32)."""
        e = self.cfg.engine
        return (
            f"Initializing a V1 LLM engine (v{self.version}) with config: model='{e.model}', speculative_config=None, "
            f"tokenizer='{e.model}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
            "tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, "
            f"max_seq_len={e.max_model_len}, download_dir=None, load_format=auto, "
            f"tensor_parallel_size={e.tensor_parallel_size}, pipeline_parallel_size=1, data_parallel_size=1, "
            "decode_context_parallel_size=1, dcp_comm_backend=ag_rs, disable_custom_all_reduce=False, "
            "quantization=None, quantization_config=None, enforce_eager=False, "
            "aux_output_config=AuxOutputConfig(enable_return_routed_experts=False, max_bytes=None), "
            "kv_cache_dtype=auto, device_config=cuda, structured_outputs_config=StructuredOutputsConfig("
            "backend='auto', disable_any_whitespace=False, disable_additional_properties=False, reasoning_parser='', "
            "reasoning_parser_plugin='', enable_in_reasoning=False), observability_config=ObservabilityConfig("
            "show_hidden_metrics_for_version=None, otlp_traces_endpoint=None, collect_detailed_traces=None, "
            "per_request_spec_decode_metrics='none', kv_cache_metrics=False, kv_cache_metrics_sample=0.01, "
            "custom_histogram_buckets=None, cudagraph_metrics=False, enable_layerwise_nvtx_tracing=False, "
            "enable_mfu_metrics=False, enable_mm_processor_stats=False, enable_logging_iteration_details=False, "
            f"jit_monitor_mode='warn', jit_monitor_verbose=False), seed=0, served_model_name={e.model}, "
            "enable_prefix_caching=True, enable_chunked_prefill=True, pooler_config=None, compilation_config={"
            "'mode': <CompilationMode.VLLM_COMPILE: 3>, 'debug_dump_path': None, 'cache_dir': '', "
            "'compile_cache_save_format': 'binary', 'backend': 'inductor', 'custom_ops': ['none'], "
            "'splitting_ops': ['vllm::unified_attention', 'vllm::unified_attention_with_output'], "
            "'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'max_cudagraph_capture_size': 512}"
        )

    def _startup_common(self, t0: float) -> float:
        """API server banner through weights loaded; returns the time after loading."""
        e = self.cfg.engine
        t = t0
        v = self.version
        self.rec(t, "api", "INFO", self.logo_where, [
            "", "       █     █     █▄   ▄█",
            f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {v}",
            f"  █▄█▀ █     █     █     █  model   {e.model}",
            "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀", "",
        ])
        self.line(t, "api", "INFO", self.args_where, self.non_default_args())
        self.line(t, "api", "INFO", "model.py:733", "Resolved architecture: LlamaForCausalLM")
        self.line(t, "api", "INFO", "model.py:2152", f"Using max model len {e.max_model_len}")
        self.line(t, "api", "INFO", "scheduler.py:231",
                  f"Chunked prefill is enabled with max_num_batched_tokens={e.budget(True)}.")
        t += 6.3
        self.line(t, "core", "INFO", "core.py:133", self.engine_config())
        self.line(t, "core", "INFO", "multiproc_executor.py:153",
                  "DP group leader: node_rank=0, node_rank_within_dp=0, master_addr=127.0.0.1, "
                  f"mq_connect_ip=10.0.0.5 (local), world_size={self.tp}, local_world_size={self.tp}")
        t += 7.8
        port = 40000 + self.rng.randrange(20000)
        for r in range(self.tp):
            self.line(t, "worker", "INFO", "parallel_state.py:1906",
                      f"world_size={self.tp} rank={r} local_rank={r} distributed_init_method=tcp://127.0.0.1:{port} "
                      "backend=nccl", r)
        if self.tp > 1:
            self.line(t, "worker", "INFO", "pynccl.py:111", "vLLM is using nccl==2.27.5", 0)
        for r in range(self.tp):
            self.line(t + 0.2, "worker", "INFO", "parallel_state.py:2350",
                      f"rank {r} in world size {self.tp} is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank {r}, "
                      f"ETP rank {r}, EP rank N/A, EPLB rank N/A", r)
        self.line(t + 0.4, "worker", "INFO", "gpu_model_runner.py:4119", f"Starting to load model {e.model}...")
        t += 0.9
        return self.load_weights(t, "default_loader.py:501", "gpu_model_runner.py:4208",
                                 f"Model loading took {round(e.weights_gib / self.tp, 2)} GiB memory and 4.581203 seconds")

    def load_weights(self, t: float, loader_where: str, runner_where: str, loaded: str) -> float:
        """Checkpoint-shard progress, `Loading weights took …`, then `loaded` on every rank; returns the time after."""
        self.raw(t + 3.1, who="worker", text=SHARDS_LOADING)
        t += 3.2
        self.line(t, "worker", "INFO", loader_where, "Loading weights took 3.12 seconds")
        for r in range(self.tp):
            self.line(t + 0.4, "worker", "INFO", runner_where, loaded, r)
        return t + 0.4

    def startup(self, t0: float) -> float:
        """0.32 start-up: banner, engine config, weights, compile, KV sizing, CUDA graphs, routes, uvicorn."""
        e = self.cfg.engine
        t = self.compile_lines(self._startup_common(t0))
        self.line(t + 0.9, "worker", "INFO", "monitor.py:91", "[backbone] Initial profiling/warmup run took 0.87 s")
        t += 1.6
        self.line(t, "worker", "INFO", "gpu_worker.py:345", f"Available KV cache memory: {round(e.kv_cache_gib, 2)} GiB")
        tokens = e.num_gpu_blocks * e.block_size
        self.line(t + 0.1, "core", "INFO", "kv_cache_utils.py:2327",
                  f"GPU KV cache size: {_commas(tokens)} tokens, Maximum concurrency for {_commas(e.max_model_len)} "
                  f"tokens per request: {tokens / e.max_model_len:.2f}x")
        t = self.capture_graphs(t, "gpu_model_runner.py:5037")
        self.line(t + 0.1, "core", "INFO", "core.py:402",
                  "init engine (profile, create kv cache, warmup model) took 41.87 s (compilation: 21.33 s)")
        t += 0.6
        self.line(t, "api", "INFO", "entry.py:136", "Supported tasks: ['generate']")
        self.line(t, "api", "INFO", "request_logger.py:30",
                  "`--enable-log-requests` is set but the minimum log level is higher than DEBUG. Only limited "
                  "information will be logged to minimize overhead. To view more details, set `--log-level DEBUG`.")
        self.line(t, "api", "INFO", "entry.py:140", "Starting vLLM server on http://0.0.0.0:8000")
        return self.serve(t)

    def serve(self, t: float) -> float:
        """The route list and uvicorn's start-up lines; returns the time the server is ready."""
        self.line(t, "api", "INFO", self.routes_where[0], "Available routes are:")
        for path, methods in self.routes:
            self.line(t, "api", "INFO", self.routes_where[1], f"Route: {path}, Methods: {methods}")
        self.raw(t, uvicorn_startup(self.api_pid), "api")
        return t + 0.3

    def capture_graphs(self, t: float, runner_where: str) -> float:
        """Two-pass CUDA-graph capture (piecewise mixed batches, full decode) and `Graph capturing finished`."""
        self.raw(t + 5.6, f"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|{BAR}| 67/67 "
                          "[00:05<00:00, 12.61it/s]", "core")
        self.raw(t + 8.1, f"Capturing CUDA graphs (decode, FULL): 100%|{BAR}| 35/35 [00:02<00:00, 14.02it/s]", "core")
        t += 8.2
        self.line(t, "worker", "INFO", runner_where, "Graph capturing finished in 8 secs, took 0.61 GiB")
        return t

    def compile_lines(self, t: float) -> float:
        """torch.compile lines; returns the time after compilation."""
        t += 7.3
        self.line(t, "worker", "INFO", self.compile_where[0], "Dynamo bytecode transform time: 6.85 s")
        t += 14.5
        self.line(t, "worker", "INFO", self.compile_where[1], self.compile_done)
        return t

    def core_traceback_init(self) -> list[str]:
        """EngineCore frames down to KV-cache initialisation."""
        eng = f"{PY}/vllm/v1/engine/core.py"
        return [
            "Traceback (most recent call last):",
            f'  File "{eng}", line 1482, in run_engine_core',
            "    engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
            "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{eng}", line 1194, in __init__',
            "    super().__init__(",
            f'  File "{eng}", line 157, in __init__',
            "    kv_cache_config = self._initialize_kv_caches(vllm_config)",
            "                      ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ]

    def startup_failure(self, t0: float, fault: Fault) -> tuple[float, float]:
        """EngineCore fails to start (CUDA OOM while profiling, or KV cache too small); API server raises."""
        e = self.cfg.engine
        t = self.compile_lines(self._startup_common(t0)) + 0.9
        frames = self.core_traceback_init()
        eng = f"{PY}/vllm/v1/engine/core.py"
        if fault.kind == "startup_oom":
            oom = oom_message(3.91, e.total_gpu_gib, 2109.44)
            wf = f"{PY}/vllm/v1/worker"
            self.rec(t, "worker", "ERROR", "multiproc_executor.py:893", [
                *WORKER_PROC_FAILED,
                f'  File "{wf}/gpu_worker.py", line 327, in determine_available_memory',
                "    self.model_runner.profile_run()",
                f'  File "{wf}/gpu_model_runner.py", line 5311, in profile_run',
                "    output = self._dummy_sampler_run(last_hidden_states)",
                "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
                f'  File "{wf}/gpu_model_runner.py", line 5198, in _dummy_sampler_run',
                "    logits = self.model.compute_logits(hidden_states)",
                "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
                f'  File "{PY}/vllm/model_executor/layers/logits_processor.py", line 64, in forward',
                "    logits = self._get_logits(hidden_states, lm_head, embedding_bias)",
                "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
                "torch.OutOfMemoryError: " + oom,
            ])
            frames += [
                f'  File "{eng}", line 298, in _initialize_kv_caches',
                "    available_gpu_memory = self.model_executor.determine_available_memory()",
                "                           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
                f'  File "{PY}/vllm/v1/executor/multiproc_executor.py", line 358, in collective_rpc',
                "    raise RuntimeError(",
                f"RuntimeError: Worker failed with error '{oom}', please check the stack trace above for the root cause",
            ]
        else:
            est = e.num_gpu_blocks * e.block_size
            frames += [
                f'  File "{eng}", line 326, in _initialize_kv_caches',
                "    kv_cache_configs = get_kv_cache_configs(",
                "                       ^^^^^^^^^^^^^^^^^^^^^",
                f'  File "{PY}/vllm/v1/core/kv_cache_utils.py", line 2642, in get_kv_cache_configs',
                "    _check_enough_kv_cache_memory(",
                f'  File "{PY}/vllm/v1/core/kv_cache_utils.py", line 1030, in _check_enough_kv_cache_memory',
                "    raise ValueError(",
                "ValueError: " + (self.no_blocks_message() if fault.cause == "no_blocks" else
                                  self.kv_too_small_message(e.max_model_len, e.kv_needed_gib(), e.kv_cache_gib, est)),
            ]
        self.rec(t, "core", "ERROR", "core.py:1510", ["EngineCore failed to start."] + frames)
        t1 = t + 2.6
        self.worker_gone(t1)
        # the EngineCore child process then dies with the same exception, printed raw by multiprocessing
        self.raw(t1, who="core", text="\n".join([
            "Process EngineCore:",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
            "    self.run()",
            '  File "/usr/lib/python3.12/multiprocessing/process.py", line 108, in run',
            "    self._target(*self._args, **self._kwargs)",
            f'  File "{PY}/vllm/v1/engine/core.py", line 1514, in run_engine_core',
            "    raise e",
        ] + frames[1:]))
        t2 = t1 + 0.2
        self.raw(t2, "\n".join(self.api_init_failure()), "api")
        return t, t2

    def worker_gone(self, t: float) -> None:
        """0.26+: the executor notices its worker is gone while the engine core shuts down."""
        self.worker_died(t, 0, " (exit code: None)")
        self.line(t, "core", "INFO", "multiproc_executor.py:479",
                  "[shutdown] Executor: waiting for worker exit count=1")

    def worker_died(self, t: float, worker: int, exit_note: str = "") -> None:
        """The executor's `Worker proc VllmWorker-N died unexpectedly` line."""
        self.line(t, "core", "ERROR", self.executor_where,
                  f"Worker proc VllmWorker-{worker} died unexpectedly{exit_note}, shutting down executor.")

    def no_blocks_message(self) -> str:
        """KV budget ≤ 0 (0.22+ wording: CPU-backend note and docs link)."""
        return (
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
            "the engine. (this flag also controls CPU memory reservation on the CPU backend, despite its name). "
            "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
        )

    def kv_too_small_message(self, max_len: int, need: float, avail: float, est: int) -> str:
        """The V1 KV-capacity error (0.22+: "model's", `format_gib` rounding, docs link)."""
        return (
            f"To serve at least one request with the model's max seq len ({max_len}), ({round(need, 2)} GiB KV cache "
            f"is needed, which is larger than the available KV cache memory ({round(avail, 2)} GiB). Based on the "
            f"available memory, the estimated maximum model length is {est}. Try increasing `gpu_memory_utilization` "
            "or decreasing `max_model_len` when initializing the engine. See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
        )

    def api_init_failure(self) -> list[str]:
        """Uncaught API-server traceback after the engine core failed."""
        return [
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/vllm", line 10, in <module>',
            "    sys.exit(main())",
            "             ^^^^^^",
            f'  File "{PY}/vllm/entrypoints/cli/main.py", line 120, in main',
            "    args.dispatch_function(args)",
            f'  File "{PY}/vllm/entrypoints/cli/serve.py", line 156, in cmd',
            "    uvloop.run(run_server(args))",
            f'  File "{PY}/vllm/v1/engine/utils.py", line 1431, in wait_for_engine_startup',
            "    raise RuntimeError(",
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
            "{'EngineCore': 1}",
        ]

    # ------------------------------------------------------------------ requests
    def on_arrival(self, t: float, req: SimRequest, waiting: int) -> None:
        """`Received request`, the streaming access line, `Added request <id>-<8hex>`."""
        self.n_seen += 1
        self.line(t, "api", "INFO", self.arrival_where[0], self.received(req))
        if req.stream:
            self.sink.emit(t, self.access(req, 200, t))
        self.line(t, "api", "INFO", self.arrival_where[1], f"Added request {req.engine_rid}.")

    def received(self, req: SimRequest) -> str:
        """The request logger's `Received request` message."""
        return (f"Received request {req.rid}: params: {self.sampling.format(max_tokens=req.max_tokens)}, "
                "lora_request: None.")

    def _delta(self, t: float, r: SimRequest) -> str:
        tok = self.rng.choice(TOKENS)
        self.outputs.setdefault(r.rid, []).append(tok)
        fin = "None" if r.out < r.target else ("length" if r.out >= r.max_tokens else "stop")
        return (f"{self.p(t, 'api', 'INFO', 'request_logger.py:108')}Generated response {r.rid} (streaming delta): "
                f"output: {tok!r}, finish_reason: {fin}\n")

    def on_prefill_done(self, t: float, req: SimRequest, first: bool) -> None:
        """With --enable-log-outputs: the first streamed delta of a chat request."""
        if self.log_outputs and req.chat and req.stream:
            self.sink.emit(t, self._delta(t, req))

    def on_decode(self, t: float, reqs: list[SimRequest], batch: int, kv: float) -> None:
        """With --enable-log-outputs: one `(streaming delta)` line per token of streaming chat requests."""
        if self.log_outputs:
            lines = [self._delta(t, r) for r in reqs if r.chat and r.stream]
            if lines:
                self.sink.emit_many(t, lines)

    def on_finish(self, t: float, req: SimRequest) -> None:
        """V1 logs no finish line (except with --enable-log-outputs); a non-streaming response's access line."""
        if self.log_outputs and req.chat:
            if req.stream:
                text = "".join(self.outputs.pop(req.rid, []))
                self.line(t, "api", "INFO", "request_logger.py:108", f"Generated response {req.rid} (streaming "
                          f"complete): output: {text!r}, finish_reason: streaming_complete")
            else:
                text = "".join(self.rng.choice(TOKENS) for _ in range(req.out))
                fin = "length" if req.out >= req.max_tokens else "stop"
                self.line(t, "api", "INFO", "request_logger.py:108",
                          f"Generated response {req.rid}: output: {text!r}, finish_reason: {fin}")
        if not req.stream:
            self.sink.emit(t, self.access(req, 200, t))

    def on_abort(self, t: float, req: SimRequest) -> None:
        """`Aborted request(s) <engine id>.` then `Request <id> aborted.`."""
        self.line(t, "api", "INFO", self.abort_where[0], f"Aborted request(s) {req.engine_rid}.")
        self.line(t, "api", "INFO", self.abort_where[1], f"Request {req.rid} aborted.")

    def stats_text(self, s: StatsSnapshot) -> str:
        """The stats message (0.31+: prefix-cache part once the cache saw queries)."""
        if self.n_seen:
            self.hit_rate = self.target_hit
        return (
            f"Engine 000: Avg prompt throughput: {s.prompt_tps:.1f} tokens/s, Avg generation throughput: "
            f"{s.gen_tps:.1f} tokens/s, Running: {s.running} reqs, Waiting: {s.waiting} reqs, GPU KV cache usage: "
            f"{100 * s.gpu_kv:.1f}%" + (f", Prefix cache hit rate: {self.hit_rate:.1f}%" if self.n_seen else "")
        )

    def on_stats(self, t: float, s: StatsSnapshot) -> None:
        """Every 10 s from the API server; DEBUG (not shown) when this and the previous interval were idle."""
        prompt, gen = round(s.prompt_tps, 1), round(s.gen_tps, 1)
        idle = not (prompt or gen or self.last_tps[0] or self.last_tps[1])
        self.last_tps = (prompt, gen)
        if idle:
            return
        self.line(t, "api", "INFO", self.stats_where, self.stats_text(s))

    # ------------------------------------------------------------------ faults
    def on_hang_tick(self, t: float) -> None:
        """EngineCore cannot broadcast the next step to a stuck worker."""
        level, where, msg = self.hang_record
        self.line(t, "core", level, where, msg)

    def on_nccl_watchdog(self, t: float, fault: Fault) -> float:
        """NCCL watchdog on every rank (C++, unprefixed), then a worker dies with SIGABRT."""
        self.raw(t, watchdog_lines(self.clock, self.rng, t, fault, max(2, self.tp)))
        t2 = t + 0.6
        self.worker_died(t2, 1, self.watchdog_exit)
        return t2

    def core_fatal(self, t: float, cause: str) -> None:
        """EngineCore's fatal-error record."""
        eng = f"{PY}/vllm/v1/engine/core.py"
        run, busy, step_fn, step = self.fatal_lines
        frames = [
            "EngineCore encountered a fatal error.",
            "Traceback (most recent call last):",
            f'  File "{eng}", line {run}, in run_engine_core',
            "    engine_core.run_busy_loop()",
            f'  File "{eng}", line {busy}, in run_busy_loop',
            "    self._process_engine_step()",
            f'  File "{eng}", line {step_fn}, in _process_engine_step',
            "    outputs, model_executed = self.step_fn()",
            "                              ^^^^^^^^^^^^^^",
            f'  File "{eng}", line {step}, in step',
            *self.fatal_step,
        ]
        if cause == "nccl":
            frames += self.fatal_nccl
        elif cause == "illegal_memory_access":
            frames += illegal_memory_access(self.fatal_wrapped)
        else:
            frames += ["torch.OutOfMemoryError: " + oom_message(1.96, self.cfg.engine.total_gpu_gib, 1431.88)]
        self.rec(t, "core", "ERROR", self.fatal_where, frames)

    def output_handler_failed(self, t: float) -> None:
        """API server notices the dead engine."""
        where, handler, get_output = self.handler_where
        self.rec(t, "api", "ERROR", where, [
            "AsyncLLM output_handler failed.",
            "Traceback (most recent call last):",
            f'  File "{PY}/vllm/v1/engine/async_llm.py", line {handler}, in output_handler',
            "    outputs = await engine_core.get_output_async()",
            "              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{PY}/vllm/v1/engine/core_client.py", line {get_output}, in get_output_async',
            "    raise self._format_exception(outputs) from None",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
            "for the root cause.",
        ])

    def stream_error(self, t: float, req: SimRequest) -> None:
        """`Error in (chat) completion stream generator.` record of a streaming request."""
        where = "serving.py:929" if req.chat else "serving.py:500"
        what = "chat completion" if req.chat else "completion"
        fn = "chat_completion_stream_generator" if req.chat else "completion_stream_generator"
        sub = "chat_completion" if req.chat else "completion"
        self.rec(t, "api", "ERROR", where, [
            f"Error in {what} stream generator.",
            "Traceback (most recent call last):",
            f'  File "{PY}/vllm/entrypoints/openai/{sub}/serving.py", line 306, in {fn}',
            "    async for prompt_idx, res in result_generator:",
            f'  File "{PY}/vllm/v1/engine/async_llm.py", line 767, in generate',
            "    out = q.get_nowait() or await q.get()",
            "                            ^^^^^^^^^^^^^",
            f'  File "{PY}/vllm/v1/engine/output_processor.py", line 92, in get',
            "    raise output",
            f'  File "{PY}/vllm/v1/engine/async_llm.py", line 849, in output_handler',
            "    outputs = await engine_core.get_output_async()",
            "              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            f'  File "{PY}/vllm/v1/engine/core_client.py", line 1235, in get_output_async',
            "    raise self._format_exception(outputs) from None",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
            "for the root cause.",
        ])

    def on_engine_death(self, t: float, cause: str, inflight: list[SimRequest]) -> float:
        """Fatal error in EngineCore → output handler fails → requests fail (engine dead) → server exits."""
        if cause == "cuda_oom":
            self.rec(t, "worker", "ERROR", "multiproc_executor.py:893", [
                *WORKER_PROC_FAILED,
                f'  File "{PY}/vllm/v1/worker/gpu_model_runner.py", line 3718, in execute_model',
                "    model_output = self._model_forward(",
                "                   ^^^^^^^^^^^^^^^^^^^^",
                "torch.OutOfMemoryError: " + oom_message(1.96, self.cfg.engine.total_gpu_gib, 1431.88),
            ])
        self.core_fatal(t, cause)
        t1 = t + 0.05
        self.line(t1, "api", "WARNING", "core_client.py:817",
                  "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup")
        self.output_handler_failed(t1)
        self.fail_requests(t1, inflight)
        return self.server_exit(t1, inflight)

    def server_exit(self, t: float, inflight: list[SimRequest]) -> float:
        """500s for the non-streaming requests in flight, then uvicorn exits; returns the time of the last line."""
        for r in inflight:
            if not r.stream:
                self.sink.emit(t, self.access(r, 500, t))
        t2 = t + 0.3
        self.raw(t2, uvicorn_shutdown(self.api_pid), "api")
        return t2

    def fail_requests(self, t: float, inflight: list[SimRequest]) -> None:
        """`Request … failed (engine dead).` and (if `stream_errors`), for streams, the stream-generator traceback."""
        for r in inflight:
            self.line(t, "api", "INFO", self.failed_where, f"Request {r.rid} failed (engine dead).")
            if r.stream and self.stream_errors:
                self.stream_error(t, r)

    def on_shutdown(self, t: float) -> float:
        """SIGTERM: 0.23+ `[shutdown]` sequence, then uvicorn."""
        api = [
            ("launcher.py:254", "INFO", "[shutdown] API server: shutdown triggered"),
            ("launcher.py:270", "INFO", "[shutdown] API server: stopping engine client mode=abort timeout=0s"),
            ("core_client.py:770", "INFO", "[shutdown] MPClient: start timeout=0s"),
            ("core_client.py:772", "INFO", "[shutdown] MPClient: stopping engine manager"),
            ("utils.py:628", "INFO", "[shutdown] Process manager: send sigterm to process EngineCore"),
        ]
        for where, lvl, msg in api:
            self.line(t, "api", lvl, where, msg)
        self.line(t, "core", "INFO", "core.py:1454", "[shutdown] EngineCore: trigger received signal=SIGTERM")
        self.line(t, "core", "INFO", "core.py:1635", "[shutdown] EngineCore: start mode=abort timeout=0s")
        for where, msg in [
            ("core_client.py:774", "[shutdown] MPClient: engine manager stopped"),
            ("core_client.py:775", "[shutdown] MPClient: cleaning up background resources"),
            ("core_client.py:777", "[shutdown] MPClient: complete"),
            ("launcher.py:279", "[shutdown] API server: engine client stopped"),
            ("launcher.py:282", "[shutdown] API server: signalling HTTP server shutdown"),
            ("launcher.py:304", "[shutdown] API server: shutting down FastAPI HTTP server"),
        ]:
            self.line(t, "api", "INFO", where, msg)
        self.raw(t, uvicorn_shutdown(self.api_pid), "api")
        return t

    def fastapi_shutdown(self, t: float, where: str) -> float:
        """SIGTERM before 0.23 (no `[shutdown]` sequence): `Shutting down FastAPI HTTP server.` then uvicorn."""
        self.line(t, "api", "INFO", where, "Shutting down FastAPI HTTP server.")
        self.raw(t, uvicorn_shutdown(self.api_pid), "api")
        return t
