"""The log's own identity: the host and server process a line says it came from, for replicas whose paths say
nothing (every host's file is ``vllm.log``) and for one file that merges several replicas' lines.

A line names its host when a collector put it there — journald / syslog (``Apr 18 09:00:00 gpu-07
vllm@qwen3[5120]: …``: host ``gpu-07``, server process 5120) or docker compose (``vllm-2  | …``: container
``vllm-2``) — and its server process through vLLM's own process tag (``(APIServer pid=7) …``). Child processes
(``(EngineCore_DP0 pid=112)``, ``(Worker pid=…)``, Ray workers with their ``ip=``) are not replicas: without a
journal's pid, a child's lines go with the API server on the same host whose pid is the closest below the
child's (a child is started after its server) — a heuristic, used only for files that hold several concurrent
API servers and no journal. A line without any of these (a traceback, a print) stays with the line before it. A host or container none of whose
lines is vLLM's (the client or proxy beside it in one compose file) is no replica: its lines are left out.

Two API servers (or journal pids) of one host are two replicas only when they run **at the same time** (their
lines interleave); one that starts after the other stopped is the same replica restarting (``vllm@qwen3[5120]``
then ``[6033]``). The driver peeks at a file's head (``pods.SNIFF_BYTES``) to tell a merged file; a worker
splits it (``split_hosts``), like a ``kubectl logs --prefix`` dump (``pods``).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any, Iterable

from .inputs import is_url
from .mapper import _open_piece, safe_name

_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
# journalctl short / syslog: "Sep 30 02:00:05 gpu-07 vllm@qwen3-8b[5120]: "
_JOURNAL = re.compile(rb"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? (?P<host>[\w.-]+) "
                      rb"(?P<ident>[\w./@:-]+?)(?:\[(?P<pid>\d+)\])?: ")
# docker compose: "vllm-1  | " (the container names the replica)
_COMPOSE = re.compile(rb"^(?P<host>[A-Za-z0-9][\w.-]{0,62}?)\s*\| ")
# vLLM's process tag: "(APIServer pid=7) ", "(EngineCore_DP0 pid=112) ", "(RayWorkerWrapper pid=9, ip=10.0.0.2) "
_PROC = re.compile(rb"^\((?P<role>[A-Za-z_][\w]*)?[^()]*?\bpid=(?P<pid>\d+)[^()]*\)")
# a line vLLM wrote: its envelope, its process tags, its name (a host / container with none is no replica: the
# client or proxy beside it in one compose file, systemd)
_VLLM = re.compile(rb"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d|\bvLLM\b|"
                   rb"\((?:APIServer|EngineCore\w*|Worker\w*|VllmWorker\w*|RayWorkerWrapper) pid=")
#: Journal identifiers that are the host's, not a replica's (their lines stay with the line before).
_HOST_IDENTS = {b"systemd", b"kernel", b"systemd-journald", b"containerd", b"dockerd"}


@dataclass(frozen=True)
class LineId:
    """Who a line says it is from: host (journal/compose), root (the server process: a journal pid or an API
    server's pid), child (another process's pid) — each None when the line does not say."""

    host: str | None
    root: int | None
    child: int | None


def line_id(line: bytes) -> LineId:
    """The identity one raw line states."""
    host: str | None = None
    root: int | None = None
    rest = line
    m = _JOURNAL.match(line)
    if m:
        host = m.group("host").decode("utf-8", "replace")
        if m.group("pid") and m.group("ident") not in _HOST_IDENTS:
            root = int(m.group("pid"))
        rest = line[m.end():]
    else:
        m = _COMPOSE.match(line)
        if m:
            host = m.group("host").decode("utf-8", "replace")
            rest = line[m.end():]
    if rest[:1] == b"\x1b":
        rest = _ANSI.sub(b"", rest[:200], count=2) + rest[200:]
    child = None
    p = _PROC.match(rest)
    if p:
        pid = int(p.group("pid"))
        if p.group("role") == b"APIServer":
            if root is None:
                root = pid
        elif root is None:
            child = pid
    return LineId(host, root, child)


@dataclass
class Identity:
    """What a file's head says about who wrote it."""

    hosts: list[str] = field(default_factory=list)
    """Hosts with vLLM lines, in order of appearance."""
    roots: dict[str | None, list[tuple[int, int, int]]] = field(default_factory=dict)
    """Per host: its server processes as (pid, first line index, last line index)."""

    @property
    def host(self) -> str | None:
        """The one host the file names (None when none or several)."""
        return self.hosts[0] if len(self.hosts) == 1 else None

    def concurrent(self) -> bool:
        """Two server processes of one host whose lines interleave (two replicas, not a restart)."""
        for spans in self.roots.values():
            s = sorted(spans, key=lambda t: t[1])
            if any(b[1] < a[2] for a, b in zip(s, s[1:])):
                return True
        return False

    @property
    def merged(self) -> bool:
        """The file holds several replicas' lines (several hosts, or concurrent servers on one)."""
        return len(self.hosts) >= 2 or self.concurrent()


