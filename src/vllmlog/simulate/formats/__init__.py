"""Log formats the simulator can write."""

from __future__ import annotations

from .base import LogWriter
from .handbook import HandbookWriter
from .v0 import V0Writer
from .v1 import V1Writer
from .v1_early import V1EarlyWriter
from .v1_json import V1JsonWriter
from .v1_mid import V1MidWriter

WRITERS: dict[str, type[LogWriter]] = {
    "handbook": HandbookWriter,
    "v0": V0Writer,
    "v1": V1Writer,
    "v1-0.15": V1MidWriter,
    "v1-0.10": V1EarlyWriter,
    "v1-json": V1JsonWriter,
}

