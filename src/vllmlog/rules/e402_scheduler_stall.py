"""E402 scheduler-stall."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register


@register
class SchedulerStall(Rule):
    """## What it detects
    The queue stops moving for minutes: Waiting > 0 and Running unchanged, with no prompt throughput
    (nothing admitted) for longer than ``stall_s`` (default 5 min) — e.g. Running 1 / Waiting 12 for an
    hour while one runaway request decodes at a few tokens/s (head-of-line blocking), or Running 0 /
    Waiting N at 0 tokens/s (a request that can never be scheduled blocks the queue).
    ## Why it matters
    The server looks alive (``/health`` 200, non-zero generation throughput) but queued requests never
    start; every client of the queue times out.
    ## How to fix
    Bound generation (``max_tokens``, a server-side generation limit, ``--max-model-len``), abort stuck
    requests (client timeouts abort them), and size the KV cache for the prompts in use
    (``--gpu-memory-utilization``, ``--max-model-len``) so waiting requests can be admitted."""

    code, slug, category, severity = "E402", "scheduler-stall", "engine_hang", Severity.ERROR
    title = "Queue stalled: waiting requests never admitted"
    explains = ("stalled", "queueing", "aborting")
    fallback = True
    consequence_of = ("distributed_nccl",)
    consequence_any_time = ("distributed_nccl",)
    options: dict[str, Any] = {"stall_s": 300.0}

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """The stall itself (stuck stats, nothing admitted, hang timeouts)."""
        return True if symptom.kind == "stalled" else None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            for samples in v.by_engine().values():
                interval = u.interval_s(samples)
                key = lambda s: (s.running, s.waiting)  # noqa: E731
                runs: list[list] = []
                for i, s in enumerate(samples):
                    ok = (s.waiting or 0) > 0 and (s.prompt_throughput or 0) == 0 and not v.in_shutdown(s.line) \
                        and ((s.running or 0) > 0 or (s.generation_throughput or 0) == 0)
                    if ok and runs and i and key(runs[-1][-1]) == key(s) and runs[-1][-1] is samples[i - 1]:
                        runs[-1].append(s)
                    elif ok:
                        runs.append([s])
                for st in runs:
                    dur = u.duration_s(st)
                    if dur < float(options["stall_s"]):
                        continue
                    s0 = st[0]
                    gen = [s.generation_throughput or 0 for s in st]
                    kv = [s.kv_cache_usage for s in st if s.kv_cache_usage is not None]
                    yield self.finding(
                        f"Running {s0.running} / Waiting {s0.waiting} unchanged for {u.secs(dur)} with no prompt "
                        f"throughput (nothing admitted); generation ~{sum(gen) / len(gen):.1f} tokens/s"
                        + (f", KV {u.pct(min(kv))} → {u.pct(max(kv))}" if kv else "") + ".",
                        evidence=u.dedupe([u.sample_ev(s) for s in u.pick(st, interval)]), first_seen=s0.ts,
                        last_seen=st[-1].ts, count=len(st), file=v.file, process=s0.process, server=v.index,
                        root_cause="The running request(s) never finish and the waiting ones cannot be admitted "
                                   "(no free KV blocks or slot): head-of-line blocking by a runaway generation.",
                        remediation="Bound generation length (`max_tokens` on requests, a server-side "
                                    "`--generation-config`/`--max-model-len`), set client timeouts so stuck requests "
                                    "are aborted, and size the KV cache for the prompts in use "
                                    "(`--gpu-memory-utilization`, `--max-model-len`).",
                        data={"stalled_s": dur, "running": s0.running, "waiting": s0.waiting,
                              "kv_cache_usage": max(kv) if kv else None},
                    )
