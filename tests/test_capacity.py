"""`vllmlog capacity` on the real vLLM CPU runs: the server's facts, the binding limit, what-ifs, checks, advice."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from vllmlog.capacity import plan
from vllmlog.capacity.view import PlanView
from vllmlog.cli import main
from vllmlog.errors import ConfigError
from vllmlog.run import load

from .conftest import CORPUS

CPU = CORPUS / "vllm-cpu"
OVERLOAD = CPU / "02-overload-queueing.log"
KV = CPU / "03-kv-cache-pressure-preemption.log"
LIGHT = CPU / "01-startup-and-light-load.log"
ABORTS = CPU / "04-client-aborts.log"


@pytest.fixture(scope="module")
def both():
    p = plan(load([str(OVERLOAD), str(KV)]), target_rate=20)
    return {s.file.rsplit("/", 1)[-1][:2]: s for s in p.servers}, p


def _fig(sc, section, key):
    figs = sc.facts.figures if section == "has" else sc.load.figures + sc.model_figures
    return next(f for f in figs if f.key == key)


def test_overload_is_bound_by_max_num_seqs_4(both):
    s = both[0]["02"]
    assert s.binding == "max_num_seqs"
    seats = _fig(s, "has", "max_num_seqs")
    assert (seats.value, seats.basis) == (4, "logged")
    w = next(w for w in s.windows if w.limit == "max_num_seqs")
    assert w.running == (4, 4) and w.waiting == (60, 60)
    assert "Running 4 = --max-num-seqs 4, Waiting 60" in w.evidence
    assert _fig(s, "load", "concurrency_peak").value == 64


def test_kv_pressure_is_bound_by_its_2048_token_cache(both):
    s = both[0]["03"]
    assert s.binding == "kv_cache"
    kv = _fig(s, "has", "kv_cache_tokens")
    assert (kv.value, kv.basis) == (2048, "logged")
    assert _fig(s, "has", "num_gpu_blocks_override").value == 16
    # the model puts Running where the KV-bound stats lines show it (5–7, median 6)
    chk = next(c for c in s.checks if c.name.startswith("Running while the KV cache binds"))
    assert chk.actual == 6 and abs(chk.error) <= 0.15


def test_vllm_max_concurrency_line_is_reproduced(both):
    for s in both[0].values():
        c = next(c for c in s.checks if c.name.startswith("max concurrency at 512"))
        assert c.error == 0.0
    assert next(c for c in both[0]["03"].checks if c.name.startswith("max concurrency")).actual == 4.0


def test_lengths_from_stats_lines_are_close_to_the_client_truth(both):
    """Log-only estimate (throughput × interval ÷ requests) vs the client's usage counts (02: prompt 46.9,
    output 360.6; 03: 64.6, 373.2)."""
    truth = {"02": (46.93, 360.58), "03": (64.62, 373.18)}
    for k, (p, o) in truth.items():
        s = both[0][k]
        assert s.load.lengths.basis == "estimated"
        assert abs(s.load.lengths.prompt - p) / p < 0.05
        assert abs(s.load.lengths.output - o) / o < 0.05


def test_what_if_removing_the_override_lets_the_offered_16_run(both):
    s = both[0]["03"]
    w = next(w for w in s.whatifs if w.key == "num_gpu_blocks_override")
    assert w.kv_tokens == 4096 * 128 and w.kv_basis == "logged"
    assert w.running == 16
    assert w.change == "remove --num-gpu-blocks-override 16"
    assert any("num-gpu-blocks-override 16" in a for a in s.advice)


def test_advice_never_repeats_a_set_value_and_is_cpu_aware(both):
    for s in both[0].values():
        text = " ".join(s.advice) + " ".join(w.change for w in s.whatifs if w.proposed)
        assert "--gpu-memory-utilization" not in text  # CPU backend
        assert f"--max-num-seqs {s.facts.seats}`" not in text
    s = both[0]["02"]
    w = next(w for w in s.whatifs if w.key == "max_num_seqs")
    assert w.seats == 64 and w.running == 64
    assert s.advice[0].startswith("`--max-num-seqs 64` (now 4)")


def test_cross_run_check_predicts_the_kv_run_from_the_overload_run(both):
    """Same model, same device, about the same request lengths: 02's model under 03's flags predicts 03's Running."""
    _, p = both
    c = next(c for c in p.checks if c.name.startswith("Running peak of 03"))
    assert c.actual == 7 and abs(c.error) < 0.10


