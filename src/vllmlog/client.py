"""Client-side truth as input: what the load generator measured, per request, next to the server's view.

Reads ``vllm bench serve --save-result --save-detailed`` result JSON (``ttfts``, ``itls``, ``input_lens``,
``output_lens``, ``start_times``, ``errors``; one object per line with ``--append-result``), GuideLLM report
JSON (``benchmarks[].requests.{successful,errored,incomplete}[]``, old and new request shapes), and a CSV
with a request id column and ``ttft_s`` / ``latency_s`` (or ``e2e_s``) columns.

Requests are matched to journeys by id when the client recorded one (GuideLLM's ``response_id`` is vLLM's
``cmpl-…``/``chatcmpl-…``; an ``X-Request-Id`` header becomes ``cmpl-<id>-0``); ``vllm bench serve`` saves
no ids, but sends ``X-Request-Id: <prefix><index>``, so the log's ``cmpl-<prefix><i>-0`` gives the index;
failing that, by send order and time (``matched_by: time``: one-second log timestamps make that a guess,
said so). The comparison says, per request, client − server for TTFT and e2e: the frontend, network and
queueing the server's own numbers do not see. Only measured server numbers are compared (an estimated
one is counted, not compared).
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import orjson

from .errors import InputError

if TYPE_CHECKING:
    from .journeys import Journey

_INDEXED = re.compile(r"^(?:chat)?cmpl-(?P<prefix>.*?)(?P<i>\d+)(?:-\d+)?$")
#: Largest client file read.
MAX_BYTES = 1 << 30


@dataclass(slots=True)
class ClientRecord:
    """One request as the client saw it (seconds)."""

    index: int
    tool: str
    request_id: str | None = None
    """The id the client sent (``X-Request-Id``) or the server's response id."""
    start: float | None = None
    """Send time: epoch seconds (GuideLLM, CSV) or a monotonic clock (``vllm bench serve``)."""
    ttft_s: float | None = None
    e2e_s: float | None = None
    e2e_source: str = "measured"
    """``measured``, or ``derived`` (vllm bench serve: TTFT + the inter-token latencies)."""
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    success: bool = True
    error: str | None = None


