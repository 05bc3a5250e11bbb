"""Deterministic generator of the held-out incident set (``NN-slug.log`` + ``NN-slug.json``).

Run ``python tests/data/heldout/make_heldout.py`` to rewrite the files next to this script.
The cases are written from the vLLM log formats by release (see docs / vllm-formats reference), not
from the corpus, so they probe whether the diagnosis generalises. No randomness apart from a seeded RNG.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
ANSI_CYAN, ANSI_RESET = "\x1b[1;36m", "\x1b[0;0m"


class Log:
    """Builds one log: a clock, a line style, an optional outer wrapper, and the labelled lines.

    style: ``v0`` (``INFO 03-25 10:15:23 file.py:N] msg``), ``v1`` (``[file.py:N]``), ``v11``
    (``(APIServer pid=N) `` process prefix on every line, uvicorn lines too), ``handbook`` (= v0 prefix).
    wrap: None, ``compose`` (``vllm-1  | ``) or ``kubectl`` (RFC3339 timestamp prefix).
    """

    def __init__(self, start: str, style: str, wrap: str | None = None, pid: int = 7, ansi: bool = False,
                 seed: int = 0) -> None:
        self.t = datetime.strptime(start, "%Y-%m-%d %H:%M:%S")
        self.style, self.wrap, self.pid, self.ansi = style, wrap, pid, ansi
        self.lines: list[str] = []
        self.evidence: list[int] = []
        self.rng = random.Random(seed)
        self._us = 0

    # -- clock
    def tick(self, s: float) -> None:
        self.t += timedelta(seconds=s)

    # -- low level
    def _wrap(self, text: str) -> str:
        if self.wrap == "compose":
            return "vllm-1  | " + text
        if self.wrap == "kubectl":
            self._us = (self._us + 137911) % 1_000_000
            return self.t.strftime("%Y-%m-%dT%H:%M:%S") + f".{self._us:06d}123Z " + text
        return text

    def proc(self, name: str | None = None) -> str:
        if self.style != "v11":
            return ""
        p = f"({name or 'APIServer'} pid={self.pid if name is None else self.pid + 40})"
        return (ANSI_CYAN + p + ANSI_RESET + " ") if self.ansi else p + " "

    def raw(self, text: str, ev: bool = False) -> int:
        """A line without vLLM's logger prefix (uvicorn, raw traceback, C++ output), wrapper applied."""
        self.lines.append(self._wrap(text))
        n = len(self.lines)
        if ev:
            self.evidence.append(n)
        return n

    def log(self, level: str, src: str, msg: str, ev: bool = False, name: str | None = None) -> int:
        """A vLLM logger record; a multi-line message repeats the prefix on each physical line."""
        stamp = self.t.strftime("%m-%d %H:%M:%S")
        where = f"{src}]" if self.style in ("v0", "handbook") else f"[{src}]"
        first = None
        for part in msg.split("\n"):
            n = self.raw(f"{self.proc(name)}{level} {stamp} {where} {part}", ev)
            first = first or n
        return first

    def info(self, src, msg, ev=False, name=None):
        return self.log("INFO", src, msg, ev, name)

    def warn(self, src, msg, ev=False, name=None):
        return self.log("WARNING", src, msg, ev, name)

    def error(self, src, msg, ev=False, name=None):
        return self.log("ERROR", src, msg, ev, name)

    def uv(self, text: str, ev: bool = False) -> int:
        """A uvicorn line (process prefix in the v11 style, since the stream is wrapped)."""
        return self.raw(f"{self.proc()}INFO:     {text}" if not text.startswith(("ERROR:", "WARNING:"))
                        else f"{self.proc()}{text}", ev)

    def access(self, path: str = "/v1/chat/completions", status: int = 200, method: str = "POST",
               ev: bool = False) -> int:
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}[status]
        ip = f"10.0.{self.rng.randint(0, 3)}.{self.rng.randint(2, 250)}:{self.rng.randint(30000, 65000)}"
        return self.uv(f'{ip} - "{method} {path} HTTP/1.1" {status} {reason}', ev)

    def write(self, slug: str, label: dict) -> None:
        n = len(self.lines)
        assert 40 <= n <= 200, (slug, n)
        (HERE / f"{slug}.log").write_text("\n".join(self.lines) + "\n")
        label = dict(label)
        label.setdefault("secondary_categories", [])
        label["evidence_line_numbers"] = sorted(set(label.pop("extra_evidence", []) + self.evidence))
        (HERE / f"{slug}.json").write_text(json.dumps(label, indent=2) + "\n")


# ---------------------------------------------------------------- building blocks

def v0_startup(g: Log, version: str = "0.5.3.post1", model: str = "meta-llama/Llama-2-7b-chat-hf",
               tp: int = 1, blocks: int = 2810, max_len: int = 4096, graphs: bool = True) -> None:
    g.info("api_server.py:212", f"vLLM API server version {version}")
    g.info("api_server.py:213", f"args: Namespace(host=None, port=8000, model='{model}', tensor_parallel_size={tp}, "
           f"max_model_len={max_len}, gpu_memory_utilization=0.9, max_num_seqs=256, swap_space=4)")
    g.info("llm_engine.py:174", f"Initializing an LLM engine (v{version}) with config: model='{model}', "
           f"speculative_config=None, tokenizer='{model}', dtype=torch.float16, max_seq_len={max_len}, "
           f"tensor_parallel_size={tp}, enforce_eager=False, kv_cache_dtype=auto, seed=0)")
    g.tick(2)
    g.info("weight_utils.py:218", "Using model weights format ['*.safetensors']")
    g.tick(9)
    g.info("model_runner.py:255", "Loading model weights took 12.5523 GB")
    g.tick(2)
    g.info("gpu_executor.py:83", f"# GPU blocks: {blocks}, # CPU blocks: 512")
    if graphs:
        g.info("model_runner.py:924", "Capturing the model for CUDA graphs. This may lead to unexpected consequences "
               "if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use "
               "'--enforce-eager' in the CLI.")
        g.tick(11)
        g.info("model_runner.py:1044", "Graph capturing finished in 11 secs.")
    g.info("serving_chat.py:84", "Using default chat template")
    g.uv("Started server process [4127]")
    g.uv("Waiting for application startup.")
    g.uv("Application startup complete.")
    g.uv("Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)")


def v0_stats(g: Log, prompt: float, gen: float, run: int, swapped: int, pend: int, kv: float, cpu: float = 0.0,
             ev: bool = False) -> int:
    return g.info("metrics.py:341", f"Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: "
                  f"{gen:.1f} tokens/s, Running: {run} reqs, Swapped: {swapped} reqs, Pending: {pend} reqs, "
                  f"GPU KV cache usage: {kv:.1f}%, CPU KV cache usage: {cpu:.1f}%.", ev)


