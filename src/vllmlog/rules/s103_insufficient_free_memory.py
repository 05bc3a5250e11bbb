"""S103 insufficient-free-memory."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from ..capacity import sizing
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register



@register
class InsufficientFreeMemory(Rule):
    """## What it detects
    ``Free memory on device … on startup is less than desired GPU memory utilization`` (or the CPU
    backend's ``Available memory on node …``): when the worker starts, less memory is free than
    ``--gpu-memory-utilization`` asks for.
    ## Why it matters
    The engine refuses to start. The usual cause is another process (a second vLLM, a notebook, a stale
    worker) holding device memory, or a utilization set too high for a shared device.
    Category: ``startup_oom`` — a memory shortage at start-up that depends on the device's state, not an
    invalid argument (the same flag starts fine on an idle device).
    ## How to fix
    Free the memory (find the holder with ``nvidia-smi``), or lower ``--gpu-memory-utilization`` to
    what is free (the finding computes the value), or move to an idle device."""

    code, slug, category, severity = "S103", "insufficient-free-memory", "startup_oom", Severity.CRITICAL
    title = "Not enough free memory at start-up for --gpu-memory-utilization"
    explains = ("never_ready",)
    options: dict[str, Any] = {}

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            evs = [e for e in v.of("insufficient_free_memory") if not v.serving(e.line)]
            if not evs:
                continue
            e = evs[0]
            line = u.ev(e, "on startup is less than desired")
            free, total, util, want, sugg = sizing.free_memory_fit(e)
            m = free is not None
            msg = "Start-up aborted: only " + (f"{free:.2f} of {total:.2f} GiB free, but --gpu-memory-utilization {util} "
                                              f"asks for {want:.2f} GiB." if m else "part of the memory is free, less than "
                                              "--gpu-memory-utilization asks for.")
            yield self.finding(
                msg, evidence=u.dedupe([line] + u.startup_failure_lines(v, e.line_end)), first_seen=e.ts, last_seen=e.ts,
                count=len(evs), file=v.file, process=e.process, server=v.index,
                root_cause="Another process holds device memory (or the device is shared), so the requested fraction "
                           "of memory is not free when the worker starts.",
                remediation=(f"Lower `--gpu-memory-utilization` to {sugg:.2f} (fits the {free:.2f} GiB free) or " if sugg else
                             "Lower `--gpu-memory-utilization`, or ")
                + "free the memory held by other processes (`nvidia-smi`); on the CPU backend set "
                  "`VLLM_CPU_KVCACHE_SPACE` (GiB) explicitly.",
                data={"free_gib": free, "total_gib": total, "gpu_memory_utilization": util, "suggested_utilization": sugg},
            )
