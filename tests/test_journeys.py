"""Journeys from handbook, V0 and V1 lines: phases, provenance, ids, retries, restarts, late and out-of-order lines."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from vllmlog.journeys import COLUMNS, JourneyBuilder
from vllmlog.model import Event
from vllmlog.run import load

from .conftest import DATA

HB = DATA / "journeys" / "handbook-small.log"


def _by(journeys, rid, attempt=1, server=0):
    [j] = [j for j in journeys if j.request_id == rid and j.attempt == attempt and j.server == server]
    return j


@pytest.fixture(scope="module")
def hb():
    return load(str(HB), year=2026)


def test_handbook_logged_numbers_and_phases(hb):
    j = _by(hb.journeys, "req_1")
    assert j.status == "success" and j.sources["status"] == "logged"
    assert (j.ttft_s, j.tpot_s, j.e2e_s, j.prefill_s) == (1.25, 1.375, 4.0, 0.25)
    assert all(j.sources[k] == "logged" for k in ("ttft_s", "tpot_s", "e2e_s", "prefill_s", "prompt_tokens"))
    assert j.prompt_tokens == 100 and j.output_tokens == 3 and j.sources["output_tokens"] == "derived"
    assert j.decode_s == pytest.approx(2.75) and j.decode_s == j.e2e_s - j.ttft_s
    assert j.queue_s == 1.0 and j.sources["queue_s"] == "estimated"  # from 1-second timestamps
    assert j.arrival_ts == datetime(2026, 11, 30, 10, 0, 1) and j.scheduled_ts == datetime(2026, 11, 30, 10, 0, 2)
    assert j.decode_steps == 2 and j.blocks == 7 and j.ts_resolution_s == 1.0
    assert j.http_status == 200 and j.sources["http_status"] == "estimated"  # access line right after the finish


def test_handbook_abort_cancel_preemption(hb):
    j2 = _by(hb.journeys, "req_2")
    assert j2.status == "aborted" and j2.reason == "Client disconnected" and j2.sources["status"] == "derived"
    assert j2.preemptions == 1  # "Failed to allocate blocks"
    assert j2.http_status == 200  # streaming: access line right after the queue line
    assert j2.tpot_s is None and j2.ttft_s == 2.0 and j2.sources["ttft_s"] == "estimated"
    j5 = _by(hb.journeys, "req_5")
    assert j5.status == "cancelled" and j5.reason == "Timeout after 60s" and j5.queue_wait_exceeded


def test_retry_restart_inflight_and_out_of_order(hb):
    js = hb.journeys
    assert len(hb.servers) == 2
    # a retry with the same id after the first attempt ended is a second journey
    r2 = _by(js, "req_5", attempt=2)
    assert r2.status == "success" and r2.e2e_s == 2.5
    # in flight when the server restarted: unfinished; the new run reuses req_1 for a new request
    assert _by(js, "req_6").status == "unfinished"
    again = _by(js, "req_1", server=1)
    assert again.status == "success" and again.e2e_s == 0.9 and again.attempt == 1
    # still waiting at end of file
    assert _by(js, "req_7", server=1).status == "unfinished"
    # the scheduling line came before the (earlier-stamped) queue line
    j4 = _by(js, "req_4")
    assert j4.arrival_ts == datetime(2026, 11, 30, 10, 0, 6) and j4.queue_s == 1.0 and "arrival_ts" not in j4.sources
    assert len(js) == 8


def test_to_dict_shape(hb):
    d = hb.journeys[0].to_dict()
    assert list(d) == list(COLUMNS)
    for k in ("request_id", "status", "reason", "arrival_ts", "scheduled_ts", "first_token_ts", "finish_ts", "queue_s",
              "prefill_s", "ttft_s", "decode_s", "tpot_s", "e2e_s", "prompt_tokens", "output_tokens", "preemptions",
              "sources"):
        assert k in d
    assert isinstance(d["arrival_ts"], str) and isinstance(d["sources"], dict)


def _ev(line: int, kind: str, rid: str | None, sec: int, text: str = "", **fields) -> Event:
    return Event("f.log", line, line, datetime(2026, 11, 30, 3, 0, sec), "INFO", "APIServer pid=1", "x.py:1", kind,
                 rid, fields, text)


def test_v1_api_and_engine_ids_join_and_late_abort_line():
    b = JourneyBuilder()
    b.new_server("f.log")
    evs = [
        _ev(1, "request_received", "cmpl-a-0", 0, max_tokens=10),
        _ev(2, "request_received", "cmpl-b-0", 0),
        _ev(3, "http_access", None, 0, http_status=200, path="/v1/completions"),
        _ev(4, "request_added", "cmpl-b-0-0123abcd", 0),
        _ev(5, "request_added", "cmpl-a-0-deadbeef", 0),
        _ev(6, "request_aborted", None, 1, request_ids=["cmpl-a-0-deadbeef"]),
        _ev(7, "request_aborted", "cmpl-a-0", 1, status="aborted"),
        _ev(8, "server_shutdown", None, 3),
    ]
    for e in evs[:-1]:
        b.add(e)
    b.shutdown(evs[-1])
    js = {j.request_id: j for j in b.finish()}
    assert set(js) == {"cmpl-a-0", "cmpl-b-0"}
    a, bb = js["cmpl-a-0"], js["cmpl-b-0"]
    assert a.engine_request_id == "cmpl-a-0-deadbeef" and a.status == "aborted" and a.last_line == 7
    assert a.e2e_s == 1.0 and a.sources["e2e_s"] == "estimated" and a.max_tokens == 10
    assert bb.engine_request_id == "cmpl-b-0-0123abcd" and bb.http_status == 200
    # no end line, reached the engine, clean shutdown: completed (estimated)
    assert bb.status == "success" and bb.sources["status"] == "estimated" and bb.e2e_s is None


def test_no_shutdown_means_unfinished_and_streaming_deltas():
    b = JourneyBuilder()
    b.new_server("f.log")
    b.add(_ev(1, "request_received", "chatcmpl-x", 0))
    b.add(_ev(2, "request_added", "chatcmpl-x-00aa11bb", 0))
    for i, s in enumerate((1, 1, 2, 3)):
        b.add(_ev(3 + i, "response_generated", "chatcmpl-x", s, streaming="delta", finish_reason=None))
    b.add(_ev(8, "response_generated", "chatcmpl-x", 3, streaming="complete", finish_reason="streaming_complete"))
    b.add(_ev(9, "request_received", "cmpl-y-0", 4))
    b.add(_ev(10, "request_added", "cmpl-y-0-00aa11bb", 4))
    js = {j.request_id: j for j in b.finish()}
    x = js["chatcmpl-x"]
    assert x.status == "success" and x.sources["status"] == "logged" and x.finish_reason is None
    assert x.ttft_s == 1.0 and x.e2e_s == 3.0 and x.output_tokens == 4 and x.sources["output_tokens"] == "estimated"
    assert x.decode_s == 2.0 and x.tpot_s is None  # ±1 s on 2 s: too coarse for a TPOT
    assert js["cmpl-y-0"].status == "unfinished"


def test_tpot_estimated_from_long_decode_at_one_second_resolution():
    b = JourneyBuilder()
    b.new_server("f.log")
    b.add(_ev(1, "request_received", "chatcmpl-z", 0))
    b.add(_ev(2, "response_generated", "chatcmpl-z", 1, streaming="delta", finish_reason=None))
    b.add(_ev(3, "response_generated", "chatcmpl-z", 11, streaming="complete", output_tokens=101, finish_reason="length",
              text="Generated response chatcmpl-z: output: 'x', output_token_ids: [1, 2], finish_reason: length"))
    [z] = b.finish()
    assert z.output_tokens == 101 and z.sources["output_tokens"] == "logged" and z.finish_reason == "length"
    assert z.tpot_s == pytest.approx(0.1) and z.sources["tpot_s"] == "estimated"


def test_sink_streams_and_bounded_open():
    seen = []
    b = JourneyBuilder(sink=seen.append, keep=False, linger=2, max_open=3)
    b.new_server("f.log")
    for i in range(10):
        b.add(_ev(i * 2 + 1, "request_queued", f"r{i}", i % 60, queue_size=1))
        if i % 2:
            b.add(_ev(i * 2 + 2, "request_finished", f"r{i}", i % 60, status="success"))
    assert len(b.open) <= 3 and len(b.closing) <= 2
    assert b.finish() == [] and len(seen) == 10
    assert sum(j.status == "success" for j in seen) == 5
    assert b.evicted > 0 and all(j.status == "unfinished" for j in seen if j.status != "success")


def test_v0_finished_and_preemption_lines(tmp_path: Path):
    log = tmp_path / "v0.log"
    log.write_text(
        "INFO 11-30 10:00:00 api_server.py:495] vLLM API server version 0.6.1.post2\n"
        "INFO 11-30 10:00:01 async_llm_engine.py:208] Added request cmpl-1.\n"
        "WARNING 11-30 10:00:02 scheduler.py:1089] Sequence group cmpl-1 is preempted by PreemptionMode.RECOMPUTE mode "
        "because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
        "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=1\n"
        "INFO 11-30 10:00:04 async_llm_engine.py:176] Finished request cmpl-1.\n"
    )
    [j] = load(str(log), year=2026).journeys
    assert j.status == "success" and j.preemptions == 1 and j.e2e_s == 3.0 and j.sources["e2e_s"] == "estimated"


def test_same_id_received_again_while_open_is_a_retry():
    b = JourneyBuilder()
    b.new_server("f.log")
    b.add(_ev(1, "request_received", "cmpl-r-0", 0))
    b.add(_ev(2, "request_added", "cmpl-r-0-0a0b0c0d", 0))
    b.add(_ev(3, "request_received", "cmpl-r-0", 20))
    b.add(_ev(4, "request_added", "cmpl-r-0-1a1b1c1d", 20))
    b.shutdown()
    first, second = b.finish()
    assert (first.attempt, first.status) == (1, "unfinished") and "retry" in first.reason
    assert (second.attempt, second.status, second.engine_request_id) == (2, "success", "cmpl-r-0-1a1b1c1d")
    assert second.sources["status"] == "estimated"


def test_snapshot_includes_lingering_and_open_without_changing_them():
    from vllmlog.reader import iter_batches
    from vllmlog.run import Pipeline

    p = Pipeline()
    events = [e for b in iter_batches(str(HB), year=2026) for e in b]
    p.feed(events[:20])  # req_1 finished, req_2 finished, req_4 open
    snap = {j.request_id: j for j in p.snapshot().journeys}
    assert snap["req_1"].status == "success" and snap["req_1"].decode_s == pytest.approx(2.75)
    assert snap["req_4"].status == "unfinished"
    p.feed(events[20:])
    final = {(j.request_id, j.attempt, j.server): j for j in p.finish().journeys}
    assert final[("req_4", 1, 0)].status == "success" and final[("req_4", 1, 0)].queue_s == 1.0
