"""``fleet --prometheus``: each replica's ``/metrics`` history beside its log.

A source is a Prometheus server (``http://prom:9090``: its HTTP API) or saved exposition snapshots (files,
directories, globs of ``*.prom`` / ``*.txt``; times from a sibling ``*index.csv``, else the files' mtimes, as
``vllmlog metrics`` reads them). The driver maps each Prometheus target to the replica it is — by a target label
naming it (``pod``, ``kubernetes_pod_name``, ``pod_name``, ``replica``, ``hostname``, ``host``) or the host part of
its ``instance`` (``gpu-07:8000`` → replica ``gpu-07``) — and sends the worker only the URL and the target's
selector (or the snapshot files, and the ``instance`` to keep of a federated snapshot holding many). A snapshot
file with no ``instance`` label belongs to the replica its file name (or its directory's) starts with, as a trace
file does. The worker pulls or reads its own history and adds it to the run as ``analyze --prometheus`` does
(``prommetrics.merge.add_history``: a source of its own, ``source_kind="prometheus"``), so the diagnosis sees the
same as ``analyze``'s and the fleet's KV / queue series (``grid``) take the metrics where the log has no stats
line in a bucket.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any, Sequence

from ..errors import InputError
from .inputs import ReplicaSpec

#: Target labels that name a replica, most specific first (``instance``'s host part is tried last).
NAME_LABELS = ("pod", "kubernetes_pod_name", "pod_name", "replica", "hostname", "host")
_SNAP = re.compile(r"\.(prom|txt|metrics)$", re.I)
_INSTANCE = re.compile(r'\binstance="((?:[^"\\]|\\.)*)"')
_PROBE = '{__name__=~"vllm:(num_requests_running|num_requests_waiting|kv_cache_usage_perc|gpu_cache_usage_perc)"}'


def is_api(src: str) -> bool:
    """True for a Prometheus server URL (http/https)."""
    return src.startswith(("http://", "https://"))


def owner(labels: dict[str, str], names: Sequence[str]) -> str | None:
    """The replica a target's labels name (its full name, or its last path component), else None."""
    short: dict[str, set[str]] = {}
    for n in names:
        short.setdefault(n, set()).add(n)
        short.setdefault(n.rsplit("/", 1)[-1], set()).add(n)
    cands = [labels.get(k) for k in NAME_LABELS]
    inst = labels.get("instance")
    if inst:
        cands += [inst, inst.rsplit(":", 1)[0] if not inst.startswith("[") else inst.split("]")[0][1:]]
    for c in cands:
        if c and len(short.get(c, ())) == 1:
            return next(iter(short[c]))
    return None


def api_targets(url: str, timeout_s: float = 30.0) -> list[dict[str, str]]:
    """The label sets (without ``__name__``) of the vLLM targets a Prometheus server holds any history of."""
    import httpx

    try:
        with httpx.Client(timeout=timeout_s) as c:
            resp = c.get(url.rstrip("/") + "/api/v1/series", params={"match[]": _PROBE})
            body = resp.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise InputError(f"{url}: cannot list Prometheus targets ({type(exc).__name__}: {exc})",
                         hint="pass the Prometheus base URL, e.g. http://localhost:9090") from exc
    if body.get("status") != "success":
        raise InputError(f"{url}: {body.get('errorType', resp.status_code)}: {body.get('error', '')}")
    seen: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for s in body.get("data", []):
        lab = {k: v for k, v in s.items() if k in NAME_LABELS or k in ("instance", "job")}
        seen.setdefault(tuple(sorted(lab.items())), lab)
    return list(seen.values())


def _snapshot_files(src: str) -> list[str]:
    if os.path.isdir(src):
        out = []
        for root, dirs, files in os.walk(src):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            out += [os.path.join(root, f) for f in sorted(files) if _SNAP.search(f)]
        return out
    if any(c in src for c in "*?["):
        return sorted(glob.glob(src, recursive=True))
    if os.path.exists(src):
        return [src]
    raise InputError(f"--prometheus {src}: no such file, directory or URL",
                     hint="pass a Prometheus server URL (http://host:9090) or saved /metrics snapshots")


