"""``Label: value, Label: value`` parsing for stats lines, whose fields come and go between versions."""

from __future__ import annotations

import re
from typing import Any

from .fields import to_float, to_int, to_ratio

_SPLIT = re.compile(r",\s+(?=[A-Z][^:,]*:\s)")
_KV_FETCH = re.compile(r"(?<!\d)(\d+) waiting to start, (\d+) in progress, (\d+) completed waiting")
_NUM = re.compile(r"(?<![\d,])-?[\d,]*\.?\d+(?:[eE][-+]?\d+)?|nan|inf")

# label → (field, converter)
_KNOWN: dict[str, tuple[str, Any]] = {
    "Avg prompt throughput": ("prompt_throughput", to_float),
    "Avg generation throughput": ("generation_throughput", to_float),
    "Running": ("running", to_int),
    "Waiting": ("waiting", to_int),
    "Pending": ("waiting", to_int),
    "Swapped": ("swapped", to_int),
    "Deferred": ("deferred", to_int),
    "Preemptions": ("preemptions", to_int),
    "Corrupted": ("corrupted", to_int),
    "Prefix cache hit rate": ("prefix_cache_hit_rate", to_ratio),
    "External prefix cache hit rate": ("external_prefix_cache_hit_rate", to_ratio),
    "MM cache hit rate": ("mm_cache_hit_rate", to_ratio),
}


def snake(label: str) -> str:
    """'Avg xfer time (ms)' → 'avg_xfer_time_ms'."""
    return re.sub(r"[^0-9a-z]+", "_", label.lower()).strip("_")


def split(body: str) -> list[tuple[str, str]]:
    """Split a stats body into (label, raw value) pairs."""
    body = body.rstrip().rstrip(".")
    # V1 0.7.1–0.7.2 forgot the comma before "GPU KV cache usage"
    body = body.replace(" reqs GPU KV", " reqs, GPU KV")
    out = []
    for seg in _SPLIT.split(body):
        label, sep, value = seg.partition(": ")
        if sep:
            out.append((label.strip(), value.strip()))
    return out


def parse_stats(body: str) -> dict[str, Any]:
    """Typed fields of an engine stats line body (V0 or V1, any release)."""
    pairs = split(body)
    labels = {lbl for lbl, _ in pairs}
    v0 = "Swapped" in labels or "Pending" in labels
    out: dict[str, Any] = {}
    for label, value in pairs:
        known = _KNOWN.get(label)
        if known is not None:
            m = _NUM.search(value)
            out[known[0]] = known[1](m.group(0)) if m else None
            continue
        if label.endswith("KV cache usage"):
            dev = label[: -len("KV cache usage")].strip() or "GPU"
            m = _NUM.search(value)
            v = to_ratio(m.group(0)) if m else None
            if v0 and dev == "CPU":
                out["cpu_kv_cache_usage"] = v
            else:
                out["kv_cache_usage"] = v
                out["kv_device"] = dev
            continue
        if label == "KV fetch":
            m2 = _KV_FETCH.search(value)
            if m2:
                out["kv_fetch_waiting"] = to_int(m2.group(1))
                out["kv_fetch_in_progress"] = to_int(m2.group(2))
                out["kv_fetch_completed_waiting"] = to_int(m2.group(3))
            continue
        out[snake(label)] = _generic(value)
    return out


def _generic(value: str) -> Any:
    m = _NUM.fullmatch(value.split(" ", 1)[0].rstrip("%")) if value else None
    if m:
        v = to_float(m.group(0))
        if value.split(" ", 1)[0].endswith("%") and v is not None:
            return v / 100.0
        if v is not None and v.is_integer() and "." not in m.group(0):
            return int(v)
        return v
    return value


def parse_pairs(body: str) -> dict[str, Any]:
    """Generic ``Key: value`` / ``key=value`` body → snake_case fields (spec-decode, KV transfer)."""
    out: dict[str, Any] = {}
    for label, value in split(body):
        out[snake(label)] = _generic(value)
    if not out and "=" in body:
        for part in body.split(", "):
            k, sep, v = part.partition("=")
            if sep:
                out[snake(k)] = _generic(v.strip())
    return out
