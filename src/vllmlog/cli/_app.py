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


def _version(value: bool) -> None:
    if value:
        import platform

        from .. import __version__

        try:
            from .. import _speedups  # noqa: F401

            parser = "compiled fast path"
        except ImportError:
            parser = "pure-Python parser"
        typer.echo(f"vllmlog {__version__} (Python {platform.python_version()}, {parser})")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                 help="Print vllmlog's version and exit."),
) -> None:
    """vllmlog: what happened to each request, is the service healthy, what broke and which flag fixes it."""
