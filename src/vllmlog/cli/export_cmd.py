"""`vllmlog export`: parsed events as NDJSON (log shippers, Elasticsearch) or Loki push-API bodies."""

from __future__ import annotations

import sys
from enum import Enum

import orjson
import typer

from ..reader import parse
from ._app import app
from .common import (OptInt, OptPaths, OptStr, OutOpt, PathsArg, PathsT, ShowPromptsOpt, TracesOpt, YearOpt, close_output,
                     open_output)
from ..parsing.fields import dumps_safe


class LogFormat(str, Enum):
    ndjson = "ndjson"
    loki = "loki"


@app.command("export")
def export_cmd(
    logs: PathsT = PathsArg,
    to: LogFormat = typer.Option(LogFormat.ndjson, "--to", help="ndjson: one flat record per event; loki: Loki push-API JSON bodies, one per line."),
    job: str = typer.Option("vllm", "--job", help="The `job` label."),
    instance: OptStr = typer.Option(None, "--instance", help="The `instance` label (default: the log file's name)."),
    utc_offset: float = typer.Option(0.0, "--utc-offset", help="Hours the log's local time is ahead of UTC (vLLM prints local time)."),
    batch: int = typer.Option(5000, "--batch", help="Entries per Loki push body."),
    output: OptStr = OutOpt,
    year: OptInt = YearOpt,
    traces: OptPaths = TracesOpt,
    show_prompts: bool = ShowPromptsOpt,
) -> None:
    """Export events with stable labels (job, instance, model, level, kind, request_id) for Loki, Alloy, Vector or Elasticsearch.

    Loki bodies use only job/instance/model/level as stream labels; kind, request_id, process and source
    travel as structured metadata. With --traces, every span follows the log's events as a `trace_request`
    (llm_request: traced latencies) or `trace_span` record, stamped with the span's exact UTC time. Push one with:
    `vllmlog export server.log --to loki | head -1 | curl -H 'Content-Type: application/json' --data-binary @- http://loki:3100/loki/api/v1/push`
    """
    from ..export.logs import loki_bodies, ndjson_records

    out = open_output(output)
    off = int(utc_offset * 3600)
    opt = orjson.OPT_APPEND_NEWLINE
    skipped: list[int] = []
    try:
        events = parse(logs, year=year)
        from ..redact import Redactor

        rd = Redactor(show_prompts=show_prompts)
        events = (rd.event(e) for e in events)  # redaction: one step every exported event passes through
        if traces:
            import itertools

            from ..traces.events import span_events
            from ..traces.otlp import read_traces

            events = itertools.chain(events, span_events(read_traces(traces), utc_offset_s=off))
        if to is LogFormat.ndjson:
            buf: list[bytes] = []
            for rec in ndjson_records(events, job=job, instance=instance, utc_offset_s=off):
                buf.append(dumps_safe(rec, option=opt))
                if len(buf) >= 4096:
                    out.write(b"".join(buf))
                    buf.clear()
            out.write(b"".join(buf))
        else:
            for body in loki_bodies(events, job=job, instance=instance, utc_offset_s=off, batch=batch, skipped=skipped):
                out.write(dumps_safe(body, option=opt))
    except BrokenPipeError:
        return
    finally:
        close_output(out, output)
    if skipped and skipped[0]:
        print(f"note: {skipped[0]} events before the first timestamped line were not exported (Loki needs a timestamp)", file=sys.stderr)
