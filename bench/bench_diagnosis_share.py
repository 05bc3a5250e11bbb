"""How much of ``analyze``'s time is the diagnosis (issue 12: at most 10 % on a 1 M-line log).

In one process, ``vllmlog.analyze.analyze`` + the HTML report (what ``vllmlog analyze -o report.html`` does, without
the CLI's start-up) run ``--repeat`` times on the log; the CPU time of each phase is taken by wrapping the functions
that make it (``process_time``, nested phases not double-counted: a phase's time excludes the phases inside it):

* load — ``run.load`` (parse, journeys, series)
* numbers — ``numbers.compute``; summary — ``analyze._summary_detail`` (the run index is built here first: shared with
  the diagnosis, counted under ``index``)
* index — ``rules._util._build_index`` (the per-server-run views every rule reads)
* diagnosis — ``diagnose.run_diagnosis`` (rules, service states, symptoms, incidents, verdict, evidence texts)
* timeline — ``timeline.build_timeline``; report — ``export.html.write_report`` (the capacity section included)

    python bench/bench_diagnosis_share.py LOG [--repeat 3] [--year 2026]

Prints the median of each phase and the diagnosis's share of the total (with and without the run index).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable


class Phases:
    def __init__(self) -> None:
        self.t: dict[str, float] = {}
        self.stack: list[list[float]] = []

    def wrap(self, mod: Any, name: str, label: str) -> None:
        f = getattr(mod, name)
        ph = self

        def timed(*a: Any, **k: Any) -> Any:
            ph.stack.append([time.process_time(), 0.0])
            try:
                return f(*a, **k)
            finally:
                t0, inner = ph.stack.pop()
                dt = time.process_time() - t0
                ph.t[label] = ph.t.get(label, 0.0) + dt - inner
                if ph.stack:
                    ph.stack[-1][1] += dt

        setattr(mod, name, timed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--year", type=int, default=2026)
    a = ap.parse_args(argv)

    import vllmlog.analyze as an
    import vllmlog.diagnose as dg
    import vllmlog.export.html as html
    import vllmlog.rules._util as ut
    import vllmlog.timeline as tl
    from vllmlog.redact import Redactor

    ph = Phases()
    ph.wrap(an, "load", "load")
    ph.wrap(an, "compute", "numbers")
    ph.wrap(an, "_summary_detail", "summary")
    ph.wrap(ut, "_build_index", "index")
    ph.wrap(dg, "run_diagnosis", "diagnosis")
    ph.wrap(tl, "build_timeline", "timeline")
    runs: list[dict[str, float]] = []
    for _ in range(a.repeat):
        ph.t = {}
        t0 = time.process_time()
        res = an.analyze([a.log], year=a.year)
        t1 = time.process_time()
        with tempfile.TemporaryDirectory() as d:
            html.write_report(res, str(Path(d) / "report.html"), redactor=Redactor())
        t2 = time.process_time()
        row = dict(ph.t)
        row["report"] = t2 - t1
        row["total"] = t2 - t0
        row["other"] = row["total"] - sum(v for k, v in row.items() if k != "total")
        runs.append(row)
        del res
        print("  ".join(f"{k} {v:.2f}" for k, v in row.items()), file=sys.stderr, flush=True)
    keys = ["load", "numbers", "summary", "index", "diagnosis", "timeline", "report", "other", "total"]
    med = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in keys}
    print(f"| phase | CPU s (median of {a.repeat}) | share of analyze + report |")
    print("|---|---:|---:|")
    for k in keys:
        print(f"| {k} | {med[k]:.2f} | {100 * med[k] / med['total']:.1f} % |")
    d, i, tot = med["diagnosis"], med["index"], med["total"]
    print(f"\ndiagnosis share: {100 * d / tot:.1f} % of analyze + report ({100 * (d + i) / tot:.1f} % with the run index); "
          f"analysis without the report: {100 * d / (tot - med['report']):.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
