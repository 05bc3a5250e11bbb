#!/usr/bin/env python3
"""The Polars reference of bench/run.py: the same fields as ``extract.awk`` (level, time, kind, request id, a
number of the busy lines), extracted by one streaming lazy plan over the file's lines, then the per-request check
answer (distinct requests, sum of max_tokens). Lines are read as one string column (a separator byte no log has).

    python bench/ref/polars_extract.py server.log
"""

from __future__ import annotations

import sys

import polars as pl

ENV = r"^(?:\([^)]*pid=\d+[^)]*\) )?(DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d) \[?([^\]\s]+:\d+)\] ?(.*)$"


def plan(path: str) -> pl.LazyFrame:
    lines = pl.scan_csv(path, separator="\x1f", has_header=False, quote_char=None, new_columns=["line"],
                        schema={"line": pl.String}, truncate_ragged_lines=True, encoding="utf8-lossy")
    line = pl.col("line").fill_null("")
    msg = line.str.extract(ENV, 4)
    first = msg.str.extract(r"^(\S+)", 1)
    kind = (pl.when(msg.is_null()).then(pl.when(line.str.contains(r'^(?:INFO|WARNING|ERROR):\s+.*" \d{3}')).then(pl.lit("http_access"))
                                        .otherwise(pl.lit("unparsed")))
            .when(first == "Decode").then(pl.lit("decode_step"))
            .when(first == "Received").then(pl.lit("request_received"))
            .when(first == "Added").then(pl.lit("request_added"))
            .when(first == "Generated").then(pl.lit("response_generated"))
            .when(first == "Aborted").then(pl.lit("request_aborted"))
            .when(msg.str.contains("Avg prompt throughput: ", literal=True)).then(pl.lit("engine_stats"))
            .otherwise(pl.lit("log")))
    return lines.select(
        level=line.str.extract(ENV, 1), ts=line.str.extract(ENV, 2), kind=kind,
        rid=msg.str.extract(r"^(?:Decode step \d+ for|Received request|Added request|Generated response|Aborted request(?:\(s\))?) ([^\s:.,]+)", 1),
        max_tokens=msg.str.extract(r"max_tokens=(\d+)", 1).cast(pl.Int64, strict=False),
    )


def main() -> None:
    lf = plan(sys.argv[1])
    kinds = lf.group_by("kind").agg(pl.len().alias("n"))
    reqs = lf.filter(pl.col("rid").is_not_null()).group_by("rid").agg(pl.col("max_tokens").max())
    k, r = pl.collect_all([kinds, reqs], engine="streaming")
    print(dict(zip(k["kind"], k["n"])), len(r), r["max_tokens"].sum(), file=sys.stderr)


if __name__ == "__main__":
    main()
