"""Blind batches as regression (docs/diagnosis-accuracy.md): every case of tests/data/blind/blind4–25 through the
diagnosis `vllmlog diagnose --json` prints (in process, to keep the suite fast), judged as bench/score_diagnosis.py
judges it in its lenient form — the first incident at warning or above has the
labelled (or an accepted) category; a healthy control has none. The misses still open are strict xfails naming
the mechanism that is missing, so a fix shows up as an XPASS to promote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllmlog.diagnose import run_diagnosis
from vllmlog.run import load

BLIND = Path(__file__).parent / "data" / "blind"
CASES = sorted(p for p in BLIND.glob("blind*/*.json"))

#: case → the mechanism still missing (each was a miss when its batch was scored; see docs/diagnosis-accuracy.md)
OPEN = {
    "blind7/19-v1-tp2-enforce-eager-1p5b-one-request-at-a-time-slow": "no device floor for a lone request's decode speed",
    "blind8/15-v1-proxy-client-disconnect-silent-abort": "a silent client disconnect (no abort logged)",
    "blind10/06-xpu-tp2-battlemage-pagefault-shm-hang": "one rank's device fault with the peer waiting: a hang, not a death",
    "blind10/07-ascend-pd-1m-proxy-timeout-prefill-force-freed": "a disaggregated-prefill proxy timeout not found",
    "blind11/09-verl-32b-rollout-silent-hang": "stats that shrink then stop in an SPMD rollout",
    "blind11/22-agent-proxy-readtimeout-aborts": "a proxy's read-timeout aborts named as KV pressure",
    "blind13/15-npu-multinode-ray-cgraph-timeout-first-request": "a Ray compiled-graph timeout read as a hang",
    "blind15/14-v0-llama70b-chatui-stop-button-aborts": "a chat UI's stop-button aborts at varied ages named client_abort",

    "blind17/16-healthy-chat-ui-cancels-and-404": "a chat UI's stop-button aborts at varied ages named client_abort",
    "blind24/01-ngram-spec-decode-high-concurrency-slow": "speculative decoding with low acceptance at a large batch: "
                                                          "slower than no speculation, not seen from the rates alone",
    "blind25/08-spec-decode-draft-low-acceptance-slow": "a draft model accepted a third of the time: slower than no "
                                                        "speculation, not seen from the rates alone",
    "blind25/09-trl-vllm-serve-prompt-over-max-model-len-stall": "TRL's /generate/ with one prompt over max_model_len "
                                                                 "blocks the batch; the ValueError shows only at Ctrl-C",
    "blind25/11-prodstack-router-routes-to-loading-pod-timeouts": "a router sending requests to a pod still loading: "
                                                                  "the timeouts are the router's, the pod's log shows none",
    "blind20/05-t4-phi3-hangs-after-weight-load": "a log that ends on a start-up milestone, no time after it: INCOMPLETE, "
                                                  "not a hang (nothing in the log says how long it waited)",
}


def _answer(doc: dict) -> dict | None:
    for it in doc.get("incidents") or []:
        if it.get("severity") in ("warning", "error", "critical"):
            return it
    return None


@pytest.mark.parametrize("label", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_blind_case(label: Path, request: pytest.FixtureRequest) -> None:
    key = f"{label.parent.name}/{label.stem}"
    if key in OPEN:
        request.applymarker(pytest.mark.xfail(strict=True, reason=OPEN[key]))
    d = json.loads(label.read_text())
    dg = run_diagnosis(load(str(label.with_suffix(".log")), year=2026))
    got = _answer({"incidents": [i.to_dict() for i in dg.incidents]})
    if d["category"] == "healthy":
        assert got is None, f"healthy control warned: {got['category']}: {got['headline']}"
        return
    ok = {d["category"], *(d.get("accepted_categories") or []), *(d.get("secondary_categories") or [])}
    assert got is not None, "nothing at warning or above"
    assert got["category"] in ok, f"{got['category']} (label {d['category']}): {got['headline']}"
