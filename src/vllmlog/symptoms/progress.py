"""Symptoms of progress: the engine stalls, the queue does not drain, sequences are preempted, generation
slows down against the run's own normal."""

from __future__ import annotations

import bisect
import math
import re
from statistics import median
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Iterator

from ..rules import _util as u
from ..model import Event
from ..rules.base import Evidence, Severity
from ..state.model import KV_FULL, Interval
from .base import Symptom, detector, trend_of

if TYPE_CHECKING:  # pragma: no cover
    from ..run import Run
    from ..state import ServiceState

_HANG = ("shm_broadcast_timeout", "rpc_timeout", "engine_iteration_timeout")
#: Waiting > 0 with nothing admitted and nothing changing for this long is a stall (head-of-line blocking).
NOT_ADMITTED_S = 300.0
#: Running 0 with requests waiting and nothing processed for this long is a stall (nothing can be holding them back).
EMPTY_NOT_ADMITTED_S = 60.0
#: An offline progress bar not redrawn for this long (and 20 × its own seconds per prompt) has stopped.
OFFLINE_SILENT_S = 600.0
_SPI = re.compile(r"(\d+(?:\.\d+)?)\s?(s/it|it/s)")
#: A queue that lasts this long without draining is a backlog (the handbook's "waiting > 30 s").
QUEUE_S = 30.0
#: A deep queue at the seat limit (Waiting ≥ 2 × max_num_seqs) seen for this long — two 10 s stats intervals,
#: three at 5 s — is several service times of waiting, whatever the stats interval.
DEEP_QUEUE_S = 15.0


def _runs(xs: list[Interval], pred) -> list[list[Interval]]:
    return u.stretches(xs, pred)


def _ev(xs: list[Interval], limit: int = 6) -> list[Evidence]:
    return [u.sample_ev(x.sample) for x in u.pick(xs, None, limit=limit)]