def _instances(path: str) -> list[str]:
    """The ``instance`` labels a snapshot file's samples carry (a federated snapshot), in order."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    return list(dict.fromkeys(_INSTANCE.findall(text)))


def with_prometheus(replicas: list[ReplicaSpec], sources: Sequence[str]) -> tuple[list[ReplicaSpec], dict[str, Any]]:
    """Each replica with its ``/metrics`` sources; and a summary (targets mapped, unmapped, replicas without)."""
    names = [r.name for r in replicas]
    got: dict[str, list[dict[str, Any]]] = {}
    unmapped: list[str] = []
    for src in sources:
        if is_api(src):
            for lab in api_targets(src):
                rep = owner(lab, names)
                if rep is None:
                    unmapped.append(f"{src} {lab.get('instance') or lab}")
                    continue
                sel = ",".join(f'{k}="{_q(v)}"' for k, v in sorted(lab.items()))
                got.setdefault(rep, []).append({"url": src, "match": sel, "target": lab.get("instance") or rep})
            continue
        files = _snapshot_files(src)
        if not files:
            raise InputError(f"--prometheus {src}: no snapshot files (*.prom, *.txt) found")
        by_key: dict[tuple[str, str | None], list[str]] = {}
        for f in files:
            insts = _instances(f)
            if insts:
                for inst in insts:
                    rep = owner({"instance": inst}, names)
                    if rep is None:
                        unmapped.append(f"{f} instance={inst}")
                    else:
                        by_key.setdefault((rep, inst), []).append(f)
                continue
            rep = _named_by_file(f, names)
            if rep is None:
                raise InputError(f"snapshot {os.path.basename(f)} names no replica",
                                 hint="name it after its replica (<replica>-metrics-N.prom), put it in a directory "
                                 "named after it, or save it with an instance label (/federate)")
            by_key.setdefault((rep, None), []).append(f)
        for (rep, inst), fs in by_key.items():
            got.setdefault(rep, []).append({"files": fs, "instance": inst, "target": inst or rep})
    out = [ReplicaSpec(r.name, r.paths, r.traces, tuple(got.get(r.name, ()))) for r in replicas]
    summary = {"sources": list(sources), "replicas_with_metrics": sorted(got),
               "replicas_without": sorted(set(names) - set(got)), "unmapped_targets": sorted(set(unmapped))}
    return out, summary


def _q(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"')


def _named_by_file(path: str, names: Sequence[str]) -> str | None:
    base, parent = os.path.basename(path), os.path.basename(os.path.dirname(path))
    by_short: dict[str, list[str]] = {}
    for n in names:
        by_short.setdefault(n.rsplit("/", 1)[-1], []).append(n)
    for cand in (base, parent):
        hits = sorted((s for s in by_short if cand.startswith(s) and len(by_short[s]) == 1), key=len, reverse=True)
        if hits:
            return by_short[hits[0]][0]
    return None


# --------------------------------------------------------------------------- in the worker

def load_history(run: Any, sources: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pull / read one replica's ``/metrics`` sources and add them to ``run``; what was added, per target."""
    import math

    from ..prommetrics.exposition import Snapshot, load_snapshot_files
    from ..prommetrics.merge import add_history, history_window
    from ..prommetrics.promapi import fetch_history

    out: list[dict[str, Any]] = []
    for src in sources:
        kind = "prometheus API" if "url" in src else "snapshots"
        t = {"target": src["target"], "source": src.get("url") or f"{len(src['files'])} snapshot file(s)",
             "kind": kind, "points": 0, "error": None}
        out.append(t)
        try:
            if "url" in src:
                since, end = history_window(run, None, None)
                hist = fetch_history(src["url"], since, until=end, step_s=float(max(1, math.ceil(since / 600))),
                                     match=src["match"])
                hist = {src["target"]: [s for snaps in hist.values() for s in snaps]} if hist else {}
            else:
                snaps = load_snapshot_files(list(src["files"]))
                if src.get("instance"):
                    snaps = [Snapshot(source=s.source, time=s.time, families=s.families, time_basis=s.time_basis,
                                      samples=[x for x in s.samples if x.labels.get("instance") == src["instance"]])
                             for s in snaps]
                hist = {src["target"]: snaps}
        except InputError as exc:  # the metrics are extra: the replica's log is still analysed
            t["error"] = exc.message
            continue
        t["points"] = add_history(run, hist)
    return {"targets": out, "points": sum(t["points"] for t in out),
            "errors": [f"{t['target']}: {t['error']}" for t in out if t["error"]]}
