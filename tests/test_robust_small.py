"""Issue 15, also: write errors and a bad --listen are one-line errors (exit 2), a leading NUL run (what a
copytruncate leaves) is not 'binary', VLLMLOG_PURE=0 means off, the library accepts pathlib.Path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import vllmlog
from vllmlog.analyze import analyze

from .conftest import CORPUS

LIGHT = CORPUS / "vllm-cpu" / "01-startup-and-light-load.log"


def _run(args: list[str], stdout=subprocess.PIPE, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vllmlog", *args], stdout=stdout, stderr=subprocess.PIPE,
                          env={**os.environ, **(env or {})}, timeout=300)


@pytest.mark.parametrize("args", [["parse", str(LIGHT), "-o", "/nonexistent/x"], ["export", str(LIGHT), "-o", "/nonexistent/x"],
                                  ["requests", str(LIGHT), "-o", "/nonexistent/x.csv"],
                                  ["summary", str(LIGHT), "--json", "-o", "/nonexistent/x"]])
def test_unwritable_output_is_one_line(args: list[str]) -> None:
    r = _run(args)
    err = r.stderr.decode()
    assert r.returncode == 2 and "Traceback" not in err and err.startswith("error: /nonexistent/"), err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("cmd", ["parse", "summary", "export"])
def test_full_disk_is_one_line(cmd: str) -> None:
    with open("/dev/full", "wb") as full:
        r = _run([cmd, str(LIGHT)], stdout=full)
    err = r.stderr.decode()
    assert r.returncode == 2 and err == "error: cannot write the output: No space left on device\n", err


@pytest.mark.parametrize("listen", ["127.0.0.1:99999", "abc", "127.0.0.1:-1"])
def test_bad_listen_is_one_line(listen: str) -> None:
    r = _run(["watch", str(LIGHT), "--listen", listen, "--exit-at-eof"])
    err = r.stderr.decode()
    assert r.returncode == 2 and "Traceback" not in err and err.startswith("error: "), err


def test_leading_nul_run_is_not_binary(tmp_path: Path) -> None:
    p = tmp_path / "hole.log"
    p.write_bytes(b"\x00" * 10_000 + LIGHT.read_bytes())
    run = vllmlog.load(p)
    assert run.servers and run.coverage.complete is not None
    q = tmp_path / "bin.log"
    q.write_bytes(b"ELF\x00\x01\x02" * 100)
    with pytest.raises(vllmlog.InputError):
        vllmlog.load(q)


def test_vllmlog_pure_zero_means_off() -> None:
    code = "import vllmlog.parsing.fast as f; print(f.AVAILABLE, f._speedups is not None)"
    for v, want in (("0", True), ("false", True), ("", True), ("1", False), ("yes", False)):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "VLLMLOG_PURE": v})
        avail, built = out.stdout.split()
        assert avail == str(want and built == "True"), (v, out.stdout)


def test_library_accepts_pathlib() -> None:
    assert len(list(vllmlog.parse(LIGHT))) == len(list(vllmlog.parse(str(LIGHT))))
    assert vllmlog.load(LIGHT).files == [str(LIGHT)]
    assert len(analyze(LIGHT).findings) == len(analyze([str(LIGHT)]).findings)


def test_listen_port_in_use_is_one_line() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        r = _run(["watch", str(LIGHT), "--listen", f"127.0.0.1:{s.getsockname()[1]}", "--exit-at-eof"])
    err = r.stderr.decode()
    assert r.returncode == 2 and "Traceback" not in err and err.startswith("error: cannot listen on 127.0.0.1:"), err
    assert "in use" in err and len(err.strip().splitlines()) <= 2, err  # the error and its hint