@detector("stalled")
def stalled(run: Run, st: ServiceState, opts: dict) -> Iterator[Symptom]:
    """No progress while work is pending: Running > 0 at 0 tokens/s for two intervals or followed by a silent
    gap; Waiting > 0 never admitted for minutes with nothing changing; hang timeouts while serving."""
    v = st.view
    for xs in st.engines.values():
        xs = [x for x in xs if not v.in_shutdown(x.sample.line)]
        episodes: list[tuple[list[Interval], float | None, Interval | None]] = []
        for run_ in _runs(xs, lambda x: x.stuck):
            j = xs.index(run_[-1]) + 1
            nxt = xs[j] if j < len(xs) else None
            gap = nxt.gap_before_s if nxt is not None else None
            if len(run_) >= 2 or gap is not None:
                episodes.append((run_, gap, nxt))
        for run_ in _runs(xs, lambda x: x.waiting > 0 and not x.admitting and not x.stuck):
            groups: list[list[Interval]] = []
            for x in run_:
                if groups and (groups[-1][-1].running, groups[-1][-1].waiting) == (x.running, x.waiting):
                    groups[-1].append(x)
                else:
                    groups.append([x])
            for g in groups:
                if u.duration_s(g) >= NOT_ADMITTED_S:
                    j = xs.index(g[-1]) + 1
                    episodes.append((g, None, xs[j] if j < len(xs) else None))
            # an empty engine that takes nothing: Running 0 with requests waiting, not a token prefilled or generated,
            # for a minute — every seat and the whole KV cache are free, so no limit explains the wait (however the
            # queue grows meanwhile)
            for g in _runs(run_, lambda x: x.running == 0 and x.gen_tps == 0):
                if len(g) >= 3 and u.duration_s(g) + g[0].dt_s >= EMPTY_NOT_ADMITTED_S and not any(
                        g[0] is e[0][0] for e in episodes):
                    j = xs.index(g[-1]) + 1
                    episodes.append((g, None, xs[j] if j < len(xs) else None))
        for run_, gap, nxt in episodes:
            s0 = run_[0]
            end = nxt.ts if nxt is not None else run_[-1].ts
            dur = (end - s0.ts).total_seconds() if end and s0.ts else None
            recovered = nxt is not None and not nxt.stuck and (nxt.admitting or nxt.gen_tps > 0)
            timeouts = [e for e in v.of(*_HANG) if e.ts and s0.ts and -60 <= (e.ts - s0.ts).total_seconds()
                        <= (dur or 0) + 600]
            evid = _ev(run_, 4) + [u.first(e) for e in timeouts[:3]]
            if gap is not None and nxt is not None:
                evid.append(u.sample_ev(nxt.sample))
            stuck = s0.stuck
            wq = f"{s0.waiting}" if run_[-1].waiting == s0.waiting else f"{s0.waiting} → {run_[-1].waiting}"
            what = (f"Running {s0.running} at 0 tokens/s" if stuck else
                    f"Running {s0.running} / Waiting {wq} with nothing admitted")
            what += f" for {len(run_)} stats intervals" if len(run_) > 1 else ""
            if gap is not None:
                what += f", then no stats line for {u.secs(gap)}"
            sev = Severity.CRITICAL if not recovered and (dur or 0) >= 300 else Severity.ERROR
            yield Symptom("stalled", st.file, st.index, sev,
                          f"No progress: {what} (~{u.secs(dur)}" + (", then resumed)." if recovered else ", not recovered)."),
                          onset=s0.ts, end=end, trend="recovered" if recovered else "stable", evidence=u.dedupe(evid),
                          process=s0.sample.process,
                          data={"stalled_s": dur, "running": s0.running, "waiting": s0.waiting, "stuck": stuck,
                                "stats_gap_s": gap, "timeouts": len(timeouts)})
    # the stats stop after a busy interval while requests keep arriving: the engine stopped stepping (V1 logs
    # stats from the engine's outputs, so a wedged engine core goes silent)
    # — also when the operator then stops it (the silence before the SIGTERM counts), and when the stats come back
    # later (a stall that ended: the engine resumed, or was unstuck)
    graceful = next((e for e in v.events if e.line == v.graceful_line), None) if v.graceful_line else None
    stop_ts = graceful.ts if graceful is not None and graceful.ts is not None else v.srv.end_ts
    typical = st.coverage.interval_s or 10.0
    quiet = max(6 * typical, 60.0)
    short = max(3 * typical, 15.0)  # the silence that shows a stop while arrivals go on being logged (need_s)

    def arrivals(t0: Any, t1: Any) -> tuple[list[Any], list[Event]]:
        # requests the engine took (a 400 never reaches it: an idle V0 engine logs no stats while clients are refused)
        js = [j for j in v.journeys if j.arrival_ts and t0 < j.arrival_ts < t1 and (j.http_status or 200) < 400
              and j.status != "rejected"]
        evs = [e for e in v.events if e.ts and t0 < e.ts < t1 and (e.kind in (
            "request_aborted", "shm_broadcast_timeout", "rpc_timeout") or (e.kind == "http_access" and (
                e.fields.get("http_status") or 0) >= 500))]
        return js, evs

    stamps = {k: sorted(x.ts for x in xs if x.ts is not None) for k, xs in st.engines.items()}

    def alone(key: Any, t0: Any, t1: Any) -> bool:
        """No other engine of the run logs a stats line between ``t0`` and ``t1`` (a replica replaced, a DP peer:
        the arrivals may be its)."""
        for k, ts in stamps.items():
            if k != key:
                i = bisect.bisect_right(ts, t0)
                if i < len(ts) and ts[i] < t1:
                    return False
        return True

    def need_s(key: Any, t0: Any, t1: Any, js: list, evs: list, stuck: bool) -> float:
        """Silence after a busy line that shows a stop: three intervals when the arrivals go on being logged past
        two and a half of them (the stream that would carry the stats is still written, not a log cut short) and no
        other engine logs meanwhile; six (a minute at least) otherwise; a stuck last line needs less."""
        if stuck:
            return max(3 * typical, 30.0)
        seen_to = max([t0] + [j.arrival_ts for j in js] + [e.ts for e in evs])
        if (seen_to - t0).total_seconds() >= 2.5 * typical and alone(key, t0, t1):
            return short
        return quiet

    finishes = sorted(j.finish_ts for j in v.journeys if j.finish_ts and j.status == "success")
    taken = sorted(j.arrival_ts for j in v.journeys if j.arrival_ts and (j.http_status or 200) < 400
                   and j.status != "rejected")

    def quiet_since(a: Interval, t1: Any) -> Any:
        """Where the engine's silence after busy line ``a`` starts: its last sign of progress (the line, or a request
        finishing after it before ``t1``); when as many requests finished as were running, the engine may have gone
        idle — an idle engine logs nothing — so from the next arrival on."""
        lo, hi = bisect.bisect_left(finishes, a.ts), bisect.bisect_left(finishes, t1)
        since = finishes[hi - 1] if hi > lo else a.ts
        if hi - lo >= max(a.running, 1):
            i = bisect.bisect_right(taken, since)
            # (just before it: the arrival counts as one that found the engine silent)
            since = taken[i] - timedelta(microseconds=1) if i < len(taken) and taken[i] < t1 else t1
        return since

    for key, xs in st.engines.items():
        xs = [x for x in xs if x.ts is not None and not v.in_shutdown(x.sample.line)]
        for a, b in zip(xs, xs[1:]):
            if not a.busy or a.stuck:
                continue
            if (b.ts - a.ts).total_seconds() < short:
                continue
            t0 = quiet_since(a, b.ts)
            gap = (b.ts - t0).total_seconds()
            js, evs = arrivals(t0, b.ts)
            if len(js) + len(evs) < 3 or gap < need_s(key, t0, b.ts, js, evs, False):
                continue
            evid = [u.sample_ev(a.sample), u.sample_ev(b.sample)] + [Evidence(j.file, j.first_line, "") for j in js[:2]
                                                                    if j.first_line] + [u.first(e) for e in evs[:2]]
            yield Symptom("stalled", st.file, st.index, Severity.ERROR,
                          f"No progress: the stats stop after Running {a.running} for {u.secs(gap)} while "
                          f"{len(js) + len(evs)} more requests/aborts arrive, then resume.",
                          onset=t0, end=b.ts, trend="recovered", evidence=u.dedupe(evid), process=a.sample.process,
                          data={"stalled_s": gap, "running": a.running, "stats_stopped": True, "resumed": True})
    for key, xs in st.engines.items():
        if not xs:
            continue
        last = xs[-1]
        if not last.busy or v.in_shutdown(last.sample.line) or last.ts is None or stop_ts is None:
            continue
        since = quiet_since(last, stop_ts + timedelta(seconds=1))
        if since > stop_ts:
            continue
        # the silence ends where the server reports a failure (the requests refused after an engine death are the
        # death's, not a stall's)
        end_ts = next((e.ts for e in v.events if e.ts and e.ts > since and e.level in ("ERROR", "CRITICAL")
                       and e.kind != "http_access" and e.ts < stop_ts), stop_ts)
        silent = (end_ts - since).total_seconds()
        later, later_ev = arrivals(since, end_ts + timedelta(seconds=1 if end_ts is stop_ts else 0))
        if silent >= need_s(key, since, end_ts, later, later_ev, last.stuck) and len(later) + len(later_ev) >= 3:
            evid = [u.sample_ev(last.sample)] + [Evidence(j.file, j.first_line, "") for j in later[:2] if j.first_line] \
                + [u.first(e) for e in later_ev[:3]]
            yield Symptom("stalled", st.file, st.index, Severity.CRITICAL,
                          f"No progress: the stats stop after Running {last.running}"
                          + (" at 0 tokens/s" if last.stuck else "") + f" — no stats line for {u.secs(silent)} while "
                          f"{len(later) + len(later_ev)} more requests/aborts arrive.",
                          onset=since, end=end_ts, evidence=u.dedupe(evid), process=last.sample.process,
                          data={"stalled_s": silent, "running": last.running, "stats_stopped": True,
                                "then_stopped": graceful is not None})
    # offline inference (LLM.generate, an RL rollout) whose progress bar stops short of 100 % while the log goes on:
    # tqdm redraws on every finished prompt, so minutes without a redraw — many times its own seconds per prompt —
    # while other processes keep logging is a generation that stopped
    last = v.srv.offline_last
    if last is not None and last.ts is not None and v.srv.end_ts is not None and (last.fields.get("percent") or 0) < 100:
        silent = (v.srv.end_ts - last.ts).total_seconds()
        m = _SPI.search(last.text)
        per = float(m.group(1)) if m and m.group(2) == "s/it" else (1.0 / float(m.group(1)) if m and float(m.group(1)) else 1.0)
        later = [e for e in v.events if e.line > last.line_end]
        working = any(e.kind == "preemption" for e in later) or any(
            x.ts is not None and x.ts > last.ts and (x.gen_tps > 0 or x.prompt_tps > 0) for x in st.intervals)
        if silent >= max(OFFLINE_SILENT_S, 20 * per) and later and not working:
            yield Symptom("stalled", st.file, st.index, Severity.CRITICAL,
                          f"No progress: offline generation stopped at {u.msg_of(last)[:80].strip()} — no progress for "
                          f"{u.secs(silent)} while the log goes on.", onset=last.ts, end=v.srv.end_ts,
                          evidence=u.dedupe([u.first(last)] + [u.first(e) for e in later[:2]]), process=last.process,
                          data={"stalled_s": silent, "offline": True, "percent": last.fields.get("percent")})
    # hang timeouts while serving with no stats line to show it (stats off, or the stats stopped)
    if not any(True for xs in st.engines.values() for x in xs if x.stuck):
        tos = [e for e in v.of(*_HANG) if v.serving(e.line) and not v.in_shutdown(e.line)]
        if len(tos) >= 2 or any(e.kind != "shm_broadcast_timeout" for e in tos):
            yield Symptom("stalled", st.file, st.index, Severity.ERROR,
                          f"No progress: {len(tos)} hang timeout line(s) while serving ({u.msg_of(tos[0])[:120]}).",
                          onset=tos[0].ts, end=tos[-1].ts, evidence=u.dedupe([u.first(e) for e in tos[:4]]),
                          process=tos[0].process, data={"timeouts": len(tos)})


