"""R603 (4xx with no reason logged) on the real vLLM 0.32 request-too-long flood (corpus P3): a length check rejects
before the engine sees a request, so the run shows no more engine-added requests than successful answers and the
inferred cause stays ``request_too_long``. The same log where every rejected request was first added to the engine
(an "Added request" line before each 400: the failure came after admission, building the response) must not be
called a length problem — the accounting, not the adjacency of lines (P3's 400s follow other requests' lines)."""

from __future__ import annotations

import re
from pathlib import Path

from vllmlog.diagnose import run_diagnosis
from vllmlog.run import load

P3 = Path(__file__).parent / "data" / "corpus" / "vllm-cpu-faults" / "P3-request-too-long-flood.log"
_TS = re.compile(r"^\(APIServer pid=(\d+)\) INFO (\d\d-\d\d \d\d:\d\d:\d\d) ")


def _r603(path: Path) -> dict:
    dg = run_diagnosis(load(str(path), year=2026))
    return next(f for f in dg.findings if f.code == "R603")


def test_length_flood_is_request_too_long() -> None:
    f = _r603(P3)
    assert f.category == "request_too_long"
    assert f.data["admitted_before_reject"] == 0


def test_rejected_after_admission_is_not_a_length_problem(tmp_path: Path) -> None:
    out, pid, ts, n = [], None, None, 0
    for line in P3.read_text().splitlines():
        m = _TS.match(line)
        if m:
            pid, ts = m.group(1), m.group(2)
        if " 400 Bad Request" in line and ts is not None:
            n += 1
            out.append(f"(APIServer pid={pid}) INFO {ts} [async_llm.py:578] Added request cmpl-rej-{n:05d}-0-{n:08x}.")
        out.append(line)
    p = tmp_path / "P3-admitted.log"
    p.write_text("\n".join(out) + "\n")
    f = _r603(p)
    assert n >= 3
    assert f.category == "bad_request_params", f.message
    assert f.data["admitted_before_reject"] >= 0.8 * f.data["rejected"]
