"""The capacity model: what one request of the observed mix holds in the KV cache, how many fit, and how the
engine's token throughput grows with the batch (fitted on the run's own stats lines)."""

from __future__ import annotations

import math
import os
import sys
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from .figure import DERIVED, MODEL, Figure

try:  # the compiled objective (same IEEE operations in the same order as ``_sse_py``); pooled fits call it ~10^5 times
    from .._speedups import reverse_sse as _c_sse
except ImportError:  # pragma: no cover - no C compiler at install time
    _c_sse = None
if sys.version_info >= (3, 12) or os.environ.get("VLLMLOG_PURE", "").strip().lower() not in ("", "0", "false", "no", "off"):
    _c_sse = None  # sum() of floats compensates rounding from 3.12 on; the kernel adds left to right as 3.11 does

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


def measured_footprint(load: Load, kv_tokens: int | None, block_size: int) -> Footprint | None:
    """KV tokens per running request as the cache's own usage shows it (usage × capacity ÷ Running, median over
    the busy intervals): the footprint when the log states no request lengths, or when the lengths estimated
    from the stats lines contradict it (an excerpt whose throughput belongs to requests it does not show)."""
    per = load.kv_per_running
    if not kv_tokens or not per or per <= 0:
        return None
    res = 0.0005 * kv_tokens / max(1, load.running_max)  # usage is printed to 0.1 %
    if res >= 0.25 * per:
        return None
    fig = Figure("kv_tokens_per_request_measured", "KV tokens per request (the cache's usage)", per, "tokens", DERIVED,
                 f"KV usage × {kv_tokens:,} tokens ÷ Running, median of the busy intervals",
                 ("requests hold on average what the running ones held when the stats lines were printed",))
    return Footprint(per, math.ceil(per / block_size) * block_size, fig)


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
    """Step time ``s(n) = a + b·n`` seconds per engine step with ``n`` running sequences (the TPOT they see), so
    the aggregate generation throughput is ``T(n) = n / s(n)`` tokens/s, saturating at ``1/b``. ``b`` carries
    the prefill of this log's prompts (their cost per generated token at its prompt/output ratio).

    Fitted on the run's own stats lines: each busy interval gives its generation throughput ``G`` (averaged over
    the interval: precise) and Running (an instant at each end: noisy), and ``n = a·G / (1 − b·G)`` is fitted
    with Running as the dependent variable — the noisy one, so the fit is not attenuated."""

    a: float
    b: float
    points: int
    batch_sizes: tuple[int, ...]
    fit_error: float | None
    """Root-mean-square error of the fitted Running, relative to the mean Running of the fitted intervals."""
    runs: int = 1
    """Server runs whose intervals were fitted (> 1: pooled over runs of the same model and device)."""

    def step_s(self, n: float) -> float:
        return self.a + self.b * n

    def tokens_per_s(self, n: float) -> float:
        s = self.step_s(n)
        return n / s if n > 0 and s > 0 else 0.0

    @property
    def saturation(self) -> float | None:
        """The aggregate generated tokens/s the batch tends to (compute bound)."""
        return 1.0 / self.b if self.b > 0 else None

    def near_saturation(self, n: float, share: float = 0.8) -> bool:
        """``T(n)`` ≥ ``share`` of the saturation throughput: more sequences add little throughput."""
        sat = self.saturation
        return sat is not None and self.tokens_per_s(n) >= share * sat

    def figure(self) -> Figure:
        sat = self.saturation
        return Figure("decode_step_model", "step time (model)", f"{self.a * 1000:.2f} ms + {self.b * 1000:.3f} ms × Running",
                      "", MODEL,
                      f"fitted on {self.points} busy stats intervals"
                      + (f" of {self.runs} runs of this model and device" if self.runs > 1 else "") + " (Running "
                      f"{_sizes(self.batch_sizes)})"
                      + (f"; error {self.fit_error:.0%} of Running" if self.fit_error is not None else "")
                      + (f"; saturates at {sat:,.0f} generated tok/s" if sat else ""),
                      ("the engine steps back to back while requests run",
                       "prefill is folded into the per-sequence cost at this log's prompt/output ratio")
                      + (("one batch size seen: throughput assumed flat beyond it (compute-bound)",)
                         if len(self.batch_sizes) < 2 else ()))


