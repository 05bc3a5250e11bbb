"""Tests of the vLLM serving simulator: determinism, truth consistency, handbook numbers, real-format shapes, CLI."""

from __future__ import annotations

import io
import json
import math
import re
from collections import Counter, defaultdict
from datetime import datetime
from functools import lru_cache
from pathlib import Path

import pytest

from vllmlog.simulate import FORMATS, SCENARIOS, build_config, simulate

DATA = Path(__file__).parent / "data" / "simulate"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PROC = re.compile(r"^\((?P<proc>[^)]*?) pid=(?P<pid>\d+)\) ")
VLLM = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mmdd>\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d) "
    r"\[?(?P<file>[^\]\s:]+):(?P<line>\d+)\] (?P<msg>.*)$"
)
UVICORN = re.compile(r"^(INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+")
ACCESS = re.compile(r'^INFO:     127\.0\.0\.1:\d+ - "POST /v1/(chat/)?completions HTTP/1\.1" (200 OK|500 Internal Server Error)$')
TORCH_CPP = re.compile(r"^\[rank\d+\]:\[[EWI]\d{4} \d\d:\d\d:\d\d\.\d{9} ")
TQDM = re.compile(r"(\d+%\|| Completed \|)")
RAW_TRACEBACK = re.compile(
    r"^(Traceback \(most recent call last\):|  File \"|    |\w[\w.]*(Error|Exception)\b.*|Process \w+(-\d+)?:|"
    r"Exception in callback |handle: <Handle |vllm\.\S+Error: )"
)
DURATION = 40.0


@lru_cache(maxsize=None)
def run(scenario: str, fmt: str, seed: int = 1, duration: float = DURATION) -> tuple[str, dict]:
    """Simulate once per parameter set (cached for the whole module)."""
    cfg = build_config(scenario, fmt=fmt, seed=seed, duration_s=duration)
    buf = io.StringIO()
    rep = simulate(cfg, buf)
    text = buf.getvalue()
    assert rep.lines == text.count("\n")
    return text, rep.truth


def classify(line: str) -> str:
    """Which kind of physical line this is, the way a parser would see it."""
    line = ANSI.sub("", line).rstrip("\r")
    if line.startswith("{"):
        d = json.loads(line)  # --logging-config.formatter json: one object per record
        assert {"asctime", "levelname", "name", "message"} <= set(d)
        return "json"
    m = PROC.match(line)
    rest = line[m.end():] if m else line
    if VLLM.match(rest):
        return "vllm"
    if UVICORN.match(rest):
        return "uvicorn"
    if TORCH_CPP.match(rest):
        return "torch"
    if TQDM.search(rest):
        return "tqdm"
    if rest == "" or RAW_TRACEBACK.match(rest):
        return "raw"
    return "unknown"


# ---------------------------------------------------------------------------------------------- basics
@pytest.mark.parametrize("fmt", FORMATS)
def test_same_seed_same_bytes_different_seed_differs(fmt: str) -> None:
    a = run("client-disconnects", fmt, seed=7, duration=30.0)[0]
    cfg = build_config("client-disconnects", fmt=fmt, seed=7, duration_s=30.0)
    buf = io.StringIO()
    simulate(cfg, buf)
    assert buf.getvalue() == a
    assert run("client-disconnects", fmt, seed=8, duration=30.0)[0] != a


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_scenario_runs_and_records_its_category(scenario: str, fmt: str) -> None:
    text, truth = run(scenario, fmt)
    assert truth["scenario"] == scenario and truth["format"] == fmt
    cats = {i["category"] for i in truth["incidents"]}
    expected = SCENARIOS[scenario].category
    if expected == "healthy":
        assert cats == set(), cats
        assert truth["counts"]["status"]["success"] == truth["counts"]["requests"] > 20
    else:
        assert expected in cats, cats
        assert [i["category"] for i in truth["incidents"] if i["primary"]] == [expected]
    kinds = Counter(classify(ln) for ln in text.split("\n")[:-1])
    assert kinds["unknown"] == 0, [ln for ln in text.split("\n") if classify(ln) == "unknown"][:5]
    assert kinds["vllm"] + kinds["json"] >= 5


