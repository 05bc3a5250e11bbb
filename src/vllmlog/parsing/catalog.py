"""The kind catalogue, generated from the pattern registry and the field table (``vllmlog kinds``,
``docs/kinds.md``): every kind, the patterns producing it, their fields and a real example line."""

from __future__ import annotations

import re
from typing import Any

from . import parser  # noqa: F401  (registers every pattern)
from .fields import FIELDS
from .registry import MESSAGES, RAW, LinePattern

#: Kinds the parser produces without a pattern.
BUILTIN_KINDS: dict[str, str] = {
    "log": "A vLLM-formatted line (level, timestamp, source) whose message no pattern knows; grouped into templates by `--stats`.",
    "unparsed": "A line with no vLLM envelope that no pattern knows (shell prompts, annotations, third-party prints).",
    "traceback": "A Python traceback (grouped with its continuation lines) whose exception no pattern knows.",
    "blank": "An empty line.",
}

#: One-line meaning of kinds produced by several patterns (otherwise the first pattern's doc is used).
KIND_DOCS: dict[str, str] = {
    "engine_stats": "Periodic engine stats line of any vLLM generation (V0 `metrics.py`, V1 `loggers.py`): throughput, running/waiting, KV usage, prefix-cache hit rate, preemptions.",
    "bad_request_params": "A request was rejected for invalid parameters (logprobs, sampling values, body validation) — HTTP 400.",
    "compile": "torch.compile / Inductor step (Dynamo transform, graph compile, cache, AOT artefacts) and its duration.",
    "cuda_oom": "CUDA out of memory (any PyTorch wording, or vLLM's load-time OOM message).",
    "engine_dead": "The engine died or the API server noticed it is dead (EngineDeadError, AsyncEngineDeadError, output handler failed).",
    "model_load_error": "The model could not be loaded (unsupported architecture, missing files, gated repo, trust_remote_code, dtype/quantization).",
    "context_length_exceeded": "A request is longer than --max-model-len (HTTP 400).",
    "kv_cache_size": "KV-cache capacity in tokens and the max concurrency it allows.",
    "server_shutdown": "The API server is shutting down (uvicorn and vLLM lines).",
    "memory_profiling": "Start-up memory profiling: how long it took, usable memory, and what is left for the KV cache.",
    "distributed_init": "Distributed set-up: backend, world size and rank assignment.",
    "environment_notice": "An environment or performance notice printed at start (Triton missing, fd ulimit, LD_PRELOAD, thread counts).",
    "chat_template": "Chat-template selection (default template used, content format, or no template at all).",
    "engine_dump": "EngineCore's state dump right before a fatal error (config, scheduler output, scheduler stats).",
    "request_failed": "A request failed (engine dead, bad request, other error).",
    "request_aborted": "A request was aborted (client went away or cancelled).",
    "request_finished": "A request finished (handbook line with status and latencies, or V0 `Finished request`).",
    "server_version": "The vLLM version (banner, logo or one-line form).",
    "worker_died": "A worker process died (exit code, signal).",
    "warmup": "Warm-up start / end (model compilation, chat template).",
}

#: Fields any event may carry, whatever its kind.
COMMON_FIELDS = ("exc_type", "exc_message", "exc_chain", "exc_kind", "exc_kinds", "repeated")

_SKIP_GROUPS = {"request_id", "body", "rest", "ns", "args_raw"}


def _fields_of(p: LinePattern) -> list[str]:
    """Fields the pattern's examples produce, plus catalogued groups the examples leave empty."""
    names: list[str] = []
    for ex in p.examples:
        r = p.match(ex)
        if r is not None:
            for k in r[1]:
                if k not in names and not k.startswith("_"):
                    names.append(k)
    for g in re.compile(p.regex).groupindex:
        if g in FIELDS and g not in names and g not in _SKIP_GROUPS:
            names.append(g)
    return names


