"""The compiled objective of the step-time model's fit (``_speedups.reverse_sse``) gives the Python loop's values
bit for bit, so a capacity plan is the same with and without the C extension."""

from __future__ import annotations

import random
import struct
from array import array

import pytest

from vllmlog.capacity import model
from vllmlog.capacity.model import _reverse_fit, _sse_py
from vllmlog.parsing import fast

pytestmark = pytest.mark.skipif(model._c_sse is None, reason="no compiled kernel (no C compiler, VLLMLOG_PURE or Python >= 3.12)")


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _points(rng: random.Random, k: int) -> list[tuple[float, float]]:
    # Running (a mean of two integers) against generation tok/s of a stats line (0.1 tok/s resolution), like
    # fit_throughput's points, and some with full double precision
    out = []
    for _ in range(k):
        n = (rng.randint(1, 256) + rng.randint(1, 256)) / 2
        g = round(rng.uniform(0.1, 5000.0), 1) if rng.random() < 0.7 else rng.uniform(1e-3, 1e5)
        out.append((n, g))
    return out


def test_kernel_is_built_where_the_parser_is():
    assert (model._c_sse is not None) == fast.AVAILABLE


@pytest.mark.parametrize("seed", range(40))
def test_sse_bit_identical(seed):
    rng = random.Random(seed)
    pts = _points(rng, rng.choice([1, 2, 3, 17, 250, 2000]))
    gmax = max(g for _, g in pts)
    nb, gb = array("d", [n for n, _ in pts]), array("d", [g for _, g in pts])
    for b in [0.0, 0.999 / gmax, 0.5 / gmax] + [rng.uniform(0, 0.999 / gmax) for _ in range(20)]:
        err_c, a_c = model._c_sse(nb, gb, b)
        err_p, a_p = _sse_py(pts, b)
        assert (_bits(err_c), _bits(a_c)) == (_bits(err_p), _bits(a_p)), (seed, b)


def test_squares_are_pow_not_products():
    # libm's pow(x, 2) is not x * x for ~1 value in 1,000: a kernel squaring by multiplication would differ here
    rng = random.Random(7)
    xs = [x for x in (rng.uniform(-1e4, 1e4) for _ in range(200_000)) if x ** 2 != x * x][:50]
    assert xs
    for d in xs:
        pts = [(d, 1.0), (-d, 1.0)]  # b = 0: z = 1, a = (d - d) / 2 = 0, err = d ** 2 + d ** 2
        err_c, a_c = model._c_sse(array("d", [d, -d]), array("d", [1.0, 1.0]), 0.0)
        assert (_bits(err_c), _bits(a_c)) == tuple(map(_bits, _sse_py(pts, 0.0)))


def test_not_finite_falls_back_to_python():
    assert model._c_sse(array("d", [1.0]), array("d", [2.0]), 0.5) is None  # 1 - b·g = 0: Python raises
    with pytest.raises(ZeroDivisionError):
        _sse_py([(1.0, 2.0)], 0.5)


@pytest.mark.parametrize("seed", range(12))
def test_reverse_fit_same_with_and_without_kernel(seed, monkeypatch):
    rng = random.Random(100 + seed)
    pts = _points(rng, rng.choice([2, 5, 40, 600]))
    with_c = _reverse_fit(pts)
    monkeypatch.setattr(model, "_c_sse", None)
    without = _reverse_fit(pts)
    assert (with_c is None) == (without is None)
    if with_c is not None:
        assert [_bits(x) for x in with_c] == [_bits(x) for x in without]