def test_start_time_and_iso_truth() -> None:
    cfg = build_config("healthy", fmt="v0", seed=2, duration_s=10, start=datetime(2027, 1, 2, 3, 4, 5))
    buf = io.StringIO()
    rep = simulate(cfg, buf)
    assert buf.getvalue().startswith("INFO 01-02 03:04:05 api_server.py:")
    assert rep.truth["start_ts"].startswith("2027-01-02T03:04:05")
    for r in rep.truth["requests"]:
        datetime.fromisoformat(r["arrival_ts"])


# ---------------------------------------------------------------------------------------------- truth
def _ts(s: str | None) -> float | None:
    return None if s is None else datetime.fromisoformat(s).timestamp()


@pytest.mark.parametrize("scenario", ["healthy", "overload", "kv-pressure", "client-disconnects", "engine-crash",
                                      "nccl-hang", "slow-decode"])
def test_truth_is_internally_consistent(scenario: str) -> None:
    _, truth = run(scenario, "handbook")
    reqs = truth["requests"]
    assert truth["counts"]["requests"] == len(reqs)
    assert sum(truth["counts"]["status"].values()) == len(reqs)
    assert sum(r["preemptions"] for r in reqs) == truth["counts"]["preemptions"]
    assert len({r["request_id"] for r in reqs}) == len(reqs)
    for r in reqs:
        a, s, f, e = (_ts(r[k]) for k in ("arrival_ts", "scheduled_ts", "first_token_ts", "finish_ts"))
        if r["status"] == "success":
            assert a is not None and s is not None and f is not None and e is not None
            assert 0 <= r["queue_s"] <= r["ttft_s"] <= r["e2e_s"]
            assert a <= s <= f <= e
            assert math.isclose(r["e2e_s"], e - a, abs_tol=2e-6)
            assert math.isclose(r["ttft_s"], f - a, abs_tol=2e-6)
            n = r["output_tokens"]
            assert 1 <= n <= r["max_tokens"]
            want = (r["e2e_s"] - r["ttft_s"]) / (n - 1) if n > 1 else 0.0
            assert math.isclose(r["tpot_s"], want, rel_tol=1e-9, abs_tol=1e-12)
            assert r["http_status"] == 200 and r["finish_reason"] in ("stop", "length")
            assert (r["finish_reason"] == "length") == (n == r["max_tokens"])
        elif r["status"] in ("aborted", "cancelled"):
            assert r["finish_reason"] == "abort" and r["reason"]
            assert r["tpot_s"] is None and e is not None and e >= a
        elif r["status"] == "error":
            # a non-streaming client gets a 500, or nothing when the NCCL abort kills the V0 server process
            want = 200 if r["stream"] else (None if scenario == "nccl-hang" else 500)
            assert r["reason"] == "Engine dead." and r["http_status"] == want
    for inc in truth["incidents"]:
        assert _ts(inc["start"]) <= _ts(inc["end"])
        assert inc["description"]


def test_truth_json_roundtrip(tmp_path: Path) -> None:
    from vllmlog.simulate import write_truth

    _, truth = run("kv-pressure", "v1")
    p = tmp_path / "t.json"
    with p.open("w") as fp:
        write_truth(truth, fp)
    back = json.loads(p.read_text())
    assert back["requests"] == truth["requests"] and back["counts"] == truth["counts"]
    assert set(back) >= {"scenario", "format", "seed", "config", "incidents", "requests", "counts"}