def v1_startup(g: Log, version: str = "0.9.2", model: str = "Qwen/Qwen2.5-7B-Instruct", tp: int = 1,
               max_seqs: int = 256, max_len: int = 32768, kv_tokens: int = 231_584, ready: bool = True,
               engine: str | None = None) -> None:
    """Start-up of a V1 server (0.8–0.30). ``engine`` is the EngineCore's process name (v11 style)."""
    g.info("api_server.py:1395", f"vLLM API server version {version}")
    g.info("cli_args.py:325", f"non-default args: {{'model': '{model}', 'tensor_parallel_size': {tp}, "
           f"'max_num_seqs': {max_seqs}, 'max_model_len': {max_len}}}")
    g.tick(6)
    g.info("config.py:841", "This model supports multiple tasks: {'generate', 'reward', 'embed'}. Defaulting to 'generate'.")
    g.info("config.py:2224", "Chunked prefill is enabled with max_num_batched_tokens=8192.")
    g.tick(2)
    g.info("core.py:455", f"Waiting for init message from front-end.", name=engine)
    g.info("core.py:70", f"Initializing a V1 LLM engine (v{version}) with config: model='{model}', "
           f"dtype=torch.bfloat16, max_seq_len={max_len}, tensor_parallel_size={tp}, enforce_eager=False", name=engine)
    g.info("gpu_model_runner.py:1770", f"Starting to load model {model}...", name=engine)
    g.tick(1)
    g.info("gpu_model_runner.py:1775", "Loading model from scratch...", name=engine)
    g.info("cuda.py:284", "Using Flash Attention backend on V1 engine.", name=engine)
    g.tick(8)
    g.info("default_loader.py:272", "Loading weights took 7.91 seconds", name=engine)
    g.info("gpu_model_runner.py:1801", "Model loading took 14.2474 GiB and 8.672049 seconds", name=engine)
    g.tick(9)
    g.info("backends.py:508", "Using cache directory: /root/.cache/vllm/torch_compile_cache/6a1f0d2b1e/rank_0_0/backbone for vLLM's torch.compile", name=engine)
    g.info("backends.py:519", "Dynamo bytecode transform time: 6.12 s", name=engine)
    g.tick(6)
    g.info("monitor.py:34", "torch.compile takes 12.40 s in total", name=engine)
    g.tick(1)
    g.info("gpu_worker.py:232", "Available KV cache memory: 53.01 GiB", name=engine)
    g.info("kv_cache_utils.py:716", f"GPU KV cache size: {kv_tokens:,} tokens", name=engine)
    g.info("kv_cache_utils.py:720", f"Maximum concurrency for {max_len:,} tokens per request: "
           f"{kv_tokens / max_len:.2f}x", name=engine)
    if not ready:
        return
    g.tick(14)
    g.info("gpu_model_runner.py:2242", "Graph capturing finished in 14 secs, took 0.51 GiB", name=engine)
    g.info("core.py:193", "init engine (profile, create kv cache, warmup model) took 42.86 seconds", name=engine)
    g.tick(1)
    g.info("loggers.py:141", f"Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: {kv_tokens // 16}")
    g.info("api_server.py:1457", "Starting vLLM API server 0 on http://0.0.0.0:8000")
    g.info("launcher.py:29", "Available routes are:")
    for r in ("/health", "/v1/models", "/v1/completions", "/v1/chat/completions", "/metrics"):
        g.info("launcher.py:37", f"Route: {r}, Methods: GET" if r in ("/health", "/v1/models", "/metrics")
               else f"Route: {r}, Methods: POST")
    g.uv("Started server process [7]")
    g.uv("Waiting for application startup.")
    g.uv("Application startup complete.")


def v1_stats(g: Log, prompt: float, gen: float, run: int, wait: int, kv: float, hit: float = 0.0,
             preempt: int | None = None, ev: bool = False) -> int:
    pre = f"Preemptions: {preempt}, " if preempt is not None else ""
    return g.info("loggers.py:123", f"Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation "
                  f"throughput: {gen:.1f} tokens/s, Running: {run} reqs, Waiting: {wait} reqs, {pre}"
                  f"GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: {hit:.1f}%", ev)


def traffic(g: Log, n: int, path: str = "/v1/chat/completions") -> None:
    for _ in range(n):
        g.access(path)


CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity "
            "of 23.54 GiB of which 187.75 MiB is free. Including non-PyTorch memory, this process has 23.33 GiB "
            "memory in use. Of the allocated memory 22.90 GiB is allocated by PyTorch, and 240.00 MiB is reserved "
            "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
            "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


# ---------------------------------------------------------------- cases

def c01(slug):
    """V1 0.9 (bracketed, no process prefix): CUDA OOM while capturing CUDA graphs at start-up."""
    g = Log("2026-05-02 11:00:01", "v1")
    v1_startup(g, version="0.9.2", model="meta-llama/Llama-3.1-8B-Instruct", max_seqs=512, ready=False,
               kv_tokens=61_440)
    g.info("gpu_model_runner.py:2204", "Capturing CUDA graph shapes:  40%|████      | 27/67 [00:05<00:07,  5.1it/s]")
    g.tick(6)
    g.error("core.py:586", "EngineCore failed to start.", ev=True)
    tb = ["Traceback (most recent call last):",
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 577, in run_engine_core',
          "    engine_core = EngineCoreProc(*args, **kwargs)",
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 404, in __init__',
          "    super().__init__(vllm_config, executor_class, log_stats,",
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 82, in __init__',
          "    self._initialize_kv_caches(vllm_config)",
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2215, in capture_model',
          "    self._dummy_run(num_tokens, capture_attn_cudagraph=full_cg)",
          '  File "/usr/local/lib/python3.12/dist-packages/torch/cuda/graphs.py", line 186, in __exit__',
          "    self.cuda_graph.capture_end()"]
    g.error("core.py:586", "\n".join(tb))
    g.error("core.py:586", CUDA_OOM, ev=True)
    g.raw("Process EngineCore_0:")
    g.raw("Traceback (most recent call last):")
    g.raw('  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap')
    g.raw("    self.run()")
    g.raw(CUDA_OOM)
    g.tick(1)
    g.raw("Traceback (most recent call last):")
    g.raw('  File "/usr/local/bin/vllm", line 10, in <module>')
    g.raw("    sys.exit(main())")
    g.raw('  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core_client.py", line 430, in __init__')
    g.raw("    self._wait_for_engine_startup()")
    g.raw("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_0': 1}")
    g.raw("/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear to "
          "be 1 leaked shared_memory objects to clean up at shutdown")
    g.write(slug, dict(category="startup_oom", vllm_generation="v1", version="0.9.2",
                       root_cause="GPU memory ran out while capturing CUDA graphs for max_num_seqs=512 after the KV "
                                  "cache had taken gpu_memory_utilization of the card.",
                       fix=["Lower --max-num-seqs or --gpu-memory-utilization, or --enforce-eager to skip CUDA graphs"]))


