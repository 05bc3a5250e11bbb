"""Q301 queue-backlog."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from ..capacity import sizing
from . import _util as u
from . import advice
from .base import Evidence, Finding, Rule, Severity
from .registry import register


@register
class QueueBacklog(Rule):
    """## What it detects
    Requests waiting too long for a slot: Waiting > 0 for longer than the handbook's 30 s, or a queue
    that does not drain while Running is pinned at its cap (``--max-num-seqs``) — plus the handbook's
    ``waiting time exceeds 30s`` lines and journeys whose queue time exceeds the threshold.
    A burst that drains within the threshold is not a backlog.
    ## Why it matters
    Queue time adds directly to TTFT; clients time out and retry, which grows the queue further. vLLM has
    no server-side timeout for queued requests.
    ## How to fix
    If KV usage leaves headroom, raise ``--max-num-seqs``; otherwise add replicas, rate-limit or cap
    client concurrency (admission control in the gateway), and set client timeouts."""

    code, slug, category, severity = "Q301", "queue-backlog", "queue_backlog", Severity.WARNING
    title = "Requests queue up (waiting does not drain)"
    explains = ("queueing", "aborting", "slow")
    needs_symptom = True
    options: dict[str, Any] = {"waiting_s": 30.0, "min_waiting": 1, "min_wait_lines": 3}
    consequence_of = ("kv_cache_pressure_preemption", "engine_hang", "engine_dead", "runtime_oom")

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """A backlog at the seat limit: Running pinned at --max-num-seqs while requests wait."""
        if symptom.kind == "queueing":
            return True if symptom.data.get("binding") == "max_num_seqs" else None
        return None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        wait_s = float(options["waiting_s"])
        for v in u.servers(run):
            cap = u.num(u.arg(v, "max_num_seqs"))
            found: list[list] = []
            drained: dict[int, bool] = {}
            for samples in v.by_engine().values():
                interval = u.interval_s(samples)
                for st in u.stretches(samples, lambda s: (s.waiting or 0) >= int(options["min_waiting"])):
                    st = [s for s in st if not v.in_shutdown(s.line)]
                    if not st:
                        continue
                    dur = u.duration_s(st)
                    run_vals = [s.running for s in st if s.running is not None]
                    pinned = bool(run_vals) and (max(run_vals) == min(run_vals) or (cap is not None and min(run_vals) >= cap))
                    growing = len(st) >= 2 and (st[-1].waiting or 0) >= (st[0].waiting or 0)
                    big = (st[0].waiting or 0) >= max(run_vals or [0])
                    if dur >= wait_s or (growing and pinned and big):
                        found.append(st)
                        # a burst that drains steadily (Waiting only falls, then 0) is queueing, not a backlog
                        nxt = samples[samples.index(st[-1]) + 1] if samples.index(st[-1]) + 1 < len(samples) else None
                        w = [s.waiting or 0 for s in st]
                        drained[id(st)] = (nxt is not None and (nxt.waiting or 0) == 0 and len(w) >= 2
                                           and all(b < a for a, b in zip(w, w[1:])) and dur < 2 * wait_s)
            hb = [e for e in v.of("queue_wait_exceeded") if not v.in_shutdown(e.line)]
            rejected = [e for e in v.of("request_rejected") if not v.in_shutdown(e.line)]
            slow_j = [j for j in v.journeys if (u.jval(j, "queue_s") or 0) > wait_s]
            if not found and not rejected and len(hb) < int(options["min_wait_lines"]) and len(slow_j) < int(options["min_wait_lines"]):
                continue
            samples_all = [s for st in found for s in st]
            times = [s.ts for s in samples_all if s.ts] + [e.ts for e in hb + rejected if e.ts] + [j.arrival_ts for j in slow_j if j.arrival_ts]
            if not times:
                continue
            first, last = min(times), max(times)
            aborts = [e for e in v.of("request_aborted") if e.ts and first <= e.ts <= last]
            evid: list[Evidence | None] = [u.sample_ev(s) for s in u.pick(samples_all, u.interval_s(samples_all))]
            evid += [u.first(e) for e in rejected[:3]]
            evid += [u.first(e) for e in hb[:4]]
            evid += [u.first(e) for e in aborts[:3]]
            evid += [Evidence(j.file, j.first_line, "") for j in slow_j[:3] if j.first_line]
            parts = []
            peak_wait = max((s.waiting or 0 for s in samples_all), default=0)
            run_vals = [s.running for s in samples_all if s.running is not None]
            kv = [s.kv_cache_usage for s in samples_all if s.kv_cache_usage is not None]
            if samples_all:
                dur = (last - first).total_seconds()
                parts.append(f"Waiting stayed > 0 for {u.secs(dur)} (peak {peak_wait}, "
                             f"from {samples_all[0].waiting} to {samples_all[-1].waiting})")
                if run_vals and min(run_vals) == max(run_vals):
                    parts.append(f"Running pinned at {run_vals[0]}" + (f" = --max-num-seqs {int(cap)}" if cap and run_vals[0] >= cap else ""))
                elif run_vals:
                    parts.append(f"Running {min(run_vals)}–{max(run_vals)}" + (f" (--max-num-seqs {int(cap)})" if cap else ""))
                if kv:
                    parts.append(f"KV usage ≤ {u.pct(max(kv))}")
            if hb:
                parts.append(f"{len(hb)} requests waited longer than {hb[0].fields.get('waiting_threshold_s') or wait_s} s")
            if slow_j:
                parts.append(f"{len(slow_j)} requests queued > {wait_s:.0f} s")
            if aborts:
                parts.append(f"{len(aborts)} client aborts meanwhile")
            if rejected:
                parts.append(f"{len(rejected)} requests rejected because the queue was full")
            kv_room = kv and max(kv) < 0.8
            pinned_at = max(run_vals) if run_vals else None
            rem = []
            at_cap = pinned_at is not None and (pinned_at >= cap if cap else min(run_vals) == max(run_vals))
            if kv_room and pinned_at and pinned_at > 0 and at_cap:
                rem.append(advice.more_seqs(sizing.for_view(run, v), pinned_at,
                                            f"KV usage ({u.pct(max(kv))}) leaves headroom"))
            loras = u.num(u.arg(v, "max_loras"))
            if (u.arg(v, "enable_lora") in (True, "True") or loras) and pinned_at is not None and kv and max(kv) < 0.5 \
                    and (cap is None or pinned_at < cap):
                parts.append(f"Running stays below its seat limit with the KV cache nearly empty while LoRA serving is on "
                             f"(--max-loras {int(loras) if loras else 1}): only that many adapters can be in one batch")
                rem.insert(0, f"raise `--max-loras` above {int(loras) if loras else 1} to the number of adapters in use "
                              "(each adds its weights to GPU memory) or route each adapter to its own replica")
            rem.append("add replicas or admission control / rate limiting in front of vLLM so offered concurrency "
                       "matches what one replica serves")
            rem.append("set client timeouts — a disconnecting client is the only way a queued request expires")
            only_drains = bool(found) and all(drained.get(id(st)) for st in found) and not (rejected or hb or slow_j)
            if only_drains:
                parts.append("then drained")
            yield self.finding(
                "; ".join(parts) + ".", evidence=u.dedupe(evid, limit=16),
                severity=Severity.ERROR if rejected else (Severity.INFO if only_drains else self.severity),
                title=self.title if not only_drains else "Burst queued, then drained", first_seen=first, last_seen=last,
                count=max(len(samples_all), len(hb), len(slow_j)), file=v.file,
                process=samples_all[0].process if samples_all else (hb[0].process if hb else None), server=v.index,
                root_cause="Requests arrive faster than the engine finishes them: the running batch is at its cap "
                           "(max-num-seqs) and the rest wait in the queue." if pinned_at else
                           "Requests arrive faster than the engine finishes them.",
                remediation="; ".join(rem) + ".",
                data={"peak_waiting": peak_wait, "running": pinned_at, "max_num_seqs": cap,
                      "peak_kv_cache_usage": max(kv) if kv else None, "waiting_s": wait_s},
            )
