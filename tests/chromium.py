"""A headless Chromium driven over the DevTools protocol, for the HTML tests and bench/bench_html.py.

Debian's chromium with the flags the project uses everywhere (headless, no sandbox, no GPU, no
background networking, no component updates, no sync, no first-run, a fresh profile directory);
loopback only: it loads ``file://`` pages and talks to its own DevTools port on 127.0.0.1.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

WIDTH = 1400
"""CSS pixels: the width the report is reviewed at."""
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic", "--disable-extensions", "--mute-audio"]


class Chromium:
    """A headless Chromium driven over the DevTools protocol (one browser, one tab per page)."""

    def __init__(self, exe: str, profile: Path) -> None:
        import websocket  # websocket-client (test extra)

        self.proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--window-size={WIDTH},1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port, path = port_file.read_text().split("\n")[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=60, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        i = next(self.ids)
        msg: dict[str, Any] = {"id": i, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == i:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name: str, session: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for m in self.events:
            if m.get("method") == name and m.get("sessionId") == session:
                return m
        while time.monotonic() < deadline:
            m = json.loads(self.ws.recv())
            self.events.append(m)
            if m.get("method") == name and m.get("sessionId") == session:
                return m
        raise TimeoutError(name)

    def open(self, url: str) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for dom in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{dom}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": WIDTH, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session, timeout=60)
        return Page(self, session, target)

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Page:
    def __init__(self, browser: Chromium, session: str, target: str = "") -> None:
        self.b = browser
        self.session = session
        self.target = target

    def close(self) -> None:
        """Close this tab."""
        self.b.send("Target.closeTarget", {"targetId": self.target})

    def eval(self, expr: str) -> Any:
        r = self.b.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True},
                        session=self.session)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"])
        return r["result"].get("value")

    def wait_for(self, expr: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.1)
        raise TimeoutError(expr)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries of this page."""
        out = []
        for m in self.b.events:
            if m.get("sessionId") != self.session:
                continue
            p = m.get("params", {})
            if m.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m.get("method") == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails"))[:500])
            elif m.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def requests(self) -> list[str]:
        """URLs this page fetched (a self-contained report fetches nothing but itself)."""
        return [m["params"]["request"]["url"] for m in self.b.events
                if m.get("sessionId") == self.session and m.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path: Path, selector: str | None = None) -> None:
        """A PNG of the page (or of one element) at ``WIDTH`` CSS pixels."""
        self.b.send("Emulation.setDeviceMetricsOverride",
                    {"width": WIDTH, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session=self.session)
        time.sleep(0.5)  # charts re-layout on resize
        h = self.eval("Math.min(document.documentElement.scrollHeight, 16000)")
        if not selector:  # the whole page in the viewport, so content-visibility renders every box
            self.b.send("Emulation.setDeviceMetricsOverride",
                        {"width": WIDTH, "height": int(h), "deviceScaleFactor": 1, "mobile": False}, session=self.session)
            time.sleep(0.5)
            h = self.eval("Math.min(document.documentElement.scrollHeight, 16000)")
        if selector:
            x, y, w, hh = self.eval(f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                                    ".getBoundingClientRect(); return [r.left, r.top + window.scrollY, r.width, r.height]; })()")
        else:
            x, y, w, hh = 0, 0, WIDTH, h
        data = self.b.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                      "clip": {"x": x, "y": y, "width": w, "height": hh, "scale": 1}},
                           session=self.session)["data"]
        path.write_bytes(base64.b64decode(data))
        keep = os.environ.get("VLLMLOG_TEST_ARTIFACTS")  # CI can upload the screenshots from here
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            (Path(keep) / path.name).write_bytes(path.read_bytes())
