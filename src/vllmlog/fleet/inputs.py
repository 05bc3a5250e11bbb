"""Fleet inputs: PATH / GLOB / DIR arguments → one ``ReplicaSpec`` per replica, its pieces in order.

A replica is named from its path: the file name without rotation suffixes (``.gz``, ``.1``, ``-20261130``)
and without ``.log``/``.txt``/``.out`` — a ``kubectl logs`` dump ``vllm-7d9f-abcde.log`` is replica
``vllm-7d9f-abcde``. A Kubernetes node's log tree (``/var/log/pods/<ns>_<pod>_<uid>/<container>/0.log``)
names the replica after the pod. Rotated pieces of one replica (``x.log.2.gz``, ``x.log.1``, ``x.log``) are
one replica whose pieces are read oldest first as one stream. Two replicas whose names collide (the same
file name in two directories: every host's ``vllm.log``) are named by the host their logs state
(``fleet.hosts``), else told apart by their parent directory.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..errors import InputError

#: File names a directory walk takes as logs (anything else in a tree — CSV, JSON truth files, .prom
#: snapshots, reports — is left out and counted in ``Discovery.ignored``).
_LOGLIKE = re.compile(r"(\.log|\.txt)(\.\d+|[-.]\d{8}(?:[-_]?\d+)?)?(\.gz)?$|\.gz$|^\d+\.log", re.I)
_NOTLOG = re.compile(r"\.(jsonl?|csv|prom|parquet|html?|md)(\.gz)?$", re.I)
_GZ = re.compile(r"\.gz$", re.I)
_NUM = re.compile(r"\.(\d+)$")
_DATE = re.compile(r"[-.](\d{8}(?:[-_]?\d+)?)$")
_EXT = re.compile(r"\.(log|txt|out|err)$", re.I)
_POD_DIR = re.compile(r"^(?P<ns>[^_]+)_(?P<pod>[^_]+)_[0-9a-f-]{16,}$")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)


@dataclass(frozen=True)
class ReplicaSpec:
    """One replica: its name, its pieces (paths or URLs), oldest first, its trace files (OTLP JSON lines) and its
    ``/metrics`` history sources (``fleet.prom``)."""

    name: str
    paths: tuple[str, ...]
    traces: tuple[str, ...] = ()
    metrics: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "paths": list(self.paths)}
        if self.traces:
            d["traces"] = list(self.traces)
        if self.metrics:
            d["metrics"] = [dict(m) for m in self.metrics]
        return d


@dataclass
class Discovery:
    """What the arguments named: the replicas, and the files of a directory walk that were not logs."""

    replicas: list[ReplicaSpec]
    ignored: list[str] = field(default_factory=list)


def _split(path: str) -> tuple[str, tuple[int, Any]]:
    """A piece's base name (rotation suffixes off) and its age key (older sorts first)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    name = _GZ.sub("", name)
    age: tuple[int, Any] = (2, 0)  # the live file: newest
    m = _NUM.search(name)
    if m and _EXT.search(name[: m.start()]):
        age = (1, -int(m.group(1)))  # logrotate: x.log.3 is older than x.log.1
        name = name[: m.start()]
    else:
        m = _DATE.search(name)
        if m and (_EXT.search(name[: m.start()]) or "." not in name[: m.start()]):
            age = (0, m.group(1))  # dateext: x.log-20261129 before x.log-20261130
            name = name[: m.start()]
    name = _EXT.sub("", name)
    return name, age


def _pod_name(path: str, stem: str) -> str:
    """``/var/log/pods/ns_pod_uid/container/0.log`` → ``pod``; other numeric stems → their folder's name."""
    parts = os.path.normpath(path).split(os.sep)
    if len(parts) >= 3:
        m = _POD_DIR.match(parts[-3])
        if m:
            return m.group("pod")
    if len(parts) >= 2 and parts[-2]:
        return parts[-2]
    return stem


def replica_key(path: str) -> tuple[str, str, tuple[int, Any]]:
    """(directory, replica name, age key) of one piece."""
    d = os.path.dirname(path.rstrip("/"))
    stem, age = _split(path)
    if stem.isdigit():
        stem = _pod_name(path, stem)
        d = os.path.dirname(d)
    return d, stem, age


def _expand_url(arg: str, ignored: list[str]) -> list[str]:
    """A URL (``s3://bucket/day/``, ``gs://b/*.log.gz``, ``file:///var/log/x.log``) through fsspec: a glob or a
    folder lists its files (the workers open them; the driver reads none)."""
    try:
        import fsspec  # type: ignore[import-not-found]
    except ImportError:
        raise InputError(f"{arg}: reading URLs needs fsspec", hint="pip install 'vllmlog[remote]' (and s3fs, gcsfs … "
                         "for those filesystems)") from None
    fs, _, (path,) = fsspec.get_fs_token_paths(arg) if not any(c in arg for c in "*?[") else (None, None, (None,))
    if fs is None:
        fs, _, found = fsspec.get_fs_token_paths(arg)
        hits = sorted(found)
        if not hits:
            raise InputError(f"no file matches {arg!r}", hint="check the URL and the pattern")
    elif fs.isdir(path):
        hits = sorted(fs.find(path))
    elif fs.exists(path):
        return [arg]
    else:
        raise InputError(f"no such file or directory: {arg}", hint="check the URL")
    out = []
    for h in hits:
        url = fs.unstrip_protocol(h)
        name = h.rsplit("/", 1)[-1]
        (out if _LOGLIKE.search(name) and not _NOTLOG.search(name) else ignored).append(url)
    return out


