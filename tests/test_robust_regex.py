"""Issue 15 §2: no pattern backtracks catastrophically. Every regex of ``vllmlog.parsing`` — each registered
``LinePattern`` through its own entry point (``LinePattern.match``: anchored ``match`` for prefix patterns,
a search bounded to ``registry.SEARCH_LIMIT`` characters for ``contains`` patterns) and every module-level
compiled regex through ``search`` (its worst case) — is fed adversarial lines built from its own literals
(the classic ``A.*(?:B|C)`` killer is many A's and no B) and from the characters that break character-class
runs (spaces, digits, quotes, brackets, ``=``, ``,``).

Judged as a ratio, never a wall-clock budget: the time of the pattern over a line against a plain
``re.search`` of an absent literal over the same line, in the same run (min of repeats). A linear pattern
stays within a few hundred times the literal scan; the ``logprobs.*(?:must be|…)`` pattern this replaced
took 26 s on a 198 KB line (ratio > 10^5). Stage 1 uses 64 KB lines (a quadratic pattern fails there in a
few seconds instead of hanging for minutes at 1 MB); every line a pattern actually scanned is then re-run at
1 MB. The whole parser is fed the same 1 MB lines."""

from __future__ import annotations

import importlib
import pkgutil
import re
import time
from typing import Any, Callable

try:
    import re._parser as sre_parse  # Python 3.11+
except ImportError:  # pragma: no cover
    import sre_parse  # type: ignore[no-redef]

from pathlib import Path

import pytest

import vllmlog
import vllmlog.parsing as parsing_pkg
from vllmlog.parsing.parser import LineParser
from vllmlog.parsing.registry import MESSAGES, RAW, SEARCH_LIMIT, LinePattern

MAX_RATIO = 10_000.0
"""Pattern time / literal-search time on the same line. Linear patterns measure up to ~2,000 (a regex
attempted at every position costs ~0.5 µs a character; the literal scan skips); quadratic ones > 10^5."""
MAX_GROWTH = 6.0
"""Ratio at 1 MB / ratio at 64 KB: ~1 for a linear pattern, ~16 for a quadratic one."""
BIG_CASES = 60
"""The slowest 64 KB cases are re-run at 1 MB (the others did not scan far enough to matter)."""
SMALL, BIG = 1 << 16, 1 << 20
_CLASS_FILLERS = (" ", "a", "0", "'", '"', "(", "[", ",", "\\'", ": ", "=", "a: 1, ", "\t", "-.")


