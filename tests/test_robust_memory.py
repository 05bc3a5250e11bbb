"""Issue 15, also: memory stays bounded in ``analyze`` — 3 M never-finished requests took 2.45 GB.

The open set is capped (``JourneyBuilder.max_open``, 200,000 by default, as ``watch`` caps its in-flight set);
an evicted journey is folded into counts (``Run.evicted``: ``numbers.RequestStats``), not kept whole, so
``Run.journeys`` never holds more than the cap of never-finished requests. Evictions are counted
(``Run.journeys_evicted``, ``requests.evicted``) and said in every output: the coverage gap
``requests_evicted`` (INCOMPLETE, exit 3), and "N requests never finished; M evicted from memory, their
timings are not in the percentiles" in the terminal, the JSON and the HTML report. The numbers are those of
the streaming summary, which folds every journey (evicted or not) as it completes. Peak RSS: ``bench/bench_open_requests.py``."""

from __future__ import annotations

from functools import partialmethod
from pathlib import Path

import pytest

from vllmlog import journeys
from vllmlog.analyze import analyze
from vllmlog.run import load

CAP, N = 100, 1_000


def _unfinished(tmp_path: Path) -> Path:
    p = tmp_path / "unfinished.log"
    p.write_text("".join(f"(APIServer pid=1) INFO 11-30 00:{i // 60 % 60:02d}:{i % 60:02d} [async_llm.py:578] Added "
                         f"request cmpl-{i:06d}-a56e9542.\n" for i in range(N)))
    return p


@pytest.fixture
def small_cap(monkeypatch):
    monkeypatch.setattr(journeys.JourneyBuilder, "__init__",
                        partialmethod(journeys.JourneyBuilder.__init__, max_open=CAP))


def test_open_requests_are_capped_counted_and_said(tmp_path: Path, small_cap) -> None:
    a = analyze([str(_unfinished(tmp_path))])
    assert a.run.journeys_evicted == N - CAP
    gaps = {g.code: g for g in a.coverage.gaps}
    assert "requests_evicted" in gaps and not a.coverage.complete
    assert gaps["requests_evicted"].count == N - CAP and f"{N - CAP:,} requests were still open" in gaps["requests_evicted"].message


def test_evicted_requests_are_not_kept_whole(tmp_path: Path, small_cap) -> None:
    run = load(str(_unfinished(tmp_path)))
    assert len(run.journeys) <= 2 * CAP
    assert run.journeys_evicted == N - CAP and run.evicted is not None and len(run.evicted) == N - CAP
    assert sum(run.evicted.servers.values()) == N - CAP


def _mixed(tmp_path: Path) -> Path:
    """Finished requests (with timings) among never-finished ones, so the cap evicts while others finish."""
    lines = []
    for i in range(N):
        t = f"00:{i // 60 % 60:02d}:{i % 60:02d}"
        lines.append(f"(APIServer pid=1) INFO 11-30 {t} [logger.py:71] Received request cmpl-{i:06d}-0: "
                     f"prompt: '[redacted]', params: SamplingParams(max_tokens=16), prompt_token_ids: [1, 2, 3], "
                     "lora_request: None.\n")
        lines.append(f"(APIServer pid=1) INFO 11-30 {t} [async_llm.py:578] Added request cmpl-{i:06d}-0.\n")
        if i % 3 == 0 and i >= 3:
            d = f"cmpl-{i - 3:06d}-0"
            lines.append(f"(APIServer pid=1) INFO 11-30 {t} [async_llm.py:420] Finished request {d}.\n")
    p = tmp_path / "mixed.log"
    p.write_text("".join(lines))
    return p


def test_evicted_numbers_equal_the_streaming_summary(tmp_path: Path, small_cap) -> None:
    """Counting instead of keeping changes no number: ``analyze``'s (kept journeys + evicted counts) equal the
    streaming summary's (every journey folded as it completed), evictions included."""
    from vllmlog.numbers import compute
    from vllmlog.summary import summarize_paths

    log = str(_mixed(tmp_path))
    run = load(log)
    assert run.journeys_evicted > 0 and len(run.journeys) < N
    n = compute(run)
    s = summarize_paths(log)
    assert n["requests"]["evicted"] == s["requests"]["evicted"] == run.journeys_evicted
    for k in ("requests", "latency", "tokens", "time_to_abort_s", "slo"):
        assert n[k] == s[k], k
    assert n["requests"]["total"] == N and n["requests"]["by_status"]["unfinished"] >= run.journeys_evicted
    assert n["latency"]["e2e_s"]["count"] == n["requests"]["by_status"]["success"] > 0


@pytest.mark.parametrize("cmd", [["analyze", "--no-html"], ["analyze", "--no-html", "--json"], ["summary"],
                                 ["summary", "--json"], ["diagnose"], ["analyze", "-o", "{html}"], ["requests"],
                                 ["requests", "--json"]],
                         ids=["analyze", "analyze-json", "summary", "summary-json", "diagnose", "analyze-html", "requests",
                              "requests-json"])
def test_every_output_says_how_many_were_evicted(tmp_path: Path, small_cap, cmd: list[str], capfd, monkeypatch) -> None:
    import html as _html
    import json

    from vllmlog.cli import main

    monkeypatch.setenv("COLUMNS", "250")
    out_html = tmp_path / "r.html"
    args = [c.replace("{html}", str(out_html)) for c in cmd]
    rc = main(args + [str(_unfinished(tmp_path))])
    out, err = capfd.readouterr()
    if cmd[0] == "requests":  # the table lists the kept requests and says the others are not listed
        assert rc == 0, err[-2000:]
        note = f"{N - CAP:,} never-finished requests were evicted from memory (the in-flight limit) and are not listed"
        if "--json" in cmd:
            assert len(json.loads(out)) == CAP and note in " ".join(err.split())
        else:
            assert note in " ".join(out.split())
        return
    assert rc in (1, 3), (rc, err[-2000:])
    said = f"{N:,} requests never finished; {N - CAP:,} evicted from memory"
    if "--json" in cmd:
        d = json.loads(out)
        req = d["numbers"]["requests"] if cmd[0] == "analyze" else d["requests"]
        assert req["evicted"] == N - CAP and req["by_status"]["unfinished"] == N
        if cmd[0] == "analyze":
            assert d["red_use"]["requests"]["evicted"] == N - CAP
        assert any(g["code"] == "requests_evicted" for g in d["coverage"]["gaps"])
    elif out_html.exists():
        assert said in _html.unescape(out_html.read_text())
    else:
        assert said in " ".join((out + err).split()), out[-3000:]
        assert "their timings are not in the percentiles" in " ".join((out + err).split())
