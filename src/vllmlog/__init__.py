"""vllmlog — turn vLLM inference-server logs and metrics into answers."""

from __future__ import annotations

from .errors import ConfigError, InputError, VllmlogError
from .model import Event
from .reader import ParseStats, iter_batches, parse, to_frame

__version__ = "0.1.0"

__all__ = ["parse", "iter_batches", "to_frame", "ParseStats", "Event", "VllmlogError", "InputError", "ConfigError", "__version__"]
