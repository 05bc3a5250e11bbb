"""Symptoms: what clients feel (dead, never ready, stalled, failing, rejected, queueing, thrashing, aborting,
slow), each with an onset, an end, a trend and evidence — detected from the service state, knowing nothing of
causes. ``detect(run)`` runs every detector over every server run."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from . import lifecycle, progress, requests  # noqa: F401  (register the detectors)
from .base import DEFAULT_CATEGORY, DETECTORS, IMPACT, KINDS, LEADS_TO, Symptom

if TYPE_CHECKING:  # pragma: no cover
    from ..run import Run

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_CATEGORY", "DETECTORS", "IMPACT", "KINDS", "LEADS_TO", "Symptom", "detect"]


def detect(run: Run, thresholds: dict | None = None) -> list[Symptom]:
    """Every symptom of every server run, worst first. ``thresholds``: the SLO-like targets (the handbook's
    ``waiting_s``, ``max_ttft_s``, ``min_generation_tps`` unless configured)."""
    from ..rules.config import HANDBOOK_THRESHOLDS
    from ..state import service_states

    opts = {**HANDBOOK_THRESHOLDS, **(thresholds or {})}
    out: list[Symptom] = []
    for st in service_states(run):
        for kind, fn in DETECTORS.items():
            try:
                out.extend(fn(run, st, opts))
            except Exception:  # a broken detector must not hide the others
                log.exception("symptom detector %s failed", kind)
    out.sort(key=Symptom.sort_key)
    return out