# ---------------------------------------------------------------------------------------------- handbook numbers
FIN = re.compile(
    r"^INFO (\d\d-\d\d \d\d:\d\d:\d\d) scheduler\.py:612\] Request (req_\d{6}) finished\. Status: SUCCESS\. "
    r"Total tokens: (\d+), Total latency: ([\d.]+)s, TTFT: ([\d.]+)s, TPOT: ([\d.]+)s$"
)
DEC = re.compile(r"^INFO \S+ \S+ model_runner\.py:312\] Decode step (\d+) for (req_\d{6})\. Batch size: (\d+), KV cache usage: (\d+)%$")
ADDED = re.compile(r"^INFO (\S+ \S+) scheduler\.py:456\] Added request (req_\d{6}) to waiting queue\. Queue size: (\d+)$")


@pytest.mark.parametrize("scenario", ["healthy", "kv-pressure", "client-disconnects", "overload"])
def test_handbook_numbers_agree_with_truth(scenario: str) -> None:
    text, truth = run(scenario, "handbook")
    by_id = {r["request_id"]: r for r in truth["requests"]}
    start = datetime.fromisoformat(truth["start_ts"])
    finished, steps, added = {}, defaultdict(list), {}
    for ln in text.splitlines():
        if m := FIN.match(ln):
            finished[m[2]] = m
        elif m := DEC.match(ln):
            steps[m[2]].append(int(m[1]))
        elif m := ADDED.match(ln):
            added[m[2]] = m[1]
    assert set(added) == set(by_id)
    assert set(finished) == {k for k, r in by_id.items() if r["status"] == "success"}
    for rid, m in finished.items():
        r = by_id[rid]
        assert int(m[3]) == r["prompt_tokens"] + r["output_tokens"]
        assert abs(float(m[4]) - r["e2e_s"]) <= 0.0005 + 1e-9
        assert abs(float(m[5]) - r["ttft_s"]) <= 0.0005 + 1e-9
        assert abs(float(m[6]) - r["tpot_s"]) <= 0.00005 + 1e-9
        assert m[1] == datetime.fromisoformat(r["finish_ts"]).strftime("%m-%d %H:%M:%S")
        assert steps[rid] == list(range(1, r["output_tokens"]))  # one line per generated token after the first
    for rid, stamp in added.items():
        assert stamp == datetime.fromisoformat(by_id[rid]["arrival_ts"]).strftime("%m-%d %H:%M:%S")
    assert datetime.fromisoformat(truth["requests"][0]["arrival_ts"]) > start


def test_handbook_abort_and_timeout_lines() -> None:
    text, truth = run("client-disconnects", "handbook")
    n_abort = sum(r["status"] == "aborted" for r in truth["requests"])
    assert n_abort > 0
    assert text.count("Status: ERROR. Reason: Client disconnected.") == n_abort
    text, truth = run("overload", "handbook", seed=1, duration=200.0)
    assert "waiting time exceeds 30s. Consider reducing load." in text
    n_cancel = sum(r["status"] == "cancelled" for r in truth["requests"])
    assert n_cancel > 0
    assert text.count("Status: CANCELLED. Reason: Timeout after 60s.") == n_cancel


# ---------------------------------------------------------------------------------------------- real formats
V0_STATS = re.compile(
    r"^INFO \d\d-\d\d \d\d:\d\d:\d\d metrics\.py:\d+\] Avg prompt throughput: \d+\.\d tokens/s, Avg generation "
    r"throughput: \d+\.\d tokens/s, Running: \d+ reqs, Swapped: \d+ reqs, Pending: \d+ reqs, GPU KV cache usage: "
    r"\d+\.\d%, CPU KV cache usage: \d+\.\d%\.$"
)
V1_STATS = re.compile(
    r"^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[loggers\.py:\d+\] Engine 000: Avg prompt throughput: "
    r"\d+\.\d tokens/s, Avg generation throughput: \d+\.\d tokens/s, Running: \d+ reqs, Waiting: \d+ reqs, "
    r"GPU KV cache usage: \d+\.\d%, Prefix cache hit rate: \d+\.\d%$"
)


