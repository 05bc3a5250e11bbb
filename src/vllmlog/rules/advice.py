"""Fixes that agree with the facts of the server they are for.

The numbers in them (``--max-num-seqs``, the KV-cache size, ``--max-model-len``) are the capacity model's
(``capacity.sizing``: one computation per server run, the same values ``vllmlog capacity`` names).

Rules phrase their remediation with these helpers, and ``reconcile`` checks every incident's fixes once more:
never advise the value the server already uses, the CPU backend's KV cache is ``VLLM_CPU_KVCACHE_SPACE`` (not
``--gpu-memory-utilization``), a ``--num-gpu-blocks-override`` in the arguments *is* the KV-cache limit (name it,
do not advise more GPU memory), and lowering ``--max-num-seqs`` is no fix while one request runs at a time.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..capacity.sizing import Sizing
    from ..state.config import ServerConfig


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"


def more_kv_memory(cfg: ServerConfig | None, sz: Sizing | None = None) -> str:
    """How to give the KV cache more room on this server (the value is the sizing's: ``capacity.sizing``)."""
    kvm = sz.kv_memory if sz is not None else None
    if cfg is not None and cfg.num_gpu_blocks_override:
        toks = f" ({cfg.kv_cache_tokens:,} tokens)" if cfg.kv_cache_tokens else ""
        return (f"remove `--num-gpu-blocks-override {cfg.num_gpu_blocks_override}`: it caps the KV cache at "
                f"{cfg.num_gpu_blocks_override} blocks{toks} whatever memory is free")
    if cfg is not None and cfg.cpu:
        have = f" (now {cfg.kv_cache_memory_gib:g} GiB)" if cfg.kv_cache_memory_gib else ""
        if kvm:
            return f"give the CPU KV cache more memory: `{kvm.change}`{have}"
        return f"give the CPU KV cache more memory: `VLLM_CPU_KVCACHE_SPACE=<GiB>`{have}"
    from ..capacity.sizing import gpu_util_up

    opts = []
    util = cfg.gpu_memory_utilization if cfg is not None else None
    u2 = kvm.value if kvm is not None and kvm.flag == "--gpu-memory-utilization" else gpu_util_up(util)
    if u2 is not None:
        opts.append(f"`--gpu-memory-utilization {u2:g}`" + (f" (now {_g(util)})" if util is not None else ""))
    tp = cfg.tensor_parallel_size if cfg is not None else 1
    opts.append(f"more GPUs (`--tensor-parallel-size {max(2, tp * 2)}`)")
    if cfg is None or not (cfg.kv_cache_dtype or "").startswith("fp8"):
        opts.append("`--kv-cache-dtype fp8`")
    return "give the KV cache more memory: " + " or ".join(opts)


def fewer_seqs(cfg: ServerConfig | None, running: float | None, reason: str = "", sz: Sizing | None = None) -> str | None:
    """Advice to admit fewer sequences: the sizing's ``--max-num-seqs`` (what the cache holds), else no number;
    None when it cannot help (one request runs at a time)."""
    if running is not None and running <= 1 or (sz is not None and sz.running_max <= 1):
        return None
    now = cfg.max_num_seqs if cfg is not None else None
    v = sz.fewer_seats if sz is not None else None
    if v:
        paren = ", ".join(x for x in (reason, f"now {now}" if now else "") if x)
        return f"cap concurrency at what the cache holds: `{v.change}`" + (f" ({paren})" if paren else "")
    return "lower `--max-num-seqs` or client concurrency" + (f" (now {now})" if now else "")


def more_seqs(sz: Sizing | None, running: float, kv_note: str = "") -> str:
    """Advice to admit more sequences at the seat limit: the sizing's ``--max-num-seqs``, or why more seats would
    not help."""
    v = sz.more_seats if sz is not None else None
    lead = f"{kv_note}: " if kv_note else ""
    if v:
        return f"{lead}raise the seat limit to `{v.change}`: {v.why}"
    if v is not None and v.why:
        return f"more seats would not help: {v.why}"
    return f"{lead}raise `--max-num-seqs` above {running:g} if latency targets allow"


_FLAG = re.compile(r"`--([\w-]+)[ =]([\w.]+)`")
_UNDO = re.compile(r"\b(?:remove|drop|unset|without)\s*$", re.I)


def reconcile(fixes: list[str], cfg: ServerConfig | None, *, max_running: int | None = None) -> list[str]:
    """Drop or rewrite fixes that contradict the server's facts (see the module docstring)."""
    if cfg is None:
        return fixes
    out: list[str] = []
    for fx in fixes:
        if cfg.cpu and "--gpu-memory-utilization" in fx and "VLLM_CPU_KVCACHE_SPACE" not in fx:
            fx = re.sub(r"`--gpu-memory-utilization(?: [\d.]+)?`", "`VLLM_CPU_KVCACHE_SPACE=<GiB>` (CPU backend)", fx)
        if cfg.num_gpu_blocks_override and "gpu-memory-utilization" in fx and "num-gpu-blocks-override" not in fx:
            fx = more_kv_memory(cfg)
        if max_running is not None and max_running <= 1 and re.search(r"lower `--max-num-seqs`|`--max-num-seqs \d+`", fx, re.I) \
                and "raise" not in fx:
            continue
        same = False
        # "remove `--num-gpu-blocks-override 2`" names the value in force as what to undo: not a repeat of it
        for flag, val in (m.groups() for m in _FLAG.finditer(fx) if not _UNDO.search(fx, 0, m.start())):
            now = getattr(cfg, flag.replace("-", "_"), None)
            if now is not None and str(now) == val or (isinstance(now, float) and _num_eq(now, val)):
                same = True
        if same:
            continue
        if fx not in out:
            out.append(fx)
    return out


def _num_eq(a: float, b: str) -> bool:
    try:
        return abs(a - float(b)) < 1e-9
    except ValueError:
        return False