def c02(slug):
    """V0 0.5 docker-compose wrapper: no memory left for KV blocks after loading a big model."""
    g = Log("2026-07-14 08:30:00", "v0", wrap="compose")
    g.info("api_server.py:212", "vLLM API server version 0.5.4")
    g.info("api_server.py:213", "args: Namespace(host=None, port=8000, model='meta-llama/Meta-Llama-3-70B-Instruct-AWQ', "
           "tensor_parallel_size=1, max_model_len=8192, gpu_memory_utilization=0.9, quantization='awq')")
    g.info("awq_marlin.py:89", "The model is convertible to awq_marlin during runtime. Using awq_marlin kernel.")
    g.info("llm_engine.py:174", "Initializing an LLM engine (v0.5.4) with config: model='meta-llama/Meta-Llama-3-70B-Instruct-AWQ', "
           "dtype=torch.float16, max_seq_len=8192, tensor_parallel_size=1, quantization=awq_marlin, enforce_eager=False)")
    g.tick(3)
    g.info("model_runner.py:720", "Starting to load model meta-llama/Meta-Llama-3-70B-Instruct-AWQ...")
    g.info("weight_utils.py:225", "Using model weights format ['*.safetensors']")
    for i in range(1, 16):
        g.tick(4)
        g.raw(f"Loading safetensors checkpoint shards: {i * 100 // 15:3d}% Completed | {i}/15 [00:{i * 4:02d}<00:{60 - i * 4:02d},  4.02s/it]")
    g.info("model_runner.py:732", "Loading model weights took 37.0734 GB")
    g.tick(5)
    g.info("gpu_executor.py:102", "# GPU blocks: 0, # CPU blocks: 819", ev=True)
    g.raw("[rank0]: Traceback (most recent call last):")
    frames = [("/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/openai/api_server.py", 317, "run_server"),
              ("/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py", 741, "from_engine_args"),
              ("/usr/local/lib/python3.10/dist-packages/vllm/engine/llm_engine.py", 284, "__init__"),
              ("/usr/local/lib/python3.10/dist-packages/vllm/engine/llm_engine.py", 403, "_initialize_kv_caches"),
              ("/usr/local/lib/python3.10/dist-packages/vllm/executor/gpu_executor.py", 105, "initialize_cache"),
              ("/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", 256, "initialize_cache"),
              ("/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", 378, "raise_if_cache_size_invalid")]
    for f, ln, fn in frames:
        g.raw(f'[rank0]:   File "{f}", line {ln}, in {fn}')
        g.raw(f"[rank0]:     {fn}(...)")
    g.raw("[rank0]: ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
          "when initializing the engine.", ev=True)
    g.raw("Gracefully stopping... (press Ctrl+C again to force)")
    g.write(slug, dict(category="kv_cache_capacity_error", vllm_generation="v0", version="0.5.4",
                       root_cause="The 70B AWQ weights (37 GB) plus activations leave no room for a single KV block at "
                                  "gpu_memory_utilization=0.9 on a 40 GB card.",
                       fix=["Raise --gpu-memory-utilization, use a smaller model or more GPUs (-tp 2)"]))


def c03(slug):
    """V0 0.4.x: the engine background loop dies of a CUDA OOM while serving; requests then fail."""
    g = Log("2026-03-25 10:15:23", "v0")
    v0_startup(g, version="0.4.2", blocks=1730)
    for i in range(8):
        traffic(g, 3)
        g.tick(5)
        v0_stats(g, 820.0 + i * 15, 410.5 + i * 9, 18 + i, 0, 0, 34.0 + i * 6)
    g.tick(2)
    g.error("async_llm_engine.py:43", "Engine background task failed", ev=True)
    tb = ["Traceback (most recent call last):",
          '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py", line 38, in _raise_exception_on_finish',
          "    task.result()",
          '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py", line 501, in run_engine_loop',
          "    has_requests_in_progress = await asyncio.wait_for(",
          '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py", line 475, in engine_step',
          "    request_outputs = await self.engine.step_async()",
          '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/model_runner.py", line 1249, in execute_model',
          "    logits = self.model.compute_logits(hidden_states, sampling_metadata)",
          '  File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/layers/logits_processor.py", line 55, in forward',
          "    logits = logits.float()"]
    g.error("async_llm_engine.py:43", "\n".join(tb))
    g.error("async_llm_engine.py:43", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. "
            "GPU 0 has a total capacity of 23.69 GiB of which 3.09 GiB is free. Process 4127 has 20.59 GiB memory in "
            "use. Of the allocated memory 19.80 GiB is allocated by PyTorch, and 412.00 MiB is reserved by PyTorch but "
            "unallocated.", ev=True)
    g.error("async_llm_engine.py:43", "")
    g.error("async_llm_engine.py:43", "The above exception was the direct cause of the following exception:")
    g.error("async_llm_engine.py:43", "")
    g.error("async_llm_engine.py:43", "Traceback (most recent call last):\n  File \"/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py\", line 45, in _raise_exception_on_finish\n    raise AsyncEngineDeadError(")
    g.error("async_llm_engine.py:43", "vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly. "
            "This should never happen! Please open an issue on Github. See stack trace above for the actual cause.")
    g.raw("Exception in callback functools.partial(<function _raise_exception_on_finish at 0x7f1c8a2e3d90>, "
          "error_callback=<bound method AsyncLLMEngine._error_callback of <vllm.engine.async_llm_engine.AsyncLLMEngine object at 0x7f1c6c4e1f30>>)")
    g.raw("handle: <Handle functools.partial(<function _raise_exception_on_finish at 0x7f1c8a2e3d90>)>")
    for _ in range(6):
        g.tick(1)
        g.raw("ERROR:    Exception in ASGI application")
        g.raw("Traceback (most recent call last):")
        g.raw('  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py", line 652, in generate')
        g.raw("    stream = await self.add_request(")
        g.raw("vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored already.")
        g.access(status=500)
    g.write(slug, dict(category="runtime_oom", secondary_categories=["engine_dead"], vllm_generation="v0",
                       version="0.4.2",
                       root_cause="A large batch's logits (float upcast) needed 3.5 GiB more than was free; the CUDA "
                                  "OOM killed the engine loop and every later request failed with AsyncEngineDeadError.",
                       fix=["Lower --gpu-memory-utilization / --max-num-seqs to leave activation headroom",
                            "Restart the server (the engine does not recover)"]))


