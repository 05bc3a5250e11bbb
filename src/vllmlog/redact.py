"""Make log-derived text safe to share: redact prompt/output text, mask IP addresses.

vLLM logs carry user data: ``Received request … prompt: '…'``, ``prompt_token_ids: […]``,
``Generated response … output: '…'``, ``Request … details: prompt: …``, ``JSON body: {…}`` and
validation tracebacks that echo the offending ``'input': …``. Every string the terminal output,
the JSON document and the HTML report show goes through a ``Redactor`` first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# a quoted Python/JSON string, bytes (b'…') included, possibly over several lines of a record, or cut short
# by --max-log-len or line truncation (→ to the end of the text); a list or tuple of them
_Q = r"""(?:[bBrRuU]{0,2}(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|'.*|".*))"""
_SEQ = r"""(?:\[(?:[^\]'"]|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")*\]?|\((?:[^)'"]|'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")*\)?)"""
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
    (re.compile(r"(?i)(\b" + _FIELDS + r"""(?:\\?["'])?\s{0,3}[:=]\s{0,3})(?:""" + _SEQ + "|" + _Q + r""")(?=[\s,;:)}]|$)""",
                re.S), r"\1'[redacted]'"),
    # an unquoted 'Prompt: …' / 'Output: …' label: the rest of its line
    # (not vLLM's offline progress bar "Processed prompts: 41%|████ | 842/2048 [… est. speed input: 3.88 toks/s, output:
    # 844.79 toks/s]": counts and rates, no text)
    (re.compile(r"(?i)\b(?<!Processed )((?:prompt|output|input|completion)s?:)(?![ \t]*'\[redacted\]')(?! {0,3}\d{1,3}%\|)(?! {0,3}[\d.]{1,20} toks/s)[^\n]+"),
     r"\1 [redacted]"),
    (re.compile(r"(\b(?:prompt|output)_token_ids: )" + _LIST), r"\1[redacted]"),
    # dict / JSON fields echoing user content (validation errors, error bodies, request dumps)
    (re.compile(r"""((?:\\?["'])(?:prompt|content|input|text|messages|output)(?:\\?["'])\s{0,3}:\s{0,3})"""
                r"""("(?:[^"\\\n]|\\.)*"|\\".*?\\"(?=\s{0,3}(?:[,}\]]|$))|'(?:[^'\\\n]|\\.)*'|\[[^\]\n]*\]?|\{[^}\n]*\}?)"""), r"\1'[redacted]'"),
]

_SECRETS = re.compile(r"""((?:api_key|api-key|apikey|hf_token|token|password|secret|authorization)['"]?\s{0,3}[=:]\s{0,3})"""
                      r"""(?:\[[^\]\n]*\]?|(['"]?)(?:(?:bearer|basic|token)\s+)?[^\s,'")}\]]+\2)""", re.IGNORECASE)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
_KEYS = re.compile(r"\b(sk|hf|pk|rk)([-_])[A-Za-z0-9_-]{8,}")
PROMPT_FIELDS = frozenset({"prompt", "prompts", "output", "outputs", "text", "prompt_text", "output_text", "input",
                           "content", "messages", "body", "completion", "prompt_token_ids", "output_token_ids", "ids"})
"""Event fields that carry what a client sent or got (redacted by structure, whatever their shape)."""

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
        if not self.show_prompts:
            for rx, repl in _RULES:
                out = rx.sub(repl, out)
        out = _SECRETS.sub(r"\1\2***\2", out)
        out = _BEARER.sub(r"\1 ***", out)
        out = _KEYS.sub(r"\1\2***", out)
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
