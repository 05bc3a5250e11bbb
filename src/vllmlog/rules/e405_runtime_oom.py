"""E405 runtime-cuda-oom."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register


@register
class RuntimeCudaOom(Rule):
    """## What it detects
    CUDA out of memory while serving (after the server became ready): a batch, a long prompt, a large
    ``n``/``best_of`` or logprobs request, or memory held by another process pushes the GPU over.
    ## Why it matters
    The engine usually dies with it (EngineDeadError, every in-flight request fails); at best the
    request fails with 500.
    ## How to fix
    Leave activation headroom: ``--gpu-memory-utilization 0.85``, lower ``--max-num-seqs`` and
    ``--max-num-batched-tokens``, cap ``--max-model-len``; make sure nothing else allocates on the GPU."""

    code, slug, category, severity = "E405", "runtime-cuda-oom", "runtime_oom", Severity.CRITICAL
    title = "Out of GPU memory while serving"
    explains = ("dead", "failing", "stalled")
    options: dict[str, Any] = {}

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """An out-of-memory error in the engine kills it (V1) or fails the batch (V0)."""
        return True if symptom.kind in ("dead", "failing") else None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            ooms = [e for e in v.events if u.is_oom(e) and u.while_serving(v, e) and not v.in_shutdown(e.line)]
            if not ooms:
                continue
            e = ooms[0]
            am = u.aftermath(v, e)
            died = e.kind in ("engine_dead", "engine_fatal") or any(
                x.text and ("EngineDead" in x.text or "fatal" in x.text or "background task failed" in x.text) for x in am.evidence)
            f = e.fields
            alloc, total, free = u.oom_numbers(e)
            util = u.arg(v, "gpu_memory_utilization")
            dev = next((d for d in ("NPU", "XPU", "HPU", "MLU", "HIP") if f"{d} out of memory" in e.text),
                       "XLA (TPU)" if "RESOURCE_EXHAUSTED" in e.text else "CUDA")
            yield self.finding(
                f"{dev} out of memory while serving" + (f" (tried to allocate {alloc:.2f} GiB" + (f", {free:.2f} GiB free)" if free is not None else ")") if alloc else "")
                + ("; while waking up from sleep mode — a process sharing the GPU (a co-located trainer) still held "
                   "its memory" if ("wake_up" in e.text or "cumem" in e.text) else "")
                + ("; the engine died" if died else "") + (f"; {am.failed_requests} requests failed" if am.failed_requests else "") + ".",
                severity=Severity.CRITICAL if died else Severity.ERROR,
                evidence=u.dedupe([u.ev(e, "out of memory", "OutOfMemoryError"), u.first(e)] + am.evidence, limit=16), first_seen=e.ts,
                last_seen=am.last_ts or e.ts, count=len(ooms), file=v.file, process=e.process, server=v.index,
                root_cause="A step needed more GPU memory than was left after the KV cache and weights "
                           "(activation peak of a large batch or long prompt, or another process on the GPU).",
                remediation=f"Lower `--gpu-memory-utilization` to leave activation headroom (now {util or 'default 0.9'}; "
                            "try 0.85), lower `--max-num-seqs` / `--max-num-batched-tokens`, cap `--max-model-len`; "
                            "check `nvidia-smi` for other processes.",
                data={"tried_to_allocate_gib": alloc, "free_gib": free, "total_capacity_gib": total, "engine_died": died},
            )
