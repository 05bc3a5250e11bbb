"""The handbook's request-journey format: one line per scheduling event and per generated token.

Printed numbers come from the full-precision truth, formatted with Python's `%` rounding (half-even on the
binary value): `Latency`/`Total latency`/`TTFT` with 3 decimals (ms), `TPOT` with 4 decimals, generation
speed with 1 decimal, prefill `Throughput` and KV usage truncated/rounded to integers. Definitions follow
`vllm bench serve`: TTFT = arrival → first token, Total latency = arrival → finish, TPOT = (e2e − TTFT) /
(output tokens − 1) (0 for a one-token output), Total tokens = prompt + output. The engine-side lines
(start-up, stats, preemption warnings, access lines, tracebacks) are V0 0.6.1's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .v0 import V0Writer

if TYPE_CHECKING:
    from ..model import SimRequest


class HandbookWriter(V0Writer):
    """Request-journey lines of the user's handbook on top of a V0 server's engine lines."""

    name = "handbook"
    wants_waiting_warnings = True
    per_token = True

    def make_ids(self, idx: int, chat: bool) -> tuple[str, str]:
        """`req_000123`."""
        rid = f"req_{idx:06d}"
        return rid, rid

    def on_arrival(self, t: float, req: SimRequest, waiting: int) -> None:
        """`Added request … to waiting queue. Queue size: N` (+ streaming access line)."""
        self.sink.emit(t, f"INFO {self.clock.stamp(t)} scheduler.py:456] Added request {req.rid} to waiting queue. "
                          f"Queue size: {waiting}\n")
        if req.stream:
            self.sink.emit(t, self.access(req, 200, t))

    def on_schedule(self, t: float, req: SimRequest, running: int, waiting: int, swapped: int) -> None:
        """`Scheduling request …` and `Prefill started …`."""
        st = self.clock.stamp(t)
        self.sink.emit_many(t, [
            f"INFO {st} scheduler.py:489] Scheduling request {req.rid}. Running: {running}, Waiting: {waiting}, "
            f"Swapped: {swapped}\n",
            f"INFO {st} model_runner.py:234] Prefill started for {req.rid}. Input tokens: {req.prefill_target}, "
            f"Block tables: {req.blocks}\n",
        ])

    def on_prefill_done(self, t: float, req: SimRequest, first: bool) -> None:
        """`Prefill completed … Latency, Throughput`."""
        lat = t - req.prefill_start
        self.sink.emit(t, f"INFO {self.clock.stamp(t)} model_runner.py:278] Prefill completed for {req.rid}. "
                          f"Latency: {lat:.3f}s, Throughput: {int(req.prefill_target / lat)} tokens/s\n")

    def on_decode(self, t: float, reqs: list[SimRequest], batch: int, kv: float) -> None:
        """One `Decode step N` line per request; every 50th step a speed warning when below threshold."""
        st = self.clock.stamp(t)
        pre = f"INFO {st} model_runner.py:312] Decode step "
        mid = f". Batch size: {batch}, KV cache usage: {round(kv * 100)}%\n"
        thr = self.cfg.slow_threshold_tps
        out: list[str] = []
        app = out.append
        for r in reqs:
            n = r.out - 1
            app(f"{pre}{n} for {r.rid}{mid}")
            if n % 50 == 0:
                speed = n / (t - r.first_token)  # type: ignore[operator]
                if speed < thr:
                    app(f"WARNING {st} model_runner.py:345] Decode step {n} for {r.rid}. Token generation speed: "
                        f"{speed:.1f} tokens/s (below threshold {thr:g} tokens/s)\n")
        self.sink.emit_many(t, out)

    def on_finish(self, t: float, req: SimRequest) -> None:
        """`Request … finished. Status: SUCCESS. Total tokens, Total latency, TTFT, TPOT`."""
        e2e = t - req.arrival
        ttft = req.first_token - req.arrival  # type: ignore[operator]
        tpot = (e2e - ttft) / (req.out - 1) if req.out > 1 else 0.0
        self.sink.emit(t, f"INFO {self.clock.stamp(t)} scheduler.py:612] Request {req.rid} finished. Status: SUCCESS. "
                          f"Total tokens: {req.prompt + req.out}, Total latency: {e2e:.3f}s, TTFT: {ttft:.3f}s, "
                          f"TPOT: {tpot:.4f}s\n")
        if not req.stream:
            self.sink.emit(t, self.access(req, 200, t))

    def on_abort(self, t: float, req: SimRequest) -> None:
        """Client disconnect (`ERROR`) or client timeout (`CANCELLED`)."""
        st = self.clock.stamp(t)
        if req.status == "aborted":
            self.sink.emit(t, f"ERROR {st} scheduler.py:620] Request {req.rid} finished. Status: ERROR. "
                              f"Reason: {req.reason}\n")
        else:
            self.sink.emit(t, f"WARNING {st} scheduler.py:625] Request {req.rid} finished. Status: CANCELLED. "
                              f"Reason: {req.reason}\n")

    def on_preempt(self, t: float, req: SimRequest, mode: str, cumulative: int) -> None:
        """`Failed to allocate blocks … Out of memory.` plus V0's every-50th preemption warning."""
        self.sink.emit(t, f"ERROR {self.clock.stamp(t)} block_manager.py:156] Failed to allocate blocks for "
                          f"{req.rid}. Out of memory.\n")
        super().on_preempt(t, req, mode, cumulative)

    def on_waiting_warning(self, t: float, req: SimRequest) -> None:
        """`Request … waiting time exceeds 30s. Consider reducing load.`."""
        self.sink.emit(t, f"WARNING {self.clock.stamp(t)} scheduler.py:512] Request {req.rid} waiting time exceeds "
                          f"{self.cfg.waiting_warn_s:g}s. Consider reducing load.\n")

    def fail_requests(self, t: float, inflight: list[SimRequest]) -> None:
        """Every in-flight request ends with `Status: ERROR. Reason: Engine dead.`."""
        st = self.clock.stamp(t)
        self.sink.emit_many(t, [
            f"ERROR {st} scheduler.py:620] Request {r.rid} finished. Status: ERROR. Reason: {r.reason}\n"
            for r in inflight
        ])
