"""`vllmlog watch` against a real Prometheus: real corpus lines appended to a file that appears late,
is rotated by rename and then copy-truncated; PromQL must show every line counted exactly once and
the request counts the client recorded."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from vllmlog.parsing.parser import LineParser

from .conftest import CORPUS, require_tool
from .test_watch_tools import Prometheus, free_port, scrape_exporter, wait_for

SRC = CORPUS / "vllm-cpu" / "04-client-aborts.log"
TRUTH = CORPUS / "vllm-cpu" / "04-client-truth.csv"


def _lines() -> list[str]:
    return SRC.read_bytes().decode("utf-8").split("\n")[:-1]  # the file ends with a newline


def _expected_lines_by_kind(lines: list[str]) -> Counter[str]:
    p = LineParser(str(SRC), 2026)
    evs = p.feed(enumerate(lines, 1)) + p.close()
    out: Counter[str] = Counter()
    for e in evs:
        out[e.kind] += e.line_end - e.line + 1
    return out


def _record_starts(lines: list[str]) -> list[int]:
    """Indexes where a pause cannot split a multi-line record (a vLLM-prefixed or uvicorn line)."""
    return [i for i, t in enumerate(lines) if t.startswith(("(APIServer", "INFO:  "))]


@pytest.mark.slow
def test_watch_rotation_truncation_promql(tmp_path: Path) -> None:
    require_tool("prometheus")
    lines = _lines()
    starts = _record_starts(lines)
    assert len(lines) == 455
    log = tmp_path / "server.log"
    port = free_port()
    with Prometheus(tmp_path / "prom", targets=[f"127.0.0.1:{port}"]) as prom:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "vllmlog", "watch", str(log), "--listen", f"127.0.0.1:{port}",
             "--instance", "e2e", "--no-stdout", "--poll-interval", "0.05"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        try:
            wait_for(lambda: scrape_exporter(port) is not None, 30, "exporter up")
            assert scrape_exporter(port).get("vllmlog_watch_lines_read_total", 0) == 0  # file not there yet

            def write(fh, a: int, b: int) -> None:
                # chunks of ~25 lines with short pauses, pausing only at record starts
                cuts = [i for i in starts if a < i < b][::25] + [b]
                i = a
                for c in cuts:
                    fh.write("".join(t + "\n" for t in lines[i:c]))
                    fh.flush()
                    i = c
                    time.sleep(0.02)

            rot = next(i for i in starts if i >= 180)
            trunc = next(i for i in starts if i >= 320)
            with open(log, "w", encoding="utf-8") as fh:  # the file appears late
                write(fh, 0, rot)
            # a file created and renamed away between two polls was never seen (tail -F cannot either): wait
            # until the follower holds it open (it has read it all), as it would in any real rotation
            wait_for(lambda: scrape_exporter(port).get("vllmlog_watch_lines_read_total") == rot, 30, "first file read")
            os.rename(log, tmp_path / "server.log.1")  # rotation by rename (the writer reopens)
            with open(log, "w", encoding="utf-8") as fh:
                write(fh, rot, trunc)
            # copytruncate loses what the follower had not read yet (inherent), so wait first
            wait_for(lambda: scrape_exporter(port).get("vllmlog_watch_lines_read_total") == trunc, 30, "caught up")
            shutil.copy(log, tmp_path / "server.log.2")
            with open(log, "r+", encoding="utf-8") as fh:
                fh.truncate(0)
            with open(log, "a", encoding="utf-8") as fh:
                write(fh, trunc, len(lines))

            truth = list(csv.DictReader(TRUTH.open()))
            aborted = sum(1 for r in truth if r["aborted_by_client"] in ("1", "True"))
            want = {"aborted": aborted, "success": len(truth) - aborted}

            def by_status() -> dict[str, float]:
                return {r["metric"]["status"]: float(r["value"][1])
                        for r in prom.query('sum by (status) (vllmlog_requests_total{instance="e2e"})')}

            # conditions, not times: every line counted, every journey closed, and the scrape that shows it
            wait_for(lambda: prom.value("sum(vllmlog_log_lines_total)") == len(lines), 60, "prometheus has every line")
            wait_for(lambda: by_status() == want and prom.value("max(vllmlog_requests_in_flight)") == 0, 60,
                     "journeys closed")
            wait_for(lambda: prom.value("max(vllmlog_watch_lines_read_total)") == len(lines), 30, "lines read")
            # every line exactly once, by kind as the one-shot parser groups them
            got = {r["metric"]["kind"]: float(r["value"][1])
                   for r in prom.query("sum by (kind) (vllmlog_log_lines_total)")}
            assert got == {k: float(v) for k, v in _expected_lines_by_kind(lines).items()}
            assert prom.value("max(vllmlog_watch_lines_read_total)") == len(lines)
            assert prom.value("sum(resets(vllmlog_log_lines_total[10m]))") == 0
            assert prom.value('max(vllmlog_watch_file_changes_total{change="rotated"})') == 1
            assert prom.value('max(vllmlog_watch_file_changes_total{change="truncated"})') == 1
            # requests: the client's own record (25 aborted by the client, 80 sent)
            assert by_status() == want
            assert prom.value('sum(vllmlog_requests_total{model="/models/tiny"})') == len(truth)
            assert prom.value("sum(vllmlog_http_responses_total)") == sum('"POST ' in t or '"GET ' in t for t in lines)
            # latency histograms with vLLM's bucket edges hold what the summary's percentiles hold: successful
            # requests' measured values (this V1 INFO log has none: aborted requests' times are not latencies)
            assert prom.value('sum(vllmlog_e2e_request_latency_seconds_bucket{le="7680.0"})') == \
                prom.value("sum(vllmlog_e2e_request_latency_seconds_count)") == 0
            assert prom.value("max(vllmlog_requests_in_flight)") == 0
            assert prom.value('max(vllmlog_kv_cache_usage_ratio{engine="0"})') is not None
        finally:
            proc.terminate()
            try:
                out, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
        assert proc.returncode in (0, -15), err.decode()[-2000:]
