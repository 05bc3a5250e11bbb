"""What was read is part of the verdict: no input we can construct (the bad inputs of
tests/test_bad_input*.py, and lists mixing good and bad files) is called HEALTHY; an input not read in
full prints ``INCOMPLETE: <reason>`` in every output and exits 3; nothing readable at all exits 2."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllmlog.analyze import analyze, example_path
from vllmlog.cli import main
from vllmlog.coverage import EXIT_INCOMPLETE, GAP_CODES, of_run
from vllmlog.ingest import MAX_LINE
from vllmlog.run import load

GOOD = Path(example_path("healthy"))
LINE = b"INFO 03-25 10:15:%02d scheduler.py:456] Added request req_%d to waiting queue. Queue size: 1\n"


def _empty(d: Path) -> Path:
    p = d / "empty.log"
    p.write_bytes(b"")
    return p


def _bad_utf8(d: Path) -> Path:
    p = d / "bad.log"
    p.write_bytes(GOOD.read_bytes()[:20000].rsplit(b"\n", 1)[0] + b"\nINFO 03-25 10:15:23 a.py:1] req_\xff\xfe\n")
    return p


def _truncated_gz(d: Path) -> Path:
    data = gzip.compress(GOOD.read_bytes())
    p = d / "t.log.gz"
    p.write_bytes(data[: len(data) // 2])
    return p


def _huge_line(d: Path) -> Path:
    p = d / "huge.log"
    with open(p, "wb") as f:
        f.write(GOOD.read_bytes())
        f.write(b"A" * (MAX_LINE + 4096) + b"\n")
    return p


def _crlf(d: Path) -> Path:
    p = d / "crlf.log"
    p.write_bytes(b"INFO 03-25 10:15:23 a.py:1] one\r\nLoading: 10%|#  | 1/10\rLoading: 100%|###| 10/10\n"
                  b"INFO 03-25 10:15:24 a.py:1] two\r\n")
    return p


def _one_decode_line(d: Path) -> Path:
    p = d / "one.log"
    p.write_bytes(b"INFO 03-25 10:15:23 model_runner.py:312] Decode step 1 for req_001. Batch size: 8, KV cache usage: 45%\n")
    return p


INCOMPLETE_INPUTS = {"empty": (_empty, "empty"), "invalid_utf8": (_bad_utf8, "invalid_utf8"),
                     "truncated_gzip": (_truncated_gz, "truncated"), "huge_line": (_huge_line, "long_lines"),
                     "crlf_two_lines": (_crlf, "nothing_observed"), "one_decode_line": (_one_decode_line, "nothing_observed")}


def _json(argv: list[str], capsys) -> tuple[int, dict]:
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.mark.parametrize("name", sorted(INCOMPLETE_INPUTS))
def test_incomplete_input_is_never_healthy(name: str, tmp_path: Path, capsys) -> None:
    make, gap = INCOMPLETE_INPUTS[name]
    p = str(make(tmp_path))
    code, doc = _json(["analyze", p, "--year", "2026", "--json", "--no-html"], capsys)
    assert code == EXIT_INCOMPLETE and doc["verdict"] != "healthy"
    cov = doc["coverage"]
    assert cov["complete"] is False and gap in [g["code"] for g in cov["gaps"]]
    assert cov["headline"].startswith("INCOMPLETE: ")
    code, doc = _json(["diagnose", p, "--year", "2026", "--json"], capsys)
    assert code in (1, EXIT_INCOMPLETE) and doc["summary"]["verdict"] != "healthy" and not doc["coverage"]["complete"]
    code, doc = _json(["summary", p, "--year", "2026", "--json"], capsys)
    assert code == EXIT_INCOMPLETE and not doc["coverage"]["complete"]
    for cmd in (["analyze", p, "--no-html"], ["diagnose", p], ["summary", p]):
        code = main(cmd + ["--year", "2026"])
        out = capsys.readouterr().out
        assert "INCOMPLETE: " in out and "HEALTHY" not in out and "verdict: healthy" not in out, (cmd, out)
        assert code in (1, EXIT_INCOMPLETE)


def test_unreadable_file_in_a_list_is_skipped_and_reported(tmp_path: Path, capsys) -> None:
    binary = tmp_path / "x.bin"
    binary.write_bytes(bytes(range(256)) * 100)
    for bad, why in ((tmp_path / "missing.log", "no such file"), (binary, "binary"), (tmp_path, "directory")):
        code, doc = _json(["analyze", str(GOOD), str(bad), "--json", "--no-html"], capsys)
        assert code == EXIT_INCOMPLETE and doc["verdict"] == "incomplete"
        [gap] = doc["coverage"]["gaps"]
        assert gap["code"] == "unreadable" and why in gap["message"] and gap["file"] == str(bad)
        assert {i["path"]: i["status"] for i in doc["coverage"]["inputs"]} == {str(GOOD): "read", str(bad): "skipped"}
        # the good file was analyzed in full
        assert doc["numbers"]["requests"]["total"] == 50
    # nothing readable at all: a one-line error, exit 2, before any output
    for argv in (["analyze", str(binary), str(tmp_path / "missing.log")], ["summary", str(binary)],
                 ["diagnose", str(tmp_path / "missing.log")], ["analyze", str(tmp_path)]):
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("error: ")


def test_stdin_single_line_is_incomplete() -> None:
    r = subprocess.run([sys.executable, "-m", "vllmlog", "analyze", "-", "--no-html", "--json"], capture_output=True,
                       input=b"INFO 03-25 10:15:23 model_runner.py:312] Decode step 1 for req_001. Batch size: 8, "
                             b"KV cache usage: 45%\n", timeout=120)
    assert r.returncode == EXIT_INCOMPLETE, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "incomplete" and doc["coverage"]["inputs"][0]["path"] == "-"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=2000))
def test_random_bytes_never_healthy(tmp_path_factory, data: bytes) -> None:
    p = tmp_path_factory.mktemp("r") / "r.log"
    p.write_bytes(data)
    try:
        a = analyze([str(p)], year=2026)
    except Exception as exc:  # binary content is an input error (exit 2), never a crash
        from vllmlog.errors import InputError

        assert isinstance(exc, InputError)
        return
    assert a.verdict != "healthy"


def test_complete_inputs_stay_complete() -> None:
    a = analyze([str(GOOD)])
    assert a.coverage.complete and a.verdict == "healthy" and a.to_dict()["coverage"]["headline"] == "complete"
    assert [i.status for i in a.coverage.inputs] == ["read"]


def test_memory_bounds_are_gaps() -> None:
    run = load(str(GOOD))
    run.notable_dropped, run.journeys_evicted = 7, 3
    run.series.dropped = 2
    cov = of_run(run)
    assert [g.code for g in cov.gaps] == ["events_dropped", "series_dropped", "requests_evicted"]
    assert all(g.code in GAP_CODES for g in cov.gaps) and not cov.complete
    assert cov.headline().endswith("(+2 more)")


def test_exit_codes_are_documented_in_help(capsys) -> None:
    for cmd in ("analyze", "diagnose", "summary"):
        with pytest.raises(SystemExit):
            from vllmlog.cli import app, load_commands

            load_commands([cmd])
            app([cmd, "--help"], prog_name="vllmlog")
        out = " ".join(capsys.readouterr().out.split())
        assert f"{EXIT_INCOMPLETE} the input was not read in full" in out, cmd
        assert "2 usage error or nothing readable" in out
