"""Run-time and lifecycle lines a timeline wants: shutdown sequences, worker/engine process events,
compilation and CUDA graphs, memory profiling details, distributed set-up, environment notices,
engine state dumps, DEBUG per-step lines; plus raw (un-enveloped) lines: C++ glog lines with their
own timestamp, nanobind leak reports, resource_tracker warnings."""

from __future__ import annotations

import re
from typing import Any

from .fields import to_float, to_int
from .registry import MESSAGES, RAW, LinePattern

_KV = re.compile(r"(?<!\w)(\w+)=([^\s,]+)")


def _shutdown(f: dict[str, Any]) -> None:
    detail = f.get("action", "")
    kv = dict(_KV.findall(detail))
    if "timeout" in kv:
        v = to_float(kv["timeout"].rstrip("s"))
        if v is not None:
            f["timeout_s"] = v
    if "mode" in kv:
        f["mode"] = kv["mode"]
    if "signal" in kv:
        f["signal"] = kv["signal"]
    if "count" in kv:
        f["count"] = to_int(kv["count"])
    m = re.search(r"\bpid (\d+)", detail)
    if m:
        f["pid"] = to_int(m.group(1))


def _sched_stats(f: dict[str, Any]) -> None:
    body = f.pop("_body", "") or ""
    for key, name, conv in (("num_running_reqs", "running", to_int), ("num_waiting_reqs", "waiting", to_int),
                            ("kv_cache_usage", "kv_cache_usage", to_float)):
        m = re.search(rf"\b{key}=([\d.eE+-]+)", body)
        if m:
            f[name] = conv(m.group(1))


def _topic(topic: str):
    def post(f: dict[str, Any]) -> None:
        f["topic"] = topic
    return post


def _state(state: str):
    def post(f: dict[str, Any]) -> None:
        f["state"] = state
    return post


def _action(action: str):
    def post(f: dict[str, Any]) -> None:
        f["action"] = action
    return post


def _leaks(f: dict[str, Any]) -> None:
    f["leaked"] = to_int(f.pop("_n", "") or "")


