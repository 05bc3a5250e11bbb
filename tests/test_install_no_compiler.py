"""``pip install .`` on a machine without a C compiler still installs a working vllmlog (the pure-Python parser),
and it writes the same events as the compiled path this checkout runs (``test_fast_path.test_extension_is_built``
checks that the compiled path is the one that runs when a compiler is there)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CORPUS

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_install_without_a_compiler_runs_pure_python(tmp_path: Path) -> None:
    target = tmp_path / "site"
    src = tmp_path / "src"
    # the sources as a clean checkout has them (not the extension `pip install -e` built in place)
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", "*.so", "build", "*.egg-info", "__pycache__", "data",
                                                             ".hypothesis", ".pytest_cache"))
    env = {**os.environ, "CC": "false", "CXX": "false", "LDSHARED": "false"}  # every compiler invocation fails
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(src)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (target / "vllmlog" / "parsing" / "fast.py").exists()
    assert not list((target / "vllmlog").glob("_speedups*.so")), "an extension was built with CC=false?"
    log = CORPUS / "vllm-cpu" / "04-client-aborts.log"
    penv = {k: v for k, v in os.environ.items() if k != "VLLMLOG_PURE"}
    penv["PYTHONPATH"] = str(target)
    probe = subprocess.run([sys.executable, "-c", "import vllmlog, vllmlog.parsing.fast as f; print(vllmlog.__file__, f.AVAILABLE)"],
                           env=penv, capture_output=True, text=True, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    where, available = probe.stdout.split()
    assert where.startswith(str(target)) and available == "False"
    pure = subprocess.run([sys.executable, "-m", "vllmlog", "parse", "--year", "2026", "-j", "1", str(log)],
                          env=penv, capture_output=True, cwd=tmp_path)
    assert pure.returncode == 0, pure.stderr.decode()[-2000:]
    here = {k: v for k, v in os.environ.items() if k not in ("VLLMLOG_PURE", "PYTHONPATH")}
    compiled = subprocess.run([sys.executable, "-m", "vllmlog", "parse", "--year", "2026", "-j", "1", str(log)],
                              env=here, capture_output=True, cwd=REPO)
    assert compiled.returncode == 0
    assert pure.stdout == compiled.stdout and pure.stdout.count(b"\n") > 100
