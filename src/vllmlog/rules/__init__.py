"""Diagnosis rules: one file per rule, a registry, configurable thresholds, pure ``detect()``."""

from .base import CATEGORIES, Evidence, Finding, Rule, Severity
from .config import DiagnoseConfig, load_config
from .registry import all_rules, get_rule, load_rules, register

__all__ = [
    "CATEGORIES", "DiagnoseConfig", "Evidence", "Finding", "Rule", "Severity", "all_rules", "get_rule",
    "load_config", "load_rules", "register",
]
