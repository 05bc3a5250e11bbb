"""The envelope: wrappers (docker compose, kubectl, Ray), ANSI codes, process tags, and vLLM's
``LEVEL MM-DD HH:MM:SS [file.py:N] message`` prefix (V0 without brackets, V1 with), uvicorn's
``INFO:     message``, and JSON log records."""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# docker compose: "vllm-1  | ", "vllm_server_1 | "
DOCKER = re.compile(r"^[A-Za-z0-9][\w.-]{0,62}\s*\| ")
# kubectl logs --prefix: "[pod/vllm-7d9f-x2/vllm] " (before the --timestamps stamp when both are given)
#: A log console's export (Anyscale / Ray dashboard): "U | 2026-07-18 11:27:50.068 | worker |   | <line>" —
#: an optional stream letter, the collector's timestamp, the component, a free column.
CONSOLE = re.compile(r"^(?:[A-Z] \| )?(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d{1,9})?) \| [\w.:-]{1,40} \| [^|]{0,60}\| ")
K8S_PREFIX = re.compile(r"^\[pod/[^\s/\]]+/[^\s\]]+\] ")
# journalctl (short format): "Apr 18 09:00:00 gpu-node-3 vllm[2211]: "
JOURNAL = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? [\w.-]+ ([\w./@:-]+?)(?:\[(\d+)\])?: ")
# kubectl logs --timestamps / docker logs -t: RFC 3339 prefix
K8S_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?) ")
# (APIServer pid=1), (VllmWorker rank=0 pid=7), (RayWorkerWrapper pid=9, ip=10.0.0.2)
PROC = re.compile(r"^\(([^()]*?\bpid=\d+[^()]*)\)\s?")
#: Ray's actor tag around a vLLM line, the actor's name with parentheses of its own:
#: "(MapWorker(MapBatches(vLLMEngineStageUDF)) pid=162837) (Worker pid=186718) ERROR …" — the inner tag is vLLM's.
RAY_ACTOR = re.compile(r"^\(((?:[^()]|\((?:[^()]|\([^()]{0,200}\)){0,200}\)){0,400}?\bpid=\d+[^()]{0,200})\)\s?")
# torch.distributed's per-rank stderr prefix on Python output: "[rank0]: Traceback …" (a colon and a space; the
# C++ log lines "[rank0]:[E1110 …] …" have no space and keep their prefix, their patterns read it)
TORCH_RANK = re.compile(r"^\[rank(\d+)\]:(?: |$)")  # an empty line of the stream may have lost its space
RAY_REPEAT = re.compile(r"(?<!\s)\s*\[repeated (\d{1,18})x across cluster\]\s*$")
# vLLM's prefix: "LEVEL MM-DD HH:MM:SS [file.py:N] msg"; also with fractional seconds (",123" / ".123456")
# and with a year ("LEVEL 2026-12-01T18:31:27.123 [file.py:N] msg": `vllmlog logging-config --format text`)
VLLM = re.compile(
    r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL|WARN|FATAL) (?:(\d{4})-)?(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?"
    r" \[?([^\]\s]+?:\d+)\] ?(.*)$",
    re.S,
)
# Python logging's classic "%(asctime)s - %(name)s - %(levelname)s - %(message)s" (custom dictConfigs of
# wrappers such as LLaMA-Factory, gpustack, KServe): "2024-12-20 15:02:07,123 - vllm.engine.metrics - INFO - msg"
PYLOG = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))? - ([\w.]+) - (DEBUG|INFO|WARNING|ERROR|CRITICAL) - (.*)$",
    re.S,
)
# FastChat's workers log "%(asctime)s | %(levelname)s | %(name)s | %(message)s" and capture vLLM's stdout/stderr
# through it: "2026-12-27 10:02:05 | INFO | stdout | INFO 12-27 10:02:05 llm_engine.py:73] …"
FASTCHAT = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \| (DEBUG|INFO|WARNING|ERROR|CRITICAL) \| ([\w.-]+) \| ")
# loguru's default "{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} - {message}" (API wrappers
# around vLLM such as api-for-open-llm): "2024-06-14 10:32:19.147 | ERROR    | api.routes.chat:create:112 - msg"
LOGURU = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.(\d{1,6}) \| (TRACE|DEBUG|INFO|SUCCESS|WARNING|ERROR|CRITICAL) {0,8}\| "
                    r"([\w.<>-]{1,200})(?::[\w.<>-]{1,200}:\d{1,9})? - ")
UVICORN = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL|TRACE):\s+(.*)$", re.S)
EXC_LINE = re.compile(
    # Ray prints the remote exception's type after its own: "ray.exceptions.RayTaskError(RuntimeError): …"
    r"^((?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Timeout|Cancelled|Fault)|Exception)"
    r"(?:\([A-Za-z_][\w.]*\))?)(?::\s?(.*))?$"
)
TB_STARTS = (
    "Traceback (most recent call last)",
    "During handling of the above exception",
    "The above exception was the direct cause",
    "Stack (most recent call last)",
    "^",
    "~",
    "+",
    "|",
)


def is_tb_continuation(msg: str) -> bool:
    """True when a message looks like part of a Python traceback."""
    if not msg:
        return True
    c = msg[0]
    if c == " " or c == "\t":
        return True
    if msg.startswith(TB_STARTS):
        return True
    return EXC_LINE.match(msg) is not None
