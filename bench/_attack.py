"""Helpers shared by the ``bench/attack_*.py`` scripts (issue 15's judged attacks): run the installed CLI, start
``watch`` and scrape its ``/metrics``. Loopback only; every wait is bounded."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable


def cli(*args: str, stdin: bytes | None = None, env: dict | None = None, timeout: float = 600) -> tuple[int, bytes, bytes]:
    """``python -m vllmlog ARGS`` with this interpreter (the venv the package was installed into)."""
    with tempfile.TemporaryDirectory() as cwd:  # default outputs (vllmlog-report.html, vllmlog-fleet/) land there
        r = subprocess.run([sys.executable, "-m", "vllmlog", *args], input=stdin, capture_output=True, timeout=timeout,
                           env={**os.environ, "COLUMNS": "200", **(env or {})}, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int, timeout: float = 10) -> dict[str, float] | None:
    """Sum of each family's samples (labels dropped), or None when the exporter does not answer."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    except OSError:
        return None
    if b" 200 " not in data[:16]:
        return None
    out: dict[str, float] = {}
    for ln in data.decode("utf-8", "replace").split("\n"):
        if ln and not ln.startswith("#") and " " in ln:
            key, _, val = ln.rpartition(" ")
            name = key.split("{")[0]
            try:
                v = float(val)
            except ValueError:
                continue
            out[name] = out.get(name, 0.0) + v
            if "{" in key:
                out[key] = v  # the labelled sample too
    return out


def start_watch(log: Path, *extra: str, stdout=subprocess.DEVNULL, stderr=None) -> tuple[subprocess.Popen, int]:
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "vllmlog", "watch", str(log), "--listen", f"127.0.0.1:{port}", *extra],
                         stdout=stdout, stderr=stderr if stderr is not None else subprocess.PIPE,
                         env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"})
    wait(lambda: scrape(port, 1) is not None or p.poll() is not None, 60, "watch answers")
    if p.poll() is not None:
        raise SystemExit(f"watch exited {p.returncode}: {p.stderr.read().decode()[-2000:] if p.stderr else ''}")
    return p, port


def stop(p: subprocess.Popen) -> tuple[bytes, bytes]:
    p.terminate()
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return out or b"", err or b""


def wait(cond: Callable[[], bool], seconds: float, what: str) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    print(f"  (timed out waiting for {what})", flush=True)
    return False
