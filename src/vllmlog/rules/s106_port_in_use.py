"""S106 port-in-use."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register


@register
class PortInUse(Rule):
    """## What it detects
    ``OSError: [Errno 98] Address already in use`` (or vLLM's ``port N is used by process …``) when the
    API server binds its HTTP port.
    ## Why it matters
    The new server exits (often after loading the model); the old process keeps answering, so clients
    may not notice until it dies.
    ## How to fix
    Stop the process holding the port (``ss -ltnp 'sport = :8000'``) or start on another ``--port``."""

    code, slug, category, severity = "S106", "port-in-use", "config_error", Severity.CRITICAL
    title = "HTTP port already in use"
    explains = ("never_ready",)
    options: dict[str, Any] = {}

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            evs = v.of("port_in_use")
            if not evs:
                continue
            e = evs[0]
            port = e.fields.get("port") or u.arg(v, "port")
            yield self.finding(
                f"The HTTP port{' ' + str(port) if port else ''} is already in use; the server cannot bind and exits.",
                evidence=u.dedupe([u.ev(x, "already in use", "is used by process") for x in evs[:3]]), first_seen=e.ts,
                last_seen=evs[-1].ts, count=len(evs), file=v.file, process=e.process, server=v.index,
                root_cause="Another process (often a previous vLLM that did not exit) listens on the same port.",
                remediation=f"Free the port (`ss -ltnp 'sport = :{port or 8000}'`, then stop that process) or start with "
                            f"another `--port`.",
                data={"port": port},
            )
