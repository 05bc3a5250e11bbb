"""Request lifecycle lines: received, added, finished, aborted, failed, generated response (V0 and V1)."""

from __future__ import annotations

import re
from typing import Any

from .fields import to_int
from .registry import MESSAGES, LinePattern

_RID = r"(?P<request_id>\S+?)"
_MAXTOK = re.compile(r"\bmax_tokens=(\d+)")
_N = re.compile(r"SamplingParams\(n=(\d+)")
_IDS_LEN = re.compile(r"prompt_token_ids len: (\d+)")


def _received(f: dict[str, Any]) -> None:
    body = f.pop("body", "")
    m = _MAXTOK.search(body)
    if m:
        f["max_tokens"] = to_int(m.group(1))
    m = _N.search(body)
    if m:
        f["n"] = to_int(m.group(1))
    m = _IDS_LEN.search(body)
    if m:
        f["prompt_tokens"] = to_int(m.group(1))
    else:
        # what _IDS.search finds, without a regex scan from every occurrence to the end (quadratic)
        i = body.find("prompt_token_ids: [")
        j = body.find("]", i + 19) if i >= 0 else -1
        inner = body[i + 19 : j] if j >= 0 else None
        if inner is not None and "..." not in inner:
            inner = inner.strip()
            f["prompt_tokens"] = inner.count(",") + 1 if inner else 0


def _aborted_many(f: dict[str, Any]) -> None:
    ids = [x.strip() for x in f.pop("ids").split(",") if x.strip()]
    f["request_ids"] = ids
    if len(ids) == 1:
        f["request_id"] = ids[0]


def _generated(f: dict[str, Any]) -> None:
    mode = f.pop("mode", None)
    f["streaming"] = None if not mode else ("delta" if "delta" in mode else "complete")
    ids = f.pop("ids", None)
    if ids is not None and ids != "None":  # 0.32 prints `output_token_ids: None` for streamed summaries
        inner = ids.strip("[]").strip()
        f["output_tokens"] = inner.count(",") + 1 if inner else 0
    if f.get("finish_reason") == "None":
        f["finish_reason"] = None


def _status(value: str, reason: str | None = None):
    def post(f: dict[str, Any]) -> None:
        f["status"] = value
        if reason:
            f.setdefault("reason", reason)

    return post


