"""Ray workers print PyTorch's C++ NCCL lines behind their coloured ``(RayWorkerVllm pid=N)`` tag, often in
c10's older ``[E ProcessGroupNCCL.cpp:475]`` form (no time, no ``[rankN]:`` prefix): they parse as their C++
kind (``nccl_timeout`` / ``nccl_error``, rank from the message), not ``unparsed`` — they are the evidence of
an NCCL failure under Ray."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllmlog.diagnose import diagnose
from vllmlog.parsing import fast
from vllmlog.reader import iter_batches
from vllmlog.run import load

WATCHDOG = ("[E ProcessGroupNCCL.cpp:475] [Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=23, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800436 milliseconds before timing out.")
TAGS = ["\x1b[36m(RayWorkerVllm pid=2101)\x1b[0m ", "(RayWorkerVllm pid=2101) ", "\x1b[36m(RayWorkerVllm pid=2101, ip=10.0.0.2)\x1b[0m ", ""]


def _events(tmp_path: Path, lines: list[str], pure: bool, monkeypatch: pytest.MonkeyPatch) -> list:
    p = tmp_path / "ray.log"
    p.write_text("\n".join(lines) + "\n")
    if pure:
        monkeypatch.setattr(fast, "scan", None)
    return [e for b in iter_batches(str(p), year=2026) for e in b]


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("tag", TAGS)
def test_ray_watchdog_line_is_nccl_timeout(tmp_path, monkeypatch, tag, pure):
    evs = _events(tmp_path, [tag + WATCHDOG, tag + WATCHDOG + " [repeated 3x across cluster]"], pure, monkeypatch)
    assert [e.kind for e in evs] == ["nccl_timeout", "nccl_timeout"]
    e = evs[0]
    assert e.level == "ERROR"
    assert e.fields == {"rank": 4, "seq": 23, "op": "ALLREDUCE", "timeout_s": 1800.0, "ran_s": 1800.436}
    assert e.process == (tag.replace("\x1b[36m", "").replace("\x1b[0m", "").strip()[1:-1] or None)
    assert evs[1].fields["repeated"] == 3


@pytest.mark.parametrize("pure", [False, True])
def test_ray_process_group_lines_are_nccl_errors(tmp_path, monkeypatch, pure):
    lines = [
        TAGS[0] + "[E ProcessGroupNCCL.cpp:489] [Rank 4] Some NCCL operations have failed or timed out. Due to the "
                  "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        TAGS[0] + "[E ProcessGroupNCCL.cpp:495] [Rank 4] To avoid data inconsistency, we are taking the entire process down.",
        TAGS[2] + "[E1110 04:53:45.615225908 ProcessGroupNCCL.cpp:1612] [PG 0 Rank 4] Process group watchdog thread "
                  "terminated with exception",
    ]
    evs = _events(tmp_path, lines, pure, monkeypatch)
    assert [e.kind for e in evs] == ["nccl_error"] * 3
    assert all(e.level == "ERROR" and e.fields["rank"] == 4 and e.fields["severity"] == "E" for e in evs)
    assert evs[2].ts is not None and evs[2].ts.month == 11  # glog's own time


def test_ray_nccl_timeout_is_diagnosed(tmp_path):
    """A V0 server with Ray workers whose all-reduce times out: the NCCL finding, with the Ray worker's line."""
    head = [
        "INFO 11-10 17:20:05 api_server.py:528] vLLM API server version 0.6.3.post1",
        "INFO 11-10 17:20:05 api_server.py:529] args: Namespace(model='m', tensor_parallel_size=8, "
        "distributed_executor_backend='ray')",
        "INFO 11-10 17:20:30 launcher.py:19] Available routes are:",
        "INFO:     Application startup complete.",
        "INFO 11-10 17:21:00 metrics.py:341] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 "
        "tokens/s, Running: 4 reqs, Swapped: 0 reqs, Pending: 9 reqs, GPU KV cache usage: 3.0%, CPU KV cache usage: 0.0%.",
    ]
    p = tmp_path / "ray-nccl.log"
    p.write_text("\n".join(head + [TAGS[0] + WATCHDOG]) + "\n")
    found = diagnose(load(str(p), year=2026))
    d = [f for f in found if f.category == "distributed_nccl"]
    assert d, [f.code for f in found]
    assert any("Watchdog caught collective operation timeout" in ev.text for ev in d[0].evidence)