for _p in [
    # ---------------------------------------------------------------- shutdown
    LinePattern(
        id="life.shutdown_step",
        kind="shutdown_step",
        prefix="[shutdown] ",
        regex=r"^\[shutdown\] (?:(?P<component>API server|MPClient|EngineCore|Executor|Process manager|WorkerProc|HfRenderer|[A-Z][\w ]*?): )?(?P<action>.*)$",
        post=_shutdown,
        examples=[
            "[shutdown] API server: shutdown triggered",
            "[shutdown] API server: stopping engine client mode=abort timeout=0s",
            "[shutdown] EngineCore: trigger received signal=SIGTERM",
            "[shutdown] Process manager: force killing remaining process EngineCore pid 30954",
            "[shutdown] Executor: waiting for worker exit count=1",
            "[shutdown] force killing sub process VLLM::Worker pid 31045",
        ],
        doc="One step of the 0.23+ graceful-shutdown sequence (API server, MPClient, EngineCore, executor, process manager).",
        source="v1",
    ),
    LinePattern(
        id="life.engine_gracefully_shutting_down",
        kind="engine_shutdown",
        prefix="Engine is gracefully shutting down",
        regex=r"^Engine is gracefully shutting down\.?$",
        examples=["Engine is gracefully shutting down."],
        doc="V0 engine shutting down (0.5–0.10).",
        source="v0",
    ),
    LinePattern(
        id="life.engine_core_exiting",
        kind="engine_shutdown",
        prefix="EngineCore exiting",
        regex=r"^EngineCore exiting\.?$",
        examples=["EngineCore exiting."],
        doc="V1 EngineCore process exits (DEBUG).",
        source="v1",
    ),
    LinePattern(
        id="life.parent_exited",
        kind="worker_exiting",
        prefix="Parent process exited",
        regex=r"^Parent process exited, terminating worker(?: queues)?\.?$",
        examples=["Parent process exited, terminating worker queues", "Parent process exited, terminating worker"],
        doc="A worker noticed its parent (EngineCore / executor) is gone and exits.",
        source="v1",
    ),
    LinePattern(
        id="life.worker_exiting_shutdown",
        kind="worker_exiting",
        prefix="Worker exiting",
        regex=r"^Worker exiting\.?$",
        examples=["Worker exiting"],
        doc="A worker process exits.",
        source="v0/v1",
    ),
    LinePattern(
        id="life.killing_workers",
        kind="workers_killed",
        prefix="Killing local vLLM worker processes",
        regex=r"^Killing local vLLM worker processes\.?$",
        examples=["Killing local vLLM worker processes"],
        doc="V0 multiproc executor kills its workers (after a worker died or at shutdown).",
        source="v0",
    ),
    LinePattern(
        id="life.worker_ready",
        kind="worker_ready",
        prefix="Worker ready",
        regex=r"^Worker ready; awaiting tasks$",
        examples=["Worker ready; awaiting tasks"],
        doc="V0 multiproc worker process is up.",
        source="v0",
    ),
    LinePattern(
        id="life.engine_process_started",
        kind="engine_process_started",
        prefix="Started engine process",
        regex=r"^Started engine process with PID (?P<pid>\d+)$",
        examples=["Started engine process with PID 2291"],
        doc="V0 MQLLMEngine process started (0.6.2–0.7).",
        source="v0",
    ),
    LinePattern(
        id="life.engine_loop_waiting",
        kind="engine_loop",
        prefix="EngineCore waiting for work",
        regex=r"^EngineCore waiting for work\.?$",
        post=_state("idle"),
        examples=["EngineCore waiting for work."],
        doc="EngineCore went idle (DEBUG).",
        source="v1",
    ),
    LinePattern(
        id="life.engine_loop_active",
        kind="engine_loop",
        prefix="EngineCore loop active",
        regex=r"^EngineCore loop active\.?$",
        post=_state("active"),
        examples=["EngineCore loop active."],
        doc="EngineCore got work again (DEBUG).",
        source="v1",
    ),
    # ---------------------------------------------------------------- engine dumps (printed before a fatal error)
    LinePattern(
        id="life.dump_input",
        kind="engine_dump",
        prefix="Dumping input data",
        regex=r"^Dumping input data for V1 LLM engine \(v(?P<version>[^)]+)\) with config: (?P<_cfg>.*)$",
        post=_action("input_data"),
        examples=["Dumping input data for V1 LLM engine (v0.10.1.1) with config: model='google/gemma-3-27b-it', speculative_config=None"],
        doc="EngineCore dumps its config after a fatal error in a model step (the crash follows).",
        source="v1",
    ),
    LinePattern(
        id="life.dump_scheduler_output",
        kind="engine_dump",
        prefix="Dumping scheduler output",
        regex=r"^Dumping scheduler output for model execution: (?P<_out>.*)$",
        post=_action("scheduler_output"),
        examples=["Dumping scheduler output for model execution: SchedulerOutput(scheduled_new_reqs=[], num_scheduled_tokens={})"],
        doc="EngineCore dumps the failing step's scheduler output.",
        source="v1",
    ),
    LinePattern(
        id="life.dump_scheduler_stats",
        kind="engine_dump",
        prefix="Dumping scheduler stats",
        regex=r"^Dumping scheduler stats: (?P<_body>.*)$",
        post=lambda f: (_sched_stats(f), f.__setitem__("action", "scheduler_stats")),
        examples=["Dumping scheduler stats: SchedulerStats(num_running_reqs=5, num_waiting_reqs=0, kv_cache_usage=0.0231, prefix_cache_stats=None)"],
        doc="EngineCore dumps scheduler stats of the failing step (running, waiting, KV usage 0..1).",
        source="v1",
    ),
    # ---------------------------------------------------------------- compilation, CUDA graphs, warm-up
    LinePattern(
        id="compile.dynamo",
        kind="compile",
        prefix="Dynamo bytecode transform time",
        regex=r"^Dynamo bytecode transform time: (?P<duration_s>[\d.]+ s)$",
        post=_action("dynamo_transform"),
        examples=["Dynamo bytecode transform time: 5.21 s"],
        doc="torch.compile: Dynamo bytecode transform time.",
        source="v1",
    ),
    LinePattern(
        id="compile.total",
        kind="compile",
        prefix="torch.compile ",
        regex=r"^torch\.compile (?:takes|took) (?P<duration_s>[\d.]+ s) in total$",
        post=_action("total"),
        examples=["torch.compile takes 8.12 s in total", "torch.compile took 6.00 s in total"],
        doc="torch.compile total time.",
        source="v1",
    ),
    LinePattern(
        id="compile.dynamic_shape",
        kind="compile",
        prefix="Compiling a graph",
        regex=r"^Compiling a graph for dynamic shape takes (?P<duration_s>[\d.]+ s)$",
        post=_action("graph_dynamic_shape"),
        examples=["Compiling a graph for dynamic shape takes 12.40 s"],
        doc="Inductor compile time for the dynamic-shape graph.",
        source="v1",
    ),
    LinePattern(
        id="compile.cache_dir",
        kind="compile",
        prefix="Using cache directory",
        regex=r"^Using cache directory: (?P<file>\S+) for vLLM's torch\.compile$",
        post=_action("cache_dir"),
        examples=["Using cache directory: /root/.cache/vllm/torch_compile_cache/abc/rank_0_0 for vLLM's torch.compile"],
        doc="torch.compile cache directory in use.",
        source="v1",
    ),
    LinePattern(
        id="compile.tagged",
        kind="compile",
        prefix=None,
        contains="] ",
        regex=r"^\[(?P<_tag>\w+)\] (?:(?P<_a>Initial profiling/warmup run took (?P<duration_s>[\d.]+ s))|(?P<_b>saved AOT compiled function to (?P<file>\S+))|(?P<_c>Compiling model again due to a load failure from (?P<_f>\S+), reason: (?P<reason>.*))|(?P<_d>Compiling a graph for dynamic shape takes (?P<_ds>[\d.]+) s)|(?P<_e>torch\.compile (?:takes|took) (?P<_ts>[\d.]+) s in total))$",
        post=lambda f: f.setdefault("action", "tagged"),
        examples=[
            "[backbone] Initial profiling/warmup run took 0.05 s",
            "[backbone] saved AOT compiled function to /home/vllm/.cache/vllm/torch_compile_cache/x/rank_0_0/model",
            "[backbone] Compiling model again due to a load failure from /home/vllm/.cache/x, reason: 'function' object has no attribute 'finalize_loading'",
        ],
        doc="torch.compile steps with a model tag (0.18+): warm-up time, AOT artefact saved, recompilation.",
        source="v1",
    ),
    LinePattern(
        id="warmup.start",
        kind="warmup",
        prefix="Warming up ",
        regex=r"^Warming up (?P<_what>model for the compilation|chat template processing)\.\.\.$",
        post=_action("start"),
        examples=["Warming up model for the compilation...", "Warming up chat template processing..."],
        doc="Warm-up starts (model compilation / chat template).",
        source="v1",
    ),
    LinePattern(
        id="warmup.done",
        kind="warmup",
        prefix="Warming up done",
        regex=r"^Warming up done\.$",
        post=_action("done"),
        examples=["Warming up done."],
        doc="Model warm-up finished.",
        source="v1",
    ),
    LinePattern(
        id="warmup.chat_template_done",
        kind="warmup",
        prefix="Chat template warmup completed",
        regex=r"^Chat template warmup completed in (?P<duration_s>[\d.]+s)$",
        post=_action("done"),
        examples=["Chat template warmup completed in 0.003s"],
        doc="Chat-template warm-up finished.",
        source="v1",
    ),
    LinePattern(
        id="cudagraph.capturing_v0",
        kind="cuda_graph_capturing",
        prefix="Capturing ",
        regex=r"^Capturing (?:the model for CUDA graphs|cudagraphs for decoding)\. .*$",
        examples=["Capturing the model for CUDA graphs. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI.",
                  "Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static."],
        doc="V0 CUDA-graph capture starts (takes extra GPU memory).",
        source="v0",
    ),
    LinePattern(
        id="cudagraph.memory_note",
        kind="cuda_graph_capturing",
        prefix="CUDA graphs can take",
        regex=r"^CUDA graphs can take additional (?P<_mem>\S+) GiB memory per GPU\..*$",
        examples=["CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode."],
        doc="V0 note printed with CUDA-graph capture.",
        source="v0",
    ),
    # ---------------------------------------------------------------- memory profiling, KV sizing extras
    LinePattern(
        id="mem.instance_can_use",
        kind="memory_profiling",
        prefix="the current vLLM instance",
        regex=r"^the current vLLM instance can use total_gpu_memory \((?P<total_gpu_memory_gib>[\d.]+)GiB\) x gpu_memory_utilization \((?P<gpu_memory_utilization>[\d.]+)\) = (?P<usable_memory_gib>[\d.]+)GiB$",
        examples=["the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB"],
        doc="V0 memory profiling, 2nd line: memory vLLM may use.",
        source="v0",
    ),
    LinePattern(
        id="mem.breakdown",
        kind="memory_profiling",
        prefix="model weights take",
        regex=r"^model weights take (?P<weights_gib>[\d.]+)GiB; non_torch_memory takes (?P<non_torch_memory_gib>[\d.]+)GiB; PyTorch activation peak memory takes (?P<activation_peak_gib>[\d.]+)GiB; the rest of the memory reserved for KV Cache is (?P<kv_cache_memory_gib>[\d.]+)GiB\.?$",
        examples=["model weights take 14.99GiB; non_torch_memory takes 0.53GiB; PyTorch activation peak memory takes 4.36GiB; the rest of the memory reserved for KV Cache is 51.39GiB."],
        doc="V0 memory profiling, 3rd line: where the memory goes and what is left for the KV cache.",
        source="v0",
    ),
    LinePattern(
        id="mem.cpu_kv_explicit",
        kind="kv_cache_memory",
        prefix="Explicitly set ",
        regex=r"^Explicitly set \((?P<kv_cache_memory_gib>[\d.]+)/(?P<total_gpu_memory_gib>[\d.]+)\) GiB for KV cache on node (?P<_node>\d+)\.$",
        examples=["Explicitly set (1.0/13.59) GiB for KV cache on node 0."],
        doc="CPU backend: KV-cache memory set explicitly (VLLM_CPU_KVCACHE_SPACE).",
        source="v1",
    ),
    LinePattern(
        id="kv.blocks_override",
        kind="kv_cache_blocks",
        prefix="Overriding num_gpu_blocks",
        regex=r"^Overriding num_gpu_blocks=(?P<_orig>\d+) with num_gpu_blocks_override=(?P<num_gpu_blocks>\d+)$",
        examples=["Overriding num_gpu_blocks=8192 with num_gpu_blocks_override=64"],
        doc="KV-cache block count forced by --num-gpu-blocks-override.",
        source="v0/v1",
    ),
    LinePattern(
        id="kv.cache_config_info",
        kind="kv_cache_blocks",
        prefix="Engine ",
        regex=r"^Engine (?P<engine>\d+): vllm cache_config_info with initialization after num_gpu_blocks is: (?P<num_gpu_blocks>\d+)$",
        examples=["Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 17423"],
        doc="V1 KV-cache block count per engine (0.9–0.11).",
        source="v1",
    ),
    LinePattern(
        id="model.initialized",
        kind="model_initialized",
        prefix="Initializing model took",
        regex=r"^Initializing model took (?P<duration_s>[\d.]+ seconds)$",
        examples=["Initializing model took 0.145864 seconds"],
        doc="Model object constructed (before weights load).",
        source="v1",
    ),
    # ---------------------------------------------------------------- NCCL / distributed set-up
    LinePattern(
        id="dist.nccl_version",
        kind="nccl_version",
        prefix="vLLM is using nccl",
        regex=r"^vLLM is using nccl==(?P<version>\S+)$",
        examples=["vLLM is using nccl==2.20.5"],
        doc="NCCL version used by vLLM's pynccl.",
        source="v0/v1",
    ),
    LinePattern(
        id="dist.nccl_library",
        kind="nccl_version",
        prefix="Found nccl from library",
        regex=r"^Found nccl from library (?P<library>\S+)$",
        examples=["Found nccl from library libnccl.so.2"],
        doc="The NCCL shared library found.",
        source="v0/v1",
    ),
    LinePattern(
        id="dist.init",
        kind="distributed_init",
        prefix=None,
        contains="distributed_init_method=",
        regex=r"^world_size=(?P<world_size>\d+) rank=(?P<rank>\d+) local_rank=(?P<_lr>\d+) distributed_init_method=(?P<_m>\S+) backend=(?P<backend>\w+)$",
        examples=["world_size=1 rank=0 local_rank=0 distributed_init_method=file:///tmp/vllm_dist_6ef2 backend=gloo"],
        doc="torch.distributed initialised for one rank (backend nccl/gloo).",
        source="v1",
    ),
    LinePattern(
        id="dist.rank_assigned",
        kind="distributed_init",
        prefix="rank ",
        regex=r"^rank (?P<rank>\d+) in world size (?P<world_size>\d+) is assigned as (?P<_parts>.*)$",
        examples=["rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank 0, ETP rank 0, EP rank N/A, EPLB rank N/A",
                  "rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0"],
        doc="Parallel ranks of one worker.",
        source="v1",
    ),
    LinePattern(
        id="dist.dp_leader",
        kind="distributed_init",
        prefix="DP group leader",
        regex=r"^DP group leader: .*?world_size=(?P<world_size>\d+)",
        examples=["DP group leader: node_rank=0, node_rank_within_dp=0, master_addr=127.0.0.1, mq_connect_ip=192.0.2.2 (local), world_size=1, local_world_size=1"],
        doc="Data-parallel group leader set-up.",
        source="v1",
    ),
    LinePattern(
        id="dist.default_mp",
        kind="distributed_init",
        prefix="Defaulting to use ",
        regex=r"^Defaulting to use (?P<backend>\w+) for distributed inference$",
        examples=["Defaulting to use mp for distributed inference"],
        doc="Distributed executor backend chosen.",
        source="v0/v1",
    ),
    # ---------------------------------------------------------------- model / serving configuration notes
    LinePattern(
        id="model.tasks",
        kind="model_tasks",
        prefix="Supported tasks: ",
        regex=r"^Supported tasks: (?P<tasks>.*)$",
        examples=["Supported tasks: ['generate']"],
        doc="Tasks the served model supports.",
        source="v1",
    ),
    LinePattern(
        id="model.tasks_old",
        kind="model_tasks",
        prefix="Supported_tasks: ",
        regex=r"^Supported_tasks: (?P<tasks>.*)$",
        examples=["Supported_tasks: ['generate']"],
        doc="Tasks the served model supports (0.10.1–0.11.0 spelling).",
        source="v1",
    ),
    LinePattern(
        id="model.multiple_tasks",
        kind="model_tasks",
        prefix="This model supports multiple tasks",
        regex=r"^This model supports multiple tasks: (?P<tasks>\{.*\})\. Defaulting to '(?P<_task>\w+)'\.$",
        examples=["This model supports multiple tasks: {'generate', 'classify', 'reward', 'embed', 'score'}. Defaulting to 'generate'."],
        doc="The model supports several tasks; which one is served.",
        source="v0/v1",
    ),
    LinePattern(
        id="model.attention_backend",
        kind="attention_backend",
        prefix="Using ",
        regex=r"^Using (?P<backend>[\w ]+?) backend(?: on V1 engine)?\.$",
        examples=["Using Flash Attention backend.", "Using Flash Attention backend on V1 engine."],
        doc="Attention backend selected.",
        source="v0/v1",
    ),
    LinePattern(
        id="model.chat_template_default",
        kind="chat_template",
        prefix="Using default chat template",
        regex=r"^Using default chat template:?$",
        examples=["Using default chat template:"],
        doc="The tokenizer's default chat template is used (printed on the following lines).",
        source="v0",
    ),
    LinePattern(
        id="model.chat_template_missing",
        kind="chat_template",
        prefix="No chat template provided",
        regex=r"^No chat template provided\. Chat API will not work\.$",
        post=lambda f: f.__setitem__("error", "no chat template"),
        examples=["No chat template provided. Chat API will not work."],
        doc="No chat template: /v1/chat/completions will fail.",
        source="v0",
    ),
    LinePattern(
        id="model.chat_template_format",
        kind="chat_template",
        prefix="Detected the chat template content format",
        regex=r"^Detected the chat template content format to be '(?P<_fmt>\w+)'\..*$",
        examples=["Detected the chat template content format to be 'string'. You can set `--chat-template-content-format` to override this."],
        doc="Chat-template content format detected.",
        source="v1",
    ),
    # ---------------------------------------------------------------- environment / performance notices
    LinePattern(
        id="env.ulimit",
        kind="environment_notice",
        prefix="Found ulimit of",
        regex=r"^Found ulimit of (?P<_n>\d+) and failed to automatically increase.*$",
        post=_topic("ulimit"),
        examples=["Found ulimit of 20000 and failed to automatically increase with error current limit exceeds maximum limit. This can cause fd limit errors like `OSError: [Errno 24] Too many open files`. Consider increasing with ulimit -n"],
        doc="File-descriptor limit too low (can cause `Too many open files` under load).",
        source="v1",
    ),
    LinePattern(
        id="env.preload",
        kind="environment_notice",
        prefix=None,
        contains="is not found in LD_PRELOAD",
        regex=r"^lib(?P<_lib>\w+) is not found in LD_PRELOAD\..*$",
        post=_topic("ld_preload"),
        examples=["libtcmalloc is not found in LD_PRELOAD. For best performance, please follow the section `set LD_PRELOAD` in https://docs.vllm.ai/x to setup required pre-loaded libraries."],
        doc="CPU backend: a performance library is not preloaded.",
        source="v1",
    ),
    LinePattern(
        id="env.torch_threads",
        kind="environment_notice",
        prefix="Reducing Torch ",
        regex=r"^Reducing Torch (?:threads|parallelism) from (?P<_from>\d+)(?: threads)? to (?P<_to>\d+).*$",
        post=_topic("torch_threads"),
        examples=["Reducing Torch threads from 2 to 1 for serving. Set OMP_NUM_THREADS in the external environment to override.",
                  "Reducing Torch parallelism from 16 threads to 1 to avoid unnecessary CPU contention. Set OMP_NUM_THREADS in the external environment to tune this value as needed."],
        doc="Torch thread count reduced (OMP_NUM_THREADS).",
        source="v0/v1",
    ),
    LinePattern(
        id="env.triton_missing",
        kind="environment_notice",
        prefix="Triton is ",
        regex=r"^Triton is (?:not installed|installed, but doesn't include CPU backend)\..*$",
        post=_topic("triton"),
        examples=["Triton is not installed. triton-cpu is expected on x86 CPUs.", "Triton is installed, but doesn't include CPU backend. Disabling Triton."],
        doc="Triton unavailable (CPU backend); printed once per process start.",
        source="v1",
    ),
    LinePattern(
        id="env.model_runner_v2",
        kind="environment_notice",
        prefix="Model Runner V2 requires",
        regex=r"^Model Runner V2 requires Triton; using the V1 model runner instead\.$",
        post=_topic("triton"),
        examples=["Model Runner V2 requires Triton; using the V1 model runner instead."],
        doc="Model Runner V2 disabled for lack of Triton.",
        source="v1",
    ),
    LinePattern(
        id="env.spawn",
        kind="environment_notice",
        prefix="We must use the `spawn`",
        regex=r"^We must use the `spawn` multiprocessing start method\..*$",
        post=_topic("multiprocessing"),
        examples=["We must use the `spawn` multiprocessing start method. Overriding VLLM_WORKER_MULTIPROC_METHOD to 'spawn'. See https://docs.vllm.ai/x for more information."],
        doc="Worker start method forced to spawn (CUDA initialised early).",
        source="v1",
    ),
    LinePattern(
        id="model.mm_profiling_too_short",
        kind="mm_profiling_warning",
        prefix="The sequence length used for profiling",
        regex=r"^The sequence length used for profiling \(max_num_batched_tokens / max_num_seqs = (?P<max_num_batched_tokens>\d+)\) is too short to hold the multi-modal embeddings in the worst case \((?P<total_tokens>\d+) tokens in total.*$",
        examples=["The sequence length used for profiling (max_num_batched_tokens / max_num_seqs = 16384) is too short to hold the multi-modal embeddings in the worst case (98304 tokens in total, out of which {'image': 81920, 'video': 16384} are reserved for multi-modal embeddings). This may cause certain multi-modal inputs to fail during inference."],
        doc="Memory profiling under-estimates multi-modal inputs: the KV cache may be sized too large and OOM later.",
        source="v0/v1",
    ),
    LinePattern(
        id="engine.v1_fallback",
        kind="engine_fallback",
        prefix=None,
        contains="Falling back to V0",
        regex=r"^(?P<reason>.*?)\.? Falling back to V0\.?$",
        examples=["--limit-mm-per-prompt is not supported by the V1 Engine. Falling back to V0."],
        doc="An option is unsupported by the V1 engine, so the V0 engine runs (0.8–0.10).",
        source="v1",
    ),
    LinePattern(
        id="req.validation_error",
        kind="bad_request_params",
        prefix=None,
        contains="RequestValidationError",
        regex=r"RequestValidationError(?::| caught\.)",
        post=lambda f: f.__setitem__("reason", "request_validation"),
        examples=["fastapi.exceptions.RequestValidationError: 1 validation error:", "RequestValidationError caught. Request id: None"],
        doc="The request body failed validation (HTTP 400).",
        source="v1",
    ),
    LinePattern(
        id="compile.inductor_disabled",
        kind="compile",
        prefix="Inductor compilation was disabled",
        regex=r"^Inductor compilation was disabled by user settings.*$",
        post=_action("inductor_disabled"),
        examples=["Inductor compilation was disabled by user settings, optimizations settings that are only active during inductor compilation will be ignored."],
        doc="Inductor compilation is off.",
        source="v1",
    ),
    # ---------------------------------------------------------------- DEBUG per-step lines
    LinePattern(
        id="debug.batch",
        kind="batch_debug",
        prefix="Running batch with cudagraph_mode",
        regex=r"^Running batch with cudagraph_mode: (?P<cudagraph_mode>\w+), batch_descriptor: BatchDescriptor\(num_tokens=(?P<num_tokens>\d+).*$",
        fast="Running batch with cudagraph_mode: {cudagraph_mode:w}, batch_descriptor: BatchDescriptor(num_tokens={num_tokens:digits}{_rest:rest}",
        examples=["Running batch with cudagraph_mode: NONE, batch_descriptor: BatchDescriptor(num_tokens=25, num_reqs=None, uniform=False, has_lora=False, num_active_loras=0), should_ubatch: False, num_tokens_across_dp: None"],
        doc="DEBUG, one per model step: tokens in the batch and the CUDA-graph mode used.",
        source="v1",
    ),
    LinePattern(
        id="debug.ubatch",
        kind="batch_debug",
        prefix="ubatch_slices: ",
        regex=r"^ubatch_slices: (?P<_s>.*)$",
        examples=["ubatch_slices: None, ubatch_slices_padded: None"],
        doc="DEBUG, one per model step: micro-batch slicing.",
        source="v1",
    ),
    LinePattern(
        id="req.json_body",
        kind="request_details",
        prefix="Request ",
        regex=r"^Request (?P<request_id>\S+) JSON body: (?P<_body>.*)$",
        examples=['Request 89ce2fdda7b24dd5 JSON body: {"model":"/models/tiny","prompt":"hi","max_tokens":16}'],
        doc="DEBUG (0.33): the request's JSON body.",
        source="v1",
    ),
]:
    MESSAGES.add(_p)


