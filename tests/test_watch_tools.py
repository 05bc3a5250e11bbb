"""Helpers for the watch end-to-end tests: real Prometheus / Alertmanager on loopback, free ports,
polling with timeouts (no fixed sleeps). Also tests the helpers' own assumptions."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from .conftest import IN_CI, require_tool


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(cond: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``cond`` until truthy (exceptions count as not yet); fail with ``what`` after ``timeout``."""
    end = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = cond()
            if last:
                return last
        except Exception as exc:  # noqa: BLE001
            last = exc
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


def scrape_exporter(port: int) -> dict[str, float] | None:
    """Unlabelled sums of every sample of the exporter (name → value), or None if it is down."""
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)  # a loaded machine may be slow: down is refused
    except httpx.HTTPError:
        return None
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(r.text):
        for s in fam.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def alertmanager_exe() -> str:
    """Debian installs Alertmanager as ``prometheus-alertmanager``; upstream as ``alertmanager``."""
    return shutil.which("alertmanager") or require_tool("prometheus-alertmanager")


class _Proc:
    def __init__(self, argv: list[str], ready_url: str, log: Path) -> None:
        self.log = log
        self._fh = open(log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdout=self._fh, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: self._ready(ready_url), 30, f"{argv[0]} ready")
        except AssertionError:
            self.stop()
            raise AssertionError(f"{argv[0]} did not start:\n{log.read_text(errors='replace')[-3000:]}") from None

    def _ready(self, url: str) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"exited with {self.proc.returncode}: {self.log.read_text(errors='replace')[-3000:]}")
        return httpx.get(url, timeout=1).status_code == 200

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._fh.close()

    def __enter__(self):  # noqa: ANN204
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Prometheus(_Proc):
    """A real Prometheus scraping ``targets`` every second, on a free loopback port."""

    def __init__(self, workdir: Path, targets: list[str], *, extra_config: str = "") -> None:
        exe = require_tool("prometheus")
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        cfg = workdir / "prometheus.yml"
        tg = ", ".join(f"'{t}'" for t in targets)
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: vllmlog\n    honor_labels: true\n    static_configs:\n      - targets: [{tg}]\n"
            + extra_config
        )
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(
            [exe, f"--config.file={cfg}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            self.url + "/-/ready", workdir / "prometheus.out",
        )

    def query(self, q: str) -> list[dict[str, Any]]:
        """An instant PromQL query's result vector."""
        r = httpx.get(self.url + "/api/v1/query", params={"query": q}, timeout=5).json()
        assert r["status"] == "success", r
        return r["data"]["result"]

    def value(self, q: str) -> float | None:
        """The single value of a scalar-like query (None when empty)."""
        res = self.query(q)
        if not res:
            return None
        assert len(res) == 1, res
        return float(res[0]["value"][1])


class Alertmanager(_Proc):
    """A real Alertmanager on a free loopback port, clustering disabled."""

    def __init__(self, workdir: Path, *, receiver_config: str = "") -> None:
        exe = alertmanager_exe()
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        cfg = workdir / "alertmanager.yml"
        cfg.write_text(
            "route:\n  receiver: 'null'\n  group_wait: 0s\n  group_interval: 1s\n  repeat_interval: 1h\n"
            "receivers:\n  - name: 'null'\n" + receiver_config
        )
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(
            [exe, f"--config.file={cfg}", f"--storage.path={workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="],
            self.url + "/-/ready", workdir / "alertmanager.out",
        )

    def alerts(self, **filters: str) -> list[dict[str, Any]]:
        """``GET /api/v2/alerts`` (active, silenced and inhibited included)."""
        params = [("filter", f'{k}="{v}"') for k, v in filters.items()]
        return httpx.get(self.url + "/api/v2/alerts", params=params, timeout=5).json()


def test_tools_available_in_ci() -> None:
    """CI installs both; locally a missing tool skips the e2e tests (and this one)."""
    assert require_tool("prometheus")
    assert alertmanager_exe()
    assert IN_CI or True