@detector("queueing")
def queueing(run: Run, st: ServiceState, opts: dict) -> Iterator[Symptom]:
    """Requests wait and the queue grows or does not drain. A burst that drains steadily is how a busy,
    well-sized server absorbs load (healthy, saturated), not a symptom."""
    v = st.view
    for xs in st.engines.values():
        xs = [x for x in xs if not v.in_shutdown(x.sample.line)]
        for run_ in _runs(xs, lambda x: x.waiting > 0):
            if all(x.stuck for x in run_):
                continue  # a stall, reported as such
            j = xs.index(run_[-1]) + 1
            nxt = xs[j] if j < len(xs) else None
            w = [x.waiting for x in run_]
            dur = u.duration_s(run_) + (run_[0].dt_s or 0)
            drained = nxt is not None and nxt.waiting == 0
            falling = len(w) >= 2 and all(b <= a for a, b in zip(w, w[1:])) and w[-1] < w[0]
            growing = len(w) >= 3 and w[-1] > w[0] and sum(1 for a, b in zip(w, w[1:]) if b > a) >= len(w) // 2
            # a deep queue at the seat limit: each request waits several service times, however short the window
            cap = run_[0].cap
            deep = [x for x in run_ if cap and x.running >= cap and x.waiting >= 2 * cap]
            deep_s = sum(x.dt_s for x in deep)  # time, not a count of stats lines (the interval is a setting)
            cut = nxt is None and (st.lifecycle.restarted or not st.lifecycle.shutdown_ts and _ended_badly(st))
            drain_s = _drain_time(run_, nxt)
            stopped = nxt is None and st.lifecycle.shutdown_ts is not None and not _ended_badly(st)  # stopped on request
            if drained and _full(run_) and (not _seats_wasted(run_) or _one_burst(run_)):
                continue  # the engine was full the whole time (every seat taken, or the KV cache full) and the queue
                # drained: a burst served at capacity (healthy, saturated) — unless the seat limit left most of the KV
                # cache empty while waiters stood two turns of the batch deep (the configuration made them wait), and
                # the queue stood or grew (clients kept it full) rather than only falling from one dump of requests
            elif (len(deep) >= 2 or deep_s >= DEEP_QUEUE_S) and (not falling or cut):
                pass  # several service times of queue; not drained before the server run ended (killed, restarted)
            elif (drained or stopped or (nxt is None and (_closed_loop(run_) or _pinned(run_)))) and not growing \
                    and max(w) <= min(x.running for x in run_):
                continue  # a queue that never outgrew the running batch, did not grow and drained (or was still there,
                # as steady, when the server was stopped, or at the log's end when Running + Waiting stayed constant:
                # closed-loop clients at a fixed concurrency a little over the seat limit): each waiter waited
                # less than one turn of the batch, however long the engine stayed full (healthy, saturated) — how long
                # the queue existed is not how long anyone waited in it
            elif drain_s is not None and ((drain_s >= 10 * QUEUE_S and not (falling and drained)) or (
                    drain_s >= 4 * QUEUE_S and _seat_bound(run_) and max(w) > min(x.running for x in run_))):
                pass  # falling, but so slowly that the last requests wait many minutes (a queue that only fell until it
                # drained is one burst served at capacity, however long: healthy, saturated) — or minutes behind a seat
                # limit that leaves the KV cache nearly empty (the configuration, not the hardware, makes them wait) with
                # more waiting than running, so each waiter waits more than one turn of the batch
            elif dur < QUEUE_S:
                continue
            elif drained and (falling or dur < 2 * QUEUE_S):
                continue  # a burst that drains
            elif not growing and drained and dur < 4 * QUEUE_S:
                continue
            elif drained and max(w) <= min(x.running for x in run_) and dur < 10 * QUEUE_S:
                continue  # the queue never outgrew the running batch and drained: each waiter waited less than one
                # turn of the batch — the engine was full for a while (healthy, saturated), not a backlog
            elif not growing and not drained and nxt is None and falling:
                continue  # draining when the log ends
            binding = [x.binding for x in run_ if x.binding]
            bind = max(set(binding), key=binding.count) if binding else None
            kv = [x.kv for x in run_ if x.kv is not None]
            trend = "recovered" if drained else trend_of([float(a) for a in w])
            sev = Severity.WARNING
            head = (f"Waiting > 0 for {u.secs(dur)} ({w[0]} → peak {max(w)} → {w[-1]})"
                    + (f"; Running pinned at {run_[0].running}" if len({x.running for x in run_}) == 1 else
                       f"; Running {min(x.running for x in run_)}–{max(x.running for x in run_)}")
                    + (f", KV ≤ {u.pct(max(kv))}" if kv else "") + (", then drained" if drained else ""))
            yield Symptom("queueing", st.file, st.index, sev, head + ".", onset=run_[0].ts, end=run_[-1].ts,
                          trend=trend, evidence=u.dedupe(_ev(run_)), process=run_[0].sample.process,
                          data={"peak_waiting": max(w), "duration_s": dur, "binding": bind, "drained": drained,
                                "growing": growing, "kv_peak": max(kv) if kv else None})
    # per-request queue times (handbook / traced journeys)
    long_q = [j for j in v.journeys if (u.jval(j, "queue_s") or 0) > QUEUE_S]  # v.journeys: this run's, indexed once
    hb = [e for e in v.of("queue_wait_exceeded") if not v.in_shutdown(e.line)]
    n_j = max(1, st.coverage.requests)
    if (len(long_q) >= 3 and len(long_q) / n_j >= 0.05) or len(hb) >= 3:
        ts = sorted([j.arrival_ts for j in long_q if j.arrival_ts] + [e.ts for e in hb if e.ts])
        evid = [u.first(e) for e in hb[:4]] + [Evidence(j.file, j.first_line, "") for j in long_q[:3] if j.first_line]
        yield Symptom("queueing", st.file, st.index, Severity.WARNING,
                      f"{max(len(long_q), len(hb))} requests queued longer than {QUEUE_S:.0f} s.",
                      onset=ts[0] if ts else None, end=ts[-1] if ts else None, evidence=u.dedupe(evid),
                      data={"long_queue_requests": len(long_q), "wait_lines": len(hb)})


