"""A plain ``pip install .`` runs every main command: the commands run with every module that no
runtime dependency provides made unimportable (numpy, pytest, hypothesis, duckdb, pyarrow … — the test
extras and whatever else this venv holds), on every corpus log and bundled example.

The blocked set is computed, not listed: installed top-level modules whose distribution is not in the
closure of vllmlog's declared runtime requirements (``Requires-Dist`` without an extra). A runtime
import of anything undeclared fails here the way it fails on a user's machine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import corpus_logs

CHILD = r'''
import importlib.abc, importlib.metadata as md, re, sys

def norm(s):
    return re.sub(r"[-_.]+", "-", s).lower()

allowed, todo = set(), ["vllmlog"]
while todo:
    d = norm(todo.pop())
    if d in allowed:
        continue
    allowed.add(d)
    try:
        reqs = md.requires(d) or []
    except md.PackageNotFoundError:
        continue
    for r in reqs:
        if "extra ==" in r or "extra==" in r:
            continue
        todo.append(re.match(r"[A-Za-z0-9_.-]+", r).group(0))
blocked = {mod for mod, dists in md.packages_distributions().items()
           if not any(norm(x) in allowed for x in dists) and mod not in sys.stdlib_module_names}
assert "numpy" in blocked or "numpy" not in md.packages_distributions(), "numpy must not be a runtime dependency"

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in blocked:
            raise ModuleNotFoundError(f"No module named {top!r} (not a runtime dependency of vllmlog)", name=top)
        return None

sys.meta_path.insert(0, Block())
from vllmlog.cli import main
from vllmlog.analyze import example_path, example_names

out, logs = sys.argv[1], sys.argv[2:] + [example_path(n) for n in example_names()]
for log in logs:
    for argv in (["analyze", log, "-o", out, "--year", "2026"], ["summary", log, "--year", "2026"],
                 ["diagnose", log, "--year", "2026"], ["requests", log, "--year", "2026"],
                 ["timeline", log, "--year", "2026"]):
        code = main(argv)
        assert code in (0, 1, 3), (argv, code)
print("ok", len(logs), len(blocked))
'''


def test_main_commands_run_without_undeclared_modules(tmp_path: Path) -> None:
    logs = [str(p) for p in corpus_logs()]
    r = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "report.html"), *logs],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    from vllmlog.analyze import example_names

    assert r.stdout.strip().splitlines()[-1].startswith(f"ok {len(logs) + len(example_names())} "), r.stdout[-500:]
    assert "var uPlot=" in (tmp_path / "report.html").read_text()
