"""E403 engine-dead."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register
from .s102_startup_worker_killed import killed_workers

_FAIL = ("engine_fatal", "engine_dead", "engine_core_died", "cuda_error", "worker_died", "worker_exception",
         "request_failed")

_FIX = {
    "illegal memory access": "Rerun with `CUDA_LAUNCH_BLOCKING=1` to find the kernel; upgrade vLLM / the attention or "
                             "structured-output backend (xgrammar); as a workaround disable the feature in use when it "
                             "started (e.g. do not mix structured-output and free-form requests, `--enforce-eager`, "
                             "another `--attention-backend`).",
}


@register
class EngineDead(Rule):
    """## What it detects
    The engine dies while serving: ``EngineCore encountered a fatal error``, ``engine core exited
    unexpectedly`` (EngineCore killed), CUDA errors such as ``an illegal memory access was encountered``,
    ``EngineDeadError`` / ``AsyncEngineDeadError``, a worker that dies or raises — followed by requests
    ``failed (engine dead)`` and HTTP 500s. Errors printed *after* a deliberate shutdown (SIGTERM,
    Ctrl-C) are shutdown noise and are ignored.
    ## Why it matters
    Every in-flight request fails and the server exits (or, in old versions, keeps answering 500).
    ## How to fix
    Read the first exception in the engine process (the finding points at it). CUDA errors: rerun with
    ``CUDA_LAUNCH_BLOCKING=1``, upgrade vLLM/driver, disable the feature in use. A killed EngineCore with
    no traceback: check ``dmesg`` (OOM killer), the container runtime, who sent the signal. Run vLLM
    under a supervisor that restarts it."""

    code, slug, category, severity = "E403", "engine-dead", "engine_dead", Severity.CRITICAL
    title = "Engine died while serving"
    explains = ("dead", "failing", "aborting")
    fallback = True
    options: dict[str, Any] = {}
    consequence_of = ("runtime_oom", "distributed_nccl", "engine_hang")

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            if not u.was_serving(v):
                continue
            start = v.ready_line or 0
            fails = [e for e in v.of(*_FAIL, after=start) if not v.in_shutdown(e.line)
                     and (e.kind != "request_failed" or e.fields.get("reason") == "engine_dead")]
            if not fails:
                continue
            root = fails[0]
            # handled by the runtime-OOM rules
            if any(u.is_oom(e) for e in v.events if start < e.line <= root.line_end) or any(u.is_oom(e) for e in fails[:3]):
                continue
            if root in killed_workers(v, serving=True) or (u.kernel_ooms(run, v) and root.kind in ("engine_core_died", "worker_died")):
                continue
            pri = next((e for e in fails if "engine_fatal" in u.kinds_of(e) or "cuda_error" in u.kinds_of(e)), root)
            if pri.line > root.line and root.kind in ("engine_core_died", "worker_died", "worker_exception"):
                pri = root
            # V0 MQLLMEngine logs the real exception (ERROR + traceback) just before the engine-dead lines
            before = [e for e in v.events if e.line < root.line and e.level == "ERROR" and e.fields.get("exc_type")
                      and e.kind in ("traceback", "log", "worker_exception") and root.ts and e.ts
                      and 0 <= (root.ts - e.ts).total_seconds() <= 30 and e.line > start]
            if before and not pri.fields.get("exc_message"):
                pri = before[-1]
                if pri.line < root.line:
                    root = pri
            am = u.aftermath(v, root)
            if root.kind == "engine_core_died" and pri is root and v.graceful_line is not None and not am.failed_requests \
                    and not am.http_5xx and root.ts is not None:
                g = next((e for e in v.events if e.line == v.graceful_line), None)
                if g is not None and g.ts is not None and 0 <= (g.ts - root.ts).total_seconds() <= 3:
                    continue  # Ctrl-C / SIGTERM reached the engine core first: shutdown, not a crash
            exc = pri.fields.get("exc_message") or pri.fields.get("error")
            exc_t = pri.fields.get("exc_type")
            lead = u.first(pri) if pri.kind != "cuda_error" else u.ev(pri, "CUDA error", "illegal memory")
            evid = [lead]
            if pri.line != pri.line_end:
                evid.append(u.ev(pri, "CUDA error", "illegal memory access", "Error:"))
            evid += am.evidence
            what = {
                "engine_core_died": "the EngineCore process exited unexpectedly (no traceback: killed by a signal)",
                "worker_died": f"worker {root.fields.get('worker') or ('rank ' + str(root.fields['rank']) if root.fields.get('rank') else '')} died ({u.exit_code_text(root.fields.get('exit_code'))})",
            }.get(root.kind, "the EngineCore hit a fatal error")
            detail = f" ({str(exc_t).rsplit('.', 1)[-1] + ': ' if exc_t else ''}{str(exc)[:120]})" if exc else ""
            damage = []
            if am.failed_requests:
                damage.append(f"{am.failed_requests} requests failed (engine dead)")
            if am.http_5xx:
                damage.append(f"{am.http_5xx} HTTP 5xx")
            key = "illegal memory access" if "illegal memory access" in pri.text else ""
            yield self.finding(
                f"Engine died while serving: {what}{detail}" + ("; " + ", ".join(damage) if damage else "") + ".",
                evidence=u.dedupe(evid, limit=16), first_seen=root.ts, last_seen=am.last_ts or root.ts, count=len(fails),
                file=v.file, process=pri.process or root.process, server=v.index,
                root_cause=("A CUDA illegal memory access in the engine (a kernel bug or corrupted input); CUDA reports it "
                            "asynchronously, so the failing call may not be the culprit." if key else
                            "The EngineCore process was killed from outside (no Python traceback): OOM killer, a signal, "
                            "or the container runtime." if root.kind == "engine_core_died" and pri is root else
                            f"The engine raised {str(exc_t or 'an exception').rsplit('.', 1)[-1]} and shut down."),
                remediation=_FIX.get(key, "Find who killed the EngineCore: `dmesg -T | grep -iE 'killed process|out of memory'` "
                                          "(OOM killer), the container runtime's events (OOMKilled, eviction), any "
                                          "`kill -9` from scripts; run vLLM under a supervisor that restarts it."
                                     if root.kind == "engine_core_died" and pri is root else
                                     "Read the first exception of the engine process (first evidence line); check "
                                          "`dmesg -T` for OOM kills or Xid errors; run vLLM under a supervisor that "
                                          "restarts it (systemd `Restart=always`, Kubernetes liveness probe)."),
                data={"failed_requests": am.failed_requests, "http_5xx": am.http_5xx, "exc_type": exc_t},
            )
