"""Notifiers: one JSON line per state change on a stream, Alertmanager's v2 API, a generic webhook.

Network notifiers never block the reader: ``send`` puts the message on a bounded queue (dropping
the oldest when full, counted) and a worker thread delivers it with retries and exponential
backoff. Every notifier counts its results for ``vllmlog_notifications_total``.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import logging
import os
import queue
import socket
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from typing import IO, Any, Protocol

import httpx
import orjson

from ..errors import ConfigError
from .alerts import Alert, Transition

log = logging.getLogger(__name__)
# httpx logs every request's full URL at INFO (credentials, ?token=, path secrets): not on our stderr
for _name in ("httpx", "httpcore"):
    logging.getLogger(_name).setLevel(logging.WARNING)


class Notifier(Protocol):
    """Receives alert state changes."""

    name: str
    counts: Counter[str]

    def send(self, t: Transition, context: dict[str, Any]) -> None:
        """Deliver (or queue) one state change."""

    def tick(self, firing: list[Alert], context: dict[str, Any], now: float) -> None:
        """Called every loop turn with the firing alerts (for periodic re-sends)."""

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is queued (up to ``timeout``) and stop."""


def payload(t: Transition, context: dict[str, Any]) -> dict[str, Any]:
    """The JSON body of one state change (stdout line and webhook body)."""
    return {
        "ts": datetime.now().astimezone().isoformat(timespec="milliseconds"),
        "event": "alert",
        "state": t.new,
        "previous": t.old,
        **context,
        "alert": t.alert.to_dict(),
    }


class StreamNotifier:
    """Writes one JSON line per state change to a text or binary stream (stdout by default)."""

    name = "stdout"

    def __init__(self, stream: IO[Any], *, states: tuple[str, ...] = ("pending", "firing", "resolved")) -> None:
        self.stream = stream
        self.states = states
        self.counts: Counter[str] = Counter()

    def send(self, t: Transition, context: dict[str, Any]) -> None:
        if t.new not in self.states:
            return
        line = orjson.dumps(payload(t, context), default=str) + b"\n"
        try:
            buf = getattr(self.stream, "buffer", None)  # sys.stdout: write bytes under the text layer
            if buf is not None:
                self.stream.flush()
                buf.write(line)
                buf.flush()
            elif isinstance(self.stream, io.TextIOBase):
                self.stream.write(line.decode())
                self.stream.flush()
            else:  # a binary stream
                self.stream.write(line)
                self.stream.flush()
            self.counts["sent"] += 1
        except (BrokenPipeError, ValueError, OSError):
            self.counts["failed"] += 1

    def tick(self, firing: list[Alert], context: dict[str, Any], now: float) -> None:
        pass

    def close(self, timeout: float = 5.0) -> None:
        pass


class _Worker:
    """A bounded queue and a delivery thread with retries (base of the HTTP notifiers)."""

    name = "http"

    def __init__(self, *, max_queue: int = 1000, retries: int = 5, backoff_s: float = 0.5,
                 max_backoff_s: float = 10.0, timeout_s: float = 5.0) -> None:
        self.counts: Counter[str] = Counter()
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._q: queue.Queue[tuple[str, bytes, dict[str, str]] | None] = queue.Queue(max_queue)
        self._stop = threading.Event()
        self._client = httpx.Client(timeout=timeout_s)
        self._thread = threading.Thread(target=self._run, name=f"vllmlog-notify-{self.name}", daemon=True)
        self._thread.start()

    def _enqueue(self, url: str, body: bytes, headers: dict[str, str]) -> None:
        item = (url, body, headers)
        while True:
            try:
                self._q.put_nowait(item)
                return
            except queue.Full:
                try:
                    self._q.get_nowait()
                    self.counts["dropped"] += 1
                except queue.Empty:
                    pass

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            self._deliver(*item)

    def _deliver(self, url: str, body: bytes, headers: dict[str, str]) -> None:
        delay = self.backoff_s
        shown = mask_url(url)
        for attempt in range(self.retries + 1):
            try:
                r = self._client.post(url, content=body, headers={"Content-Type": "application/json", **headers})
                if r.status_code < 300:
                    self.counts["sent"] += 1
                    return
                if 400 <= r.status_code < 500 and r.status_code not in (408, 429):
                    # the receiver's body is not echoed (it may quote our token or its own secrets): its size only
                    log.warning("%s: %s rejected the notification: HTTP %s (%d-byte body)", self.name, shown,
                                r.status_code, len(r.content))
                    self.counts["rejected"] += 1
                    return
                log.info("%s: HTTP %s from %s (attempt %d)", self.name, r.status_code, shown, attempt + 1)
            except httpx.HTTPError as exc:
                log.info("%s: %s: %s (attempt %d)", self.name, shown, type(exc).__name__, attempt + 1)
            if attempt < self.retries:
                self.counts["retried"] += 1
                if self._stop.wait(delay):
                    break
                delay = min(delay * 2, self.max_backoff_s)
        self.counts["failed"] += 1

    def close(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        try:
            self._q.put(None, timeout=max(0.01, timeout))
        except queue.Full:
            pass
        self._thread.join(max(0.0, deadline - time.monotonic()))
        self._stop.set()
        self._thread.join(1.0)
        self._client.close()

    def idle(self) -> bool:
        """Nothing queued (for tests)."""
        return self._q.unfinished_tasks == 0 or self._q.empty()


class AlertmanagerNotifier(_Worker):
    """Posts alerts to Alertmanager's ``/api/v2/alerts``; re-sends firing alerts every ``resend_s``."""

    name = "alertmanager"

    def __init__(self, url: str, *, resend_s: float = 60.0, generator_url: str = "", **kw: Any) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"--alertmanager {mask_url(url)!r}: expected an http(s) URL", hint="e.g. http://127.0.0.1:9093")
        self.url = url.rstrip("/") + "/api/v2/alerts"
        self.resend_s = resend_s
        self.generator_url = generator_url
        self._last_resend = time.monotonic()
        super().__init__(**kw)

    def _alert(self, a: Alert, context: dict[str, Any], *, resolved: bool) -> dict[str, Any]:
        f = a.finding
        labels = {
            "alertname": f"vllmlog_{a.code}",
            "code": a.code,
            "severity": a.severity,
            "source": "vllmlog",
        }
        for k in ("instance", "model", "file"):
            if context.get(k):
                labels[k] = str(context[k])
        if f.get("rule"):
            labels["rule"] = str(f["rule"])
        if f.get("category"):
            labels["category"] = str(f["category"])
        ann = {k: str(v) for k, v in (("summary", f.get("title")), ("description", f.get("message")),
                                      ("root_cause", f.get("root_cause")), ("remediation", _text(f.get("remediation"))))
               if v}
        ev = list(f.get("evidence") or [])
        if ev:
            ann["evidence"] = _text(ev[0])[:1000]
        now = datetime.now(timezone.utc)
        body: dict[str, Any] = {
            "labels": labels,
            "annotations": ann,
            "startsAt": _utc(a.fired_wall, now),
        }
        if resolved:
            body["endsAt"] = now.isoformat().replace("+00:00", "Z")
        else:  # expires unless refreshed (as Prometheus does: 4 × the resend interval)
            body["endsAt"] = datetime.fromtimestamp(now.timestamp() + 4 * self.resend_s, timezone.utc).isoformat().replace("+00:00", "Z")
        if self.generator_url:
            body["generatorURL"] = self.generator_url
        return body

    def send(self, t: Transition, context: dict[str, Any]) -> None:
        if t.new not in ("firing", "resolved"):
            return
        body = [self._alert(t.alert, context, resolved=t.new == "resolved")]
        self._enqueue(self.url, orjson.dumps(body), {})

    def tick(self, firing: list[Alert], context: dict[str, Any], now: float) -> None:
        m = time.monotonic()
        if not firing or m - self._last_resend < self.resend_s:
            return
        self._last_resend = m
        self._enqueue(self.url, orjson.dumps([self._alert(a, context, resolved=False) for a in firing]), {})