def _f(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _i(v: Any) -> int | None:
    x = _f(v)
    return int(x) if x is not None else None


# ----------------------------------------------------------------------------- readers
def _bench(doc: dict[str, Any], base: int) -> list[ClientRecord]:
    ttfts = doc.get("ttfts") or []
    n = len(ttfts)
    itls = doc.get("itls") or [None] * n
    ins = doc.get("input_lens") or [None] * n
    outs = doc.get("output_lens") or [None] * n
    starts = doc.get("start_times") or [None] * n
    errs = doc.get("errors") or [None] * n
    e2els = doc.get("e2els") or doc.get("latencies")
    out = []
    for i in range(n):
        err = errs[i] if i < len(errs) else None
        ttft = _f(ttfts[i])
        e2e = _f(e2els[i]) if e2els and i < len(e2els) else None
        src = "measured"
        if e2e is None and ttft is not None and i < len(itls) and isinstance(itls[i], list):
            e2e = ttft + math.fsum(x for x in itls[i] if isinstance(x, (int, float)))
            src = "derived"
        ok = not err and ttft is not None and ttft > 0
        out.append(ClientRecord(base + i, "vllm-bench", None, _f(starts[i]) if i < len(starts) else None,
                                ttft if ok else None, e2e if ok else None, src,
                                _i(ins[i]) if i < len(ins) else None, _i(outs[i]) if i < len(outs) else None,
                                ok, str(err) if err else None))
    return out


def _get(d: dict[str, Any], *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)  # type: ignore[assignment]
    return d


def _guidellm(doc: dict[str, Any]) -> list[ClientRecord]:
    out: list[ClientRecord] = []
    for b in doc.get("benchmarks") or []:
        reqs = _get(b, "requests") or {}
        for status in ("successful", "errored", "incomplete"):
            for r in reqs.get(status) or []:
                if not isinstance(r, dict):
                    continue
                t = _get(r, "info", "timings") or {}
                start = _f(t.get("request_start")) or _f(r.get("start_time")) or _f(r.get("request_start_time"))
                first = _f(t.get("first_token_iteration")) or _f(r.get("first_token_time"))
                end = _f(t.get("request_end")) or _f(r.get("end_time")) or _f(r.get("request_end_time"))
                ttft = _f(r.get("time_to_first_token_ms"))
                ttft = ttft / 1000 if ttft is not None else (first - start if first and start else None)
                e2e = _f(r.get("request_latency"))
                if e2e is None and start is not None and end is not None:
                    e2e = end - start
                ok = status == "successful"
                out.append(ClientRecord(len(out), "guidellm", r.get("response_id") or r.get("request_id"), start,
                                        ttft if ok else None, e2e if ok else None, "measured",
                                        _i(r.get("prompt_tokens")), _i(r.get("output_tokens")), ok,
                                        None if ok else str(r.get("error") or status)))
    return out


_ID_COLUMNS = ("response_id", "x_request_id_resp_header", "x_request_id_sent", "request_id", "id")


def _csv(text: str) -> list[ClientRecord]:
    out = []
    for i, row in enumerate(csv.DictReader(io.StringIO(text))):
        rid = next((row[c] for c in _ID_COLUMNS if row.get(c)), None)
        err = row.get("error") or None
        aborted = bool(row.get("aborted_by_client"))
        ok = not err and not aborted and (row.get("http_status") in (None, "", "200"))
        e2e = _f(row.get("latency_s")) if row.get("latency_s") else _f(row.get("e2e_s"))
        out.append(ClientRecord(i, "csv", rid, _f(row.get("send_time")), _f(row.get("ttft_s")) if ok else None,
                                e2e if ok else None, "measured", _i(row.get("prompt_tokens")),
                                _i(row.get("completion_tokens") or row.get("output_tokens")), ok, err))
    return out


def read_client(path: str) -> list[ClientRecord]:
    """Client records from a vllm bench serve result, a GuideLLM report, or a CSV (raises ``InputError``)."""
    try:
        with open(path, "rb") as fp:
            data = fp.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})",
                         hint="--client takes a vllm bench serve --save-detailed JSON, a GuideLLM report JSON or a CSV") from None
    if len(data) > MAX_BYTES:
        raise InputError(f"{path}: larger than {MAX_BYTES} bytes")
    docs: list[Any] = []
    try:
        docs = [orjson.loads(data)]
    except orjson.JSONDecodeError:
        try:  # --append-result: one JSON object per line
            docs = [orjson.loads(x) for x in data.splitlines() if x.strip()]
        except orjson.JSONDecodeError:
            docs = []
    if docs and all(isinstance(d, dict) for d in docs):
        out: list[ClientRecord] = []
        for d in docs:
            if "benchmarks" in d:
                out += _guidellm(d)
            elif "ttfts" in d:
                out += _bench(d, len(out))
        if out:
            return out
        raise InputError(f"{path}: JSON without per-request results",
                         hint="vllm bench serve needs --save-result --save-detailed; GuideLLM's report has benchmarks[]")
    text = data.decode("utf-8", "replace")
    head = text.split("\n", 1)[0]
    if "," in head and ("ttft_s" in head or "latency_s" in head or "e2e_s" in head):
        return _csv(text)
    raise InputError(f"{path}: not a vllm bench serve result, GuideLLM report or client CSV",
                     hint="a CSV needs a request id column and ttft_s / latency_s columns")


# ----------------------------------------------------------------------------- matching
def _keys(rid: str) -> list[str]:
    out = [rid]
    if not rid.startswith(("cmpl-", "chatcmpl-")):
        out += [f"cmpl-{rid}-0", f"chatcmpl-{rid}", f"cmpl-{rid}"]
    else:
        out.append(rid + "-0")
    return out


def _epoch(j: Journey, offset_s: float) -> float | None:
    if j.arrival_ts is None:
        return None
    from datetime import timezone

    return j.arrival_ts.replace(tzinfo=timezone.utc).timestamp() - offset_s


