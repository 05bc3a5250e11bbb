"""`vllmlog.startup`: what a start-up spent its time on, from the spans when traced, from the log's own lines
otherwise — on real vLLM logs (CPU 0.32, GPU 0.9 excerpts, V0), finished, failed and stuck start-ups."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllmlog.run import load
from vllmlog.startup import PHASES, phases, slowest, startups, stopped_in

from .conftest import CORPUS, DATA
from .test_traces import T1, T2

HELD = DATA / "heldout"


def _one(path: Path, **kw):  # type: ignore[no-untyped-def]
    run = load(str(path), year=2026, **kw)
    (s,) = startups(run)
    return run, s


@pytest.mark.parametrize("log,traces", [(T1[0], T1[1]), (T2[0], T2[1])], ids=["T1", "T2"])
def test_log_account_agrees_with_the_spans(log: Path, traces: Path) -> None:
    """The same real start-up told twice: by its loading spans and by its log lines."""
    _, s = _one(log, traces=[str(traces)])
    assert s.source == "traced" and s.complete and s.waterfall is not None
    assert {p.source for p in s.phases} == {"traced"}
    assert slowest(s.phases).name == "compile / warm-up"
    assert sum(p.seconds for p in s.phases) == pytest.approx(s.waterfall.total_s, abs=1e-6)
    logged = {p.name: 0.0 for p in s.logged}
    for p in s.logged:
        logged[p.name] += p.seconds
    traced = s.by_phase()
    assert slowest(s.logged).name == "compile / warm-up"
    # vLLM's own 'Loading weights took 0.03 seconds' and the 'Load weights' span
    assert logged["weights"] == pytest.approx(traced["weights"], abs=0.01)
    assert next(p for p in s.logged if p.name == "weights").source == "logged"
    # warm-up from 1-second timestamps ('Warming up model…' → 'Warming up done.') vs the 'Warmup (CPU)' span
    assert abs(logged["compile / warm-up"] - traced["compile / warm-up"]) <= 1.0
    # without the traces: the log's account, and the same answer to "what took the time"
    _, plain = _one(log)
    assert plain.source == "logged" and plain.ready and plain.complete
    assert [p.to_dict() for p in plain.phases] == [p.to_dict() for p in s.logged]
    assert plain.total_s == pytest.approx(sum(p.seconds for p in plain.phases))
    assert plain.total_s == (load(str(log), year=2026).servers[0].ready_ts - plain.start).total_seconds()
    assert "from the log's lines" in plain.headline() and "(traced)" in s.headline()


def test_phases_are_laid_end_to_end() -> None:
    run, s = _one(T1[0])
    ps = phases(run)
    assert ps == s.phases and {p.server for p in ps} == {0}
    for a, b in zip(ps, ps[1:]):
        assert a.end == b.start
    assert ps[0].start == run.servers[0].start_ts and ps[-1].name == "API server"
    assert all(p.name in PHASES and p.source in ("logged", "derived", "estimated") for p in ps)
    d = s.to_dict()
    assert d["slowest"] == "compile / warm-up" and d["stopped_in"] is None and d["source"] == "logged"
    assert d["phases"][0]["name"] == "process start" and d["phases"][0]["line"] == 17


def test_gpu_lines_state_their_durations() -> None:
    """V1 0.9 on a GPU: weights, model loading and torch.compile are taken as vLLM wrote them; the start-up
    died capturing CUDA graphs (an OOM after the KV cache was sized)."""
    _, s = _one(HELD / "01-v1-cudagraph-capture-oom.log")
    by = {p.name: p for p in s.phases if p.complete}
    assert by["weights"].seconds == 7.91 and by["weights"].source == "logged"
    assert by["model load"].seconds == pytest.approx(8.672049 - 7.91) and by["model load"].source == "derived"
    assert by["compile / warm-up"].seconds == 12.40 and "torch.compile takes 12.40 s" in by["compile / warm-up"].detail
    op = s.stopped_in()
    assert op is not None and op.name == "compile / warm-up" and op.seconds == 6.0 and not s.ready
    assert op.line == 19  # EngineCore failed to start.
    assert "did not finish: in compile / warm-up" in s.headline()


def test_v0_graph_capture() -> None:
    _, s = _one(CORPUS / "incidents" / "14-v0-1000-concurrent-preemption-thrash.log")
    g = next(p for p in s.phases if p.name == "compile / warm-up")
    assert g.seconds == 9.0 and g.source == "logged" and "Graph capturing finished in 9 secs" in g.detail
    assert s.slowest() is g and s.ready


@pytest.mark.parametrize("path,phase", [
    (CORPUS / "vllm-cpu-faults" / "P4-oom-startup-cgroup.log", "KV cache"),          # killed allocating it
    (CORPUS / "vllm-cpu" / "06b-startup-fail-kv-cache-too-small.log", "KV cache"),
    (CORPUS / "incidents" / "07-v0-maxlen-exceeds-kv-capacity.log", "KV cache"),
    (CORPUS / "incidents" / "27-v0-nccl-p2p-hang-first-allreduce.log", "workers / device"),  # NCCL hang, 10 min
    (CORPUS / "vllm-cpu" / "06c-startup-fail-bad-model-path.log", "process start"),
], ids=lambda x: x if isinstance(x, str) else x.stem[:12])
def test_failed_or_stuck_startup_names_its_phase(path: Path, phase: str) -> None:
    run, s = _one(path)
    op = s.stopped_in()
    assert op is not None and op.name == phase and not op.complete and not s.ready and not s.complete
    assert stopped_in(phases(run)) == op


def test_stuck_nccl_startup_took_its_time_in_one_phase() -> None:
    _, s = _one(CORPUS / "incidents" / "27-v0-nccl-p2p-hang-first-allreduce.log")
    assert s.slowest() is s.stopped_in() and s.slowest().seconds > 600


def test_stuck_in_warm_up(tmp_path: Path) -> None:
    """A start-up whose log goes on (a worker's warnings) but never gets past 'Warming up model…'."""
    lines = T1[0].read_text().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if "Warming up model for the compilation" in x)
    tail = "(Worker pid=15620) WARNING 12-01 18:40:00 [cpu_worker.py:114] still here\n"
    p = tmp_path / "stuck.log"
    p.write_text("".join(lines[: cut + 1]) + tail)
    _, s = _one(p)
    op = s.stopped_in()
    assert op is not None and op.name == "compile / warm-up"
    assert op.seconds == pytest.approx(9 * 60 + 11, abs=0.05)  # weights loaded at 18:30:49 → 18:40:00
    assert s.slowest() is op