def _expand(arg: str, ignored: list[str]) -> list[str]:
    if _URL.match(arg):
        return _expand_url(arg, ignored)
    if any(c in arg for c in "*?["):
        hits = sorted(glob.glob(arg, recursive=True))
        if not hits:
            raise InputError(f"no file matches {arg!r}", hint="quote the pattern so the shell does not expand it, "
                             "or check the directory")
        out = []
        for h in hits:
            out.extend(_expand(h, ignored) if os.path.isdir(h) else [h])
        return out
    if os.path.isdir(arg):
        out = []
        for root, dirs, files in os.walk(arg):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for f in sorted(files):
                p = os.path.join(root, f)
                if f.startswith("."):
                    continue
                (out if _LOGLIKE.search(f) and not _NOTLOG.search(f) else ignored).append(p)
        return out
    if not os.path.exists(arg):
        raise InputError(f"no such file or directory: {arg}", hint="pass replica logs, a directory of them or a glob")
    return [arg]


def discover(args: Sequence[str] | str) -> Discovery:
    """Replicas named by ``args`` (files, globs, directories, URLs), sorted by name."""
    if isinstance(args, str):
        args = [args]
    ignored: list[str] = []
    paths: list[str] = []
    seen: set[str] = set()
    for a in args:
        for p in _expand(a, ignored):
            if p not in seen:
                seen.add(p)
                paths.append(p)
    if not paths:
        raise InputError("no log found in " + ", ".join(args), hint="a directory walk takes *.log, *.log.N, *.gz, "
                         "and *.txt files")
    groups: dict[tuple[str, str], list[tuple[tuple[int, Any], str]]] = {}
    for p in paths:
        d, stem, age = replica_key(p)
        groups.setdefault((d, stem), []).append((age, p))
    by_name: dict[str, list[tuple[str, str]]] = {}
    for d, stem in groups:
        by_name.setdefault(stem, []).append((d, stem))
    specs = []
    for stem, keys in by_name.items():
        ordered = {k: tuple(p for _, p in sorted(groups[k], key=lambda t: (t[0], t[1]))) for k in keys}
        hosts = _hosts_of(ordered, set(by_name)) if len(keys) > 1 else {}
        for d, _ in keys:
            name = stem if len(keys) == 1 else hosts.get((d, stem)) or _qualified(d, stem, [k[0] for k in keys])
            specs.append(ReplicaSpec(name, ordered[(d, stem)]))
    specs.sort(key=lambda s: s.name)
    return Discovery(specs, ignored)


def _hosts_of(groups: dict[tuple[str, str], tuple[str, ...]], taken: set[str]) -> dict[tuple[str, str], str]:
    """Replicas whose file names collide (``a/vllm.log``, ``b/vllm.log``), named by the host their log states
    (``fleet.hosts``: journald / syslog / compose prefixes) when each names one host and no two the same;
    otherwise {} (the caller qualifies them by directory)."""
    from .hosts import sniff

    names = {k: sniff(pieces[-1]).host for k, pieces in groups.items()}
    got = list(names.values())
    if None in got or len(set(got)) != len(got) or any(n in taken for n in got):
        return {}
    return names  # type: ignore[return-value]


def _qualified(d: str, stem: str, dirs: Iterable[str]) -> str:
    """The shortest ``parent/…/stem`` that tells this directory's replica from the others of the same name."""
    parts = os.path.normpath(d).split(os.sep) if d else []
    others = [os.path.normpath(o).split(os.sep) if o else [] for o in dirs if o != d]
    for k in range(1, len(parts) + 1):
        tail = parts[-k:]
        if all(o[-k:] != tail for o in others):
            return "/".join(tail + [stem])
    return "/".join(parts + [stem]) or stem


def is_url(path: str) -> bool:
    """True for ``s3://…``, ``gs://…``, ``file://…`` (read through fsspec)."""
    return bool(_URL.match(path))


_TRACE = re.compile(r"\.(otlp\.)?jsonl?(\.gz)?$", re.I)


def with_traces(disc: Discovery, args: Sequence[str]) -> Discovery:
    """Assign trace files (files, globs, directories: ``*.jsonl``/``*.json``, plain or .gz) to replicas: a trace
    file belongs to the replica whose name its file name starts with (the longest such name), so
    ``T1-traced-light-traces.otlp.jsonl`` joins replica ``T1-traced-light``. A trace file that names no replica is
    an ``InputError`` (a silently unjoined trace would look like a replica without traces)."""
    files: list[str] = []
    for a in args:
        if os.path.isdir(a):
            for root, dirs, names in os.walk(a):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                files += [os.path.join(root, n) for n in sorted(names) if _TRACE.search(n)]
        elif any(c in a for c in "*?["):
            files += sorted(glob.glob(a, recursive=True))
        elif os.path.exists(a):
            files.append(a)
        else:
            raise InputError(f"no such trace file or directory: {a}", hint="--traces takes OTLP JSON lines files")
    names = sorted((r.name.rsplit("/", 1)[-1] for r in disc.replicas), key=len, reverse=True)
    by_short: dict[str, list[ReplicaSpec]] = {}
    for r in disc.replicas:
        by_short.setdefault(r.name.rsplit("/", 1)[-1], []).append(r)
    got: dict[str, list[str]] = {}
    for f in files:
        base = os.path.basename(f)
        owner = next((n for n in names if base.startswith(n)), None)
        if owner is None:
            raise InputError(f"trace file {base} names no replica", hint="name it after its replica's log "
                             "(<replica>-traces.otlp.jsonl) or leave it out")
        cands = by_short[owner]
        rep = cands[0] if len(cands) == 1 else next((c for c in cands if os.path.dirname(c.paths[0]) ==
                                                     os.path.dirname(f)), cands[0])
        got.setdefault(rep.name, []).append(f)
    reps = [ReplicaSpec(r.name, r.paths, tuple(got.get(r.name, ()))) for r in disc.replicas]
    return Discovery(reps, disc.ignored)
