"""D501 nccl-collective-failure."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Probe, Rule, Severity
from .registry import register

_DIST = re.compile(r"Gloo|gloo|ray\.exceptions|RayActorError|collective operation timeout|NCCL error|ncclInternalError|"
                   r"ncclUnhandledCudaError|ncclSystemError|DistNetworkError|Connection reset by peer.*(?:gloo|nccl)", re.I)


_DIST_EXC = re.compile(r"DistBackendError|DistNetworkError|DistStoreError|RayActorError|ActorDiedError|NCCL error|"
                       r"nccl(?:Internal|UnhandledCuda|System|Remote|InvalidUsage)Error|Gloo|collective operation timeout")


_CREATION_TASK = re.compile(r"error raised in its creation task")
_NCCL_OOM = re.compile(r"Cuda failure '?out of memory|CUDA out of memory", re.I)
_CUDA_FAULT = re.compile(r"CUDA error: (?!.*\bnccl)", re.I)
_NCCL_OWN = re.compile(r"NCCL error|nccl\w*Error|collective operation timeout|ncclUnhandledCudaError")

#: A watchdog/timeout line is logged when the wait ends: the collective got stuck before it.
_LATE = re.compile(r"[Ww]atchdog|[Tt]ime(?:d)? ?out")


@register
class NcclCollectiveFailure(Rule):
    """## What it detects
    Distributed communication failures between ranks: the NCCL watchdog's ``Watchdog caught collective
    operation timeout: WorkNCCL(SeqNum=…, OpType=ALLREDUCE …) ran for 600000 ms``, ``NCCL error``,
    Gloo and Ray collective errors, and workers killed by the watchdog (exit code -6).
    ``SeqNum=1`` — the very first collective — points at the transport (P2P, shared memory,
    network), not the model.
    ## Why it matters
    With tensor/pipeline parallelism every step is a collective: one stuck rank hangs the whole
    engine, silently, until the watchdog (10 min by default) kills it.
    ## How to fix
    Test the transport: ``NCCL_P2P_DISABLE=1`` (consumer GPUs, broken P2P/IOMMU), ``NCCL_SHM_DISABLE=1``,
    ``NCCL_IB_DISABLE=1``, ``NCCL_SOCKET_IFNAME=<iface>``, ``--disable-custom-all-reduce``; run with
    ``NCCL_DEBUG=INFO`` and check ``nvidia-smi topo -m``; raise ``--shm-size`` in Docker."""

    code, slug, category, severity = "D501", "nccl-collective-failure", "distributed_nccl", Severity.CRITICAL
    title = "Distributed collective (NCCL/Gloo/Ray) failed or hung"
    explains = ("stalled", "dead", "never_ready", "failing")
    options: dict[str, Any] = {}
    #: a rank killed by OOM makes the others' collectives fail: the OOM is the cause
    consequence_of = ("startup_oom", "runtime_oom")
    consequence_any_time = ()

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """A collective that never completed stops every rank: a stall, then a dead or never-ready engine."""
        return True if symptom.kind in ("stalled", "dead", "never_ready") else None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            # a ProcessGroupNCCL *warning* ("destroy_process_group() was not called before program exit") or info
            # line is no failure: only [E…] lines and watchdog timeouts count
            evs = [e for e in v.of("nccl_timeout", "nccl_error") if not v.in_shutdown(e.line)
                   and not (e.kind == "nccl_error" and e.fields.get("severity") in ("W", "I"))]
            evs += [e for e in v.events if not v.in_shutdown(e.line) and e.kind not in ("nccl_timeout", "nccl_error") and (
                (e.kind in ("log", "traceback", "unparsed") and e.level in ("ERROR", None) and _DIST.search(e.text))
                or _DIST_EXC.search(str(e.fields.get("exc_type") or "") + " " + str(e.fields.get("exc_message") or "")))]
            # a CUDA fault (illegal memory access, device-side assert …) surfaces through Ray's RayTaskError and the NCCL
            # watchdog ("watchdog thread terminated with exception: CUDA error: …"): the kernel fault is the cause, the
            # collective only carried it — unless NCCL itself failed (NCCL error / timeout)
            evs = [e for e in evs if not (_CUDA_FAULT.search(e.text) and not _NCCL_OWN.search(e.text))]
            # a Ray actor whose constructor raised (ActorDiedError "… error raised in its creation task") died of
            # that error, not of a collective; NCCL's "Cuda failure 'out of memory'" reports an OOM the OOM rules own
            ooms = [x.ts for x in v.events if u.is_oom(x) and x.ts is not None]
            evs = [e for e in evs if not _CREATION_TASK.search(e.text)
                   and not (_NCCL_OOM.search(e.text) and any(u.is_oom(x) for x in v.events if x is not e))
                   # the other ranks' collectives fail once one rank died of an OOM: the OOM is the cause
                   and not (ooms and e.ts is not None and -2 <= (e.ts - min(ooms)).total_seconds() <= 120)]
            evs.sort(key=lambda e: e.line)
            if not evs:
                continue
            tmo = [e for e in evs if e.kind == "nccl_timeout"]
            e = tmo[0] if tmo else evs[0]
            f = e.fields
            died = [x for x in v.of("worker_died") if x.line >= e.line]
            seq = f.get("seq")
            first_coll = str(seq) == "1"
            if tmo:
                msg = (f"NCCL {f.get('op') or 'collective'} (SeqNum={seq}) on rank {f.get('rank')} timed out after "
                       f"{u.secs(u.num(f.get('ran_s')) or u.num(f.get('timeout_s')))}")
                msg += "; the very first collective never completed (transport problem)" if first_coll else ""
            else:
                # a worker's "WorkerProc hit an exception." says nothing: quote the exception it carries
                exc = f.get("exc_message")
                msg = "Distributed communication error: " + (
                    f"{str(f.get('exc_type') or 'error').rsplit('.', 1)[-1]}: {exc}"[:160] if exc else u.msg_of(e)[:160])
            if died:
                msg += f"; worker died ({u.exit_code_text(died[0].fields.get('exit_code'))})"
            # NCCL_DEBUG's own warnings just before the failure say which transport broke (/dev/shm, IB, sockets)
            warns = [x for x in v.of("nccl_debug") if x.fields.get("severity") in ("WARN", "ERROR")
                     and x.line <= e.line and (x.ts is None or e.ts is None or (e.ts - x.ts).total_seconds() <= 600)][-3:]
            shm = any("/dev/shm" in x.text for x in warns)
            if warns:
                msg += f"; NCCL warned: {u.msg_of(warns[0]).split('NCCL WARN', 1)[-1].strip()[:120]}"
            fin = self.finding(
                msg + ".", evidence=u.dedupe([u.first(x) for x in warns[:2]] + [u.first(e)]
                                             + [u.first(x) for x in evs if x is not e][:2] + [u.first(x) for x in died[:1]]),
                first_seen=e.ts, last_seen=(died[0].ts if died else evs[-1].ts), count=len(evs), file=v.file,
                process=e.process, server=v.index,
                root_cause=("The ranks initialised NCCL but the first all-reduce never completed: the selected transport "
                            "(P2P/CUMEM, SHM or network) does not work on this host." if first_coll else
                            "A collective between ranks did not complete: a rank is stuck, or the interconnect failed."),
                remediation=("NCCL could not create its shared-memory segment: give the container a larger /dev/shm "
                             "(`docker run --shm-size 16g` / `--ipc=host`, or an emptyDir with medium Memory mounted at "
                             "/dev/shm in Kubernetes), or set `NCCL_SHM_DISABLE=1`." if shm else
                             "Start with `NCCL_P2P_DISABLE=1` (broken GPU peer-to-peer is the usual culprit on consumer "
                            "GPUs/VMs); also try `--disable-custom-all-reduce`, `NCCL_SHM_DISABLE=1`, "
                            "`NCCL_SOCKET_IFNAME=<iface>`; diagnose with `NCCL_DEBUG=INFO` and `nvidia-smi topo -m`."),
                data={"seq": seq, "op": f.get("op"), "timeout_s": f.get("timeout_s"),
                      "logged_late": bool(tmo) or bool(_LATE.search(e.text)),
                      **({"onset_ts": e.ts - timedelta(seconds=ran)} if tmo and e.ts and (ran := u.num(f.get("ran_s"))
                                                                                        or u.num(f.get("timeout_s"))) else {})},
            )
            # the transport NCCL chose is only in NCCL_DEBUG lines (not kept in the Run): ask diagnose to look it up
            fin.probes.append(Probe(v.file, v.srv.first_line, e.line, " via P2P", 2))
            fin.probes.append(Probe(v.file, v.srv.first_line, e.line, " via SHM", 1))
            fin.probes.append(Probe(v.file, v.srv.first_line, e.line, " via NET", 1))
            yield fin
