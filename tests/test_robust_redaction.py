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
        # pydantic's validation error (vLLM's 400s), prefixed / suffixed names
        f"Input should be a valid list [type=list_type, input_value={p!r}, input_type=str]",
        f"[type=dict_type, input_value={{'x': {p!r}}}, input_type=dict]",
        f"system_prompt: {p!r}",
        f"input_text={p!r}",
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


def test_shapes_cut_short_are_redacted() -> None:
    """A message is often shortened (a finding's headline keeps 160 characters) before it is redacted: a shape cut
    anywhere after its prompt started leaks nothing (a list cut inside its string left the string: E403's alert)."""
    p = f"tell me about 'x' \"{MARK}\" \\ ok"
    for shape in _shapes(p) + [f"messages=[{{'role': 'system', 'content': {p!r}}}], system_prompt: {p!r}"]:
        for k in range(shape.index(MARK) + len(MARK), len(shape) + 1):
            assert MARK not in DEFAULT("while serving " + shape[:k]), shape[:k]


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


CMDS = [["parse"], ["parse", "--jsonl", "--stats"], ["export"], ["export", "--to", "loki"], ["summary"], ["summary", "--json"], ["timeline"], ["timeline", "--json"],
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


def test_parse_keeps_prompts_only_when_asked(tmp_path: Path, capfd) -> None:
    """``parse`` writes every line's text: redacted like every other output, unless --show-prompts (secrets stay
    masked); a line nothing is redacted in is written byte for byte as before."""
    log = _leaky_log(tmp_path)
    assert main(["parse", str(log), "--show-prompts"]) == 0
    kept = capfd.readouterr().out
    assert MARK in kept and f"sk-{MARK}" not in kept
    assert main(["parse", str(log)]) == 0
    red = capfd.readouterr().out
    assert MARK not in red and "[redacted]" in red
    a, b = kept.splitlines(), red.splitlines()
    assert len(a) == len(b)
    same = 0
    for x, y in zip(a, b):
        ex, ey = json.loads(x), json.loads(y)
        assert ex.keys() == ey.keys() and ex["line"] == ey["line"]
        if ex == ey:  # nothing redacted: the very bytes the parser wrote
            assert x == y
            same += 1
    assert 0 < same < len(a)


def test_parallel_parse_redacts_as_one_process(tmp_path: Path, monkeypatch) -> None:
    import os

    from vllmlog.parsing import parallel
    from vllmlog.reader import write_jsonl

    monkeypatch.setattr(parallel, "MIN_PARALLEL_BYTES", 1)
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 16 * 1024)
    log = _leaky_log(tmp_path)
    log.write_text(log.read_text() * 8)
    outs = []
    for jobs in (1, 2):
        o = tmp_path / f"o{jobs}"
        fd = os.open(o, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        write_jsonl(str(log), fd, year=2026, jobs=jobs, redactor=DEFAULT)
        os.close(fd)
        outs.append(o.read_bytes())
    assert outs[0] == outs[1] and MARK.encode() not in outs[1] and b"[redacted]" in outs[1]


def _crash_quoting(tmp_path: Path, tail: str) -> Path:
    """A real engine death (P1) whose crash line — the incident's headline and evidence — quotes ``tail``."""
    lines = (CORPUS / "vllm-cpu-faults" / "P1-engine-dead-kill9.log").read_text().split("\n")
    i = next(i for i, t in enumerate(lines) if "engine core exited unexpectedly" in t)
    lines[i] += " " + tail
    out = tmp_path / "crash.log"
    out.write_text("\n".join(lines))
    return out


@pytest.mark.parametrize("shape", [0, 2, 9, 12])  # SamplingParams record, 'Prompt:' label, JSON body, JSON in JSON
def test_watch_alerts_carry_no_prompt(tmp_path: Path, shape: int) -> None:
    """watch's notifications (stdout JSON here; Alertmanager and webhooks send the same alert) quote the crash
    line: its prompt is redacted, unless --show-prompts, and its secrets always masked."""
    import subprocess
    import sys

    prompt = _shapes(f"tell me {MARK} now")[shape].replace("\n", " ")
    log = _crash_quoting(tmp_path, f"while serving {prompt} {SECRETS[1]}")
    cmd = [sys.executable, "-m", "vllmlog", "watch", str(log), "--listen", "off", "--exit-at-eof"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    firing = [json.loads(x) for x in out.splitlines() if '"firing"' in x]
    assert firing and firing[0]["alert"]["code"] == "E403", out[-2000:]
    assert MARK not in out, [ln[:300] for ln in out.splitlines() if MARK in ln][:2]
    if shape:
        return
    kept = subprocess.run(cmd + ["--show-prompts"], capture_output=True, text=True, timeout=120).stdout
    assert MARK in kept  # the crash line does reach the alert: what is redacted above was there
    assert f"sk-{MARK}" not in kept  # secrets are masked even then


_TEXT = st.lists(st.sampled_from(list("pPrRoOmMtTuUiInNcCeExXsSaAgGbByYdDkK_-'\"\\:=[](){} ,\nİß") + ["sk-", "Prompt: ",
                "output: ", "api_key", "Bearer ", "JSON body: ", "text=", "\"content\": ", "Processed prompts: "]),
                max_size=60).map("".join)


def test_regression_json_in_json_value_with_an_escaped_quote() -> None:
    """(hypothesis: the value '"]Zq7…' stopped the JSON-in-JSON string at its escaped quote, the rest stayed)"""
    t = "Value error, " + json.dumps(json.dumps({"prompt": f'"]{MARK}', "n": 1}))
    assert MARK not in DEFAULT(t) and "n" in DEFAULT(t)


@settings(max_examples=300, deadline=None)
@given(t=_TEXT)
def test_anchored_rules_equal_re_sub(t: str) -> None:
    """Each rule runs only where one of its keywords occurs: the result is ``re.sub``'s, on any text (keyword
    cases, non-ASCII letters whose lower case is longer, matches starting before the keyword, overlapping ones)."""
    from vllmlog import redact as R

    for rule in R._ANCHORED_ALL:
        assert rule.sub(t) == rule.rx.sub(rule.repl, t), rule.keywords.pattern
    ref = t
    for rule in R._ANCHORED_ALL:
        ref = rule.rx.sub(rule.repl, ref)
    assert DEFAULT._redact(t) == ref


def test_anchored_rules_equal_re_sub_on_the_corpus() -> None:
    from vllmlog import redact as R

    lines = [ln for p in sorted(CORPUS.glob("*/*.log")) for ln in p.read_text(errors="replace").split("\n")]
    lines += [s for p in ("a", f"tell me\nabout 'x' \"{MARK}\" ok") for s in _shapes(p) + SECRETS]
    for ln in lines:
        for rule in R._ANCHORED_ALL:
            assert rule.sub(ln) == rule.rx.sub(rule.repl, ln), (rule.keywords.pattern, ln[:300])