class WebhookNotifier(_Worker):
    """POSTs the JSON payload of each state change; optional bearer token or HMAC-SHA256 signature.

    The secret comes from an environment variable (never from the command line): with
    ``token_env`` the request carries ``Authorization: Bearer <token>``; with ``hmac_env`` it carries
    ``X-Vllmlog-Signature: sha256=<hex HMAC of the body>`` and ``X-Vllmlog-Timestamp``.
    """

    name = "webhook"

    def __init__(self, url: str, *, token_env: str | None = None, hmac_env: str | None = None, **kw: Any) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"--webhook {mask_url(url)!r}: expected an http(s) URL")
        self.url = url
        self.token = _env(token_env) if token_env else None
        self.secret = _env(hmac_env).encode() if hmac_env else None
        super().__init__(**kw)

    def send(self, t: Transition, context: dict[str, Any]) -> None:
        if t.new not in ("firing", "resolved"):
            return
        body = orjson.dumps(payload(t, context), default=str)
        headers: dict[str, str] = {}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if self.secret is not None:
            headers["X-Vllmlog-Signature"] = "sha256=" + sign(self.secret, body)
            headers["X-Vllmlog-Timestamp"] = str(int(time.time()))
        self._enqueue(self.url, body, headers)

    def tick(self, firing: list[Alert], context: dict[str, Any], now: float) -> None:
        pass


_SECRET_QUERY = {"token", "access_token", "api_key", "apikey", "key", "secret", "password", "sig", "signature", "auth"}


def mask_url(url: str) -> str:
    """A URL as it may be printed: credentials (``user:pass@``), secret query values (``?token=``) and long
    opaque path segments (Slack/Discord-style ``/hooks/T0/B0/XXXX``) masked."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        u = urlsplit(url)
    except ValueError:
        return "<url>"
    host = u.hostname or ""
    if u.port:
        host = f"{host}:{u.port}"
    netloc = ("***@" if u.username or u.password else "") + host
    parts = [("***" if len(seg) >= 16 or (any(c.isdigit() for c in seg) and any(c.isalpha() for c in seg) and len(seg) >= 10)
              else seg) for seg in u.path.split("/")]
    q = urlencode([(k, "***" if k.lower() in _SECRET_QUERY or len(v) >= 16 else v)
                   for k, v in parse_qsl(u.query, keep_blank_values=True)], safe="*")
    return urlunsplit((u.scheme, netloc, "/".join(parts), q, ""))


def sign(secret: bytes, body: bytes) -> str:
    """Hex HMAC-SHA256 of a webhook body (what a receiver recomputes to verify it)."""
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


def default_instance() -> str:
    """The host name (the ``instance`` label when none is given)."""
    return socket.gethostname()


def _env(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        raise ConfigError(f"environment variable {name} is not set", hint=f"export {name}=… before starting watch")
    return v


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        return str(v.get("text") or v.get("message") or orjson.dumps(v, default=str).decode())
    if isinstance(v, (list, tuple)):
        return "; ".join(_text(x) for x in v)
    return str(v)


def _utc(t: float | None, default: datetime) -> str:
    d = default if t is None else datetime.fromtimestamp(t, timezone.utc)
    return d.isoformat().replace("+00:00", "Z")
