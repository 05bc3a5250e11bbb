"""Command-line interface: a thin layer over the library. Errors are translated here, once."""

from __future__ import annotations

import gc
import importlib
import sys

from ..errors import VllmlogError
from ._app import app

# One module per command group; each registers its commands on `app` when imported.
_COMMAND_MODULES = [
    "analyze_cmd",
    "capacity_cmd",
    "diagnose_cmd",
    "export_cmd",
    "fleet_cmd",
    "kinds_cmd",
    "metrics_cmd",
    "parse_cmd",
    "summary_cmd",
    "simulate_cmd",
    "watch_cmd",
]

# command → its module, so `vllmlog parse …` imports only what parse needs (start-up time counts on a hot path)
_COMMANDS = {
    "analyze": "analyze_cmd", "capacity": "capacity_cmd", "diagnose": "diagnose_cmd", "rules": "diagnose_cmd", "rule": "diagnose_cmd",
    "timeline": "diagnose_cmd", "export": "export_cmd", "fleet": "fleet_cmd", "kinds": "kinds_cmd", "scrape": "metrics_cmd",
    "alerts": "metrics_cmd", "dashboard": "metrics_cmd", "logging-config": "metrics_cmd", "lnav-format": "metrics_cmd",
    "metric-names": "metrics_cmd", "metrics-lint": "metrics_cmd", "parse": "parse_cmd", "simulate": "simulate_cmd",
    "summary": "summary_cmd", "requests": "summary_cmd", "series": "summary_cmd", "watch": "watch_cmd",
}


def load_commands(argv: list[str] | None = None) -> None:
    """Register the commands on ``app``: only the invoked one's module when ``argv`` names one, else all."""
    args = sys.argv[1:] if argv is None else argv
    first = next((a for a in args if not a.startswith("-")), None)
    names = [_COMMANDS[first]] if first in _COMMANDS else _COMMAND_MODULES
    for name in names:
        importlib.import_module(f"{__name__}.{name}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `vllmlog` console script."""
    try:
        load_commands(argv)
        gc.freeze()  # the modules just imported live as long as the process: keep them out of every collection
        try:
            app(args=argv, prog_name="vllmlog", standalone_mode=True)
        finally:
            sys.stdout.flush()  # here, not at exit: a full disk or a closed pipe is reported like any error
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
        _quiet_stdout()
        return 0
    except OSError as exc:  # -o /nonexistent/x, > /dev/full, a read-only target: one line, not a traceback
        import errno

        why = exc.strerror or str(exc)
        if exc.filename:
            print(f"error: {exc.filename}: {why}", file=sys.stderr)
        elif exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO):
            print(f"error: cannot write the output: {why}", file=sys.stderr)
        else:
            print(f"error: {why}", file=sys.stderr)
        _quiet_stdout()
        return 2
    return 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush of unwritable output raises nothing."""
    import os

    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass
