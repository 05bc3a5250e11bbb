"""Make log-derived text safe to share: redact prompt/output text, mask IP addresses.

vLLM logs carry user data: ``Received request … prompt: '…'``, ``prompt_token_ids: […]``,
``Generated response … output: '…'``, ``Request … details: prompt: …``, ``JSON body: {…}`` and
validation tracebacks that echo the offending ``'input': …``. Every string the terminal output,
the JSON document and the HTML report show goes through a ``Redactor`` first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

# a quoted Python/JSON string, bytes (b'…') included, possibly over several lines of a record, or cut short
# by --max-log-len or line truncation (→ to the end of the text); a list, tuple or dict of them (pydantic's
# input_value={…}), also cut short inside one of its strings (a message shortened to 160 characters for a headline)
_Q = r"""(?:[bBrRuU]{0,2}(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|'.*|".*))"""
_ITEMS = r"""(?:[^{close}'"]|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")*(?:\{close}|'.*|".*)?"""  # cut short: to the end
_SEQ = "(?:" + "|".join(o + _ITEMS.format(close=c) for o, c in (("\\[", "]"), ("\\(", ")"), ("\\{", "}"))) + ")"
_LIST = r"\[[^\]\n]*\]?"
_FIELDS = r"(?:prompt|prompts|output|outputs|text|prompt_text|output_text|input|inputs|content|messages|completion)"

_RULES: list[tuple[re.Pattern[str], str]] = [
    # JSON body logged by --enable-log-requests (0.32): everything after the marker is the client's body
    (re.compile(r"(JSON body: ).*"), r"\1[redacted]"),
    # a capitalised label ("Prompt: …", "Output: …": the handbook's details lines, client logs) prints the text as
    # it is, unquoted: the rest of its line, whatever it starts with ("Prompt: [] abc" is text, not a list)
    (re.compile(r"\b((?:Prompt|Output|Input|Completion)s?: )(?!'\[redacted\]')[^\n]+"), r"\1[redacted]"),
    # prompt / output text, V0 and V1 request logger, handbook details lines, client logs: name: '…',
    # name='…' (bytes, lists and tuples of strings too), any case (Prompt:, Output:)
    # (the value must end where a value ends: "Prompt: []abc" is an unquoted label, redacted by the next rule)
    # (a prefixed or suffixed name too: system_prompt=, pydantic's input_value=, input_text=)
    (re.compile(r"(?i)((?:\b|(?<=_))" + _FIELDS + r"""(?:_(?:value|text|str))?(?:\\?["'])?\s{0,3}[:=]\s{0,3})(?:""" + _SEQ + "|" + _Q + r""")(?=[\s,;:)}]|$)""",
                re.S), r"\1'[redacted]'"),
    # an unquoted 'Prompt: …' / 'Output: …' label: the rest of its line
    # (not vLLM's offline progress bar "Processed prompts: 41%|████ | 842/2048 [… est. speed input: 3.88 toks/s, output:
    # 844.79 toks/s]": counts and rates, no text)
    (re.compile(r"(?i)\b(?<!Processed )((?:prompt|output|input|completion)s?:)(?![ \t]*'\[redacted\]')(?! {0,3}\d{1,3}%\|)(?! {0,3}[\d.]{1,20} toks/s)[^\n]+"),
     r"\1 [redacted]"),
    (re.compile(r"(\b(?:prompt|output)_token_ids: )" + _LIST), r"\1[redacted]"),
    # dict / JSON fields echoing user content (validation errors, error bodies, request dumps); a JSON string inside a
    # JSON string (\"…\") ends at the first \" whose backslash is not itself escaped (\\\" is an escaped quote)
    (re.compile(r"""((?:\\?["'])(?:prompt|content|input|text|messages|output)(?:\\?["'])\s{0,3}:\s{0,3})"""
                r"""("(?:[^"\\\n]|\\.)*(?:"|$)|\\"(?:\\\\(?:\\.|[^\\])|\\[^\\"]|[^\\])*(?:\\"|\\{0,3}$)|'(?:[^'\\\n]|\\.)*(?:'|$)|\[[^\]\n]*\]?|\{[^}\n]*\}?)"""), r"\1'[redacted]'"),
]

_SECRETS = re.compile(r"""((?:api_key|api-key|apikey|hf_token|token|password|secret|authorization)['"]?\s{0,3}[=:]\s{0,3})"""
                      r"""(?:\[[^\]\n]*\]?|(['"]?)(?:(?:bearer|basic|token)\s+)?[^\s,'")}\]]+\2)""", re.IGNORECASE)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
_KEYS = re.compile(r"\b(sk|hf|pk|rk)([-_])[A-Za-z0-9_-]{8,}")
PROMPT_FIELDS = frozenset({"prompt", "prompts", "output", "outputs", "text", "prompt_text", "output_text", "input",
                           "content", "messages", "body", "completion", "prompt_token_ids", "output_token_ids", "ids"})
"""Event fields that carry what a client sent or got (redacted by structure, whatever their shape)."""

# a JSON line of an event that may hold something a rule above redacts: one of their words, in any case, or a prompt
# field by name (literal `in` tests on the lower-cased line: a regex alternation costs ~100 µs a line, these ~3)
_JSONL_WORDS = (b"prompt", b"output", b"input", b"content", b"messag", b"completion", b"body", b"token", b"_ids",
                b"key", b"passw", b"secret", b"authori", b"bearer", b"basic", b"sk-", b"sk_", b"hf-", b"hf_", b"pk-",
                b"pk_", b"rk-", b"rk_", b'"ids":')


def _jsonl_hint(line: bytes) -> bool:
    low = line.lower()
    for w in _JSONL_WORDS:
        if w in low:
            return True
    # every event has the key "text": a second "text" is a field of that name or a text='…' in the line
    return low.count(b"text") > 1


_ASCII_LOWER = {c: c + 32 for c in range(65, 91)}


@dataclass(frozen=True)
class _Anchored:
    """``rx.sub(repl, text)``, tried only where one of its literal keywords occurs (any case): each match of ``rx``
    starts at most ``back`` characters before a keyword. Equal to ``rx.sub`` (``tests/test_robust_redaction.py::
    test_anchored_rules_equal_re_sub``), without running a case-insensitive alternation at every position of every
    line (the rules are ~100 µs per 600-character line that way: 74 s for the 290 k lines of a 58 MB log)."""

    rx: re.Pattern[str]
    repl: str
    keywords: re.Pattern[str]
    back: int = 0

    def sub(self, text: str, low: str | None = None) -> str:
        """``low``: ``_lower(text)``, when the caller has it."""
        if low is None:
            low = _lower(text)
        out: list[str] = []
        last = 0
        match, expand = self.rx.match, self.repl
        for k in self.keywords.finditer(low):
            i = k.start()
            if i < last:
                continue
            for s in range(max(last, i - self.back), i + 1):
                m = match(text, s)  # \b and look-behinds see the text before s
                if m is not None:
                    out.append(text[last:s])
                    out.append(m.expand(expand))
                    last = m.end()
                    break
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)


def _lower(text: str) -> str:
    """ASCII letters lower-cased: the same length as ``text`` (``str.lower`` is not, for some non-ASCII letters)."""
    return text.lower() if text.isascii() else text.translate(_ASCII_LOWER)


def _kw(*words: str) -> re.Pattern[str]:
    return re.compile("|".join(sorted(words, key=len, reverse=True)))


_RULE_KEYWORDS = [  # (keywords, back) of each rule in _RULES, in order
    (_kw("json body: "), 0),
    (_kw("prompt", "output", "input", "completion"), 0),
    (_kw("prompt", "output", "text", "input", "content", "messages", "completion"), 0),
    (_kw("prompt", "output", "input", "completion"), 0),
    (_kw("prompt_token_ids: ", "output_token_ids: "), 0),
    (_kw("prompt", "content", "input", "text", "messages", "output"), 2),
]
_ANCHORED = [_Anchored(rx, repl, kw, back) for (rx, repl), (kw, back) in zip(_RULES, _RULE_KEYWORDS, strict=True)]
_ANCHORED_SECRETS = [
    _Anchored(_SECRETS, r"\1\2***\2", _kw("api_key", "api-key", "apikey", "hf_token", "token", "password", "secret",
                                            "authorization")),
    _Anchored(_BEARER, r"\1 ***", _kw("bearer", "basic")),
    _Anchored(_KEYS, r"\1\2***", _kw("sk-", "sk_", "hf-", "hf_", "pk-", "pk_", "rk-", "rk_")),
]

_ANCHORED_ALL = _ANCHORED + _ANCHORED_SECRETS

_MEMO: dict[tuple[bool, bool], dict[str, str]] = {}
_MEMO_MAX = 1 << 14  # texts per policy before the memo starts over (bounded memory in a long `watch`: ≤ ~70 MB)
_MEMO_TEXT = 2048  # longer texts (tracebacks, dumps) are redacted each time

_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.]*\d)")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9a-fA-F]{1,4}:){3,7}[0-9a-fA-F]{1,4}(?![\w:])")


