"""Small, specific exceptions. The CLI turns them into `error: …` / `hint: …` lines in one place."""

from __future__ import annotations


class VllmlogError(Exception):
    """Base class for every error vllmlog raises on purpose; carries an optional ``hint``."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class InputError(VllmlogError):
    """An input path cannot be read as a log (missing, a directory, binary, unreadable)."""


class ConfigError(VllmlogError):
    """A configuration file or option value is invalid."""


class UnknownFormatError(VllmlogError):
    """Nothing in the input looks like a vLLM log."""