def shape(line: str) -> str:
    """A line with everything variable masked, so a simulated and a real line of one kind compare equal."""
    s = ANSI.sub("", line).rstrip("\r\n")
    s = re.sub(r"\b(?:chat)?cmpl-[0-9A-Za-z-]+", "ID", s)
    s = re.sub(r"\breq_\d+", "ID", s)
    s = s.replace("CPU KV cache usage", "GPU KV cache usage")
    s = s.replace(" (which also controls CPU memory on the CPU backend)", "")
    s = re.sub(r"PreemptionMode\.\w+", "MODE", s)
    s = re.sub(r"exit code: [^)]+\)", "exit code: X)", s)
    s = re.sub(r"VllmWorker-\d", "VllmWorker-N", s)
    s = re.sub(r"-?\d+(\.\d+)?", "N", s)
    s = re.sub(r"(temperature|top_p)=N", r"\1=N", s)
    return s


def _sim_shapes(fmt: str, scenarios: list[str], seeds: range = range(1, 2), duration: float = DURATION) -> set[str]:
    out: set[str] = set()
    for sc in scenarios:
        for seed in seeds:
            lines = run(sc, fmt, seed, duration)[0].splitlines()
            # per-token lines all look alike: keep a sample of them (shape() is regex-heavy)
            sample = [ln for ln in lines if "Decode step" not in ln or "below threshold" in ln]
            sample += [ln for ln in lines[:5000] if "Decode step" in ln]
            out |= {shape(ln) for ln in sample}
    return out


def test_simulated_lines_have_the_shapes_of_real_lines() -> None:
    real = [ln for ln in (DATA / "real_samples.log").read_text(encoding="utf-8").splitlines() if not ln.startswith("#")]
    v1 = _sim_shapes("v1", ["healthy", "client-disconnects", "nccl-hang", "kv-too-small"])
    v1 |= _sim_shapes("v1", ["engine-crash"], range(1, 7))
    v0 = _sim_shapes("v0", ["kv-pressure", "nccl-hang"])
    hb = _sim_shapes("handbook", ["kv-pressure", "client-disconnects", "slow-decode"])
    hb |= _sim_shapes("handbook", ["overload"], duration=200.0)
    missing = []
    for ln in real:
        if "Initializing a V1 LLM engine" in ln:
            continue  # compared by prefix below (the real config is truncated in the fixture)
        if " 03-25 " in ln:
            pool = hb
        elif re.match(r"^(INFO|WARNING) \d\d-\d\d", ln) or ln.startswith("[rank"):
            pool = v0
        else:
            pool = v1
        if shape(ln) not in pool:
            missing.append(ln[:160])
    assert not missing, missing
    text = run("healthy", "v1")[0]
    assert re.search(r"^\(EngineCore pid=\d+\) INFO \S+ \S+ \[core\.py:133\] Initializing a V1 LLM engine \(v0\.32\.0\) "
                     r"with config: model='meta-llama/Llama-3\.1-8B-Instruct', speculative_config=None, ", text, re.M)


def test_stats_lines_match_the_exact_format_strings() -> None:
    v0 = [ln for ln in run("kv-pressure", "v0", 1, 300.0)[0].splitlines() if "metrics.py" in ln]
    assert v0 and all(V0_STATS.match(ln) for ln in v0)
    assert any(float(re.search(r"GPU KV cache usage: ([\d.]+)%", ln)[1]) >= 95 for ln in v0)
    assert any(" Swapped: 0 reqs" not in ln for ln in v0)  # V0 kv-pressure swaps
    v1 = [ln for ln in run("kv-pressure", "v1")[0].splitlines() if "loggers.py" in ln]
    assert v1 and all(V1_STATS.match(ln) for ln in v1)
    assert any(float(re.search(r"GPU KV cache usage: ([\d.]+)%", ln)[1]) >= 95 for ln in v1)
    # V1 stats every 10 s from the API server
    stamps = [datetime.strptime(ln.split()[3] + " " + ln.split()[4], "%m-%d %H:%M:%S") for ln in v1]
    assert all((b - a).total_seconds() % 10 == 0 for a, b in zip(stamps, stamps[1:]))


