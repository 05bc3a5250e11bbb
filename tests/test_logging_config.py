"""logging-config (dictConfig for VLLM_LOGGING_CONFIG_PATH) and the lnav format."""

from __future__ import annotations

import json
import logging
import logging.config
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllmlog.cli import main
from vllmlog.errors import ConfigError
from vllmlog.export.lnav import JSON_FORMAT, TEXT_FORMAT, build_lnav_format
from vllmlog.export.logging_config import RequestIdFilter, build_logging_config

CORPUS_07A = Path(__file__).parent / "data" / "metrics" / "07a-logging-config.json"  # real, made vLLM 0.32 log JSON


def test_json_config_shape() -> None:
    cfg = build_logging_config()
    assert cfg["version"] == 1 and cfg["disable_existing_loggers"] is False
    fmt = cfg["formatters"]["vllmlog"]
    assert fmt["()"] == "pythonjsonlogger.json.JsonFormatter"
    for field in ("asctime", "levelname", "name", "process", "message", "filename", "lineno"):
        assert f"%({field})s" in fmt["fmt"]
    assert set(cfg["loggers"]) >= {"vllm", "uvicorn.access"}
    assert all(lg["propagate"] is False for lg in cfg["loggers"].values())
    assert build_logging_config(formatter_class="legacy")["formatters"]["vllmlog"]["()"] == \
        "pythonjsonlogger.jsonlogger.JsonFormatter"
    with pytest.raises(ConfigError):
        build_logging_config(fmt="xml")


def test_text_config_loads_and_dates_lines(tmp_path: Path) -> None:
    """The text variant needs nothing but the stdlib: load it and log through it."""
    cfg = build_logging_config(fmt="text", request_ids=True, stream="ext://sys.stderr")
    script = ("import json,logging,logging.config,sys;cfg=json.load(open(sys.argv[1]));"
              "logging.config.dictConfig(cfg);"
              "logging.getLogger('vllm.v1.engine.async_llm').info('Added request cmpl-abc-0-1a2b3c4d.')")
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    res = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    line = res.stderr.strip()
    assert line.startswith("INFO 20") and "[<string>:1] cmpl-abc-0-1a2b3c4d Added request" in line


def test_json_config_emits_json(tmp_path: Path) -> None:
    """With python-json-logger installed (vLLM 0.32+ bundles it), records come out as JSON with request ids."""
    pytest.importorskip("pythonjsonlogger")
    cfg = build_logging_config(request_ids=True)
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    script = ("import json,logging,logging.config,sys;logging.config.dictConfig(json.load(open(sys.argv[1])));"
              "logging.getLogger('vllm.entrypoints.logger').info('Received request chatcmpl-x-1: params: n=1');"
              "logging.getLogger('uvicorn.access').info('%s - \"%s %s HTTP/%s\" %d', '127.0.0.1:1', 'GET', "
              "'/health', '1.1', 200)")
    res = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    recs = [json.loads(x) for x in res.stdout.splitlines()]
    assert recs[0]["levelname"] == "INFO" and recs[0]["request_id"] == "chatcmpl-x-1"
    assert recs[0]["name"] == "vllm.entrypoints.logger" and "," in recs[0]["asctime"]
    assert recs[1]["message"].startswith("127.0.0.1:1")


def test_log_file_handler_writes_clean_lines(tmp_path: Path) -> None:
    cfg = build_logging_config(fmt="text", log_file=str(tmp_path / "vllm.log"))
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(cfg))
    script = ("import json,logging.config,sys;logging.config.dictConfig(json.load(open(sys.argv[1])));"
              "import logging;logging.getLogger('vllm.x').warning('hello')")
    res = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout == ""
    assert (tmp_path / "vllm.log").read_text().startswith("WARNING 20")


def test_request_id_filter() -> None:
    f = RequestIdFilter()
    for msg, rid in (("Received request cmpl-c-0001-ab12cd34-0: params: SamplingParams(n=1)", "cmpl-c-0001-ab12cd34-0"),
                     ("Added request cmpl-c-0001-ab12cd34-0-1a2b3c4d.", "cmpl-c-0001-ab12cd34-0-1a2b3c4d"),
                     ("Aborted request(s) cmpl-x-0-1a2b3c4d.", "cmpl-x-0-1a2b3c4d"),
                     ("Avg prompt throughput: 1.0 tokens/s", None),
                     ("request logging is disabled", None)):
        rec = logging.LogRecord("vllm", logging.INFO, "x.py", 1, msg, None, None)
        assert f.filter(rec) and rec.request_id == rid