def _pinned(run_: list[Interval]) -> bool:
    """Running at the seat limit in every interval of the stretch: the engine is full, whatever waits behind it."""
    return bool(run_) and all(x.cap and x.running >= x.cap for x in run_)


def _closed_loop(run_: list[Interval]) -> bool:
    """Running + Waiting constant over the stretch (within 2 %): a fixed number of clients, each sending its next
    request when the last one ends (a load test at a set concurrency) — the queue cannot grow."""
    tot = [x.running + x.waiting for x in run_]
    return len(tot) >= 3 and max(tot) - min(tot) <= max(1, 0.02 * max(tot))


def _full(run_: list[Interval]) -> bool:
    """A limit kept the waiters out throughout the stretch: all seats taken or the KV cache full — in at least half
    of its intervals, and in the others the engine ran as many requests as the limit held (the cache filling up
    under the same batch before it bound)."""
    bound = {id(x) for x in run_ if x.binding in ("max_num_seqs", "kv_cache")}
    if not run_ or len(bound) < len(run_) / 2:
        return False
    level = min(x.running for x in run_ if id(x) in bound)
    return all(id(x) in bound or x.running >= level for x in run_)


def _seats_wasted(run_: list[Interval]) -> bool:
    """The seat limit bound with the KV cache under half full while the queue stood at least two turns of the batch
    deep: raising ``--max-num-seqs`` would have served the waiters, so they waited on the configuration."""
    return _seat_bound(run_) and max(x.waiting for x in run_) >= 2 * max(1, min(x.running for x in run_))


