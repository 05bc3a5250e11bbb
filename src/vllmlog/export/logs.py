"""Parsed events as log records for log stores: NDJSON (Alloy, Vector, Fluent Bit, Elasticsearch, Loki via
an agent) and Loki's push-API JSON body.

Labels are stable and low-cardinality: ``job``, ``instance``, ``model``, ``level``, ``kind``. In NDJSON every
record carries them plus ``request_id``; in a Loki body only ``job``/``instance``/``model``/``level`` become
stream labels — ``kind``, ``request_id``, ``process`` and ``source`` go into each entry's structured metadata
(Loki ≥ 2.9; never a label: one stream per request would explode Loki's index).

vLLM timestamps are naive local time; they are exported as if UTC (containers usually run in UTC), shifted
by ``utc_offset_s`` when given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator

from ..model import Event

#: Stream labels of a Loki push body (bounded value sets only).
LOKI_LABELS = ("job", "instance", "model", "level")
#: Per-entry structured metadata keys of a Loki push body.
LOKI_METADATA = ("kind", "request_id", "process", "source")
_MODEL_KINDS = {"server_version", "server_model", "server_args", "engine_config"}


@dataclass
class ModelTracker:
    """The served model as the log reveals it (banner, arguments, engine config), per input file."""

    current: dict[str, str] = field(default_factory=dict)

    def see(self, e: Event) -> str | None:
        if e.kind in _MODEL_KINDS:
            m = e.fields.get("served_model_name") or e.fields.get("model")
            if isinstance(m, list):
                m = m[0] if m else None
            if isinstance(m, str) and m:
                self.current[e.file] = m
        return self.current.get(e.file)


def _ts_ns(ts: datetime | None, utc_offset_s: int) -> int | None:
    if ts is None:
        return None
    return int((ts.replace(tzinfo=timezone.utc).timestamp() - utc_offset_s) * 1e9) + 0


def _iso(ts: datetime | None, utc_offset_s: int) -> str | None:
    ns = _ts_ns(ts, utc_offset_s)
    if ns is None:
        return None
    d = datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)
    return d.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def ndjson_records(events: Iterable[Event], *, job: str = "vllm", instance: str | None = None,
                   utc_offset_s: int = 0) -> Iterator[dict[str, Any]]:
    """One flat record per event: ``@timestamp``, the labels, ``request_id``, ``message`` and the typed fields."""
    models = ModelTracker()
    for e in events:
        model = models.see(e)
        yield {
            "@timestamp": _iso(e.ts, utc_offset_s),
            "job": job,
            "instance": instance or _stem(e.file),
            "model": model,
            "level": e.level,
            "kind": e.kind,
            "request_id": e.request_id,
            "process": e.process,
            "source": e.source,
            "file": e.file,
            "line": e.line,
            "line_end": e.line_end,
            "message": e.text,
            "fields": e.fields,
        }


def loki_bodies(events: Iterable[Event], *, job: str = "vllm", instance: str | None = None,
                utc_offset_s: int = 0, batch: int = 5000, skipped: list[int] | None = None) -> Iterator[dict[str, Any]]:
    """Loki push-API bodies ``{"streams": [{"stream": {labels}, "values": [[ns, line, {metadata}], …]}]}``,
    each holding at most ``batch`` entries, streams sorted by label set and entries by time.

    Events with no timestamp at all (before the first timestamped line) cannot be pushed; their count is
    appended to ``skipped`` when given."""
    models = ModelTracker()
    streams: dict[tuple[tuple[str, str], ...], list[list[Any]]] = {}
    n = 0
    dropped = 0
    for e in events:
        model = models.see(e)
        ns = _ts_ns(e.ts, utc_offset_s)
        if ns is None:
            dropped += 1
            continue
        labels = {"job": job, "instance": instance or _stem(e.file), "model": model or "unknown", "level": (e.level or "unknown").lower()}
        meta = {k: str(v) for k, v in (("kind", e.kind), ("request_id", e.request_id), ("process", e.process), ("source", e.source)) if v is not None}
        streams.setdefault(tuple(labels.items()), []).append([str(ns), e.text, meta])
        n += 1
        if n >= batch:
            yield _body(streams)
            streams = {}
            n = 0
    if streams:
        yield _body(streams)
    if skipped is not None:
        skipped.append(dropped)


def _body(streams: dict[tuple[tuple[str, str], ...], list[list[Any]]]) -> dict[str, Any]:
    out = []
    for key in sorted(streams):
        values = streams[key]
        values.sort(key=lambda v: int(v[0]))  # stable: file order among equal timestamps
        out.append({"stream": dict(key), "values": values})
    return {"streams": out}


def _stem(path: str) -> str:
    if path == "-":
        return "stdin"
    name = path.rsplit("/", 1)[-1]
    for suffix in (".gz", ".log", ".txt"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or "unknown"
