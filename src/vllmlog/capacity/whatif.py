"""What-if: the effect of one engine flag on how many requests of the observed length mix fit at once and on
Running at the observed peak concurrency, computed from the logged KV sizes (never guessed), assumptions
stated. A flag is never proposed at the value the server already uses."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .figure import DERIVED, LOGGED, MODEL
from .model import Footprint, fits, running

if TYPE_CHECKING:  # pragma: no cover
    from .load import Load
    from .model import Throughput
    from .server import Server

GIB = 1024**3


@dataclass
class WhatIf:
    """One changed flag and what it does to the cache and the batch."""

    key: str
    change: str
    """The flag or variable as one would pass it."""
    kv_tokens: int | None
    seats: int | None
    fits: float | None
    """Requests of the observed mix the cache holds at once."""
    running: float | None
    """Running at the observed peak concurrency (min of demand, seats, fits)."""
    vllm_concurrency: float | None = None
    """vLLM's own 'Maximum concurrency for max_model_len tokens per request' under the change."""
    gen_tps: float | None = None
    """Aggregate generation tokens/s at that Running (the fitted step-time model)."""
    kv_basis: str = DERIVED
    """How the new capacity is known: ``logged`` (a line states it), ``derived`` (bytes per token × memory)."""
    assumptions: list[str] = field(default_factory=list)
    note: str = ""
    proposed: bool = True
    """False for a row that only explains (e.g. prefix caching already on)."""

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "change": self.change, "kv_cache_tokens": self.kv_tokens, "kv_basis": self.kv_basis,
                "max_num_seqs": self.seats, "fits": self.fits, "running_at_peak_demand": self.running,
                "vllm_max_concurrency": self.vllm_concurrency, "generation_tokens_per_s": self.gen_tps,
                "basis": MODEL, "assumptions": list(self.assumptions), "note": self.note, "proposed": self.proposed}


def _row(key: str, change: str, s: Server, ld: Load, fp: Footprint | None, tp: Throughput | None, *,
         kv_tokens: int | None = None, seats: int | None = None, max_len: int | None = None, fp2: Footprint | None = None,
         kv_basis: str = DERIVED, note: str = "", assumptions: list[str] | None = None, proposed: bool = True) -> WhatIf:
    cfg = s.config
    K = kv_tokens if kv_tokens is not None else s.kv.tokens
    S = seats if seats is not None else s.seats
    f = fp2 or fp
    fit = fits(K, f)
    demand = max(ld.demand_peak, 1)
    run = running(demand, S, fit) if (fit is not None or S) else None
    L = max_len or cfg.max_model_len
    vc = (K / (math.ceil(L / s.kv.block_size) * s.kv.block_size)) if K and L else None
    gen = tp.tokens_per_s(run) if tp is not None and run else None
    return WhatIf(key, change, K, S, fit, run, vc, gen, kv_basis, assumptions or [], note, proposed)


def slo_seats(tp: Throughput | None, tokens_per_s: float | None) -> int | None:
    """The most sequences whose step time still gives each ``tokens_per_s`` (TPOT ≤ 1/tokens_per_s)."""
    if tp is None or not tokens_per_s or tp.b <= 0:
        return None  # (one batch size: the model takes throughput as flat beyond it — the pessimistic TPOT)
    n = (1.0 / tokens_per_s - tp.a) / tp.b
    return max(1, int(n))


