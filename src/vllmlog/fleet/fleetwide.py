"""Fleet-wide incidents: the same symptom on many replicas within minutes is one incident, not N copies.

Each replica's diagnosis already found its symptoms (``dead``, ``stalled``, ``queueing`` …, with their onset).
Symptoms of one kind are taken in onset order and clustered: a cluster holds the symptoms whose onset lies
within ``window_s`` of the cluster's first onset. A cluster seen on at least ``max(2, min(⌈min_share × N⌉, 5))`` of
the N replicas is a fleet-wide incident: one upstream cause (a deploy, the router, a load surge, shared storage or
network) is then likelier than N independent faults, and the incident says which, from what the replicas
share — their causes, a rise of the fleet's arrivals before the onset, how tightly the onsets line up.
A symptom on fewer replicas stays each replica's own incident.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timezone
from typing import Any, Sequence

from . import grid as gridmod

_SEV = {"critical": 3, "error": 2, "warning": 1, "info": 0}

#: What many replicas showing the same symptom at once points to, upstream of them.
UPSTREAM: dict[str, str] = {
    "dead": "a shared cause killed them together: a deploy or config rollout, a node-pool or driver event, an OOM "
            "policy, or a shared dependency (model storage, network) failing",
    "never_ready": "a rollout that cannot start: a new image, model path or flag set applied to every replica, or "
                   "the model storage they all load from",
    "stalled": "a shared dependency stopped them together: the network (NCCL / distributed), a storage mount, or "
               "host contention on the nodes they share",
    "failing": "the same requests fail everywhere: a client release sending requests the servers reject, or a "
               "shared dependency the servers call",
    "rejected": "clients (behind the router) send requests every replica refuses: a client release or a changed "
                "request shape; look at the callers, not the servers",
    "queueing": "more load than the fleet can take: an upstream traffic surge or capacity loss (replicas drained "
                "or down) — scale out or shed load at the router",
    "thrashing": "the workload changed for everyone (longer prompts or outputs from the clients), or a rollout "
                 "shrank the KV cache",
    "aborting": "clients or the router give up everywhere: a client/proxy timeout shorter than the fleet's latency, "
                "or an upstream that cancels requests",
    "slow": "every replica slowed at once: a rollout (model, flags, image), shared hardware contention, or heavier "
            "requests from the clients",
}
#: This many replicas with the same symptom at once are "many" in any fleet (a node's 8 GPUs, a rack, an AZ):
#: in a fleet of 100, five replicas dying within minutes is one event, not five.
ENOUGH = 5
#: Symptom kinds whose fleet-wide form a load surge explains (checked against the fleet's arrivals).
LOAD_KINDS = frozenset({"queueing", "slow", "aborting", "thrashing"})


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, tz=timezone.utc).replace(tzinfo=None).isoformat() if t is not None else None


def _surge(merged: dict[str, Any], onset: float, span_s: float) -> dict[str, Any] | None:
    """The fleet's arrivals per second in ``span_s`` before vs after ``onset`` (from the merged grid)."""
    if not merged.get("n"):
        return None
    step = merged["step"]
    i0 = gridmod.at(merged, onset)
    if i0 is None:
        return None
    k = max(1, int(math.ceil(span_s / step)))
    before = merged["arrivals"][max(0, i0 - k):i0]
    after = merged["arrivals"][i0:i0 + k]
    if not before or not after:
        return None
    b = sum(before) / (len(before) * step)
    a = sum(after) / (len(after) * step)
    return {"before_per_s": b, "after_per_s": a, "ratio": (a / b) if b else None, "span_s": k * step}


def _local_ids(grp: list[tuple[float, str, dict[str, Any]]], by_name: dict[str, dict[str, Any]], kind: str) -> set:
    """(replica, local incident id) of the incidents a cluster's symptoms belong to."""
    out = set()
    for t, rep, _ in grp:
        for i in by_name[rep]["incidents"]:
            if kind in (i.get("symptoms") or []) or i["impact"] == kind:
                out.add((rep, i["id"]))
    return out


def _merge_related(clusters: list[tuple[str, list[Any]]], by_name: dict[str, dict[str, Any]]
                   ) -> list[tuple[str, list[Any], list[str]]]:
    """Clusters whose symptoms belong to the same local incidents (a death and the failures it caused, a queue and
    the aborts that followed) are one fleet-wide incident, headed by the worst symptom kind."""
    from ..symptoms.base import IMPACT

    order = sorted(range(len(clusters)), key=lambda i: (-IMPACT.get(clusters[i][0], 0), clusters[i][1][0][0]))
    ids = [_local_ids(c[1], by_name, c[0]) for c in clusters]
    taken: set[int] = set()
    out = []
    for i in order:
        if i in taken:
            continue
        taken.add(i)
        kind, grp = clusters[i]
        followers = []
        for j in order:
            if j in taken or not ids[i] or not ids[j]:
                continue
            if len(ids[i] & ids[j]) * 2 >= min(len(ids[i]), len(ids[j])):
                taken.add(j)
                followers.append(clusters[j][0])
        out.append((kind, grp, followers))
    return out