def _sizes(xs: Sequence[int]) -> str:
    return ", ".join(map(str, xs)) if len(xs) <= 6 else f"{xs[0]}–{xs[-1]}, {len(xs)} sizes"


def _sse_py(pts: list[tuple[float, float]], b: float) -> tuple[float, float]:
    z = [g / (1 - b * g) for _, g in pts]
    zz = sum(v * v for v in z)
    a = sum(n * v for (n, _), v in zip(pts, z)) / zz if zz else 0.0
    return sum((n - a * v) ** 2 for (n, _), v in zip(pts, z)), a


def _reverse_fit(pts: list[tuple[float, float]]) -> tuple[float, float, float] | None:
    """Least squares of ``n ≈ a·G / (1 − b·G)`` over (n, G): b by golden-section search, a in closed form."""
    gmax = max(g for _, g in pts)
    if _c_sse is not None:
        nbuf = array("d", [n for n, _ in pts])
        gbuf = array("d", [g for _, g in pts])

        def sse(b: float) -> tuple[float, float]:
            got = _c_sse(nbuf, gbuf, b)
            return got if got is not None else _sse_py(pts, b)
    else:
        def sse(b: float) -> tuple[float, float]:
            return _sse_py(pts, b)

    lo, hi = 0.0, 0.999 / gmax
    phi = (5 ** 0.5 - 1) / 2
    x1, x2 = hi - phi * (hi - lo), lo + phi * (hi - lo)
    f1, f2 = sse(x1)[0], sse(x2)[0]
    for _ in range(80):
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - phi * (hi - lo)
            f1 = sse(x1)[0]
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + phi * (hi - lo)
            f2 = sse(x2)[0]
    b = (lo + hi) / 2
    err, a = sse(b)
    if sse(0.0)[0] <= err:  # no batch cost visible: the step time does not grow with Running
        b, (err, a) = 0.0, sse(0.0)
    return (a, b, err) if a > 0 else None


def fit_throughput(xs: Sequence[Interval], pooled: Sequence[Sequence[Interval]] = ()) -> Throughput | None:
    """Fit the step-time model over the busy intervals (Running > 0 at both ends, tokens generated, not stuck) of
    this run and of ``pooled`` runs (same model and device); the interval's Running is the mean of its two ends.
    With one batch size, throughput is taken as flat beyond it (compute-bound)."""
    pts: list[tuple[float, float]] = []
    for seq in (xs, *pooled):
        prev = None
        for x in seq:
            if prev is not None and prev.running > 0 and x.running > 0 and x.gen_tps > 0 and not x.stuck:
                pts.append(((prev.running + x.running) / 2, x.gen_tps))
            prev = x
    runs = 1 + sum(1 for p in pooled if p)
    sizes = tuple(sorted({round(n) for n, _ in pts}))
    if not pts:
        return None
    if len(sizes) < 2:
        n0 = sum(n for n, _ in pts) / len(pts)
        g0 = sum(g for _, g in pts) / len(pts)
        s0 = n0 / g0
        return Throughput(0.0, s0 / n0, len(pts), sizes, None, runs) if n0 > 1 else \
            Throughput(s0, 0.0, len(pts), sizes, None, runs)
    gs = [g for _, g in pts]
    ns = [n for n, _ in pts]
    if max(gs) < 1.3 * min(gs) and max(ns) >= 1.3 * min(ns):
        # throughput flat while Running varies: compute-bound, T(n) = mean G (step time proportional to n)
        g0 = sum(gs) / len(gs)
        err = sum((g - g0) ** 2 for g in gs) / len(gs)
        return Throughput(0.0, 1.0 / g0, len(pts), sizes, (err ** 0.5) / g0, runs)
    got = _reverse_fit(pts)
    if got is None:
        return None
    a, b, err = got
    mean_n = sum(n for n, _ in pts) / len(pts)
    return Throughput(a, b, len(pts), sizes, (err / len(pts)) ** 0.5 / mean_n, runs)
