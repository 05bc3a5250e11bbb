"""The block reader (one read + decode per block) keeps read_lines' accounting on hostile files."""

from __future__ import annotations

import gzip

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllmlog.ingest import MAX_LINE, InputStats, read_blocks, read_lines
from vllmlog.reader import ParseStats, count, iter_jsonl, parse


def _blocks(path, block):
    ist = InputStats(str(path))
    out = []
    for first, lines in read_blocks(str(path), ist, block):
        assert first == len(out) + 1
        out.extend(lines)
    return out, ist


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=3000), st.sampled_from([1, 7, 64, 4096]))
def test_blocks_equal_lines_on_random_bytes(tmp_path, data, block):
    p = tmp_path / "r.log"
    p.write_bytes(b"INFO 03-25 10:15:23 a.py:1] x\n" * 100 + data.replace(b"\x00", b""))  # text head: the binary sniff passes
    got, ist = _blocks(p, block)
    ist2 = InputStats(str(p))
    want = [t for _, t in read_lines(str(p), ist2)]
    assert got == want
    assert ist.lines == ist2.lines == len(want)
    assert ist.invalid_utf8_lines == ist2.invalid_utf8_lines
    evs = list(parse(str(p), year=2026))
    assert sum(e.line_end - e.line + 1 for e in evs) == len(want)


def test_overlong_line_inside_a_block(tmp_path):
    p = tmp_path / "long.log"
    p.write_bytes(b"INFO 03-25 10:15:23 x.py:1] a\n" + b"B" * (MAX_LINE + 10) + b"\nINFO 03-25 10:15:24 x.py:1] c\n")
    lines, ist = _blocks(p, 8 << 20)
    assert len(lines) == 3 and ist.truncated_lines == 1 and len(lines[1]) == MAX_LINE


def test_truncated_gzip_all_modes(tmp_path):
    body = b"".join(b"INFO 03-25 10:15:%02d model_runner.py:312] Decode step %d for req_1. Batch size: 1, KV cache usage: 5%%\n" % (i % 60, i) for i in range(30000))
    data = gzip.compress(body)
    p = tmp_path / "t.log.gz"
    p.write_bytes(data[: len(data) // 2])
    st1 = ParseStats()
    js = "".join(iter_jsonl(str(p), year=2026, stats=st1))
    assert st1.inputs[0].incomplete and 0 < js.count("\n") < 30000
    assert st1.lines_in_events == st1.lines
    st2 = count(str(p), year=2026)
    assert st2.inputs[0].incomplete and st2.lines == st1.lines == st2.lines_in_events
