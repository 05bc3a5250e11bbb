"""vllmlog — turn vLLM inference-server logs and metrics into answers."""

from __future__ import annotations

from .errors import ConfigError, InputError, VllmlogError
from .model import Event
from .reader import ParseStats, iter_batches, parse, to_frame


def __getattr__(name: str):  # heavier parts load on first use
    import importlib

    if name in ("Pipeline", "Run", "load"):
        return getattr(importlib.import_module(".run", __name__), name)
    if name in ("Finding", "Severity"):
        return getattr(importlib.import_module(".rules.base", __name__), name)
    if name == "Analysis":
        return importlib.import_module(".analyze", __name__).Analysis
    raise AttributeError(f"module 'vllmlog' has no attribute {name!r}")


# Functions live in their modules (names shared with the module would shadow it):
#   from vllmlog.diagnose import diagnose; from vllmlog.analyze import analyze
#   from vllmlog.summary import summarize; from vllmlog.timeline import build_timeline

__version__ = "0.1.0"

__all__ = ["parse", "load", "Run", "Pipeline", "Finding", "Severity", "Analysis", "iter_batches", "to_frame", "ParseStats", "Event", "VllmlogError", "InputError", "ConfigError", "__version__"]
