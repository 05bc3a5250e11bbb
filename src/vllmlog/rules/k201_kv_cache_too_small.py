"""K201 kv-cache-too-small."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from ..capacity import sizing
from ..state.config import server_config
from . import _util as u
from . import advice
from .base import Finding, Rule, Severity
from .registry import register



@register
class KvCacheTooSmall(Rule):
    """## What it detects
    The KV cache that fits after loading the weights is too small to start: ``No available memory for
    the cache blocks``, or the model's max seq len is larger than the tokens the KV cache can hold
    (V0 ``The model's max seq len (4096) is larger than … KV cache (3520)``, V1 ``To serve at least one
    request with the model's max seq len …``).
    ## Why it matters
    The engine refuses to start: not even one request of maximum length would fit.
    ## How to fix
    Lower ``--max-model-len`` to what the cache holds (the finding computes it from the log), or give the
    cache more memory: raise ``--gpu-memory-utilization``, use more GPUs (``--tensor-parallel-size``),
    a quantized KV cache (``--kv-cache-dtype fp8``) or drop ``--num-gpu-blocks-override``."""

    code, slug, category, severity = "K201", "kv-cache-too-small", "kv_cache_capacity_error", Severity.CRITICAL
    title = "KV cache too small to start"
    explains = ("never_ready",)
    options: dict[str, Any] = {}

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            evs = [e for e in v.of("kv_cache_insufficient", "kv_cache_no_memory") if not v.serving(e.line)]
            if not evs:
                # "# GPU blocks: 0" / "GPU KV cache size: 0 tokens" is itself the evidence (the error that
                # follows may be missing or unreadable)
                evs = [e for e in v.of("kv_cache_blocks", "kv_cache_size") if _zero_blocks(e) and not v.serving(e.line)]
            if not evs:
                continue
            e = evs[0]
            main = u.ev(e, "max seq len", "No available memory for the cache blocks")
            blocks = v.of("kv_cache_blocks", "kv_cache_size", "kv_cache_memory", before=e.line)
            f = e.fields
            max_len, cap = sizing.context_fit(e, blocks)
            sz = sizing.for_view(run, v)
            zero = _zero_blocks(e) or (bool(blocks) and _zero_blocks(blocks[-1]))
            if zero and e.kind in ("kv_cache_blocks", "kv_cache_size"):
                main = u.first(e)
                blocks = []
            blocks_av = u.num(f.get("available_blocks"))
            if blocks_av is not None and u.num(f.get("max_num_seqs")):
                want = int(u.num(f.get("max_num_seqs")) or 0)
                sugg = int(sz.fewer_seats.value) if sz is not None and sz.fewer_seats else int(blocks_av)
                msg = (f"--max-num-seqs {want} needs one cache block per running sequence but only {sugg} fit "
                       "(hybrid/Mamba state cache); the engine refuses to start.")
                rem = (f"Start with `--max-num-seqs {sugg}` (or fewer), or lower `--max-model-len` / raise the memory for "
                       "the cache so more blocks fit.")
                main = u.ev(e, "cache blocks")
            elif e.kind == "kv_cache_no_memory" or e.fields.get("exc_kind") == "kv_cache_no_memory" or zero:
                msg = "No memory is left for any KV-cache block after loading the weights; the engine cannot start."
                cfg = server_config(v)
                rem = (advice.more_kv_memory(cfg, sz) + "; or a quantized checkpoint so the weights leave room for the cache, "
                       "or free memory held by other processes.")
                sugg = None
            else:
                sugg = int(sz.max_model_len.value) if sz is not None and sz.max_model_len else int(cap) if cap else None
                msg = (f"max model len {u.ints(max_len)} does not fit the KV cache ({u.ints(cap)} tokens); "
                       "the engine refuses to start.")
                cfg = server_config(v)
                rem = ((f"Start with `--max-model-len {sugg}` (fits the {u.ints(cap)}-token KV cache), or " if sugg else "Lower `--max-model-len`, or ")
                       + advice.more_kv_memory(cfg, sz) + ".")
            evid = [main] + ([u.first(blocks[-1])] if blocks else []) + u.startup_failure_lines(v, e.line_end)
            if zero and e.kind in ("kv_cache_blocks", "kv_cache_size"):
                msg = ("The KV cache got 0 blocks after loading the weights (no memory left for a single block); "
                       "the engine cannot serve.")
            yield self.finding(
                msg, evidence=u.dedupe(evid), first_seen=e.ts, last_seen=e.ts, count=len(evs), file=v.file,
                process=e.process, server=v.index,
                root_cause="After the weights and activations, the memory left for the KV cache holds fewer tokens "
                           "than one request of maximum length needs.",
                remediation=rem, data={"max_seq_len": max_len, "kv_cache_tokens": cap, "suggested_max_model_len": sugg},
            )


def _zero_blocks(e: Any) -> bool:
    """A KV-cache size line that reports no device blocks at all (``# GPU blocks: 0``, ``KV cache size: 0 tokens``)."""
    f = e.fields
    if e.kind == "kv_cache_blocks":
        return u.num(f.get("num_gpu_blocks")) == 0
    if e.kind == "kv_cache_size":
        return u.num(f.get("kv_cache_tokens")) == 0
    return False
