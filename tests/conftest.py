"""Shared test fixtures: paths to the bundled corpus (a copy of ../shared/corpus inside the repo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def corpus_logs() -> list[Path]:
    """Every log file of the bundled corpus."""
    return sorted(CORPUS.glob("*/*.log"))


@pytest.fixture
def corpus() -> Path:
    return CORPUS


def require_tool(name: str) -> str:
    """Path of an external tool; a missing tool fails in CI (which installs it) and skips locally."""
    import shutil

    path = shutil.which(name)
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is not installed; .ci/run must install it")
        pytest.skip(f"{name} not installed")
    return path


# --- golden files (tests/golden/NN_slug/{input.log, events.jsonl}) -----------------------------------
GOLDEN = Path(__file__).parent / "golden"


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*/events.jsonl from the current parser (review the diff)")


@pytest.fixture
def update_golden(request) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    """A real headless Chromium for the HTML tests of one module (its own profile directory)."""
    from .chromium import Chromium

    b = Chromium(require_tool("chromium"), tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()