def c04(slug):
    """V0 0.6: swap preemption with the cumulative counter, Swapped > 0, KV 99 %."""
    g = Log("2026-09-03 16:40:00", "v0", seed=4)
    v0_startup(g, version="0.6.3.post1", model="mistralai/Mistral-7B-Instruct-v0.3", blocks=2048, max_len=32768)
    kv = [42.0, 61.5, 78.2, 90.4, 97.8, 99.1, 99.6, 99.4, 99.7, 99.2, 99.5, 99.8]
    cum = 1
    for i, k in enumerate(kv):
        traffic(g, 3)
        g.tick(5)
        hot = k > 99
        if i >= 5:
            g.warn("scheduler.py:1560", f"Sequence group cmpl-{0x3fa2 + i * 97:x}-0 is preempted by "
                   "PreemptionMode.SWAP mode because there is not enough KV cache space. This can affect the "
                   "end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more "
                   f"KV cache memory. total_num_cumulative_preemption={cum}", ev=True)
            cum += 50  # only the 1st, 51st, 101st … preemption is logged
        v0_stats(g, 640.0 - i * 20, 1810.0 - i * 60, 96 - (i - 4) * 6 if i > 4 else 96,
                 (i - 4) * 7 if i > 4 else 0, 3 * i, k, cpu=(i - 4) * 9.5 if i > 4 else 0.0, ev=hot)
    g.tick(5)
    v0_stats(g, 300.0, 1210.0, 52, 38, 40, 99.3, cpu=73.0, ev=True)
    g.write(slug, dict(category="kv_cache_pressure_preemption", secondary_categories=["queue_backlog"],
                       vllm_generation="v0", version="0.6.3.post1",
                       root_cause="Long-context requests filled the GPU KV cache (99 %); the scheduler swapped "
                                  "sequence groups to CPU (Swapped up to 38, 151+ cumulative preemptions).",
                       fix=["Lower --max-num-seqs or --max-model-len, raise --gpu-memory-utilization or use -tp 2"]))


def c05(slug):
    """V1 0.11.2+ with ANSI-coloured process prefix under docker compose: Preemptions in the stats line."""
    g = Log("2026-10-20 09:00:00", "v11", wrap="compose", pid=1, ansi=True, seed=5)
    v1_startup(g, version="0.11.2", model="Qwen/Qwen3-14B", max_seqs=128, max_len=40960, kv_tokens=98_304,
               engine="EngineCore_DP0")
    rows = [(3120.4, 410.2, 24, 0, 0, 31.2), (2810.0, 690.5, 48, 0, 0, 55.8), (2450.2, 880.1, 71, 3, 0, 79.4),
            (1980.7, 950.3, 83, 11, 0, 93.1), (1202.5, 901.4, 86, 24, 4, 98.7), (640.1, 870.9, 80, 37, 12, 99.5),
            (590.3, 860.2, 79, 44, 12, 99.5), (610.8, 855.7, 81, 52, 15, 99.6), (420.6, 840.1, 78, 61, 9, 99.4),
            (515.9, 835.0, 80, 66, 14, 99.5)]
    for p, gen, r, w, pre, kv in rows:
        traffic(g, 4)
        g.tick(10)
        v1_stats(g, p, gen, r, w, kv, hit=12.5, preempt=pre, ev=pre >= 9)
    traffic(g, 3)
    g.write(slug, dict(category="kv_cache_pressure_preemption", secondary_categories=["queue_backlog"],
                       vllm_generation="v1", version="0.11.2",
                       root_cause="KV cache pinned at 99.5 % with 9-15 preemptions per 10 s interval; Waiting "
                                  "grows because admitted requests keep being recomputed.",
                       fix=["Lower --max-num-seqs, raise --gpu-memory-utilization, add GPUs, or shorten max_tokens"]))


def c06(slug):
    """V1 0.10 under ``kubectl logs --timestamps``: Running pinned at max_num_seqs=16, Waiting 0 → 180."""
    g = Log("2026-06-11 13:20:00", "v1", wrap="kubectl", seed=6)
    v1_startup(g, version="0.10.1.1", model="google/gemma-2-9b-it", max_seqs=16, max_len=8192, kv_tokens=163_840)
    waits = [0, 4, 11, 19, 28, 37, 45, 56, 64, 75, 83, 92, 104, 113, 121, 132, 140, 151, 160, 171, 180]
    for i, w in enumerate(waits):
        traffic(g, 2)
        g.tick(15)
        v1_stats(g, 1210.0 + (i % 3) * 40, 402.0 + (i % 4) * 6, 16 if i else 9, w, 28.0 + min(i, 6) * 1.5,
                 hit=3.1, ev=w >= 100)
    g.write(slug, dict(category="queue_backlog", vllm_generation="v1", version="0.10.1.1",
                       root_cause="Arrival rate exceeds what 16 concurrent sequences can serve; Running is pinned at "
                                  "max_num_seqs=16 while KV usage stays ~37 % and Waiting grows to 180 in 5 minutes.",
                       fix=["Raise --max-num-seqs (KV headroom exists) or add replicas"]))


def c07(slug):
    """V1 0.10 TP=2 with worker prefixes: shm broadcast warnings every 60 s, Running 4 at 0 tokens/s."""
    g = Log("2026-08-19 22:05:00", "v1", seed=7)
    v1_startup(g, version="0.10.0", model="meta-llama/Llama-3.3-70B-Instruct", tp=2, max_seqs=64, max_len=16384,
               kv_tokens=120_000)
    for i in range(6):
        traffic(g, 3)
        g.tick(10)
        v1_stats(g, 1650.0 - i * 30, 310.0 + i * 5, 4, 0, 12.0 + i, hit=0.0)
    stuck = 0
    for minute in range(5):
        for j in range(6):
            g.tick(10)
            v1_stats(g, 0.0, 0.0, 4, min(stuck, 9), 18.4, hit=0.0, ev=(minute >= 1 and j == 0))
            stuck += 1
            if j in (1, 4):
                g.access("/health", method="GET")
        g.raw(f"(VllmWorker rank=0 pid=291) WARNING {g.t.strftime('%m-%d %H:%M:%S')} [shm_broadcast.py:466] "
              "No available shared memory broadcast block found in 60 second.", ev=True)
    g.write(slug, dict(category="engine_hang", secondary_categories=["distributed_nccl"], vllm_generation="v1",
                       version="0.10.0",
                       root_cause="One TP rank stopped consuming the shared-memory broadcast queue; the other rank "
                                  "waits forever: 4 requests running, zero throughput for 5 minutes.",
                       fix=["Restart; collect py-spy dumps of both workers; check NCCL/driver (NCCL_DEBUG=INFO)"]))


def c08(slug):
    """V1 0.11 with process prefixes (no colour): an idle server, stats every 10 s at 0.0 tokens/s."""
    g = Log("2026-11-02 03:00:00", "v11", pid=12, seed=8)
    v1_startup(g, version="0.11.0", model="microsoft/Phi-3-mini-4k-instruct", max_seqs=256, max_len=4096,
               kv_tokens=412_000, engine="EngineCore_DP0")
    g.access("/v1/chat/completions")
    g.tick(10)
    v1_stats(g, 18.4, 21.0, 0, 0, 0.0)
    for i in range(40):
        g.tick(10)
        v1_stats(g, 0.0, 0.0, 0, 0, 0.0)
        if i % 8 == 3:
            g.access("/health", method="GET")
    g.write(slug, dict(category="healthy", vllm_generation="v1", version="0.11.0",
                       root_cause="Idle server after one request; nothing wrong.", fix=[]))


