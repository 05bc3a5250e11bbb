"""Alert state machine: findings in, state changes out, with ``for`` and clear-hysteresis.

Each diagnosis pass hands ``AlertEngine.update`` the findings (``Finding.to_dict()`` shapes) and the
current time. A finding code that appears goes *pending*; after it has been present for its ``for``
duration it *fires*; when it has been absent for its ``clear_for`` duration it *resolves*. A
pending alert that disappears is dropped silently. Flapping is damped on both edges.

Time is the *log clock* (the log's own timestamps advanced by wall time while idle, see the watch
loop), so replaying an old log and following a live one behave alike. A finding whose
``last_seen`` is older than ``stale_after`` *by the log's newest timestamp* counts as cleared: rules
look at the whole run, and a crash is no longer "happening" once the restarted server has logged on
for a while — but a dead server that logs nothing more keeps its alert.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SEVERITY_RANK = {"debug": 0, "info": 1, "notice": 1, "warning": 2, "warn": 2, "error": 3, "critical": 4, "fatal": 4}


def severity_of(v: Any) -> str:
    """Normalise a severity (enum, its value or name) to a lowercase name."""
    if v is None:
        return "warning"
    name = getattr(v, "value", v)
    if not isinstance(name, str):
        name = getattr(v, "name", str(v))
    return str(name).lower()


def rank(sev: str) -> int:
    """Order of a severity name (unknown names rank as warning)."""
    return SEVERITY_RANK.get(sev, 2)


def parse_duration(v: Any, what: str = "duration") -> float:
    """``5``, ``5.0``, ``"5s"``, ``"250ms"``, ``"2m"``, ``"1h"`` → seconds."""
    if isinstance(v, bool):
        raise ConfigError(f"{what}: expected a duration, got {v!r}")
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        s = v.strip().lower()
        for suffix, mult in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
            if s.endswith(suffix):
                try:
                    return float(s[: -len(suffix)]) * mult
                except ValueError:
                    break
        else:
            try:
                return float(s)
            except ValueError:
                pass
    raise ConfigError(f"{what}: cannot read {v!r} as a duration", hint='use seconds or a string like "30s", "2m"')


@dataclass
class CodeConfig:
    """Per-code overrides (``[alerts.codes.K101]`` in alerts.toml)."""

    for_s: float | None = None
    clear_s: float | None = None
    enabled: bool = True
    severity: str | None = None


@dataclass
class AlertConfig:
    """How findings become alerts, and how often ``watch`` diagnoses (alerts.toml)."""

    for_s: float = 0.0
    """A finding must persist this long before it fires (``for``)."""
    clear_s: float = 30.0
    """A firing alert resolves after its finding has been absent this long (hysteresis)."""
    stale_after_s: float = 120.0
    """A finding whose last evidence is older than this, by the log's own newest timestamp, counts
    as cleared (the rules see the whole run; an old crash is no longer happening once the log moves on)."""
    min_severity: str = "info"
    """Findings below this severity are not alerted on (still exported as active findings)."""
    diagnose_interval_s: float = 5.0
    """Run the rules at least this often."""
    min_diagnose_interval_s: float = 0.25
    """…and at most this often, when an error or lifecycle line arrives (low alert latency)."""
    resend_s: float = 60.0
    """Re-send firing alerts to Alertmanager this often (it expires alerts not refreshed)."""
    max_inflight: int = 10_000
    """Cap on tracked in-flight requests."""
    codes: dict[str, CodeConfig] = field(default_factory=dict)
    rules: dict[str, Any] = field(default_factory=dict)
    """``[thresholds]`` / ``[rules]`` tables of the same file, for ``diagnose`` (``rules_config()``)."""

    def rules_config(self) -> Any:
        """The diagnosis config of this file (thresholds, enabled/disabled rules), or None."""
        if not self.rules:
            return None
        from ..rules.config import config_from_dict

        return config_from_dict(self.rules)

    def for_code(self, code: str) -> tuple[float, float, bool, str | None]:
        """(for, clear_for, enabled, severity override) of a code."""
        c = self.codes.get(code)
        if c is None:
            return self.for_s, self.clear_s, True, None
        return (
            self.for_s if c.for_s is None else c.for_s,
            self.clear_s if c.clear_s is None else c.clear_s,
            c.enabled,
            c.severity,
        )

    @classmethod
    def load(cls, path: str | Path) -> AlertConfig:
        """Read an alerts.toml (see docs: ``[alerts]``, ``[alerts.codes.CODE]``, ``[watch]``)."""
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        return cls.from_dict(data, str(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "config") -> AlertConfig:
        """Build from the parsed TOML mapping (unknown keys are errors: typos should not pass)."""
        cfg = cls()
        known_top = {"alerts", "watch", "thresholds", "rules"}
        for k in data:
            if k not in known_top:
                raise ConfigError(f"{where}: unknown section [{k}]",
                                  hint="sections: [alerts], [alerts.codes.CODE], [watch], [thresholds], [rules]")
        cfg.rules = {k: data[k] for k in ("thresholds", "rules") if k in data}
        if cfg.rules:
            cfg.rules_config()  # validate now: a typo should fail at start, not at the first pass
        a = dict(data.get("alerts", {}))
        codes = a.pop("codes", {})
        for k, v in a.items():
            if k == "for":
                cfg.for_s = parse_duration(v, f"{where}: alerts.for")
            elif k in ("clear_for", "keep_firing_for"):
                cfg.clear_s = parse_duration(v, f"{where}: alerts.{k}")
            elif k == "stale_after":
                cfg.stale_after_s = parse_duration(v, f"{where}: alerts.stale_after")
            elif k == "min_severity":
                cfg.min_severity = severity_of(v)
            elif k == "resend_interval":
                cfg.resend_s = parse_duration(v, f"{where}: alerts.resend_interval")
            else:
                raise ConfigError(f"{where}: unknown key alerts.{k}",
                                  hint="keys: for, clear_for, stale_after, min_severity, resend_interval, codes")
        for code, c in codes.items():
            cc = CodeConfig()
            for k, v in dict(c).items():
                if k == "for":
                    cc.for_s = parse_duration(v, f"{where}: alerts.codes.{code}.for")
                elif k in ("clear_for", "keep_firing_for"):
                    cc.clear_s = parse_duration(v, f"{where}: alerts.codes.{code}.{k}")
                elif k == "enabled":
                    cc.enabled = bool(v)
                elif k == "severity":
                    cc.severity = severity_of(v)
                else:
                    raise ConfigError(f"{where}: unknown key alerts.codes.{code}.{k}", hint="keys: for, clear_for, enabled, severity")
            cfg.codes[str(code)] = cc
        for k, v in dict(data.get("watch", {})).items():
            if k == "diagnose_interval":
                cfg.diagnose_interval_s = parse_duration(v, f"{where}: watch.diagnose_interval")
            elif k == "min_diagnose_interval":
                cfg.min_diagnose_interval_s = parse_duration(v, f"{where}: watch.min_diagnose_interval")
            elif k == "max_inflight":
                cfg.max_inflight = int(v)
            else:
                raise ConfigError(f"{where}: unknown key watch.{k}", hint="keys: diagnose_interval, min_diagnose_interval, max_inflight")
        return cfg


@dataclass
class Alert:
    """One alert (one finding code) and where it is in its life."""

    code: str
    severity: str
    finding: dict[str, Any]
    """The latest finding dict for this code (the most severe when a rule reports several)."""
    state: str = "pending"
    """``pending`` → ``firing`` → ``resolved``."""
    active_since: float = 0.0
    """Log-clock time the finding first appeared in this episode."""
    fired_at: float | None = None
    fired_wall: float | None = None
    """Wall-clock time it fired (what Alertmanager's ``startsAt`` carries)."""
    cleared_since: float | None = None
    resolved_at: float | None = None
    count: int = 1
    """Findings with this code in the latest pass."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape notifiers send."""
        f = self.finding
        return {
            "code": self.code,
            "rule": f.get("rule"),
            "severity": self.severity,
            "category": f.get("category"),
            "title": f.get("title"),
            "message": f.get("message"),
            "state": self.state,
            "active_since": _iso(self.active_since),
            "fired_at": _iso(self.fired_at),
            "resolved_at": _iso(self.resolved_at),
            "first_seen": _jsonable(f.get("first_seen")),
            "last_seen": _jsonable(f.get("last_seen")),
            "count": f.get("count"),
            "evidence": _jsonable(list(f.get("evidence") or [])[:3]),
            "root_cause": f.get("root_cause"),
            "remediation": _jsonable(f.get("remediation")),
            "incident": f.get("incident"),
            "impact": f.get("impact"),
            "confidence": f.get("confidence"),
        }


@dataclass(frozen=True)
class Transition:
    """One state change of one alert."""

    alert: Alert
    old: str
    """``inactive``, ``pending`` or ``firing``."""
    new: str
    """``pending``, ``firing`` or ``resolved``."""
    at: float
    """Log-clock time of the change."""


class AlertEngine:
    """Turns successive finding lists into alert state changes."""

    def __init__(self, config: AlertConfig | None = None) -> None:
        self.config = config or AlertConfig()
        self.alerts: dict[str, Alert] = {}
        self.active_findings: dict[tuple[str, str], int] = {}
        """(code, severity) → findings in the latest pass (exported as vllmlog_findings_active)."""

    def update(self, findings: Iterable[Mapping[str, Any]], now: float, log_time: float | None = None) -> list[Transition]:
        """Fold one diagnosis pass in; return the state changes, in order.

        ``now`` drives ``for`` / ``clear_for`` (it keeps moving while the input is idle);
        ``log_time`` (default ``now``) is the newest timestamp in the log itself and decides
        staleness: a dead server that logs nothing more keeps its alert, a server that logs on
        without new evidence clears it."""
        cfg = self.config
        log_now = now if log_time is None else log_time
        present: dict[str, tuple[dict[str, Any], str, int]] = {}
        active: dict[tuple[str, str], int] = {}
        for f in findings:
            code = str(f.get("code") or f.get("rule") or "?")
            sev = severity_of(f.get("severity"))
            last = _epoch(f.get("last_seen"))
            if last is not None and log_now - last > cfg.stale_after_s:
                continue
            for_s, clear_s, enabled, override = cfg.for_code(code)
            sev = override or sev
            active[(code, sev)] = active.get((code, sev), 0) + 1
            if not enabled or rank(sev) < rank(cfg.min_severity):
                continue
            prev = present.get(code)
            if prev is None or rank(sev) > rank(prev[1]):
                present[code] = (dict(f), sev, (prev[2] if prev else 0) + 1)
            else:
                present[code] = (prev[0], prev[1], prev[2] + 1)
        self.active_findings = active
        out: list[Transition] = []
        for code, (f, sev, n) in present.items():
            for_s, clear_s, _, _ = cfg.for_code(code)
            a = self.alerts.get(code)
            if a is None:
                a = self.alerts[code] = Alert(code, sev, f, active_since=now, count=n)
                if for_s <= 0:
                    a.state, a.fired_at, a.fired_wall = "firing", now, time.time()
                    out.append(Transition(a, "inactive", "firing", now))
                else:
                    out.append(Transition(a, "inactive", "pending", now))
                continue
            a.finding, a.severity, a.count, a.cleared_since = f, sev, n, None
            if a.state == "pending" and now - a.active_since >= for_s:
                a.state, a.fired_at, a.fired_wall = "firing", now, time.time()
                out.append(Transition(a, "pending", "firing", now))
        for code in list(self.alerts):
            if code in present:
                continue
            a = self.alerts[code]
            _, clear_s, _, _ = cfg.for_code(code)
            if a.state == "pending":
                del self.alerts[code]
                continue
            if a.cleared_since is None:
                a.cleared_since = now
            if now - a.cleared_since >= clear_s:
                a.state, a.resolved_at = "resolved", now
                del self.alerts[code]
                out.append(Transition(a, "firing", "resolved", now))
        return out

    def firing(self) -> list[Alert]:
        """Alerts currently firing."""
        return [a for a in self.alerts.values() if a.state == "firing"]

    def gauges(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str, str], int]]:
        """(active findings by (code, severity), alerts by (code, severity, state)) for the exporter."""
        alerts: dict[tuple[str, str, str], int] = {}
        for a in list(self.alerts.values()):
            key = (a.code, a.severity, a.state)
            alerts[key] = alerts.get(key, 0) + 1
        return dict(self.active_findings), alerts


def _epoch(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, datetime):
        return v.timestamp()
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        try:
            return datetime.fromisoformat(v).timestamp()
        except ValueError:
            return None
    if isinstance(v, Mapping):  # {"ts": …, "line": …}
        return _epoch(v.get("ts"))
    return None


def _iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t).isoformat(timespec="milliseconds")


def _jsonable(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if hasattr(v, "to_dict"):
        return _jsonable(v.to_dict())
    return str(v)
