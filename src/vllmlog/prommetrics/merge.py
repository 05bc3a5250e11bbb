"""Merge Prometheus metric history into a log ``Run``, so the timeline, the rules and the report see
the metric series of an incident beside its log events (``--prometheus URL`` on analyze/timeline)."""

from __future__ import annotations

import calendar
from typing import Any

from .promapi import fetch_history, history_stats_samples

PAD_S = 300.0
"""Seconds of history pulled before the log's first and after its last timestamp."""


def history_window(run: Any, since_s: float | None, until: float | None) -> tuple[float, float | None]:
    """(since seconds, until epoch): explicit values, else the log's own time range padded by 5 minutes.

    Text-log times are naive local time; they are taken as UTC (the usual container clock)."""
    if since_s is not None:
        return since_s, until
    if run.start_ts is None or run.end_ts is None:
        return 3600.0, until
    start = calendar.timegm(run.start_ts.timetuple()) - PAD_S
    end = calendar.timegm(run.end_ts.timetuple()) + PAD_S
    return end - start, end


def merge_prometheus(run: Any, base_url: str, *, since_s: float | None = None, until: float | None = None,
                     step_s: float | None = None, match: str | None = None) -> int:
    """Pull vLLM series from Prometheus and add them to ``run`` as a source of its own; returns samples added.

    Each Prometheus target becomes a pseudo server run (file ``prometheus:<target>``, generation
    ``prometheus``) whose stats samples carry ``source_kind="prometheus"``, so log lines and metric
    points never mix in one series, and evidence from them reads ``prometheus:<target>``."""
    since, end = history_window(run, since_s, until)
    step = step_s or max(1.0, since / 600)  # up to ~600 points per series, as fine as 1 s for short incidents
    return add_history(run, fetch_history(base_url, since, until=end, step_s=step, match=match))


def add_history(run: Any, hist: dict[str, list[Any]]) -> int:
    """Add per-target snapshot lists (``fetch_history``'s, or saved exposition snapshots) to ``run`` as
    ``merge_prometheus`` does; returns samples added."""
    from ..run import ServerRun

    added = 0
    kept = getattr(run, "prometheus", None)
    for target, snaps in hist.items():
        if kept is not None and snaps:
            kept.setdefault(target, []).extend(snaps)  # histograms (request lengths, queue time) for capacity
        rows = history_stats_samples(snaps)
        if not rows:
            continue
        name = f"prometheus:{target}"
        srv = ServerRun(file=name, index=0, start_ts=rows[0].ts, end_ts=rows[-1].ts, first_line=0, last_line=0,
                        generation="prometheus")
        srv.ready = True
        for i, r in enumerate(rows, 1):
            r.file = name
            r.line = i  # the i-th point of the series: evidence reads `prometheus:<target>:i [stats] …`
            r.process = target
        run.servers.append(srv)
        if name not in run.files:
            run.files.append(name)
        run.series.stats.extend(rows)
        added += len(rows)
    return added