def whatifs(s: Server, ld: Load, fp: Footprint | None, tp: Throughput | None, binding: str,
            tokens_per_s: float | None = None, *, pressed: bool = False) -> list[WhatIf]:
    """The baseline (as run) and one row per flag that changes capacity (``pressed``: ``fp`` was measured while
    the cache was full and requests waited)."""
    from .server import default_seats
    from .sizing import gpu_util_up

    cfg = s.config
    kv = s.kv
    B = kv.block_size
    out = [_row("as_run", "as run", s, ld, fp, tp, kv_basis=LOGGED, proposed=False,
                note="the model over the server's own facts; compare with the observed Running")]
    base = out[0]
    # --max-num-seqs: let the offered concurrency in, up to what the cache holds and the TPOT SLO allows
    if s.seats and ld.demand_peak > s.seats:
        want = ld.demand_peak if base.fits is None else min(ld.demand_peak, int(base.fits))
        cap = slo_seats(tp, tokens_per_s)
        why = ["the clients keep offering the same concurrency (closed loop)"]
        if cap is not None and cap < want:
            want = cap
            why.append(f"no more than the step-time model lets run at {tokens_per_s:g} tok/s per request (the TPOT SLO)")
        seen = max(tp.batch_sizes) if tp is not None and tp.batch_sizes else None
        if cap is None and seen and want > 2 * seen:
            # no batch cost visible (or one batch size): the model cannot tell where each request slows below the
            # TPOT SLO, so it does not extrapolate more than one doubling past the batches it saw
            want = 2 * seen
            why.append(f"at most twice the largest batch observed ({seen}): the step-time model sees no batch cost "
                       "up to it, so it cannot tell where the TPOT SLO breaks — raise in steps and re-measure")
        if want > s.seats:
            plateau = s.seats_basis == DERIVED and s.seats <= 1
            r = _row("max_num_seqs", f"--max-num-seqs {want}", s, ld, fp, tp, seats=want, assumptions=why,
                     proposed=not plateau)
            if plateau:
                r.note = (f"Running stays at {s.seats} and no --max-num-seqs is logged (vLLM's default is "
                          f"{default_seats(cfg, kv.total_memory_gib)[0]}): the plateau is not the seat limit — "
                          "something else admits one request at a time")
            elif tp is not None and base.gen_tps and r.gen_tps:
                gain = r.gen_tps / base.gen_tps - 1
                r.note = (f"aggregate generation {base.gen_tps:,.0f} → {r.gen_tps:,.0f} tok/s ({gain:+.0%}); each "
                          f"request's speed {base.gen_tps / max(base.running or 1, 1):,.0f} → "
                          f"{r.gen_tps / max(r.running or 1, 1):,.0f} tok/s")
                if gain < 0.2:
                    r.note += ": compute-bound, so queueing moves into the batch (TTFT falls, e2e does not)"
                if r.running and r.running > max(tp.batch_sizes):
                    r.assumptions.append(f"throughput extrapolated beyond the largest batch observed "
                                         f"({max(tp.batch_sizes)})")
            out.append(r)
    # KV-bound: admitting no more than the cache holds stops the preemptions (recompute) at the same throughput
    if (binding == "kv_cache" or pressed) and base.fits is not None and s.seats and 2 <= int(base.fits) < s.seats \
            and ld.running_max > 1:
        out.append(_row("max_num_seqs_kv", f"--max-num-seqs {int(base.fits)}", s, ld, fp, tp, seats=int(base.fits),
                        note="as many seats as the cache holds requests of this mix: no preemption, no recompute",
                        assumptions=["requests of this mix hold what they held while the cache was full"]))
    # the KV cache size
    if cfg.num_gpu_blocks_override and kv.blocks_unforced:
        k2 = kv.blocks_unforced * B
        out.append(_row("num_gpu_blocks_override", f"remove --num-gpu-blocks-override {cfg.num_gpu_blocks_override}",
                        s, ld, fp, tp, kv_tokens=k2, kv_basis=LOGGED,
                        assumptions=[f"vLLM sizes {kv.blocks_unforced:,} blocks as it logged before the override"]))
    elif cfg.cpu and kv.memory_gib and kv.bytes_per_token:
        need = (ld.demand_peak * fp.mean * kv.bytes_per_token / GIB) if fp is not None else 0.0
        g2 = max(math.floor(kv.memory_gib) + 1, math.ceil(need))
        if kv.total_memory_gib:
            g2 = min(g2, max(math.floor(kv.memory_gib) + 1, int(kv.total_memory_gib * 0.5)))
        k2 = int(g2 * GIB / kv.bytes_per_token) // B * B
        out.append(_row("kv_space", f"VLLM_CPU_KVCACHE_SPACE={g2}", s, ld, fp, tp, kv_tokens=k2,
                        assumptions=[f"{kv.bytes_per_token:,.0f} bytes per KV token (logged memory ÷ tokens)",
                                     "the node has that much free RAM"
                                     + (f" ({kv.total_memory_gib:g} GiB logged)" if kv.total_memory_gib else "")]))
    elif not cfg.cpu and kv.bytes_per_token and kv.total_memory_gib and cfg.gpu_memory_utilization:
        u = cfg.gpu_memory_utilization
        u2 = gpu_util_up(u)  # the value the diagnosis's fixes name
        if u2 is not None:
            k2 = int((kv.tokens or 0) + (u2 - u) * kv.total_memory_gib * GIB / kv.bytes_per_token) // B * B
            out.append(_row("gpu_memory_utilization", f"--gpu-memory-utilization {u2:g}", s, ld, fp, tp, kv_tokens=k2,
                            assumptions=[f"the extra {(u2 - u) * kv.total_memory_gib:.1f} GiB all goes to the KV cache",
                                         f"{kv.bytes_per_token:,.0f} bytes per KV token (logged memory ÷ tokens)"]))
    # --kv-cache-dtype fp8: one byte per element instead of two
    if not (cfg.kv_cache_dtype or "").startswith("fp8") and (cfg.dtype or "").lower() in ("bfloat16", "float16", "half",
                                                                                           "bf16", "fp16", ""):
        k2 = (kv.tokens or 0) * 2
        if k2:
            out.append(_row("kv_cache_dtype", "--kv-cache-dtype fp8" + ("_e5m2" if cfg.cpu else ""), s, ld, fp, tp,
                            kv_tokens=k2,
                            assumptions=["KV elements of 1 byte instead of 2 double the tokens in the same memory",
                                         "the attention backend supports an fp8 KV cache; accuracy may change slightly"]))
    # --max-model-len: vLLM's worst-case figure, not the observed mix
    if cfg.max_model_len and ld.lengths.prompt is not None:
        longest = (ld.lengths.prompt_p95 or ld.lengths.prompt) + max(ld.lengths.output_p95 or 0,
                                                                     ld.lengths.max_tokens_mean or 0, ld.lengths.output)
        half = cfg.max_model_len // 2
        if longest < half * 0.9 and half >= B:
            out.append(_row("max_model_len", f"--max-model-len {half}", s, ld, fp, tp, max_len=half,
                            assumptions=[f"the longest requests seen (~{longest:,.0f} tokens) still fit"],
                            note="raises vLLM's worst-case concurrency only; the observed mix fits the same"))
    # prefix caching
    hit = next((f.value for f in ld.figures if f.key == "prefix_cache_hit_rate"), None)
    if cfg.enable_prefix_caching is False:
        out.append(WhatIf("prefix_caching", "--enable-prefix-caching", kv.tokens, s.seats, None, None,
                          assumptions=["a hit rate h frees h × prompt tokens per request: fits = capacity ÷ "
                                       "(footprint − h × prompt)"],
                          note="not predictable from the log: the hit rate depends on prefixes shared between requests"))
    elif hit and fp is not None and ld.lengths.prompt:
        from .model import footprint

        f2 = footprint(ld, B, hit_rate=float(hit))
        r = _row("prefix_caching", "prefix caching (on)", s, ld, fp, tp, fp2=f2, proposed=False,
                 assumptions=[f"the measured hit rate {float(hit):.0%} holds"],
                 note="already on" if cfg.enable_prefix_caching else "on by default (V1)")
        out.append(r)
    return out