def _one_burst(run_: list[Interval]) -> bool:
    """One dump of requests worked off: the queue peaks in the stretch's first two intervals and then falls in at
    least three of every four intervals (a benchmark that sends N at once) — not clients that keep it standing."""
    w = [x.waiting for x in run_]
    if len(w) < 3:
        return False
    k = 0 if w[0] >= w[1] else 1
    if max(w) > w[k]:
        return False
    steps = list(zip(w[k:], w[k + 1:]))
    return bool(steps) and sum(1 for a, b in steps if b < a) >= 0.75 * len(steps)


def _seat_bound(run_: list[Interval]) -> bool:
    """Every seat taken while the KV cache stays under half full: raising --max-num-seqs would admit more."""
    at = [x for x in run_ if x.binding == "max_num_seqs"]
    return len(at) >= len(run_) / 2 and all((x.kv or 0) < 0.5 for x in at)


def _drain_time(run_: list[Interval], nxt: Interval | None) -> float | None:
    """How long the queue takes to empty: observed when it drained, else the time so far plus what is left at the
    rate it fell (None when it did not fall)."""
    if not run_ or run_[0].ts is None or run_[-1].ts is None:
        return None
    span = (run_[-1].ts - run_[0].ts).total_seconds() + run_[0].dt_s
    if nxt is not None and nxt.waiting == 0:
        return span
    fell = run_[0].waiting - run_[-1].waiting
    if fell <= 0 or span <= 0:
        return None
    return span + run_[-1].waiting / (fell / span)


def _ended_badly(st: ServiceState) -> bool:
    """The server run ended with an engine death or a replica kill (not at the end of an excerpt)."""
    return any(e.kind in ("replica_stopped", "engine_dead", "engine_core_died", "engine_fatal", "worker_died")
               for e in st.view.events[-50:])


@detector("thrashing")
def thrashing(run: Run, st: ServiceState, opts: dict) -> Iterator[Symptom]:
    """Sequences are evicted and recomputed (or swapped): V0 preemption warnings, Preemptions/Swapped in the
    stats, per-request preemption counts, or V1's silent preemption — at a full cache Running falls while
    Waiting rises by as much and the evicted prompts are prefilled again."""
    v = st.view
    pre = [e for e in v.of("preemption") if not v.in_shutdown(e.line)]
    cum = max((int(u.num(e.fields.get("cumulative_preemptions")) or 0) for e in pre), default=0)
    xs = [x for xx in st.engines.values() for x in xx if not v.in_shutdown(x.sample.line)]
    field = [x for x in xs if x.preemptions > 0 or (x.sample.swapped or 0) > 0]
    silent = _silent(st)
    collapse = _kv_full_collapse(st)
    silent += [(x, 0) for x in collapse if all(x is not y for y, _ in silent)]
    recompute = _recompute_hits(st)
    silent += [(x, 0) for x in recompute if all(x is not y for y, _ in silent)]
    n_silent = sum(d for _, d in silent)
    silent = [x for x, _ in silent]
    jpre = [j for j in v.journeys if j.preemptions]
    count = max(len(pre), cum, sum(x.preemptions for x in field), n_silent, sum(j.preemptions for j in jpre))
    if not (pre or field or silent or jpre):
        return
    sustained = count >= 2 or len(field) >= 2 or len(silent) >= 2 or len(collapse) >= 3 or len(recompute) >= 3
    sev = Severity.WARNING if sustained else Severity.INFO
    times = sorted([e.ts for e in pre if e.ts] + [x.ts for x in field + silent if x.ts])
    evid = [u.first(e) for e in pre[:4]] + _ev(field, 4) + _ev(silent, 4)
    how = []
    if pre:
        how.append(f"{len(pre)} preemption warning(s)" + (f" (cumulative {cum})" if cum > len(pre) else ""))
    if field:
        how.append(f"{sum(x.preemptions for x in field)} preemptions / up to {max((x.sample.swapped or 0) for x in field)} "
                   "swapped in the stats")
    if n_silent:
        how.append(f"≥ {n_silent} silent preemption(s): Running fell while Waiting rose at a full cache and prompts "
                   "were prefilled again")
    if collapse:
        how.append(f"generation throughput collapsed at a full KV cache with requests waiting ({len(collapse)} stats "
                   "intervals below 60 % of the same load before the cache filled): the batch thrashes")
    if recompute:
        rr = [x.sample.prefix_cache_hit_rate or 0 for x in recompute]
        how.append(f"the prefix-cache hit rate climbed from 0 to {u.pct(max(rr))} only after the KV cache filled "
                   f"({len(recompute)} stats intervals): preempted requests' prompts were recomputed")
    if jpre and not how:
        how.append(f"{len(jpre)} requests preempted")
    kv = [x.kv for x in xs if x.kv is not None]
    yield Symptom("thrashing", st.file, st.index, sev,
                  "Sequences preempted and recomputed: " + "; ".join(how) + (f" (KV peak {u.pct(max(kv))})" if kv else "") + ".",
                  onset=times[0] if times else None, end=times[-1] if times else None, evidence=u.dedupe(evid),
                  data={"preemptions": count, "silent": len(silent), "warnings": len(pre)})


