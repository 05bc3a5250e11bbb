"""Lines with no vLLM envelope: PyTorch/NCCL C++ output, NCCL debug lines, tqdm bars, Python warnings."""

from __future__ import annotations

from typing import Any

from .fields import to_float, to_int
from .registry import RAW, LinePattern


def _ms_to_s(f: dict[str, Any]) -> None:
    for k in ("timeout_ms", "ran_ms"):
        if k in f:
            v = f.pop(k)
            n = to_int(v) if isinstance(v, str) else v if isinstance(v, int) else None
            if n is not None:
                f[k[:-3] + "_s"] = n / 1000.0


def _ray_serve_latency(f: dict[str, Any]) -> None:
    v = f.pop("_latency_ms", None)
    if v is not None:
        d = to_float(v) if isinstance(v, str) else None
        if d is not None:
            f["duration_s"] = d / 1000.0


for _p in [
    LinePattern(
        id="ray_serve.access",
        kind="http_access",
        prefix=None,
        contains=" -- ",
        # Ray Serve's request log: "INFO 2025-06-25 04:40:17,216 <app>_<deployment> <replica> <request id> -- POST
        # /v1/chat/completions 500 84676.1ms" (the LLM router of Ray Serve LLM answers the clients)
        regex=r"^(?:DEBUG|INFO|WARNING|ERROR) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \S+ \S+ (?P<request_id>\S+) -- "
              r"(?P<method>[A-Z]+) (?P<path>/\S*) (?P<http_status>\d{3}) (?P<_latency_ms>[\d.]+)ms$",
        post=_ray_serve_latency,
        examples=["INFO 2025-06-25 04:40:17,216 RayServeApp_LLMRouter n3x8gq2c 0d6dd5b6-b1ce-eae5-8e75-67f6f59ff89e -- POST /v1/chat/completions 500 84676.1ms"],
        doc="Ray Serve's request log line (the router in front of vLLM answered a client: method, route, status, latency).",
        source="ray",
    ),
    LinePattern(
        id="ray_serve.health_check_failed",
        kind="replica_stopped",
        prefix=None,
        contains="failed health check",
        regex=r"Replica\((?P<replica>[^()]*)\) failed health check, stopping it",
        examples=["WARNING 2025-06-25 04:40:15,206 controller 193700 -- Replica Replica(id='rut1591v', deployment='vLLM:Qwen--Qwen3-32B', app='RayServeApp') failed health check, stopping it."],
        doc="Ray Serve's controller stops a replica whose health check did not answer in time (its in-flight requests fail).",
        source="ray",
    ),
]:
    RAW.add(_p)


