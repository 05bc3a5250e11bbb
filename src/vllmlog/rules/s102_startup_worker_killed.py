"""S102 startup-worker-killed."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register

#: Exit codes of a process killed without a Python traceback: SIGKILL (-9 / 137) or not yet collected.
KILLED = {-9, 137, None}
#: Kinds that, before the death, give another explanation (then the worker died as a consequence).
OTHER_CAUSES = (
    "cuda_oom", "kv_cache_insufficient", "kv_cache_no_memory", "insufficient_free_memory", "model_load_error",
    "config_error", "max_model_len_too_large", "port_in_use", "nccl_timeout", "nccl_error", "worker_exception",
    "cuda_error", "engine_fatal", "engine_start_failed", "traceback", "memory_profiling_error",
)


def killed_workers(v: u.ServerView, serving: bool) -> list:
    """worker_died events with a SIGKILL-like exit code and no earlier error explaining them."""
    out = []
    for e in v.of("worker_died"):
        if "exit_code" not in e.fields:
            # releases before ~0.10 print no exit code ("… died unexpectedly, shutting down executor."): nothing
            # says SIGKILL, so nothing says the OOM killer (a worker that died of its own error elsewhere, or was
            # killed for another reason) — a kernel OOM line is what would (E406 looks for it)
            continue
        if serving and e.fields.get("exit_type"):
            continue  # Ray's "died … by an unexpected system error" while serving: a crash as much as a kill — the
            # engine's death is the finding, not host memory (at start-up, allocating memory, it is the likely kill)
        code = e.fields.get("exit_code")
        code = None if code in (None, "None") else int(u.num(code) or 0)
        if code not in KILLED or v.serving(e.line) != serving or v.in_shutdown(e.line):
            continue
        lo = v.ready_line if serving and v.ready_line else 0
        if v.of(*OTHER_CAUSES, before=e.line, after=lo):
            continue
        out.append(e)
    return out


@register
class StartupWorkerKilled(Rule):
    """## What it detects
    A worker process that dies during start-up with exit code -9 (SIGKILL) or with no exit code and no
    Python traceback — typically while the KV cache is being allocated — so the engine never starts.
    vLLM prints no word about memory: the kernel's OOM killer (host RAM or a cgroup/container memory
    limit) leaves only ``died unexpectedly (exit code: -9)``.
    ## Why it matters
    The server never becomes ready. Restarting with the same settings fails the same way.
    ## How to fix
    Confirm with ``dmesg | grep -i 'killed process'`` (or the pod's ``OOMKilled`` status). Give the
    container more memory, or make vLLM use less host memory: a smaller KV cache
    (``--gpu-memory-utilization``, ``--num-gpu-blocks-override``; on CPU ``VLLM_CPU_KVCACHE_SPACE``),
    ``--swap-space 0``, smaller ``--max-model-len``."""

    code, slug, category, severity = "S102", "startup-worker-killed", "startup_oom", Severity.CRITICAL
    title = "Worker killed during start-up (out of host memory)"
    explains = ("never_ready",)
    options: dict[str, Any] = {}

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            if v.ready_line is not None:
                continue
            dead = killed_workers(v, serving=False)
            if not dead:
                continue
            e = dead[0]
            code = e.fields.get("exit_code")
            kv = u.arg(v, "kv_cache_tokens")
            stage = "while allocating the KV cache" if v.of("kv_cache_size", "kv_cache_memory", "kv_cache_blocks") else "during start-up"
            kv_line = v.of("kv_cache_size", "kv_cache_memory", "kv_cache_blocks", before=e.line)
            kernel = u.kernel_ooms(run, v)
            evid = [u.first(e)] + u.startup_failure_lines(v, e.line) + [u.first(k) for k in kernel[:2]] \
                + ([u.first(kv_line[-1])] if kv_line else [])
            yield self.finding(
                f"Worker {e.fields.get('worker') or ''} died ({u.exit_code_text(code)}) {stage} and no Python error; "
                "the server never became ready "
                + (f"(the kernel OOM killer: {kernel[0].message[:120]})." if kernel else "(a SIGKILL, almost always the kernel OOM killer)."),
                evidence=u.dedupe(evid), first_seen=e.ts, last_seen=e.ts, count=len(dead), file=v.file,
                process=e.process, server=v.index,
                root_cause="The worker was killed from outside (SIGKILL) while allocating memory at start-up: the host or "
                           "container memory limit is below what this configuration needs.",
                remediation="Check `dmesg -T | grep -i 'killed process'` / the container's OOMKilled status; raise the "
                            "container memory limit or shrink the allocation: lower `--gpu-memory-utilization`, "
                            f"`--num-gpu-blocks-override`, `--max-model-len`, `--swap-space 0`"
                            + (f" (KV cache was {u.ints(kv)} tokens; on CPU set `VLLM_CPU_KVCACHE_SPACE` lower)" if kv else "")
                            + ".",
                data={"exit_code": code, "kv_cache_tokens": kv},
            )