#: Decoding one sequence reads every weight once per token, so a GPU streaming ≥ ~150 GB/s in practice (a T4
#: reaches ~320 GB/s peak, half of it in a real decode step; an A100 ~2 TB/s) gives a lone request at least
#: 150 / (GiB of weights read per token)
#: tokens/s. The floor is that (pipeline stages read their weights one after another), capped at the handbook's
#: target, never below 5 tokens/s; 10 tokens/s when the weights' size is not logged.
LONE_BANDWIDTH_GBS = 150.0


#: The CPU backend streams the weights from DRAM for every token: ~10 GB/s is a conservative effective bandwidth
#: (one socket's DDR4/DDR5 reaches 40–300 GB/s), so a lone request decodes at least 10 / (GiB of weights) tokens/s.
CPU_BANDWIDTH_GBS = 10.0
_PARAMS = re.compile(r"(?<![\d.])(\d{1,4}(?:\.\d{1,2})?)[bB](?![a-zA-Z\d])")


def _weights_from_name(model: str | None, dtype: str | None) -> float | None:
    """GiB of weights guessed from a parameter count in the model's name ('granite-3.1-8b-instruct' → 8 B × 2 bytes
    for 16-bit weights, 4 bytes for float32); None without one (MoE names like '8x7b' are not guessed)."""
    if not model or re.search(r"\d\s*x\s*\d", model, re.I):
        return None
    m = _PARAMS.search(model.rsplit("/", 1)[-1])
    if not m:
        return None
    width = 4 if dtype and "float32" in dtype else 2
    return float(m.group(1)) * 1e9 * width / 2**30


def _lone_floor(st: ServiceState, opts: dict) -> float | None:
    """Slowest normal speed of a lone request on this server's device (the memory-bandwidth bound of streaming the
    weights once per token); the handbook's target when a setting that slows decode is logged; None when unknown."""
    cap = float(opts.get("min_generation_tps") or 20.0)
    if st.config.cpu:
        w = st.config.weights_gib or _weights_from_name(st.config.model, st.config.dtype)
        if not w:
            return None
        return min(cap, max(0.2, CPU_BANDWIDTH_GBS / (w * max(1, st.config.pipeline_parallel_size))))
    slow = u.slow_settings(st.view)
    if any(w == "cpu-offload" for _, w in slow):
        return cap  # weights stream over PCIe every step: the bandwidth floor of GPU memory does not apply
    if any(w == "enforce-eager" or w.startswith(("attention", "no-p2p")) for _, w in slow):
        return cap  # a setting known to slow decode is logged: below the target, the setting is the likely reason
    w = st.config.weights_gib
    if not w:
        return min(cap, 10.0)
    return min(cap, max(5.0, LONE_BANDWIDTH_GBS / (w * max(1, st.config.pipeline_parallel_size))))


