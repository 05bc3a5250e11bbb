"""S104 model-load-failure."""

from __future__ import annotations

from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register

_FIX = {
    "trust_remote_code": "Add `--trust-remote-code` (the model ships its own configuration/modeling code).",
    "bad_model_path": "Check the model path / hub id: a local directory must exist inside the container and contain "
                      "config.json; otherwise pass a valid `namespace/name` hub id.",
    "unsupported_architecture": "Upgrade vLLM to a version that supports this architecture (or check the model's "
                                "`architectures` in config.json).",
    "gated_repo": "Accept the model's licence on the Hub and pass a token: `HF_TOKEN=hf_…` in the environment.",
    "dtype_unsupported": "Use a dtype the GPU supports: `--dtype half` on pre-Ampere GPUs.",
    "quantization": "Use a quantization method this GPU supports (or a non-quantized checkpoint); check `--quantization`.",
    "corrupt_weights": "Re-download the weights (a shard is truncated or corrupt): delete it from the HF cache and fetch again.",
}


@register
class ModelLoadFailure(Rule):
    """## What it detects
    The model cannot be loaded: custom code without ``--trust-remote-code``, a model path that does
    not exist, an unsupported architecture, a gated repository without a token, a dtype or quantization
    the GPU cannot run, corrupt weight files.
    ## Why it matters
    The server exits at start-up; nothing is served.
    ## How to fix
    The finding names the reason and the flag: ``--trust-remote-code``, a correct path or hub id,
    ``HF_TOKEN``, ``--dtype half``, a supported ``--quantization``, re-downloading weights, or a newer vLLM."""

    code, slug, category, severity = "S104", "model-load-failure", "model_load_failure", Severity.CRITICAL
    title = "Model failed to load"
    explains = ("never_ready",)
    options: dict[str, Any] = {}

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            evs = [e for e in v.of("model_load_error") if not v.serving(e.line)]
            # validation errors whose detail is about the checkpoint (unknown model type, architecture)
            evs += [e for e in v.of("config_error") if not v.serving(e.line) and e not in evs and u.load_reason(e)]
            evs.sort(key=lambda e: e.line)
            if not evs:
                continue
            e = evs[0]
            reason = e.fields.get("reason") or next((x.fields.get("reason") for x in evs if x.fields.get("reason")), None) \
                or u.load_reason(e)
            evid = [u.ev(x) for x in evs[:3]] + u.startup_failure_lines(v, e.line_end)
            exc = e.fields.get("exc_message") or e.message
            yield self.finding(
                f"Model failed to load ({reason or 'unknown reason'}): {str(exc)[:160]}",
                evidence=u.dedupe(evid), first_seen=e.ts, last_seen=evs[-1].ts, count=len(evs), file=v.file,
                process=e.process, server=v.index,
                root_cause={
                    "trust_remote_code": "The model repository ships custom code (auto_map) and the server was started "
                                         "without --trust-remote-code.",
                    "bad_model_path": "The model path is neither an existing local directory nor a valid hub id.",
                }.get(reason or "", f"The model could not be loaded ({reason or 'see the error line'})."),
                remediation=_FIX.get(reason or "", "Fix the model path/flags named in the error line."),
                data={"reason": reason, "model": v.srv.model},
            )
