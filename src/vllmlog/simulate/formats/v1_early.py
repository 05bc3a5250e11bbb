"""vLLM V1 engine logs as 0.10.0 prints them: no process prefix (TP workers excepted), `[file.py:N]`,
request logging on by default, the same request id in every line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import id_pool, prompt_text, token_ids
from .v1 import BAR, ROUTES_010, SAMPLING_010, V1Writer, _commas

if TYPE_CHECKING:
    from ..model import SimRequest
    from ..scheduler import StatsSnapshot


class V1EarlyWriter(V1Writer):
    """V1 server as vLLM 0.10.0 logs it: no process prefix (workers excepted), request logging on by default."""

    name = "v1-0.10"
    version = "0.10.0"
    max_log_len = 100
    _ids: list[str] | None = None
    routes = ROUTES_010
    routes_where = ("launcher.py:29", "launcher.py:37")
    compile_where = ("backends.py:530", "monitor.py:34")
    compile_done = "torch.compile takes 21.33 s in total"  # 0.6.5–0.17 wording
    arrival_where = ("logger.py:43", "async_llm.py:269")
    stats_where = "loggers.py:122"  # 0.8.3–0.11.0
    hang_record = ("WARNING", "shm_broadcast.py:466", "No available shared memory broadcast block found in 60 second.")
    executor_where = "multiproc_executor.py:140"
    watchdog_exit = ""  # 0.8.5–0.25 wording
    fatal_where = "core.py:634"  # 0.10.0, in-process executor for TP=1
    fatal_lines = (626, 653, 678, 268)
    fatal_step = (
        "    model_output = self.execute_model_with_error_logging(",
        "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    )
    fatal_nccl = ("RuntimeError: cancelled",)
    fatal_wrapped = False
    handler_where = ("async_llm.py:416", 375, 751)
    failed_where = "async_llm.py:348"
    stream_errors = False

    def proc(self, who: str, rank: int = 0) -> str:
        """Only TP workers carry a (bold cyan) prefix in 0.10.0."""
        if who == "worker" and self.tp > 1:
            return f"\x1b[1;36m(VllmWorker rank={rank} pid={self.worker_pids[rank]})\x1b[0;0m "
        return ""

    def make_ids(self, idx: int, chat: bool) -> tuple[str, str]:
        """32-hex ids, the same in every line."""
        rid = f"chatcmpl-{self.hex(32)}" if chat else f"cmpl-{self.hex(32)}-0"
        return rid, rid

    def non_default_args(self) -> str:
        """0.10.0 `non-default args` (request logging is on by default, so not listed)."""
        e = self.cfg.engine
        d = [f"'model': '{e.model}'", f"'max_model_len': {e.max_model_len}", f"'max_log_len': {self.max_log_len}"]
        if e.tensor_parallel_size != 1:
            d.append(f"'tensor_parallel_size': {e.tensor_parallel_size}")
        if e.gpu_memory_utilization != 0.9:
            d.append(f"'gpu_memory_utilization': {e.gpu_memory_utilization}")
        if e.max_num_seqs != 256:
            d.append(f"'max_num_seqs': {e.max_num_seqs}")
        return "non-default args: {" + ", ".join(d) + "}"

    def engine_config(self) -> str:
        """`Initializing a V1 LLM engine` config text (0.10.0)."""
        e = self.cfg.engine
        return (
            f"Initializing a V1 LLM engine (v{self.version}) with config: model='{e.model}', speculative_config=None, "
            f"tokenizer='{e.model}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
            "override_neuron_config={}, tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, "
            f"max_seq_len={e.max_model_len}, download_dir=None, load_format=LoadFormat.AUTO, "
            f"tensor_parallel_size={e.tensor_parallel_size}, pipeline_parallel_size=1, "
            "disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=auto,  "
            "device_config=cuda, decoding_config=DecodingConfig(backend='auto', disable_fallback=False, "
            "disable_any_whitespace=False, disable_additional_properties=False, reasoning_backend=''), "
            "observability_config=ObservabilityConfig(show_hidden_metrics_for_version=None, "
            "otlp_traces_endpoint=None, collect_detailed_traces=None), seed=0, "
            f"served_model_name={e.model}, num_scheduler_steps=1, multi_step_stream_outputs=True, "
            "enable_prefix_caching=True, chunked_prefill_enabled=True, use_async_output_proc=True, "
            "pooler_config=None, compilation_config={\"level\":3,\"debug_dump_path\":\"\",\"cache_dir\":\"\","
            "\"backend\":\"\",\"custom_ops\":[],\"splitting_ops\":[\"vllm.unified_attention\","
            "\"vllm.unified_attention_with_output\",\"vllm.mamba_mixer2\"],\"use_inductor\":true,"
            "\"compile_sizes\":[],\"use_cudagraph\":true,\"cudagraph_num_of_warmups\":1,\"max_capture_size\":512}"
        )

    def _startup_common(self, t0: float) -> float:
        """0.10.0: version line, args, engine config, model loading."""
        e = self.cfg.engine
        t = t0
        self.line(t, "api", "INFO", "__init__.py:235", "Automatically detected platform cuda.")
        t += 2.1
        self.line(t, "api", "INFO", "api_server.py:1755", f"vLLM API server version {self.version}")
        self.line(t, "api", "INFO", "cli_args.py:261", self.non_default_args())
        t += 5.4
        self.line(t, "api", "INFO", "config.py:841",
                  "This model supports multiple tasks: {'reward', 'generate', 'embed', 'classify'}. "
                  "Defaulting to 'generate'.")
        self.line(t, "api", "INFO", "config.py:1604", f"Using max model len {e.max_model_len}")
        self.line(t, "api", "INFO", "config.py:2434",
                  f"Chunked prefill is enabled with max_num_batched_tokens={e.budget(True)}.")
        t += 4.9
        self.line(t, "core", "INFO", "core.py:71", self.engine_config())
        if self.tp > 1:
            self.line(t, "core", "INFO", "multiproc_executor.py:48",
                      "Reducing Torch parallelism from 32 threads to 1 to avoid unnecessary CPU contention. "
                      "Set OMP_NUM_THREADS in the external environment to tune this value as needed.")
            self.line(t + 1, "worker", "INFO", "pynccl.py:70", "vLLM is using nccl==2.26.2", 0)
        for r in range(self.tp):
            self.line(t + 1.5, "worker", "INFO", "parallel_state.py:1102",
                      f"rank {r} in world size {self.tp} is assigned as DP rank 0, PP rank 0, TP rank {r}, EP rank {r}",
                      r)
        t += 1.6
        self.line(t, "worker", "INFO", "gpu_model_runner.py:1843", f"Starting to load model {e.model}...")
        return self.load_weights(t, "default_loader.py:262", "gpu_model_runner.py:1892",
                                 f"Model loading took {e.weights_gib / self.tp:.4f} GiB and 4.027188 seconds")

    def startup(self, t0: float) -> float:
        """0.10.0 start-up through `Application startup complete.`."""
        e = self.cfg.engine
        t = self.compile_lines(self._startup_common(t0)) + 1.6
        self.line(t, "worker", "INFO", "gpu_worker.py:255", f"Available KV cache memory: {e.kv_cache_gib:.2f} GiB")
        tokens = e.num_gpu_blocks * e.block_size
        self.line(t + 0.1, "core", "INFO", "kv_cache_utils.py:833", f"GPU KV cache size: {_commas(tokens)} tokens")
        self.line(t + 0.1, "core", "INFO", "kv_cache_utils.py:837",
                  f"Maximum concurrency for {_commas(e.max_model_len)} tokens per request: "
                  f"{tokens / e.max_model_len:.2f}x")
        self.raw(t + 21.0, f"Capturing CUDA graph shapes: 100%|{BAR}| 67/67 [00:21<00:00,  3.12it/s]")
        t += 21.2
        self.line(t, "worker", "INFO", "gpu_model_runner.py:2485", "Graph capturing finished in 21 secs, took 0.61 GiB")
        self.line(t + 0.1, "core", "INFO", "core.py:193",
                  "init engine (profile, create kv cache, warmup model) took 52.46 seconds")
        t += 0.5
        self.line(t, "api", "INFO", "loggers.py:137",
                  f"Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: {e.num_gpu_blocks}")
        self.line(t, "api", "INFO", "api_server.py:1818", "Starting vLLM API server 0 on http://0.0.0.0:8000")
        return self.serve(t)

    def no_blocks_message(self) -> str:
        """0.1–0.12 wording."""
        return "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."

    def kv_too_small_message(self, max_len: int, need: float, avail: float, est: int) -> str:
        """0.9–0.21 wording: the "models's" typo and `{:.2f}` GiB."""
        return (
            f"To serve at least one request with the models's max seq len ({max_len}), ({need:.2f} GiB KV cache is "
            f"needed, which is larger than the available KV cache memory ({avail:.2f} GiB). Based on the available "
            f"memory, the estimated maximum model length is {est}. Try increasing `gpu_memory_utilization` or "
            "decreasing `max_model_len` when initializing the engine."
        )

    def api_init_failure(self) -> list[str]:
        """0.9–0.10.0: the core process is named EngineCore_0."""
        lines = super().api_init_failure()
        lines[-1] = ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
                     "{'EngineCore_0': 1}")
        return lines

    def received(self, req: SimRequest) -> str:
        """0.10.0 request logger: prompt and ids, truncated by --max-log-len (`Added request` has the same id)."""
        words = prompt_text(self.rng, 24)
        if self._ids is None:
            self._ids = id_pool(self.rng)
        ids = token_ids(self.rng, min(req.prompt, self.max_log_len), self._ids)
        return (f"Received request {req.rid}: prompt: {words[: self.max_log_len]!r}, params: "
                f"{SAMPLING_010.format(max_tokens=req.max_tokens)}, prompt_token_ids: {ids}, "
                "prompt_embeds shape: None, lora_request: None.")

    def on_abort(self, t: float, req: SimRequest) -> None:
        """`Aborted request <id>.` (engine) and `Request <id> aborted.` (generate)."""
        self.line(t, "api", "INFO", "async_llm.py:414", f"Aborted request {req.rid}.")
        self.line(t, "api", "INFO", "async_llm.py:345", f"Request {req.rid} aborted.")

    def stats_text(self, s: StatsSnapshot) -> str:
        """0.8.3–0.11.0 wording."""
        hit = self.target_hit if self.n_seen else 0.0
        return (f"Engine 000: Avg prompt throughput: {s.prompt_tps:.1f} tokens/s, Avg generation throughput: "
                f"{s.gen_tps:.1f} tokens/s, Running: {s.running} reqs, Waiting: {s.waiting} reqs, GPU KV cache "
                f"usage: {100 * s.gpu_kv:.1f}%, Prefix cache hit rate: {hit:.1f}%")

    def on_engine_death(self, t: float, cause: str, inflight: list[SimRequest]) -> float:
        """0.10.0: fatal error, output handler failed, requests fail, uvicorn exits."""
        self.core_fatal(t, cause)
        t1 = t + 0.05
        self.output_handler_failed(t1)
        self.fail_requests(t1, inflight)
        return self.server_exit(t1, inflight)

    def worker_gone(self, t: float) -> None:
        """0.8.5–0.25 wording; no [shutdown] lines before 0.23."""
        if self.tp > 1:
            self.worker_died(t, 0)

    def on_shutdown(self, t: float) -> float:
        """0.6.2–0.22: `Shutting down FastAPI HTTP server.` then uvicorn."""
        return self.fastapi_shutdown(t, "launcher.py:80")
