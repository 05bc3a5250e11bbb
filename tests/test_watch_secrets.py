"""Issue 15: secrets never reach stderr. Webhook / Alertmanager URLs are printed with credentials, secret
query values and opaque path tokens masked; a receiver's 4xx body is not echoed (it may quote secrets)."""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

from vllmlog.cli import main
from vllmlog.live.notify import WebhookNotifier, mask_url

SECRETS = ("pw0rdX", "QTOKENX", "BODYSECRETX", "abcdefghijklmnopqrstuX")


class _Reject(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"error": "bad token BODYSECRETX"}'
        self.send_response(401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a) -> None:
        pass


def test_mask_url() -> None:
    m = mask_url("https://bob:pw0rdX@hooks.example.com:8443/services/T01/abcdefghijklmnopqrstuX?token=QTOKENX&x=1")
    assert not any(s in m for s in SECRETS) and m.startswith("https://***@hooks.example.com:8443/services/T01/") and "x=1" in m


def test_rejection_logs_no_secret(caplog) -> None:
    srv = HTTPServer(("127.0.0.1", 0), _Reject)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://bob:pw0rdX@127.0.0.1:{srv.server_port}/hook/abcdefghijklmnopqrstuX?token=QTOKENX"
    n = WebhookNotifier(url, retries=0)
    try:
        with caplog.at_level(logging.INFO):
            n._deliver(n.url, b"{}", {})
        assert n.counts["rejected"] == 1
        text = "\n".join(r.getMessage() for r in caplog.records)
        assert "401" in text and not any(s in text for s in SECRETS), text
    finally:
        n.close(1)
        srv.shutdown()


def test_bad_url_error_is_masked(capfd, tmp_path) -> None:
    log = tmp_path / "x.log"
    log.write_text("")
    assert main(["watch", str(log), "--webhook", "ftp://bob:pw0rdX@h/x?token=QTOKENX", "--listen", "127.0.0.1:0"]) == 2
    err = capfd.readouterr().err
    assert "error:" in err and not any(s in err for s in SECRETS), err


def test_watch_stderr_never_shows_a_secret(tmp_path) -> None:
    """The whole CLI, verbose, alerting a real crash to a webhook that answers 401 with a secret in its body and
    to an Alertmanager URL nothing listens on: stderr names both notifiers and their failures, no secret."""
    import socket
    import subprocess
    import sys

    from .conftest import CORPUS

    srv = HTTPServer(("127.0.0.1", 0), _Reject)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]  # nothing listens here once the socket is closed
    secret_tail = "/abcdefghijklmnopqrstuX?token=QTOKENX"
    hook = f"http://bob:pw0rdX@127.0.0.1:{srv.server_port}/hook{secret_tail}"
    am = f"http://bob:pw0rdX@127.0.0.1:{closed}/am{secret_tail}"
    log = CORPUS / "vllm-cpu-faults" / "P1-engine-dead-kill9.log"
    try:
        r = subprocess.run([sys.executable, "-m", "vllmlog", "watch", str(log), "--listen", "off", "--exit-at-eof", "-v",
                            "--no-stdout", "--webhook", hook, "--alertmanager", am],
                           capture_output=True, text=True, timeout=120)
    finally:
        srv.shutdown()
    err = r.stderr
    assert r.returncode == 0, err[-3000:]
    assert "401" in err and f"127.0.0.1:{closed}" in err, err[-3000:]  # both failures are reported …
    assert not any(s in err for s in SECRETS), err  # … with every secret masked
