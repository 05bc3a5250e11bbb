"""Journeys and engine series as tables: CSV, JSON, JSON lines and Parquet (for DuckDB, Polars, pandas).

Flat columns, one row per journey / stats sample / decode second. Timestamps are ISO 8601 strings in
CSV and JSON, and real timestamp columns in Parquet. ``sources`` stays an object in JSON; in CSV and
Parquet it becomes one ``<number>_source`` column per number (``logged``/``derived``/``estimated``).
"""

from __future__ import annotations

import csv
import io
import os
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any, Iterable, Sequence

import orjson

from ..errors import ConfigError
from ..journeys import COLUMNS, TS_COLUMNS, Journey

if TYPE_CHECKING:
    from ..series import SeriesBuilder

FORMATS = ("csv", "json", "jsonl", "parquet")
#: Numbers whose provenance gets its own column in flat tables.
SOURCE_COLUMNS = ("status", "arrival_ts", "first_token_ts", "queue_s", "prefill_s", "ttft_s", "decode_s", "tpot_s",
                  "e2e_s", "prompt_tokens", "output_tokens", "preemptions", "http_status")
FLAT_COLUMNS = tuple(c for c in COLUMNS if c != "sources") + tuple(f"{c}_source" for c in SOURCE_COLUMNS)

_INT = ("server", "attempt", "http_status", "prompt_tokens", "output_tokens", "max_tokens", "blocks", "decode_steps",
        "preemptions", "first_line", "last_line")
_FLOAT = ("queue_s", "prefill_s", "ttft_s", "decode_s", "tpot_s", "e2e_s", "ts_resolution_s", "inference_s",
          "client_ttft_s", "client_e2e_s", "client_overhead_ttft_s", "client_overhead_e2e_s")

STATS_COLUMNS = ("ts", "file", "server", "engine", "line", "running", "waiting", "swapped", "kv_cache_usage",
                 "prompt_throughput", "generation_throughput", "prefix_cache_hit_rate", "preemptions", "source_kind")
DECODE_COLUMNS = ("ts", "file", "server", "steps", "batch_size_mean", "batch_size_max", "kv_cache_usage_mean",
                  "kv_cache_usage_max", "active_requests")


def format_of(path: str, fmt: str | None = None) -> str:
    """The table format: ``fmt`` if given, else from the file extension."""
    if fmt:
        f = fmt.lower()
    else:
        ext = os.path.splitext(path)[1].lower().lstrip(".")
        f = {"ndjson": "jsonl", "pq": "parquet"}.get(ext, ext)
    if f not in FORMATS:
        raise ConfigError(f"cannot tell the table format of {path!r}",
                          hint="use a .csv, .json, .jsonl or .parquet file name (or --format)")
    return f


def flat_row(j: Journey) -> dict[str, Any]:
    """A journey as a flat row (datetimes kept as ``datetime``)."""
    row = {c: getattr(j, c) for c in FLAT_COLUMNS[: len(COLUMNS) - 1]}
    for c in SOURCE_COLUMNS:
        row[f"{c}_source"] = j.sources.get(c)
    return row


def _iso_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items()}


def journeys_csv(journeys: Iterable[Journey], fp: IO[str]) -> int:
    """Write journeys as CSV (header + one row each); returns rows written."""
    w = csv.DictWriter(fp, fieldnames=list(FLAT_COLUMNS), lineterminator="\n")
    w.writeheader()
    n = 0
    for j in journeys:
        w.writerow(_iso_row(flat_row(j)))
        n += 1
    return n


def journeys_frame(journeys: Iterable[Journey]):  # -> polars.DataFrame
    """Journeys as a Polars DataFrame with typed columns (timestamps as Datetime)."""
    import polars as pl

    schema: dict[str, Any] = {}
    for c in FLAT_COLUMNS:
        if c in TS_COLUMNS:
            schema[c] = pl.Datetime("us")
        elif c in _INT:
            schema[c] = pl.Int64
        elif c in _FLOAT:
            schema[c] = pl.Float64
        elif c == "queue_wait_exceeded":
            schema[c] = pl.Boolean
        else:
            schema[c] = pl.Utf8
    return pl.DataFrame([flat_row(j) for j in journeys], schema=schema, orient="row")


def series_frame(rows: Sequence[dict[str, Any]], columns: Sequence[str]):  # -> polars.DataFrame
    """Series rows (ISO ``ts``) as a Polars DataFrame with a Datetime ``ts``."""
    import polars as pl

    df = pl.DataFrame([{c: r.get(c) for c in columns} for r in rows], orient="row",
                      schema={c: (pl.Utf8 if c in ("ts", "file", "source_kind") else pl.Float64) for c in columns})
    ints = [c for c in ("server", "engine", "line", "running", "waiting", "swapped", "preemptions", "steps",
                        "batch_size_max", "active_requests") if c in columns]
    return df.with_columns(
        pl.col("ts").str.to_datetime(time_unit="us", strict=False),
        *[pl.col(c).cast(pl.Int64) for c in ints],
    )


