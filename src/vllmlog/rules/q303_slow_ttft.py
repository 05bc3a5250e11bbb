"""Q303 slow-ttft."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Evidence, Finding, Rule, Severity
from .registry import register


@register
class SlowTtft(Rule):
    """## What it detects
    Time to first token above target (handbook: 1 s): logged TTFT (handbook ``finished`` lines,
    journeys) above the threshold for a share of requests, or stats lines showing a prefill that runs
    for several intervals with no token generated (Running > 0, prompt throughput > 0, generation
    0.0 tokens/s) — e.g. chunked prefill with a tiny ``max_num_batched_tokens``.
    ## Why it matters
    Users wait for the first word; streaming clients time out before anything arrives.
    ## How to fix
    Raise ``--max-num-batched-tokens`` so long prompts prefill in few chunks (or disable chunked prefill
    for latency-sensitive long prompts), reduce queueing (Q301), enable prefix caching for shared
    prefixes, shorten prompts."""

    code, slug, category, severity = "Q303", "slow-ttft", "slow_throughput", Severity.WARNING
    title = "Time to first token above target"
    explains = ("slow", "aborting", "queueing")
    needs_symptom = True
    options: dict[str, Any] = {"max_ttft_s": 1.0, "min_prefill_intervals": 3, "min_count": 3, "min_fraction": 0.1}
    consequence_of = ("kv_cache_pressure_preemption", "engine_hang", "queue_backlog")

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        thr = float(options["max_ttft_s"])
        for v in u.servers(run):
            stretches = []
            for samples in v.by_engine().values() if not u.pooling(v) else ():  # pooling: no token by design
                for st in u.stretches(samples, lambda s: (s.running or 0) > 0 and (s.prompt_throughput or 0) > 0
                                      and (s.generation_throughput or 0) == 0):
                    if len(st) >= int(options["min_prefill_intervals"]):
                        stretches.append(st)
            js = [j for j in v.journeys if u.jval(j, "ttft_s") is not None]
            slow_j = [j for j in js if (u.jval(j, "ttft_s") or 0) > thr]
            j_slow = len(slow_j) >= int(options["min_count"]) and len(slow_j) / max(len(js), 1) >= float(options["min_fraction"])
            if not stretches and not j_slow:
                continue
            evid: list[Evidence | None] = []
            parts = []
            times = []
            cfg = v.of("chunked_prefill")
            budget = u.num(cfg[0].fields.get("max_num_batched_tokens")) if cfg else u.num(u.arg(v, "max_num_batched_tokens"))
            if stretches:
                st = max(stretches, key=len)
                dur = u.duration_s(st) + u.interval_s(st)
                rate = sum(s.prompt_throughput or 0 for s in st) / len(st)
                active = [j for j in v.in_file.journeys if j.arrival_ts and st[0].ts
                          and j.arrival_ts <= st[0].ts and (j.finish_ts is None or j.finish_ts >= st[-1].ts)]
                evid += [u.sample_ev(s) for s in u.pick(st, u.interval_s(st))]
                if cfg:
                    evid.insert(0, u.first(cfg[0]))
                evid += [Evidence(j.file, j.first_line, "") for j in active[:2] if j.first_line]
                parts.append(f"prefill ran ~{u.secs(dur)} with no token generated ({len(st)} intervals at "
                             f"~{rate:.0f} prompt tokens/s, 0.0 generation tokens/s)")
                if budget:
                    parts.append(f"chunked-prefill budget max_num_batched_tokens={int(budget)}")
                if len(stretches) > 1:
                    parts[-1] += f", the longest of {len(stretches)} such stretches"
                times += [s.ts for x in stretches for s in x if s.ts]  # every stretch: the first began the trouble
            if j_slow:
                slow_j.sort(key=lambda j: -j.ttft_s)
                evid += [Evidence(j.file, j.last_line, "") for j in slow_j[:3] if j.last_line]
                parts.append(f"{len(slow_j)}/{len(js)} requests with TTFT > {thr:g} s (max {slow_j[0].ttft_s:.1f} s)")
                times += [j.finish_ts for j in slow_j if j.finish_ts]
            times = [t for t in times if t]
            rem = []
            if budget and budget < 4096:
                rem.append(f"raise `--max-num-batched-tokens` from {int(budget)} to 8192–16384 so long prompts prefill in "
                           "a few large chunks, or disable chunked prefill (`--no-enable-chunked-prefill`) for "
                           "latency-sensitive long-prompt traffic")
            else:
                rem.append("raise `--max-num-batched-tokens` so prompts prefill in fewer steps")
            rem.append("reduce queueing (see Q301), enable prefix caching for shared prefixes, shorten prompts")
            yield self.finding(
                "Time to first token above target: " + "; ".join(parts) + ".", evidence=u.dedupe(evid),
                first_seen=min(times) if times else None, last_seen=max(times) if times else None,
                count=len(slow_j) or sum(len(s) for s in stretches), file=v.file, server=v.index,
                process=stretches[0][0].process if stretches else None,
                root_cause=("Prefill of long prompts proceeds in small chunks (max_num_batched_tokens), so the first token "
                            "waits for many sequential steps." if budget and budget < 4096 else
                            "Prefill (or queueing before it) takes longer than the TTFT target."),
                remediation="; ".join(rem) + ".",
                data={"max_ttft_s": thr, "max_num_batched_tokens": budget,
                      "prefill_only_intervals": sum(len(s) for s in stretches)},
            )

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """Prefill that runs for intervals with nothing generated holds up every first token — and, while no seat
        or KV limit binds, it is what keeps the waiting requests waiting (the prefill is the bottleneck)."""
        if not finding.data.get("prefill_only_intervals"):
            return None
        if symptom.kind == "slow" and symptom.data.get("prefill_s") is not None:
            return True
        if symptom.kind == "queueing" and symptom.data.get("binding") in (None, "unknown"):
            return True
        return None
