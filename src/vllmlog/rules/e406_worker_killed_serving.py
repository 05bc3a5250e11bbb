"""E406 worker-killed-serving."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register
from .s102_startup_worker_killed import killed_workers


@register
class WorkerKilledServing(Rule):
    """## What it detects
    A worker process killed while serving — ``Worker proc … died unexpectedly (exit code: -9)`` or
    ``(exit code: None)`` with no Python traceback before it — followed by the engine's fatal error,
    ``EngineDeadError`` and failed requests. vLLM prints no word about memory: the kernel's OOM killer
    (host RAM, cgroup/container limit) is the usual sender of that SIGKILL, as the worker's memory grows
    under load.
    ## Why it matters
    The engine dies; every in-flight request fails and the server exits.
    ## How to fix
    Confirm with ``dmesg -T | grep -i 'killed process'`` or the pod's ``OOMKilled`` status; raise the
    container memory limit or reduce host memory use: smaller KV cache / ``--swap-space 0`` /
    ``--max-num-seqs`` / ``--max-model-len``, fewer API-server processes."""

    code, slug, category, severity = "E406", "worker-killed-serving", "runtime_oom", Severity.CRITICAL
    title = "Worker killed while serving (out of host memory)"
    explains = ("dead", "failing")
    options: dict[str, Any] = {}
    #: a worker that died of an NCCL error or a CUDA OOM logged elsewhere (its own worker log) was not
    #: SIGKILLed by the host OOM killer
    consequence_of = ("distributed_nccl", "runtime_oom")

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            dead = killed_workers(v, serving=True)
            kernel = u.kernel_ooms(run, v)
            if not dead and kernel and v.ready_line is not None:
                # the kernel says it killed a vLLM process; the log only shows the engine core vanish
                dead = [e for e in v.of("engine_core_died", "worker_died", after=v.ready_line) if not v.in_shutdown(e.line)][:1]
            if not dead:
                continue
            e = dead[0]
            am = u.aftermath(v, e)
            code = e.fields.get("exit_code")
            running = next((s.running for s in reversed(v.stats) if s.line < e.line), None)
            yield self.finding(
                (f"Worker {e.fields.get('worker') or ''} died ({u.exit_code_text(code)}) while serving and no Python error "
                 if e.kind == "worker_died" else "The engine core exited while serving with no Python error ")
                + ("(the kernel OOM killer: " + kernel[0].message[:120] + ")" if kernel else "(a SIGKILL, typically the OOM killer)")
                + "; the engine died"
                + (f", {am.failed_requests} requests failed" if am.failed_requests else "")
                + (f", {am.http_5xx} HTTP 5xx" if am.http_5xx else "") + ".",
                evidence=u.dedupe([u.first(e)] + [u.first(k) for k in kernel[:2]] + am.evidence, limit=16), first_seen=e.ts, last_seen=am.last_ts or e.ts,
                count=len(dead), file=v.file, process=e.process, server=v.index,
                root_cause="The worker process was killed from outside while serving — its memory grew under load past "
                           "the host or container limit and the kernel OOM killer sent SIGKILL.",
                remediation="Confirm with `dmesg -T | grep -i 'killed process'` (or the container's OOMKilled status); raise "
                            "the memory limit, or reduce memory: lower `--max-num-seqs`"
                            + (f" (Running was {running})" if running else "")
                            + ", `--max-model-len`, `--swap-space 0`, a smaller KV cache (`--gpu-memory-utilization`; "
                              "on CPU `VLLM_CPU_KVCACHE_SPACE`).",
                data={"exit_code": code, "failed_requests": am.failed_requests, "http_5xx": am.http_5xx},
            )
