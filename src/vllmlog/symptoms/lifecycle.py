"""Symptoms of the server's life: it never became ready, or its engine died while serving."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Iterator

from ..parsing.envelope import ANSI
from ..rules import _util as u
from ..rules.base import Evidence, Severity
from .base import Symptom, detector

if TYPE_CHECKING:  # pragma: no cover
    from ..model import Event
    from ..run import Run
    from ..state import ServiceState

#: Records that end an engine (or a start-up).
FATAL = frozenset({"engine_fatal", "engine_dead", "engine_core_died", "worker_died", "process_crashed",
                   "engine_start_failed", "engine_start_timeout", "workers_killed", "replica_stopped"})
#: Waiting on a peer that never answers.
WAITS = frozenset({"shm_broadcast_timeout", "rpc_timeout", "engine_iteration_timeout", "engine_start_timeout",
                   "nccl_timeout", "ray_unschedulable"})
#: Seconds without a new start-up milestone after which a start-up that logs only waits is stuck.
STUCK_S = 120.0
#: A start-up stopped on request this long after its last milestone, with no progress bar moving meanwhile, was stuck
#: (the operator gave up on it): longer than any weight load or graph capture that still logs nothing.
INTERRUPTED_STUCK_S = 600.0
_EXC_HEAD = re.compile(r"(?:Error|Exception|Exit|Interrupt)\b")


def _errors(st: ServiceState) -> list[Event]:
    """ERROR/CRITICAL records and exception tracebacks of the run, deliberate-shutdown noise excluded."""
    v = st.view
    out = []
    for e in v.events:
        if v.in_shutdown(e.line):
            continue
        if e.kind in FATAL or e.kind in ("traceback", "worker_exception", "cuda_oom", "cuda_error", "model_load_error",
                                         "config_error", "max_model_len_too_large", "kv_cache_insufficient",
                                         "kv_cache_no_memory", "insufficient_free_memory", "port_in_use",
                                         "nccl_error", "memory_profiling_error", "oom_killed"):
            out.append(e)
        elif e.level in ("ERROR", "CRITICAL") and e.kind not in ("http_access", "request_aborted"):
            out.append(e)
    return out


def describe(e: Event) -> str:
    """What a record says went wrong: ``Type: message`` of its exception, else its message (no colour codes)."""
    xt, xm = e.fields.get("exc_type"), e.fields.get("exc_message")
    chain = e.fields.get("exc_chain") or []
    if xt and "EngineDead" in str(xt) and len(chain) > 1:
        # "… direct cause of the following exception: AsyncEngineDeadError: Task finished unexpectedly": the cause
        # is the first exception of the chain (a ValueError in the scheduler, a CUDA error …)
        first = str(chain[0])
        if "EngineDead" not in first.split(":", 1)[0]:
            t, _, m = first.partition(": ")
            return f"{t.rsplit('.', 1)[-1]}: {m}" if m else t.rsplit(".", 1)[-1]
    if xm:
        return f"{str(xt).rsplit('.', 1)[-1]}: {xm}" if xt else str(xm)
    return ANSI.sub("", u.msg_of(e))


def _key_line(e: Event) -> Evidence:
    """The line of a record that says what happened (exception line of a traceback, else its first line)."""
    xs = u.exc_lines(e, 2)
    if xs:
        return xs[-1]
    return u.ev(e) if e.line != e.line_end else u.first(e)


@detector("never_ready")
def never_ready(run: Run, st: ServiceState, opts: dict) -> Iterator[Symptom]:
    """Started, never served: it failed (an error, a traceback, a process exit), or it is stuck (only waits,
    or minutes without a new start-up milestone). A log that simply ends during start-up is not a symptom."""
    lc, v = st.lifecycle, st.view
    # stopped on request during start-up (Ctrl-C, SIGTERM): the operator gave up on a start-up only when it had made
    # no progress for many minutes before the stop — else it is a stop like any other
    interrupted = lc.started and not lc.serving and lc.shutdown_ts is not None
    if not (lc.never_ready or interrupted) or v.peer_serving:
        return
    errs = _errors(st) if not interrupted else []
    waits = [e for e in v.events if e.kind in WAITS and not (interrupted and v.in_shutdown(e.line))]
    last_ms = max((e for e in v.events if e.kind in _MILESTONES), key=lambda e: e.line, default=None)
    stuck_s = None
    if last_ms is not None and last_ms.ts is not None and v.srv.end_ts is not None:
        stuck_s = (v.srv.end_ts - last_ms.ts).total_seconds()
    if interrupted:
        moving = last_ms is not None and any(e.kind == "progress" and e.line > last_ms.line for e in v.events)
        stuck = bool(waits) or (stuck_s is not None and stuck_s >= INTERRUPTED_STUCK_S and not moving)
    else:
        stuck = bool(waits) or (stuck_s is not None and stuck_s >= STUCK_S and _activity_after(v, last_ms))
    if not errs and not stuck:
        return
    root = errs[0] if errs else (waits[0] if waits else last_ms)
    evid: list[Evidence | None] = []
    if errs:
        evid.append(_key_line(root))
        evid.append(u.first(root))
        later = [e for e in errs[1:] if e.kind in FATAL][:2]
        evid += [u.first(e) for e in later]
    evid += [u.first(e) for e in waits[:3]]
    if last_ms is not None:
        evid.append(u.first(last_ms))
    stage = lc.startup_stage or "start-up"
    # the start-up waterfall (vllmlog.startup: traced spans, else the log's own milestones) names the phase it was
    # in when it failed or got stuck, and for how long
    op = None
    try:
        from ..startup import of_server

        su = of_server(run, st.file, st.index)
        op = su.stopped_in() if su is not None else None
    except Exception:  # noqa: BLE001 - the waterfall is a refinement: the symptom stands without it, the bug is logged
        logging.getLogger(__name__).exception("start-up waterfall of %s#%s failed", st.file, st.index)
        op = None
    if op is not None and op.name:
        stage = op.name
        if op.line:
            evid.append(Evidence(op.file, op.line, ""))
    if errs:
        exc = next((e for e in errs if e.fields.get("exc_message")), root)
        what = f"failed {'in' if op is not None else 'after'} '{stage}': {describe(exc)[:160]}"
    elif waits:
        what = f"stuck {'in' if op is not None else 'after'} '{stage}': {len(waits)} wait/timeout line(s), " \
               f"{u.msg_of(waits[0])[:100]}"
    else:
        what = f"stuck in '{stage}' for {u.secs(op.seconds if op is not None and op.seconds else stuck_s)} with no " \
               "further start-up progress"
    yield Symptom(
        "never_ready", st.file, st.index, Severity.CRITICAL, f"The server never became ready: {what.rstrip('. ')}.",
        onset=root.ts if root is not None else v.srv.start_ts, end=v.srv.end_ts,
        trend="recovered" if lc.restarted else "stable", evidence=u.dedupe(evid, 8),
        category=None if errs else "engine_hang", process=root.process if root is not None else None,
        data={"stage": stage, "errors": len(errs), "waits": len(waits), "stuck_s": stuck_s,
              "stopped_in": op.name if op is not None else None,
              "stopped_in_s": op.seconds if op is not None else None,
              "root_line": root.line if root is not None else None},
    )


_MILESTONES = frozenset({"server_version", "server_args", "engine_config", "model_loading", "model_loaded",
                         "memory_profiling", "kv_cache_blocks", "kv_cache_size", "kv_cache_memory",
                         "cuda_graph_captured", "engine_initialized", "server_starting", "server_routes",
                         "server_process_started", "worker_ready", "distributed_init"})


def _activity_after(v: u.ServerView, e: Event) -> bool:
    """Lines keep coming after the last milestone (the process is alive, not just the end of an excerpt)."""
    return any(x.line > e.line_end for x in v.events) or v.srv.last_line > e.line_end + 2


@detector("dead")
def dead(run: Run, st: ServiceState, opts: dict) -> Iterator[Symptom]:
    """The engine died while serving: a fatal engine error, EngineDeadError, a dead EngineCore or worker —
    not after a deliberate shutdown."""
    lc, v = st.lifecycle, st.view
    if not lc.serving:
        return
    start = v.ready_line or 0
    fatal = [e for e in v.of(*FATAL, "cuda_error", after=start) if not v.in_shutdown(e.line)]
    fatal = [e for e in fatal if e.kind != "cuda_error" or e.level in ("ERROR", "CRITICAL") or e.line != e.line_end]
    if not fatal:
        return
    root = fatal[0]
    if root.kind == "engine_core_died" and v.graceful_line is not None and root.ts is not None:
        g = next((e for e in v.events if e.line == v.graceful_line), None)
        failed_between = g is not None and any(
            x.kind in ("request_failed", "stream_error", "engine_dead") for x in v.events if root.line < x.line < g.line)
        if g is not None and g.ts is not None and 0 <= (g.ts - root.ts).total_seconds() <= 3 and not failed_between:
            return  # Ctrl-C reached the engine core before the API server logged the shutdown (nothing failed)
    # the real exception is often logged (ERROR + traceback) just before the engine-dead lines
    before = [e for e in v.events if start < e.line < root.line and e.fields.get("exc_type") and e.level == "ERROR"
              and root.ts and e.ts and 0 <= (root.ts - e.ts).total_seconds() <= 30]
    first_e = before[0] if before else root
    am = u.aftermath(v, root)
    dmg = []
    if am.failed_requests:
        dmg.append(f"{am.failed_requests} requests failed")
    if am.http_5xx:
        dmg.append(f"{am.http_5xx} HTTP 5xx")
    evid = [_key_line(first_e), u.first(first_e), u.first(root)] + am.evidence[:6]
    recovered = lc.restarted or any(x.busy and not x.stuck and x.ts and root.ts and x.ts > root.ts
                                    for x in st.intervals[-3:])
    what = ("the orchestrator stopped the replica after its health check got no answer in time"
            if root.kind == "replica_stopped" and first_e is root else describe(first_e)[:160])
    yield Symptom(
        "dead", st.file, st.index, Severity.CRITICAL,
        f"The engine died while serving: {what.rstrip('. ')}" + (f" ({', '.join(dmg)})" if dmg else "") + ".",
        onset=first_e.ts or root.ts, end=am.last_ts or root.ts, trend="recovered" if recovered else "stable",
        evidence=u.dedupe(evid, 10), process=first_e.process or root.process,
        data={"failed_requests": am.failed_requests, "http_5xx": am.http_5xx, "root_line": first_e.line,
              # an orchestrator killed it for not answering its health check: busy or stuck, not crashed
              "health_check": root.kind == "replica_stopped"},
    )
