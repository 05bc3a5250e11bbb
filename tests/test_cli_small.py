"""The small things users hit at once: --version, analyze --config, -o -, scrape --file a b, requests
--format csv to stdout, an unknown --vllm-version refused, plurals, no 'exit code None'."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from vllmlog.analyze import example_path
from vllmlog.cli import main
from vllmlog.rules._util import exit_code_text

from .conftest import CORPUS, DATA

HB = str(DATA / "journeys" / "handbook-small.log")
FAULTS = CORPUS / "vllm-cpu-faults"


def test_version(capsys) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    import vllmlog

    assert out.startswith(f"vllmlog {vllmlog.__version__} (Python ")


def test_analyze_config_changes_thresholds(tmp_path: Path, capsys) -> None:
    log = example_path("kv-pressure")
    assert main(["analyze", log, "--json", "--no-html"]) == 0
    before = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "K202" in before
    cfg = tmp_path / "t.toml"
    cfg.write_text('[rules]\ndisable = ["K202"]\n')
    assert main(["analyze", log, "--json", "--no-html", "--config", str(cfg)]) == 0
    after = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert "K202" not in after
    assert main(["analyze", log, "--no-html", "--config", str(tmp_path / "nope.toml")]) == 2


def test_dash_o_writes_to_stdout() -> None:
    r = subprocess.run([sys.executable, "-m", "vllmlog", "analyze", "--example", "healthy", "-o", "-"],
                       capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.lstrip().lower().startswith(b"<!doctype html") and b"</html>" in r.stdout[-200:]
    assert b"HEALTHY" in r.stderr or b"INCOMPLETE" in r.stderr  # the text summary went to stderr
    r = subprocess.run([sys.executable, "-m", "vllmlog", "requests", HB, "--year", "2026", "-o", "-"],
                       capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith(b"request_id,")


def test_requests_format_without_output_prints(capsys) -> None:
    assert main(["requests", HB, "--year", "2026", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("request_id,") and len(lines) == 9
    assert main(["requests", HB, "--year", "2026", "--format", "jsonl"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 8
    assert main(["requests", HB, "--year", "2026", "--format", "parquet"]) == 2
    assert "needs a file" in capsys.readouterr().err


def test_scrape_file_takes_several_files(capsys) -> None:
    files = [str(DATA / "metrics" / f"P2-metrics-{i}.prom") for i in (5, 6, 7)]
    main(["scrape", "--file", *files, "--json", "--fail-on", "critical"])
    one = json.loads(capsys.readouterr().out)
    main(["scrape", *[x for f in files for x in ("--file", f)], "--json", "--fail-on", "critical"])
    rep = json.loads(capsys.readouterr().out)
    assert one == rep and len(one) == 1


def test_unknown_vllm_release_is_refused(capsys) -> None:
    assert main(["alerts", "--vllm-version", "9.9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: vLLM 9.9 is not a release vllmlog knows") and "hint:" in err
    assert main(["dashboard", "--vllm-version", "0.99"]) == 2
    capsys.readouterr()
    assert main(["alerts", "--vllm-version", "0.10"]) == 0


def test_no_exit_code_none_and_plurals(capsys) -> None:
    assert exit_code_text(None) == "no exit code" and exit_code_text("None") == "no exit code"
    assert exit_code_text(-9) == "exit code -9"
    for log in sorted(CORPUS.glob("*/*.log")):
        main(["diagnose", str(log), "--year", "2026", "--fail-on", "never"])
        out = capsys.readouterr().out
        assert "exit code None" not in out and " 1 findings" not in out and "1 files" not in out, log.name
        assert "vLLM ?" not in out


def test_server_blocks_name_their_file_in_a_multi_file_analyze(capsys) -> None:
    a, b = example_path("healthy"), example_path("kv-pressure")
    main(["analyze", a, b, "--no-html"])
    out = capsys.readouterr().out
    assert "server 0 (healthy.log): vLLM 0.32.0" in out and "server 0 (kv-pressure.log): vLLM 0.32.0" in out


def test_every_runtime_import_is_a_declared_dependency() -> None:
    """A runtime import is a runtime dependency: every module ``src/vllmlog`` imports is the standard library,
    vllmlog itself, or a package in pyproject's ``dependencies`` (numpy, duckdb … are test extras only).
    CI's plain-install smoke run (.ci/smoke_plain_install.py) checks the same by running the commands."""
    import ast
    import re

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    root = Path(__file__).resolve().parent.parent
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=;\[ ]", d, 1)[0].strip().lower().replace("-", "_") for d in deps}
    provides = {"prometheus_client": "prometheus_client", "opentelemetry_proto": "opentelemetry", "protobuf": "google",
                "tomli": "tomli"}
    allowed = {provides.get(n, n) for n in names} | {"vllmlog"} | set(sys.stdlib_module_names)
    # an optional feature's extra (not the test extra): `pip install 'vllmlog[ray]'` brings `ray`
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"].get("optional-dependencies", {})
    allowed |= {re.split(r"[<>=;\[ ]", d, 1)[0].strip().lower().replace("-", "_")
                for name, ds in extras.items() if name != "test" for d in ds}
    bad = []
    for py in (root / "src" / "vllmlog").rglob("*.py"):
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods = [node.module]
            else:
                continue
            bad += [f"{py.relative_to(root)}: {m}" for m in mods if m.split(".")[0] not in allowed]
    assert not bad, bad
