"""Envelope details (torch's per-rank stderr prefix) and exception chains."""

from __future__ import annotations

from vllmlog.parsing.parser import LineParser


def _parse(lines: list[str]):
    p = LineParser("x.log", year=2026)
    return p.feed(enumerate(lines, 1)) + p.close()


def test_torch_rank_prefix_stripped_traceback_grouped() -> None:
    evs = _parse([
        "vllm-1  | [rank1]: Traceback (most recent call last):",
        'vllm-1  | [rank1]:   File "/x/worker.py", line 378, in raise_if_cache_size_invalid',
        "vllm-1  | [rank1]:     raise ValueError(",
        "vllm-1  | [rank1]: ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.",
    ])
    assert len(evs) == 1
    e = evs[0]
    assert (e.line, e.line_end, e.process, e.kind) == (1, 4, "rank1", "kv_cache_no_memory")
    assert e.fields["exc_type"] == "ValueError"


def test_torch_rank_prefix_keeps_process_tag() -> None:
    evs = _parse(["(VllmWorker rank=0 pid=7) [rank0]: Traceback (most recent call last):", "(VllmWorker rank=0 pid=7) [rank0]: RuntimeError: boom"])
    assert len(evs) == 1 and evs[0].process == "VllmWorker rank=0 pid=7" and evs[0].kind == "traceback"


def test_torch_cpp_rank_lines_unchanged() -> None:
    evs = _parse([
        "[rank0]:[E1110 17:30:06.118204311 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600031 milliseconds before timing out.",
        "[rank0]:[W914 04:53:45.615225908 socket.cpp:204] [c10d] The hostname of the client socket cannot be retrieved.",
    ])
    assert [e.kind for e in evs] == ["nccl_timeout", "torch_log"]
    assert evs[0].fields["rank"] in ("0", 0)


def test_exception_chain_keeps_every_matched_kind() -> None:
    h = "ERROR 03-25 10:16:29 async_llm_engine.py:43] "
    evs = _parse([
        h + "Engine background task failed",
        h + "Traceback (most recent call last):",
        h + '  File "/x/model_runner.py", line 1, in execute_model',
        h + "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of 23.69 GiB of which 3.09 GiB is free.",
        h + "",
        h + "The above exception was the direct cause of the following exception:",
        h + "",
        h + "Traceback (most recent call last):",
        h + '  File "/x/async_llm_engine.py", line 2, in _log_task_completion',
        h + "vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly. This should never happen!",
    ])
    assert len(evs) == 1
    f = evs[0].fields
    assert f["exc_kind"] == "engine_dead"  # the last exception, as before
    assert f["exc_kinds"] == ["cuda_oom", "engine_dead"]  # the cause first


def test_sampling_range_with_comma_is_typed() -> None:
    evs = _parse(["ERROR 10-02 09:01:00 [serving_chat.py:222] ValueError: top_p must be in (0, 1], got 2.5."])
    # the message after the exception type; the envelope message itself starts with "ValueError: "
    evs2 = _parse(["INFO 10-02 09:01:00 [x.py:1] Traceback (most recent call last):", "INFO 10-02 09:01:00 [x.py:1] ValueError: top_p must be in (0, 1], got 2.5."])
    e = evs2[0]
    assert e.kind == "bad_request_params" and e.fields["param"] == "top_p" and e.fields["error"] == "in (0, 1]"
    assert evs[0].kind == "bad_request_params"


def test_c10_stack_joins_its_error_line() -> None:
    evs = _parse([
        "[rank1]:[E0407 02:10:54.409533811 ProcessGroupNCCL.cpp:1515] [PG 3 Rank 1] Process group watchdog thread terminated with exception: boom",
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3b1d00e2a6 in /x/libtorch_cuda.so)",
        "frame #1: c10d::ProcessGroupNCCL::watchdogHandler() + 0xd0 (0x7f3b1d02e2a6 in /x/libtorch_cuda.so)",
        "",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "  what():  [PG 3 Rank 1] Process group watchdog thread terminated with exception: boom",
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):",
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3b1d00e2a6 in /x/libtorch_cuda.so)",
    ])
    assert [(e.line, e.line_end, e.kind) for e in evs][:2] == [(1, 4, "nccl_error"), (5, 5, "blank")]
    assert (evs[2].line, evs[2].line_end) == (6, 9)


def test_v0_background_loop_callback_and_asgi_exception() -> None:
    evs = _parse([
        "Exception in callback functools.partial(<function _raise_exception_on_finish at 0x7f1c8a2e3d90>, error_callback=<bound method x>)",
        "handle: <Handle functools.partial(<function _raise_exception_on_finish at 0x7f1c8a2e3d90>)>",
        "Traceback (most recent call last):",
        '  File "/x/async_llm_engine.py", line 38, in _raise_exception_on_finish',
        "vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly.",
        "ERROR:    Exception in ASGI application",
        "Traceback (most recent call last):",
        '  File "/x/api_server.py", line 1, in create_chat_completion',
        "vllm.engine.async_llm_engine.AsyncEngineDeadError: Background loop has errored already.",
        'INFO:     10.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
    ])
    assert [(e.line, e.line_end, e.kind) for e in evs] == [
        (1, 5, "engine_dead"), (6, 9, "asgi_exception"), (10, 10, "http_access")]
    assert evs[1].fields["exc_kind"] == "engine_dead" and evs[1].level == "ERROR"


def test_torch_rank_prefix_on_a_chained_traceback() -> None:
    evs = _parse([
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/x/a.py", line 1, in f',
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "[rank0]:",
        "[rank0]: The above exception was the direct cause of the following exception:",
        "[rank0]: ",
        "[rank0]: Traceback (most recent call last):",
        "[rank0]: RuntimeError: Engine core initialization failed. See root cause above.",
    ])
    assert len(evs) == 1 and evs[0].process == "rank0"
    assert "cuda_oom" in evs[0].fields["exc_kinds"]


def test_kubectl_prefix_and_timestamps_stripped() -> None:
    """``kubectl logs --prefix --timestamps``: ``[pod/NAME/CONTAINER] `` then the RFC 3339 stamp, then vLLM's line."""
    evs = _parse([
        "[pod/vllm-7d9f-x2/vllm] 2026-04-18T09:00:00.137911123Z \x1b[0;36m(APIServer pid=1)\x1b[0;0m INFO:     "
        "Application startup complete.",
        "[pod/vllm-7d9f-x2/vllm] 2026-04-18T09:00:10.000000000Z (EngineCore_DP0 pid=41) ERROR 04-18 09:00:10 "
        "[core.py:710] EngineCore encountered a fatal error.",
    ])
    assert [e.kind for e in evs] == ["server_ready", "engine_fatal"]
    assert evs[1].process == "EngineCore_DP0 pid=41" and evs[1].source == "core.py:710"


def test_journalctl_prefix_stripped() -> None:
    """``journalctl -u vllm`` (short format): ``Mon DD HH:MM:SS host ident[pid]: `` before vLLM's own line."""
    evs = _parse([
        "Apr 18 09:00:00 gpu-node-3 vllm[2211]: INFO:     Application startup complete.",
        "Apr 18 09:00:10 gpu-node-3 vllm[2211]: ERROR 04-18 09:00:10 [core.py:710] EngineCore encountered a fatal error.",
    ])
    assert [e.kind for e in evs] == ["server_ready", "engine_fatal"]
    assert evs[1].source == "core.py:710"
