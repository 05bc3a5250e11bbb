#!/usr/bin/env python3
"""Throughput and peak memory of ``vllmlog parse`` on generated logs (not part of the unit tests).

    python bench/run.py [--lines 1000000 5000000] [--repeat 3] [--dir /tmp/vllmlog-bench] [--out bench/RESULTS.md]

For each size it writes a deterministic log with ``bench/make_log.py`` (once; kept in --dir), then times,
``--repeat`` times each, whole processes under ``/usr/bin/time`` (wall, CPU, peak RSS of the process tree):

* ``vllmlog parse FILE > /dev/null``          — JSON lines, default processes
* ``vllmlog parse -j 1 FILE > /dev/null``     — JSON lines, one process
* ``vllmlog parse --stats FILE``              — counts only, default processes
* ``vllmlog diagnose --json FILE`` and ``vllmlog analyze -o report.html FILE`` — the analysis, on the same
  log as one server run and split into 300 server runs (``make_log.py --servers 300``, a crash-looping
  pod): the analysis must cost no more per line with 300 runs than with one (``per-line vs 1 run``)

The best wall time of the repeats is reported (the machine is shared; the load average before each run is
recorded next to it), and the results are written as a Markdown table to --out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_log import generate  # noqa: E402

CASES = [  # (label, vllmlog arguments, extra environment, largest file size it runs on)
    ("parse → /dev/null (JSONL, default -j)", ["parse", "--year", "2026"], {}, None),
    ("parse -j 1 → /dev/null (JSONL, one process)", ["parse", "--year", "2026", "-j", "1"], {}, None),
    ("parse --stats (default -j)", ["parse", "--stats", "--year", "2026"], {}, None),
    ("parse -j 1, pure Python (VLLMLOG_PURE=1)", ["parse", "--year", "2026", "-j", "1"], {"VLLMLOG_PURE": "1"}, 1_000_000),
]
#: the analysis, run on the log as 1 server run and as ``--servers`` runs (linear in server runs)
ANALYSIS = [
    ("diagnose --json", ["diagnose", "--json", "--year", "2026"]),
    ("analyze -o report.html", ["analyze", "--year", "2026", "-o", "{dir}/report.html"]),
]
# how fast this machine is right now: the same file through wc and awk (the reference measurements in
# ../shared/reference/performance.md: wc -l 0.05 s for 5M lines; a mawk program computing a check answer 1.70 s).
# (not grep -c: GNU grep stops at the first match when its output is /dev/null)
ANCHORS = [
    ("anchor: wc -l", ["wc", "-l"]),
    ("anchor: awk counting Decode lines", ["awk", "/Decode step/ { n++ } END { print n }"]),
]


def _time(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    gnu_time = shutil.which("time") or "/usr/bin/time"
    fmt = "%e %U %S %M"
    with open(os.devnull, "wb") as null:
        r = subprocess.run([gnu_time, "-f", fmt] + cmd, stdout=null, stderr=subprocess.PIPE, check=False,
                           env={**os.environ, **(env or {})})
    last = r.stderr.decode().strip().splitlines()[-1]
    m = re.search(r"([\d.]+) ([\d.]+) ([\d.]+) (\d+)$", last)
    # diagnose/analyze exit 1 when they report findings at or above --fail-on (GNU time says so first)
    if r.returncode not in (0, 1) or m is None:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.decode()[-2000:]}")
    return {"wall": float(m.group(1)), "user": float(m.group(2)), "sys": float(m.group(3)), "rss_mb": int(m.group(4)) / 1024}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 5_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/vllmlog-bench")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    ap.add_argument("--servers", type=int, default=300, help="server runs of the linearity case (0: skip it)")
    a = ap.parse_args(argv)
    os.makedirs(a.dir, exist_ok=True)
    exe = [sys.executable, "-m", "vllmlog"]
    rows = []
    for n in a.lines:
        path = Path(a.dir) / f"mixed-{n}.log"
        if not path.exists():
            with open(path, "wb") as f:
                generate(f, n)
        size_mb = path.stat().st_size / 1e6
        decode_share = None
        with open(path, "rb") as f:
            head = f.read(64 << 20)
            decode_share = head.count(b"] Decode step ") / max(1, head.count(b"\n"))
        cases = [(label, exe + args, env) for label, args, env, upto in CASES if upto is None or n <= upto]
        cases += [(label, cmd, {}) for label, cmd in ANCHORS]
        for label, cmd, env in cases:
            best = None
            loads = []
            for _ in range(a.repeat):
                loads.append(os.getloadavg()[0])
                r = _time(cmd + [str(path)], env)
                if best is None or r["wall"] < best["wall"]:
                    best = r
            assert best is not None
            row = {"lines": n, "mb": size_mb, "decode_share": decode_share, "case": label, **best,
                   "lines_per_s": n / max(0.01, best["wall"]), "cpu_lines_per_s": n / max(1e-9, best["user"] + best["sys"]),
                   "load": min(loads)}
            rows.append(row)
            print(f"{n:>9,} lines {label:45s} {best['wall']:6.2f} s  {row['lines_per_s'] / 1e6:5.2f} M lines/s  "
                  f"cpu {best['user'] + best['sys']:6.2f} s  peak RSS {best['rss_mb']:6.0f} MB  (load {row['load']:.1f})", flush=True)
    lin = _linearity(a, exe) if a.servers > 1 else []
    _write(a.out, rows, lin)
    return 0


def _linearity(a: argparse.Namespace, exe: list[str]) -> list[dict]:
    """diagnose/analyze on the smallest size as 1 server run and as ``a.servers`` runs, interleaved."""
    n = min(a.lines)
    paths = {}
    for k in (1, a.servers):
        paths[k] = Path(a.dir) / (f"mixed-{n}.log" if k == 1 else f"mixed-{n}-{k}srv.log")
        if not paths[k].exists():
            with open(paths[k], "wb") as f:
                generate(f, n, servers=k)
    out = []
    for label, args in ANALYSIS:
        cmd = exe + [x.replace("{dir}", a.dir) for x in args]
        best: dict[int, dict] = {}
        for _ in range(a.repeat):
            for k, p in paths.items():  # interleaved: both see the same machine
                r = _time(cmd + [str(p)])
                if k not in best or r["user"] + r["sys"] < best[k]["user"] + best[k]["sys"]:
                    best[k] = r
        base = best[1]["user"] + best[1]["sys"]
        for k in paths:
            cpu = best[k]["user"] + best[k]["sys"]
            out.append({"lines": n, "servers": k, "case": label, **best[k], "cpu": cpu,
                        "cpu_lines_per_s": n / max(1e-9, cpu), "vs_one": cpu / max(1e-9, base)})
            print(f"{n:>9,} lines {k:>4} server runs {label:28s} {best[k]['wall']:6.2f} s  cpu {cpu:6.2f} s  "
                  f"per line vs 1 run {cpu / max(1e-9, base):5.2f}  peak RSS {best[k]['rss_mb']:6.0f} MB", flush=True)
    return out


def _write(out: str, rows: list[dict], lin: list[dict] | None = None) -> None:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines = [
        "# vllmlog parse — throughput and peak memory",
        "",
        f"Measured {now} by `python bench/run.py` on {platform.machine()} with {cpus} usable cores, Python "
        f"{platform.python_version()}. Logs written by `bench/make_log.py` (handbook journey lines of 8–64 "
        "interleaved requests, V0 and V1 stats lines, access lines). Whole-process timings under `/usr/bin/time`, "
        "best wall time of the repeats; peak RSS is the largest process of the tree (parent or worker). "
        "`load` is the 1-minute load average before the run: the machine is shared with other work, so "
        "wall times above ~1 are inflated — `CPU lines/s` (lines / (user+sys)) is the steadier figure.",
        "",
        "| lines | MB | Decode share | command | wall s | lines/s | CPU s | CPU lines/s | peak RSS MB | load |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['lines']:,} | {r['mb']:.0f} | {r['decode_share']:.1%} | {r['case']} | {r['wall']:.2f} | "
            f"{r['lines_per_s']:,.0f} | {r['user'] + r['sys']:.2f} | {r['cpu_lines_per_s']:,.0f} | {r['rss_mb']:.0f} | {r['load']:.1f} |"
        )
    lines.append("")
    if lin:
        lines += [
            "### Linear in server runs",
            "",
            "The same log as one server run and split into server runs (restarts: banner + `Application startup "
            "complete.`, requests in flight lost); best CPU time of the repeats, runs interleaved. `per line vs 1 run` "
            "= CPU of the split log / CPU of the one-run log (same line count): ≈ 1 is linear.",
            "",
            "| lines | server runs | command | wall s | CPU s | CPU lines/s | per line vs 1 run | peak RSS MB |",
            "|---:|---:|---|---:|---:|---:|---:|---:|",
        ]
        for r in lin:
            lines.append(f"| {r['lines']:,} | {r['servers']} | {r['case']} | {r['wall']:.2f} | {r['cpu']:.2f} | "
                         f"{r['cpu_lines_per_s']:,.0f} | {r['vs_one']:.2f} | {r['rss_mb']:.0f} |")
        lines.append("")
    notes = ""
    if Path(out).exists():  # keep the hand-written analysis below the generated table
        old = Path(out).read_text(encoding="utf-8")
        i = old.find("\n## Notes")
        if i >= 0:
            notes = old[i:]
    Path(out).write_text("\n".join(lines) + notes + ("" if notes.endswith("\n") or not notes else "\n"), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