for _p in [
    LinePattern(
        id="cpp.glog",
        kind="cpp_log",
        prefix=None,
        contains="] ",
        regex=r"^(?:\[rank(?P<rank>\d+)\]:)?\[(?P<severity>[EWIF])\d{3,4} \d\d:\d\d:\d\d\.\d+ (?P<file>[\w.]+:\d+)\] (?P<_msg>.*)$",
        examples=["[W1130 03:38:42.715245156 utils.cpp:68] Warning: NUMA binding: Using MEMBIND policy for memory allocation on the NUMA nodes (0). (function init_cpu_memory_env)"],
        doc="A PyTorch/glog C++ line (`[W1130 03:38:42.715 file.cpp:N] …`); its own timestamp is used.",
        source="torch",
    ),
    LinePattern(
        id="raw.nanobind_leak",
        kind="nanobind_leak",
        prefix="nanobind: ",
        regex=r"^nanobind: (?:leaked (?P<_n>\d+) (?P<_what>instances|types|functions)!|this is likely caused by .*)$",
        post=_leaks,
        examples=["nanobind: leaked 4 instances!", "nanobind: leaked 514 functions!"],
        doc="nanobind reference leaks reported at interpreter exit (Triton); marks a process exit, harmless.",
        source="python",
    ),
    LinePattern(
        id="raw.resource_tracker",
        kind="resource_leak",
        prefix=None,
        contains="resource_tracker: There appear to be",
        regex=r"resource_tracker: There appear to be (?P<leaked>\d+) leaked (?P<_what>\w+) objects to clean up at shutdown",
        examples=["/usr/local/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to be 1 leaked shared_memory objects to clean up at shutdown"],
        doc="multiprocessing's resource_tracker found leaked semaphores / shared memory at exit (a process died without cleanup).",
        source="python",
    ),
    LinePattern(
        id="raw.triton_missing",
        kind="environment_notice",
        prefix="Triton is ",
        regex=r"^Triton is (?:not installed|installed, but doesn't include CPU backend)\..*$",
        post=_topic("triton"),
        examples=["Triton is installed, but doesn't include CPU backend. Disabling Triton."],
        doc="Triton unavailable (printed by each process at start).",
        source="python",
    ),
]:
    RAW.add(_p, before="py.warning")
