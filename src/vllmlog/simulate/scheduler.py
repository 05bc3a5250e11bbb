"""Discrete-event model of a vLLM server: arrivals, continuous batching, paged KV cache, preemption, faults.

The engine is format-agnostic: it mutates `SimRequest` objects and calls a `LogWriter` (see
`formats`) at every observable moment. Time is seconds from the first log line; nothing here reads
the wall clock, and every random draw comes from `random.Random` instances seeded by the run seed.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .config import Fault, SimConfig
from .model import DONE, RUNNING, SWAPPED, WAITING, Incident, SimRequest

if TYPE_CHECKING:
    from .formats.base import LogWriter

# Heap event kinds.
_EV_DEADLINE = 0
_EV_WARN = 1
_EV_DEATH = 2
_EV_HANG = 3
_EV_SHM = 4
_EV_WATCHDOG = 5


@dataclass
class StatsSnapshot:
    """What a periodic stats line reports."""

    prompt_tps: float
    """Prompt tokens/s since the previous stats line."""
    gen_tps: float
    """Generated tokens/s since the previous stats line."""
    running: int
    """Requests in the running batch."""
    waiting: int
    """Requests in the waiting queue."""
    swapped: int
    """Requests swapped to CPU (V0)."""
    gpu_kv: float
    """GPU KV usage, 0..1."""
    cpu_kv: float
    """CPU KV usage, 0..1."""
    preemptions: int
    """Preemptions since the previous stats line."""


@dataclass
class SimResult:
    """Outcome of one run: every request, the incidents, and where the log ended."""

    requests: list[SimRequest]
    """All requests that reached the server, in arrival order."""
    incidents: list[Incident]
    """Ground-truth incidents."""
    ready: float | None
    """When the server became ready (None if start-up failed)."""
    end: float
    """Time of the last log line."""
    preemptions: int = 0
    """Total preemptions."""
    extra: dict[str, float] = field(default_factory=dict)
    """Other counters."""


class Engine:
    """Runs the simulation and drives a `LogWriter`."""

    bulk = True
    """Use the bulk-decode fast path (tests switch it off to prove equivalence)."""

    def __init__(self, cfg: SimConfig, writer: LogWriter) -> None:
        self.cfg = cfg
        self.w = writer
        self.rng = random.Random(cfg.seed)  # workload and clients
        self.step_rng = random.Random(cfg.seed * 7919 + 1)  # step jitter
        eng = cfg.engine
        self.bs = eng.block_size
        self.total_blocks = max(1, eng.num_gpu_blocks)
        self.free_blocks = self.total_blocks
        self.total_cpu = max(1, eng.num_cpu_blocks)
        self.free_cpu = self.total_cpu
        self.watermark = int(eng.watermark * self.total_blocks)
        self.kv_full_blocks = 0.95 * self.total_blocks
        self.budget = eng.budget(writer.v1)
        self.max_seqs = eng.max_num_seqs
        self.allow_swap = eng.preemption_mode == "swap" and not writer.v1
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.swapped: deque[SimRequest] = deque()
        self.requests: list[SimRequest] = []
        self.incidents: list[Incident] = []
        self.heap: list[tuple[float, int, int, object]] = []
        self._seq = 0
        self.cum_preempt = 0
        self.hung = False
        self.dead = False
        self.prompt_since = 0
        self.gen_since = 0
        self.preempt_since = 0
        self.last_stats = 0.0
        self.obs: dict[str, list[float]] = {}
        self.last_activity = 0.0
        self.end_after_death = 0.0
        self.hang_start = 0.0
        self.pending_faults = 0
        self.pending_death: Fault | None = None
        self.stuck_assigned = False
        self._aborted_in_step = False

    # ------------------------------------------------------------------ helpers
    def _push(self, ts: float, kind: int, payload: object) -> None:
        if kind >= _EV_DEATH:
            self.pending_faults += 1
        self._seq += 1
        heapq.heappush(self.heap, (ts, self._seq, kind, payload))

    def _observe(self, key: str, t: float) -> None:
        span = self.obs.get(key)
        if span is None:
            self.obs[key] = [t, t]
        else:
            span[1] = t

    def _rate_at(self, rel: float) -> float:
        for b in self.cfg.workload.bursts:
            if b.start_s <= rel < b.end_s:
                return b.rate
        return self.cfg.workload.rate

    def _next_boundary(self, rel: float) -> float:
        nb = math.inf
        for b in self.cfg.workload.bursts:
            for x in (b.start_s, b.end_s):
                if x > rel and x < nb:
                    nb = x
        return nb

    def _next_arrival_rel(self, rel: float) -> float:
        """Next arrival time (relative to ready) after `rel`, for a piecewise-constant rate."""
        wl = self.cfg.workload
        while True:
            r = self._rate_at(rel)
            nb = self._next_boundary(rel)
            if r <= 0:
                if nb == math.inf:
                    return math.inf
                rel = nb
                continue
            if wl.arrival == "bursty":
                k = 1.0 / (wl.burst_cv * wl.burst_cv)
                gap = self.rng.gammavariate(k, 1.0 / (r * k))
            else:
                gap = self.rng.expovariate(r)
            if rel + gap > nb:
                rel = nb
                continue
            return rel + gap

    def _lognorm(self, median: float, sigma: float, lo: int, hi: int) -> int:
        v = int(self.rng.lognormvariate(math.log(median), sigma))
        return lo if v < lo else hi if v > hi else v

    def _new_request(self, t: float) -> SimRequest:
        wl, eng, cl = self.cfg.workload, self.cfg.engine, self.cfg.client
        rng = self.rng
        idx = len(self.requests) + 1
        prompt_hi = min(wl.prompt_max, eng.max_model_len - wl.output_min - 1)
        prompt = self._lognorm(wl.prompt_median, wl.prompt_sigma, wl.prompt_min, prompt_hi)
        max_tokens = min(rng.choice(wl.max_tokens_choices), eng.max_model_len - prompt)
        natural = self._lognorm(wl.output_median, wl.output_sigma, wl.output_min, 1 << 30)
        target = max(1, min(natural, max_tokens))
        stream = rng.random() < wl.stream_fraction
        chat = rng.random() < wl.chat_fraction
        port = rng.randrange(32768, 61000)
        u_disc = rng.random()
        u_after = rng.random()
        rid, erid = self.w.make_ids(idx, chat)
        req = SimRequest(idx, rid, erid, t, prompt, target, max_tokens, stream, chat, port)
        if cl.disconnect_fraction > 0 and u_disc < cl.disconnect_fraction:
            a, b = cl.disconnect_after_s
            req.deadline = t + a + (b - a) * u_after
            req.deadline_kind = "disconnect"
        elif cl.timeout_s is not None:
            req.deadline = t + cl.timeout_s
            req.deadline_kind = "timeout"
        return req

    # ------------------------------------------------------------------ main loop
    def run(self) -> SimResult:
        """Simulate start-up, traffic, faults and shutdown; returns the ground truth."""
        cfg = self.cfg
        faults = {f.kind: f for f in cfg.faults}
        for kind, cat in (("startup_oom", "startup_oom"), ("kv_too_small", "kv_cache_capacity_error")):
            if kind in faults:
                fail_t, end_t = self.w.startup_failure(0.0, faults[kind])
                if kind == "startup_oom":
                    desc = "CUDA out of memory while profiling/loading the model; the server never became ready"
                elif faults[kind].cause == "no_blocks":
                    desc = "no GPU memory left for KV-cache blocks; the engine refused to start"
                else:
                    desc = "KV cache too small for one max-length request; the engine refused to start"
                self.incidents.append(Incident(cat, fail_t, end_t, desc))
                return SimResult([], self.incidents, None, end_t)
        ready = self.w.startup(0.0)
        self.w.sink.start_clock(ready)
        self.last_stats = ready
        self.last_activity = ready
        for f in cfg.faults:
            if f.kind == "engine_death":
                self._push(ready + f.at_s, _EV_DEATH, f)
            elif f.kind == "nccl_hang":
                self._push(ready + f.at_s, _EV_HANG, f)
        stuck_at = faults["stuck_request"].at_s + ready if "stuck_request" in faults else None

        arrival_end = ready + cfg.duration_s
        next_arr = ready + self._next_arrival_rel(0.0)
        interval = self.w.stats_interval
        tick = self.w.stats_tick
        next_tick = ready + tick
        hard_stop = arrival_end + cfg.drain_limit_s
        for f in cfg.faults:
            if f.kind == "nccl_hang":
                hard_stop = max(hard_stop, ready + f.at_s + f.timeout_s + 60.0)
        now = ready
        sink = self.w.sink
        max_req = cfg.max_requests
        max_lines = cfg.max_lines
        step_model = cfg.step
        w = self.w
        backlog_len = max(16, self.max_seqs)  # a queue longer than a full batch

        def advance(until: float) -> None:
            """Process arrivals, timed events and stats ticks with time <= until, in time order."""
            nonlocal next_arr, next_tick
            heap = self.heap
            while not self.dead:
                t_heap = heap[0][0] if heap else math.inf
                t = next_arr if next_arr < t_heap else t_heap
                if next_tick < t:
                    t = next_tick
                if t > until:
                    return
                if t == next_tick:
                    next_tick += tick
                    if w.stats_periodic or (t - self.last_stats >= interval and not self.hung):
                        self._stats(t)
                elif t == next_arr:
                    stop = (
                        t >= arrival_end
                        or (max_req is not None and len(self.requests) >= max_req)
                        or (max_lines is not None and sink.lines >= max_lines)
                    )
                    if stop:
                        next_arr = math.inf
                        continue
                    req = self._new_request(t)
                    if stuck_at is not None and t >= stuck_at and not self.stuck_assigned:
                        self.stuck_assigned = True
                        req.stuck = True
                        req.max_tokens = cfg.engine.max_model_len - req.prompt
                        req.target = req.max_tokens
                    self.requests.append(req)
                    self.waiting.append(req)
                    if len(self.waiting) >= backlog_len:
                        self._observe("backlog", t)
                    w.on_arrival(t, req, len(self.waiting))
                    if req.deadline is not None:
                        self._push(req.deadline, _EV_DEADLINE, req)
                    if w.wants_waiting_warnings:
                        self._push(t + cfg.waiting_warn_s, _EV_WARN, req)
                    next_arr = ready + self._next_arrival_rel(t - ready)
                else:
                    _, _, kind, payload = heapq.heappop(heap)
                    if kind >= _EV_DEATH:
                        self.pending_faults -= 1
                    self._event(t, kind, payload)

        while not self.dead:
            advance(now)
            if self.dead:
                break
            busy = (self.running or self.waiting or self.swapped) and not self.hung
            if not busy:
                pending = next_arr != math.inf or self.pending_faults > 0
                inflight = bool(self.running or self.waiting or self.swapped)
                if not pending and not inflight:
                    break
                nxt = min(next_arr, self.heap[0][0] if self.heap else math.inf, next_tick)
                if nxt > hard_stop or nxt == math.inf:
                    break
                now = nxt
                continue
            if now > hard_stop:
                break
            # ---- fast path: many uneventful decode steps at once (byte-identical to stepping one by one)
            if self.bulk and not w.per_token and self.pending_death is None:
                t_ev = min(next_arr, self.heap[0][0] if self.heap else math.inf, next_tick)
                if not w.stats_periodic:
                    t_ev = min(t_ev, self.last_stats + interval)
                t_bulk = self._bulk_decode(now, t_ev, hard_stop)
                if t_bulk is not None:
                    now = t_bulk
                    continue
            # ---- one engine step
            t0 = now
            batch_pf, batch_dec, pf_tokens, ctx_tokens = self._schedule(t0)
            if not batch_pf and not batch_dec:
                # Nothing fits (e.g. KV full with only waiting requests): wait for an event.
                nxt = min(next_arr, self.heap[0][0] if self.heap else math.inf, next_tick)
                if nxt == math.inf or nxt > hard_stop:
                    break
                now = nxt
                continue
            dt = step_model.step_time(pf_tokens, len(batch_dec), ctx_tokens, self.step_rng.random())
            t1 = t0 + dt
            if self.pending_death is not None:  # the fault strikes inside a step that has work
                f = self.pending_death
                self.pending_death = None
                cause = f.cause or "cuda_oom"
                if cause == "cuda_oom":
                    self._die(t1, cause, "runtime_oom",
                              "CUDA out of memory during a step killed the engine; in-flight requests failed")
                    self.incidents.append(Incident(
                        "engine_dead", t1, self.end_after_death, "the engine died of the CUDA OOM"))
                else:
                    self._die(t1, cause, "engine_dead",
                              f"the engine core died mid-run ({cause.replace('_', ' ')}); in-flight requests failed")
                break
            advance(t1)
            if self.dead or self.hung:
                now = t1
                continue
            self._finish_step(t1, batch_pf, batch_dec)
            self.last_activity = t1
            if not w.stats_periodic and t1 - self.last_stats >= interval:
                self._stats(t1)
            now = t1

        if self.dead:
            end = self.end_after_death
        else:
            inflight = any(r.state != DONE for r in self.requests)
            shutdown_t = now if inflight else max(now, self.last_activity) + 12.0
            advance(shutdown_t)  # trailing stats lines before SIGTERM
            end = w.on_shutdown(shutdown_t)
        # Close observed incidents.
        if "preempt" in self.obs and "kvfull" in self.obs:  # pressure began when the cache first filled up
            a, b = self.obs["preempt"]
            c, d = self.obs["kvfull"]
            self.obs["preempt"] = [min(a, c), max(b, d)]
        for key, cat, desc in (
            ("preempt", "kv_cache_pressure_preemption", "KV cache ≥ 95 % full and running requests preempted"),
            ("backlog", "queue_backlog", "arrivals exceed capacity: the waiting queue outgrows a full batch "
             f"(max_num_seqs) or requests wait longer than {cfg.waiting_warn_s:g}s"),
            ("disconnect", "client_abort", "clients disconnected before their requests finished"),
            ("timeout", "timeout", "clients gave up waiting (client-side timeout)"),
        ):
            if key in self.obs:
                a, b = self.obs[key]
                self.incidents.append(Incident(cat, a, b, desc))
        if cfg.step.slowdown * cfg.step.decode_slowdown > 1.0:
            self.incidents.append(Incident(
                "slow_throughput", ready, self.last_activity,
                f"engine steps {cfg.step.slowdown:g}x slower (decode {cfg.step.slowdown * cfg.step.decode_slowdown:g}x): "
                "generation below 20 tokens/s, TTFT above 1 s",
            ))
        if stuck_at is not None:
            stuck = [r for r in self.requests if r.stuck]
            if stuck:
                r = stuck[0]
                self.incidents.append(Incident(
                    "stuck_request", r.arrival, r.finish if r.finish is not None else end,
                    f"request {r.rid} never stops generating and holds its KV blocks",
                ))
        self.incidents.sort(key=lambda i: (i.start, i.category))
        return SimResult(self.requests, self.incidents, ready, end, self.cum_preempt)

    # ------------------------------------------------------------------ scheduling
    def _bulk_decode(self, now: float, t_ev: float, hard_stop: float) -> float | None:
        """Advance k ≥ 1 pure-decode steps that end before `t_ev` in one go; None when not applicable.

        Applies only when nothing observable can happen inside the span: no prefill in progress, nobody
        admitted or swapped in, no request finishing, no preemption (enough free blocks for every
        allocation), no event or stats line. Step times use the same jitter draws, in the same order and
        with the same arithmetic, as single steps, so the result is identical.
        """
        run = self.running
        n = len(run)
        if n == 0 or n > self.budget:
            return None
        bs = self.bs
        k_max = 1 << 30
        ctx = 0
        for r in run:
            if r.computed < r.prefill_target:
                return None
            left = r.target - r.out - 1  # the finishing step goes through the normal path
            if left < k_max:
                k_max = left
            ctx += r.prompt + r.out
        if k_max <= 0:
            return None
        if self.swapped:
            r = self.swapped[0]
            if len(run) < self.max_seqs and self.free_blocks - r.blocks >= self.watermark:
                return None
        elif self.waiting and len(run) < self.max_seqs and self.budget - n > 0:
            r = self.waiting[0]
            if self.free_blocks - (-(-r.prefill_target // bs)) >= self.watermark:
                return None  # an admission would happen
        # an upper bound of the steps that fit before the next event (every step lasts at least dt_min)
        dt_min = self.cfg.step.step_time(0, n, ctx, 0.0)
        if dt_min <= 0:
            return None
        horizon = min(k_max, int((t_ev - now) / dt_min) + 1, 4096)
        if horizon < 2:
            return None  # not worth it: at most one step before the next event
        # blocks each step allocates: request r needs one at steps g+1+1, g+1+1+bs, … (1-based)
        alloc = [0] * (horizon + 2)
        for r in run:
            j = r.blocks * bs - (r.prompt + r.out) + 2
            while j <= horizon:
                alloc[j] += 1
                j += bs
        step_time = self.cfg.step.step_time
        rng = self.step_rng
        jit = 1.0 + self.cfg.step.jitter + 1e-9  # upper bound of the jitter factor
        free = self.free_blocks
        t = now
        k = 0
        kv_first = kv_last = None
        while k < horizon:
            need = alloc[k + 1]
            if need > free:
                break
            c = ctx + k * n
            if t > hard_stop or t + step_time(0, n, c, 0.5) * jit >= t_ev:  # the step could reach an event
                break
            t1 = t + step_time(0, n, c, rng.random())
            free -= need
            if self.total_blocks - free >= self.kv_full_blocks:
                if kv_first is None:
                    kv_first = t1
                kv_last = t1
            t = t1
            k += 1
        if k == 0:
            return None
        for r in run:
            r.out += k
            r.blocks = max(r.blocks, -(-(r.prompt + r.out - 1) // bs))
        self.free_blocks = free
        self.gen_since += n * k
        if kv_first is not None:
            self._observe("kvfull", kv_first)
            self._observe("kvfull", kv_last)  # type: ignore[arg-type]
        self.last_activity = t
        return t

    def _schedule(self, t0: float) -> tuple[list[tuple[SimRequest, int]], list[SimRequest], int, int]:
        """Pick this step's batch: decodes (preempting on KV exhaustion), swap-ins, new prefills."""
        bs = self.bs
        budget = self.budget
        batch_pf: list[tuple[SimRequest, int]] = []
        batch_dec: list[SimRequest] = []
        pf_tokens = 0
        ctx_tokens = 0
        preempted = False
        if self.free_blocks >= len(self.running):
            # Fast path: every sequence can get the one block it may need, so nobody is preempted.
            free = self.free_blocks
            for r in self.running:
                if r.computed < r.prefill_target:
                    chunk = min(r.prefill_target - r.computed, budget)
                    if chunk > 0:
                        budget -= chunk
                        pf_tokens += chunk
                        batch_pf.append((r, chunk))
                    continue
                seq_len = r.prompt + r.out
                if r.blocks * bs < seq_len:
                    r.blocks += 1
                    free -= 1
                if budget <= 0:
                    continue
                budget -= 1
                ctx_tokens += seq_len
                batch_dec.append(r)
            self.free_blocks = free
            return self._admit(t0, batch_pf, batch_dec, pf_tokens, ctx_tokens, budget)
        queue = deque(self.running)
        new_running: list[SimRequest] = []
        while queue:
            r = queue.popleft()
            if r.computed < r.prefill_target:  # prefill still in progress (chunked)
                chunk = min(r.prefill_target - r.computed, budget)
                if chunk > 0:
                    budget -= chunk
                    pf_tokens += chunk
                    batch_pf.append((r, chunk))
                new_running.append(r)
                continue
            seq_len = r.prompt + r.out
            if r.blocks * bs < seq_len:
                while self.free_blocks <= 0:
                    victim = queue.pop() if queue else r
                    self._preempt(victim, t0)
                    preempted = True
                    if victim is r:
                        break
                if r.state != RUNNING:
                    continue
                r.blocks += 1
                self.free_blocks -= 1
            if budget <= 0:
                new_running.append(r)
                continue
            budget -= 1
            ctx_tokens += seq_len
            batch_dec.append(r)
            new_running.append(r)
        self.running = new_running
        if preempted:
            return batch_pf, batch_dec, pf_tokens, ctx_tokens
        return self._admit(t0, batch_pf, batch_dec, pf_tokens, ctx_tokens, budget)

    def _admit(
        self, t0: float, batch_pf: list[tuple[SimRequest, int]], batch_dec: list[SimRequest], pf_tokens: int,
        ctx_tokens: int, budget: int,
    ) -> tuple[list[tuple[SimRequest, int]], list[SimRequest], int, int]:
        """Swap-ins (V0), then new admissions within the remaining budget, KV blocks and max_num_seqs."""
        bs = self.bs
        # V0: swapped requests come back before any new request is admitted.
        while self.swapped and len(self.running) < self.max_seqs:
            r = self.swapped[0]
            if self.free_blocks - r.blocks < self.watermark:
                break
            self.swapped.popleft()
            self.free_blocks -= r.blocks
            self.free_cpu += r.blocks
            r.state = RUNNING
            self.running.append(r)
        if self.swapped:
            return batch_pf, batch_dec, pf_tokens, ctx_tokens
        w = self.w
        while self.waiting and budget > 0 and len(self.running) < self.max_seqs:
            r = self.waiting[0]
            need = -(-r.prefill_target // bs)
            if self.free_blocks - need < self.watermark:
                break
            chunk = min(r.prefill_target, budget)
            if chunk < r.prefill_target and not w.v1 and (batch_pf or batch_dec):
                break  # V0 without chunked prefill: a prompt must fit a step's budget
            self.waiting.popleft()
            self.free_blocks -= need
            r.blocks = need
            r.computed = 0
            r.state = RUNNING
            if r.scheduled is None:
                r.scheduled = t0
                if t0 - r.arrival > self.cfg.waiting_warn_s:
                    self._observe("backlog", t0)
            r.prefill_start = t0
            self.running.append(r)
            w.on_schedule(t0, r, len(self.running), len(self.waiting), len(self.swapped))
            budget -= chunk
            pf_tokens += chunk
            batch_pf.append((r, chunk))
        return batch_pf, batch_dec, pf_tokens, ctx_tokens

    def _preempt(self, victim: SimRequest, t: float) -> None:
        """Take a running request off the GPU: recompute (back to waiting) or swap (V0, to CPU)."""
        mode = "recompute"
        if self.allow_swap and self.free_cpu >= victim.blocks:
            mode = "swap"
        victim.preemptions += 1
        self.cum_preempt += 1
        self.preempt_since += 1
        self._observe("preempt", t)
        self.w.on_preempt(t, victim, mode, self.cum_preempt)
        self.free_blocks += victim.blocks
        if mode == "swap":
            self.free_cpu -= victim.blocks
            victim.state = SWAPPED
            self.swapped.append(victim)
        else:
            victim.blocks = 0
            victim.computed = 0
            victim.prefill_target = victim.prompt + victim.out
            victim.state = WAITING
            self.waiting.appendleft(victim)

    def _finish_step(self, t1: float, batch_pf: list[tuple[SimRequest, int]], batch_dec: list[SimRequest]) -> None:
        """Apply a finished step: prefill progress, one new token per sequence, completions."""
        w = self.w
        finished: list[SimRequest] = []
        gen = 0
        for r, chunk in batch_pf:
            if r.state != RUNNING:
                continue
            r.computed += chunk
            self.prompt_since += chunk
            if r.computed < r.prefill_target:
                continue
            r.out += 1
            gen += 1
            first = r.first_token is None
            if first:
                r.first_token = t1
            w.on_prefill_done(t1, r, first)
            if r.out >= r.target:
                finished.append(r)
        live = [r for r in batch_dec if r.state == RUNNING] if self._aborted_in_step else batch_dec
        self._aborted_in_step = False
        for r in live:
            r.out += 1
        gen += len(live)
        self.gen_since += gen
        if live:
            used = self.total_blocks - self.free_blocks
            if used >= self.kv_full_blocks:
                self._observe("kvfull", t1)
            w.on_decode(t1, live, len(self.running), used / self.total_blocks)
            target_hit = [r for r in live if r.out >= r.target]
            if target_hit:
                finished.extend(target_hit)
        if finished:
            done = set(map(id, finished))
            self.running = [r for r in self.running if id(r) not in done]
            for r in finished:
                self.free_blocks += r.blocks
                r.blocks = 0
                r.state = DONE
                r.finish = t1
                r.status = "success"
                r.finish_reason = "length" if r.out >= r.max_tokens else "stop"
                r.http_status = 200
                w.on_finish(t1, r)

    # ------------------------------------------------------------------ events
    def _remove(self, r: SimRequest) -> None:
        if r.state == RUNNING:
            self.running.remove(r)
            self.free_blocks += r.blocks
            self._aborted_in_step = True
        elif r.state == WAITING:
            self.waiting.remove(r)
            self.free_blocks += r.blocks
        elif r.state == SWAPPED:
            self.swapped.remove(r)
            self.free_cpu += r.blocks
        r.blocks = 0
        r.state = DONE

    def _event(self, t: float, kind: int, payload: object) -> None:
        cfg = self.cfg
        if kind == _EV_DEADLINE:
            r = payload
            assert isinstance(r, SimRequest)
            if r.state == DONE:
                return
            was_waiting = r.state == WAITING and r.scheduled is None
            self._remove(r)
            r.finish = t
            r.finish_reason = "abort"
            r.http_status = 200 if r.stream else None
            if r.deadline_kind == "disconnect":
                r.status = "aborted"
                r.reason = "Client disconnected."
                self._observe("disconnect", t)
            else:
                r.status = "cancelled"
                r.reason = f"Timeout after {cfg.client.timeout_s:g}s."
                self._observe("timeout", t)
            if was_waiting and t - r.arrival > cfg.waiting_warn_s:
                self._observe("backlog", t)
            self.w.on_abort(t, r)
        elif kind == _EV_WARN:
            r = payload
            assert isinstance(r, SimRequest)
            if r.state == WAITING and r.scheduled is None and not r.warned and not self.hung:
                r.warned = True
                self._observe("backlog", t)
                self.w.on_waiting_warning(t, r)
        elif kind == _EV_DEATH:
            f = payload
            assert isinstance(f, Fault)
            self.pending_death = f
        elif kind == _EV_HANG:
            f = payload
            assert isinstance(f, Fault)
            self.hung = True
            self.hang_start = t
            self.w.on_hang_start(t)
            k = 1
            while 60.0 * k < f.timeout_s:
                self._push(t + 60.0 * k, _EV_SHM, k)
                k += 1
            self._push(t + f.timeout_s, _EV_WATCHDOG, f)
        elif kind == _EV_SHM:
            self.w.on_hang_tick(t)
        elif kind == _EV_WATCHDOG:
            f = payload
            assert isinstance(f, Fault)
            t2 = self.w.on_nccl_watchdog(t, f)
            self.incidents.append(Incident(
                "engine_hang", self.hang_start, t2, "no engine step completes while the collective is stuck"))
            self._die(t2, "nccl", "distributed_nccl",
                      "a collective (all-reduce) hung between TP ranks; NCCL watchdog timed out and killed a worker",
                      start=self.hang_start)
            self.incidents.append(Incident(
                "engine_dead", t2, self.end_after_death, "the engine died after the NCCL abort; in-flight requests failed"))

    def _die(self, t: float, cause: str, category: str, desc: str, start: float | None = None) -> None:
        """Engine death: fail every in-flight request, then the server exits."""
        inflight = [r for r in self.requests if r.state != DONE]
        for r in inflight:
            r.state = DONE
            r.blocks = 0
            r.finish = t
            r.status = "error"
            r.reason = "Engine dead."
            r.finish_reason = "error"
            r.http_status = 200 if r.stream else 500
        self.running, self.waiting, self.swapped = [], deque(), deque()
        end = self.w.on_engine_death(t, cause, inflight)
        self.end_after_death = end
        self.incidents.append(Incident(category, start if start is not None else t, end, desc))
        self.dead = True

    def _stats(self, t: float) -> None:
        dt = t - self.last_stats
        if dt <= 0:
            return
        snap = StatsSnapshot(
            self.prompt_since / dt, self.gen_since / dt, len(self.running), len(self.waiting),
            len(self.swapped), (self.total_blocks - self.free_blocks) / self.total_blocks,
            (self.total_cpu - self.free_cpu) / self.total_cpu, self.preempt_since,
        )
        self.prompt_since = self.gen_since = self.preempt_since = 0
        self.last_stats = t
        self.w.on_stats(t, snap)
