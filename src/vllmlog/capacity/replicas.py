"""Replicas for a target rate: what one replica sustains while the SLO holds (Little's law over the latency
at that concurrency), and how many replicas a target request rate needs with headroom."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .figure import LOGGED, MODEL, Figure

if TYPE_CHECKING:  # pragma: no cover
    from ..numbers import SloTargets
    from .load import Load
    from .model import Throughput


@dataclass
class Replicas:
    """Per-replica capacity and the replica count for a target."""

    per_replica: Figure | None = None
    """Requests/s one replica sustains within the SLO (model)."""
    saturation: Figure | None = None
    """Requests/s one replica serves at its operating point with the queue never empty (model)."""
    needed: int | None = None
    """Replicas that just hold the SLO at the target rate (no extra headroom)."""
    observed: Figure | None = None
    """Requests/s one replica carried in this log (Little's law: mean Running ÷ mean e2e)."""
    concurrency: float | None = None
    """Running at which the SLO still holds (the operating point)."""
    target_rate: float | None = None
    headroom: float = 0.1
    replicas: int | None = None
    limit: str = ""
    """What caps the operating point: seats, KV cache, the TPOT / e2e SLO."""
    assumptions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"per_replica_rate": self.per_replica.to_dict() if self.per_replica else None,
                "saturation_rate": self.saturation.to_dict() if self.saturation else None, "needed": self.needed,
                "observed_rate": self.observed.to_dict() if self.observed else None,
                "operating_concurrency": self.concurrency, "limited_by": self.limit,
                "target_rate": self.target_rate, "headroom": self.headroom, "replicas": self.replicas,
                "assumptions": list(self.assumptions)}


def plan(ld: Load, tp: Throughput | None, seats: int | None, fit: float | None, slo: SloTargets,
         target: float | None, headroom: float = 0.1) -> Replicas:
    """What one replica sustains and how many a target rate needs."""
    R = Replicas(target_rate=target, headroom=headroom)
    xs_run = [f.value for f in ld.figures if f.key == "concurrency_p50"]
    if ld.e2e_mean_s and ld.running_max:
        # observed: Little's law over the requests in the server (Running + Waiting of the busy intervals) and the
        # end-to-end latency, which includes the time in the queue (Running alone pairs with the service time)
        in_system = xs_run[0] if xs_run else None
        if in_system:
            lam = in_system / ld.e2e_mean_s
            R.observed = Figure("observed_rate", "carried per replica (Little's law)", lam, "req/s", LOGGED,
                                f"Running + Waiting {in_system:g} (busy median) ÷ mean e2e {ld.e2e_mean_s:.2f} s "
                                f"({ld.e2e_basis})")
    O = ld.lengths.output
    if tp is None or not O:
        R.assumptions.append("no step-time model or output length: the per-replica capacity cannot be computed")
        return R
    caps: list[tuple[float, str]] = []
    if seats:
        caps.append((float(seats), f"--max-num-seqs {seats}"))
    if fit is not None:
        caps.append((math.floor(fit), "KV cache"))
    # TPOT SLO: step time ≤ 1 / tokens_per_s
    if slo.tokens_per_s and tp.b > 0:
        n = (1.0 / slo.tokens_per_s - tp.a) / tp.b
        caps.append((max(1.0, math.floor(n)), f"TPOT SLO ({slo.tokens_per_s:g} tok/s per request)"))
    ttft0 = ld.ttft_p50_s or 0.0
    if slo.e2e_s and tp.b > 0:
        o95 = ld.lengths.output_p95 or O
        n = ((slo.e2e_s - ttft0) / o95 - tp.a) / tp.b
        caps.append((max(1.0, math.floor(n)), f"e2e SLO ({slo.e2e_s:g} s at p95 output {o95:,.0f} tokens)"))
    if not caps:
        caps.append((float(max(ld.running_max, 1)), "the Running observed"))
    n, R.limit = min(caps)
    R.concurrency = n
    w = ttft0 + O * tp.step_s(n)
    if w <= 0:
        R.assumptions.append("the step-time model gives no latency: the per-replica capacity cannot be computed")
        return R
    lam = n / w
    notes = ["arrivals spread evenly over replicas", "the length mix of this log",
             "latency at the operating point from the fitted step time"
             + ("; TTFT at its observed median" if ld.ttft_p50_s is not None else "; TTFT not measured (taken as 0)")]
    top = max(tp.batch_sizes)
    if n > top:
        notes.append(f"extrapolated: Running {n:g} is beyond the largest batch observed ({top})")
    R.saturation = Figure("saturation_rate", "one replica at saturation", lam, "req/s", MODEL,
                          f"Little's law: Running {n:g} ({R.limit}) ÷ latency {w:.2f} s (TTFT {ttft0:.2f} s + "
                          f"{O:,.0f} tokens × {tp.step_s(n) * 1000:.1f} ms step)", tuple(notes))
    # queueing: requests wait for a seat; the TTFT SLO bounds how close to saturation a replica may run
    budget = slo.ttft_s - ttft0 if slo.ttft_s else None
    if budget is not None and budget > 0 and n >= 1:
        lam_slo = slo_rate(int(n), 1.0 / w, budget, 0.95)
        how = (f"Erlang C over {int(n)} seats of {w:.2f} s each: p95 wait for a seat ≤ {budget:.2f} s "
               f"(TTFT SLO {slo.ttft_s:g} s − TTFT {ttft0:.2f} s); utilisation {lam_slo / lam:.0%}")
    else:
        lam_slo, how = lam, "no TTFT budget: at saturation"
    R.per_replica = Figure("per_replica_rate", "one replica sustains within the SLO", lam_slo, "req/s", MODEL, how,
                           ("Poisson arrivals; each request holds a seat for the latency at the operating point",))
    if lam_slo <= 0:
        R.assumptions.append(f"the TTFT SLO cannot be held even at no load with {int(n)} seat(s) of {w:.2f} s: "
                             "no replica count will hold it")
        return R
    if target:
        R.needed = max(1, math.ceil(target / lam_slo - 1e-9))
        R.replicas = max(R.needed, math.ceil(target / (lam_slo * (1 - headroom)) - 1e-9))
        if headroom:
            R.assumptions.append(f"{headroom:.0%} extra headroom on top of the SLO's: replicas run at ≤ "
                                 f"{1 - headroom:.0%} of the rate that just holds it")
    return R


def erlang_c(c: int, load: float) -> float:
    """Probability that an arrival waits (M/M/c with offered load ``load`` = λ/μ < c)."""
    if load >= c:
        return 1.0
    # iterative Erlang B, then C
    b = 1.0
    for k in range(1, c + 1):
        b = load * b / (k + load * b)
    rho = load / c
    return b / (1 - rho + rho * b)


def slo_rate(c: int, mu: float, t: float, q: float = 0.95) -> float:
    """The largest arrival rate at which the ``q`` quantile of the wait for one of ``c`` seats (service rate
    ``mu`` each) stays ≤ ``t``: P(W > t) = C(c, λ/μ)·exp(−(cμ − λ)t) ≤ 1 − q."""
    lo, hi = 0.0, c * mu
    for _ in range(60):
        mid = (lo + hi) / 2
        p = erlang_c(c, mid / mu) * math.exp(-(c * mu - mid) * t)
        if p <= 1 - q:
            lo = mid
        else:
            hi = mid
    return lo
