"""S105 invalid-config."""

from __future__ import annotations

import re
from typing import Any, Iterator

from ..run import Run
from ..capacity import sizing
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register

_DETAIL = re.compile(r"Value error,|User-specified|: error: |invalid (?:choice|int|float)|must be|is not supported|unrecognized arguments", re.I)


@register
class InvalidConfig(Rule):
    """## What it detects
    Invalid engine arguments at start-up: pydantic ``ValidationError`` for an engine config, argparse
    ``error: argument …``, ``--max-model-len`` above the model's limit (``User-specified max_model_len
    … is greater than the derived max_model_len``).
    ## Why it matters
    The process exits before loading anything; nothing is served.
    ## How to fix
    Correct the flag named in the error. For max-model-len: use the model's limit (the finding computes
    it) or, knowingly, ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` with rope scaling."""

    code, slug, category, severity = "S105", "invalid-config", "config_error", Severity.CRITICAL
    title = "Invalid server configuration"
    explains = ("never_ready",)
    options: dict[str, Any] = {}

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            # a validation error about the checkpoint itself (unknown model type) is the model failing to load
            evs = [e for e in v.of("config_error", "max_model_len_too_large") if not v.serving(e.line)
                   and u.load_reason(e) is None]
            if not evs:
                continue
            e = evs[0]
            detail = u.find_line(e, _DETAIL) if e.line != e.line_end else None
            head = u.ev(e)
            m = sizing.model_limit(e)
            if m:
                want, src, limit = m
                msg = f"--max-model-len {want} is greater than the model's limit ({src}={limit}); the server exits."
                rem = (f"Use `--max-model-len {limit}` (or drop the flag); only if the model really supports longer "
                       f"context set `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1` with rope scaling.")
                data: dict[str, Any] = {"max_model_len": want, "model_limit": limit}
            elif e.fields.get("reason") == "dtype_unsupported" or "compute capability" in e.text:
                text = (detail.text if detail else head.text).strip()
                msg = f"The GPU cannot run the configured dtype: {u.msg_of(e)[:200] if not detail else text[:200]}"
                rem = ("Start with `--dtype half` (float16): GPUs below compute capability 8.0 (V100, T4, P40, 2080) "
                       "have no bfloat16.")
                data = {"error": e.fields.get("error"), "reason": "dtype_unsupported"}
                detail = detail or u.ev(e, "compute capability")
            else:
                text = (detail.text if detail else head.text).strip()
                msg = f"Invalid configuration: {text[:200]}"
                rem = "Fix the argument named in the error (see `vllm serve --help` for valid values)."
                data = {"error": e.fields.get("error")}
            yield self.finding(
                msg, evidence=u.dedupe([detail, head] + u.startup_failure_lines(v, e.line_end)), first_seen=e.ts,
                last_seen=evs[-1].ts, count=len(evs), file=v.file, process=e.process, server=v.index,
                root_cause="An engine argument failed validation, so the server exited before loading the model.",
                remediation=rem, data=data,
            )