for _p in [
    LinePattern(
        id="req.received",
        kind="request_received",
        prefix="Received request ",
        regex=rf"^Received request {_RID}: (?P<body>.*)$",
        post=_received,
        fast="Received request {request_id:id}: {_body:rest}",
        fast_post="received",
        examples=[
            "Received request cmpl-client-0000-f7697fb9-0: params: SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, repetition_penalty=1.0, temperature=0.8, top_p=1.0, max_tokens=32), lora_request: None.",
            "Received request cmpl-c8bb49209491882707ba5f0bc7597597-0: prompt len: 47918, params: SamplingParams(n=1, temperature=0.0, top_p=1.0, max_tokens=289), prompt_token_ids len: 11602, lora_request: None, prompt_adapter_request: None.",
            "Received request chat-1: prompt: 'hi', params: SamplingParams(n=1, max_tokens=16), prompt_token_ids: [1, 2, 3], lora_request: None, prompt_adapter_request: None.",
        ],
        doc="The API server accepted a request (request logging on): sampling params, sometimes prompt.",
        source="v0/v1",
    ),
    LinePattern(
        id="req.added",
        kind="request_added",
        prefix="Added request ",
        regex=rf"^Added request {_RID}\.$",
        fast="Added request {request_id:idend}.",
        examples=["Added request cmpl-client-0000-f7697fb9-0-a56e9542.", "Added request chat-e422b73b9b98d9f789f0c53b9dbeccbd."],
        doc="The request was handed to the engine (V1: engine-internal id `<id>-<8 hex>` from 0.14).",
        source="v0/v1",
    ),
    LinePattern(
        id="req.finished_v0",
        kind="request_finished",
        prefix="Finished request ",
        regex=rf"^Finished request {_RID}\.$",
        post=_status("success"),
        examples=["Finished request chat-e422b73b9b98d9f789f0c53b9dbeccbd."],
        doc="V0 AsyncLLMEngine: the request completed.",
        source="v0",
    ),
    LinePattern(
        id="req.aborted_v0",
        kind="request_aborted",
        prefix="Aborted request ",
        regex=rf"^Aborted request {_RID}\.$",
        post=_status("aborted"),
        examples=["Aborted request chat-517fa1bddf28d6f8f4f513932fa682f8."],
        doc="The request was aborted (client went away or cancelled).",
        source="v0/v1",
    ),
    LinePattern(
        id="req.aborted_many",
        kind="request_aborted",
        prefix="Aborted request(s) ",
        regex=r"^Aborted request\(s\) (?P<ids>.+?)\.?$",
        post=_aborted_many,
        fast="Aborted request(s) {_ids:rest}",
        fast_post="aborted_many",
        examples=["Aborted request(s) cmpl-client-0001-aa-0-1a2b3c4d.", "Aborted request(s) a-1, b-2."],
        doc="V1 (0.10.1+): engine-side abort of one or more requests.",
        source="v1",
    ),
    LinePattern(
        id="req.aborted_v1",
        kind="request_aborted",
        prefix="Request ",
        regex=rf"^Request {_RID} aborted\.$",
        post=_status("aborted"),
        examples=["Request cmpl-client-0007-abcd1234-0 aborted."],
        doc="V1 (0.8.5+): the API server saw the client abort the request.",
        source="v1",
    ),
    LinePattern(
        id="req.failed_engine_dead",
        kind="request_failed",
        prefix="Request ",
        regex=rf"^Request {_RID} failed \(engine dead\)\.$",
        post=_status("error", "engine_dead"),
        examples=["Request cmpl-client-0042-ab12cd34-0 failed (engine dead)."],
        doc="V1: the request failed because the engine died.",
        source="v1",
    ),
    LinePattern(
        id="req.failed_bad_request",
        kind="request_failed",
        prefix="Request ",
        regex=rf"^Request {_RID} failed \((?P<_kind>bad request|input error)\)(?:: (?P<error>.*?))?\.?$",
        post=_status("error", "bad_request"),
        examples=["Request cmpl-x-0 failed (bad request): max_tokens must be at least 1, got -5.", "Request cmpl-x-0 failed (bad request)."],
        doc="V1: the request was rejected as invalid.",
        source="v1",
    ),
    LinePattern(
        id="req.failed",
        kind="request_failed",
        prefix="Request ",
        regex=rf"^Request {_RID} failed(?: due to (?P<error>.*?))?\.$",
        post=_status("error"),
        examples=["Request cmpl-x-0 failed due to RuntimeError: boom.", "Request cmpl-x-0 failed."],
        doc="V1: the request failed.",
        source="v1",
    ),
    LinePattern(
        id="req.generated",
        kind="response_generated",
        prefix="Generated response ",
        regex=rf"^Generated response {_RID}(?P<mode> \(streaming delta\)| \(streaming complete\))?(?: details)?: (?:output: (?P<_out>.*?))?(?:, )?(?:output_token_ids: (?P<ids>\[[^\]]*\]|None))?(?:, )?(?:finish_reason: (?P<finish_reason>\w+))?$",
        post=_generated,
        fast="Generated response {_rest:rest}",
        fast_post="generated",
        examples=[
            "Generated response chatcmpl-client-0001-c735df5e (streaming complete): output: 'abc', output_token_ids: None, finish_reason: length",
            "Generated response chatcmpl-1: output: 'hello', output_token_ids: [1, 2, 3], finish_reason: stop",
            "Generated response chatcmpl-1 (streaming delta): output: 'x', finish_reason: None",
        ],
        doc="Request logger output line (--enable-log-outputs): marks completion (or a streamed delta).",
        source="v1",
    ),
    LinePattern(
        id="req.details",
        kind="request_details",
        prefix="Request ",
        regex=rf"^Request {_RID} (?:details|JSON body): (?P<_body>.*)$",
        examples=["Request cmpl-1 details: prompt: 'hi', prompt_token_ids: [1, 2], prompt_embeds shape: None."],
        doc="DEBUG request details (prompt) — prompt text is redacted in reports.",
        source="v1",
    ),
    LinePattern(
        id="req.exception_caught",
        kind="request_exception",
        prefix="",
        contains="Exception caught. Request id: ",
        # validation errors are raised before a request id exists: vLLM then prints `Request id: None`
        regex=rf"^(?:Engine )?Exception caught\. Request id: (?:None$|(?P<request_id>\S+))",
        examples=["Exception caught. Request id: cmpl-client-0003-aa-0", "Exception caught. Request id: None"],
        doc="--log-error-stack: an error response's traceback follows.",
        source="v1",
    ),
    LinePattern(
        id="req.stream_error",
        kind="stream_error",
        prefix="Error in ",
        regex=r"^Error in (?:chat )?completion stream generator\.?",
        examples=["Error in completion stream generator.", "Error in chat completion stream generator."],
        doc="A streaming response failed mid-stream (often after engine death).",
        source="v1",
    ),
    LinePattern(
        id="req.preprocess_error",
        kind="request_preprocess_error",
        prefix="Error in preprocessing",
        regex=r"^Error in preprocessing prompt inputs",
        examples=["Error in preprocessing prompt inputs"],
        doc="A request's prompt could not be preprocessed (e.g. too long); traceback follows.",
        source="v0/v1",
    ),
    LinePattern(
        id="req.queue_full",
        kind="request_rejected",
        prefix="",
        contains="rejecting request",
        regex=rf"^(?:Request queue full|Max queued tokens reached) - rejecting request {_RID} ",
        examples=["Request queue full - rejecting request cmpl-1 (current=10, n=1, max=10)."],
        doc="Admission control rejected a request (0.29+).",
        source="v1",
    ),
]:
    MESSAGES.add(_p)
