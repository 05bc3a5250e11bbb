"""Fleet analysis: many replicas' logs at once, on this machine (a process pool) or on a Ray cluster.

``analyze_fleet(paths)`` discovers the replicas (``inputs``), maps each through the one per-replica pipeline
(``mapper.map_replica``: parse → journeys → series → numbers → diagnosis → a compact dict plus per-request
Parquet rows), and reduces (``reduce.reduce_fleet``): fleet RED/USE with exact percentiles over the rows, a
replica table sorted by health, outliers against peers, router imbalance, fleet-wide incidents.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any, Sequence

from .engines import ENGINES, run_engine
from .inputs import Discovery, ReplicaSpec, discover
from .mapper import map_replica
from .reduce import reduce_fleet

__all__ = ["ENGINES", "Discovery", "FleetAnalysis", "ReplicaSpec", "analyze_fleet", "discover", "map_replica",
           "reduce_fleet"]


@dataclass
class FleetAnalysis:
    """The fleet document (``report``), every replica's compact result, and where the rows were written."""

    report: dict[str, Any]
    replicas: list[dict[str, Any]]
    out_dir: str
    engine: str
    ignored: list[str]

    @property
    def reports_dir(self) -> str:
        """Where the replicas' own HTML reports are (when asked for)."""
        return os.path.abspath(os.path.join(self.out_dir, "replicas"))

    def to_dict(self) -> dict[str, Any]:
        """``vllmlog fleet --json``: the fleet document with each replica's result under ``replica_results``
        (nothing in it depends on the engine, the worker count or the run's timing)."""
        d = dict(self.report)
        d["rows_dir"] = os.path.abspath(os.path.join(self.out_dir, "rows"))
        d["ignored_files"] = list(self.ignored)
        d["replica_results"] = self.replicas
        return d


def analyze_fleet(paths: Sequence[str] | str, *, engine: str = "local", workers: int | None = None,
                  address: str | None = None, out_dir: str | None = None, year: int | None = None,
                  grid_s: float = 60.0, window_s: float = 300.0, min_share: float = 0.25,
                  config: str | None = None, show_prompts: bool = False, mask_ips: bool = False,
                  replica_reports: bool = False, traces: Sequence[str] | None = None,
                  prometheus: Sequence[str] | None = None, percentiles: str = "exact",
                  progress: Any = None) -> FleetAnalysis:
    """Discover, map (with ``engine``), reduce. ``out_dir`` receives ``rows/<replica>.parquet`` (a temporary
    directory when None — the rows then live only as long as the process), and with ``replica_reports`` each
    replica's own HTML report in ``replicas/``. ``traces``: OTLP trace files or directories, each joined to the
    replica it is named after (``inputs.with_traces``). ``prometheus``: Prometheus server URLs or saved ``/metrics``
    snapshots, each target joined to its replica (``prom.with_prometheus``). ``percentiles``: ``exact`` (Polars over
    the Parquet rows the workers write) or ``sketch`` (the replicas' DDSketches merged, ``fleet.sketch``; the workers
    then write no rows — for a cluster without storage every node and the driver share)."""
    if percentiles not in ("exact", "sketch"):
        from ..errors import ConfigError

        raise ConfigError(f"unknown percentiles {percentiles!r}", hint="use exact or sketch")
    disc = discover(paths)
    if traces:
        from .inputs import with_traces

        disc = with_traces(disc, traces)
    out = out_dir or tempfile.mkdtemp(prefix="vllmlog-fleet-")
    rows_dir = os.path.abspath(os.path.join(out, "rows"))
    os.makedirs(rows_dir, exist_ok=True)
    opts = {"year": year, "grid_s": grid_s, "rows_dir": rows_dir if percentiles == "exact" else None, "config": config,
            "show_prompts": show_prompts, "mask_ips": mask_ips,
            "reports_dir": os.path.abspath(os.path.join(out, "replicas")) if replica_reports else None}
    disc = _split_multi_pod(disc, engine, workers, address, out)
    metrics = None
    if prometheus:
        from .prom import with_prometheus

        reps, metrics = with_prometheus(disc.replicas, prometheus)
        disc = Discovery(reps, disc.ignored)
    results = run_engine(engine, disc.replicas, opts, workers=workers, address=address, progress=progress)
    report = reduce_fleet(results, rows_dir=rows_dir, window_s=window_s, min_share=min_share, percentiles=percentiles)
    if metrics is not None:
        metrics["points"] = sum((r.get("metrics") or {}).get("points", 0) for r in results)
        report["metrics"] = metrics
    return FleetAnalysis(report, results, out, engine, disc.ignored)


def _split_multi_pod(disc: Discovery, engine: str, workers: int | None, address: str | None, out: str) -> Discovery:
    """Files holding several replicas' lines become one replica each (split by workers): several pods' ``kubectl
    logs --prefix`` lines (``pods``), or several hosts' / concurrent servers' lines (``hosts``: journald, syslog,
    docker compose prefixes, vLLM's ``(APIServer pid=N)`` tags)."""
    from .hosts import sniff, split_hosts
    from .pods import pods_in, split_pods

    multi = [r for r in disc.replicas if len(pods_in(r.paths[0])) >= 2]
    merged = [r for r in disc.replicas if r not in multi and sniff(r.paths[0]).merged]
    if not multi and not merged:
        return disc
    split_dir = {"split_dir": os.path.abspath(os.path.join(out, "split"))}
    split = []
    if multi:
        split += run_engine(engine, multi, split_dir, workers=workers, address=address, fn=split_pods)
    if merged:
        split += run_engine(engine, merged, split_dir, workers=workers, address=address, fn=split_hosts)
    parents = multi + merged
    keep = [r for r in disc.replicas if r not in parents]
    taken = {r.name for r in keep}
    by_parent = {s["parent"]: s["pods"] for s in split}
    for parent in parents:
        pods = by_parent[parent.name]
        for p in pods:
            name = p["name"] if p["name"] not in taken else f"{parent.name}/{p['name']}"
            taken.add(name)
            keep.append(ReplicaSpec(name, tuple(p["paths"]), parent.traces, parent.metrics))
    keep.sort(key=lambda r: r.name)
    return Discovery(keep, disc.ignored)
