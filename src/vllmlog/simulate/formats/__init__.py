"""Log formats the simulator can write."""

from __future__ import annotations

from .base import LogWriter
from .handbook import HandbookWriter
from .v0 import V0Writer

WRITERS: dict[str, type[LogWriter]] = {
    "handbook": HandbookWriter,
    "v0": V0Writer,
}

try:  # V1 writers live in their own module
    from .v1 import V1EarlyWriter, V1Writer

    WRITERS["v1"] = V1Writer
    WRITERS["v1-0.10"] = V1EarlyWriter
except ImportError:  # pragma: no cover - during development only
    pass