def test_no_startup_in_an_excerpt(tmp_path: Path) -> None:
    lines = T1[0].read_text().splitlines(keepends=True)
    ready = next(i for i, x in enumerate(lines) if "Starting vLLM server on" in x)
    p = tmp_path / "serving.log"
    p.write_text("".join(lines[ready + 40:]))
    run = load(str(p), year=2026)
    assert startups(run) == [] and phases(run) == [] and slowest([]) is None and stopped_in([]) is None


def test_engine_init_not_broken_down() -> None:
    """Only 'init engine (profile, create kv cache, warmup model) took 176.20 seconds': one phase, as written."""
    _, s = _one(CORPUS / "incidents" / "23-v1-structured-output-concurrency-ima.log")
    by = s.by_phase()
    assert by["engine init"] == 176.2 and by["process start"] == pytest.approx(180 - 176.2)
    assert s.slowest().name == "engine init" and s.slowest().source == "logged"


def test_of_server_in_a_crash_loop(tmp_path: Path) -> None:
    """A failed start, then a good one in the same file: each server run gets its own start-up."""
    log = tmp_path / "retry.log"
    log.write_bytes((CORPUS / "vllm-cpu/06b-startup-fail-kv-cache-too-small.log").read_bytes()
                    + (CORPUS / "vllm-cpu/00-cold-start-first-compile.log").read_bytes())
    from vllmlog.startup import of_server

    run = load(str(log), year=2026)
    first, second = of_server(run, str(log), 0), of_server(run, str(log), 1)
    assert first is not None and second is not None and of_server(run, str(log), 2) is None
    assert first.stopped_in().name == "KV cache" and not first.ready
    assert second.ready and second.stopped_in() is None and second.slowest().name == "compile / warm-up"
    assert startups(run) is startups(run)  # computed once per Run


def test_traced_startup_stuck_after_its_last_span(tmp_path: Path) -> None:
    """Spans are exported when they end: a start-up stuck in the warm-up has the spans before it and no
    'Overall Loading'; the log says what it was doing after the last finished span, and for how long."""
    import json

    keep = []
    for line in T1[1].read_text().splitlines():
        d = json.loads(line)
        for rs in d["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                ss["spans"] = [s for s in ss["spans"] if s["name"] in ("Worker init", "Loading (CPU)", "Load model",
                                                                       "Initialize model", "Load weights")]
        keep.append(json.dumps(d))
    tr = tmp_path / "t.jsonl"
    tr.write_text("\n".join(keep) + "\n")
    lines = T1[0].read_text().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if "Warming up model for the compilation" in x)
    log = tmp_path / "stuck.log"
    log.write_text("".join(lines[: cut + 1]) + "(Worker pid=15620) WARNING 12-01 18:40:00 [cpu_worker.py:114] x\n")
    run, s = _one(log, traces=[str(tr)])
    assert s.source == "traced" and not s.waterfall.complete and not s.complete
    op = s.stopped_in()
    assert op.name == "compile / warm-up" and op.source == "estimated" and "after the last traced step" in op.detail
    assert op.end == run.servers[0].end_ts and op.seconds > 540
    assert [p.source for p in s.phases if p.complete] == ["traced"] * (len(s.phases) - 1)
    assert s.slowest() is op
