"""vllmlog — turn vLLM inference-server logs and metrics into answers."""

from __future__ import annotations

from .errors import ConfigError, InputError, VllmlogError
from .model import Event

__version__ = "0.1.0"

__all__ = ["Event", "VllmlogError", "InputError", "ConfigError", "__version__"]