def _literals(rx: str) -> list[str]:
    """The literal runs of a regex (in order), from its parse tree."""
    out: list[str] = []

    def walk(seq: Any) -> None:
        cur = ""
        for op, av in seq:
            name = str(op)
            if name == "LITERAL":
                cur += chr(av)
                continue
            if cur:
                out.append(cur)
            cur = ""
            if name == "SUBPATTERN":
                walk(av[-1])
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                walk(av[2])
            elif name == "BRANCH":
                for b in av[1]:
                    walk(b)
            elif name in ("ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
                walk(av[1] if name != "ATOMIC_GROUP" else av)
        if cur:
            out.append(cur)

    walk(sre_parse.parse(rx))
    return list(dict.fromkeys(out))


def _fillers(rx: str) -> list[str]:
    lits = [s for s in _literals(rx) if s.strip()]
    out = set(_CLASS_FILLERS)
    for a in lits:
        out |= {a, a + " "}
    for a, b in zip(lits, lits[1:]):
        out.add(a + " x " + b)
    return sorted(out)


Case = tuple[str, Callable[[str], Any], str, str]  # name, call, head, filler


def _cases() -> list[Case]:
    out: list[Case] = []
    for reg, where in ((MESSAGES, "message"), (RAW, "raw")):
        for p in reg.patterns:
            head = p.prefix or p.contains or ""
            for f in _fillers(p.regex):
                out.append((f"{where}:{p.id}", p.match, head, f))
    src = "\n".join(p.read_text() for p in Path(vllmlog.__file__).parent.rglob("*.py"))
    for mi in pkgutil.iter_modules(parsing_pkg.__path__):
        mod = importlib.import_module(f"vllmlog.parsing.{mi.name}")
        for k, v in sorted(vars(mod).items()):
            if isinstance(v, re.Pattern) and isinstance(v.pattern, str):
                # as the code calls it: search (the worst case) unless it is only ever anchored with match()
                anchored = not re.search(rf"\b{k}\.(?:search|findall|finditer|sub|subn|split)\b", src)
                call = v.match if anchored else v.search
                for f in _fillers(v.pattern):
                    out.append((f"{mi.name}.{k}", call, "", f))
    return out


CASES = _cases()
_ABSENT = re.compile(re.escape("\x07never-in-a-log\x07"))


def _time(fn: Callable[[str], Any], s: str, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(s)
        best = min(best, time.perf_counter() - t0)
    return best


def _line(head: str, filler: str, n: int) -> str:
    return head + filler * max(1, (n - len(head)) // len(filler))


def _ratio(fn: Callable[[str], Any], s: str) -> tuple[float, float]:
    ref = max(_time(_ABSENT.search, s, 5), 1e-6)
    t = _time(fn, s, 2)
    return t / ref, t


def test_every_pattern_is_audited() -> None:
    names = {c[0] for c in CASES}
    assert len([n for n in names if n.startswith(("message:", "raw:"))]) == len(MESSAGES.patterns) + len(RAW.patterns)
    assert any(n == "message:req.logprobs_too_many" for n in names)
    assert len(CASES) > 1500


def test_no_pattern_is_superlinear(capsys) -> None:
    small: list[tuple[float, float, Case]] = []
    bad: list[str] = []
    for case in CASES:
        name, fn, head, filler = case
        r, t = _ratio(fn, _line(head, filler, SMALL))
        small.append((t, r, case))
        if r > MAX_RATIO:
            bad.append(f"{name} filler={filler!r} at 64 KB: {r:.0f}x the literal scan ({t * 1e3:.1f} ms)")
    small.sort(key=lambda x: x[0], reverse=True)
    worst: list[tuple[float, float, float, str, str]] = []
    for t0, r0, (name, fn, head, filler) in small[:BIG_CASES]:
        if r0 > MAX_RATIO:
            continue  # already reported; 1 MB would take minutes
        r, t = _ratio(fn, _line(head, filler, BIG))
        worst.append((r, r / r0, t, name, filler))
        if r > MAX_RATIO or r / r0 > MAX_GROWTH:
            bad.append(f"{name} filler={filler!r} at 1 MB: {r:.0f}x the literal scan ({t * 1e3:.1f} ms), "
                       f"{r / r0:.1f}x its ratio at 64 KB")
    worst.sort(reverse=True)
    with capsys.disabled():
        print(f"\n{len(CASES)} pattern x filler cases at 64 KB, the {len(worst)} slowest at 1 MB; worst:")
        for r, g, t, name, filler in worst[:5]:
            print(f"  {r:7.0f}x the literal scan, growth {g:4.1f}  {t * 1e3:7.1f} ms  {name}  {filler!r}")
    assert not bad, "\n".join(bad)


def test_contains_patterns_scan_a_bounded_window() -> None:
    p = next(p for p in MESSAGES.patterns if p.id == "req.logprobs_too_many")
    assert p.match("x" * (SEARCH_LIMIT + 10) + "Cannot request more than 5 logprobs.") is None
    assert p.match("Cannot request more than 5 logprobs.")[1]["limit"] == 5  # type: ignore[index]


@pytest.mark.parametrize("filler", ["logprobs ", "logprobs", " logprobs x must", "Model architecture ", "(", "a=", "0",
                                    "Replica(", "min_tokens must be ", "'", " "])
def test_parser_on_a_1mb_line(filler: str) -> None:
    """The whole parser (envelope, dispatch, every candidate pattern) on a 1 MB line, as the live state reads it."""
    for head in ("ERROR 04-10 09:31:21 [serving.py:1] ", "", "(APIServer pid=1) WARNING 04-10 09:31:21 [x.py:2] ValueError: "):
        s = _line(head, filler, BIG)
        p = LineParser("x.log", 2026)
        t0 = time.perf_counter()
        evs = p.feed([(1, s)]) + p.close()
        t = time.perf_counter() - t0
        ref = max(_time(_ABSENT.search, s, 5), 1e-6)
        assert sum(e.line_end - e.line + 1 for e in evs) == 1
        assert t / ref < 20 * MAX_RATIO, f"{head!r}+{filler!r}: {t / ref:.0f}x ({t * 1e3:.0f} ms)"
