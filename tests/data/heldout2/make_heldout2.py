"""Deterministic generator of the second held-out set (``NN-slug.log`` + ``NN-slug.json``).

Run ``python tests/data/heldout2/make_heldout2.py`` to rewrite the files next to this script.
Harder shapes than ``heldout``: several input files per case (two replicas; API server + worker log),
a restart inside one file, 0.32 JSON logging, ``kubectl --timestamps`` + ANSI colours, a multi-hour
idle log with DEBUG stats, a handbook queue that grows and drains. Written from the vLLM format
reference, reusing the line builders of ``heldout/make_heldout.py``. Labels may carry ``inputs`` (all
files to pass to ``load``, in order) and ``evidence_by_file`` (labelled lines of the other inputs);
``evidence_line_numbers`` always refer to ``NN-slug.log``.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "heldout"))
import make_heldout as h1  # noqa: E402
from make_heldout import CUDA_OOM, Hb, traffic, v1_stats, v1_startup  # noqa: E402


class Log(h1.Log):
    def write(self, slug: str, label: dict, name: str | None = None, lo: int = 20, hi: int = 400) -> None:
        n = len(self.lines)
        assert lo <= n <= hi, (slug, n)
        (HERE / f"{name or slug}.log").write_text("\n".join(self.lines) + "\n")
        label = dict(label)
        label.setdefault("secondary_categories", [])
        label["evidence_line_numbers"] = sorted(set(label.pop("extra_evidence", []) + self.evidence))
        (HERE / f"{slug}.json").write_text(json.dumps(label, indent=2) + "\n")

    def debug(self, src, msg, ev=False, name=None):
        return self.log("DEBUG", src, msg, ev, name)


class ColorLog(Log):
    """0.31+ ``ColoredFormatter`` (FORCE_COLOR / VLLM_LOGGING_COLOR=1): cyan process prefix, coloured level
    name, grey timestamp and ``[file:line]``."""

    LEVEL = {"DEBUG": "\x1b[37m", "INFO": "\x1b[32m", "WARNING": "\x1b[33m", "ERROR": "\x1b[31m",
             "CRITICAL": "\x1b[35m"}

    def proc(self, name=None):
        p = f"({name or 'APIServer'} pid={self.pid if name is None else self.pid + 40})"
        return f"\x1b[0;36m{p}\x1b[0;0m "

    def log(self, level, src, msg, ev=False, name=None):
        stamp = self.t.strftime("%m-%d %H:%M:%S")
        first = None
        for part in msg.split("\n"):
            n = self.raw(f"{self.proc(name)}{self.LEVEL[level]}{level}\x1b[0m \x1b[90m{stamp}\x1b[0m "
                         f"\x1b[90m[{src}]\x1b[0m {part}", ev)
            first = first or n
        return first


class JsonLog(Log):
    """0.32 ``--logging-config.formatter json``: one JSON object per record, year + ms in asctime."""

    NAMES = {"loggers.py": "vllm.v1.metrics.loggers", "core.py": "vllm.v1.engine.core",
             "async_llm.py": "vllm.v1.engine.async_llm", "api_server.py": "vllm.entrypoints.openai.api_server",
             "gpu_model_runner.py": "vllm.v1.worker.gpu_model_runner", "gpu_worker.py": "vllm.v1.worker.gpu_worker",
             "kv_cache_utils.py": "vllm.v1.core.kv_cache_utils", "utils.py": "vllm.entrypoints.utils",
             "launcher.py": "vllm.entrypoints.launcher"}

    def rec(self, level: str, name: str, msg: str, proc: str = "APIServer", ev: bool = False,
            exc: str | None = None) -> int:
        self._us = (self._us + 137) % 1000
        pname = "MainProcess" if proc == "APIServer" else proc
        pid = self.pid if proc == "APIServer" else self.pid + 40
        d = {"asctime": self.t.strftime("%Y-%m-%d %H:%M:%S") + f",{self._us:03d}", "levelname": level,
             "name": name, "processName": pname, "process": pid, "message": msg, "vllm_process_name": proc}
        if exc:
            d["exc_info"] = exc
        return self.raw(json.dumps(d), ev)

    def log(self, level, src, msg, ev=False, name=None):
        return self.rec(level, self.NAMES.get(src.split(":")[0], "vllm"), msg, name or "APIServer", ev)

    def uv(self, text: str, ev: bool = False) -> int:
        return self.rec("INFO", "uvicorn.error", text, ev=ev)

    def access(self, path="/v1/chat/completions", status=200, method="POST", ev=False):
        ip = f"10.0.{self.rng.randint(0, 3)}.{self.rng.randint(2, 250)}:{self.rng.randint(30000, 65000)}"
        return self.rec("INFO", "uvicorn.access", f'{ip} - "{method} {path} HTTP/1.1" {status}', ev=ev)


def engine_fatal_oom(g: Log, eng: str | None, src_ln: int = 710) -> None:
    g.error(f"core.py:{src_ln}", "EngineCore encountered a fatal error.", name=eng, ev=True)
    g.error(f"core.py:{src_ln}", "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core\n'
            "    engine_core.run_busy_loop()\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 1520, in execute_model\n'
            "    logits = self.model.compute_logits(sample_hidden_states, None)", name=eng)
    g.error(f"core.py:{src_ln}", CUDA_OOM, name=eng, ev=True)
    g.error("async_llm.py:480", "AsyncLLM output_handler failed.")
    g.error("async_llm.py:480", "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 439, in output_handler\n'
            "    outputs = await engine_core.get_output_async()")
    g.error("async_llm.py:480", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.")


# ---------------------------------------------------------------- cases

def c01(slug):
    """Two replicas (two files, same model, same hour): replica A healthy, replica B dies of a CUDA OOM."""
    a = Log("2026-08-04 14:00:00", "v1", seed=101)
    v1_startup(a, version="0.10.1.1", model="Qwen/Qwen2.5-14B-Instruct", max_seqs=128, kv_tokens=180_224)
    for i in range(12):
        traffic(a, 3)
        a.tick(10)
        v1_stats(a, 1500.0 + i * 10, 520.0 + i * 4, 20 + i % 4, 0, 30.0 + i % 5, hit=22.0)
    a.write(slug, {}, name=f"{slug}.replica-a")
    b = Log("2026-08-04 14:00:02", "v1", seed=102)
    v1_startup(b, version="0.10.1.1", model="Qwen/Qwen2.5-14B-Instruct", max_seqs=128, kv_tokens=180_224)
    for i in range(7):
        traffic(b, 3)
        b.tick(10)
        v1_stats(b, 1600.0 + i * 30, 540.0 + i * 9, 24 + i * 3, 0, 38.0 + i * 6, hit=20.0)
    b.tick(4)
    engine_fatal_oom(b, None)
    for _ in range(5):
        b.access(status=500)
    b.uv("Shutting down")
    b.uv("Finished server process [7]")
    b.write(slug, dict(category="runtime_oom", secondary_categories=["engine_dead"], vllm_generation="v1",
                       version="0.10.1.1", inputs=[f"{slug}.replica-a.log", f"{slug}.log"],
                       root_cause="Replica B's EngineCore hit a CUDA OOM computing logits for a large batch and died; "
                                  "replica A with the same config stayed healthy (lower load).",
                       fix=["Lower --gpu-memory-utilization / --max-num-seqs on the replicas; restart replica B"]))


def c02(slug):
    """Split logs: API-server log only shows EngineDeadError/500s; the worker log has the NCCL error."""
    w = Log("2026-09-15 02:10:00", "v11", pid=310, seed=103)
    w.info("parallel_state.py:1064", "rank 1 in world size 2 is assigned as DP rank 0, PP rank 0, TP rank 1, EP rank 1",
           name="Worker_TP1")
    w.info("pynccl.py:70", "vLLM is using nccl==2.26.2", name="Worker_TP1")
    w.info("gpu_model_runner.py:1770", "Starting to load model meta-llama/Llama-3.1-70B-Instruct...", name="Worker_TP1")
    w.tick(60)
    w.info("gpu_model_runner.py:1801", "Model loading took 65.7 GiB and 58.1 seconds", name="Worker_TP1")
    for i in range(25):
        w.tick(2)
        w.debug("gpu_worker.py:310", f"execute_model step batch={16 + i % 8} tokens={900 + i * 7}", name="Worker_TP1")
    w.tick(2)  # 02:11:52, one second before the API server notices the worker is gone
    w.error("multiproc_executor.py:527", "WorkerProc hit an exception.", name="Worker_TP1", ev=True)
    w.error("multiproc_executor.py:527", "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 522, in worker_busy_loop\n'
            "    output = func(*args, **kwargs)\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/device_communicators/pynccl.py", line 127, in all_reduce\n'
            "    self.nccl.ncclAllReduce(buffer_type(in_tensor.data_ptr()),", name="Worker_TP1")
    w.error("multiproc_executor.py:527", "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO "
            "for details)", name="Worker_TP1", ev=True)
    w.raw("[rank1]:[W915 02:11:53.118220311 ProcessGroupNCCL.cpp:1476] Warning: WARNING: destroy_process_group() was "
          "not called before program exit, which can leak resources.")
    w.write(slug, {}, name=f"{slug}.worker")
    wev = list(w.evidence)
    g = Log("2026-09-15 02:09:40", "v11", pid=7, seed=104)
    v1_startup(g, version="0.11.2", model="meta-llama/Llama-3.1-70B-Instruct", tp=2, max_seqs=64, max_len=16384,
               kv_tokens=120_000, engine="EngineCore_DP0")
    for i in range(8):
        traffic(g, 3)
        g.tick(10)
        v1_stats(g, 900.0 + i * 10, 310.0 + i * 5, 16 + i, 0, 20.0 + i, hit=10.0)
    g.tick(5)
    g.error("multiproc_executor.py:154", "Worker proc VllmWorker-1 died unexpectedly, shutting down executor.",
            name="EngineCore_DP0", ev=True)
    g.error("core.py:710", "EngineCore encountered a fatal error.", name="EngineCore_DP0")
    g.error("async_llm.py:480", "AsyncLLM output_handler failed.")
    g.error("async_llm.py:480", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.")
    for _ in range(6):
        g.access(status=500)
    g.write(slug, dict(category="distributed_nccl", secondary_categories=["engine_dead"], vllm_generation="v1",
                       version="0.11.2", inputs=[f"{slug}.log", f"{slug}.worker.log"],
                       evidence_by_file={f"{slug}.worker.log": wev},
                       root_cause="TP rank 1's all-reduce failed with an NCCL system error (network/IB fault); the "
                                  "worker died and the API server only saw EngineDeadError + HTTP 500.",
                       fix=["Run with NCCL_DEBUG=INFO, check the interconnect/IB, NCCL_P2P_DISABLE/NCCL_IB_DISABLE"]))


def c03(slug):
    """Restart in the same file: run 1 dies of a CUDA OOM while serving, run 2 (lower util) is healthy."""
    g = Log("2026-04-18 09:00:00", "v1", seed=105)
    v1_startup(g, version="0.9.2", model="mistralai/Mistral-Small-24B-Instruct-2501", max_seqs=256, kv_tokens=90_000)
    for i in range(6):
        traffic(g, 4)
        g.tick(10)
        v1_stats(g, 2400.0 + i * 50, 700.0 + i * 20, 40 + i * 8, 0, 45.0 + i * 8, hit=8.0)
    g.tick(2)
    engine_fatal_oom(g, None)
    for _ in range(4):
        g.access(status=500)
    g.uv("Shutting down")
    g.uv("Finished server process [7]")
    g.tick(25)
    v1_startup(g, version="0.9.2", model="mistralai/Mistral-Small-24B-Instruct-2501", max_seqs=128, kv_tokens=70_000)
    for i in range(8):
        traffic(g, 3)
        g.tick(10)
        v1_stats(g, 1800.0, 600.0, 30 + i % 3, 0, 40.0 + i % 4, hit=9.0)
    g.write(slug, dict(category="runtime_oom", secondary_categories=["engine_dead"], vllm_generation="v1",
                       version="0.9.2",
                       root_cause="First server run: the EngineCore died of a CUDA OOM while serving at "
                                  "max_num_seqs=256; after the restart with max_num_seqs=128 it served normally.",
                       fix=["Keep --max-num-seqs 128 (or lower --gpu-memory-utilization) for this model/GPU"]))


def c04(slug):
    """0.9.x, --max-num-seqs 256 but --max-num-batched-tokens 2048 with 3k-token prompts: Running ~20, Waiting grows."""
    g = Log("2026-02-09 11:00:00", "v1", seed=106)
    v1_startup(g, version="0.9.1", model="Qwen/Qwen2.5-7B-Instruct", max_seqs=256, kv_tokens=231_584)
    waits = [0, 6, 14, 21, 30, 38, 47, 55, 62, 71, 80, 88, 97, 105, 114, 122, 131, 139]
    for i, w in enumerate(waits):
        traffic(g, 2)
        g.tick(10)
        v1_stats(g, 2040.0 + (i % 2) * 8, 180.0 + i % 3, 18 + i % 3, w, 24.0 + (i % 3), hit=1.2, ev=w >= 97)
    g.write(slug, dict(category="queue_backlog", vllm_generation="v1", version="0.9.1",
                       root_cause="Prefill budget (max_num_batched_tokens) limits admission to ~2k prompt tokens per "
                                  "step; with 3k-token prompts Running stays ~20 of 256 while Waiting grows to 139.",
                       fix=["Raise --max-num-batched-tokens, add replicas or rate-limit clients"]))


def c05(slug):
    """0.14-style start-up: another process holds GPU memory; 'Free memory on device … is less than desired'."""
    g = Log("2026-06-01 07:30:00", "v11", pid=1, seed=107)
    eng = "EngineCore_DP0"
    g.info("api_server.py:1395", "vLLM API server version 0.14.1")
    g.info("utils.py:253", "non-default args: {'model': 'Qwen/Qwen3-8B', 'gpu_memory_utilization': 0.92, "
           "'max_model_len': 32768}")
    g.tick(5)
    g.info("model.py:631", "Resolved architecture: Qwen3ForCausalLM")
    g.info("model.py:1751", "Using max model len 32768")
    g.info("scheduler.py:222", "Chunked prefill is enabled with max_num_batched_tokens=8192.")
    g.tick(3)
    g.info("core.py:93", "Initializing a V1 LLM engine (v0.14.1) with config: model='Qwen/Qwen3-8B', "
           "dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=1", name=eng)
    g.info("parallel_state.py:1208", "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0",
           name=eng)
    g.error("core.py:843", "EngineCore failed to start.", name=eng, ev=True)
    g.error("core.py:843", "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 834, in run_engine_core\n'
            "    engine_core = EngineCoreProc(*args, **kwargs)\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 225, in init_device\n'
            "    self.requested_memory = request_memory(init_snapshot, self.cache_config)\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/utils.py", line 341, in request_memory\n'
            "    raise ValueError(", name=eng)
    g.error("core.py:843", "ValueError: Free memory on device cuda:0 (14.62/79.18 GiB) on startup is less than desired "
            "GPU memory utilization (0.92, 72.85 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
            "other processes.", name=eng, ev=True)
    g.raw("Process EngineCore_DP0:")
    g.raw("Traceback (most recent call last):")
    g.raw('  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap')
    g.raw("    self.run()")
    g.raw("ValueError: Free memory on device cuda:0 (14.62/79.18 GiB) on startup is less than desired GPU memory "
          "utilization (0.92, 72.85 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    g.tick(1)
    g.raw("(APIServer pid=1) Traceback (most recent call last):")
    for ln in ('  File "/usr/local/bin/vllm", line 10, in <module>', "    sys.exit(main())",
               '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core_client.py", line 463, in __init__',
               "    self._wait_for_engine_startup()",
               '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 784, in wait_for_engine_startup',
               '    raise RuntimeError(', ):
        g.raw(f"(APIServer pid=1) {ln}")
    g.raw("(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. Failed core "
          "proc(s): {'EngineCore_DP0': 1}")
    g.write(slug, dict(category="startup_oom", vllm_generation="v1", version="0.14.1",
                       root_cause="Another process holds ~64 GiB of the 80 GiB GPU; only 14.6 GiB is free but "
                                  "gpu_memory_utilization=0.92 asks for 72.9 GiB, so the EngineCore refuses to start.",
                       fix=["Stop the other GPU process, or lower --gpu-memory-utilization below free/total"]))


def c06(slug):
    """V1 0.10 multiproc TP=2: a rank stops answering; 'RPC call to execute_model timed out' repeats."""
    g = Log("2026-10-02 22:00:00", "v11", pid=1, seed=108)
    eng = "EngineCore_DP0"
    v1_startup(g, version="0.10.2", model="meta-llama/Llama-3.3-70B-Instruct", tp=2, max_seqs=64, kv_tokens=150_000,
               engine=eng)
    for i in range(6):
        traffic(g, 3)
        g.tick(10)
        v1_stats(g, 1200.0 + i * 10, 420.0 + i * 4, 14 + i, 0, 18.0 + i, hit=15.0)
    for i in range(4):
        g.tick(10)
        v1_stats(g, 0.0, 0.0, 20, 3 + i * 4, 24.0, hit=15.0, ev=i >= 2)
    g.tick(260)
    for k in range(3):
        g.error("multiproc_executor.py:244", "RPC call to execute_model timed out.", name=eng, ev=True)
        g.error("core.py:757", "Traceback (most recent call last):\n"
                '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 239, in collective_rpc\n'
                "    status, result = w.worker_response_mq.dequeue(", name=eng)
        g.error("core.py:757", "TimeoutError: RPC call to execute_model timed out.", name=eng, ev=True)
        g.tick(10)
        v1_stats(g, 0.0, 0.0, 20, 19 + k * 5, 24.0, hit=15.0, ev=True)
        g.tick(290)
    g.write(slug, dict(category="engine_hang", vllm_generation="v1", version="0.10.2",
                       root_cause="One TP worker stopped responding; every execute_model RPC waits the 300 s "
                                  "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS and times out, no tokens are produced.",
                       fix=["Get py-spy dumps of the workers; check the GPU/driver (Xid) and NCCL; restart the pod"]))


def c07(slug):
    """Ray executor (0.20+): NCCL error on a remote node, then RayWorkerProc rank=1 died unexpectedly."""
    g = Log("2026-11-10 05:00:00", "v11", pid=1, seed=109)
    eng = "EngineCore_DP0"
    v1_startup(g, version="0.21.0", model="Qwen/Qwen3-32B", tp=2, max_seqs=128, kv_tokens=160_000, engine=eng)
    for i in range(6):
        traffic(g, 3)
        g.tick(10)
        v1_stats(g, 1400.0 + i * 10, 480.0 + i * 4, 18 + i, 0, 22.0 + i, hit=30.0)
    g.tick(2)
    g.raw("(RayWorkerWrapper pid=2210, ip=10.4.1.12) [rank1]:[E1110 05:01:17.513000 ProcessGroupNCCL.cpp:1897] "
          "[PG ID 2 PG GUID 3 Rank 1] Process group watchdog thread terminated with exception: NCCL error: remote "
          "process exited or there was a network error, NCCL version 2.27.3", ev=True)
    g.raw("(RayWorkerWrapper pid=2210, ip=10.4.1.12) ncclRemoteError: A call failed possibly due to a network error "
          "or a remote process exiting prematurely.", ev=True)
    g.tick(1)
    g.error("ray_executor.py:412", "RayWorkerProc rank=1 died unexpectedly, shutting down executor.", name=eng, ev=True)
    g.error("core.py:710", "EngineCore encountered a fatal error.", name=eng)
    g.error("async_llm.py:480", "AsyncLLM output_handler failed.")
    g.error("async_llm.py:480", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See "
            "stack trace (above) for the root cause.")
    for _ in range(5):
        g.access(status=500)
    g.write(slug, dict(category="distributed_nccl", secondary_categories=["engine_dead"], vllm_generation="v1",
                       version="0.21.0",
                       root_cause="The NCCL communicator between the two Ray nodes failed (remote error); the rank-1 "
                                  "Ray worker died and took the engine down.",
                       fix=["Check the inter-node network / NCCL_SOCKET_IFNAME, NCCL_DEBUG=INFO; restart the Ray cluster"]))


def c08(slug):
    """0.18: slow weight loading from a network volume; 'Timed out waiting for engine core processes to start'."""
    g = Log("2026-07-21 12:00:00", "v11", pid=1, seed=110)
    eng = "EngineCore_DP0"
    g.info("api_server.py:1395", "vLLM API server version 0.18.0")
    g.info("utils.py:253", "non-default args: {'model': '/mnt/nfs/models/DeepSeek-V3', 'tensor_parallel_size': 8, "
           "'trust_remote_code': True}")
    g.tick(8)
    g.info("core.py:93", "Initializing a V1 LLM engine (v0.18.0) with config: model='/mnt/nfs/models/DeepSeek-V3', "
           "dtype=torch.bfloat16, max_seq_len=163840, tensor_parallel_size=8", name=eng)
    for r in range(8):
        g.info("gpu_model_runner.py:2590", "Starting to load model /mnt/nfs/models/DeepSeek-V3...",
               name=f"Worker_TP{r}")
    for i in range(1, 31):
        g.tick(19)
        g.raw(f"(Worker_TP0 pid=141) Loading safetensors checkpoint shards: {i * 100 // 163:3d}% Completed | "
              f"{i}/163 [{i * 19 // 60:02d}:{i * 19 % 60:02d}<51:38, 19.40s/it]")
    g.tick(10)
    g.raw("(APIServer pid=1) Traceback (most recent call last):")
    for ln in ('  File "/usr/local/bin/vllm", line 10, in <module>', "    sys.exit(main())",
               '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 901, in wait_for_engine_startup',
               "    raise TimeoutError("):
        g.raw(f"(APIServer pid=1) {ln}")
    g.raw("(APIServer pid=1) TimeoutError: Timed out waiting for engine core processes to start. This is often caused "
          "by slow weight loading for large models. Waited 600s (configured by VLLM_ENGINE_READY_TIMEOUT_S). To "
          "increase the timeout, set the environment variable: VLLM_ENGINE_READY_TIMEOUT_S=<seconds>", ev=True)
    # E404 files a start-up *timeout* under engine_hang (the engine is alive but not ready), not engine_dead
    g.write(slug, dict(category="engine_hang", secondary_categories=["model_load_failure"], vllm_generation="v1",
                       version="0.18.0",
                       root_cause="Loading 163 checkpoint shards from NFS at ~19 s/shard needs ~50 min; the API server "
                                  "gave up after VLLM_ENGINE_READY_TIMEOUT_S=600 s and the engine never started.",
                       fix=["Raise VLLM_ENGINE_READY_TIMEOUT_S, or copy the weights to local NVMe first"]))


def c09(slug):
    """0.32 JSON logging (--logging-config.formatter json): EngineCore CUDA OOM while serving."""
    g = JsonLog("2026-11-30 03:00:00", "v11", pid=1, seed=111)
    eng = "EngineCore_DP0"
    g.rec("INFO", "vllm.entrypoints.utils", "vLLM server version 0.32.0, serving model google/gemma-3-27b-it")
    g.rec("INFO", "vllm.entrypoints.utils", "non-default args: {'model': 'google/gemma-3-27b-it', 'max_num_seqs': 256, "
          "'gpu_memory_utilization': 0.95}")
    g.tick(6)
    g.rec("INFO", "vllm.v1.engine.core", "Initializing a V1 LLM engine (v0.32.0) with config: model='google/gemma-3-27b-it', "
          "dtype=torch.bfloat16, max_seq_len=131072", proc=eng)
    g.tick(30)
    g.rec("INFO", "vllm.v1.worker.gpu_model_runner", "Model loading took 51.4 GiB memory and 28.3 seconds", proc=eng)
    g.rec("INFO", "vllm.v1.core.kv_cache_utils", "GPU KV cache size: 98,304 tokens", proc=eng)
    g.rec("INFO", "vllm.v1.engine.core", "init engine (profile, create kv cache, warmup model) took 61.2 seconds", proc=eng)
    g.rec("INFO", "vllm.entrypoints.openai.api_server", "Starting vLLM API server 0 on http://0.0.0.0:8000")
    g.rec("INFO", "uvicorn.error", "Started server process [1]")
    g.rec("INFO", "uvicorn.error", "Waiting for application startup.")
    g.rec("INFO", "uvicorn.error", "Application startup complete.")
    for i in range(10):
        traffic(g, 3)
        g.tick(10)
        g.rec("INFO", "vllm.v1.metrics.loggers", f"Engine 000: Avg prompt throughput: {3000.0 + i * 200:.1f} tokens/s, "
              f"Avg generation throughput: {500.0 + i * 30:.1f} tokens/s, Running: {30 + i * 9} reqs, Waiting: 0 reqs, "
              f"GPU KV cache usage: {40.0 + i * 5:.1f}%, Prefix cache hit rate: 12.0%")
    g.tick(3)
    tb = ("Traceback (most recent call last):\n"
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 901, in run_engine_core\n'
          "    engine_core.run_busy_loop()\n"
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2740, in execute_model\n'
          "    hidden_states = self.model(input_ids, positions)\n" + CUDA_OOM)
    g.rec("ERROR", "vllm.v1.engine.core", "EngineCore encountered a fatal error.", proc=eng, ev=True, exc=tb)
    g.rec("ERROR", "vllm.v1.engine.async_llm", "AsyncLLM output_handler failed.",
          exc="Traceback (most recent call last):\n  File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/"
              "async_llm.py\", line 512, in output_handler\n    outputs = await engine_core.get_output_async()\n"
              "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for "
              "the root cause.")
    for _ in range(6):
        g.access(status=500)
    g.write(slug, dict(category="runtime_oom", secondary_categories=["engine_dead"], vllm_generation="v1",
                       version="0.32.0",
                       root_cause="At gpu_memory_utilization=0.95 with 120 running sequences the forward pass ran "
                                  "out of activation memory; the EngineCore died of a CUDA OOM.",
                       fix=["Lower --gpu-memory-utilization (0.9) or --max-num-seqs; restart"]))


def c10(slug):
    """kubectl --timestamps + 0.31 ColoredFormatter (every field coloured): V1 KV cache too small at start-up."""
    g = ColorLog("2026-05-19 16:45:00", "v11", wrap="kubectl", pid=1, seed=112)
    eng = "EngineCore_DP0"
    v1_startup(g, version="0.31.0", model="meta-llama/Llama-3.1-8B-Instruct", max_seqs=256, max_len=131072,
               kv_tokens=60_000, ready=False, engine=eng)
    g.error("core.py:1012", "EngineCore failed to start.", name=eng, ev=True)
    g.error("core.py:1012", "Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1003, in run_engine_core\n'
            "    engine_core = EngineCoreProc(*args, **kwargs)\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 902, in check_enough_kv_cache_memory\n'
            "    raise ValueError(", name=eng)
    g.error("core.py:1012", "ValueError: To serve at least one request with the model's max seq len (131072), (16.00 "
            "GiB KV cache is needed, which is larger than the available KV cache memory (7.32 GiB). Based on the "
            "available memory, the estimated maximum model length is 59952. Try increasing `gpu_memory_utilization` "
            "or decreasing `max_model_len` when initializing the engine. See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.", name=eng, ev=True)
    g.raw("\x1b[0;36m(APIServer pid=1)\x1b[0;0m RuntimeError: Engine core initialization failed. See root cause "
          "above. Failed core proc(s): {'EngineCore_DP0': 1}")
    g.write(slug, dict(category="kv_cache_capacity_error", vllm_generation="v1", version="0.31.0",
                       root_cause="max_model_len=131072 needs 16 GiB of KV cache for one request but only 7.3 GiB is "
                                  "left after the weights on a 24 GB card.",
                       fix=["--max-model-len 59952 (or less), or raise --gpu-memory-utilization / use a bigger GPU"]))


def c11(slug):
    """Healthy 0.10 server over ~4 h: mostly idle with DEBUG stats lines, short bursts, a few 404s and aborts."""
    g = Log("2026-03-03 08:00:00", "v1", seed=113)
    v1_startup(g, version="0.10.1.1", model="microsoft/Phi-4-mini-instruct", max_seqs=64, kv_tokens=400_000)
    for h in range(4):
        for i in range(3):
            traffic(g, 2)
            g.tick(10)
            v1_stats(g, 400.0 + i * 20, 160.0 + i * 5, 3 + i, 0, 2.0 + i * 0.5, hit=50.0)
        if h in (1, 3):
            g.access("/v1/engines", status=404, method="GET")
            g.info("async_llm.py:430", f"Aborted request chatcmpl-{0x91ab + h:x}a71c3.")
        for k in range(12):
            g.tick(300)
            g.debug("loggers.py:123", "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: "
                    "0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit "
                    "rate: 50.0%")
            if k % 4 == 0:
                g.access("/health", status=200, method="GET")
    g.write(slug, dict(category="healthy", vllm_generation="v1", version="0.10.1.1",
                       root_cause="Low, bursty traffic over four hours; idle intervals are logged at DEBUG; two "
                                  "wrong-path 404s and two client aborts are noise.", fix=[]), hi=400)


def c12(slug):
    """Handbook: a burst makes the queue grow then drain. The longest wait is ~20 s (< the handbook's 30 s), so it
    is no queue backlog — but the queued requests' TTFT is far above the handbook's 1 s target → slow_throughput."""
    g = Log("2026-03-26 14:00:00", "handbook", seed=114)
    h = Hb(g)
    added: dict[int, datetime] = {}
    done = 0
    for i in range(18):
        arrivals = 2 if i < 8 else (1 if i < 11 else 0)
        for _ in range(arrivals):
            n = h.add()
            added[n] = g.t
        if done >= h.n:
            g.tick(2)
            continue
        n = done + 1
        h.sched(n, 8, h.q - 1)
        h.q -= 1
        h.prefill(n, lat=0.342)
        g.tick(2)
        wait_s = (g.t - added[n]).total_seconds()
        h.ok(n, lat=round(wait_s, 1), ttft=round(max(wait_s - 1.6, 0.3), 2), tpot=0.031, ev=wait_s - 1.6 > 1.0)
        done += 1
    while done < h.n:
        n = done + 1
        h.sched(n, 8, h.q - 1)
        h.q -= 1
        h.prefill(n, lat=0.342)
        g.tick(2)
        wait_s = (g.t - added[n]).total_seconds()
        h.ok(n, lat=round(wait_s, 1), ttft=round(max(wait_s - 1.6, 0.3), 2), tpot=0.031, ev=wait_s - 1.6 > 1.0)
        done += 1
    g.write(slug, dict(category="slow_throughput", vllm_generation="handbook",
                       root_cause="A short burst queues up to ~10 requests; every request is scheduled within the "
                                  "handbook's 30 s waiting threshold and the queue drains to 0 (no backlog), but the "
                                  "queued requests wait up to ~20 s for their first token (target: 1 s).",
                       fix=["Add capacity for bursts (replicas, --max-num-seqs) or smooth the arrivals"]))


CASES = [("01-v1-two-replicas-one-oom", c01), ("02-v11-apiserver-plus-worker-nccl", c02),
         ("03-v1-restart-after-oom", c03), ("04-v09-batched-tokens-backlog", c04),
         ("05-v14-free-memory-less-than-util", c05), ("06-v1-rpc-execute-model-timeout", c06),
         ("07-v21-ray-worker-died-nccl", c07), ("08-v18-engine-ready-timeout", c08),
         ("09-v32-json-runtime-oom", c09), ("10-v31-kubectl-colour-kv-too-small", c10),
         ("11-v1-multi-hour-idle-healthy", c11), ("12-handbook-queue-drains-slow-ttft", c12)]

if __name__ == "__main__":
    for slug, fn in CASES:
        fn(slug)
