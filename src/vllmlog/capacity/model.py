"""The capacity model: what one request of the observed mix holds in the KV cache, how many fit, and how the
engine's token throughput grows with the batch (fitted on the run's own stats lines)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from .figure import DERIVED, MODEL, Figure

if TYPE_CHECKING:  # pragma: no cover
    from ..state import Interval
    from .load import Load


@dataclass(frozen=True)
class Footprint:
    """KV tokens one request of the observed mix holds."""

    mean: float
    """Averaged over the request's life: its prompt plus half its output, plus half a block of rounding."""
    peak: float
    """At its last token: prompt + output rounded up to whole blocks."""
    figure: Figure


def footprint(load: Load, block_size: int, hit_rate: float = 0.0) -> Footprint | None:
    """The KV footprint of a request of mean length (``hit_rate``: share of prompt blocks found cached)."""
    L = load.lengths
    if L.prompt is None or L.output is None:
        return None
    p = L.prompt * (1.0 - hit_rate)
    mean = p + L.output / 2 + block_size / 2
    peak = math.ceil((L.prompt + L.output) / block_size) * block_size
    fig = Figure("kv_tokens_per_request", "KV tokens per request (model)", mean, "tokens", MODEL,
                 f"prompt {L.prompt:,.0f} + output {L.output:,.0f} ÷ 2 + block {block_size} ÷ 2 ({L.basis} lengths)",
                 ("a request grows one token per step from its prompt to its output: on average it holds half its output",
                  "blocks are allocated as the request grows (V1): half a block of rounding on average",
                  "no prefix blocks shared between requests" if not hit_rate else
                  f"{hit_rate:.0%} of prompt tokens found in the prefix cache"))
    return Footprint(mean, peak, fig)


def pressure_footprint(xs: Sequence[Interval], kv_tokens: int | None) -> Footprint | None:
    """KV tokens per running request while the cache was full and requests waited (usage × capacity ÷ Running,
    median over those intervals): what requests of this mix really hold when the cache binds — more than the
    lifetime average, because vLLM preempts the newest requests and the survivors are the longer ones."""
    if not kv_tokens:
        return None
    per = sorted(x.kv * kv_tokens / x.running for x in xs
                 if x.kv is not None and x.kv >= 0.9 and x.running > 0 and (x.waiting > 0 or x.preemptions))
    if not per:
        return None
    n = len(per)
    med = per[n // 2] if n % 2 else (per[n // 2 - 1] + per[n // 2]) / 2
    fig = Figure("kv_tokens_per_request_bound", "KV tokens per request while the cache binds", med, "tokens",
                 DERIVED, f"KV usage × {kv_tokens:,} tokens ÷ Running, median of {n} intervals with the cache "
                 "≥ 90 % full and requests waiting",
                 ("requests of this mix hold as much in a cache of another size when it binds there too",))
    return Footprint(med, med, fig)


def fits(kv_tokens: float | None, fp: Footprint | None) -> float | None:
    """Requests of the mix the cache holds at once (steady state)."""
    if not kv_tokens or fp is None or fp.mean <= 0:
        return None
    return kv_tokens / fp.mean


def running(demand: float, seats: float | None, fit: float | None) -> float:
    """Running for an offered concurrency: the smallest of the demand, the seats and what the cache holds."""
    out = float(demand)
    if seats:
        out = min(out, seats)
    if fit is not None:
        out = min(out, fit)
    return out


@dataclass(frozen=True)
class Throughput:
    """Step time ``s(n) = a + b·n`` seconds per decode step of ``n`` sequences, fitted on (Running, generation
    throughput) of busy stats intervals; aggregate throughput ``T(n) = n / s(n)`` saturates at ``1/b``."""

    a: float
    b: float
    points: int
    batch_sizes: tuple[int, ...]
    r2: float | None
    runs: int = 1
    """Server runs whose intervals were fitted (> 1: pooled over runs of the same model and device)."""

    def step_s(self, n: float) -> float:
        return self.a + self.b * n

    def tokens_per_s(self, n: float) -> float:
        s = self.step_s(n)
        return n / s if n > 0 and s > 0 else 0.0

    @property
    def saturation(self) -> float | None:
        """The aggregate tokens/s the batch tends to (compute bound)."""
        return 1.0 / self.b if self.b > 0 else None

    def near_saturation(self, n: float, share: float = 0.8) -> bool:
        """``T(n)`` ≥ ``share`` of the saturation throughput: more sequences add little throughput."""
        sat = self.saturation
        return sat is not None and self.tokens_per_s(n) >= share * sat

    def figure(self) -> Figure:
        sat = self.saturation
        return Figure("decode_step_model", "decode step time (model)",
                      f"{self.a * 1000:.2f} ms + {self.b * 1000:.3f} ms × Running", "", MODEL,
                      f"least squares over {self.points} busy stats intervals"
                      + (f" of {self.runs} runs of this model and device" if self.runs > 1 else "") + " (Running "
                      f"{', '.join(map(str, self.batch_sizes))})" + (f"; saturates at {sat:,.0f} tok/s" if sat else ""),
                      ("stats lines average throughput over the interval; Running is the instant at its end",
                       "prefill work in the same interval is ignored")
                      + (("one batch size seen: throughput assumed flat beyond it (compute-bound)",)
                         if len(self.batch_sizes) < 2 else ()))


def fit_throughput(xs: Sequence[Interval], pooled: Sequence[Sequence[Interval]] = ()) -> Throughput | None:
    """Fit ``n/T = a + b·n`` over busy intervals (Running ≥ 1, tokens generated, no big Running change around it),
    of this run and of ``pooled`` runs (same model and device).

    Needs two distinct batch sizes; a and b are kept ≥ 0 (a negative intercept means throughput is flat: b alone)."""
    pts: list[tuple[float, float]] = []
    for seq in (xs, *pooled):
        prev = None
        for x in seq:
            n, t = x.running, x.gen_tps
            steady = prev is None or prev.running == 0 or abs(prev.running - n) <= max(2, 0.34 * n)
            if n >= 1 and t > 0 and not x.stuck and steady:
                pts.append((float(n), n / t))
            prev = x
    runs = 1 + sum(1 for p in pooled if p)
    sizes = sorted({int(n) for n, _ in pts})
    if len(pts) < 2:
        return None
    if len(sizes) < 2:
        # one batch size: the step time is known at that size only; keep it as a flat (compute-bound) model
        n0 = sizes[0]
        s0 = sum(s for _, s in pts) / len(pts)
        return Throughput(0.0, s0 / n0, len(pts), tuple(sizes), None, runs) if n0 > 1 else \
            Throughput(s0, 0.0, len(pts), tuple(sizes), None, runs)
    mx = sum(n for n, _ in pts) / len(pts)
    my = sum(s for _, s in pts) / len(pts)
    sxx = sum((n - mx) ** 2 for n, _ in pts)
    sxy = sum((n - mx) * (s - my) for n, s in pts)
    b = sxy / sxx if sxx else 0.0
    a = my - b * mx
    if a < 0:  # flat throughput: through the origin
        a = 0.0
        b = sum(n * s for n, s in pts) / sum(n * n for n, _ in pts)
    if b < 0:  # faster per step with more sequences: noise; no batch cost visible
        b = 0.0
        a = my
    if a <= 0 and b <= 0:
        return None
    ss = sum((s - my) ** 2 for _, s in pts)
    res = sum((s - (a + b * n)) ** 2 for n, s in pts)
    return Throughput(a, b, len(pts), tuple(sizes), (1 - res / ss) if ss > 0 else None, runs)

