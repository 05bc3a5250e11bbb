"""Map: one replica's pieces → the existing pipeline → a compact, mergeable ``dict``.

The worker reads the files itself (the driver sends only names), runs the one pipeline every command runs
(``run.load`` → ``numbers.compute`` → ``analyze.red_use`` → ``diagnose.run_diagnosis``), writes the
replica's per-request rows as Parquet, and returns a plain dict (JSON-able, pickles small): counters, the
RED/USE block, series on the fleet's fixed time grid, symptoms and incidents (evidence redacted), coverage
and the verdict. Nothing in it depends on which engine or process ran it, so ``local`` and ``ray`` give
identical results.

A replica whose files cannot be read returns ``{"error": …}`` instead of raising: one bad replica never
takes the fleet down.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import tempfile
import zlib
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Iterator

from ..errors import VllmlogError
from .inputs import is_url

#: Bump when the shape of a replica result changes.
SCHEMA = "vllmlog.fleet.replica/1"
#: Per-request row columns (Parquet): identity, outcome, times (epoch seconds, UTC-naive log clock), and per
#: latency metric its value as it enters the distributions (``numbers.latency_value``) and its basis.
ROW_BASE = ("replica", "request_id", "status", "arrival_s", "end_s", "prompt_tokens", "output_tokens", "http_status",
            "preemptions", "abort_e2e_s", "abort_basis")


def epoch(ts: datetime | None) -> float | None:
    """Seconds since the epoch of a log timestamp (naive log clock read as UTC; the same for every replica)."""
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return ts.timestamp()


def safe_name(name: str) -> str:
    """A file name for a replica (its name's safe characters and a short hash, so two never collide)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")[:80] or "replica"
    return f"{base}-{hashlib.sha1(name.encode('utf-8')).hexdigest()[:8]}"


# --------------------------------------------------------------------------- reading the pieces

def _open_piece(path: str):
    if is_url(path):
        try:
            import fsspec  # type: ignore[import-not-found]
        except ImportError:
            raise VllmlogError(f"{path}: reading URLs needs fsspec", hint="pip install fsspec (and s3fs/gcsfs …)") from None
        f = fsspec.open(path, "rb", compression="infer").open()
        return f
    if path.lower().endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


@contextmanager
def stream_of(name: str, paths: tuple[str, ...]) -> Iterator[tuple[list[str], list[dict[str, Any]], list[str]]]:
    """The local file(s) the pipeline reads for one replica, the pieces' line offsets, and read problems.

    One local piece is read in place. Several pieces (rotated files) or URLs are copied, in order, into one
    local file so the pipeline sees one stream (a request that spans a rotation stays one journey); the
    offsets map its line numbers back to each piece. A piece that ends early (truncated gzip, read error) is
    kept up to where it could be read and reported."""
    if len(paths) == 1 and not is_url(paths[0]):
        yield [paths[0]], [{"path": paths[0], "first_line": 1}], []
        return
    tmp = tempfile.mkdtemp(prefix="vllmlog-fleet-")
    dest = os.path.join(tmp, safe_name(name) + ".log")
    pieces: list[dict[str, Any]] = []
    problems: list[str] = []
    newest = 0.0
    line = 1
    try:
        with open(dest, "wb") as out:
            for p in paths:
                pieces.append({"path": p, "first_line": line})
                last = b"\n"
                try:
                    with _open_piece(p) as f:
                        while True:
                            chunk = f.read(1 << 20)
                            if not chunk:
                                break
                            out.write(chunk)
                            line += chunk.count(b"\n")
                            last = chunk[-1:]
                except (OSError, EOFError, zlib.error) as exc:
                    problems.append(f"{os.path.basename(p)}: read stopped early ({type(exc).__name__}: {exc})")
                if last != b"\n":
                    out.write(b"\n")
                    line += 1
                if not is_url(p):
                    try:
                        newest = max(newest, os.stat(p).st_mtime)
                    except OSError:
                        pass
        if newest:
            os.utime(dest, (newest, newest))  # year-less timestamps take the year of the newest piece
        yield [dest], pieces, problems
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _replace(obj: Any, old: str, new: str, pieces: list[dict[str, Any]]) -> Any:
    """``obj`` with every ``{"file": old, "line": N}`` pointed at the piece and line it came from, and every other
    string containing ``old`` rewritten (``old`` → ``new``)."""
    if isinstance(obj, str):
        return obj.replace(old, new) if old in obj else obj
    if isinstance(obj, dict):
        out = {k: _replace(v, old, new, pieces) for k, v in obj.items()}
        if obj.get("file") == old and isinstance(obj.get("line"), int):
            out["file"], out["line"] = _origin(pieces, [old], old, obj["line"])
        return out
    if isinstance(obj, list):
        return [_replace(v, old, new, pieces) for v in obj]
    return obj


def _origin(pieces: list[dict[str, Any]], local: list[str], file: str | None, line: int | None) -> tuple[str | None, int | None]:
    """A (file, line) of the local stream → the piece and line it came from."""
    if file is None or line is None or len(pieces) == 1 and file == pieces[0]["path"]:
        return file, line
    if file not in local:
        return file, line
    for pc in reversed(pieces):
        if line >= pc["first_line"]:
            return pc["path"], line - pc["first_line"] + 1
    return file, line


# --------------------------------------------------------------------------- the map function

def map_replica(spec: dict[str, Any], opts: dict[str, Any] | None = None) -> dict[str, Any]:
    """Analyse one replica (``spec``: ``{"name", "paths"}``) and return its compact result.

    ``opts``: ``year``, ``grid_s`` (series step, seconds), ``rows_dir`` (where the Parquet rows go; None
    keeps no rows), ``config`` (a diagnosis TOML path), ``show_prompts``/``mask_ips`` (redaction)."""
    opts = dict(opts or {})
    name = str(spec["name"])
    paths = tuple(spec["paths"])
    base: dict[str, Any] = {"schema": SCHEMA, "replica": name, "files": list(paths)}
    if spec.get("traces"):
        base["traces_files"] = list(spec["traces"])
    try:
        with stream_of(name, paths) as (local, pieces, problems):
            res = _analyse(name, local, pieces, opts, tuple(spec.get("traces") or ()), spec.get("metrics") or ())
            if local[0] not in paths:  # the local copy's temporary path must not reach the result
                label = paths[0] if len(paths) == 1 else f"{name} (pieces joined)"
                res = _replace(res, local[0], label, pieces)
            res["read_problems"] = problems
            if problems:
                res["coverage"]["complete"] = False
                res["coverage"]["reasons"] = list(res["coverage"].get("reasons") or []) + problems
                if res["verdict"]["status"] == "healthy":
                    res["verdict"]["status"] = "incomplete"
    except VllmlogError as exc:
        return dict(base, error=exc.message + (f" ({exc.hint})" if exc.hint else ""))
    except Exception as exc:  # a bug on one replica's input must not take the fleet down
        return dict(base, error=f"{type(exc).__name__}: {exc}")
    base.update(res)
    base["error"] = None
    return base


def _analyse(name: str, local: list[str], pieces: list[dict[str, Any]], opts: dict[str, Any],
             traces: tuple[str, ...] = (), metrics: Any = ()) -> dict[str, Any]:
    from ..analyze import red_use
    from ..diagnose import run_diagnosis
    from ..numbers import compute
    from ..redact import Redactor
    from ..rules import load_config
    from ..run import load
    from .grid import replica_grid
    from .sketch import replica_sketches

    rd = Redactor(show_prompts=bool(opts.get("show_prompts")), mask_ips=bool(opts.get("mask_ips")))
    run = load(local, year=opts.get("year"), traces=list(traces) if traces else None)
    history = None
    if metrics:  # the replica's /metrics history, added as analyze --prometheus adds it
        from .prom import load_history

        history = load_history(run, metrics)
    numbers = compute(run)
    ru = red_use(run, numbers)
    dg = run_diagnosis(run, load_config(opts.get("config")))
    cov = run.coverage.to_dict()
    cov.pop("inputs", None)
    verdict = dg.verdict.to_dict() if dg.verdict is not None else {"status": "unknown", "label": "UNKNOWN"}
    verdict.pop("coverage", None)
    if verdict.get("status") == "healthy" and not cov.get("complete", True):
        verdict["status"] = "incomplete"

    def where(file: str | None, line: int | None) -> dict[str, Any]:
        f, ln = _origin(pieces, local, file, line)
        return {"file": f, "line": ln}

    incidents = []
    for inc in dg.incidents:
        d = inc.to_dict()
        incidents.append(rd.value({
            "id": d["id"], "severity": d["severity"], "impact": d["impact"], "category": d["category"],
            "headline": d["headline"], "confidence": d["confidence"],
            "cause": ({"code": d["cause"]["code"], "title": d["cause"]["title"]} if d["cause"] else None),
            "chain": d["chain"], "onset": d["onset"], "end": d["end"], "trend": d["trend"],
            "onset_s": epoch(inc.onset), "end_s": epoch(inc.end), "repeats": d["repeats"],
            "superseded": bool(getattr(inc, "superseded", False)),
            "fixes": d["fixes"][:3],
            "evidence": [dict(where(e["file"], e["line"]), text=e["text"]) for e in d["evidence"][:3]],
            "symptoms": sorted({s["kind"] for s in d["symptoms"]}),
        }))
    symptoms = [rd.value({"kind": s.kind, "severity": s.severity.label, "headline": s.headline,
                          "onset": s.onset.isoformat() if s.onset else None, "end": s.end.isoformat() if s.end else None,
                          "onset_s": epoch(s.onset), "end_s": epoch(s.end), "trend": s.trend, "server": s.server})
                for s in dg.symptoms]
    findings: dict[str, dict[str, Any]] = {}
    for f in dg.findings:
        c = findings.setdefault(f.code, {"code": f.code, "severity": f.severity.label, "title": f.title, "count": 0})
        c["count"] += 1
    servers = [{"version": s.version, "model": rd.value(s.model), "ready": s.ready, "shutdown": s.shutdown,
                "start": s.start_ts.isoformat() if s.start_ts else None,
                "max_num_seqs": (s.args or {}).get("max_num_seqs")} for s in run.servers
               if s.generation != "prometheus"]
    report = None
    if opts.get("reports_dir"):
        joined = (local[0], pieces, f"{name} (pieces joined)") if len(pieces) > 1 or local[0] != pieces[0]["path"] \
            else None
        report = _replica_report(run, numbers, ru, dg, opts["reports_dir"], name, rd, joined)
    rows = None
    rows_dir = opts.get("rows_dir")
    if rows_dir:
        from .rows import write_rows

        rows = write_rows(name, run.journeys, rows_dir)
    return {
        "decode_speed": decode_speed(run),
        "lines": run.parse_stats.lines,
        "events": run.parse_stats.events,
        "levels": dict(sorted(run.levels.items())),
        "time_range": {"start": run.start_ts.isoformat() if run.start_ts else None,
                       "end": run.end_ts.isoformat() if run.end_ts else None,
                       "start_s": epoch(run.start_ts), "end_s": epoch(run.end_ts)},
        "servers": servers,
        "restarts": max(0, len(servers) - 1),
        "coverage": cov,
        "verdict": {k: verdict.get(k) for k in ("status", "qualifier", "label", "reason")},
        "red_use": ru,
        "slo": numbers["slo"],
        "tokens": {"prompt_total": numbers["tokens"]["prompt_total"], "output_total": numbers["tokens"]["output_total"]},
        "grid": replica_grid(run, float(opts.get("grid_s") or 60.0)),
        "incidents": incidents,
        "symptoms": symptoms,
        "findings": sorted(findings.values(), key=lambda c: c["code"]),
        "rows": rows,
        "report": report,
        "traces": run.traces,
        "metrics": history,
        "sketches": replica_sketches(run.journeys),
    }


def decode_speed(run: Any) -> dict[str, Any]:
    """Generation tokens/s per running request, over the stats lines with Running > 0 (median): how fast one
    sequence decodes, comparable between replicas whatever their load (a slow GPU, a bad flag shows here even
    when no per-request latency is logged). ``derived`` from vLLM's own stats lines."""
    from ..numbers import percentile

    xs = sorted(s.generation_throughput / s.running for s in run.series.stats
                if s.source_kind == "engine_stats" and s.running and s.generation_throughput is not None)
    return {"tokens_per_s_per_seq_p50": percentile(xs, 50) if xs else None, "samples": len(xs),
            "basis": "derived: generation throughput ÷ Running, stats lines with Running > 0"}


def _replica_report(run: Any, numbers: dict[str, Any], ru: dict[str, Any], dg: Any, reports_dir: str, name: str,
                    rd: Any, joined: tuple[str, list[dict[str, Any]], str] | None = None) -> str | None:
    """The replica's own HTML report (``analyze``'s, from the same run, numbers and diagnosis): its file name.

    ``joined``: (the local copy, its pieces, a label) when the pieces were joined into one local stream: every
    ``file:line`` of the page then names the piece and that piece's own line (``at_pieces``)."""
    from ..analyze import TIMELINE_LIMIT, Analysis, _cap_timeline, _summary_detail, _timeline_dicts, finding_dict
    from ..errors import InputError
    from ..export.html import render_report
    from ..timeline import build_timeline

    unavailable: dict[str, str] = {}
    summary, why = _summary_detail(run, numbers)
    if why:
        unavailable["summary"] = why
    try:
        timeline = _timeline_dicts(_cap_timeline(list(build_timeline(run, list(dg.findings), limit=1 << 62)),
                                                 TIMELINE_LIMIT))
    except Exception as exc:  # as analyze: a timeline bug must not take the report down
        timeline = None
        unavailable["timeline"] = f"timeline failed: {type(exc).__name__}: {exc}"
    a = Analysis(run=run, red_use=ru, summary=summary, findings=[finding_dict(f) for f in dg.findings],
                 timeline=timeline, unavailable=unavailable, numbers=numbers,
                 incidents=[i.to_dict() for i in dg.incidents],
                 verdict_info=dg.verdict.to_dict() if dg.verdict is not None else None)
    os.makedirs(reports_dir, exist_ok=True)
    fname = safe_name(name) + ".html"
    text = render_report(a, redactor=rd, title=f"vLLM replica {name}")
    if joined is not None:
        text = at_pieces(text, *joined)
    try:
        with open(os.path.join(reports_dir, fname), "w", encoding="utf-8") as fp:
            fp.write(text)
    except OSError as exc:
        raise InputError(f"cannot write report {fname}: {exc.strerror or exc}") from exc
    return fname


def at_pieces(text: str, local: str, pieces: list[dict[str, Any]], label: str) -> str:
    """``text`` (a rendered page) with every reference into the joined local copy pointed back at its piece:
    ``<local>:N`` → ``<piece>:M`` and ``<local's file name>:N`` → ``<piece's file name>:M`` (M: the line in that
    piece); any other mention of the copy (a server's file, a chart's source) → ``label``. The copy's name is
    ``safe_name(replica).log`` in a fresh temporary directory, so nothing else in the page can match it."""
    import html

    base = os.path.basename(local)
    pat = re.compile("(" + re.escape(local) + "|" + re.escape(base) + r")(?::(\d+))?")

    def sub(m: re.Match[str]) -> str:
        if m.group(2) is None:
            return html.escape(label, quote=True)
        f, ln = _origin(pieces, [local], local, int(m.group(2)))
        shown = str(f) if m.group(1) == local else os.path.basename(str(f))
        return f"{html.escape(shown, quote=True)}:{ln}"

    return pat.sub(sub, text)
