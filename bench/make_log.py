#!/usr/bin/env python3
"""Write a realistic mixed vLLM log for throughput benchmarks (deterministic for a given seed).

The mix follows the performance reference: the handbook's request journey (queued → scheduled →
prefill → ~93 % ``Decode step`` lines → finished) for 8–64 interleaved requests, V0 stats lines every
5 s, V1 ``Engine 000:`` stats lines, uvicorn access lines, the odd slow-generation / waiting warning,
preemption and client abort.

    python bench/make_log.py OUT.log --lines 5000000 [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import sys
from datetime import datetime, timedelta


def generate(out, n_lines: int, seed: int = 1, servers: int = 1) -> int:
    """Write about ``n_lines`` lines to the binary stream ``out``; return the exact count.

    ``servers`` > 1 splits the log into that many server runs of about equal length (a crash-looping
    pod): each restart logs the version banner and ``Application startup complete.``, and the requests
    in flight are lost (they stay unfinished)."""
    rnd = random.Random(seed)
    t = datetime(2026, 3, 25, 10, 0, 0)
    written = 0
    next_id = 0
    active: list[list] = []  # [rid, prompt, out_target, step, t_arrival]
    target_conc = 32
    last_stats = t
    buf: list[str] = []
    app = buf.append
    step_ms = 0
    restarts_done = 0
    while written < n_lines:
        if servers > 1 and (written + len(buf)) * servers >= (restarts_done + 1) * n_lines and restarts_done < servers - 1:
            restarts_done += 1
            st = t.strftime("%m-%d %H:%M:%S")
            app(f"INFO {st} api_server.py:583] vLLM API server version 0.5.0\n")
            app("INFO:     Application startup complete.\n")
            active.clear()
        # fluctuate concurrency between 8 and 64
        if rnd.random() < 0.01:
            target_conc = max(8, min(64, target_conc + rnd.randint(-8, 8)))
        st = t.strftime("%m-%d %H:%M:%S")
        while len(active) < target_conc:
            next_id += 1
            rid = f"req_{next_id:06d}"
            prompt = rnd.randint(64, 4096)
            q = rnd.randint(0, 40)
            app(f"INFO {st} scheduler.py:456] Added request {rid} to waiting queue. Queue size: {q}\n")
            app(f"INFO {st} scheduler.py:489] Scheduling request {rid}. Running: {len(active)}, Waiting: {q}, Swapped: 0\n")
            app(f"INFO {st} model_runner.py:234] Prefill started for {rid}. Input tokens: {prompt}, Block tables: {(prompt + 15) // 16}\n")
            lat = prompt / rnd.uniform(4000, 9000)
            app(f"INFO {st} model_runner.py:278] Prefill completed for {rid}. Latency: {lat:.3f}s, Throughput: {int(prompt / lat)} tokens/s\n")
            if rnd.random() < 0.5:
                app(f'INFO:     10.0.{rnd.randint(0, 9)}.{rnd.randint(1, 250)}:{rnd.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n')
            active.append([rid, prompt, rnd.randint(16, 150), 0, t])
        batch = len(active)
        kv = min(99, 10 + batch + rnd.randint(0, 20))
        mid = f". Batch size: {batch}, KV cache usage: {kv}%\n"
        pre = f"INFO {st} model_runner.py:312] Decode step "
        done = []
        for r in active:
            r[3] += 1
            app(f"{pre}{r[3]} for {r[0]}{mid}")
            if r[3] % 50 == 0 and rnd.random() < 0.05:
                app(f"WARNING {st} model_runner.py:345] Decode step {r[3]} for {r[0]}. Token generation speed: {rnd.uniform(5, 19):.1f} tokens/s (below threshold 20 tokens/s)\n")
            if r[3] >= r[2]:
                done.append(r)
        for r in done:
            active.remove(r)
            e2e = (t - r[4]).total_seconds() + rnd.uniform(0.1, 0.9)
            ttft = rnd.uniform(0.05, 0.6)
            x = rnd.random()
            if x < 0.01:
                app(f"ERROR {st} scheduler.py:620] Request {r[0]} finished. Status: ERROR. Reason: Client disconnected.\n")
            elif x < 0.015:
                app(f"WARNING {st} scheduler.py:625] Request {r[0]} finished. Status: CANCELLED. Reason: Timeout after 60s.\n")
            else:
                app(f"INFO {st} scheduler.py:612] Request {r[0]} finished. Status: SUCCESS. Total tokens: {r[1] + r[3]}, "
                    f"Total latency: {e2e:.3f}s, TTFT: {ttft:.3f}s, TPOT: {(e2e - ttft) / max(1, r[3] - 1):.4f}s\n")
        if rnd.random() < 0.002:
            v = rnd.choice(active) if active else None
            if v is not None:
                app(f"ERROR {st} block_manager.py:156] Failed to allocate blocks for {v[0]}. Out of memory.\n")
                app(f"WARNING {st} scheduler.py:1089] Sequence group {v[0]} is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption={next_id}\n")
        # ~25 ms per decode step
        step_ms += 25
        if step_ms >= 1000:
            step_ms -= 1000
            t += timedelta(seconds=1)
            if (t - last_stats).total_seconds() >= 5:
                last_stats = t
                st = t.strftime("%m-%d %H:%M:%S")
                pt, gt = rnd.uniform(0, 8000), batch * 40 + rnd.uniform(0, 50)
                app(f"INFO {st} metrics.py:341] Avg prompt throughput: {pt:.1f} tokens/s, Avg generation throughput: {gt:.1f} tokens/s, "
                    f"Running: {batch} reqs, Swapped: 0 reqs, Pending: {rnd.randint(0, 40)} reqs, GPU KV cache usage: {kv:.1f}%, CPU KV cache usage: 0.0%.\n")
                app(f"INFO {st} [loggers.py:123] Engine 000: Avg prompt throughput: {pt:.1f} tokens/s, Avg generation throughput: {gt:.1f} tokens/s, "
                    f"Running: {batch} reqs, Waiting: {rnd.randint(0, 40)} reqs, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: {rnd.uniform(0, 80):.1f}%\n")
                app('INFO:     127.0.0.1:41234 - "GET /metrics HTTP/1.1" 200 OK\n')
        if len(buf) >= 4096:
            take = min(len(buf), n_lines - written)
            out.write("".join(buf[:take]).encode())
            written += take
            buf.clear()
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--lines", type=int, default=5_000_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--servers", type=int, default=1, help="server runs (restarts) the log is split into")
    a = ap.parse_args(argv)
    with open(a.out, "wb") as f:
        n = generate(f, a.lines, a.seed, a.servers)
    print(f"wrote {n:,} lines to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
