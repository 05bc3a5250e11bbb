"""``RequestStats.add`` (each latency read once, the SLO gate inlined) folds journeys exactly as the plain
``latency_value``-per-metric computation it replaced (kept here as the reference)."""

from __future__ import annotations

import math
from array import array
from datetime import datetime, timedelta
from typing import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from vllmlog.journeys import Journey
from vllmlog.numbers import LATENCIES, RequestStats, SloTargets, basis_of, latency_value

def _old_add(self, j: Journey) -> None:
    """Fold one finished journey in."""
    self.total += 1
    st = j.status
    self.by_status[st] += 1
    self.status_sources[j.sources.get("status", "none")] += 1
    if j.reason:
        self.by_reason[f"{st}: {j.reason}"] += 1
    if j.http_status is not None:
        self.by_http[j.http_status] += 1
    src = j.sources
    for k in LATENCIES:
        vb = latency_value(j, k)
        if vb is None:
            if st != "success" and getattr(j, k) is not None:
                self.not_successful[k] += 1
            continue
        v, b = vb
        self.values[b][k].append(v)
        self.sources[k][src.get(k, "derived")] += 1
        if b == "estimated":
            r = j.ts_resolution_s or 1.0
            if r > self.resolution.get(k, 0.0):
                self.resolution[k] = r
    if st == "aborted" and j.e2e_s is not None:
        self.abort_times[basis_of(src.get("e2e_s", "derived"))].append(j.e2e_s)
    if j.prompt_tokens is not None:
        self.prompt_tokens.append(j.prompt_tokens)
    if j.output_tokens is not None:
        self.output_tokens.append(j.output_tokens)
    self.preemptions += j.preemptions
    if j.preemptions:
        self.preempted_requests += 1
    if j.queue_wait_exceeded:
        self.queue_wait_exceeded += 1
    if j.attempt > 1:
        self.retries += 1
    a = j.arrival_ts
    if a is not None:
        self.arrivals += 1
        if self.first_arrival is None or a < self.first_arrival:
            self.first_arrival = a
        if self.last_arrival is None or a > self.last_arrival:
            self.last_arrival = a
        r = j.ts_resolution_s or 1.0
        if r > self.arrival_resolution_s:
            self.arrival_resolution_s = r
        arr = self.arrival_times.get(j.file)
        if arr is None:
            arr = self.arrival_times[j.file] = array("d")
        arr.append(a.timestamp())
    _old_slo(self, j)

def _old_slo(self, j: Journey) -> None:
    """SLO counters: per metric over successful requests, measured and estimated kept apart; ``all``
    counts a failed request as missing its SLO (goodput)."""
    s = self.slo
    c = self.slo_counts
    if j.status in ("error", "cancelled"):
        c["all_failed"] += 1
        return
    if j.status != "success":
        return
    ok_all = True
    known = ""
    checks: list[tuple[str, str, Callable[[float], bool]]] = [
        ("ttft", "ttft_s", lambda v: v < s.ttft_s),
        ("speed", "tpot_s", lambda v: v > 0 and 1.0 / v >= s.tokens_per_s),
        ("queue", "queue_s", lambda v: v < s.queue_s),
    ]
    if s.e2e_s is not None:
        e2e = s.e2e_s
        checks.append(("e2e", "e2e_s", lambda v: v < e2e))
    for name, metric, ok in checks:
        vb = latency_value(j, metric)
        if name == "queue" and j.queue_wait_exceeded and (vb is None or vb[1] == "estimated"):
            vb = (math.inf, "measured")  # the handbook's "waiting time exceeds 30s" line is a measurement
        if vb is None or (name == "speed" and vb[0] <= 0):
            continue
        v, b = vb
        c[f"{name}_{b}_total"] += 1
        if ok(v):
            c[f"{name}_{b}_ok"] += 1
        else:
            ok_all = False
        if b == "measured" or not known:
            known = b
    if known:
        c[f"all_{known}_total"] += 1
        if ok_all:
            c[f"all_{known}_ok"] += 1


_VAL = st.one_of(st.none(), st.floats(min_value=-1, max_value=100, allow_nan=False), st.just(0.0), st.just(math.inf))
_SRC = st.sampled_from([None, "", "traced", "logged", "derived", "estimated"])


@st.composite
def journeys(draw) -> Journey:
    j = Journey(request_id=draw(st.sampled_from(["a", "b"])), file=draw(st.sampled_from(["f", "g"])))
    j.status = draw(st.sampled_from(["success", "aborted", "error", "cancelled", "unfinished"]))
    j.reason = draw(st.sampled_from([None, "", "stop"]))
    j.http_status = draw(st.sampled_from([None, 200, 400]))
    for k in LATENCIES:
        setattr(j, k, draw(_VAL))
    j.output_tokens = draw(st.sampled_from([None, 0, 1, 2, 50]))
    j.prompt_tokens = draw(st.sampled_from([None, 3]))
    j.queue_wait_exceeded = draw(st.booleans())
    j.preemptions = draw(st.sampled_from([0, 2]))
    j.attempt = draw(st.sampled_from([1, 2]))
    j.ts_resolution_s = draw(st.sampled_from([1.0, 0.001]))
    if draw(st.booleans()):
        j.arrival_ts = datetime(2026, 1, 1) + timedelta(seconds=draw(st.integers(0, 100)))
    j.sources = {k: s for k in LATENCIES + ("status",) if (s := draw(_SRC)) is not None or draw(st.booleans())}
    return j


def _state(rs: RequestStats) -> dict:
    d = {k: v for k, v in vars(rs).items() if k != "slo"}
    d["values"] = {b: {k: list(a) for k, a in per.items()} for b, per in rs.values.items()}
    return repr(d)


@given(st.lists(journeys(), max_size=12), st.sampled_from([None, 5.0]))
@settings(max_examples=300, deadline=None)
def test_add_is_the_reference(js: list[Journey], e2e: float | None) -> None:
    slo = SloTargets(e2e_s=e2e)
    new, ref = RequestStats(slo), RequestStats(slo)
    for j in js:
        new.add(j)
        _old_add(ref, j)
    assert _state(new) == _state(ref)
