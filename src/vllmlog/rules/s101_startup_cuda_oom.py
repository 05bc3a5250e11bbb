"""S101 startup-cuda-oom."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register

_STAGES = (
    ("profile_run", "memory profiling (the dummy batch of max-num-batched-tokens / max-num-seqs)"),
    ("determine_num_available_blocks", "memory profiling (the dummy batch of max-num-batched-tokens / max-num-seqs)"),
    ("_dummy_run", "memory profiling (the dummy batch of max-num-batched-tokens / max-num-seqs)"),
    ("warming up sampler", "sampler warm-up with max-num-seqs dummy requests"),
    ("capture", "CUDA graph capture"),
    ("load_model", "loading the weights"),
    ("load_weights", "loading the weights"),
    ("Failed to load model", "loading the weights"),
    ("initialize_kv_cache", "allocating the KV cache"),
)


@register
class StartupCudaOom(Rule):
    """## What it detects
    CUDA out of memory (``torch.OutOfMemoryError``, ``CUDA out of memory``, ``Failed to load model - not
    enough GPU memory``) while the server starts: loading weights, profiling, capturing CUDA graphs,
    warming up the sampler — before it ever served a request.
    ## Why it matters
    The server never becomes ready; every client sees connection refused. Retrying does not help.
    ## How to fix
    Depends on the stage named by the traceback: weights → more GPUs (``--tensor-parallel-size``) or a
    quantized checkpoint; profiling → smaller ``--max-num-batched-tokens`` / ``--max-num-seqs`` /
    ``--max-model-len`` and, for multimodal models, ``--limit-mm-per-prompt``; CUDA graphs →
    ``--enforce-eager`` or fewer capture sizes; always check that no other process holds GPU memory
    (``nvidia-smi``) and that ``--gpu-memory-utilization`` leaves activation headroom (0.85–0.9)."""

    code, slug, category, severity = "S101", "startup-cuda-oom", "startup_oom", Severity.CRITICAL
    title = "Out of GPU memory during start-up"
    explains = ("never_ready",)
    options: dict[str, Any] = {}

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            ooms = [e for e in v.events if u.is_oom(e) and not u.while_serving(v, e) and not v.in_shutdown(e.line)]
            # the other ranks' (or the driver's) reports of an OOM whose own traceback shows it in a forward step: the
            # same failure while generating, not a start-up — an offline engine never prints "ready"
            stepping = [x.ts for x in v.events if u.is_oom(x) and u.stage_of(x) == "serving" and x.ts is not None]
            ooms = [e for e in ooms if not (e.ts is not None and any(abs((e.ts - t).total_seconds()) <= 120
                                                                      for t in stepping))]
            if not ooms:
                continue
            e = ooms[0]
            f = e.fields
            stage = next((d for key, d in _STAGES if key in e.text), None)
            alloc, total, free = u.oom_numbers(e)
            nums = []
            if alloc is not None:
                nums.append(f"tried to allocate {alloc:.2f} GiB")
            if total is not None:
                nums.append(f"GPU total {total:.2f} GiB")
            if free is not None:
                nums.append(f"{free:.2f} GiB free")
            msg = "CUDA out of memory while starting" + (f" ({stage})" if stage else "")
            msg += (": " + ", ".join(nums) if nums else "") + "; the server never became ready."
            evid = u.context_warnings(v, e.line, e.ts)
            evid = [u.first(e) if e.level else u.ev(e, "OutOfMemoryError", "out of memory")] + evid
            if e.line != e.line_end:
                evid.append(u.ev(e, "OutOfMemoryError", "out of memory"))
            evid += u.startup_failure_lines(v, e.line_end)
            util = u.arg(v, "gpu_memory_utilization")
            rem = []
            if stage and "profiling" in stage:
                rem.append("shrink the profiling batch: lower `--max-num-batched-tokens` and `--max-num-seqs` "
                           f"(now {u.arg(v, 'max_num_seqs') or 'default'}) or `--max-model-len`")
                if any("multi-modal" in x.text or "mm" in x.text for x in evid):
                    rem.append("for multimodal models cap `--limit-mm-per-prompt` (e.g. `image=1,video=0`) and image size "
                               "(`--mm-processor-kwargs '{\"max_pixels\": 1003520}'`)")
            elif stage and "weights" in stage:
                rem.append("the weights do not fit: use `--tensor-parallel-size 2` (or more GPUs) or a quantized checkpoint "
                           "(`--quantization awq`/fp8)")
            elif stage and "graph" in stage:
                rem.append("skip CUDA graphs with `--enforce-eager` or lower `--gpu-memory-utilization` to leave room for them")
            elif stage and "sampler" in stage:
                rem.append("lower `--max-num-seqs` (the sampler warm-up allocates one row per sequence)")
            rem.append(f"check `nvidia-smi` for other processes; keep `--gpu-memory-utilization` ≤ 0.9 (now {util or 'default 0.9'})")
            yield self.finding(
                msg, evidence=u.dedupe(evid), first_seen=e.ts, last_seen=e.ts, count=len(ooms), file=v.file,
                process=e.process, server=v.index,
                root_cause=f"Start-up needed more GPU memory than was available{' during ' + stage if stage else ''}.",
                remediation="; ".join(rem) + ".",
                data={"stage": stage, "tried_to_allocate_gib": alloc, "total_capacity_gib": total, "free_gib": free},
            )
