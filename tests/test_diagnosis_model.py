"""Unit tests of the diagnosis's layers on real logs: the service-state model (configuration from the log,
lifecycle, coverage), the symptom detectors, the incidents (causes start no later than what they explain, one
incident per finding and per record), the verdict's checks, and fixes that agree with the server's facts."""

from __future__ import annotations

from datetime import datetime

import pytest

from vllmlog.diagnose import run_diagnosis
from vllmlog.rules import advice
from vllmlog.run import load
from vllmlog.state import service_states
from vllmlog.state.config import ServerConfig
from vllmlog.symptoms.base import KINDS, trend_of
from vllmlog.verdict import CHECKS

from .conftest import CORPUS

EXAMPLES = sorted((CORPUS.parent.parent.parent / "src" / "vllmlog" / "examples").glob("*.log"))
REAL = sorted((CORPUS / "vllm-cpu").glob("*.log")) + sorted((CORPUS / "vllm-cpu-faults").glob("*.log")) \
    + sorted((CORPUS / "incidents").glob("*.log"))


def _diag(path):
    run = load(str(path), year=2026)
    return run, run_diagnosis(run)


# ----------------------------------------------------------------------------------------------- advice

def test_reconcile_never_advises_the_value_already_set() -> None:
    cfg = ServerConfig(max_num_seqs=64, gpu_memory_utilization=0.9)
    assert advice.reconcile(["raise `--max-num-seqs 64`", "`--gpu-memory-utilization 0.9`"], cfg) == []
    assert advice.reconcile(["`--gpu-memory-utilization 0.95`"], cfg) == ["`--gpu-memory-utilization 0.95`"]


def test_reconcile_cpu_backend_names_its_own_knob() -> None:
    cfg = ServerConfig(device="cpu")
    out = advice.reconcile(["give the KV cache more memory: `--gpu-memory-utilization 0.95`"], cfg)
    assert out and "VLLM_CPU_KVCACHE_SPACE" in out[0] and "--gpu-memory-utilization" not in out[0]
    assert "VLLM_CPU_KVCACHE_SPACE" in advice.more_kv_memory(cfg)


def test_reconcile_names_the_block_override_and_keeps_its_removal() -> None:
    cfg = ServerConfig(num_gpu_blocks_override=16, kv_cache_tokens=2048)
    out = advice.reconcile(["give the KV cache more memory: `--gpu-memory-utilization 0.95`"], cfg)
    assert out == [advice.more_kv_memory(cfg)] and "num-gpu-blocks-override 16" in out[0]
    # "remove `--num-gpu-blocks-override 16`" names the value in force: it is the fix, not a repeat of it
    assert advice.reconcile([advice.more_kv_memory(cfg)], cfg) == [advice.more_kv_memory(cfg)]


def test_no_fewer_seats_while_one_request_runs() -> None:
    cfg = ServerConfig(max_num_seqs=256)
    assert advice.fewer_seqs(cfg, 1) is None
    assert advice.reconcile(["lower `--max-num-seqs` or client concurrency"], cfg, max_running=1) == []
    # the number is the capacity model's (capacity.sizing), never a guess of the rule's
    assert advice.fewer_seqs(ServerConfig(max_num_seqs=8), 10) == "lower `--max-num-seqs` or client concurrency (now 8)"
    from vllmlog.capacity.sizing import Sizing, Value

    sz = Sizing("x.log", 0, True, 8, 10, fewer_seats=Value("--max-num-seqs", 6, "--max-num-seqs 6", "what it holds"))
    assert advice.fewer_seqs(ServerConfig(max_num_seqs=8), 10, "", sz) == \
        "cap concurrency at what the cache holds: `--max-num-seqs 6` (now 8)"
    assert advice.fewer_seqs(ServerConfig(max_num_seqs=8), 10, "", Sizing("x.log", 0, True, 8, 1)) is None


# ----------------------------------------------------------------------------------------------- state

def test_config_comes_from_the_log_with_its_source() -> None:
    run = load(str(CORPUS / "vllm-cpu" / "01-startup-and-light-load.log"), year=2026)
    (st,) = service_states(run)
    cfg = st.config
    assert cfg.cpu and cfg.model == "/models/tiny"
    assert cfg.kv_cache_tokens and cfg.sources["kv_cache_tokens"] in ("logged", "derived")
    assert cfg.max_model_len == 512 and cfg.sources["max_model_len"] == "logged"
    assert st.lifecycle.serving and not st.lifecycle.never_ready
    assert st.coverage.requests > 0 and st.coverage.stats_intervals > 0


def test_never_ready_lifecycle() -> None:
    run = load(str(CORPUS / "vllm-cpu" / "06b-startup-fail-kv-cache-too-small.log"), year=2026)
    (st,) = service_states(run)
    assert st.lifecycle.never_ready and not st.lifecycle.serving


def test_trend_of() -> None:
    assert trend_of([1, 2, 3, 5, 8]) == "degrading"
    assert trend_of([8, 5, 3, 2, 1]) == "recovering"
    assert trend_of([3, 3, 3, 3]) == "stable"
    assert trend_of([8, 5, 3], recovered=True) == "recovered"


# ----------------------------------------------------------------------------------------------- incidents

