"""vLLM 0.32 with `--logging-config.formatter json`: one JSON object per record, millisecond timestamps.

Keys and their order follow the built-in format (`%(asctime)s %(levelname)s %(name)s %(processName)s
%(process)d %(message)s` through python-json-logger, plus `vllm_process_name`, and `exc_info` for
tracebacks); uvicorn's server and access loggers switch to JSON too (access messages carry no reason
phrase); tqdm bars, raw tracebacks and C++ output stay plain text, as in the real capture.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING

from .v1 import V1Writer

if TYPE_CHECKING:
    from ..model import SimRequest

LOGGERS = {
    "request_logger.py": "vllm.entrypoints.serve.utils.request_logger",
    "async_llm.py": "vllm.v1.engine.async_llm",
    "loggers.py": "vllm.v1.metrics.loggers",
    "core.py": "vllm.v1.engine.core",
    "core_client.py": "vllm.v1.engine.core_client",
    "multiproc_executor.py": "vllm.v1.executor.multiproc_executor",
    "kv_cache_utils.py": "vllm.v1.core.kv_cache_utils",
    "launcher.py": "vllm.entrypoints.launchers.launcher",
    "entry.py": "vllm.entrypoints.launchers.api_server.entry",
    "api_utils.py": "vllm.entrypoints.serve.utils.api_utils",
    "model.py": "vllm.config.model",
    "scheduler.py": "vllm.config.scheduler",
    "parallel_state.py": "vllm.distributed.parallel_state",
    "pynccl.py": "vllm.distributed.device_communicators.pynccl",
    "gpu_model_runner.py": "vllm.v1.worker.gpu_model_runner",
    "default_loader.py": "vllm.model_executor.model_loader.default_loader",
    "backends.py": "vllm.compilation.backends",
    "monitor.py": "vllm.compilation.monitor",
    "gpu_worker.py": "vllm.v1.worker.gpu_worker",
    "shm_broadcast.py": "vllm.distributed.device_communicators.shm_broadcast",
    "utils.py": "vllm.v1.engine.utils",
}


class V1JsonWriter(V1Writer):
    """vLLM 0.32.0 V1 server logging JSON lines (`--logging-config.formatter json`)."""

    name = "v1-json"

    def _asctime(self, t: float) -> str:
        d = self.clock.start + timedelta(seconds=t)
        return d.strftime("%Y-%m-%d %H:%M:%S") + f",{d.microsecond // 1000:03d}"

    def _proc(self, who: str, rank: int = 0) -> tuple[str, int, str]:
        """(processName, pid, vllm_process_name)."""
        if who == "api":
            return "MainProcess", self.api_pid, "APIServer"
        if who == "core":
            return "EngineCore", self.engine_pid, "EngineCore"
        return f"VllmWorker-{rank}", self.worker_pids[rank], "Worker" if self.tp == 1 else f"Worker_TP{rank}"

    def _json(self, t: float, level: str, logger: str, who: str, message: str, rank: int = 0,
              exc_info: str | None = None, extra: dict[str, str] | None = None) -> str:
        pname, pid, vname = self._proc(who, rank)
        d: dict[str, object] = {"asctime": self._asctime(t), "levelname": level, "name": logger,
                                "processName": pname, "process": pid, "message": message}
        if exc_info is not None:
            d["exc_info"] = exc_info
        d["vllm_process_name"] = vname
        if extra:
            d.update(extra)
        return json.dumps(d) + "\n"

    @staticmethod
    def _logger(where: str) -> str:
        if where.startswith("serving.py"):
            sub = "chat_completion" if where == "serving.py:929" else "completion"
            return f"vllm.entrypoints.openai.{sub}.serving"
        return LOGGERS.get(where.split(":")[0], "vllm." + where.split(".")[0])

    def line(self, t: float, who: str, level: str, where: str, msg: str, rank: int = 0) -> None:
        """One JSON record."""
        logger = self._logger(where)
        self.sink.emit(t, self._json(t, level, logger, who, msg, rank))

    def rec(self, t: float, who: str, level: str, where: str, lines: list[str], rank: int = 0) -> None:
        """A multi-line record stays one JSON object; a traceback goes to `exc_info`; the logo becomes one line."""
        if where == self.logo_where:
            self.sink.emit(t, self._json(t, level, LOGGERS["launcher.py"], who,
                                         f"vLLM server version {self.version}, serving model {self.cfg.engine.model}"))
            return
        logger = self._logger(where)
        if len(lines) > 1 and lines[1].startswith("Traceback"):
            self.sink.emit(t, self._json(t, level, logger, who, lines[0], rank, exc_info="\n".join(lines[1:])))
        else:
            self.sink.emit(t, self._json(t, level, logger, who, "\n".join(lines), rank))

    def raw(self, t: float, text: str, who: str | None = None) -> None:
        """uvicorn's own lines become `uvicorn.error` records; everything else stays plain text."""
        plain: list[str] = []
        for ln in text.rstrip("\n").split("\n"):
            if ln.startswith("INFO:     ") and who == "api":
                msg = ln[len("INFO:     "):]
                extra = None
                if msg.startswith("Started server process ["):
                    extra = {"color_message": "Started server process [\x1b[36m%d\x1b[0m]"}
                elif msg.startswith("Finished server process ["):
                    extra = {"color_message": "Finished server process [\x1b[36m%d\x1b[0m]"}
                if plain:
                    super().raw(t, "\n".join(plain))
                    plain = []
                self.sink.emit(t, self._json(t, "INFO", "uvicorn.error", "api", msg, extra=extra))
            else:
                plain.append(ln)
        if plain:
            super().raw(t, "\n".join(plain))

    def access(self, req: SimRequest, status: int, t: float = 0.0) -> str:
        """`uvicorn.access` record: no reason phrase in the JSON message."""
        return self._json(t, "INFO", "uvicorn.access", "api",
                          f'127.0.0.1:{req.port} - "POST {req.endpoint} HTTP/1.1" {status}')