def match(records: Sequence[ClientRecord], journeys: Sequence[Journey],
          offset_s: float = 0.0) -> tuple[dict[int, Journey], str]:
    """Record index → journey, and how (``id``, ``index``, ``time``)."""
    by_id: dict[str, Journey] = {}
    for j in journeys:
        for k in [j.request_id, *(j.aliases or ()), j.engine_request_id or ""]:
            if k:
                by_id.setdefault(k, j)
    out: dict[int, Journey] = {}
    if any(r.request_id for r in records):
        for r in records:
            if r.request_id:
                for k in _keys(r.request_id):
                    if k in by_id:
                        out[r.index] = by_id[k]
                        break
        if out:
            return out, "id"
    # vllm bench serve: X-Request-Id = <prefix><i>, in the order of the saved lists
    groups: dict[str, dict[int, Journey]] = {}
    for j in journeys:
        m = _INDEXED.match(j.request_id)
        if m:
            groups.setdefault(m["prefix"], {}).setdefault(int(m["i"]), j)
    if groups:
        prefix, idx = max(groups.items(), key=lambda kv: len(kv[1]))
        if len(idx) >= max(1, len(records) // 2):
            base = min(r.index for r in records) if records else 0
            for r in records:
                j = idx.get(r.index - base)
                if j is not None:
                    out[r.index] = j
            return out, "index"
    # by send order and time: clocks differ (a monotonic client clock), so align the two sequences
    recs = sorted((r for r in records if r.start is not None), key=lambda r: r.start)  # type: ignore[arg-type,return-value]
    js = sorted((j for j in journeys if j.arrival_ts is not None), key=lambda j: j.arrival_ts)  # type: ignore[arg-type,return-value]
    if not recs or not js:
        return out, "time"
    diffs = sorted(_epoch(j, offset_s) - r.start for r, j in zip(recs, js))  # type: ignore[operator]
    shift = diffs[len(diffs) // 2]
    used: set[int] = set()
    for r in recs:
        want = r.start + shift  # type: ignore[operator]
        best = None
        for j in js:
            if id(j) in used:
                continue
            if r.prompt_tokens is not None and j.prompt_tokens is not None and r.prompt_tokens != j.prompt_tokens:
                continue
            d = abs(_epoch(j, offset_s) - want)  # type: ignore[operator]
            if d <= 2.0 and (best is None or d < best[0]):
                best = (d, j)
        if best is not None:
            used.add(id(best[1]))
            out[r.index] = best[1]
    return out, "time"


def compare(records: Sequence[ClientRecord], journeys: Iterable[Journey], offset_s: float = 0.0) -> dict[str, Any]:
    """Match client records to journeys, set ``client_ttft_s``/``client_e2e_s`` on them, and return the
    comparison document (the analysis JSON's ``client``)."""
    from .numbers import describe

    js = list(journeys)
    pairs, how = match(records, js, offset_s)
    rows = []
    over: dict[str, list[float]] = {"ttft_s": [], "e2e_s": []}
    skipped = {"server_estimated": 0, "client_failed": 0}
    for r in records:
        j = pairs.get(r.index)
        if j is None:
            continue
        j.client_ttft_s = r.ttft_s
        j.client_e2e_s = r.e2e_s
        if not r.success:
            skipped["client_failed"] += 1
        row: dict[str, Any] = {"request_id": j.request_id, "client_index": r.index, "status": j.status}
        for m in ("ttft_s", "e2e_s"):
            c, s, src = getattr(r, m), getattr(j, m), j.sources.get(m)
            row[f"client_{m}"] = c
            row[f"server_{m}"] = s
            row[f"server_{m}_source"] = src
            d = None
            if c is not None and s is not None:
                if src == "estimated":
                    skipped["server_estimated"] += 1
                else:
                    d = c - s
                    over[m].append(d)
                    # client − the server's measured number (a new dict: kept journeys share equal ones)
                    j.sources = {**j.sources, f"client_overhead_{m}": "derived"}
            row[f"overhead_{m}"] = d
            setattr(j, f"client_overhead_{m}", d)
        rows.append(row)
    tool = records[0].tool if records else None
    return {
        "tool": tool, "records": len(records), "matched": len(pairs), "matched_by": how,
        "unmatched": [r.request_id or r.index for r in records if r.index not in pairs][:50],
        "overhead": {m: describe(v) for m, v in over.items()},
        "not_compared": skipped,
        "note": "overhead = client − server: frontend (HTTP, tokenization, detokenization), network and anything "
                "before the engine saw the request",
        "requests": rows,
    }
