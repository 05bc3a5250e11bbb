"""`vllmlog parse`: logs → typed events."""
from __future__ import annotations

from ._app import app


@app.command("version")
def version() -> None:
    """Print vllmlog's version."""
    from .. import __version__

    print(__version__)