def fleet_incidents(results: Sequence[dict[str, Any]], merged: dict[str, Any], *, window_s: float = 300.0,
                    min_share: float = 0.25) -> list[dict[str, Any]]:
    """Fleet-wide incidents, worst first, each with its member replicas and an upstream hypothesis."""
    n = len(results)
    if n < 2:
        return []
    need = max(2, min(math.ceil(min_share * n), ENOUGH))
    by_kind: dict[str, list[tuple[float, str, dict[str, Any]]]] = {}
    for r in results:
        for s in r.get("symptoms") or []:
            if s.get("onset_s") is None:
                continue
            by_kind.setdefault(s["kind"], []).append((s["onset_s"], r["replica"], s))
    clusters: list[tuple[str, list[Any]]] = []
    for kind, items in by_kind.items():
        items.sort(key=lambda t: (t[0], t[1]))
        i = 0
        while i < len(items):
            j = i
            while j + 1 < len(items) and items[j + 1][0] - items[i][0] <= window_s:
                j += 1
            grp = items[i:j + 1]
            if len({rep for _, rep, _ in grp}) >= need:
                clusters.append((kind, grp))
                i = j + 1
            else:
                i += 1
    clusters = _merge_related(clusters, {r["replica"]: r for r in results})
    out = []
    by_name = {r["replica"]: r for r in results}
    for kind, grp, followers in clusters:
        first: dict[str, tuple[float, dict[str, Any]]] = {}
        for t, rep, s in grp:
            if rep not in first:
                first[rep] = (t, s)
        onsets = sorted(t for t, _ in first.values())
        ends = [s.get("end_s") for _, _, s in grp if s.get("end_s") is not None]
        sev = max((s["severity"] for _, _, s in grp), key=lambda v: _SEV.get(v, 0))
        members = []
        causes: Counter[str] = Counter()
        for rep, (t, s) in sorted(first.items(), key=lambda kv: (kv[1][0], kv[0])):
            local = [i for i in by_name[rep]["incidents"] if kind in (i.get("symptoms") or []) or i["impact"] == kind]
            local.sort(key=lambda i: abs((i.get("onset_s") or t) - t))
            inc = local[0] if local else None
            if inc and inc.get("cause"):
                causes[inc["cause"]["code"]] += 1
            members.append({"replica": rep, "onset": s["onset"], "headline": s["headline"], "severity": s["severity"],
                            "incident": inc["id"] if inc else None,
                            "cause": (inc["cause"]["code"] if inc and inc.get("cause") else None)})
        spread = onsets[-1] - onsets[0]
        share = len(first) / n
        hyp = [UPSTREAM.get(kind, "a cause upstream of the replicas")]
        evidence = [f"{len(first)} of {n} replicas show '{kind}' with onsets {spread:.0f} s apart"]
        surge = _surge(merged, onsets[0], max(window_s, 2 * merged.get("step", 60.0)))
        if kind in LOAD_KINDS and surge and surge["ratio"] is not None and surge["ratio"] >= 1.5:
            hyp.insert(0, f"a load surge: the fleet's arrivals rose {surge['ratio']:.1f}× "
                          f"({surge['before_per_s']:.2f} → {surge['after_per_s']:.2f} requests/s) at the onset")
        if causes:
            code, k = causes.most_common(1)[0]
            evidence.append(f"{k} of {len(first)} explained locally by {code}")
        conf = "high" if share >= 0.5 and spread <= window_s / 2 else "medium" if share >= 0.5 or spread <= 60 else "low"
        out.append({
            "kind": kind, "severity": sev, "replicas_affected": len(first), "replicas_total": n, "share": share,
            "onset": _iso(onsets[0]), "end": _iso(max(ends)) if ends else None, "onset_spread_s": spread,
            "upstream_hypothesis": hyp, "confidence": conf, "evidence": evidence,
            "common_cause": (causes.most_common(1)[0][0] if causes else None), "load": surge,
            "headline": f"{kind} on {len(first)} of {n} replicas within {max(spread, 1.0):.0f} s"
                        + (f", then {', '.join(followers)}" if followers else ""),
            "followed_by": followers,
            "replicas": members,
        })
    out.sort(key=lambda f: (-_SEV.get(f["severity"], 0), -f["replicas_affected"], f["onset"] or "", f["kind"]))
    for i, f in enumerate(out, 1):
        f["id"] = f"F{i}"
    return [{"id": f.pop("id"), **f} for f in out]
