"""Cross-check with reality: journeys of real vLLM 0.32 logs against what the client recorded for every request."""

from __future__ import annotations

import csv
from datetime import timezone
from pathlib import Path

import pytest

from vllmlog.run import load

from .conftest import CORPUS

CPU = CORPUS / "vllm-cpu"
FAULTS = CORPUS / "vllm-cpu-faults"
#: (log, truth csv): every client request of these runs reached the server and is in the log.
RUNS = [
    ("01-startup-and-light-load.log", "01-client-truth.csv"),
    ("02-overload-queueing.log", "02-client-truth.csv"),
    ("03-kv-cache-pressure-preemption.log", "03-client-truth.csv"),
    ("04-client-aborts.log", "04-client-truth.csv"),
    ("07a-json-logging-custom-config.log", "07a-client-truth.csv"),
    ("07b-json-logging-builtin-formatter.log", "07b-client-truth.csv"),
    ("08-debug-level-light-load.log", "08-client-truth.csv"),
]
#: Slack for the client and the server reading the same clock a moment apart.
SLACK = 0.05


def _log_id(row: dict[str, str]) -> str:
    x = row["x_request_id_sent"]
    return f"chatcmpl-{x}" if row["kind"].startswith("chat") else f"cmpl-{x}-0"


def _epoch(ts) -> float:
    return ts.replace(tzinfo=timezone.utc).timestamp()  # the VM's local time was UTC


def _client_outcome(row: dict[str, str]) -> str:
    if row["aborted_by_client"]:
        return "aborted"
    if row["error"]:
        return "error"
    return "success"


def _check(log: Path, truth: Path, all_reach_server: bool) -> dict[str, int]:
    run = load(str(log), year=2026)
    js = {}
    for j in run.journeys:
        assert j.request_id not in js, f"two journeys for {j.request_id}"
        js[j.request_id] = j
    rows = list(csv.DictReader(truth.open()))
    counts = {"rows": len(rows), "found": 0, "ttft": 0, "e2e": 0, "http": 0}
    wanted = set()
    for row in rows:
        rid = _log_id(row)
        j = js.get(rid)
        if j is None:
            # only requests the server never logged may be missing (connection refused, rejected before logging)
            assert not all_reach_server and (row["http_status"] in ("", "400", "500")), rid
            continue
        wanted.add(rid)
        counts["found"] += 1
        assert j.status == _client_outcome(row), (rid, j.status, row["aborted_by_client"], row["error"][:60])
        res = j.ts_resolution_s
        send = float(row["send_time"])
        # the log's arrival second (truncated) holds the client's send time
        assert -SLACK <= send - _epoch(j.arrival_ts) < res + SLACK, rid
        if j.ttft_s is not None and row["first_token_time"]:
            assert abs(j.ttft_s - float(row["ttft_s"])) < res + SLACK, (rid, j.ttft_s, row["ttft_s"])
            counts["ttft"] += 1
        if j.e2e_s is not None and j.status == "success":
            assert abs(j.e2e_s - float(row["latency_s"])) < res + SLACK, (rid, j.e2e_s, row["latency_s"])
            counts["e2e"] += 1
        if j.finish_ts is not None and row["end_time"] and j.status == "success":
            assert abs(_epoch(j.finish_ts) - float(row["end_time"])) < res + SLACK, rid
        if j.http_status is not None and row["http_status"]:
            assert j.http_status == int(row["http_status"]), rid
            counts["http"] += 1
        if j.output_tokens is not None and j.sources.get("output_tokens") == "logged":
            assert j.output_tokens == int(row["completion_tokens"]), rid
    # every journey is a client request (no duplicates from engine ids or DEBUG lines)
    assert set(js) == wanted
    return counts


@pytest.mark.parametrize("log,truth", RUNS, ids=[r[0][:3].rstrip("-") for r in RUNS])
def test_every_client_request_found_with_matching_status_and_times(log: str, truth: str) -> None:
    c = _check(CPU / log, CPU / truth, all_reach_server=True)
    assert c["found"] == c["rows"]


def test_light_load_chat_streams_give_ttft_and_e2e() -> None:
    c = _check(CPU / "01-startup-and-light-load.log", CPU / "01-client-truth.csv", True)
    # streaming chat requests (deltas) carry first-token and end times; completions carry none
    assert c["ttft"] >= 10 and c["e2e"] >= 15 and c["http"] >= 40


def test_json_logs_give_millisecond_e2e() -> None:
    run = load(str(CPU / "07b-json-logging-builtin-formatter.log"), year=2026)
    timed = [j for j in run.journeys if j.e2e_s is not None]
    assert timed and all(j.ts_resolution_s == 0.001 and j.sources["e2e_s"] == "derived" for j in timed)


def test_aborts_are_logged_and_completions_estimated() -> None:
    run = load(str(CPU / "04-client-aborts.log"), year=2026)
    st = [(j.status, j.sources.get("status")) for j in run.journeys]
    assert st.count(("aborted", "logged")) == 25
    assert st.count(("success", "estimated")) == 55


@pytest.mark.parametrize("name", ["P1-engine-dead-kill9", "P2-engine-hang-sigstop", "P5-oom-runtime-cgroup"])
def test_fault_runs_against_client_truth(name: str) -> None:
    c = _check(FAULTS / f"{name}.log", FAULTS / f"{name[:2]}-client-truth.csv", all_reach_server=False)
    assert c["found"] > 30


@pytest.mark.parametrize("name", ["05-bad-input-errors", "05b-bad-input-errors-log-error-stack"])
def test_bad_requests_are_errors_with_their_http_status(name: str) -> None:
    import json

    run = load(str(CPU / f"{name}.log"), year=2026)
    js = {j.request_id: j for j in run.journeys}
    answers = {json.loads(x)["case"]: json.loads(x)["status"] for x in (CPU / f"{name[:3].rstrip('-')}-bad-input-responses.jsonl").open()}
    assert "None" not in js  # `Exception caught. Request id: None`
    for rid, j in js.items():
        case = rid.removeprefix("cmpl-bad-").removesuffix("-0")
        assert j.status == ("success" if answers[case] == 200 else "error"), rid
        if j.http_status is not None:
            assert j.http_status == answers[case], rid
    # the exception line (`cmpl-bad-x`) joins the request logged as `cmpl-bad-x-0`
    assert "cmpl-bad-too_many_logprobs" not in js and js["cmpl-bad-too_many_logprobs-0"].status == "error"
