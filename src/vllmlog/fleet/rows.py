"""Per-request rows (Parquet, one file per replica) and the exact fleet percentiles over them.

A row holds what ``numbers.RequestStats`` folds from a journey: its status, its latency values as they enter
the distributions (``numbers.latency_value``: successful requests only, no TPOT for one-token outputs) with
their basis (measured / estimated), and an aborted request's arrival → abort time. The fleet distribution of a
metric follows ``RequestStats.latency_dict`` over the union of the rows: measured values when the fleet has
any (the estimated ones are counted in ``excluded``), else the estimated ones flagged ``basis: estimated``;
percentiles are ``numbers.percentile`` (numpy-linear, bit for bit) over the column Polars sorts — exact, not a
sketch. Memory: one float column at a time, 8 bytes a request held by Polars, never the log lines.
"""

from __future__ import annotations

import math
import os
from typing import Any, Sequence

from ..numbers import LATENCIES, MEASURED, PCTS, basis_of, latency_value, percentile
from .mapper import ROW_BASE, epoch, safe_name


def _schema() -> dict[str, Any]:
    import polars as pl

    s: dict[str, Any] = {"replica": pl.Utf8, "request_id": pl.Utf8, "status": pl.Utf8, "arrival_s": pl.Float64,
                         "end_s": pl.Float64, "prompt_tokens": pl.Int64, "output_tokens": pl.Int64,
                         "http_status": pl.Int64, "preemptions": pl.Int64, "abort_e2e_s": pl.Float64,
                         "abort_basis": pl.Utf8}
    for m in LATENCIES:
        s[m] = pl.Float64
        s[m + "_basis"] = pl.Utf8
        s[m + "_source"] = pl.Utf8
    return s


def write_rows(replica: str, journeys: Sequence[Any], rows_dir: str) -> dict[str, Any]:
    """Write one replica's per-request rows to ``rows_dir/<safe name>.parquet``; returns ``{file, count}``."""
    import polars as pl

    cols: dict[str, list[Any]] = {k: [] for k in _schema()}
    for j in journeys:
        cols["replica"].append(replica)
        cols["request_id"].append(j.request_id)
        cols["status"].append(j.status)
        cols["arrival_s"].append(epoch(j.arrival_ts))
        cols["end_s"].append(epoch(j.finish_ts or j.last_token_ts or j.first_token_ts or j.scheduled_ts or j.arrival_ts))
        cols["prompt_tokens"].append(j.prompt_tokens)
        cols["output_tokens"].append(j.output_tokens)
        cols["http_status"].append(j.http_status)
        cols["preemptions"].append(j.preemptions)
        if j.status == "aborted" and j.e2e_s is not None:
            cols["abort_e2e_s"].append(float(j.e2e_s))
            cols["abort_basis"].append(basis_of(j.sources.get("e2e_s", "derived")))
        else:
            cols["abort_e2e_s"].append(None)
            cols["abort_basis"].append(None)
        for m in LATENCIES:
            vb = latency_value(j, m)
            cols[m].append(vb[0] if vb else None)
            cols[m + "_basis"].append(vb[1] if vb else None)
            cols[m + "_source"].append(j.sources.get(m, "derived") if vb else None)
    os.makedirs(rows_dir, exist_ok=True)
    fname = safe_name(replica) + ".parquet"
    pl.DataFrame(cols, schema=_schema()).write_parquet(os.path.join(rows_dir, fname), statistics=True)
    assert set(ROW_BASE) <= set(cols)
    return {"file": fname, "count": len(journeys)}


def describe_sorted(values: Any) -> dict[str, Any]:
    """``numbers.describe`` of already sorted values held natively (a Polars Series, 8 bytes a value): the same
    ``numbers.percentile`` reads the two order statistics it needs, the mean is ``math.fsum`` over the values as
    they stream out — bit for bit ``describe``'s answer without a Python list of every value."""
    n = len(values)
    out: dict[str, Any] = {"count": n}
    for p in PCTS:
        out[f"p{p}"] = percentile(values, p)
    out["mean"] = math.fsum(values) / n if n else None
    out["min"] = float(values[0]) if n else None
    out["max"] = float(values[n - 1]) if n else None
    return out


def _scan(rows_dir: str, files: Sequence[str]):
    import polars as pl

    paths = [os.path.join(rows_dir, f) for f in files]
    if not paths:
        return pl.DataFrame(schema=_schema()).lazy()
    return pl.scan_parquet(paths)


def fleet_latency(rows_dir: str, files: Sequence[str]) -> dict[str, Any]:
    """Per latency metric, the fleet distribution (same shape as ``numbers.compute(run)["latency"]``)."""
    import polars as pl

    lf = _scan(rows_dir, files)
    out: dict[str, Any] = {}
    for m in LATENCIES:
        b = m + "_basis"
        src = m + "_source"
        counts = {r[b]: r["len"] for r in lf.filter(pl.col(m).is_not_null()).group_by(b).len().collect().to_dicts()}
        basis = "measured" if counts.get("measured") else ("estimated" if counts.get("estimated") else None)
        if basis is None:
            vals: list[float] = []
            sources: dict[str, int] = {}
        else:
            sel = lf.filter(pl.col(m).is_not_null() & (pl.col(b) == basis))
            vals = sel.select(pl.col(m).sort()).collect().get_column(m)
            sources = {r[src]: r["len"] for r in sel.group_by(src).len().sort(src).collect().to_dicts()}
        d = describe_sorted(vals)
        d["basis"] = basis
        if basis == "estimated":
            d["resolution_s"] = 1.0
        else:
            d["resolution_s"] = None
        d["sources"] = {k: v for k, v in sources.items() if (k in MEASURED) == (basis == "measured")}
        d["excluded"] = {"estimated": counts.get("estimated", 0) if basis == "measured" else 0}
        d["from"] = "rows"
        d["exact"] = True
        out[m] = d
    ab = lf.filter(pl.col("abort_e2e_s").is_not_null())
    acounts = {r["abort_basis"]: r["len"] for r in ab.group_by("abort_basis").len().collect().to_dicts()}
    abasis = "measured" if acounts.get("measured") else "estimated"
    avals = ab.filter(pl.col("abort_basis") == abasis).select(pl.col("abort_e2e_s").sort()).collect()
    d = describe_sorted(avals.get_column("abort_e2e_s"))
    d["basis"] = abasis if d["count"] else None
    d["from"] = "rows"
    d["exact"] = True
    out["time_to_abort_s"] = d
    return out


def row_count(rows_dir: str, files: Sequence[str]) -> int:
    """How many rows the replicas' files hold."""
    import polars as pl

    return int(_scan(rows_dir, files).select(pl.len()).collect().item())