def test_v0_preemption_warning_only_every_50th() -> None:
    text, truth = run("kv-pressure", "v0", 1, 300.0)
    vals = [int(v) for v in re.findall(r"total_num_cumulative_preemption=(\d+)$", text, re.M)]
    n = truth["counts"]["preemptions"]
    assert n > 50
    assert vals == list(range(1, n + 1, 50))


def test_v1_request_ids_and_engine_suffix() -> None:
    text, truth = run("client-disconnects", "v1")
    ids = {r["request_id"]: r for r in truth["requests"]}
    received = re.findall(r"\[request_logger\.py:65\] Received request (\S+): params: SamplingParams\(", text)
    added = re.findall(r"\[async_llm\.py:578\] Added request (\S+)\.$", text, re.M)
    assert set(received) == set(ids)
    for rid, eng in zip(received, added):
        assert re.fullmatch(re.escape(rid) + r"-[0-9a-f]{8}", eng)
        assert re.fullmatch(r"(chatcmpl-[0-9a-f]{16}|cmpl-[0-9a-f]{16}-0)", rid)
    aborted = re.findall(r"\] Request (\S+) aborted\.$", text, re.M)
    assert sorted(aborted) == sorted(k for k, r in ids.items() if r["status"] == "aborted")
    assert all(r["engine_request_id"] in text for r in truth["requests"] if r["status"] == "aborted")


def _record_after(text: str, first: str) -> list[str]:
    """The physical lines of the multi-line record whose first message is `first`."""
    lines = text.split("\n")
    i = next(k for k, ln in enumerate(lines) if ln.endswith(first + "\r"))
    prefix = lines[i][: lines[i].index(first)]
    j = i
    while lines[j].endswith("\r"):
        assert lines[j].startswith(prefix)
        j += 1
    assert lines[j].startswith(prefix)
    return lines[i: j + 1]


def test_multiline_records_repeat_the_prefix() -> None:
    from vllmlog.simulate import Fault

    rec = _record_after(run("engine-crash", "v1")[0], "EngineCore encountered a fatal error.")
    assert len(rec) > 5 and "an illegal memory access was encountered" in "".join(rec)
    assert rec[-1].endswith("', please check the stack trace above for the root cause")
    cfg = build_config("healthy", fmt="v1", seed=1, duration_s=20, faults=[Fault("engine_death", 10, "cuda_oom")])
    buf = io.StringIO()
    rep = simulate(cfg, buf)
    rec = _record_after(buf.getvalue(), "EngineCore encountered a fatal error.")
    assert "OutOfMemoryError: CUDA out of memory. Tried to allocate" in rec[-1]
    assert [i["category"] for i in rep.truth["incidents"]] == ["engine_dead", "runtime_oom"]


@pytest.mark.parametrize("fmt", ["v1", "v1-0.10"])
def test_v1_failure_signatures(fmt: str) -> None:
    text, truth = run("engine-crash", fmt)
    assert "EngineCore encountered a fatal error." in text and "EngineDeadError" in text
    assert "AsyncLLM output_handler failed." in text
    errs = [r for r in truth["requests"] if r["status"] == "error"]
    assert errs and all(f"Request {r['request_id']} failed (engine dead)." in text for r in errs)
    text, truth = run("nccl-hang", fmt)
    shm = text.count("No available shared memory broadcast block found in 60 second")
    assert shm == 9  # every minute of the 600 s watchdog timeout
    assert "Watchdog caught collective operation timeout" in text and "Timeout(ms)=600000" in text
    assert "died unexpectedly" in text
    text, _ = run("kv-too-small", fmt)
    assert re.search(r"ValueError: To serve at least one request with the models?'s max seq len \(131072\)", text)
    assert "Application startup complete." not in text
    text, _ = run("startup-oom", fmt)
    assert "CUDA out of memory. Tried to allocate" in text and "Engine core initialization failed" in text
    assert "Application startup complete." not in text


