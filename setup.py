"""Build hook for the optional compiled fast path (``vllmlog._speedups``); all metadata is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and vllmlog runs the pure-Python
parser (same output, slower). ``python -c "import vllmlog.parsing.fast as f; print(f.AVAILABLE)"`` tells which.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "vllmlog._speedups",
            ["src/vllmlog/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2", "-ffp-contract=off"],  # no fused multiply-add: the same IEEE results as Python
        )
    ]
)
