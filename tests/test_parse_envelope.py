"""Envelope details: torch's per-rank stderr prefix."""

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
