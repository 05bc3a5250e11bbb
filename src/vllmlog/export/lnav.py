"""lnav format definitions for vLLM text logs (every release) and vLLM JSON logs."""

from __future__ import annotations

import json
from typing import Any

TEXT_FORMAT = "vllm_log"
JSON_FORMAT = "vllm_json_log"

# Optional ANSI colour around the process prefix (0.4.3–0.15 colour it even in files, reference §1.4).
_ANSI = r"(?:\x1b\[[0-9;]*m)*"
_PROC = rf"(?:{_ANSI}\((?<proc>[^)]*?) pid=(?<pid>\d+)(?:, ip=[^)]*)?\){_ANSI} )?"
_LEVEL = r"(?<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)"
_TS = r"(?<timestamp>\d{2}-\d{2} \d{2}:\d{2}:\d{2})"

#: Regexes (PCRE, named groups as lnav wants them): V1 `[file.py:N]` (0.8+), V0 `file.py:N]`, uvicorn.
TEXT_REGEXES: dict[str, str] = {
    # 0.8.0+: `(APIServer pid=N) INFO 11-30 10:15:23 [loggers.py:312] msg` (process prefix optional)
    "v1_bracketed": rf"^{_PROC}{_LEVEL} {_TS} \[(?<src_file>[^\]\s:]+):(?<src_line>\d+)\] (?<body>.*)$",
    # 0.1–0.7.x: `INFO 03-25 10:15:23 llm_engine.py:706] msg` (workers prefixed from 0.4.3)
    "v0_plain": rf"^{_PROC}{_LEVEL} {_TS} (?<src_file>[^\]\s:]+):(?<src_line>\d+)\] (?<body>.*)$",
}


def build_lnav_format() -> dict[str, Any]:
    """The lnav format file content: one text format and one JSON-lines format."""
    return {
        "$schema": "https://lnav.org/schemas/format-v1.schema.json",
        TEXT_FORMAT: {
            "title": "vLLM server log",
            "description": "vLLM text logs, V0 `file.py:N]` and V1 `[file.py:N]` prefixes, with an optional "
                           "`(APIServer pid=N)` process prefix. Lines without vLLM's prefix (uvicorn access "
                           "lines, tracebacks, tqdm bars) attach to the previous message.",
            "url": "https://github.com/vllm-project/vllm",
            "regex": {k: {"pattern": v} for k, v in TEXT_REGEXES.items()},
            "timestamp-format": ["%m-%d %H:%M:%S"],
            "level-field": "level",
            "level": {"critical": "CRITICAL", "error": "ERROR", "warning": "WARNING", "info": "INFO",
                      "debug": "DEBUG"},
            "opid-field": "pid",
            "body-field": "body",
            "value": {
                "proc": {"kind": "string", "identifier": True},
                "pid": {"kind": "integer", "identifier": True},
                "src_file": {"kind": "string", "identifier": True},
                "src_line": {"kind": "integer", "foreign-key": True},
            },
            "sample": [
                {"line": "(APIServer pid=4127) INFO 11-30 10:15:23 [loggers.py:312] Engine 000: Avg prompt "
                         "throughput: 12.0 tokens/s, Avg generation throughput: 80.0 tokens/s, Running: 2 reqs, "
                         "Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%"},
                {"line": "INFO 03-25 10:15:23 [loggers.py:116] Avg prompt throughput: 0.0 tokens/s"},
                {"line": "INFO 03-25 10:15:23 llm_engine.py:706] Avg prompt throughput: 0.0 tokens/s"},
                {"line": "WARNING 03-25 10:15:23 scheduler.py:1057] Sequence group 3 is preempted by "
                         "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space."},
            ],
        },
        JSON_FORMAT: {
            "title": "vLLM JSON log",
            "description": "vLLM 0.32+ `--logging-config.formatter json`, or a python-json-logger dictConfig "
                           "from `vllmlog logging-config`.",
            "json": True,
            "file-pattern": r".*\.(?:json|jsonl|ndjson|log)$",
            "timestamp-field": "asctime",
            "timestamp-format": ["%Y-%m-%d %H:%M:%S,%L"],
            "level-field": "levelname",
            "body-field": "message",
            "opid-field": "request_id",
            "level": {"critical": "CRITICAL", "error": "ERROR", "warning": "WARNING", "info": "INFO",
                      "debug": "DEBUG"},
            "value": {
                "name": {"kind": "string", "identifier": True},
                "processName": {"kind": "string", "identifier": True},
                "vllm_process_name": {"kind": "string", "identifier": True},
                "process": {"kind": "integer", "identifier": True},
                "filename": {"kind": "string", "identifier": True},
                "lineno": {"kind": "integer"},
                "request_id": {"kind": "string", "identifier": True},
            },
            "line-format": [
                {"field": "__timestamp__"}, " ", {"field": "levelname"}, " ",
                {"field": "vllm_process_name", "default-value": ""}, " ",
                {"field": "message"},
            ],
        },
    }


def render_lnav_format() -> str:
    """The format file as JSON text."""
    return json.dumps(build_lnav_format(), indent=2) + "\n"
