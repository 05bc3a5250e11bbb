"""Scrape vLLM `/metrics` targets (or read saved snapshots) and judge them."""

from __future__ import annotations

import re
import time as _time
from collections.abc import Callable

import httpx

from ..errors import ConfigError, InputError
from .exposition import Snapshot, load_snapshot_files, parse_exposition
from .judge import judge
from .report import TargetReport, summarize


def parse_duration(text: str) -> float:
    """Parse "10s", "2m", "1h", "500ms" or a bare number of seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", str(text))
    if not m:
        raise ConfigError(f"not a duration: {text!r}", hint="use e.g. 10s, 2m, 1h")
    mult = {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    return float(m.group(1)) * mult


def normalize_url(url: str) -> str:
    """Accept host:port or a base URL and point it at /metrics."""
    if "://" not in url:
        url = "http://" + url
    if not re.search(r"://[^/]+/.+", url):
        url = url.rstrip("/") + "/metrics"
    return url


def fetch_snapshot(client: httpx.Client, url: str) -> Snapshot:
    """GET one exposition; raise InputError with the reason on any failure."""
    t = _time.time()
    try:
        resp = client.get(url)
    except httpx.HTTPError as exc:
        raise InputError(f"{url}: {type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200:
        raise InputError(f"{url}: HTTP {resp.status_code}")
    return parse_exposition(resp.text, url, t)


def scrape_targets(urls: list[str], interval_s: float = 10.0, count: int = 2, timeout_s: float = 5.0,
                   thresholds: dict[str, float] | None = None,
                   sleep: Callable[[float], None] = _time.sleep) -> list[TargetReport]:
    """Scrape every URL `count` times, `interval_s` apart, and return one judged report per target."""
    if count < 1:
        raise ConfigError("--count must be at least 1")
    targets = [normalize_url(u) for u in urls]
    snaps: dict[str, list[Snapshot]] = {u: [] for u in targets}
    errors: dict[str, str] = {}
    with httpx.Client(timeout=timeout_s, follow_redirects=True) as client:
        for i in range(count):
            started = _time.monotonic()
            for u in targets:
                try:
                    snaps[u].append(fetch_snapshot(client, u))
                    errors.pop(u, None)
                except InputError as exc:
                    errors[u] = exc.message.split(": ", 1)[-1]
            if i + 1 < count:
                sleep(max(0.0, interval_s - (_time.monotonic() - started)))
    reports = []
    for u in targets:
        reports.append(build_report(u, snaps[u], thresholds, error=errors.get(u)))
    return reports


def scrape_files(paths: list[str], thresholds: dict[str, float] | None = None,
                 interval_s: float = 10.0) -> list[TargetReport]:
    """Judge saved snapshots (in time order) as one target."""
    snaps = load_snapshot_files(list(paths), interval_s)
    return [build_report(str(paths[0]), snaps, thresholds)]


def build_report(target: str, snaps: list[Snapshot], thresholds: dict[str, float] | None = None,
                 error: str | None = None) -> TargetReport:
    """Summarise and judge one target (an unreachable target still gets a report with a finding)."""
    if snaps:
        rep = summarize(target, snaps)
    else:
        from .versions import VersionGuess
        rep = TargetReport(target=target, snapshots=[], version=VersionGuess(None, None, None))
    rep.error = error
    if not snaps:
        rep.notes.append("no successful scrape")
        rep.findings = judge_unreachable(rep, thresholds)
    else:
        rep.findings = judge(rep, thresholds)
    return rep


def judge_unreachable(rep: TargetReport, thresholds: dict[str, float] | None) -> list[dict]:
    """Only the reachability check applies to a target with no snapshot."""
    from .judge import CHECKS, DEFAULT_THRESHOLDS

    th = {**DEFAULT_THRESHOLDS, **(thresholds or {})}
    return list(CHECKS["M102"].detect(rep, th))
