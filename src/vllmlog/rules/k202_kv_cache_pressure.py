"""K202 kv-cache-pressure."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from ..capacity import sizing
from ..state.config import server_config
from ..state.model import KV_FULL
from . import _util as u
from . import advice
from .base import Evidence, Finding, Rule, Severity
from .registry import register


@register
class KvCachePressure(Rule):
    """## What it detects
    KV-cache usage at or above the caution threshold (80 %) for a sustained time (a minute in all, or
    while the queue does not drain — a short burst that drains is reported as info), and the
    preemptions that come with it: V0's ``Sequence group … is preempted by PreemptionMode.RECOMPUTE``
    warnings, a ``Preemptions: N`` stats field, the handbook's per-step KV usage — and V1's *silent*
    preemption, which logs nothing: KV ~100 % while Running drops and Waiting grows, with prompt
    throughput from re-prefilled requests.
    ## Why it matters
    New requests queue and running ones are evicted and recomputed; throughput collapses (thrashing),
    TTFT and end-to-end latency climb.
    ## How to fix
    Admit fewer concurrent sequences (``--max-num-seqs``, client-side concurrency), give the cache more
    memory (``--gpu-memory-utilization``, more GPUs, ``--kv-cache-dtype fp8``), shorten
    ``max_tokens`` / ``--max-model-len``; enable prefix caching when prompts share prefixes."""

    code, slug, category, severity = "K202", "kv-cache-pressure", "kv_cache_pressure_preemption", Severity.WARNING
    title = "KV cache near full: preemption / recompute"
    explains = ("thrashing", "queueing", "slow", "aborting")
    needs_symptom = True
    options: dict[str, Any] = {"kv_caution": 0.80, "kv_critical": 0.95, "min_intervals": 2, "min_decode_seconds": 5,
                               "min_sustained_s": 60}

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """Preemption explains a queue only when the cache, not the seat count, keeps requests out."""
        d = finding.data
        preempting = bool(d.get("preemption_lines") or d.get("silent_preemption") or d.get("cumulative_preemptions")
                          or finding.title == self.title)
        if symptom.kind == "thrashing":
            return True
        if symptom.kind == "queueing":
            bind = symptom.data.get("binding")
            if bind == "max_num_seqs" and not preempting:
                return False
            if bind == "unknown" and not preempting and (symptom.data.get("kv_peak") or 0) < KV_FULL:
                return False  # seats free and room in the cache for more: something else holds the waiters back
            return True if bind == "kv_cache" else None
        if symptom.kind == "aborting":
            return None  # preemption slows requests down; why clients then give up (their timeout) is their side's
        return True if preempting else None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        caution, critical = float(options["kv_caution"]), float(options["kv_critical"])
        for v in u.servers(run):
            pre = [e for e in v.of("preemption") if not v.in_shutdown(e.line)]
            alloc = [e for e in v.of("block_allocation_failed") if not v.in_shutdown(e.line)]
            episodes: list[tuple[list, bool]] = []
            sustained_any = False
            arrivals = v.in_file.arrivals()
            for samples in v.by_engine().values():
                # recurring bursts add up: a minute above the caution level in all is sustained pressure
                # (and a cache at the critical level more than once: there V1 preempts without logging it)
                n_hi = sum(1 for s in samples if (s.kv_cache_usage or 0) >= caution)
                n_crit = sum(1 for s in samples if (s.kv_cache_usage or 0) >= critical)
                if n_hi >= int(options["min_intervals"]) and (
                        n_hi * u.interval_s(samples) >= float(options["min_sustained_s"]) or n_crit >= int(options["min_intervals"])):
                    sustained_any = True
                for st in u.stretches(samples, lambda s: (s.kv_cache_usage or 0) >= caution or (s.preemptions or 0) > 0):
                    silent = self._silent(st, samples, critical) or self._reprefill(st, arrivals, critical)
                    field_pre = any((s.preemptions or 0) > 0 or (s.swapped or 0) > 0 for s in st)
                    if len(st) >= int(options["min_intervals"]) or silent or field_pre or pre:
                        episodes.append((st, silent or field_pre))
                        if self._sustained(st, samples, caution, float(options["min_sustained_s"])):
                            sustained_any = True
            hb = v.in_file.decode_kv_at_least(caution)
            if not episodes and not pre and len(hb) < int(options["min_decode_seconds"]):
                continue
            samples_all = [s for st, _ in episodes for s in st]
            peak = max([s.kv_cache_usage or 0 for s in samples_all] + [d.kv_max for d in hb] + [0.0])
            silent_any = any(flag for _, flag in episodes)
            cum = max((int(u.num(e.fields.get("cumulative_preemptions")) or 0) for e in pre), default=0)
            field_total = sum(s.preemptions or 0 for s in samples_all)
            swapped = max((s.swapped or 0 for s in samples_all), default=0)
            times = [s.ts for s in samples_all if s.ts] + [e.ts for e in pre if e.ts] + [d.ts for d in hb]
            if not times:
                continue
            first, last = min(times), max(times)
            running = [s.running for s in samples_all if s.running is not None]
            waiting = [s.waiting for s in samples_all if s.waiting is not None]
            interval = u.interval_s(samples_all)
            evid: list[Evidence | None] = []
            crit = [s for s in samples_all if (s.kv_cache_usage or 0) >= critical] or samples_all
            evid += [u.sample_ev(s) for s in u.pick(crit, interval, limit=6)]
            evid += [u.first(e) for e in pre[:10]]
            evid += [u.first(e) for e in alloc[:3]]
            evid += [u.sample_ev(s) for s in u.pick(samples_all, interval, limit=6)]
            if hb:
                evid.append(Evidence(hb[0].file, hb[0].first_line, ""))
            cfg = v.of("kv_cache_blocks", "kv_cache_size")
            if cfg:
                evid.append(u.first(cfg[0]))
            kv_tokens = u.num(u.arg(v, "kv_cache_tokens"))
            if kv_tokens is None and u.arg(v, "num_gpu_blocks"):
                kv_tokens = (u.num(u.arg(v, "num_gpu_blocks")) or 0) * 16
            max_seqs = u.arg(v, "max_num_seqs")
            n_high = sum(1 for s in samples_all if (s.kv_cache_usage or 0) >= caution) or len(hb)
            if not samples_all and not hb:
                peak = max((x.kv_cache_usage or 0 for x in v.stats), default=0.0)
            parts = [f"KV-cache usage reached {u.pct(peak)}" + (f" (≥ {u.pct(caution)} for {n_high} "
                     f"{'stats intervals' if samples_all else 'seconds'})" if n_high else "")]
            if pre:
                parts.append(f"{len(pre)} preemption warnings" + (f" (cumulative {cum})" if cum else ""))
            if field_total:
                parts.append(f"{field_total} preemptions in the stats lines")
            if alloc:
                parts.append(f"{len(alloc)} KV-block allocations failed")
            if swapped:
                parts.append(f"up to {swapped} sequences swapped to CPU")
            if silent_any and not pre and not field_total:
                parts.append("Running fell while Waiting stayed > 0 at a full cache (silent V1 preemption)")
            if running and waiting:
                parts.append(f"Running {min(running)}–{max(running)}, Waiting up to {max(waiting)}")
            preempting = bool(pre or field_total or silent_any or swapped)
            # V0 logs the 1st, 51st, … preemption: one line with counter 1 and no sustained pressure is a blip
            lone_preemption = (len(pre) == 1 and cum <= 1 and not field_total and not silent_any and not swapped
                               and not alloc and not any(len(st) >= int(options["min_intervals"]) for st, _ in episodes
                                                         if all((s.kv_cache_usage or 0) >= caution for s in st))
                               and len(hb) < int(options["min_decode_seconds"]))
            # a high cache alone is a warning only when the pressure lasts: a burst that fills the cache for a
            # couple of intervals while the queue drains (no preemption) is how a well-sized server absorbs load
            sustained = sustained_any or len(hb) >= float(options["min_sustained_s"])  # handbook: seconds above caution
            floor_run = min(running) if running else None
            cfg = server_config(v)
            rem = []
            sz = sizing.for_view(run, v)
            if cfg.num_gpu_blocks_override:
                rem.append(advice.more_kv_memory(cfg, sz))
            seats = advice.fewer_seqs(cfg, floor_run if preempting else max(running or [0]) or None,
                                      f"Running fell to {floor_run} under preemption" if preempting and floor_run else "",
                                      sz)
            if seats:
                rem.append(seats)
            if not cfg.num_gpu_blocks_override:
                rem.append(advice.more_kv_memory(cfg, sz) + (f" (KV cache: {u.ints(kv_tokens)} tokens)" if kv_tokens else ""))
            rem.append("shorten `max_tokens` / `--max-model-len`; watch `vllm:num_preemptions_total`")
            first_ev = min([s for s in samples_all], key=lambda s: s.line, default=None)
            yield self.finding(
                "; ".join(parts) + ".",
                severity=(Severity.ERROR if alloc and peak >= caution else
                          Severity.INFO if lone_preemption else
                          self.severity if preempting or (peak >= caution and sustained) else Severity.INFO),
                title=self.title if preempting else "KV cache near full",
                evidence=u.dedupe(evid, limit=24), first_seen=first, last_seen=last,
                count=max(len(pre), int(field_total), len(samples_all), 1), file=v.file,
                process=(first_ev.process if first_ev else (pre[0].process if pre else None)), server=v.index,
                root_cause=((f"The KV cache is capped at {cfg.num_gpu_blocks_override} blocks by --num-gpu-blocks-override"
                             + (f" ({u.ints(kv_tokens)} tokens)" if kv_tokens else "") + ": more sequences are admitted than "
                             "it holds as they grow, so the scheduler evicts and recomputes them." if cfg.num_gpu_blocks_override
                             and preempting else
                             "More sequences are admitted than the KV cache can hold as they grow, so the scheduler evicts "
                             "and recomputes them (preemption), wasting work.") if preempting else
                            "The KV cache is close to full: the next burst or longer outputs will trigger preemption."),
                remediation="; ".join(rem) + ".",
                data={"can_explain": preempting or peak >= critical or bool(alloc),
                      **({} if preempting or peak >= critical or alloc else
                         {"consequence_of": ("queue_backlog", "engine_hang", "engine_dead", "runtime_oom")}),
                      "peak_kv_cache_usage": peak, "kv_caution": caution, "kv_critical": critical,
                      "preemption_lines": len(pre), "cumulative_preemptions": cum, "silent_preemption": silent_any,
                      "kv_cache_tokens": kv_tokens, "min_running": floor_run},
            )

    @staticmethod
    def _sustained(st: list, samples: list, caution: float, min_s: float) -> bool:
        """A high-KV stretch that is not a passing burst: above the caution level for ``min_s`` seconds or
        more, or a queue that does not drain (Waiting still > 0 in the sample after the stretch, or the log ends
        during it with requests waiting)."""
        high = [s for s in st if (s.kv_cache_usage or 0) >= caution]
        if not high:
            return False
        span = u.duration_s(high) + u.interval_s(samples)
        if span >= min_s:
            return True
        try:
            i = next(k for k, s in enumerate(samples) if s is st[-1])
        except StopIteration:
            return True
        after = samples[i + 1] if i + 1 < len(samples) else None
        if after is None:
            return (st[-1].waiting or 0) > 0
        return after.waiting is None or after.waiting > 0

    @staticmethod
    def _reprefill(st: list, arrivals: list, critical: float) -> bool:
        """Prompt throughput at a full cache in an interval with no new request: preempted requests re-prefill."""
        if not arrivals:
            return False  # request logging off: arrivals unknown
        import bisect

        for a, b in zip(st, st[1:]):
            if (b.kv_cache_usage or 0) < critical or not (b.prompt_throughput or 0) > 0 or a.ts is None or b.ts is None:
                continue
            lo, hi = bisect.bisect_right(arrivals, a.ts), bisect.bisect_right(arrivals, b.ts)
            if hi == lo and arrivals[0] <= a.ts:
                return True
        return False

    @staticmethod
    def _silent(st: list, samples: list, critical: float) -> bool:
        """V1 silent preemption: at a critical KV level Running drops while Waiting > 0 (or grows)."""
        for a, b in zip(st, st[1:]):
            if (a.kv_cache_usage or 0) >= critical and (b.kv_cache_usage or 0) >= critical:
                if a.running is not None and b.running is not None and b.running < a.running and (b.waiting or 0) > 0:
                    return True
        return False