def c09(slug):
    """V0 0.6 mp TP=2: NCCL watchdog timeout on rank 1 (C++ lines, unprefixed), then the worker dies."""
    g = Log("2026-04-07 02:00:00", "v0", seed=9)
    v0_startup(g, version="0.6.1.post2", model="Qwen/Qwen2-72B-Instruct-AWQ", tp=2, blocks=3120)
    wp = "(VllmWorkerProcess pid=2291) "
    g.raw(wp + "INFO 04-07 02:00:14 multiproc_worker_utils.py:215] Worker ready; awaiting tasks")
    for i in range(7):
        traffic(g, 3)
        g.tick(5)
        v0_stats(g, 512.0 + i * 11, 220.0 + i * 4, 6 + i % 3, 0, 0, 9.0 + i)
    g.tick(5)
    v0_stats(g, 0.0, 0.0, 8, 0, 2, 15.0)
    g.tick(590)
    t = g.t.strftime("%m%d %H:%M:%S")
    g.raw(f"[rank1]:[E{t}.408271257 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
          "timeout: WorkNCCL(SeqNum=48211, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, "
          "Timeout(ms)=600000) ran for 600123 milliseconds before timing out.", ev=True)
    g.raw(f"[rank1]:[E{t}.408612011 ProcessGroupNCCL.cpp:1664] [PG 3 Rank 1] Exception (either an error or "
          "timeout) detected by watchdog at work: 48211, last enqueued NCCL work: 48212, last completed NCCL work: 48210.")
    g.raw(f"[rank1]:[E{t}.408640377 ProcessGroupNCCL.cpp:621] [Rank 1] Some NCCL operations have failed or timed "
          "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/"
          "incomplete data.")
    g.raw(f"[rank1]:[E{t}.408655120 ProcessGroupNCCL.cpp:627] [Rank 1] To avoid data inconsistency, we are taking "
          "the entire process down.", ev=True)
    g.raw(f"[rank1]:[E{t}.409533811 ProcessGroupNCCL.cpp:1515] [PG 3 Rank 1] Process group watchdog thread "
          "terminated with exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=48211, "
          "OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600123 milliseconds "
          "before timing out.")
    g.raw("Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):")
    for k, fn in enumerate(["c10::Error::Error(c10::SourceLocation, std::string)", "c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >)",
                            "c10d::ProcessGroupNCCL::watchdogHandler()", "c10d::ProcessGroupNCCL::ncclCommWatchdog()",
                            "<unknown function> + 0xdc253 (0x7f3b1c4b0253 in /lib/x86_64-linux-gnu/libstdc++.so.6)"]):
        g.raw(f"frame #{k}: {fn} + 0x{0x96 + k * 0x1d:x} (0x7f3b1d{k:02d}e2a6 in /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so)")
    g.raw("")
    g.tick(1)
    g.error("multiproc_worker_utils.py:120", "Worker VllmWorkerProcess pid 2291 died, exit code: -6", ev=True)
    g.info("multiproc_worker_utils.py:124", "Killing local vLLM worker processes")
    g.tick(1)
    g.error("async_llm_engine.py:63", "Engine background task failed")
    g.error("async_llm_engine.py:63", "Traceback (most recent call last):\n  File \"/usr/local/lib/python3.10/dist-packages/vllm/executor/multiproc_worker_utils.py\", line 58, in _set_future_result\n    raise ChildProcessError(\"worker died\")")
    g.error("async_llm_engine.py:63", "ChildProcessError: worker died")
    for _ in range(3):
        g.access("/v1/chat/completions", status=500)
    g.write(slug, dict(category="distributed_nccl", secondary_categories=["engine_dead", "engine_hang"],
                       vllm_generation="v0", version="0.6.1.post2",
                       root_cause="An ALLREDUCE between the two TP ranks never completed; after the 10-minute NCCL "
                                  "timeout the watchdog aborted rank 1 (SIGABRT, exit -6) and the engine died.",
                       fix=["Check the GPU interconnect / NCCL (NCCL_DEBUG=INFO, NCCL_P2P_DISABLE=1 to test)",
                            "Try --disable-custom-all-reduce; restart"]))


