"""S107 kv-transfer-without-connector."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register


@register
class KvTransferWithoutConnector(Rule):
    """## What it detects
    ``Got kv_transfer_params, but no KVConnector found. Disabling KVTransfer for this request.``: requests
    routed as disaggregated prefill/decode (a proxy or router sends ``kv_transfer_params``) reach an engine
    started without a KV connector (no ``--kv-transfer-config``).
    ## Why it matters
    The KV cache computed by the prefill instance is never received: this engine prefills every prompt again,
    so the decode pool does the prefill work too — TTFT and throughput are those of a plain server doing
    twice the work, queues build, and the KV cache fills with recomputed prompts.
    ## How to fix
    Give both the prefill and the decode engines the same ``--kv-transfer-config`` (e.g.
    ``{"kv_connector":"NixlConnector","kv_role":"kv_both"}``, or LMCache / Mooncake / P2pNccl as deployed),
    or stop the router from sending ``kv_transfer_params`` when disaggregation is not set up."""

    code, slug, category, severity = "S107", "kv-transfer-without-connector", "config_error", Severity.WARNING
    title = "Disaggregated prefill without a KV connector"
    explains = ("queueing", "slow", "thrashing")
    options: dict[str, Any] = {"min_count": 3}

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """Every routed request is prefilled again on this engine: the extra prefill is the load."""
        return True if finding.count >= int(self.options["min_count"]) else None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            evs = [e for e in v.of("kv_transfer_no_connector") if not v.in_shutdown(e.line)]
            if len(evs) < int(options["min_count"]):
                continue
            n = len(evs)
            yield self.finding(
                f"{n} requests arrived with disaggregated-prefill KV-transfer parameters, but this engine has no KV "
                "connector: each one's prompt is prefilled again here instead of being received.",
                evidence=u.dedupe([u.first(e) for e in evs[:4]]), first_seen=evs[0].ts, last_seen=evs[-1].ts,
                count=n, file=v.file, process=evs[0].process, server=v.index,
                root_cause="The router sends kv_transfer_params (prefill/decode disaggregation) to an engine started "
                           "without --kv-transfer-config, so the transfer is disabled and the work is recomputed.",
                remediation="Start the prefill and decode engines with the same `--kv-transfer-config` (the connector "
                            "the deployment uses, e.g. NixlConnector with kv_role kv_both), or route without "
                            "kv_transfer_params.",
                data={"requests": n},
            )
