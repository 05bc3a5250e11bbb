"""The Typer application object shared by every command module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="vllmlog",
    help="Turn vLLM server logs and metrics into answers: journeys, metrics, diagnosis, timelines, monitoring.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


@app.callback()
def _root() -> None:
    """vllmlog: what happened to each request, is the service healthy, what broke and which flag fixes it."""