def identity(lines: Iterable[bytes]) -> Identity:
    """The identity of a run of raw lines."""
    ident = Identity()
    spans: dict[tuple[str | None, int], list[int]] = {}
    for i, ln in enumerate(lines):
        li = line_id(ln)
        if li.host is not None and li.host not in ident.hosts and _VLLM.search(ln):
            ident.hosts.append(li.host)
        if li.root is not None:
            sp = spans.setdefault((li.host, li.root), [i, i])
            sp[1] = i
    for (h, pid), (a, b) in spans.items():
        ident.roots.setdefault(h, []).append((pid, a, b))
    return ident


def sniff(path: str) -> Identity:
    """The identity of a local file's head (URLs: none — the driver does not read them)."""
    if is_url(path):
        return Identity()
    from .pods import _head

    return identity(_head(path).split(b"\n"))


# --------------------------------------------------------------------------- splitting a merged file

def split_hosts(spec: dict[str, Any], opts: dict[str, Any]) -> dict[str, Any]:
    """Split one replica's pieces (in order) into one stream per (host, concurrent server) under
    ``opts["split_dir"]/<file>/``; returns ``{"parent": name, "pods": [spec…]}`` as ``pods.split_pods`` does
    (``{"parent", "pods": [spec]}`` unchanged when the file turns out to hold one replica)."""
    out_dir = os.path.join(opts["split_dir"], safe_name(spec["name"]) + "-hosts")
    os.makedirs(out_dir, exist_ok=True)
    parts: dict[tuple[str | None, int | None], Any] = {}
    span: dict[tuple[str | None, int | None], list[int]] = {}
    roots: dict[str | None, list[int]] = {}  # per host, its API servers' pids seen so far
    cur: tuple[str | None, int | None] | None = None
    cur_by_host: dict[str | None, tuple[str | None, int | None]] = {}
    vllm_hosts: set[str | None] = {None}
    pending: list[bytes] = []
    i = 0

    def key_of(li: LineId) -> tuple[str | None, int | None] | None:
        if li.root is not None:
            rs = roots.setdefault(li.host, [])
            if li.root not in rs:
                rs.append(li.root)
            return (li.host, li.root)
        if li.child is not None:
            below = [r for r in roots.get(li.host, []) if r < li.child]
            if below:
                return (li.host, max(below))
        if li.host is not None:
            return cur_by_host.get(li.host, (li.host, None))
        return None

    try:
        for p in spec["paths"]:
            with _open_piece(p) as f:
                for line in f:
                    li = line_id(line)
                    if li.host not in vllm_hosts and _VLLM.search(line):
                        vllm_hosts.add(li.host)
                    k = key_of(li)
                    if k is None:
                        k = cur
                    if k is None:
                        pending.append(line)
                        i += 1
                        continue
                    cur = k
                    cur_by_host[k[0]] = k
                    fh = parts.get(k)
                    if fh is None:
                        fh = parts[k] = open(os.path.join(out_dir, f"part-{len(parts)}.log"), "wb")  # noqa: SIM115
                        span[k] = [i, i]
                        for b in pending:
                            fh.write(b)
                        pending = []
                    fh.write(line)
                    span[k][1] = i
                    i += 1
    finally:
        for fh in parts.values():
            fh.close()
    keys = [k for k in parts if k[0] in vllm_hosts]  # a host without a vLLM line (a client container) is no replica
    if len(keys) <= 1:
        shutil.rmtree(out_dir, ignore_errors=True)
        return {"parent": spec["name"], "pods": [dict(spec)]}
    slots = _slots(keys, span)
    names = _names(slots, str(spec["name"]))
    specs = []
    for slot, name in zip(slots, names):
        dest = os.path.join(out_dir, safe_name(name) + ".log")
        with open(dest, "wb") as out:
            for k in slot:
                src = parts[k].name
                with open(src, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 20)
                os.unlink(src)
        specs.append({"name": name, "paths": [dest]})
    for k in parts:
        if k not in keys:
            os.unlink(parts[k].name)
    return {"parent": spec["name"], "pods": specs}


def _slots(keys: list[tuple[str | None, int | None]], span: dict[Any, list[int]]) -> list[list[Any]]:
    """Group each host's server processes into replicas: one that starts after another of its host ended is
    that replica restarting (the earliest-ended free one); concurrent ones are different replicas."""
    out: list[list[Any]] = []
    by_host: dict[str | None, list[Any]] = {}
    for k in keys:
        by_host.setdefault(k[0], []).append(k)
    for h in sorted(by_host, key=lambda h: min(span[k][0] for k in by_host[h])):
        slots: list[list[Any]] = []
        for k in sorted(by_host[h], key=lambda k: span[k][0]):
            free = [s for s in slots if span[s[-1]][1] < span[k][0]]
            if free:
                min(free, key=lambda s: span[s[-1]][1]).append(k)
            else:
                slots.append([k])
        out.extend(slots)
    return out


def _names(slots: list[list[Any]], parent: str) -> list[str]:
    """``host`` for a host's only replica, ``host-pidN`` (its first server's pid) for one of several; a file
    without hosts: ``<file>-pidN``."""
    per_host: dict[str | None, int] = {}
    for s in slots:
        per_host[s[0][0]] = per_host.get(s[0][0], 0) + 1
    names = []
    for s in slots:
        host, pid = s[0]
        base = host if host is not None else parent.rsplit("/", 1)[-1]
        if host is not None and per_host[host] == 1:
            names.append(base)
        else:
            names.append(f"{base}-pid{pid}" if pid is not None else base)
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}-{seen[n]}")
    return out