def _sorted_median(c: list[float]) -> float:
    """``statistics.median`` of an already sorted list."""
    n = len(c)
    return c[n // 2] if n % 2 == 1 else (c[n // 2 - 1] + c[n // 2]) / 2


def _recompute_hits(st: ServiceState) -> list[Interval]:
    """Intervals where V1's prefix-cache hit rate climbs only once the KV cache is full: with no hit at all while the
    cache had room (≥ 2 intervals at ≤ 1 %, a workload without shared prefixes), hits that appear at a full cache
    with requests waiting are the preempted requests' own prompts being recomputed (vLLM counts a recompute's cached
    blocks as prefix hits) — preemption that V1 does not log. The rate must rise by ≥ 10 points."""
    out: list[Interval] = []
    for xs in st.engines.values():
        rates = [(x, x.sample.prefix_cache_hit_rate) for x in xs if x.sample.prefix_cache_hit_rate is not None]
        first_full = next((i for i, (x, _) in enumerate(rates) if (x.kv or 0) >= 0.9), len(rates))
        before = [r for x, r in rates[:first_full] if x.busy]
        if len(before) < 2 or max(before) > 0.01:
            continue
        full = [(x, r) for x, r in rates if (x.kv or 0) >= 0.9 and x.waiting > 0]
        if len(full) >= 3 and full[-1][1] - min(before) >= 0.10:
            out += [x for x, r in full if r > 0.01]
    return out


def _kv_full_collapse(st: ServiceState) -> list[Interval]:
    """Intervals of a KV-full thrash told by the stats alone (V0 before 0.4.x and V1 print no preemption): the
    cache ≥ 95 % full with requests waiting, and generation throughput below 60 % of what the same server did at a
    comparable Running (±25 %) before the cache filled — for three intervals in a row."""
    out: list[Interval] = []
    for xs in st.engines.values():
        ref = [x for x in xs if x.busy and not x.stuck and (x.kv or 0) < 0.95]
        run_: list[Interval] = []
        for x in xs:
            hit = False
            if (x.kv or 0) >= 0.95 and x.waiting > 0:  # the comparison only where the cache is full (was every x)
                comp = [r.gen_tps for r in ref if r.ts and x.ts and r.ts < x.ts and r.running
                        and 0.75 <= x.running / r.running <= 1.33]
                hit = len(comp) >= 3 and x.gen_tps < 0.6 * median(comp)
            if hit:
                run_.append(x)
                continue
            if len(run_) >= 3:
                out += run_
            run_ = []
        if len(run_) >= 3:
            out += run_
    return out


def _silent(st: ServiceState) -> list[tuple[Interval, int]]:
    """Intervals that show V1's silent preemption, with how many sequences at least were evicted: both ends at a
    full cache, Running falls by k while Waiting rises by at least k/2, and prompt tokens are processed again
    (the evicted requests re-prefill)."""
    out = []
    for xs in st.engines.values():
        for a, b in zip(xs, xs[1:]):
            if a.kv is None or b.kv is None or a.kv < KV_FULL or b.kv < KV_FULL:
                continue
            drop = a.running - b.running
            # a real eviction, not the jitter of a full batch where requests finish and others are admitted:
            # Running falls by ≥ 15 % of itself, and the queue grows by at least half of what left the batch
            if drop >= max(1, 0.15 * a.running) and b.waiting - a.waiting >= max(1, drop / 2) and b.admitting:
                out.append((b, min(drop, b.waiting - a.waiting)))
    return out


def _kv_bucket(kv: float | None) -> int:
    """KV usage in steps of a factor of 1.5 (-1 unknown; 0 below 1 %)."""
    if kv is None:
        return -1
    return 0 if kv < 0.01 else 1 + int(math.log(kv / 0.01) / math.log(1.5))


def _comparable(a: tuple[float, int], b: tuple[float, int]) -> bool:
    """Two (Running, KV bucket) loads are comparable: Running within ±25 %, KV usage within one bucket (or unknown)."""
    return bool(b[0]) and 0.75 <= a[0] / b[0] <= 1.33 and (a[1] < 0 or b[1] < 0 or abs(a[1] - b[1]) <= 1)


def full_windows(st: ServiceState) -> dict[int, tuple[Interval, Interval]]:
    """Intervals whose throughput is a rate of work, each → the interval before it. vLLM averages throughput over the
    time since its last stats line, so a line after a silence (a window longer than 1.5 × the engine's usual
    interval: its lower quartile, as an idle V0 engine logs only when a request arrives) or after an idle one
    (Running 0) divides the tokens of a request that started mid-window by mostly idle seconds. ``{id(interval):
    (the interval before it, the interval)}``."""
    out: dict[int, Interval] = {}
    for xs in st.engines.values():
        dts = sorted(x.dt_s for x in xs[1:] if x.dt_s)
        if not dts:
            continue
        usual = dts[len(dts) // 4]
        for a, b in zip(xs, xs[1:]):
            if a.running > 0 and b.gap_before_s is None and b.dt_s <= 1.5 * usual:
                out[id(b)] = (a, b)
    return out


@detector("slow")
def slow(run: Run, st: ServiceState, opts: dict) -> Iterator[Symptom]:
    """Throughput collapses against the run's own normal: total generation throughput below half of what the
    same server did at a comparable load, for three intervals in a row while work was pending; or the server
    itself says requests are slow (the handbook's slow-generation lines)."""
    v = st.view
    full = full_windows(st)
    for xs in st.engines.values():
        busy = [x for x in xs if x.busy and not x.stuck and not v.in_shutdown(x.sample.line) and id(x) in full]
        if len(busy) < 6:
            continue
        ref: list[Interval] = []
        low: list[Interval] = []
        cur: list[Interval] = []
        levels: list[float] = []  # per slow stretch, the reference level it fell from
        cur_ref = 0.0
        # per Running value seen, the comparable earlier throughputs kept sorted as ref grows (the same values as
        # filtering ref for every interval, and the same median; linear in the run's length instead of quadratic)
        # comparable = Running within ±25 % and the KV cache as full within a factor of 1.5 (the same number of
        # sequences with the same context: the same work per step); the reference is the upper quartile of what the
        # server did before at such a load — what it showed it can do, so a slow decline is measured from its best
        # sustained level, not from a median that declines with it
        # an interval that prefilled several times what the reference intervals did spent its steps on prompts (a
        # chunked prefill of long contexts shares each step with decoding): fewer generated tokens there are the
        # prompt work, not a slowdown — it is neither slow nor a reference
        comps: dict[tuple[float, int], list[float]] = {}
        prompts: dict[tuple[float, int], list[float]] = {}
        for x in busy:
            key = (x.running, _kv_bucket(x.kv))
            comp = comps.get(key)
            if comp is None:
                like = [r for r in ref if _comparable(key, (r.running, _kv_bucket(r.kv)))]
                comp = comps[key] = sorted(r.gen_tps for r in like)
                prompts[key] = sorted(r.prompt_tps for r in like)
            level = comp[(3 * len(comp)) // 4] if len(comp) >= 3 else None
            if level is not None and x.gen_tps < 0.5 * level and x.prompt_tps > 2 * max(
                    prompts[key][len(prompts[key]) // 2], 0.25 * level):
                continue
            if level is not None and x.gen_tps < 0.5 * level:
                if not cur:
                    cur_ref = level
                cur.append(x)
                continue
            if len(cur) >= 3:
                low.append(cur[0])
                low += cur[1:]
                levels.append(cur_ref)
            cur = []
            ref.append(x)
            if x.running:
                rk = (x.running, _kv_bucket(x.kv))
                for k, c in comps.items():
                    if _comparable(k, rk):
                        bisect.insort(c, x.gen_tps)
                        bisect.insort(prompts[k], x.prompt_tps)
        if len(cur) >= 3:
            low += cur
            levels.append(cur_ref)
        if not low:
            continue
        base = levels[0]  # the reference the first slow stretch was measured against
        now = median(x.gen_tps for x in low)
        yield Symptom("slow", st.file, st.index, Severity.WARNING,
                      f"Generation throughput fell to {now:.1f} tokens/s from {base:.1f}, what it sustained before at a comparable load "
                      f"({len(low)} stats intervals).", onset=low[0].ts, end=low[-1].ts,
                      trend=trend_of([-x.gen_tps for x in low]), evidence=u.dedupe(_ev(low)),
                      process=low[0].sample.process, data={"baseline_tps": base, "low_tps": now, "intervals": len(low)})
    # slow for the hardware: a lone request on a GPU decoding below what memory bandwidth allows
    lone_floor = _lone_floor(st, opts)
    if lone_floor is not None:
        lone = [x for x in st.intervals if 0 < x.running <= 2 and x.gen_tps > 0 and not v.in_shutdown(x.sample.line)
                and id(x) in full and (not x.admitting or full[id(x)][0].running >= x.running)]
        low = [x for x in lone if (x.gen_per_seq or 0) < lone_floor]
        if len(low) >= 3 and len(low) >= len(lone) / 2:
            sp = median(x.gen_per_seq or 0 for x in low)
            dev = "the CPU backend" if st.config.cpu else f"{(st.config.device or 'GPU').upper()}"
            why = [w for _, w in u.slow_settings(v)] if not st.config.cpu else []
            per = (st.config.weights_gib or (_weights_from_name(st.config.model, st.config.dtype)
                                             if st.config.cpu else None))
            yield Symptom("slow", st.file, st.index, Severity.WARNING,
                          f"One request at a time decodes at {sp:.1f} tokens/s on {dev} ({len(low)} of {len(lone)} "
                          f"lone-request stats intervals below {lone_floor:.2g} tokens/s"
                          + (f", running with {', '.join(why)}" if why else
                             f", the floor for {per:.3g} GiB of weights" if per else "")
                          + ").", onset=low[0].ts, end=low[-1].ts, evidence=u.dedupe(_ev(low)),
                          process=low[0].sample.process,
                          data={"lone_tps": sp, "floor_tps": lone_floor, "intervals": len(low)})
    # the first token takes long: prefill runs interval after interval with no token generated
    ttft = float(opts.get("max_ttft_s") or 1.0)
    for xs in st.engines.values() if not st.config.pooling else ():  # a pooling model never generates a token
        for run_ in _runs(xs, lambda x: x.running > 0 and x.admitting and x.gen_tps == 0 and not v.in_shutdown(x.sample.line)):
            dur = u.duration_s(run_) + run_[0].dt_s
            if len(run_) >= 3 and dur >= max(30.0, 3 * ttft):
                yield Symptom("slow", st.file, st.index, Severity.WARNING,
                              f"No first token for {u.secs(dur)}: prefill ran {len(run_)} stats intervals at "
                              f"~{median(x.prompt_tps for x in run_):.0f} prompt tokens/s with 0 tokens generated.",
                              onset=run_[0].ts, end=run_[-1].ts, evidence=u.dedupe(_ev(run_)),
                              process=run_[0].sample.process, data={"prefill_s": dur, "intervals": len(run_)})
    # latency over the target, per request (journeys with measured times)
    js = [j for j in v.journeys if j.status == "success"]
    got = [(j, u.jval(j, "ttft_s")) for j in js]
    got = [(j, t) for j, t in got if t is not None]
    slow_j = [j for j, t in got if t > ttft]
    if len(slow_j) >= 3 and len(slow_j) / max(1, len(got)) >= 0.1:
        slow_j.sort(key=lambda j: -(j.ttft_s or 0))
        ts = sorted(j.arrival_ts for j in slow_j if j.arrival_ts)
        yield Symptom("slow", st.file, st.index, Severity.WARNING,
                      f"{len(slow_j)} of {len(got)} successful requests had TTFT above {ttft:g} s "
                      f"(worst {slow_j[0].ttft_s:.1f} s).", onset=ts[0] if ts else None, end=ts[-1] if ts else None,
                      evidence=u.dedupe([Evidence(j.file, j.last_line or j.first_line, "") for j in slow_j[:3]]),
                      data={"slow_requests": len(slow_j), "measured": len(got), "max_ttft_s": ttft})
    tpot = 1.0 / float(opts.get("min_generation_tps") or 20.0)
    gotp = [(j, u.jval(j, "tpot_s")) for j in js if (j.sources or {}).get("tpot_s") != "estimated"]
    slow_p = [j for j, t in gotp if t is not None and t > tpot]
    if len(slow_p) >= 3 and len(slow_p) / max(1, len(gotp)) >= 0.1:
        ts = sorted(j.arrival_ts for j in slow_p if j.arrival_ts)
        yield Symptom("slow", st.file, st.index, Severity.WARNING,
                      f"{len(slow_p)} of {len(gotp)} successful requests generated slower than "
                      f"{1 / tpot:g} tokens/s (TPOT > {tpot * 1000:.0f} ms).",
                      onset=ts[0] if ts else None, end=ts[-1] if ts else None,
                      evidence=u.dedupe([Evidence(j.file, j.last_line or j.first_line, "") for j in slow_p[:3]]),
                      data={"slow_requests": len(slow_p), "min_generation_tps": 1 / tpot})
    hb = [e for e in v.of("slow_generation") if not v.in_shutdown(e.line)]
    ids = {e.request_id for e in hb}
    if len(hb) >= 3 and len(ids) / max(1, st.coverage.requests) >= 0.1:
        yield Symptom("slow", st.file, st.index, Severity.WARNING,
                      f"{len(hb)} slow-generation lines for {len(ids)} requests.", onset=hb[0].ts, end=hb[-1].ts,
                      evidence=u.dedupe([u.first(e) for e in hb[:4]]), process=hb[0].process,
                      data={"slow_lines": len(hb)})