def test_logging_config_cli(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    assert main(["logging-config", "--format", "json", "-o", str(out)]) == 0
    cfg = json.loads(out.read_text())
    logging.config.valid_ident("vllmlog")  # sanity: names used are identifiers
    # same formatter family as the real config that made vLLM 0.32 log JSON in the corpus
    real = json.loads(CORPUS_07A.read_text())
    assert real["formatters"]["json"]["()"] == cfg["formatters"]["vllmlog"]["()"]
    assert main(["logging-config", "--level", "LOUD"]) == 2


# --- lnav --------------------------------------------------------------------------------------------

LNAV = shutil.which("lnav")
LOG_V1 = Path(__file__).parent / "data" / "metrics" / "lnav-sample-v032.log"


def lnav_bin() -> str:
    if LNAV is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("lnav is required in CI (apt-get install lnav)")
        pytest.skip("lnav not installed")
    return LNAV


def _lnav(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "TERM": "dumb"}
    return subprocess.run([lnav_bin(), *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def lnav_home(tmp_path: Path) -> Path:
    fmt = tmp_path / "vllm.json"
    assert main(["lnav-format", "-o", str(fmt)]) == 0
    res = _lnav(tmp_path, "-i", str(fmt))
    assert res.returncode == 0, res.stdout + res.stderr
    return tmp_path


def test_lnav_format_document() -> None:
    d = build_lnav_format()
    assert TEXT_FORMAT in d and JSON_FORMAT in d
    assert d[TEXT_FORMAT]["timestamp-format"] == ["%m-%d %H:%M:%S"]


def test_lnav_recognises_real_v1_log(lnav_home: Path) -> None:
    res = _lnav(lnav_home, "-n", "-c", ";SELECT proc, log_level, count(*) AS n FROM vllm_log GROUP BY proc, log_level",
                str(LOG_V1))
    assert res.returncode == 0, res.stderr
    rows = {tuple(line.split()[:2]): int(line.split()[2]) for line in res.stdout.splitlines()[1:] if line.strip()}
    assert rows[("APIServer", "info")] > 10 and ("EngineCore", "info") in rows


def test_lnav_recognises_v0_lines(lnav_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "v0.log"
    log.write_text("INFO 03-25 10:15:23 llm_engine.py:706] Avg prompt throughput: 0.0 tokens/s, Running: 1 reqs\n"
                   "WARNING 03-25 10:15:24 scheduler.py:1057] Sequence group 3 is preempted by "
                   "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.\n"
                   "INFO:     127.0.0.1:5555 - \"GET /health HTTP/1.1\" 200 OK\n"
                   "\x1b[1;36m(VllmWorkerProcess pid=912)\x1b[0;0m INFO 03-25 10:15:25 worker.py:12] ready\n")
    res = _lnav(lnav_home, "-n", "-c", ";SELECT log_level, src_file, src_line, proc FROM vllm_log", str(log))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()[1:]
    assert len(lines) == 3
    assert lines[0].split()[:3] == ["info", "llm_engine.py", "706"]
    assert lines[1].split()[:3] == ["warning", "scheduler.py", "1057"]
    assert "VllmWorkerProcess" in lines[2]


def test_lnav_recognises_json_log(lnav_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "j.log"
    log.write_text("\n".join(json.dumps({"asctime": f"2026-11-30 03:08:3{i},608", "levelname": lvl,
                                         "name": "vllm.x", "processName": "MainProcess", "process": 1447,
                                         "message": f"m{i}", "vllm_process_name": "APIServer"})
                             for i, lvl in enumerate(("INFO", "WARNING", "ERROR"))) + "\n")
    res = _lnav(lnav_home, "-n", "-c", f";SELECT log_level, count(*) FROM {JSON_FORMAT} GROUP BY log_level", str(log))
    assert res.returncode == 0, res.stderr
    assert {line.split()[0] for line in res.stdout.splitlines()[1:] if line.strip()} == {"info", "warning", "error"}
