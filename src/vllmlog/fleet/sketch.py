"""The streaming path's fleet percentiles: a DDSketch per replica and latency metric, merged by the reduce.

The exact path reads every request's value back from the Parquet rows (``rows.fleet_latency``: Polars sorts the
column, ``numbers.percentile`` interpolates — bit for bit ``analyze``'s numbers). That needs every worker's rows
where the driver can read them. The sketch path needs nothing but the replicas' results: each map returns, per
latency metric and basis, a `DDSketch <https://arxiv.org/abs/1908.10693>`_ (the ``ddsketch`` package, Datadog's
reference implementation; serialised in its protobuf format, so other DDSketch libraries read it) of a few KB,
and ``SketchMerger`` folds results in as they arrive, in constant memory per metric — a fleet summarised while
its replicas are still being read, or on a cluster without shared storage.

**Error**: DDSketch is relative-error: with ``RELATIVE_ACCURACY`` α = 0.01, the p-th percentile it returns is
within ±1 % of the value of the request at rank ⌊p/100 · (n − 1)⌋ (0-based, ascending) — whatever the number of
requests or replicas, and merging loses nothing. The exact path interpolates between the two ranks around
p/100 · (n − 1) (numpy's linear method), so the two also differ by that interpolation where neighbouring values
are far apart (a few requests). ``count``, ``min``, ``max`` are exact; ``mean`` is the replicas' exact sums
(``math.fsum``) added. Every distribution says where it came from: ``"from": "rows"`` (``"exact": true``) or
``"from": "sketch"`` (``"exact": false``, ``"relative_accuracy"``).
"""

from __future__ import annotations

import base64
import math
from typing import Any, Iterable, Sequence

from ..numbers import LATENCIES, MEASURED, PCTS, basis_of, latency_value

RELATIVE_ACCURACY = 0.01
#: The distributions a replica sketches: the latency metrics, and an aborted request's arrival → abort time.
METRICS = LATENCIES + ("time_to_abort_s",)


def _new() -> Any:
    from ddsketch import DDSketch

    return DDSketch(RELATIVE_ACCURACY)


def _dump(sk: Any, values_sum: float, lo: float, hi: float, sources: dict[str, int]) -> dict[str, Any]:
    from ddsketch.pb.proto import DDSketchProto

    return {"count": int(sk.count), "sum": values_sum, "min": lo, "max": hi, "sources": dict(sorted(sources.items())),
            "ddsketch": base64.b64encode(DDSketchProto.to_proto(sk).SerializeToString()).decode("ascii")}


def _load(d: dict[str, Any]) -> Any:
    from ddsketch.pb.ddsketch_pb2 import DDSketch as Proto
    from ddsketch.pb.proto import DDSketchProto

    p = Proto()
    p.ParseFromString(base64.b64decode(d["ddsketch"]))
    return DDSketchProto.from_proto(p)


def replica_sketches(journeys: Iterable[Any]) -> dict[str, Any]:
    """Per metric and basis (``measured`` / ``estimated``), the sketch of one replica's values — the same values,
    by the same gate (``numbers.latency_value``), that its Parquet rows hold."""
    acc: dict[tuple[str, str], tuple[Any, list[float], dict[str, int]]] = {}

    def put(m: str, basis: str, v: float, src: str) -> None:
        a = acc.get((m, basis))
        if a is None:
            a = acc[(m, basis)] = (_new(), [], {})
        a[0].add(v)
        a[1].append(v)
        a[2][src] = a[2].get(src, 0) + 1

    for j in journeys:
        for m in LATENCIES:
            vb = latency_value(j, m)
            if vb is not None:
                put(m, vb[1], float(vb[0]), j.sources.get(m, "derived"))
        if j.status == "aborted" and j.e2e_s is not None:
            src = j.sources.get("e2e_s", "derived")
            put("time_to_abort_s", basis_of(src), float(j.e2e_s), src)
    out: dict[str, Any] = {"relative_accuracy": RELATIVE_ACCURACY}
    for (m, basis), (sk, vals, srcs) in sorted(acc.items()):
        out.setdefault(m, {})[basis] = _dump(sk, math.fsum(vals), min(vals), max(vals), srcs)
    return out


class SketchMerger:
    """Fold replica results' sketches in (``add``, in any order — the sum is taken in replica-name order at the
    end so the answer does not depend on it), then ``latency()``: the fleet distributions."""

    def __init__(self) -> None:
        self._parts: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}

    def add(self, result: dict[str, Any]) -> None:
        sks = result.get("sketches") or {}
        for m in METRICS:
            for basis, d in (sks.get(m) or {}).items():
                self._parts.setdefault(m, []).append((result["replica"], basis, d))

    def latency(self) -> dict[str, Any]:
        """The same shape as ``rows.fleet_latency``, from the sketches."""
        out: dict[str, Any] = {}
        for m in METRICS:
            parts = sorted(self._parts.get(m, []), key=lambda t: (t[0], t[1]))
            counts = {b: sum(d["count"] for _, bb, d in parts if bb == b) for b in ("measured", "estimated")}
            basis = "measured" if counts["measured"] else ("estimated" if counts["estimated"] else None)
            use = [d for _, b, d in parts if b == basis]
            out[m] = _describe(use, basis)
            if m != "time_to_abort_s":
                out[m]["excluded"] = {"estimated": counts["estimated"] if basis == "measured" else 0}
                out[m]["resolution_s"] = 1.0 if basis == "estimated" else None
        return out


def _describe(parts: Sequence[dict[str, Any]], basis: str | None) -> dict[str, Any]:
    n = sum(d["count"] for d in parts)
    d: dict[str, Any] = {"count": n}
    sk = None
    for p in parts:
        s = _load(p)
        if sk is None:
            sk = s
        else:
            sk.merge(s)
    for p in PCTS:
        d[f"p{p}"] = float(sk.get_quantile_value(p / 100)) if sk is not None and n else None
    d["mean"] = math.fsum(p["sum"] for p in parts) / n if n else None
    d["min"] = min((p["min"] for p in parts), default=None)
    d["max"] = max((p["max"] for p in parts), default=None)
    d["basis"] = basis
    sources: dict[str, int] = {}
    for p in parts:
        for k, v in p["sources"].items():
            sources[k] = sources.get(k, 0) + v
    d["sources"] = {k: v for k, v in sorted(sources.items()) if (k in MEASURED) == (basis == "measured")}
    d["from"] = "sketch"
    d["exact"] = False
    d["relative_accuracy"] = RELATIVE_ACCURACY
    return d


def merged_latency(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The fleet distributions from the replicas' sketches."""
    m = SketchMerger()
    for r in results:
        m.add(r)
    return m.latency()
