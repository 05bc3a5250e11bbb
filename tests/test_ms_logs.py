"""Millisecond logs without tracing: every envelope's fractional seconds reach the timestamp, and the
`vllmlog logging-config --format text` output (a dated, millisecond prefix) is parsed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from vllmlog.export.logging_config import build_logging_config
from vllmlog.reader import parse
from vllmlog.run import load

from .test_traces import T1

_ENV = re.compile(r"^((?:\([^()]*pid=\d+[^()]*\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) )(\d\d)-(\d\d) (\d\d:\d\d:\d\d)( \[)")


def _ms(prefix: str) -> int:
    """Milliseconds for a line: the same for every line of one record (vLLM prefixes each line of a
    multi-line message with the record's own time), different between records."""
    return sum(ord(c) * (i + 1) for i, c in enumerate(prefix)) % 1000


def _prefix(m: re.Match[str], rest: str) -> str:
    return m[0] + rest.split("]", 1)[0]


def _dated(text: str, sep: str = ".", year: bool = True) -> str:
    out = []
    for line in text.split("\n"):
        m = _ENV.match(line)
        if m:
            date = f"2026-{m[2]}-{m[3]}T" if year else f"{m[2]}-{m[3]} "
            rest = line[m.end():]
            line = f"{m[1]}{date}{m[4]}{sep}{_ms(_prefix(m, rest)):03d}{m[5]}{rest}"
        out.append(line)
    return "\n".join(out)


@pytest.mark.parametrize("sep,year", [(".", True), (",", False), (".", False)], ids=["iso-ms", "comma-ms", "dot-ms"])
def test_fractions_kept_and_nothing_else_changes(tmp_path: Path, sep: str, year: bool) -> None:
    """Metamorphic: a real vLLM 0.32 log re-stamped with milliseconds parses to the same events, each
    timestamp exactly the original plus its milliseconds."""
    src = T1[0].read_bytes().decode()  # keep the banner's \r\n line ends
    p = tmp_path / "ms.log"
    p.write_bytes(_dated(src, sep, year).encode())
    old = list(parse(str(T1[0]), year=2026))
    new = list(parse(str(p), year=2025))  # the dated prefix states the year itself
    assert [(e.kind, e.line, e.line_end, e.request_id, e.process, e.source) for e in old] == \
        [(e.kind, e.line, e.line_end, e.request_id, e.process, e.source) for e in new]
    lines = p.read_bytes().decode().split("\n")
    orig = src.split("\n")
    stamped = 0
    for a, b in zip(old, new):
        m = _ENV.match(orig[a.line - 1])
        if m and not b.ts_inherited:
            want = a.ts + timedelta(milliseconds=_ms(_prefix(m, orig[a.line - 1][m.end():])))
            if year:
                assert b.ts == want, (a.line, lines[a.line - 1][:60])
            else:
                assert b.ts == want.replace(year=2025)
            stamped += 1
    assert stamped > 200
    run = load(str(p), year=2026)
    assert {j.ts_resolution_s for j in run.journeys} == {0.001}


def test_logging_config_text_output_is_parsed(tmp_path: Path) -> None:
    """Log through the generated dictConfig (stdlib only) and read the lines back with their milliseconds."""
    cfg = build_logging_config(fmt="text", request_ids=False, stream="ext://sys.stderr")
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    script = ("import json,logging,logging.config,sys,time;logging.config.dictConfig(json.load(open(sys.argv[1])));"
              "lg=logging.getLogger('vllm.entrypoints.logger');"
              "lg.info('Received request cmpl-abc-0: params: SamplingParams(n=1), prompt_token_ids: None.');"
              "time.sleep(0.25);"
              "logging.getLogger('vllm.v1.engine.async_llm').info('Added request cmpl-abc-0-1a2b3c4d.');"
              "print(repr(time.time()), file=sys.stdout)")
    res = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    log = tmp_path / "vllm.log"
    log.write_text(res.stderr)
    evs = [e for e in parse(str(log)) if e.kind != "blank"]
    assert [e.kind for e in evs] == ["request_received", "request_added"]
    assert all(e.ts is not None and not e.ts_inherited for e in evs)
    gap = (evs[1].ts - evs[0].ts).total_seconds()
    assert 0.2 <= gap < 1.0 and (evs[0].ts.microsecond or evs[1].ts.microsecond)
    assert evs[0].ts.year >= 2024 and evs[0].source.endswith(":1")


def test_kubectl_timestamps_give_the_fraction(tmp_path: Path) -> None:
    p = tmp_path / "k.log"
    p.write_text("2026-12-01T18:31:27.123456789Z (APIServer pid=1) INFO 12-01 18:31:27 [async_llm.py:578] "
                 "Added request cmpl-x-0-1a2b3c4d.\n"
                 "2026-12-01T18:31:28.000100Z (APIServer pid=1) INFO 12-01 18:31:27 [async_llm.py:578] "
                 "Added request cmpl-y-0-1a2b3c4d.\n")
    a, b = parse(str(p), year=2026)
    assert a.ts.microsecond == 123456
    assert b.ts.microsecond == 0 and b.ts.second == 27  # the wrapper's stamp is the next second: not used


def test_cpp_and_journal_prefixes() -> None:
    from vllmlog.parsing.parser import LineParser

    lp = LineParser("x", 2026)
    evs = lp.feed([(1, "[W1201 18:30:49.312630007 utils.cpp:68] Warning: NUMA binding"),
                   (2, "Dec 01 18:30:50.250000 host vllm[2211]: (APIServer pid=1) INFO 12-01 18:30:50 [x.py:1] hi")])
    evs += lp.close()
    assert evs[0].ts.microsecond == 312630
    assert evs[1].process == "APIServer pid=1" and evs[1].source == "x.py:1"
