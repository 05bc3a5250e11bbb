"""Issue 15, privacy: a prompt never survives in any output, whatever its shape, unless --show-prompts.

Redaction is by structure where the structure is known (an event's prompt-bearing fields, by name, whatever
their value's shape: ``Redactor.fields``) and by pattern in text (``prompt='…'``, ``Prompt:``/``Output:``,
``input: '…'``, ``content='…'``, bytes / list / tuple values, escaped quotes and multi-line prompts in JSON
strings, ``Authorization: Bearer …``, ``'api_key': ['sk-…']``). A property test generates prompts of every
shape; a corpus log carrying them goes through every command and exporter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllmlog.cli import main
from vllmlog.redact import DEFAULT, Redactor

from .conftest import CORPUS

LIGHT = CORPUS / "vllm-cpu" / "01-startup-and-light-load.log"
MARK = "Zq7SECRET"

_CHARS = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"), max_size=40)


def _shapes(p: str) -> list[str]:
    """One prompt ``p`` (contains MARK) as vLLM, clients and proxies print it."""
    one = p.replace("\n", " ")
    return [
        f"Received request cmpl-1: prompt: {p!r}, params: SamplingParams(n=1, max_tokens=16), prompt_token_ids: None",
        f"Received request cmpl-1: prompt={p!r}, params=SamplingParams(n=1)",
        f"Prompt: {one}",
        f"Output: {one}",
        f"input: {p!r}",
        f"content={p!r}",
        f"prompt: {p.encode()!r}",
        f"prompt: [{p!r}, 'x']",
        f"prompt: ({p!r},)",
        "JSON body: " + json.dumps({"prompt": p, "max_tokens": 5}),
        "error: " + json.dumps({"detail": [{"loc": ["body", "messages"], "input": p}]}),
        json.dumps({"messages": [{"role": "user", "content": p}], "model": "m"}),
        "Value error, " + json.dumps(json.dumps({"prompt": p})),  # a JSON string inside a JSON string
        f"Generated response cmpl-1: output: {p!r}, output_token_ids: [1, 2], finish_reason: stop",
    ]


SECRETS = [f"Authorization: Bearer {MARK}abc123", f"{{'api_key': ['sk-{MARK}abcdef']}}", f"hf_token={MARK}xyz",
           f"headers: {{'authorization': 'Bearer {MARK}q'}}"]


@settings(max_examples=150, deadline=None)
@given(a=_CHARS, b=_CHARS)
def test_no_prompt_shape_survives(a: str, b: str) -> None:
    p = a + MARK + b
    for shape in _shapes(p):
        assert MARK not in DEFAULT(shape), shape
        assert MARK in Redactor(show_prompts=True)(shape) or "Bearer" in shape


def test_secrets_always_masked() -> None:
    for s in SECRETS:
        assert MARK not in DEFAULT(s), s
        assert MARK not in Redactor(show_prompts=True)(s), s


def test_structure_redacts_fields_of_any_shape() -> None:
    f = DEFAULT.fields({"prompt": [1, 2, MARK], "messages": [{"content": MARK}], "max_tokens": 5, "note": f"prompt: {MARK!r}"})
    assert MARK not in json.dumps(f) and f["max_tokens"] == 5


def _leaky_log(tmp_path: Path) -> Path:
    lines = LIGHT.read_text().splitlines()
    env = "(APIServer pid=31488) {lvl} 11-30 02:59:5{i} [serving.py:1] {msg}"
    extra = []
    p = f"tell me\nabout 'x' \"{MARK}\" ok"
    for i, s in enumerate(_shapes(p) + SECRETS):
        first, *rest = s.split("\n")
        extra.append(env.format(lvl="WARNING" if i % 2 else "ERROR", i=i % 10, msg=first))
        extra += rest  # a multi-line prompt continues on raw lines of the same record
    out = tmp_path / "leaky.log"
    out.write_text("\n".join(lines + extra) + "\n")
    return out


CMDS = [["export"], ["export", "--to", "loki"], ["summary"], ["summary", "--json"], ["timeline"], ["timeline", "--json"],
        ["analyze", "--json", "--no-html"], ["diagnose"], ["diagnose", "--json"], ["requests", "--format", "json"]]


@pytest.mark.parametrize("cmd", CMDS, ids=[" ".join(c) for c in CMDS])
def test_no_prompt_in_any_output(tmp_path: Path, cmd: list[str], capfd) -> None:
    log = _leaky_log(tmp_path)
    rc = main(cmd + [str(log)])
    out, err = capfd.readouterr()
    assert rc in (0, 1), err[-2000:]
    assert MARK not in out and MARK not in err, [ln for ln in (out + err).splitlines() if MARK in ln][:3]


def test_show_prompts_keeps_them_in_export(tmp_path: Path, capfd) -> None:
    log = _leaky_log(tmp_path)
    assert main(["export", str(log), "--show-prompts"]) == 0
    out = capfd.readouterr().out
    assert MARK in out
    assert f"sk-{MARK}" not in out  # secrets stay masked