for _p in [
    LinePattern(
        id="nccl.watchdog_timeout",
        kind="nccl_timeout",
        prefix=None,
        contains="Watchdog caught collective operation timeout",
        regex=r"^\[rank(?P<rank>\d+)\]:\[[EWI][^\]]*\] (?:\[[^\]]*\] )*Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)[^)]*?Timeout\(ms\)=(?P<timeout_ms>\d+)\) ran for (?P<ran_ms>\d+) milliseconds",
        post=_ms_to_s,
        examples=["[rank0]:[E1110 17:30:06.118204311 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out."],
        doc="NCCL watchdog: a collective (all-reduce, …) did not finish within the timeout — a distributed hang.",
        source="torch",
    ),
    LinePattern(
        id="nccl.watchdog_timeout_c10",
        kind="nccl_timeout",
        prefix=None,
        contains="Watchdog caught collective operation timeout",
        # the same watchdog line without torch.distributed's "[rankN]:" stream prefix: older c10 logging
        # ("[E ProcessGroupNCCL.cpp:475]", no time) or glog with time; the rank is the message's "[Rank N]"
        # (Ray workers print it this way, behind their "(RayWorkerVllm pid=N)" tag in colour)
        regex=r"^\[[EWIF](?:\d{3,4} \d\d:\d\d:\d\d\.\d+)? [\w.]+:\d+\] (?:\[(?:PG \d+ )?Rank (?P<rank>\d+)\] )?(?:\[[^\]]*\] )*"
              r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)[^)]*?"
              r"Timeout\(ms\)=(?P<timeout_ms>\d+)\) ran for (?P<ran_ms>\d+) milliseconds",
        post=_ms_to_s,
        examples=["[E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=23, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800436 milliseconds before timing out."],
        doc="NCCL watchdog timeout printed without a `[rankN]:` prefix (c10 logging, Ray workers).",
        source="torch",
    ),
    LinePattern(
        id="nccl.process_group",
        kind="nccl_error",
        prefix=None,
        contains="ProcessGroupNCCL",
        regex=r"^\[rank(?P<rank>\d+)\]:\[(?P<severity>[EWI])[^\]]*ProcessGroupNCCL\.cpp:\d+\] (?P<error>.*)$",
        examples=["[rank0]:[E1110 17:30:06.118402411 ProcessGroupNCCL.cpp:621] [Rank 0] Some NCCL operations have failed or timed out."],
        doc="PyTorch ProcessGroupNCCL message (errors and shutdown warnings).",
        source="torch",
    ),
    LinePattern(
        id="nccl.process_group_c10",
        kind="nccl_error",
        prefix=None,
        contains="ProcessGroupNCCL",
        regex=r"^\[(?P<severity>[EWI])(?:\d{3,4} \d\d:\d\d:\d\d\.\d+)? ProcessGroupNCCL\.cpp:\d+\] (?:\[(?:PG \d+ )?Rank (?P<rank>\d+)\] )?(?P<error>.*)$",
        examples=["[E ProcessGroupNCCL.cpp:489] [Rank 4] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data."],
        doc="PyTorch ProcessGroupNCCL message without a `[rankN]:` prefix (c10 logging, Ray workers).",
        source="torch",
    ),
    LinePattern(
        id="nccl.torch_rank_line",
        kind="torch_log",
        prefix=None,
        contains="]:[",
        regex=r"^\[rank(?P<rank>\d+)\]:\[(?P<severity>[EWI])[^\]]*\] (?P<_msg>.*)$",
        examples=["[rank0]:[W914 04:53:45.615225908 socket.cpp:204] [c10d] The hostname of the client socket cannot be retrieved."],
        doc="Other rank-prefixed PyTorch C++ log line.",
        source="torch",
    ),
    LinePattern(
        id="nccl.debug",
        kind="nccl_debug",
        prefix=None,
        contains=" NCCL ",
        # NCCL's WARN macro prints the source position first: "[0] misc/shmutils.cc:72 NCCL WARN Error: …"
        regex=r"^\S+:(?P<pid>\d+):\d+ \[(?P<rank>\d+)\] (?:(?P<nccl_src>[\w./-]{1,120}:\d{1,6}) )?NCCL (?P<severity>INFO|WARN|ERROR|TRACE) (?P<_msg>.*)$",
        examples=["omega-ws:53277:53301 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
                  "gpu-node-3:2650:2719 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Ab3kQz to 9637892 bytes"],
        doc="NCCL_DEBUG output.",
        source="nccl",
    ),
    LinePattern(
        id="nccl.version",
        kind="nccl_debug",
        prefix="NCCL version ",
        regex=r"^NCCL version (?P<version>\S+)$",
        examples=["NCCL version 2.20.5+cuda12.4"],
        doc="NCCL version banner.",
        source="nccl",
    ),
    LinePattern(
        id="tqdm.progress",
        kind="progress",
        prefix=None,
        contains="|",
        regex=r"^(?P<_desc>.{0,512}?):?\s{0,16}(?P<percent>\d{1,3})%\s{0,16}(?:Completed\s{0,16})?\|",
        examples=["Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:03<00:00,  1.21it/s]", "Capturing CUDA graph shapes: 100%|██████████| 67/67 [00:21<00:00,  3.12it/s]"],
        doc="A tqdm progress bar (weights loading, CUDA-graph capture).",
        source="tqdm",
    ),
    LinePattern(
        id="py.warning",
        kind="python_warning",
        prefix=None,
        contains="Warning: ",
        regex=r"^(?P<_file>\S+\.py):(?P<_line>\d+): (?P<warning>\w*Warning): (?P<_msg>.*)$",
        examples=["/usr/lib/python3.8/site-packages/transformers/utils/generic.py:441: UserWarning: torch.utils._pytree._register_pytree_node is deprecated."],
        doc="A Python warning printed by the warnings module.",
        source="python",
    ),
    LinePattern(
        id="py.process_crash",
        kind="process_crashed",
        prefix="Process ",
        regex=r"^Process (?P<worker>[\w-]+):$",
        examples=["Process EngineCore:", "Process SpawnProcess-1:"],
        doc="multiprocessing: a child process raised (traceback follows).",
        source="python",
    ),
    LinePattern(
        id="sys.oom_killer",
        kind="oom_killed",
        prefix=None,
        contains="Killed process",
        regex=r"(?:Out of memory|Memory cgroup out of memory): Killed process (?P<pid>\d+) \((?P<worker>[^)]*)\)",
        examples=["Memory cgroup out of memory: Killed process 3655 (VLLM::Worker) total-vm:9000kB, anon-rss:1260000kB"],
        doc="Kernel OOM killer (dmesg) killed a process.",
        source="kernel",
    ),
    LinePattern(
        id="ray.unschedulable",
        kind="ray_unschedulable",
        prefix="(autoscaler ",
        regex=r"^\(autoscaler \+[\w.]{1,20}\) Warning: The following resource request cannot be scheduled right now: "
              r"(?P<resources>\{[^}]{0,400}\})",
        examples=["(autoscaler +2m11s) Warning: The following resource request cannot be scheduled right now: "
                  "{'GPU': 1.0, 'CPU': 1.0}. This is likely due to all cluster resources being claimed by actors. "
                  "Consider creating fewer actors or increasing the resources available to this Ray cluster."],
        doc="Ray cannot place an actor or task: the cluster lacks the resources it asks for (GPUs, CPUs).",
        source="ray",
    ),
]:
    RAW.add(_p)
