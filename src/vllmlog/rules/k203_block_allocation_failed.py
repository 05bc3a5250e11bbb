"""K203 block-allocation-failed."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from . import advice
from .base import Finding, Rule, Severity
from .registry import register


@register
class BlockAllocationFailed(Rule):
    """## What it detects
    ``Failed to allocate blocks for <request>. Out of memory.`` — the scheduler could not get KV-cache
    blocks for a request while serving (handbook format).
    ## Why it matters
    The request fails or is preempted; repeated failures mean the KV cache is exhausted at run time.
    ## How to fix
    Lower ``--max-num-seqs`` / client concurrency or ``max_tokens``, raise ``--gpu-memory-utilization``,
    add GPUs or use ``--kv-cache-dtype fp8``."""

    code, slug, category, severity = "K203", "block-allocation-failed", "runtime_oom", Severity.ERROR
    title = "KV-cache block allocation failed while serving"
    explains = ("failing", "dead", "stalled")
    options: dict[str, Any] = {"min_count": 1}
    consequence_of = ("kv_cache_pressure_preemption",)

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            evs = [e for e in v.of("block_allocation_failed") if not v.in_shutdown(e.line)]
            if len(evs) < int(options["min_count"]):
                continue
            ids = {e.request_id for e in evs if e.request_id}
            kv = v.in_file.decode_kv_max()
            yield self.finding(
                f"{len(evs)} KV-cache block allocations failed for {len(ids) or len(evs)} requests"
                + (f" (KV usage peaked at {u.pct(kv)})" if kv else "") + ".",
                evidence=u.dedupe([u.first(e) for e in evs[:5]]), first_seen=evs[0].ts, last_seen=evs[-1].ts,
                count=len(evs), file=v.file, process=evs[0].process, server=v.index,
                root_cause="The KV cache ran out of free blocks at run time: admitted sequences outgrew the cache.",
                remediation=_fix(run, v),
                data={"requests": len(ids), "peak_kv_cache_usage": kv},
            )


def _fix(run: Run, v: Any) -> str:
    """Fewer sequences and more KV memory, with the sizing's values (``capacity.sizing``)."""
    from ..capacity import sizing
    from ..state.config import server_config

    cfg = server_config(v)
    sz = sizing.for_view(run, v)
    seats = advice.fewer_seqs(cfg, None, "", sz) or "admit fewer sequences"
    return f"{seats[0].upper()}{seats[1:]} and lower `max_tokens`; {advice.more_kv_memory(cfg, sz)}."
