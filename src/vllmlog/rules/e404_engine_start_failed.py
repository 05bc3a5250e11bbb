"""E404 engine-start-failed."""

from __future__ import annotations

import re
from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register
from .s102_startup_worker_killed import killed_workers

#: Kinds another start-up rule explains (this rule is the fallback when none is present).
EXPLAINED = ("cuda_oom", "kv_cache_insufficient", "kv_cache_no_memory", "insufficient_free_memory", "model_load_error",
             "config_error", "max_model_len_too_large", "port_in_use", "nccl_timeout", "nccl_error")
#: failures that only a start-up raises (kept when a restart in the same file then served)
_RESTARTED_FAIL = ("engine_start_failed", "engine_start_timeout")
_FAIL = ("engine_start_failed", "process_crashed", "engine_start_timeout", "engine_fatal", "worker_exception",
         "worker_died", "engine_dead", "memory_profiling_error")


_CONFIG_FRAMES = re.compile(r"arg_utils\.py|create_engine_config|/config\.py|config/\w+\.py|__post_init__|_verify_args|"
                            r"verify_with_parallel_config|ValidationError")
_MEMORY = re.compile(r"out of memory|not enough (?:GPU )?memory|memory utilization|insufficient memory|"
                     r"RESOURCE_EXHAUSTED|Ran out of memory|out of (?:device|HBM) memory|OutOfMemoryError", re.I)
_LOAD = re.compile(r"model_loader|load_weights|safetensors|from_pretrained|hf_hub|huggingface_hub|weight_utils|"
                   r"AutoConfig|configuration_auto|transformers_utils/config|Unrecognized model|tokenizer", re.I)

#: The device runtime, driver or compiled kernels do not match the hardware: an environment/build problem (the
#: wrong wheel, container or toolchain for this GPU), not the engine — fixed by installing a matching build.
_PLATFORM = re.compile(r"(?:hip|cuda|rocm) runtime failed to load|provide architecture for which code is to be generated|"
                       r"no kernel image is available for execution|invalid device function|hipErrorNoBinaryForGpu|"
                       r"CUDA driver version is insufficient|Found no NVIDIA driver|Unsupported gpu architecture|"
                       r"No CUDA GPUs are available|no CUDA-capable device is detected|"
                       r"is not compatible with the current PyTorch installation|undefined symbol: \w{1,200}|"
                       r"compute capability \S{1,10} (?:is )?(?:not supported|below)|"
                       r"(?:lib(?:cudart|cublas|nccl|amdhip64)\S{0,20}\.so\S{0,10}): cannot open shared object", re.I)

#: The platform check found no device at all (visibility, not a build mismatch).
_NO_DEVICE = re.compile(r"No CUDA GPUs are available|no CUDA-capable device is detected|Found no NVIDIA driver", re.I)

#: A ValueError's own words for a violated constraint on the arguments.
_CONFIG_MSG = re.compile(r"is greater than (?:the )?(?:max|--max)[_-]\w+|exceeds (?:the )?(?:max|--max)[_-]\w+|"
                         r"must be (?:divisible|less|greater|at (?:least|most)|one of|a multiple|between|positive|"
                         r"non-negative|<=?|>=?)|is not divisible|is not supported (?:for|with|by|when)|"
                         r"not (?:yet )?supported (?:with|for|when|on|by)|invalid (?:value|choice|argument)|unrecognized argument", re.I)


#: The words of an exception that only reports another one (the frontend or the engine core saying a child failed).
_WRAPPER = re.compile(r"initiali[sz]ation failed|died before responding|See (?:the )?(?:stack trace|root cause)|"
                      r"failed to start|Failed core proc|exception in a background process|process died", re.I)
_CHAIN = re.compile(r"^((?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt))(?::\s?(.*))?$", re.S)


def _root_exception(fails: list, root: Any) -> tuple[Any, str | None, str | None]:
    """The exception that caused the start-up failure: in line order, the first one whose message is not a
    wrapper's ('Engine core initialization failed. See root cause above', 'WorkerProc initialization failed …',
    'process died before responding …') — also inside a record that holds two processes' tracebacks (its
    ``exc_chain``) — a worker's bare ``AssertionError`` included; else the first with a message."""
    for e in fails:
        chain = [str(c) for c in (e.fields.get("exc_chain") or [])]
        if not chain and e.fields.get("exc_type"):
            chain = [f"{e.fields.get('exc_type')}: {e.fields.get('exc_message') or ''}"]
        for c in chain:
            m = _CHAIN.match(c.strip())
            if m and not _WRAPPER.search(m.group(2) or ""):
                return e, m.group(1), (m.group(2) or "").strip() or None
    e = next((e for e in fails if e.fields.get("exc_message") and e.kind != "engine_start_timeout"), root)
    return e, e.fields.get("exc_type"), e.fields.get("exc_message")


def _infer(e, xt: str | None = None, xm: str | None = None) -> str:
    """Best category for an unrecognised start-up exception, from its type, message and frames."""
    xt = str(xt if xt is not None else e.fields.get("exc_type") or "")
    xm = str(xm if xm is not None else e.fields.get("exc_message") or "")
    if _MEMORY.search(xm):
        return "startup_oom"
    if "ValueError" in xt and u.LENGTH_TEXT.search(xm):
        return "request_too_long"  # an offline LLM.generate given a prompt longer than the model's context
    if e.kind == "engine_start_timeout" or "TimeoutError" in xt:
        return "engine_hang"
    if _PLATFORM.search(e.text[-4000:]) or _PLATFORM.search(xm):
        return "config_error"
    if _LOAD.search(e.text) and "Error" in xt and not _CONFIG_FRAMES.search(e.text.split("\n")[-1]):
        return "model_load_failure"
    if (any(t in xt for t in ("ValueError", "TypeError", "ValidationError", "NotImplementedError", "AttributeError"))
            and _CONFIG_FRAMES.search(e.text)) or (any(t in xt for t in ("ValueError", "AssertionError", "NotImplementedError"))
                                                  and _CONFIG_MSG.search(xm)):
        # raised while the engine's configuration was built — or a ValueError (an assertion, a NotImplementedError)
        # worded as a violated constraint or an unsupported combination of the
        # arguments, when the traceback's frames were cut from the log (a crash loop's repeats, a pasted excerpt)
        return "config_error"
    if "NCCL" in xm or "nccl" in e.text.lower() and "Dist" in xt:
        return "distributed_nccl"
    return "engine_dead"


