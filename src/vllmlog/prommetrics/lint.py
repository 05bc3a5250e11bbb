"""Find vLLM metric names in existing alert rules / dashboards that a given release does not expose."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..errors import InputError
from .catalog import CATALOG, Version, format_version, names_for, renamed, role_names

_NAME = re.compile(r"vllm:[A-Za-z0-9_]+(?::[A-Za-z0-9_]+)*")
_EXPR_KEY = re.compile(r"""^(\s*)(?:-\s*)?["']?expr["']?\s*:\s*(.*)$""")


def _ranges(name: str) -> str:
    spans = [f"{format_version(s.since)}–{'now' if s.until[0] >= 99 else format_version(s.until).replace('.99', '.x')}"
             f" ({','.join(sorted(s.engines))})" for s in CATALOG if s.name == name]
    return ", ".join(spans)


def lint_name(name: str, version: Version) -> dict[str, Any] | None:
    """Why `name` matches nothing on `version` (with a suggestion), or None when it is fine."""
    live = names_for(version)
    kinds = {s.name: s.kind for s in CATALOG}
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    if name in live and kinds.get(name) != "histogram":
        return None
    if base != name and base in live and kinds.get(base) == "histogram":
        return None
    if name.endswith("_created"):
        return None  # creation-time gauges exist in single-process mode for every counter/histogram
    if name in live and kinds.get(name) == "histogram":
        return {"name": name, "problem": "histogram family used bare: no series has this name",
                "suggestion": f"{name}_bucket / {name}_sum / {name}_count"}
    if name + "_total" in live:
        return {"name": name, "problem": "counters are exposed with a _total suffix", "suggestion": name + "_total"}
    known = base if base in kinds else name if name in kinds else None
    if known:
        new = renamed(known)
        suggestion = None
        if new and new in live:
            suggestion = new + name[len(known):]
        else:  # same role under another name in this release (also old ← new)
            role = next((s.role for s in CATALOG if s.name == known and s.role), None)
            alt = role_names(role, version) if role else []
            if alt and kinds.get(alt[0]) == kinds.get(known):
                suggestion = alt[0] + name[len(known):]
        return {"name": name, "problem": f"not exposed by vLLM {format_version(version)}; exists in {_ranges(known)}",
                "suggestion": suggestion}
    return {"name": name, "problem": "unknown vLLM metric name", "suggestion": None}


def lint_text(text: str, version: Version, source: str = "-") -> list[dict[str, Any]]:
    """Every vllm:* name in `text` that matches nothing on `version`, with file/line."""
    out = []
    for no, line in _query_lines(text):
        for m in _NAME.finditer(line):
            problem = lint_name(m.group(0), version)
            if problem:
                out.append({"file": source, "line": no, **problem})
    return out


def _query_lines(text: str) -> list[tuple[int, str]]:
    """Lines holding PromQL: `expr` values (and their YAML block continuations) when the file has any, else all."""
    lines = text.splitlines()
    picked: list[tuple[int, str]] = []
    block_indent: int | None = None
    for no, line in enumerate(lines, 1):
        if block_indent is not None:
            if line.strip() and len(line) - len(line.lstrip()) > block_indent:
                picked.append((no, line))
                continue
            block_indent = None
        m = _EXPR_KEY.match(line)
        if m:
            picked.append((no, line))
            if m.group(2).strip() in ("|", ">", "|-", ">-", ""):
                block_indent = len(m.group(1))
    return picked if picked else list(enumerate(lines, 1))


def lint_files(paths: list[str], version: Version) -> list[dict[str, Any]]:
    """Lint alert-rule / dashboard / recording-rule files."""
    out = []
    for p in paths:
        try:
            text = Path(p).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise InputError(f"{p}: cannot read ({exc.strerror})") from exc
        out.extend(lint_text(text, version, p))
    return out
