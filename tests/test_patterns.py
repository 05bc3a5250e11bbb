"""Every registry pattern matches each of its own examples, and the dispatch picks it (or one of its kind)."""

from __future__ import annotations

import pytest

from vllmlog.parsing import parser  # noqa: F401  (registers every pattern)
from vllmlog.parsing.fields import FIELDS
from vllmlog.parsing.registry import MESSAGES, RAW

ALL = [(reg, p, ex) for reg in (MESSAGES, RAW) for p in reg.patterns for ex in p.examples]


@pytest.mark.parametrize("reg,pattern,example", ALL, ids=[f"{p.id}#{i}" for i, (_, p, _) in enumerate(ALL)])
def test_example_matches(reg, pattern, example):
    assert pattern.match(example) is not None, f"{pattern.id} does not match its example"
    hit = reg.match(example)
    assert hit is not None
    assert hit[0].kind == pattern.kind, f"dispatch chose {hit[0].id} ({hit[0].kind}) for an example of {pattern.id}"


def test_every_pattern_has_examples_and_docs():
    for reg in (MESSAGES, RAW):
        for p in reg.patterns:
            assert p.examples, p.id
            assert p.doc, p.id
            assert p.kind.islower() and " " not in p.kind


def test_named_groups_are_catalogued():
    import re

    allowed = set(FIELDS) | {"request_id", "body", "rest", "ids", "mode", "config", "args", "ns", "advice", "file", "param",
                             "step", "seq", "op", "timeout_ms", "ran_ms", "severity", "percent", "warning", "platform",
                             "max_num_batched_tokens", "graph_memory_gib", "context_requests", "context_tokens",
                             "generation_requests", "generation_tokens", "elapsed_ms", "port", "method", "gpu_memory_utilization"}
    for reg in (MESSAGES, RAW):
        for p in reg.patterns:
            for g in re.compile(p.regex).groupindex:
                assert g.startswith("_") or g in allowed, f"{p.id}: group {g} is not in the field catalogue"