def test_every_figure_says_where_it_came_from(both):
    for s in both[0].values():
        d = s.to_dict()
        for section in ("has", "load", "model"):
            for key, f in d[section].items():
                assert f["basis"] in ("logged", "derived", "estimated", "model", "default"), key
                assert f["source"], key
        for w in d["what_if"]:
            assert w["basis"] == "model"


def test_light_load_has_headroom():
    p = plan(load([str(LIGHT)]))
    s = p.servers[0]
    assert s.binding == "headroom"
    assert s.advice == ["nothing binds: the server has headroom at this load"]


def test_never_served_runs_are_skipped():
    p = plan(load([str(CPU / "06b-startup-fail-kv-cache-too-small.log")]))
    assert p.servers == [] and "never served" in p.skipped[0]


def test_terminal_fits_80_columns(both):
    buf = io.StringIO()
    Console(file=buf, width=80, color_system=None).print(PlanView(both[1]))
    out = buf.getvalue()
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "Which limit binds: seats (--max-num-seqs)" in out
    assert "Which limit binds: KV cache" in out
    assert "remove --num-gpu-blocks-override 16" in out
    assert "for 20 req/s:" in out


def test_cli_json(capsys):
    code = main(["capacity", str(KV), "--json", "--target-rate", "5"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    s = doc["servers"][0]
    assert s["binding"] == "kv_cache"
    assert s["has"]["kv_cache_tokens"] == {"value": 2048, "unit": "tokens", "basis": "logged",
                                           "source": s["has"]["kv_cache_tokens"]["source"]}
    assert doc["target_rate"] == 5.0 and doc["coverage"]["complete"] is True


def test_cli_client_lengths(capsys):
    code = main(["capacity", str(OVERLOAD), "--json", "--client", str(CPU / "02-client-truth.csv")])
    assert code == 0
    s = json.loads(capsys.readouterr().out)["servers"][0]
    assert s["load"]["output_tokens_mean"]["basis"] == "logged"
    assert s["load"]["output_tokens_mean"]["value"] == pytest.approx(360.575)
    assert "client" in s["load"]["output_tokens_mean"]["source"]
    assert s["load"]["e2e_mean"]["value"] == pytest.approx(7.016, abs=0.01)


def test_slo_option():
    from vllmlog.cli.capacity_cmd import parse_slo

    t = parse_slo("ttft_p95=500ms,e2e_p95=30s,tpot=50ms")
    assert (t.ttft_s, t.e2e_s, t.tokens_per_s) == (0.5, 30.0, 20.0)
    with pytest.raises(ConfigError):
        parse_slo("latency=3")


def test_cli_bad_option(capsys):
    assert main(["capacity", str(KV), "--headroom", "2"]) == 2
    assert re.search(r"error: --headroom", capsys.readouterr().err)


# --------------------------------------------------------------------------- re-runs with one flag changed
RERUN = CPU.parent.parent / "capacity"


def _cross(p, prefix):
    return next(c for c in p.checks if c.name.startswith(prefix))


def test_rerun_without_the_override_shows_the_predicted_concurrency():
    """03's what-if 'remove --num-gpu-blocks-override 16' predicts Running 16 (the offered 16); the real re-run of
    the same load without the flag (R1) shows Running 16, Waiting 0."""
    p = plan(load([str(KV), str(RERUN / "R1-kv-pressure-load-full-cache.log")]))
    s03 = next(s for s in p.servers if s.file.endswith("03-kv-cache-pressure-preemption.log"))
    w = next(w for w in s03.whatifs if w.key == "num_gpu_blocks_override")
    r1 = next(s for s in p.servers if s.file.endswith("R1-kv-pressure-load-full-cache.log"))
    assert w.running == 16 and r1.load.running_max == 16
    assert max(x for win in r1.windows for x in win.waiting) == 0
    c = _cross(p, "Running peak of R1-kv-pressure-load-full-cache.log from 03")
    assert c.predicted == 16 and c.actual == 16


def test_rerun_with_a_larger_override_is_within_10_percent():
    """03's model (the footprint measured while its 2,048-token cache was full) predicts Running with 32 blocks
    (4,096 tokens): 11.7 against the real re-run's peak of 11 (R2)."""
    p = plan(load([str(KV), str(RERUN / "R2-kv-pressure-load-32-blocks.log")]))
    c = _cross(p, "Running peak of R2-kv-pressure-load-32-blocks.log from 03")
    assert c.actual == 11
    assert abs(c.error) <= 0.10
    r2 = next(s for s in p.servers if s.file.endswith("R2-kv-pressure-load-32-blocks.log"))
    assert r2.binding == "kv_cache"
    assert next(f for f in r2.facts.figures if f.key == "kv_cache_tokens").value == 4096


def test_rerun_with_more_seats_shows_the_predicted_running():
    """02's what-if for --max-num-seqs 16 (R3 ran the same load with it): Running 16, still seat-bound."""
    p = plan(load([str(OVERLOAD), str(RERUN / "R3-overload-load-16-seqs.log")]))
    c = _cross(p, "Running peak of R3-overload-load-16-seqs.log from 02")
    assert (c.predicted, c.actual) == (16, 16)
    r3 = next(s for s in p.servers if s.file.endswith("R3-overload-load-16-seqs.log"))
    assert r3.binding == "max_num_seqs"
    # runs two days apart on a shared machine are not pooled for throughput (2-3x apart)
    assert r3.throughput is not None and r3.throughput.runs == 1


def test_kv_bound_run_gets_seats_at_what_the_cache_holds(both):
    s = both[0]["03"]
    w = next(w for w in s.whatifs if w.key == "max_num_seqs_kv")
    assert w.seats == int(s.whatifs[0].fits) == 5  # 2,048 tokens ÷ 351 per request while the cache was full
    assert any(a.startswith("or, at this cache size, `--max-num-seqs 5` (now 128)") for a in s.advice)


def test_compute_bound_cpu_server_is_recognised(both):
    """02 and 03 (same tiny model, same CPU, same hour) generate ~2,700–3,100 tok/s whatever Running (2–7): the
    pooled fit is flat, so more seats add no throughput and the advice says so."""
    s = both[0]["02"]
    tp = s.throughput
    assert tp is not None and tp.a == 0.0
    assert 2500 < tp.saturation < 3300
    w = next(w for w in s.whatifs if w.key == "max_num_seqs")
    assert "compute-bound" in w.note
    assert any(a.startswith("compute is the limit") for a in s.advice)


def test_analyze_report_has_a_capacity_section(tmp_path):
    from vllmlog.analyze import analyze
    from vllmlog.export.html import render_report

    html = render_report(analyze([str(KV)], year=2026))
    sec = html[html.index("<section id='capacity'>"):]
    sec = sec[:sec.index("</section>")]
    assert "bound by KV cache" in sec
    assert "remove --num-gpu-blocks-override 16" in sec
    assert "&#x27;KV cache size&#x27; start-up line" in sec  # escaped
    assert "<a href='#capacity'>" in html


def test_replicas_when_the_slo_barely_holds_or_cannot():
    """One seat held 20 s per request: a trickle already waits > 1 s at p95 — a tiny rate, many replicas, and no
    crash when the rate is zero (the smoke run found one)."""
    from vllmlog.capacity import replicas as rmod
    from vllmlog.capacity.load import Lengths, Load
    from vllmlog.capacity.model import Throughput
    from vllmlog.numbers import SloTargets

    assert 0 < rmod.slo_rate(1, 1 / 20.0, 1.0) < 0.01
    assert 15.5 < rmod.slo_rate(64, 1 / 3.65, 1.0) < 16.0
    ld = Load(lengths=Lengths(prompt=100.0, output=400.0), running_max=1)
    tp = Throughput(0.05, 0.0, 3, (1,), None)
    r = rmod.plan(ld, tp, seats=1, fit=None, slo=SloTargets(), target=1.0)
    assert r.needed is not None and r.needed > 100
    zero = rmod.slo_rate
    try:
        rmod.slo_rate = lambda *a, **k: 0.0
        r = rmod.plan(ld, tp, seats=1, fit=None, slo=SloTargets(), target=1.0)
    finally:
        rmod.slo_rate = zero
    assert r.replicas is None and any("cannot be held" in a for a in r.assumptions)