@pytest.mark.parametrize("path", REAL + EXAMPLES, ids=lambda p: p.stem)
def test_incident_invariants(path) -> None:
    run, dg = _diag(path)
    owner: dict[int, str] = {}
    for inc in dg.incidents:
        assert inc.impact in KINDS or inc.impact == "finding"
        # a cause starts no later than the symptoms it explains (start against start, with its stated onset)
        if inc.cause is not None and inc.symptoms:
            from vllmlog.incidents import onset_of

            c0 = onset_of(inc.cause)
            s0 = min((s.onset for s in inc.symptoms if s.onset), default=None)
            if c0 is not None and s0 is not None and inc.cause.category not in ("client_abort",):
                assert (c0 - s0).total_seconds() <= 60, (inc.id, inc.cause.code, c0, s0)
        # each finding belongs to one incident; a cause is never below the severity of what it explains
        for f in inc.findings:
            assert owner.setdefault(id(f), inc.id) == inc.id
        assert inc.severity >= max((s.severity for s in inc.symptoms), default=inc.severity) or inc.superseded
        assert inc.fixes, f"{inc.id} of {path.name} has no fix"
    # the verdict follows the worst open incident, and lists every check
    assert [c.name for c in dg.verdict.checks] == [name for name, _ in CHECKS]
    failed = {c.name for c in dg.verdict.checks if c.status == "failed"}
    if dg.verdict.status == "healthy":
        assert not failed and not [i for i in dg.incidents if int(i.severity) >= 1 and not i.superseded]
    if dg.verdict.status in ("down", "failing", "degraded"):
        assert dg.incidents


def test_healthy_runs_pass_every_check_they_could_observe() -> None:
    for name in ("01-startup-and-light-load.log", "00-cold-start-first-compile.log", "08-debug-level-light-load.log"):
        _, dg = _diag(CORPUS / "vllm-cpu" / name)
        assert dg.verdict.status == "healthy", (name, dg.verdict.reason)
        assert all(c.status in ("passed", "not observed") for c in dg.verdict.checks)
        assert dg.verdict.to_dict()["coverage"]["requests"] > 0


def test_engine_killed_while_serving_is_down_not_shutdown_noise() -> None:
    """kill -9 of the engine core: the API server logs 'engine core exited unexpectedly', requests fail with
    'engine dead', then uvicorn's 'Shutting down' within 3 s — a death, not a Ctrl-C."""
    _, dg = _diag(CORPUS / "vllm-cpu-faults" / "P1-engine-dead-kill9.log")
    assert dg.verdict.status == "down"
    inc = dg.incidents[0]
    assert (inc.impact, inc.category, inc.cause.code) == ("dead", "engine_dead", "E403")
    assert next(c for c in dg.verdict.checks if c.name == "engine alive").status == "failed"


def test_block_override_is_named_in_the_fix() -> None:
    _, dg = _diag(next(p for p in EXAMPLES if p.name == "kv-pressure.log"))
    inc = dg.incidents[0]
    assert inc.category == "kv_cache_pressure_preemption"
    assert inc.fixes[0].startswith("remove `--num-gpu-blocks-override 16`")
    assert not any("gpu-memory-utilization" in f for f in inc.fixes)


def test_weights_from_model_name() -> None:
    """The CPU floor's weight size from a parameter count in the name; none without one (or for MoE 8x7b)."""
    from vllmlog.symptoms.progress import _weights_from_name

    assert round(_weights_from_name("ibm-granite/granite-3.1-8b-instruct", "torch.bfloat16"), 1) == 14.9
    assert round(_weights_from_name("Qwen/Qwen2.5-0.5B-Instruct", "float32"), 2) == 1.86
    assert _weights_from_name("mistralai/Mixtral-8x7B-Instruct-v0.1", None) is None
    assert _weights_from_name("/models/tiny", None) is None


def test_pooling_model_from_args_and_tasks() -> None:
    """--convert/--task/--runner and the tasks line say whether the model only pools (never generates)."""
    from vllmlog.model import Event
    from vllmlog.state.config import _pooling

    def ev(kind: str, fields: dict, text: str = "") -> Event:
        return Event("x.log", 1, 1, None, "INFO", None, None, kind, None, fields, text, "", None, False)

    assert _pooling(ev("server_args", {"args": {"convert": "embed"}})) is True
    assert _pooling(ev("server_args", {"args": {"task": "generate"}})) is False
    assert _pooling(ev("server_args", {"args": {"model": "m"}})) is None
    assert _pooling(ev("model_tasks", {"tasks": "['embed', 'token_embed']"})) is True
    assert _pooling(ev("model_tasks", {"tasks": "['generate']"})) is False
    assert _pooling(ev("model_tasks", {}, "This model supports multiple tasks: {'generate', 'embed'}. "
                                          "Defaulting to 'generate'.")) is False


def test_cadence_is_an_interval_even_with_few_lines() -> None:
    """The stats cadence: the lower quartile of the gaps with four or more, else the shortest — two lines around
    a 10-minute silence and one 20 s interval are a 20 s cadence, not a 5-minute one (a gap is never shorter
    than the interval it was logged at)."""
    from vllmlog.state.build import _cadence

    assert _cadence([610.0, 20.0]) == 20.0
    assert _cadence([5.0]) == 5.0
    assert _cadence([5.0, 5.0, 5.0, 300.0, 5.0]) == 5.0
