"""vLLM V1 engine logs as 0.15.1 prints them: the stdout wrapper puts a cyan `(Name pid=N)` prefix on every
line a process writes (uvicorn and tracebacks included; 0.12–0.15 colour it even in files), EngineCore is
`EngineCore_DP0`, and the stats line carries `Preemptions: N` when the interval had any (0.11.2–0.19)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .v1 import ROUTES_010, V1Writer

if TYPE_CHECKING:
    from ..model import SimRequest
    from ..scheduler import StatsSnapshot

SAMPLING_015 = (
    "SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.7, "
    "top_p=1.0, top_k=0, min_p=0.0, seed=None, stop=[], stop_token_ids=[], bad_words=[], "
    "include_stop_str_in_output=False, ignore_eos=False, max_tokens={max_tokens}, min_tokens=0, logprobs=None, "
    "prompt_logprobs=None, skip_special_tokens=True, spaces_between_special_tokens=True, "
    "truncate_prompt_tokens=None, structured_outputs=None, extra_args=None)"
)
CYAN, RESET = "\x1b[0;36m", "\x1b[0;0m"


class V1MidWriter(V1Writer):
    """V1 server of the 0.12–0.17 generation (printed as 0.15.1) with `--enable-log-requests`."""

    name = "v1-0.15"
    version = "0.15.1"
    logo_where = "utils.py:325"
    args_where = "utils.py:233"
    routes = ROUTES_010
    routes_where = ("launcher.py:38", "launcher.py:46")
    compile_where = ("backends.py:548", "monitor.py:34")
    compile_done = "torch.compile takes 21.33 s in total"  # 0.6.5–0.17 wording
    sampling = SAMPLING_015
    arrival_where = ("logger.py:47", "async_llm.py:587")  # 0.11.2–0.22 request logger (no prompt at INFO)
    abort_where = ("async_llm.py:959", "async_llm.py:811")
    stats_where = "loggers.py:236"
    hang_record = ("WARNING", "shm_broadcast.py:466", V1Writer.hang_record[2])  # 0.11.2–0.17: WARNING
    executor_where = "multiproc_executor.py:230"
    watchdog_exit = ""  # 0.8.5–0.25 wording
    fatal_where = "core.py:710"  # 0.10.2–0.17
    fatal_lines = (701, 728, 754, 284)
    fatal_step = V1Writer.fatal_step[:2]
    fatal_nccl = ("RuntimeError: cancelled",)
    handler_where = ("async_llm.py:485", 441, 846)
    failed_where = "async_llm.py:816"
    stream_errors = False

    def _name(self, who: str, rank: int = 0) -> str:
        if who == "api":
            return f"APIServer pid={self.api_pid}"
        if who == "core":
            return f"EngineCore_DP0 pid={self.engine_pid}"
        name = "Worker" if self.tp == 1 else f"Worker_TP{rank}"
        return f"{name} pid={self.worker_pids[rank]}"

    def proc(self, who: str, rank: int = 0) -> str:
        """Coloured process prefix (0.12–0.15 colour it unconditionally)."""
        return f"{CYAN}({self._name(who, rank)}){RESET} "

    def stream_prefix(self, who: str | None) -> str:
        """0.10.1–0.30: the stdout/stderr wrapper prefixes raw lines too (never C++ output: who=None)."""
        return "" if who is None else self.proc(who)

    def access(self, req: SimRequest, status: int, t: float = 0.0) -> str:
        """uvicorn's access line, through the API server's stream wrapper."""
        return self.proc("api") + super().access(req, status, t)

    def startup(self, t0: float) -> float:
        """0.15 start-up through `Application startup complete.`."""
        e = self.cfg.engine
        t = self.compile_lines(self._startup_common(t0)) + 1.6
        self.line(t, "worker", "INFO", "gpu_worker.py:359", f"Available KV cache memory: {round(e.kv_cache_gib, 2)} GiB")
        tokens = e.num_gpu_blocks * e.block_size
        self.line(t + 0.1, "core", "INFO", "kv_cache_utils.py:1291", f"GPU KV cache size: {tokens:,} tokens")
        self.line(t + 0.1, "core", "INFO", "kv_cache_utils.py:1296",
                  f"Maximum concurrency for {e.max_model_len:,} tokens per request: {tokens / e.max_model_len:.2f}x")
        t = self.capture_graphs(t, "gpu_model_runner.py:4587")
        self.line(t + 0.1, "core", "INFO", "core.py:259",
                  "init engine (profile, create kv cache, warmup model) took 41.87 seconds")
        t += 0.6
        self.line(t, "api", "INFO", "api_server.py:1661", "Supported tasks: ['generate']")
        self.line(t, "api", "INFO", "api_server.py:2014", "Starting vLLM API server 0 on http://0.0.0.0:8000")
        return self.serve(t)

    def no_blocks_message(self) -> str:
        """0.13–0.21: docs link, no CPU-backend note yet."""
        return ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                "initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for "
                "more details.")

    def kv_too_small_message(self, max_len: int, need: float, avail: float, est: int) -> str:
        """0.13–0.21: "models's" typo, `format_gib` rounding, docs link."""
        return (
            f"To serve at least one request with the models's max seq len ({max_len}), ({round(need, 2)} GiB KV "
            f"cache is needed, which is larger than the available KV cache memory ({round(avail, 2)} GiB). Based "
            f"on the available memory, the estimated maximum model length is {est}. Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine. See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
        )

    def api_init_failure(self) -> list[str]:
        """0.10.2–0.17: the core process is `EngineCore_DP0`."""
        lines = super().api_init_failure()
        lines[-1] = ("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
                     "{'EngineCore_DP0': 1}")
        return lines

    def worker_gone(self, t: float) -> None:
        """0.8.5–0.25 wording."""
        self.worker_died(t, 0)

    # ------------------------------------------------------------------ requests
    def stats_text(self, s: StatsSnapshot) -> str:
        """0.11.2–0.19: `Preemptions: N` appears when the interval had preemptions."""
        pre = f"Preemptions: {s.preemptions}, " if s.preemptions else ""
        return (
            f"Engine 000: Avg prompt throughput: {s.prompt_tps:.1f} tokens/s, Avg generation throughput: "
            f"{s.gen_tps:.1f} tokens/s, Running: {s.running} reqs, Waiting: {s.waiting} reqs, {pre}GPU KV cache "
            f"usage: {100 * s.gpu_kv:.1f}%, Prefix cache hit rate: {(self.target_hit if self.n_seen else 0.0):.1f}%"
        )

    def on_engine_death(self, t: float, cause: str, inflight: list[SimRequest]) -> float:
        """Fatal error, output handler fails, `Engine core proc … died unexpectedly`, requests fail, exit."""
        self.core_fatal(t, cause)
        t1 = t + 0.05
        self.output_handler_failed(t1)
        self.line(t1, "api", "ERROR", "core_client.py:564",
                  "Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.")
        self.fail_requests(t1, inflight)
        return self.server_exit(t1, inflight)

    def on_shutdown(self, t: float) -> float:
        """0.6.2–0.22: `Shutting down FastAPI HTTP server.` then uvicorn."""
        return self.fastapi_shutdown(t, "launcher.py:110")
