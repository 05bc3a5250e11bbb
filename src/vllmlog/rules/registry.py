"""One table maps codes to rules; codes are never reused (retired codes stay listed in ``RETIRED``)."""

from __future__ import annotations

import importlib

from ..errors import ConfigError
from .base import CATEGORIES, Rule

#: code → rule instance, in registration order.
RULES: dict[str, Rule] = {}
#: Codes that once existed and must never be given to a new rule.
RETIRED: frozenset[str] = frozenset()

#: Rule modules, one rule per file (imported in this order by ``load_rules``).
_MODULES = [
    "s101_startup_cuda_oom", "s102_startup_worker_killed", "s103_insufficient_free_memory",
    "s104_model_load_failure", "s105_invalid_config", "s106_port_in_use",
    "s107_kv_transfer_without_connector",
    "k201_kv_cache_too_small", "k202_kv_cache_pressure", "k203_block_allocation_failed",
    "q301_queue_backlog", "q302_slow_generation", "q303_slow_ttft",
    "e401_engine_hang", "e402_scheduler_stall", "e403_engine_dead", "e404_engine_start_failed",
    "e405_runtime_oom", "e406_worker_killed_serving",
    "d501_nccl_collective_failure",
    "r601_request_too_long", "r602_bad_request_params", "r603_rejected_requests", "r604_client_aborts",
    "r605_request_timeouts",
]
_loaded = False


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator: add a rule to the registry (checks code, slug and category)."""
    rule = cls()
    if not rule.code or not rule.slug:
        raise ValueError(f"{cls.__name__}: code and slug are required")
    if rule.code in RETIRED:
        raise ValueError(f"{rule.code} is retired and cannot be reused")
    if rule.code in RULES and type(RULES[rule.code]) is not cls:
        raise ValueError(f"duplicate rule code {rule.code}")
    if any(r.slug == rule.slug and r.code != rule.code for r in RULES.values()):
        raise ValueError(f"duplicate rule slug {rule.slug}")
    if rule.category not in CATEGORIES:
        raise ValueError(f"{rule.code}: unknown category {rule.category!r}")
    RULES[rule.code] = rule
    return cls


def load_rules() -> dict[str, Rule]:
    """Import every rule module once; return the registry."""
    global _loaded
    if not _loaded:
        for name in _MODULES:
            importlib.import_module(f"{__package__}.{name}")
        _loaded = True
    return RULES


def all_rules() -> list[Rule]:
    """Every registered rule, sorted by code."""
    return [RULES[c] for c in sorted(load_rules())]


def get_rule(code_or_slug: str) -> Rule:
    """A rule by code (``K202``, case-insensitive) or slug; raises ConfigError when unknown."""
    rules = load_rules()
    key = code_or_slug.strip()
    if key.upper() in rules:
        return rules[key.upper()]
    for r in rules.values():
        if r.slug == key.lower():
            return r
    raise ConfigError(f"unknown rule {code_or_slug!r}", hint="`vllmlog rules` lists every rule code and slug")
