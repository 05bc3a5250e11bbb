"""`vllmlog export --to ndjson|loki`: record shapes, stable labels, Loki streams never keyed by request id."""

from __future__ import annotations

import subprocess
import sys

import orjson

from vllmlog.export.logs import LOKI_LABELS, loki_bodies, ndjson_records
from vllmlog.reader import parse

from .conftest import CORPUS

LOG = CORPUS / "vllm-cpu" / "01-startup-and-light-load.log"
HB = CORPUS.parent.parent / "golden" / "01_handbook_journey" / "input.log"


def test_ndjson_records_have_stable_labels():
    recs = list(ndjson_records(parse(str(LOG), year=2026), job="vllm", instance="node-1"))
    assert len(recs) > 100
    for r in recs:
        assert {"@timestamp", "job", "instance", "model", "level", "kind", "request_id", "message", "fields"} <= set(r)
        assert r["job"] == "vllm" and r["instance"] == "node-1"
    with_rid = [r for r in recs if r["request_id"]]
    assert with_rid and all(r["model"] == "/models/tiny" for r in with_rid)
    assert recs[-1]["@timestamp"].endswith("Z")
    orjson.dumps(recs)  # JSON-serialisable


def test_loki_body_shape():
    skipped: list[int] = []
    bodies = list(loki_bodies(parse(str(LOG), year=2026), job="vllm", batch=500, skipped=skipped))
    assert len(bodies) > 1
    total = 0
    for b in bodies:
        assert set(b) == {"streams"}
        for s in b["streams"]:
            assert set(s["stream"]) == set(LOKI_LABELS), "only low-cardinality labels"
            assert "request_id" not in s["stream"] and "kind" not in s["stream"]
            ts = [int(v[0]) for v in s["values"]]
            assert ts == sorted(ts)
            for v in s["values"]:
                assert isinstance(v[0], str) and v[0].isdigit() and len(v[0]) == 19
                assert isinstance(v[1], str)
                assert isinstance(v[2], dict) and all(isinstance(x, str) for x in v[2].values())
                total += 1
        assert sum(len(s["values"]) for s in b["streams"]) <= 500
    ev = sum(1 for _ in parse(str(LOG), year=2026))
    assert total + skipped[0] == ev
    metas = [v[2] for b in bodies for s in b["streams"] for v in s["values"]]
    assert any("request_id" in m for m in metas) and all("kind" in m for m in metas)


def test_export_cli(tmp_path):
    r = subprocess.run([sys.executable, "-m", "vllmlog", "export", "--year", "2026", "--to", "loki", "--job", "j",
                        "--instance", "i", str(HB)], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    body = orjson.loads(r.stdout.splitlines()[0])
    s0 = body["streams"][0]["stream"]
    assert s0["job"] == "j" and s0["instance"] == "i" and s0["model"] == "unknown"
    r = subprocess.run([sys.executable, "-m", "vllmlog", "export", "--year", "2026", str(HB)], capture_output=True, timeout=60)
    assert r.returncode == 0
    rows = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert len(rows) == 28 and rows[0]["kind"] == "request_queued" and rows[0]["request_id"] == "req_001"
    assert rows[0]["@timestamp"] == "2026-03-25T10:15:23.000Z" and rows[0]["instance"] == "input"
