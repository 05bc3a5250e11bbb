"""The diagnosis's fixes and `vllmlog capacity` name the same values (issue 17 item 6): over every labelled log in
tests/data (corpus incidents, heldout, heldout2, blind*) and the real CPU runs, whenever an incident's fix names a
value for --max-num-seqs, --max-model-len, --gpu-memory-utilization, VLLM_CPU_KVCACHE_SPACE or
--num-gpu-blocks-override, the capacity plan of the same server run names the same value, or says why it names
none. Both take it from ``capacity.sizing`` (one computation per server run)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vllmlog.capacity import plan, sizing
from vllmlog.diagnose import run_diagnosis
from vllmlog.run import load
from vllmlog.state import service_states

DATA = Path(__file__).parent / "data"
FLAG = re.compile(r"(--max-num-seqs|--max-model-len|--gpu-memory-utilization|VLLM_CPU_KVCACHE_SPACE|"
                  r"--num-gpu-blocks-override)`?(?:[ =]| to )(\d[\d.]*\d|\d)")


def _cases() -> list[tuple[str, list[str]]]:
    out = []
    for j in (sorted(DATA.glob("corpus/incidents/*.json")) + sorted(DATA.glob("heldout/*.json"))
              + sorted(DATA.glob("heldout2/*.json")) + sorted(DATA.glob("blind/*/*.json"))):
        d = json.loads(j.read_text())
        out.append((str(j.relative_to(DATA).with_suffix("")),
                    [str(j.parent / n) for n in d.get("inputs", [j.with_suffix(".log").name])]))
    for p in sorted(DATA.glob("corpus/vllm-cpu*/*.log")) + sorted(DATA.glob("capacity/*.log")):
        out.append((str(p.relative_to(DATA).with_suffix("")), [str(p)]))
    return out


CASES = _cases()


def _named(text: str) -> set[tuple[str, float]]:
    return {(f, float(v)) for f, v in FLAG.findall(text)}


def _plan_text(p) -> dict[tuple[str, int], str]:
    out: dict[tuple[str, int], str] = {}
    for sc in p.servers:
        out[(sc.file, sc.server)] = "\n".join(sc.advice + (sc.sizing.lines() if sc.sizing else []))
    for z in p.startup:
        out[(z.file, z.server)] = "\n".join(z.lines())
    return out


def _survey():
    rows = []
    for name, inputs in CASES:
        run = load(inputs, year=2026)
        dg = run_diagnosis(run)
        text = _plan_text(plan(run))
        for inc in dg.incidents:
            for fx in inc.fixes:
                for flag, val in _named(fx):
                    rows.append((name, inc.file, inc.server, flag, val, fx, text.get((inc.file, inc.server), "")))
    return rows


@pytest.fixture(scope="module")
def survey():
    return _survey()


def test_every_value_a_fix_names_is_the_capacity_plans(survey) -> None:
    assert len(survey) >= 40, "the labelled logs should exercise the sizing (a test that cannot fail is a defect)"
    missing = []
    for name, _file, _server, flag, val, fx, text in survey:
        if (flag, val) in _named(text) or f"no `{flag}` value" in text:
            continue
        missing.append(f"{name}: fix names {flag} {val:g} ({fx[:90]}…); capacity says: {text[:300]!r}")
    assert not missing, "\n".join(missing)


def test_the_values_cover_every_flag(survey) -> None:
    flags = {r[3] for r in survey}
    assert flags >= {"--max-num-seqs", "--max-model-len", "--gpu-memory-utilization", "--num-gpu-blocks-override"}


def test_no_fix_repeats_the_value_in_force_or_lowers_seats_at_one_running(survey) -> None:
    by: dict[str, object] = {}
    for name, inputs in CASES:
        if not any(r[0] == name for r in survey):
            continue
        for st in service_states(load(inputs, year=2026)):
            by[(name, st.file, st.index)] = st
    for name, file, server, flag, val, fx, _text in survey:
        st = by.get((name, file, server))
        if st is None or "remove" in fx.split(flag)[0][-12:]:
            continue
        cfg = st.config
        now = {"--max-num-seqs": cfg.max_num_seqs, "--max-model-len": cfg.max_model_len,
               "--gpu-memory-utilization": cfg.gpu_memory_utilization}.get(flag)
        assert now is None or float(now) != val, f"{name}: {fx} repeats the value in force"
        if flag == "--max-num-seqs" and (st.config.max_num_seqs or 1 << 30) > val:
            assert st.coverage.max_running > 1, f"{name}: lowers --max-num-seqs while one request runs: {fx}"


def test_sizing_is_computed_once_per_server_run() -> None:
    run = load(str(DATA / "corpus" / "vllm-cpu" / "02-overload-queueing.log"), year=2026)
    st = service_states(run)[0]
    a = sizing.of(st)
    assert a is sizing.of(st) and a.more_seats.value == 64
    p = plan(run)
    assert p.servers[0].sizing is a
    d = run_diagnosis(run)
    fix = next(f for i in d.incidents for f in i.fixes if "--max-num-seqs" in f)
    assert "`--max-num-seqs 64`" in fix and "`--max-num-seqs 64` (now 4)" in p.servers[0].advice[0]


def test_cpu_backend_names_its_kv_space_and_the_override() -> None:
    run = load(str(DATA / "corpus" / "vllm-cpu" / "03-kv-cache-pressure-preemption.log"), year=2026)
    sz = sizing.of(service_states(run)[0])
    assert sz.kv_memory.change == "remove --num-gpu-blocks-override 16"
    assert sz.fewer_seats.value == 5 and sz.more_seats.value is None
    fixes = [f for i in run_diagnosis(run).incidents for f in i.fixes]
    assert not any("gpu-memory-utilization" in f for f in fixes)


def test_cpu_kv_pressure_names_the_kv_space_capacity_computes(tmp_path: Path) -> None:
    """Run 03 as if its 2,048-token cache came from a 4 MiB VLLM_CPU_KVCACHE_SPACE instead of the block override:
    K202's fix and the plan name the same VLLM_CPU_KVCACHE_SPACE (never --gpu-memory-utilization on CPU)."""
    src = (DATA / "corpus" / "vllm-cpu" / "03-kv-cache-pressure-preemption.log").read_text()
    lines = [ln for ln in src.splitlines(keepends=True) if "Overriding num_gpu_blocks" not in ln]
    text = "".join(lines).replace("'num_gpu_blocks_override': 16, ", "").replace(
        "Explicitly set (1.0/13.09) GiB", "Explicitly set (0.00390625/13.09) GiB")
    log = tmp_path / "03-small-kv-space.log"
    log.write_text(text)
    run = load(str(log), year=2026)
    st = service_states(run)[0]
    assert st.config.cpu and not st.config.num_gpu_blocks_override
    sz = sizing.of(st)
    assert sz.kv_memory.flag == "VLLM_CPU_KVCACHE_SPACE" and sz.kv_memory.value == 1
    fixes = [f for i in run_diagnosis(run).incidents for f in i.fixes]
    assert any("`VLLM_CPU_KVCACHE_SPACE=1`" in f for f in fixes), fixes
    assert not any("gpu-memory-utilization" in f for f in fixes)
    text = "\n".join(plan(run).servers[0].advice)
    assert "`VLLM_CPU_KVCACHE_SPACE=1`" in text and "`--max-num-seqs 5`" in text
