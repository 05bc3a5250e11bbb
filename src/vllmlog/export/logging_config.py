"""A `VLLM_LOGGING_CONFIG_PATH` dictConfig that makes vLLM (0.4.3+) log JSON (or fully dated text)."""

from __future__ import annotations

import logging
import re
from typing import Any

from ..errors import ConfigError

#: Field names of vLLM 0.32+'s built-in JSON formatter, plus file/line (the reference §1.6).
JSON_FIELDS: tuple[str, ...] = ("asctime", "levelname", "name", "processName", "process", "filename", "lineno",
                                "message")
#: python-json-logger ≥ 3.1 moved the class; the old path still works there (deprecated) and in 2.x.
FORMATTER_CLASSES: dict[str, str] = {
    "new": "pythonjsonlogger.json.JsonFormatter",
    "legacy": "pythonjsonlogger.jsonlogger.JsonFormatter",
}
#: Loggers to route: vLLM's own and uvicorn's (access lines become JSON too).
LOGGERS: tuple[str, ...] = ("vllm", "uvicorn", "uvicorn.error", "uvicorn.access")

_REQUEST_ID = re.compile(r"\b(?:[Rr]equest(?:\(s\))?|response) ([A-Za-z0-9][\w.\-]*?)[.:,]?(?:\s|$)")


class RequestIdFilter(logging.Filter):
    """Adds `request_id` to records whose message names a request (needs vllmlog importable in vLLM's env)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Attach the request id (or None) and never drop the record."""
        if not hasattr(record, "request_id"):
            msg = record.getMessage()
            m = _REQUEST_ID.search(msg) if ("equest" in msg or "response" in msg) else None
            rid = m.group(1) if m else None
            record.request_id = rid if rid and any(c.isdigit() or c == "-" for c in rid) else None
        return True


def build_logging_config(fmt: str = "json", level: str = "INFO", formatter_class: str = "new",
                         request_ids: bool = False, stream: str = "ext://sys.stdout",
                         log_file: str | None = None) -> dict[str, Any]:
    """The dictConfig for `VLLM_LOGGING_CONFIG_PATH` (JSON lines, or text with year and milliseconds).

    With `log_file`, records go to that file (append, reopened after rotation) instead of stdout; this
    also keeps 0.10.1–0.30's `(APIServer pid=N) ` stdout wrapper from prefixing the JSON lines."""
    level = level.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ConfigError(f"unknown log level {level!r}", hint="use DEBUG, INFO, WARNING or ERROR")
    fields = list(JSON_FIELDS)
    if request_ids:
        fields.insert(-1, "request_id")
    if fmt == "json":
        if formatter_class not in FORMATTER_CLASSES:
            raise ConfigError(f"unknown formatter class {formatter_class!r}", hint="use new or legacy")
        formatter: dict[str, Any] = {"()": FORMATTER_CLASSES[formatter_class],
                                     "fmt": " ".join(f"%({f})s" for f in fields)}
    elif fmt == "text":
        # vLLM's own prefix, but with an ISO date and milliseconds (text logs otherwise lack the year).
        rid = "%(request_id)s " if request_ids else ""
        formatter = {"format": "%(levelname)s %(asctime)s.%(msecs)03d [%(filename)s:%(lineno)d] " + rid
                     + "%(message)s", "datefmt": "%Y-%m-%dT%H:%M:%S"}
    else:
        raise ConfigError(f"unknown log format {fmt!r}", hint="use json or text")
    handler: dict[str, Any]
    if log_file:
        handler = {"class": "logging.handlers.WatchedFileHandler", "formatter": "vllmlog", "level": level,
                   "filename": log_file, "mode": "a", "encoding": "utf-8"}
    else:
        handler = {"class": "logging.StreamHandler", "formatter": "vllmlog", "level": level, "stream": stream}
    cfg: dict[str, Any] = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"vllmlog": formatter},
        "handlers": {"console": handler},
        "loggers": {name: {"handlers": ["console"], "level": level, "propagate": False} for name in LOGGERS},
    }
    if request_ids:
        cfg["filters"] = {"request_id": {"()": f"{__name__}.RequestIdFilter"}}
        handler["filters"] = ["request_id"]
    return cfg
