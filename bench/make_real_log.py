#!/usr/bin/env python3
"""Write a large log made of real vLLM 0.32 logs, for throughput benchmarks on what users actually have.

The real CPU runs of the shared corpus (``../shared/corpus/vllm-cpu*/``, or their copies in
``tests/data/corpus/`` in a clone without ``../shared``) are concatenated and repeated until the wanted
line count, each repetition with shifted request ids and pids (``client-0007`` → ``client-0120007``,
``pid=31488`` → ``pid=31512``) so requests stay distinct; every file keeps its own lines and timestamps, so
the result reads like many server runs one after the other (``kubectl logs --previous`` pieces, a week of
journald).

* ``--level info``  (default): every INFO-level log of those directories (not the DEBUG run)
* ``--level debug``: the DEBUG-level run (``08-debug-level-light-load.log``)

    python bench/make_real_log.py OUT.log --lines 1000000 [--level info|debug]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOTS = [HERE.parent.parent / "shared" / "corpus", HERE.parent / "tests" / "data" / "corpus"]
DEBUG = "08-debug-level-light-load.log"

_CLIENT = re.compile(rb"client-(\d+)")
_PID = re.compile(rb"pid=(\d+)")


def sources(level: str = "info") -> list[Path]:
    """The real log files the bench log is made of (first corpus root that has them)."""
    for root in ROOTS:
        files = sorted(p for d in sorted(root.glob("vllm-cpu*")) for p in d.glob("*.log"))
        if files:
            if level == "debug":
                return [p for p in files if p.name == DEBUG]
            return [p for p in files if p.name != DEBUG]
    raise SystemExit(f"no real vLLM logs found under {' or '.join(map(str, ROOTS))}")


def generate(out, n_lines: int, level: str = "info") -> int:
    """Write exactly ``n_lines`` lines (the last repetition is cut) to the binary stream ``out``."""
    parts = []
    for p in sources(level):
        data = p.read_bytes()
        if not data.endswith(b"\n"):
            data += b"\n"
        parts.append(data)
    base = b"".join(parts)
    per = base.count(b"\n")
    written = 0
    k = 0
    while written < n_lines:
        rep = base if k == 0 else _PID.sub(lambda m: b"pid=%d" % (int(m.group(1)) + 24 * k),
                                           _CLIENT.sub(lambda m: b"client-%03d%s" % (k, m.group(1)), base))
        if written + per > n_lines:
            cut = 0
            for _ in range(n_lines - written):
                cut = rep.index(b"\n", cut) + 1
            rep = rep[:cut]
        out.write(rep)
        written += rep.count(b"\n")
        k += 1
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--level", choices=("info", "debug"), default="info")
    a = ap.parse_args(argv)
    with open(a.out, "wb") as f:
        n = generate(f, a.lines, a.level)
    print(f"wrote {n:,} lines to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
