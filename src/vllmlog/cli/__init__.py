"""Command-line interface: a thin layer over the library. Errors are translated here, once."""

from __future__ import annotations

import importlib
import sys

from ..errors import VllmlogError
from ._app import app

# One module per command group; each registers its commands on `app` when imported.
_COMMAND_MODULES = [
    "analyze_cmd",
    "diagnose_cmd",
    "export_cmd",
    "kinds_cmd",
    "metrics_cmd",
    "parse_cmd",
    "summary_cmd",
    "simulate_cmd",
    "watch_cmd",
]

for _name in _COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `vllmlog` console script."""
    try:
        app(args=argv, prog_name="vllmlog", standalone_mode=True)
    except SystemExit as exc:  # click exits through SystemExit in standalone mode
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    except VllmlogError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return 0