def catalog() -> list[dict[str, Any]]:
    """Every kind, sorted by name: ``{kind, doc, patterns: [...], fields: [...], dynamic_fields}``."""
    kinds: dict[str, dict[str, Any]] = {}
    for reg_name, reg in (("message", MESSAGES), ("raw", RAW)):
        for p in reg.patterns:
            k = kinds.setdefault(p.kind, {"kind": p.kind, "doc": KIND_DOCS.get(p.kind, p.doc), "patterns": [], "fields": [], "dynamic_fields": False})
            k["patterns"].append({
                "id": p.id, "source": p.source, "doc": p.doc, "applies_to": reg_name,
                "prefix": p.prefix, "contains": p.contains, "regex": p.regex, "example": p.examples[0],
            })
            k["dynamic_fields"] = k["dynamic_fields"] or p.dynamic_fields
            for f in _fields_of(p):
                if f not in k["fields"]:
                    k["fields"].append(f)
    for name, doc in BUILTIN_KINDS.items():
        kinds.setdefault(name, {"kind": name, "doc": doc, "patterns": [], "fields": [], "dynamic_fields": False})
    out = []
    for name in sorted(kinds):
        k = kinds[name]
        k["fields"] = [field_info(f, k["dynamic_fields"]) for f in k["fields"]]
        out.append(k)
    return out


def field_info(name: str, dynamic: bool = False) -> dict[str, str]:
    """``{name, type, unit, meaning}`` from the field table (``type`` is ``undocumented`` if missing)."""
    spec = FIELDS.get(name)
    if spec is None:
        if dynamic:
            return {"name": name, "type": "dynamic", "unit": "", "meaning": "from the line's label of the same name (number, ratio 0..1 for %, or text)"}
        return {"name": name, "type": "undocumented", "unit": "", "meaning": ""}
    typ, unit, meaning = spec
    if typ == "ratio":
        typ, unit = "float", unit or "0..1"
    elif typ == "seconds":
        typ, unit = "float", unit or "s"
    return {"name": name, "type": typ, "unit": unit, "meaning": meaning}


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    """``docs/kinds.md``: generated, never edited by hand (``vllmlog kinds --markdown > docs/kinds.md``)."""
    cat = catalog()
    lines = [
        "# Event kinds",
        "",
        "<!-- generated by `vllmlog kinds --markdown` from the pattern registry and parsing/fields.py; do not edit -->",
        "",
        "Every event `vllmlog parse` writes has a `kind`. Kinds and field names are a stable contract: new ones are",
        "added, existing ones are never renamed. Numbers are typed: durations in seconds (`_s`), ratios 0..1,",
        "throughputs in tokens/s, memory in GiB.",
        "",
        f"{len(cat)} kinds, {sum(len(k['patterns']) for k in cat)} patterns.",
        "",
        "## Fields any event may carry",
        "",
        "| field | type | unit | meaning |",
        "|---|---|---|---|",
    ]
    for f in COMMON_FIELDS:
        i = field_info(f)
        lines.append(f"| `{i['name']}` | {i['type']} | {i['unit']} | {_md_escape(i['meaning'])} |")
    lines += ["", "## Kinds", ""]
    lines.append(" · ".join(f"[`{k['kind']}`](#{k['kind']})" for k in cat))
    for k in cat:
        lines += ["", f"### {k['kind']}", "", _md_escape(k["doc"]), ""]
        if k["fields"]:
            lines += ["| field | type | unit | meaning |", "|---|---|---|---|"]
            for f in k["fields"]:
                lines.append(f"| `{f['name']}` | {f['type']} | {f['unit']} | {_md_escape(f['meaning'])} |")
            lines.append("")
        if k["dynamic_fields"]:
            lines += ["Plus one field per `Label: value` / `key=value` pair of the line, named in snake_case (labels come and go between vLLM versions).", ""]
        for p in k["patterns"]:
            where = f"starts with `{p['prefix']}`" if p["prefix"] else f"contains `{p['contains']}`"
            lines.append(f"- `{p['id']}` ({p['source']}, {where}): {_md_escape(p['doc'])}")
            lines.append(f"  - example: `{_md_escape(p['example'])}`")
    lines.append("")
    return "\n".join(lines)