@dataclass(frozen=True)
class Redactor:
    """Applies the sharing policy to any log-derived string."""

    show_prompts: bool = False
    """Keep prompt / output text (``--show-prompts``)."""
    mask_ips: bool = False
    """Replace IPv4/IPv6 addresses with ``<ip>`` (``--mask-ips``)."""

    def __call__(self, text: str | None) -> str:
        """The text with user content (and optionally IPs) removed; secrets are always masked."""
        if not text:
            return text or ""
        # a report redacts the same evidence lines and templates many times (one memo per policy: a pure function)
        if len(text) > _MEMO_TEXT:
            return self._redact(text)
        memo = _MEMO.get((self.show_prompts, self.mask_ips))
        if memo is None:
            memo = _MEMO.setdefault((self.show_prompts, self.mask_ips), {})
        out = memo.get(text)
        if out is None:
            if len(memo) >= _MEMO_MAX:
                memo.clear()
            out = memo[text] = self._redact(text)
        return out

    def _redact(self, text: str) -> str:
        out = text
        low = _lower(text)
        for rule in (_ANCHORED_SECRETS if self.show_prompts else _ANCHORED_ALL):
            new = rule.sub(out, low)
            if new is not out:
                out, low = new, _lower(new)
        if self.mask_ips:
            out = _IPV4.sub("<ip>", out)
            out = _IPV6.sub("<ip>", out)
        return out

    def fields(self, f: dict[str, object]) -> dict[str, object]:
        """An event's typed fields: prompt-bearing ones by name (any shape), other strings by pattern."""
        if self.show_prompts:
            return {k: self.value(v) if isinstance(v, str) else v for k, v in f.items()}
        return {k: ("[redacted]" if k in PROMPT_FIELDS and v not in (None, "", [], ()) else self.value(v))
                for k, v in f.items()}

    def event(self, e: object) -> object:
        """A ``model.Event`` with its text and fields redacted (the one step every exporter passes through)."""
        import dataclasses

        return dataclasses.replace(e, text=self(e.text), fields=self.fields(e.fields))  # type: ignore[arg-type,attr-defined]

    def jsonl(self, chunk: bytes) -> bytes:
        """JSON lines of events (as ``vllmlog parse`` writes them) with each event's ``text`` and ``fields``
        redacted; a line that holds no word any rule looks for is passed on byte for byte."""
        if not chunk:
            return chunk
        lines = chunk.split(b"\n")
        changed = False
        for i, line in enumerate(lines):
            if not line or not _jsonl_hint(line):
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(obj, dict):
                continue
            text, fields = obj.get("text"), obj.get("fields")
            new_text = self(text) if isinstance(text, str) else text
            new_fields = self.fields(fields) if isinstance(fields, dict) else fields
            if new_text != text or new_fields != fields:
                obj["text"], obj["fields"] = new_text, new_fields
                lines[i] = orjson.dumps(obj)
                changed = True
        return b"\n".join(lines) if changed else chunk

    def value(self, v: object) -> object:
        """Redact strings inside a JSON-like value (dicts, lists), leaving numbers alone."""
        if isinstance(v, str):
            return self(v)
        if isinstance(v, dict):
            return {k: self.value(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [self.value(x) for x in v]
        return v


DEFAULT = Redactor()


def redact(text: str | None, *, show_prompts: bool = False, mask_ips: bool = False) -> str:
    """Convenience: ``Redactor(show_prompts, mask_ips)(text)``."""
    return Redactor(show_prompts, mask_ips)(text)