def c10(slug):
    """V1 0.10.2 style prefixes under kubectl: EngineCore fatal error (illegal memory access), then 500s."""
    g = Log("2026-12-01 18:30:00", "v11", wrap="kubectl", pid=1, seed=10)
    eng = "EngineCore_DP0"
    v1_startup(g, version="0.10.2", model="deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", max_seqs=128,
               max_len=32768, kv_tokens=140_000, engine=eng)
    for i in range(6):
        traffic(g, 3)
        g.tick(10)
        v1_stats(g, 2010.0 + i * 25, 650.0 + i * 12, 22 + i, 0, 21.0 + i * 3, hit=40.2)
    g.tick(3)
    g.error("core.py:710", "EngineCore encountered a fatal error.", name=eng, ev=True)
    g.error("core.py:710", "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core\n'
            "    engine_core.run_busy_loop()\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 728, in run_busy_loop\n'
            "    self._process_engine_step()\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 1688, in execute_model\n'
            "    valid_sampled_token_ids = sampled_token_ids.tolist()", name=eng)
    g.error("core.py:710", "RuntimeError: CUDA error: an illegal memory access was encountered", name=eng, ev=True)
    g.error("core.py:710", "CUDA kernel errors might be asynchronously reported at some other API call, so the "
            "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", name=eng)
    g.error("async_llm.py:480", "AsyncLLM output_handler failed.", ev=True)
    g.error("async_llm.py:480", "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 439, in output_handler\n'
            "    outputs = await engine_core.get_output_async()\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core_client.py", line 846, in get_output_async\n'
            "    raise self._format_exception(outputs) from None")
    g.error("async_llm.py:480", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.", ev=True)
    for _ in range(8):
        g.access(status=500)
    g.uv("Shutting down")
    g.uv("Waiting for application shutdown.")
    g.uv("Application shutdown complete.")
    g.uv("Finished server process [1]")
    g.write(slug, dict(category="engine_dead", vllm_generation="v1", version="0.10.2",
                       root_cause="A kernel hit an illegal memory access; the EngineCore died and every in-flight "
                                  "and later request got HTTP 500 until the pod restarted.",
                       fix=["Rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; try --enforce-eager or another "
                            "attention backend; upgrade vLLM/driver"]))


def c11(slug):
    """V1 0.8 (bracketed, no prefix): gated Hugging Face repo without a token → 401 at start-up."""
    g = Log("2026-02-14 07:45:10", "v1", seed=11)
    g.info("__init__.py:239", "Automatically detected platform cuda.")
    g.info("api_server.py:1034", "vLLM API server version 0.8.4")
    g.info("api_server.py:1035", "args: Namespace(subparser='serve', model_tag='meta-llama/Llama-3.1-8B-Instruct', "
           "host=None, port=8000, model='meta-llama/Llama-3.1-8B-Instruct', max_model_len=8192, tensor_parallel_size=1)")
    g.tick(1)
    g.raw("Traceback (most recent call last):")
    g.raw('  File "/usr/local/lib/python3.12/dist-packages/huggingface_hub/utils/_http.py", line 409, in hf_raise_for_status')
    g.raw("    response.raise_for_status()")
    g.raw('  File "/usr/local/lib/python3.12/dist-packages/requests/models.py", line 1024, in raise_for_status')
    g.raw("    raise HTTPError(http_error_msg, response=self)")
    g.raw("requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
          "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json")
    g.raw("")
    g.raw("The above exception was the direct cause of the following exception:")
    g.raw("")
    g.raw("Traceback (most recent call last):")
    frames = [("/usr/local/bin/vllm", 8, "<module>", "sys.exit(main())"),
              ("/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/cli/main.py", 51, "main", "args.dispatch_function(args)"),
              ("/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/cli/serve.py", 27, "cmd", "uvloop.run(run_server(args))"),
              ("/usr/local/lib/python3.12/dist-packages/uvloop/__init__.py", 109, "run", "return __asyncio.run("),
              ("/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", 1069, "run_server", "async with build_async_engine_client(args) as engine_client:"),
              ("/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", 146, "build_async_engine_client", "async with build_async_engine_client_from_engine_args("),
              ("/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", 166, "build_async_engine_client_from_engine_args", "vllm_config = engine_args.create_engine_config(usage_context=usage_context)"),
              ("/usr/local/lib/python3.12/dist-packages/vllm/engine/arg_utils.py", 1099, "create_engine_config", "model_config = self.create_model_config()"),
              ("/usr/local/lib/python3.12/dist-packages/vllm/config.py", 369, "__init__", "hf_config = get_config(self.hf_config_path or self.model,"),
              ("/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/config.py", 274, "get_config", "if is_gguf or file_or_path_exists("),
              ("/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/config.py", 177, "file_or_path_exists", "return file_exists(str(model),"),
              ("/usr/local/lib/python3.12/dist-packages/huggingface_hub/utils/_validators.py", 114, "_inner_fn", "return fn(*args, **kwargs)"),
              ("/usr/local/lib/python3.12/dist-packages/huggingface_hub/hf_api.py", 2916, "file_exists", "get_hf_file_metadata(url, token=token)"),
              ("/usr/local/lib/python3.12/dist-packages/huggingface_hub/file_download.py", 1296, "get_hf_file_metadata", "r = _request_wrapper("),
              ("/usr/local/lib/python3.12/dist-packages/huggingface_hub/file_download.py", 280, "_request_wrapper", "response = _request_wrapper("),
              ("/usr/local/lib/python3.12/dist-packages/huggingface_hub/file_download.py", 304, "_request_wrapper", "hf_raise_for_status(response)"),
              ("/usr/local/lib/python3.12/dist-packages/huggingface_hub/utils/_http.py", 426, "hf_raise_for_status", "raise _format(GatedRepoError, message, response) from e")]
    for f, ln, fn, code in frames:
        g.raw(f'  File "{f}", line {ln}, in {fn}')
        g.raw(f"    {code}")
    g.raw("huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-67af1d2e-3c0f5a4b1e2d6c7f08a9b0c1;"
          "5e1f2a3b-4c5d-6e7f-8091-a2b3c4d5e6f7)", ev=True)
    g.raw("")
    g.raw("Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json.", ev=True)
    g.raw("Access to model meta-llama/Llama-3.1-8B-Instruct is restricted. You must have access to it and be "
          "authenticated to access it. Please log in.")
    g.write(slug, dict(category="model_load_failure", vllm_generation="v1", version="0.8.4",
                       root_cause="The model is a gated Hugging Face repo and the container has no HF_TOKEN with "
                                  "access, so fetching config.json fails with 401.",
                       fix=["Accept the licence on the model page and pass HF_TOKEN (or pre-download the weights)"]))


def c12(slug):
    """docker compose with restart: unless-stopped: argparse rejects '-tp two' on every restart."""
    g = Log("2026-05-30 12:00:00", "v1", wrap="compose", seed=12)
    for k in range(9):
        g.info("__init__.py:244", "Automatically detected platform cuda.")
        g.tick(2)
        g.raw("usage: vllm serve [model_tag] [options]")
        g.raw("vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'", ev=(k < 3))
        g.lines.append(f"vllm-1 exited with code 2")
        g.tick(2 ** min(k, 5))
    g.lines.append("Gracefully stopping... (press Ctrl+C again to force)")
    g.lines.append("vllm-1 exited with code 2")
    for _ in range(3):
        g.raw("usage: vllm serve [model_tag] [options]")
        g.raw("vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'two'")
    g.write(slug, dict(category="config_error", vllm_generation="v1", version="0.9.1",
                       root_cause="The compose file passes '-tp two'; argparse exits with code 2 before anything "
                                  "loads, and the restart policy repeats it.",
                       fix=["Use an integer: --tensor-parallel-size 2"]))


def c13(slug):
    """V1 0.9: prompts over max_model_len=4096 — 'Error in preprocessing prompt inputs' + 400s."""
    g = Log("2026-03-09 09:10:00", "v1", seed=13)
    v1_startup(g, version="0.9.0", model="mistralai/Mistral-7B-Instruct-v0.2", max_seqs=128, max_len=4096,
               kv_tokens=180_224)
    for i in range(10):
        traffic(g, 2)
        if i % 2 == 1:
            g.error("serving_chat.py:200", "Error in preprocessing prompt inputs", ev=(i < 6))
            g.error("serving_chat.py:200", "Traceback (most recent call last):\n"
                    '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_engine.py", line 505, in _validate_input\n'
                    "    raise ValueError(")
            g.error("serving_chat.py:200", f"ValueError: This model's maximum context length is 4096 tokens. However, "
                    f"you requested {5120 + i * 64} tokens ({4096 + i * 64} in the messages, 1024 in the completion). "
                    "Please reduce the length of the messages or completion.", ev=(i < 6))
            g.access(status=400, ev=(i < 6))
        g.tick(10)
        v1_stats(g, 1402.0 + i * 9, 388.0 + i * 3, 9 + i % 4, 0, 22.0 + i, hit=5.5)
    g.write(slug, dict(category="request_too_long", vllm_generation="v1", version="0.9.0",
                       root_cause="Clients send prompts longer than max_model_len=4096 (plus 1024 completion tokens); "
                                  "each is rejected with HTTP 400.",
                       fix=["Truncate prompts / lower max_tokens client-side, or raise --max-model-len if the model "
                            "and KV cache allow"]))


def c14(slug):
    """V1 0.11 with ANSI prefix and --log-error-stack (raw print_exc traceback): top_p=2.5 rejected with 400."""
    g = Log("2026-10-05 14:00:00", "v11", pid=33, ansi=True, seed=14)
    v1_startup(g, version="0.11.0", model="Qwen/Qwen2.5-7B-Instruct", max_seqs=128, max_len=32768,
               kv_tokens=250_000, engine="EngineCore_DP0")
    for i in range(9):
        traffic(g, 2)
        if i % 2 == 0:
            # --log-error-stack: create_error_response() calls traceback.print_exc() → raw stderr lines
            # that still get the (APIServer pid=N) stream prefix in 0.10.1–0.30.
            g.raw(g.proc() + "Traceback (most recent call last):")
            g.raw(g.proc() + '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_chat.py", line 283, in create_chat_completion')
            g.raw(g.proc() + "    sampling_params = request.to_sampling_params(max_tokens, self.model_config.logits_processor_pattern, self.default_sampling_params)")
            g.raw(g.proc() + '  File "/usr/local/lib/python3.12/dist-packages/vllm/sampling_params.py", line 404, in _verify_args')
            g.raw(g.proc() + "    raise ValueError(")
            g.raw(g.proc() + "ValueError: top_p must be in (0, 1], got 2.5.", ev=(i < 6))
            g.access(status=400, ev=(i < 6))
        g.tick(10)
        v1_stats(g, 980.0 + i * 7, 301.0 + i * 2, 7 + i % 3, 0, 11.0 + i, hit=22.0)
    g.write(slug, dict(category="bad_request_params", vllm_generation="v1", version="0.11.0",
                       root_cause="A client sends top_p=2.5 (valid range (0, 1]); those requests are rejected with 400.",
                       fix=["Fix the client's sampling parameters (top_p ≤ 1)"]))


def c15(slug):
    """V0 0.5: bursts of 'Aborted request cmpl-…' as a client times out and retries."""
    g = Log("2026-01-20 20:00:00", "v0", seed=15)
    v0_startup(g, version="0.5.0.post1", model="meta-llama/Meta-Llama-3-8B-Instruct", blocks=27000, max_len=8192)
    rid = 0x91c3
    for i in range(9):
        traffic(g, 3)
        g.tick(5)
        v0_stats(g, 1320.0 - i * 10, 980.0 - i * 15, 40 + i, 0, 0, 30.0 + i * 2)
        if i in (3, 4, 6, 7):
            for _ in range(7):
                g.info("async_llm_engine.py:167", f"Aborted request cmpl-{rid:x}a1b2c3d4e5f6.", ev=(i in (3, 4)))
                rid += 13
    g.write(slug, dict(category="client_abort", vllm_generation="v0", version="0.5.0.post1",
                       root_cause="A client library with a short read timeout disconnects in bursts; vLLM aborts "
                                  "the requests (28 aborts, no server-side error).",
                       fix=["Raise the client timeout or stream responses; check the load balancer idle timeout"]))


# ---- handbook format

class Hb:
    """Request lines in the handbook format (V0-style prefix, scheduler/model_runner messages)."""

    def __init__(self, g: Log):
        self.g, self.n, self.q = g, 0, 0

    def add(self, q=None, ev=False):
        self.n += 1
        self.q = self.q + 1 if q is None else q
        self.g.info("scheduler.py:456", f"Added request req_{self.n:03d} to waiting queue. Queue size: {self.q}", ev)
        return self.n

    def sched(self, n, run, wait):
        self.g.info("scheduler.py:489", f"Scheduling request req_{n:03d}. Running: {run}, Waiting: {wait}, Swapped: 0")

    def prefill(self, n, toks=2048, lat=0.342):
        self.g.info("model_runner.py:234", f"Prefill started for req_{n:03d}. Input tokens: {toks}, Block tables: {toks // 64}")
        self.g.tick(round(lat))
        self.g.info("model_runner.py:278", f"Prefill completed for req_{n:03d}. Latency: {lat:.3f}s, "
                    f"Throughput: {int(toks / lat)} tokens/s")

    def decode(self, n, step, batch, kv, speed=None, ev=False):
        if speed is None:
            self.g.info("model_runner.py:312", f"Decode step {step} for req_{n:03d}. Batch size: {batch}, KV cache usage: {kv}%")
        else:
            self.g.warn("model_runner.py:345", f"Decode step {step} for req_{n:03d}. Token generation speed: "
                        f"{speed:.1f} tokens/s (below threshold 20 tokens/s)", ev)

    def ok(self, n, toks=2050, lat=3.2, ttft=0.35, tpot=0.058, ev=False):
        self.g.info("scheduler.py:612", f"Request req_{n:03d} finished. Status: SUCCESS. Total tokens: {toks}, "
                    f"Total latency: {lat}s, TTFT: {ttft}s, TPOT: {tpot}s", ev)

    def wait_warn(self, n, ev=False):
        self.g.warn("scheduler.py:512", f"Request req_{n:03d} waiting time exceeds 30s. Consider reducing load.", ev)

    def cancel(self, n, ev=False):
        self.g.warn("scheduler.py:625", f"Request req_{n:03d} finished. Status: CANCELLED. Reason: Timeout after 60s.", ev)


def c16(slug):
    """Handbook: arrivals outpace scheduling; queue size grows, 'waiting time exceeds 30s' warnings."""
    g = Log("2026-03-25 10:15:23", "handbook", seed=16)
    h = Hb(g)
    added: dict[int, datetime] = {}
    warned: set[int] = set()
    done = 0
    nwarn = 0
    for i in range(20):
        for _ in range(3):
            n = h.add(ev=(25 <= h.q + 1 <= 27))
            added[n] = g.t
        n = done + 1
        h.sched(n, 8, h.q - 1)
        h.q -= 1
        h.prefill(n)
        late = [m for m in sorted(added) if m > n and m not in warned and (g.t - added[m]).total_seconds() > 30]
        if late:
            warned.add(late[0])
            h.wait_warn(late[0], ev=(nwarn < 4))
            nwarn += 1
        g.tick(4)
        wait_s = (g.t - added[n]).total_seconds()
        h.ok(n, lat=round(wait_s, 1), ttft=round(wait_s - 3.6, 2), tpot=0.035)
        done += 1
    g.write(slug, dict(category="queue_backlog", vllm_generation="handbook",
                       root_cause="Three requests arrive per completion; the waiting queue grows steadily (Queue "
                                  "size 1 → 40 in 80 s) and requests wait > 30 s before scheduling.",
                       fix=["Add capacity (replicas, --max-num-seqs) or rate-limit clients"]))


def c17(slug):
    """Handbook: a wave of 16 requests; 5 finish fast, 11 are cancelled after the 60 s timeout."""
    g = Log("2026-04-02 08:00:00", "handbook", seed=17)
    h = Hb(g)
    ids = [h.add() for _ in range(16)]
    for k, n in enumerate(ids):
        h.sched(n, min(k + 1, 16), 15 - k)
        h.q -= 1
        h.prefill(n, toks=1024, lat=0.2)
    g.tick(1)
    fast = ids[::3][:5]
    for n in fast:
        h.decode(n, 1, 16, 22)
    g.tick(2)
    for n in fast:
        h.ok(n, toks=1110, lat=2.9, ttft=0.4, tpot=0.028)
    g.tick(57)
    slow = [n for n in ids if n not in fast]
    for k, n in enumerate(slow):
        h.cancel(n, ev=(k < 6))
    g.tick(1)
    for _ in range(4):
        n = h.add()
        h.sched(n, 1, 0)
        h.q -= 1
        h.prefill(n, toks=900, lat=0.18)
        g.tick(2)
        h.ok(n, toks=1000, lat=2.2, ttft=0.3, tpot=0.021)
    g.write(slug, dict(category="timeout", vllm_generation="handbook",
                       root_cause="11 of 20 requests never finished within the 60 s request timeout and were "
                                  "cancelled; the ones that finished ran at normal speed (TPOT 21-28 ms).",
                       fix=["Find why those requests stall (very long max_tokens, stuck generation); raise the "
                            "timeout only if such lengths are expected"]))


def c18(slug):
    """Handbook: decode below 20 tokens/s threshold (~12 tokens/s) and TTFT ~3 s, no errors."""
    g = Log("2026-04-02 15:30:00", "handbook", seed=18)
    h = Hb(g)
    for i in range(10):
        n = h.add()
        h.sched(n, 8, max(h.q - 1, 0))
        h.q = max(h.q - 1, 0)
        h.prefill(n, toks=1900 + i * 10, lat=2.95 + (i % 3) * 0.05)
        h.decode(n, 1, 8, 40 + i)
        g.tick(4)
        h.decode(n, 50, 8, 41 + i, speed=12.5 - (i % 4) * 0.3, ev=(i < 5))
        g.tick(8)  # 150 output tokens at ~12.5 tokens/s after a ~3 s TTFT (total ~15 s)
        ttft = 3.0 + (i % 3) * 0.05
        h.ok(n, toks=2050 + i * 10, lat=round(ttft + 150 / 12.5, 2), ttft=ttft, tpot=0.08, ev=(i < 3))
    g.write(slug, dict(category="slow_throughput", vllm_generation="handbook",
                       root_cause="Generation runs at ~12 tokens/s (threshold 20) and TTFT ~3 s at batch 8 "
                                  "without queueing or errors: the deployment is slow, not overloaded.",
                       fix=["Check GPU clocks/thermal throttling, quantisation, attention backend, CUDA graphs"]))


def c19(slug):
    """V0 0.7 healthy: steady moderate load at ~40 % KV and a lone 404 on a wrong path."""
    g = Log("2026-02-02 10:00:00", "v0", seed=19)
    v0_startup(g, version="0.7.2", model="Qwen/Qwen2.5-14B-Instruct", blocks=9000, max_len=16384)
    for i in range(18):
        traffic(g, 3)
        if i == 9:
            g.access("/v1/chat/completion", status=404)
        g.tick(5)
        v0_stats(g, 900.0 + (i % 5) * 30, 620.0 + (i % 4) * 15, 30 + i % 5, 0, 0, 38.0 + (i % 6))
    g.write(slug, dict(category="healthy", vllm_generation="v0", version="0.7.2",
                       root_cause="Steady load at ~40 % KV; one client typo'd a path (404).", fix=[]))


def c20(slug):
    """V1 0.10.1 with prefixes: normal traffic, then a graceful SIGTERM with EngineDeadError noise."""
    g = Log("2026-09-09 23:58:00", "v11", pid=1, seed=20)
    eng = "EngineCore_0"
    v1_startup(g, version="0.10.1", model="meta-llama/Llama-3.1-8B-Instruct", max_seqs=256, max_len=8192,
               kv_tokens=400_000, engine=eng)
    for i in range(8):
        traffic(g, 3)
        g.tick(10)
        v1_stats(g, 700.0 + i * 9, 310.0 + i * 4, 5 + i % 3, 0, 6.0 + i % 3, hit=30.1)
    g.tick(4)
    g.uv("Shutting down")
    g.info("launcher.py:101", "Shutting down FastAPI HTTP server.")
    g.uv("Waiting for application shutdown.")
    g.uv("Application shutdown complete.")
    g.error("async_llm.py:430", "AsyncLLM output_handler failed.")
    g.error("async_llm.py:430", "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 389, in output_handler\n'
            "    outputs = await engine_core.get_output_async()")
    g.error("async_llm.py:430", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.")
    g.uv("Finished server process [1]")
    g.write(slug, dict(category="healthy", vllm_generation="v1", version="0.10.1",
                       root_cause="Operator stopped the server (SIGTERM); the output handler's EngineDeadError is "
                                  "shutdown noise, not a crash.", fix=[]))


def c21(slug):
    """V1 0.8 healthy: a short burst queues 40 requests for ~30 s, KV 85 %, then drains to zero."""
    g = Log("2026-07-01 12:00:00", "v1", seed=21)
    v1_startup(g, version="0.8.5", model="google/gemma-3-12b-it", max_seqs=64, max_len=8192, kv_tokens=96_000)
    rows = [(0, 0, 2.0), (12, 0, 20.0), (64, 38, 71.0), (64, 40, 85.0), (64, 22, 84.0), (58, 0, 66.0),
            (31, 0, 35.0), (9, 0, 10.0), (2, 0, 2.0), (0, 0, 0.0), (0, 0, 0.0)]
    for r, w, kv in rows:
        traffic(g, min(4, r // 10 + 1))
        g.tick(10)
        v1_stats(g, 300.0 + r * 40, r * 28.5, r, w, kv, hit=8.0)
    g.write(slug, dict(category="healthy", vllm_generation="v1", version="0.8.5",
                       root_cause="A 30-second burst queued briefly and drained; no sustained backlog.", fix=[]))


CASES = [
    ("01-v1-cudagraph-capture-oom", c01),
    ("02-v0-compose-no-cache-blocks", c02),
    ("03-v0-engine-loop-cuda-oom", c03),
    ("04-v0-swap-preemption", c04),
    ("05-v11-ansi-compose-preemptions", c05),
    ("06-v1-kubectl-max-num-seqs-backlog", c06),
    ("07-v1-tp2-shm-broadcast-hang", c07),
    ("08-v11-idle-healthy", c08),
    ("09-v0-tp2-nccl-watchdog", c09),
    ("10-v1-kubectl-enginecore-ima", c10),
    ("11-v1-gated-repo-401", c11),
    ("12-compose-argparse-tp-two", c12),
    ("13-v1-context-length-400", c13),
    ("14-v11-ansi-top-p-400", c14),
    ("15-v0-abort-bursts", c15),
    ("16-handbook-queue-growth", c16),
    ("17-handbook-timeouts", c17),
    ("18-handbook-slow-decode", c18),
    ("19-v0-steady-load-404-healthy", c19),
    ("20-v1-sigterm-shutdown-healthy", c20),
    ("21-v1-burst-drains-healthy", c21),
]


def main() -> None:
    for old in list(HERE.glob("[0-9][0-9]-*.log")) + list(HERE.glob("[0-9][0-9]-*.json")):
        old.unlink()
    for slug, fn in CASES:
        fn(slug)


if __name__ == "__main__":
    main()
