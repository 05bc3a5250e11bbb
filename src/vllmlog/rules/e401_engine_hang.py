"""E401 engine-hang."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Evidence, Finding, Rule, Severity
from .registry import register

_TIMEOUTS = ("shm_broadcast_timeout", "rpc_timeout", "engine_iteration_timeout")


@register
class EngineHang(Rule):
    """## What it detects
    The engine is alive but makes no progress: stats lines with Running > 0 at 0.0 prompt and 0.0
    generation tokens/s, followed by more such lines or by a gap in the stats lines; ``No available
    shared memory broadcast block found in 60 seconds`` (often printed only when the stuck process
    resumes, at INFO level); ``RPC call to execute_model timed out``; V0's ``Engine iteration timed out``.
    Requests that clients abort during the stall are consequences, folded in as evidence.
    ## Why it matters
    ``/health`` keeps answering 200 while no request completes: load balancers keep sending traffic and
    clients time out. There is often no ERROR line at all.
    ## How to fix
    Find the stuck process: ``py-spy dump --pid <EngineCore/worker pid>``; check GPU health
    (``nvidia-smi``, Xid errors in ``dmesg``), NCCL (``NCCL_DEBUG=INFO``), CPU starvation or a paused
    container. Set ``VLLM_RPC_TIMEOUT`` / ``VLLM_ENGINE_ITERATION_TIMEOUT_S`` so a hang fails fast, and
    have the liveness probe check progress (``vllm:num_requests_running`` > 0 with flat token counters),
    not just ``/health``."""

    code, slug, category, severity = "E401", "engine-hang", "engine_hang", Severity.ERROR
    title = "Engine hang: requests running, no tokens produced"
    explains = ("stalled", "queueing", "aborting", "failing", "slow")
    fallback = True
    consequence_of = ("distributed_nccl",)
    consequence_any_time = ("distributed_nccl",)
    options: dict[str, Any] = {"gap_factor": 2.5, "critical_s": 300.0, "window_s": 180.0}

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """The stall itself (stuck stats, nothing admitted, hang timeouts)."""
        return True if symptom.kind == "stalled" else None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            timeouts = [e for e in v.of(*_TIMEOUTS) if not v.in_shutdown(e.line)]
            episodes = []
            for samples in v.by_engine().values():
                interval = u.interval_s(samples)
                for i, s in enumerate(samples):
                    if v.in_shutdown(s.line) or not self._stuck(s):
                        continue
                    if i and episodes and episodes[-1]["samples"][-1] is samples[i - 1]:
                        episodes[-1]["samples"].append(s)
                        continue
                    episodes.append({"samples": [s], "series": samples, "idx": i, "interval": interval})
            found = []
            for ep in episodes:
                st, series, interval = ep["samples"], ep["series"], ep["interval"]
                j = series.index(st[-1]) + 1
                nxt = series[j] if j < len(series) else None
                prev = series[ep["idx"] - 1] if ep["idx"] > 0 else None
                gap = None
                if nxt is not None and nxt.ts and st[-1].ts:
                    g = (nxt.ts - st[-1].ts).total_seconds()
                    if g > max(float(options["gap_factor"]) * interval, interval + 20):
                        gap = g
                # timeouts logged while the episode lasts (stuck stats go on around them) or soon after it starts
                span = max(float(options["window_s"]), (st[-1].ts - st[0].ts).total_seconds() + interval
                           if st[-1].ts and st[0].ts else 0.0)
                near = [e for e in timeouts if e.ts and st[0].ts
                        and -interval <= (e.ts - st[0].ts).total_seconds() <= span + (gap or 0)]
                corroborated = len(st) >= 2 or gap is not None or bool(near)
                if not corroborated:
                    continue
                start = prev.ts if prev is not None and prev.ts else st[0].ts
                end = nxt.ts if nxt is not None and nxt.ts else (st[-1].ts if len(st) > 1 else None)
                if near and near[-1].ts and (end is None or near[-1].ts > end):
                    end = near[-1].ts
                found.append((st, nxt, gap, near, start, end))
            used = {id(e) for *_, near, _s, _e in found for e in near}
            lone = [e for e in timeouts if id(e) not in used]
            for st, nxt, gap, near, start, end in found:
                dur = (end - start).total_seconds() if start and end else None
                recovered = nxt is not None and not self._stuck(nxt)
                sev = Severity.CRITICAL if (not recovered and len(st) >= 2) or (dur or 0) >= float(options["critical_s"]) else Severity.ERROR
                aborts = [e for e in v.of("request_aborted") if e.ts and start and start <= e.ts <= (end or e.ts)]
                evid: list[Evidence | None] = [u.sample_ev(s) for s in u.pick(st, None, limit=4)]
                evid += [u.first(e) for e in near[:3]]
                if gap is not None and nxt is not None:
                    evid.append(u.sample_ev(nxt))
                evid += [u.first(e) for e in aborts[:3]]
                s0 = st[0]
                parts = [f"Running {s0.running} at 0.0 tokens/s"]
                if len(st) > 1:
                    parts.append(f"for {len(st)} consecutive stats intervals")
                if gap is not None:
                    parts.append(f"then no stats line for {u.secs(gap)}")
                if near:
                    parts.append(f"{len(near)} hang timeout line(s) ({near[0].kind})")
                if aborts:
                    n_ab = u.distinct_requests(aborts)
                    parts.append(f"{n_ab} client aborts during the stall")
                parts.append(f"stalled ~{u.secs(dur)}" + (", then resumed" if recovered else ", not recovered by end of log"))
                yield self.finding(
                    "Engine made no progress: " + ", ".join(parts) + ".", severity=sev, evidence=u.dedupe(evid),
                    first_seen=s0.ts, last_seen=end or s0.ts, count=len(st) + len(near), file=v.file,
                    process=(near[0].process if near else s0.process), server=v.index,
                    root_cause="A process of the engine (EngineCore or a worker) stopped making steps while the API "
                               "server stayed up: stuck kernel or collective, paused/starved process, or deadlock.",
                    remediation="During a hang run `py-spy dump --pid <EngineCore pid>` and check `nvidia-smi`/`dmesg` "
                                "(Xid); set `VLLM_RPC_TIMEOUT` / `VLLM_ENGINE_ITERATION_TIMEOUT_S` so hangs fail fast; "
                                "make the liveness probe check progress (running > 0 with flat "
                                "`vllm:generation_tokens_total`), not only `/health`.",
                    data={"stalled_s": dur, "recovered": recovered, "running": s0.running, "stats_gap_s": gap},
                )
            if lone:
                e = lone[0]
                startup = not v.serving(e.line)
                world = (u.num(u.arg(v, "tensor_parallel_size")) or 1) * (u.num(u.arg(v, "pipeline_parallel_size")) or 1)
                if all(x.kind == "engine_iteration_timeout" for x in lone) and world <= 1 and not startup:
                    # one engine process and no worker to wait on: the step itself ran longer than the limit
                    cpu = u.is_cpu(v)
                    yield self.finding(
                        f"{len(lone)} engine step(s) ran past VLLM_ENGINE_ITERATION_TIMEOUT_S: {u.msg_of(e)[:120]} — "
                        "one engine process, no peer to wait on" + (" (CPU backend)" if cpu else ""),
                        severity=Severity.ERROR, category="timeout", title="Engine step exceeded the iteration timeout",
                        evidence=u.dedupe([u.first(x) for x in lone[:4]]), first_seen=e.ts, last_seen=lone[-1].ts,
                        count=len(lone), file=v.file, process=e.process, server=v.index,
                        root_cause="A single engine step (a long prefill, a large batch) took longer than the iteration "
                                   "timeout on this hardware, and the V0 engine loop gave up on it.",
                        remediation=("Raise `VLLM_ENGINE_ITERATION_TIMEOUT_S`; make one step smaller "
                                     "(`--max-num-batched-tokens`, `--max-model-len`"
                                     + (", `VLLM_CPU_KVCACHE_SPACE` sized to the load" if cpu else "")
                                     + ") or run on faster hardware."),
                        data={"timeouts": len(lone), "single_process": True, "cpu": cpu},
                    )
                    continue
                yield self.finding(
                    f"{len(lone)} hang timeout line(s): {u.msg_of(e)[:150]}"
                    + (" (during start-up: often slow compilation or weight loading)" if startup else ""),
                    severity=Severity.INFO if startup else (Severity.ERROR if len(lone) >= 2 or
                                                            any(x.kind != "shm_broadcast_timeout" for x in lone)
                                                            else Severity.WARNING),
                    title="Engine process waited on a stuck peer",
                    evidence=u.dedupe([u.first(x) for x in lone[:4]]), first_seen=e.ts, last_seen=lone[-1].ts,
                    count=len(lone), file=v.file, process=e.process, server=v.index,
                    root_cause="A process waited 60 s or more for another engine process (shared-memory broadcast, RPC): "
                               "that process was hanging or doing long work (compilation, loading).",
                    remediation="If it repeats while serving, dump the stacks of the engine processes (`py-spy dump`) and "
                                "check GPU/NCCL health; set `VLLM_RPC_TIMEOUT` so a real hang fails fast.",
                    data={"timeouts": len(lone)},
                )

    @staticmethod
    def _stuck(s: Any) -> bool:
        """Running > 0 with no prompt and no generation throughput in the interval."""
        return (s.running or 0) > 0 and (s.prompt_throughput or 0) == 0 and s.generation_throughput is not None \
            and s.generation_throughput == 0