def test_v1_prefixes_and_no_prefix_in_010() -> None:
    new = run("healthy", "v1")[0]
    old = run("healthy", "v1-0.10")[0]
    assert re.search(r"^\(APIServer pid=\d+\) INFO \d\d-\d\d \d\d:\d\d:\d\d \[", new, re.M)
    assert "(APIServer pid=" not in old and "(EngineCore" not in old
    assert re.search(r"^INFO \d\d-\d\d \d\d:\d\d:\d\d \[loggers\.py:\d+\] Engine 000: ", old, re.M)
    assert re.search(r"^INFO \S+ \S+ \[logger\.py:43\] Received request cmpl-[0-9a-f]{32}-0: prompt: '", old, re.M)
    # access lines have no timestamp and (0.31+) no process prefix
    acc = [ln for ln in new.splitlines() if "HTTP/1.1" in ln]
    assert acc and all(ACCESS.match(ln) for ln in acc)


def test_handbook_slow_and_v0_faults() -> None:
    text, truth = run("slow-decode", "handbook")
    assert re.search(r"Token generation speed: \d+\.\d tokens/s \(below threshold 20 tokens/s\)$", text, re.M)
    ok = [r for r in truth["requests"] if r["status"] == "success"]
    assert sorted(r["ttft_s"] for r in ok)[len(ok) // 2] > 1.0
    assert all(1 / r["tpot_s"] < 20 for r in ok if r["output_tokens"] > 10)
    text, _ = run("startup-oom", "v0")
    assert "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate" in text
    text, _ = run("kv-too-small", "handbook")
    assert "is larger than the maximum number of tokens that can be stored in KV cache" in text
    text, _ = run("nccl-hang", "v0")
    assert "No available block found in 60 second. " in text and "died, exit code: -6" in text
    assert "\x1b[1;36m(VllmWorkerProcess pid=" in text


# ---------------------------------------------------------------------------------------------- sizing, follow, CLI
def test_requests_and_lines_limits() -> None:
    cfg = build_config("healthy", fmt="v1", seed=3, duration_s=3600, max_requests=25)
    rep = simulate(cfg, io.StringIO())
    assert rep.truth["counts"]["requests"] == 25
    cfg = build_config("healthy", fmt="handbook", seed=3, duration_s=3600, max_lines=20000)
    rep = simulate(cfg, io.StringIO())
    assert 20000 <= rep.lines < 22000


def test_follow_writes_the_same_bytes() -> None:
    text = run("healthy", "v1", 1, 5.0)[0]
    cfg = build_config("healthy", fmt="v1", seed=1, duration_s=5.0)
    buf = io.StringIO()
    simulate(cfg, buf, follow=True, speed=20000.0)
    assert buf.getvalue() == text


def test_stuck_request_fault() -> None:
    from vllmlog.simulate import Fault

    cfg = build_config("healthy", fmt="v1", seed=1, duration_s=60, faults=[Fault("stuck_request", at_s=5)])
    rep = simulate(cfg, io.StringIO())
    stuck = [i for i in rep.truth["incidents"] if i["category"] == "stuck_request"]
    assert len(stuck) == 1


def test_cli_exit_codes_and_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vllmlog.cli import main

    log, tj = tmp_path / "o.log", tmp_path / "t.json"
    rc = main(["simulate", "--scenario", "client-disconnects", "--format", "v1", "--duration", "20s", "--seed", "4",
               "-o", str(log), "--truth", str(tj), "--start", "2026-12-01T08:00:00"])
    assert rc == 0
    truth = json.loads(tj.read_text())
    assert truth["scenario"] == "client-disconnects" and truth["counts"]["lines"] == log.read_text().count("\n")
    assert "INFO 12-01 08:00:00 [api_utils.py:347]" in log.read_text()
    assert "client-disconnects" in capsys.readouterr().err
    rc = main(["simulate", "--scenario", "healthy", "--format", "handbook", "--duration", "5s", "--quiet"])
    assert rc == 0 and "Added request req_000001 to waiting queue." in capsys.readouterr().out
    assert main(["simulate", "--list"]) == 0
    capsys.readouterr()
    assert main(["simulate", "--scenario", "nope"]) == 2
    assert "unknown scenario" in capsys.readouterr().err
    assert main(["simulate", "--duration", "ten minutes"]) == 2
    assert main(["simulate", "--format", "v9"]) == 2
    assert main(["simulate", "--fault", "meteor@10"]) == 2
    assert main(["simulate", "--start", "yesterday"]) == 2
    assert main(["simulate", "--duration", "5s", "-o", str(tmp_path / "missing" / "x.log")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_v1_log_outputs_chat_deltas_match_truth() -> None:
    cfg = build_config("healthy", fmt="v1", seed=5, duration_s=20, log_outputs=True)
    buf = io.StringIO()
    rep = simulate(cfg, buf)
    text = buf.getvalue()
    deltas = Counter(re.findall(r"\] Generated response (\S+) \(streaming delta\): output: ", text))
    complete = set(re.findall(r"\] Generated response (\S+) \(streaming complete\): output: .*, "
                              r"finish_reason: streaming_complete$", text, re.M))
    ok = [r for r in rep.truth["requests"] if r["status"] == "success"]
    chat_stream = {r["request_id"]: r for r in ok if r["endpoint"] == "/v1/chat/completions" and r["stream"]}
    assert chat_stream and complete == set(chat_stream)
    assert all(deltas[k] == r["output_tokens"] for k, r in chat_stream.items())
    assert not any(k.startswith("cmpl-") for k in deltas)  # 0.32 logs outputs for chat requests only


def test_v1_015_preemptions_field_and_coloured_stream_prefix() -> None:
    text, truth = run("kv-pressure", "v1-0.15", 1, 120.0)
    plain = ANSI.sub("", text)
    pre = [int(n) for n in re.findall(r"\] Engine 000: .*, Preemptions: (\d+), GPU KV cache usage: ", plain)]
    assert pre and sum(pre) <= truth["counts"]["preemptions"]
    assert re.search(r"^\x1b\[0;36m\(APIServer pid=\d+\)\x1b\[0;0m INFO:     127\.0\.0\.1:\d+ - \"POST ", text, re.M)
    assert re.search(r"^\x1b\[0;36m\(EngineCore_DP0 pid=\d+\)\x1b\[0;0m Capturing CUDA graphs ", text, re.M)
    assert "(APIServer pid=" in plain and "[utils.py:325]" in plain and "version 0.15.1" in plain


@pytest.mark.parametrize(("scenario", "fmt"), [("kv-pressure", "v0"), ("client-disconnects", "v1"), ("nccl-hang", "v1-0.15"),
                                               ("overload", "v1-0.10"), ("engine-crash", "v0")])
def test_bulk_decode_is_byte_identical_to_single_steps(scenario: str, fmt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from vllmlog.simulate import scheduler

    fast = run(scenario, fmt)
    monkeypatch.setattr(scheduler.Engine, "bulk", False)
    buf = io.StringIO()
    rep = simulate(build_config(scenario, fmt=fmt, seed=1, duration_s=DURATION), buf)
    assert buf.getvalue() == fast[0] and rep.truth == fast[1]


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_blocks_fault(fmt: str) -> None:
    from vllmlog.simulate import Fault

    cfg = build_config("healthy", fmt=fmt, seed=1, faults=[Fault("kv_too_small", cause="no_blocks")])
    buf = io.StringIO()
    rep = simulate(cfg, buf)
    assert "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`" in buf.getvalue()
    assert [i["category"] for i in rep.truth["incidents"]] == ["kv_cache_capacity_error"]
    assert rep.truth["requests"] == [] and rep.truth["ready_ts"] is None
