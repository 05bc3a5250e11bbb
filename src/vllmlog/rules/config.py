"""Thresholds for the rules: handbook defaults, overridden from a TOML file (``--config``).

```toml
[thresholds]            # shared names: any rule option with this name
waiting_s = 30          # queue wait the handbook calls too long
kv_caution = 0.80       # KV-cache usage: caution
kv_critical = 0.95      # KV-cache usage: critical
min_generation_tps = 20 # per-request generation speed (tokens/s)
max_ttft_s = 1.0        # time to first token (s)

[rules.Q301]            # one rule's options
min_waiting = 5

[rules]
disable = ["R604"]      # codes or slugs
enable = []             # opt-in rules
```
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .base import Rule
from .registry import get_rule, load_rules

#: The handbook's thresholds (shared option names).
HANDBOOK_THRESHOLDS: dict[str, float] = {
    "waiting_s": 30.0,
    "kv_caution": 0.80,
    "kv_critical": 0.95,
    "min_generation_tps": 20.0,
    "max_ttft_s": 1.0,
}


@dataclass
class DiagnoseConfig:
    """Which rules run and with which options."""

    thresholds: dict[str, Any] = field(default_factory=dict)
    per_rule: dict[str, dict[str, Any]] = field(default_factory=dict)
    disabled: set[str] = field(default_factory=set)
    enabled: set[str] = field(default_factory=set)

    def options_for(self, rule: Rule) -> dict[str, Any]:
        """Defaults of the rule, then shared thresholds, then the rule's own table."""
        opts = dict(rule.options)
        for k, v in self.thresholds.items():
            if k in opts:
                opts[k] = v
        opts.update(self.per_rule.get(rule.code, {}))
        return opts

    def is_enabled(self, rule: Rule) -> bool:
        """Default-on rules run unless disabled; opt-in rules run when enabled."""
        if rule.code in self.disabled:
            return False
        return rule.default_on or rule.code in self.enabled


def _coerce(code: str, key: str, default: Any, value: Any) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"[rules.{code}] {key} must be true or false, got {value!r}")
        return value
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"[rules.{code}] {key} must be a number, got {value!r}")
        return type(default)(value) if isinstance(default, float) else value
    return value


def config_from_dict(data: dict[str, Any]) -> DiagnoseConfig:
    """Validate a parsed TOML document into a ``DiagnoseConfig``."""
    rules = load_rules()
    cfg = DiagnoseConfig()
    known = set(HANDBOOK_THRESHOLDS)
    for r in rules.values():
        known.update(r.options)
    for k, v in (data.get("thresholds") or {}).items():
        if k not in known:
            raise ConfigError(f"unknown threshold {k!r}", hint=f"known: {', '.join(sorted(known))}")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(f"threshold {k} must be a number, got {v!r}")
        cfg.thresholds[k] = v
    table = data.get("rules") or {}
    if not isinstance(table, dict):
        raise ConfigError("[rules] must be a table")
    for k, v in table.items():
        if k in ("disable", "enable"):
            if not isinstance(v, list):
                raise ConfigError(f"rules.{k} must be a list of rule codes")
            target = cfg.disabled if k == "disable" else cfg.enabled
            target.update(get_rule(str(x)).code for x in v)
            continue
        rule = get_rule(k)
        if not isinstance(v, dict):
            raise ConfigError(f"[rules.{k}] must be a table of options")
        opts: dict[str, Any] = {}
        for ok, ov in v.items():
            if ok == "enabled":
                (cfg.enabled if ov else cfg.disabled).add(rule.code)
                continue
            if ok not in rule.options:
                raise ConfigError(f"rule {rule.code} has no option {ok!r}",
                                  hint=f"options: {', '.join(sorted(rule.options)) or '(none)'}")
            opts[ok] = _coerce(rule.code, ok, rule.options[ok], ov)
        cfg.per_rule[rule.code] = opts
    return cfg


def load_config(path: str | Path | None) -> DiagnoseConfig:
    """Read a TOML config file (None → handbook defaults)."""
    if path is None:
        return DiagnoseConfig()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return config_from_dict(data)