@register
class EngineStartFailed(Rule):
    """## What it detects
    The engine fails to start (``EngineCore failed to start``, ``Engine core initialization failed``,
    ``Engine process failed to start``, ``Timed out waiting for engine core processes to start``) and no
    more specific start-up rule recognised the cause. The first exception of the engine process is
    quoted.
    ## Why it matters
    The server never becomes ready.
    ## How to fix
    Read the first traceback above the failure (the finding points at it); ``VLLM_LOGGING_LEVEL=DEBUG``
    shows more; for slow weight loading raise ``VLLM_ENGINE_READY_TIMEOUT_S``."""

    code, slug, category, severity = "E404", "engine-start-failed", "engine_dead", Severity.CRITICAL
    title = "Engine failed to start"
    explains = ("never_ready",)
    fallback = True
    options: dict[str, Any] = {}
    consequence_of = ("startup_oom", "kv_cache_capacity_error", "model_load_failure", "config_error", "distributed_nccl")

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            if u.was_serving(v):
                # a start-up that failed outright, then a restart in the same file that served (one server run
                # when the failed start never became ready): the unambiguous start-up failures before the restart
                rst = [e.line for e in v.of("server_version", "server_args", before=v.ready_line)] if v.ready_line else []
                fails = [e for e in v.of(*_RESTARTED_FAIL, before=rst[-1]) if not v.in_shutdown(e.line)] if rst else []
                if not fails:
                    continue
            else:
                # a more specific start-up rule may explain the same failure: both are proposed, and the incident
                # takes the specific one (this rule is a fallback explainer)
                if killed_workers(v, serving=False):
                    continue
                fails = [e for e in v.of(*_FAIL) if not v.in_shutdown(e.line)]
                # an unrecognised traceback that ends the start-up (nothing but shutdown after it)
                fails += [e for e in v.of("traceback") if e.fields.get("exc_type") and e.line_end >= v.srv.last_line - 40
                          and not v.in_shutdown(e.line) and e not in fails]
            # a worker-only log whose API server (another input) was serving then: a runtime failure, not a start-up
            fails = [e for e in fails if not (v.ready_line is None and v.peer_serving and u.while_serving(v, e))]
            fails.sort(key=lambda e: e.line)
            if not fails:
                continue
            root = fails[0]
            exc, xt, xm = _root_exception(fails, root)
            if any(e.kind == "engine_start_timeout" for e in fails) and not exc.fields.get("exc_message"):
                exc = next(e for e in fails if e.kind == "engine_start_timeout")
                xt, xm = exc.fields.get("exc_type"), exc.fields.get("exc_message")
            timeout = any(e.kind == "engine_start_timeout" for e in fails)
            msg = xm or u.msg_of(exc)
            cat = _infer(exc, xt, xm)
            yield self.finding(
                category=cat,
                message=f"Engine failed to start: {str(xt or '').rsplit('.', 1)[-1]}"
                f"{': ' if xt and msg else ''}{str(msg)[:160]}"
                + ("" if cat == self.category else f" (classified as {cat} from the exception)"),
                evidence=u.dedupe([u.first(root), u.ev(exc)] + u.startup_failure_lines(v, root.line_end)),
                first_seen=root.ts, last_seen=fails[-1].ts, count=len(fails), file=v.file, process=root.process,
                server=v.index,
                root_cause="The engine process raised during initialisation" + (" or did not become ready in time." if timeout else "."),
                remediation={
                    "config_error": ("The process sees no GPU: give the container / pod its GPUs (`--gpus`, "
                                     "`nvidia.com/gpu`), check `CUDA_VISIBLE_DEVICES`, and under Ray make sure the "
                                     "process that builds the engine holds GPUs (`num_gpus`, the placement group), then "
                                     "restart." if _NO_DEVICE.search(exc.text[-4000:]) or _NO_DEVICE.search(str(msg)) else
                                     "Install a vLLM / PyTorch / Triton build made for this device (the official "
                                     "container for the platform, or the target architecture set for the toolchain, "
                                     "e.g. `PYTORCH_ROCM_ARCH` / `TORCH_CUDA_ARCH_LIST`), then restart."
                                     if _PLATFORM.search(exc.text[-4000:]) or _PLATFORM.search(str(msg)) else
                                     "Fix the argument combination named in the error (the message says which flag "
                                     "to raise or lower), then restart."),
                    "startup_oom": "Free device memory or lower `--gpu-memory-utilization`, `--max-model-len`, "
                                   "`--max-num-seqs`; check `nvidia-smi` for other processes.",
                    "model_load_failure": "Check the model path, revision and weight files named in the error.",
                }.get(cat, ("Raise `VLLM_ENGINE_READY_TIMEOUT_S` (slow weight loading) and check storage speed; " if timeout else "")
                    + "read the first traceback of the engine/worker process; rerun with `VLLM_LOGGING_LEVEL=DEBUG`."),
                data={"exc_type": exc.fields.get("exc_type")},
            )