def write_journeys(journeys: Iterable[Journey], path: str, fmt: str | None = None) -> int:
    """Write journeys to ``path`` (format from ``fmt`` or the extension); returns rows written."""
    f = format_of(path, fmt)
    if f == "parquet":
        df = journeys_frame(journeys)
        df.write_parquet(path)
        return df.height
    with open(path, "w", encoding="utf-8", newline="") as fp:
        return dump_journeys(journeys, fp, f)


def dump_journeys(journeys: Iterable[Journey], fp: IO[str], fmt: str) -> int:
    """Write journeys to an open text stream as csv, json or jsonl."""
    if fmt == "csv":
        return journeys_csv(journeys, fp)
    n = 0
    if fmt == "jsonl":
        for j in journeys:
            fp.write(orjson.dumps(j.to_dict()).decode())
            fp.write("\n")
            n += 1
        return n
    if fmt == "json":
        fp.write("[")
        for j in journeys:
            fp.write(",\n" if n else "\n")
            fp.write(orjson.dumps(j.to_dict()).decode())
            n += 1
        fp.write("\n]\n" if n else "]\n")
        return n
    raise ConfigError(f"format {fmt!r} needs a file", hint="give -o FILE.parquet")


def write_series(series: SeriesBuilder, path: str, fmt: str | None = None, decode: bool = False) -> int:
    """Write the engine stats series (or, with ``decode``, the per-second decode series) to ``path``."""
    f = format_of(path, fmt)
    rows = series.decode_rows() if decode else series.stats_rows()
    cols = DECODE_COLUMNS if decode else STATS_COLUMNS
    if f == "parquet":
        series_frame(rows, cols).write_parquet(path)
        return len(rows)
    with open(path, "w", encoding="utf-8", newline="") as fp:
        return dump_rows(rows, cols, fp, f)


def dump_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str], fp: IO[str], fmt: str) -> int:
    """Write plain rows as csv, json or jsonl."""
    if fmt == "csv":
        w = csv.DictWriter(fp, fieldnames=list(columns), lineterminator="\n", extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    elif fmt == "jsonl":
        for r in rows:
            fp.write(orjson.dumps({c: r.get(c) for c in columns}).decode() + "\n")
    elif fmt == "json":
        fp.write(orjson.dumps([{c: r.get(c) for c in columns} for r in rows], option=orjson.OPT_INDENT_2).decode())
        fp.write("\n")
    else:
        raise ConfigError(f"format {fmt!r} needs a file", hint="give -o FILE.parquet")
    return len(rows)


class JourneyWriter:
    """A journey sink that writes rows as journeys complete (CSV / JSON lines stream; Parquet at close)."""

    def __init__(self, path: str, fmt: str | None = None) -> None:
        self.fmt = format_of(path, fmt)
        self.path = path
        self.count = 0
        self._rows: list[Journey] = []
        self._fp: IO[str] | None = None
        self._csv: Any = None
        if self.fmt != "parquet":
            self._fp = open(path, "w", encoding="utf-8", newline="")  # noqa: SIM115
            if self.fmt == "csv":
                self._csv = csv.DictWriter(self._fp, fieldnames=list(FLAT_COLUMNS), lineterminator="\n")
                self._csv.writeheader()
            elif self.fmt == "json":
                self._fp.write("[")

    def __call__(self, j: Journey) -> None:
        """Write (or buffer) one journey."""
        if self.fmt == "parquet":
            self._rows.append(j)
        elif self.fmt == "csv":
            self._csv.writerow(_iso_row(flat_row(j)))
        else:
            assert self._fp is not None
            if self.fmt == "json":
                self._fp.write(",\n" if self.count else "\n")
            self._fp.write(orjson.dumps(j.to_dict()).decode())
            if self.fmt == "jsonl":
                self._fp.write("\n")
        self.count += 1

    def close(self) -> None:
        """Finish the file."""
        if self.fmt == "parquet":
            journeys_frame(self._rows).write_parquet(self.path)
            self._rows = []
        elif self._fp is not None:
            if self.fmt == "json":
                self._fp.write("\n]\n" if self.count else "]\n")
            self._fp.close()
            self._fp = None


def to_csv_string(journeys: Iterable[Journey]) -> str:
    """Journeys as one CSV string (small inputs, tests)."""
    buf = io.StringIO()
    journeys_csv(journeys, buf)
    return buf.getvalue()
