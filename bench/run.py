#!/usr/bin/env python3
"""Throughput and peak memory of vllmlog beside mawk, Polars and grep, on the same files, in the same run.

    python bench/run.py [--lines 1000000 5000000] [--real-lines 1000000] [--repeat 3] [--dir /tmp/vllmlog-bench]
                        [--rss-lines 1000000 5000000 20000000] [--servers 300] [--out bench/RESULTS.md]

Inputs (written once, kept in --dir):

* ``synthetic N`` — ``bench/make_log.py``: handbook journey lines (~93 % ``Decode step``), V0/V1 stats, access lines
* ``real INFO`` — ``bench/make_real_log.py``: the real vLLM 0.32 INFO logs of the corpus repeated with shifted ids
* ``real DEBUG`` — the same with the corpus's DEBUG-level run

On each input, whole processes under ``/usr/bin/time`` (wall, CPU, peak RSS of the process tree), the commands of
one repeat run one after the other and the repeats interleaved, so every command sees the same machine; the
median of the repeats is reported, and every vllmlog row as a ratio to the references run on the same file:

* ``mawk -f bench/ref/extract.awk`` — a hand-written field extractor (kind, time, request id, numbers per line)
* ``python bench/ref/polars_extract.py`` — the same fields by one streaming Polars plan, plus a per-request group-by
* ``grep -c <literal>`` — one literal scan of the file (the floor), and ``wc -l``

Then: the analysis on the same log as 1 and as ``--servers`` server runs (linear in server runs), and peak RSS of
``parse`` and ``analyze`` at ``--rss-lines`` (flat in file size).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_log import generate  # noqa: E402
from make_real_log import generate as generate_real  # noqa: E402

VLLMLOG = [  # (label, arguments)
    ("vllmlog parse → /dev/null (JSONL, default -j)", ["parse", "--year", "2026"]),
    ("vllmlog parse -j 1 (JSONL, one process)", ["parse", "--year", "2026", "-j", "1"]),
    ("vllmlog parse --stats", ["parse", "--stats", "--year", "2026"]),
    ("vllmlog summary --json", ["summary", "--json", "--year", "2026"]),
    ("vllmlog diagnose --json", ["diagnose", "--json", "--year", "2026"]),
    ("vllmlog analyze -o report.html", ["analyze", "--year", "2026", "--fail-on", "never", "-o", "{dir}/report.html"]),
]
PURE = ("vllmlog parse -j 1, pure Python (VLLMLOG_PURE=1)", ["parse", "--year", "2026", "-j", "1"])
ANALYSIS = [
    ("diagnose --json", ["diagnose", "--json", "--year", "2026"]),
    ("analyze -o report.html", ["analyze", "--year", "2026", "--fail-on", "never", "-o", "{dir}/report.html"]),
]
GREP = {"synthetic": "Decode step", "real INFO": "Received request", "real DEBUG": "Running batch"}


def _time(cmd: list[str], env: dict[str, str] | None = None, capture: bool = False) -> dict[str, float]:
    """Wall, CPU (user+sys) and peak RSS of a whole process (GNU time). ``capture``: stdout to a pipe (GNU grep -c
    to /dev/null stops at the first match)."""
    gnu_time = shutil.which("time") or "/usr/bin/time"
    fmt = "%e %U %S %M"
    with open(os.devnull, "wb") as null:
        r = subprocess.run([gnu_time, "-f", fmt] + cmd, stdout=subprocess.PIPE if capture else null, stderr=subprocess.PIPE,
                           check=False, env={**os.environ, **(env or {})})
    last = r.stderr.decode(errors="replace").strip().splitlines()[-1]
    m = re.search(r"([\d.]+) ([\d.]+) ([\d.]+) (\d+)$", last)
    # diagnose/analyze exit 1 when they report findings at or above --fail-on (GNU time says so first), and 3 when
    # the input was not read in full (INCOMPLETE: a verdict, not a failure)
    if r.returncode not in (0, 1, 3) or m is None:
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.decode()[-2000:]}")
    return {"wall": float(m.group(1)), "cpu": float(m.group(2)) + float(m.group(3)), "rss_mb": int(m.group(4)) / 1024}


def _lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            n += chunk.count(b"\n")
    return n


def inputs(a: argparse.Namespace) -> list[tuple[str, Path]]:
    out = []
    for n in a.lines if "synthetic" in a.only else ():
        p = Path(a.dir) / f"mixed-{n}.log"
        if not p.exists():
            with open(p, "wb") as f:
                generate(f, n)
        out.append(("synthetic", p))
    for level in [lv for lv in ("info", "debug") if f"real {lv.upper()}" in a.only]:
        p = Path(a.dir) / f"real-{level}-{a.real_lines}.log"
        if not p.exists():
            with open(p, "wb") as f:
                generate_real(f, a.real_lines, level)
        out.append((f"real {level.upper()}", p))
    return out


def commands(a: argparse.Namespace, family: str, path: Path, n: int) -> list[tuple[str, list[str], dict[str, str], bool]]:
    exe = [sys.executable, "-m", "vllmlog"]
    cmds = [(label, exe + [x.replace("{dir}", a.dir) for x in args] + [str(path)], {}, False) for label, args in VLLMLOG]
    if n <= 1_000_000:
        cmds.append((PURE[0], exe + PURE[1] + [str(path)], {"VLLMLOG_PURE": "1"}, False))
    cmds += [
        ("ref: mawk -f bench/ref/extract.awk", ["mawk", "-f", str(HERE / "ref" / "extract.awk"), str(path)], {}, False),
        ("ref: Polars (bench/ref/polars_extract.py)", [sys.executable, str(HERE / "ref" / "polars_extract.py"), str(path)], {}, False),
        (f"ref: grep -c '{GREP[family]}'", ["grep", "-c", GREP[family], str(path)], {}, True),
        ("ref: wc -l", ["wc", "-l", str(path)], {}, False),
    ]
    return cmds


def measure(a: argparse.Namespace) -> list[dict]:
    rows = []
    for family, path in inputs(a):
        n = _lines(path)
        cmds = commands(a, family, path, n)
        runs: dict[str, list[dict]] = {label: [] for label, *_ in cmds}
        loads = []
        for _ in range(a.repeat):
            loads.append(os.getloadavg()[0])
            for label, cmd, env, cap in cmds:
                runs[label].append(_time(cmd, env, cap))
        med = {label: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "rss_mb")} for label, rs in runs.items()}
        mawk = med["ref: mawk -f bench/ref/extract.awk"]
        pol = med["ref: Polars (bench/ref/polars_extract.py)"]
        for label, *_ in cmds:
            m = med[label]
            row = {"input": family, "lines": n, "mb": path.stat().st_size / 1e6, "case": label, **m,
                   "lines_per_s": n / max(0.01, m["wall"]), "x_mawk": m["wall"] / max(0.01, mawk["wall"]),
                   "x_mawk_cpu": m["cpu"] / max(0.01, mawk["cpu"]), "x_polars": m["wall"] / max(0.01, pol["wall"]),
                   "load": statistics.median(loads)}
            rows.append(row)
            print(f"{family:11s} {n:>10,} {label:52s} {m['wall']:7.2f} s  cpu {m['cpu']:7.2f} s  "
                  f"{row['lines_per_s'] / 1e6:6.2f} M lines/s  ×mawk {row['x_mawk']:5.2f} (cpu {row['x_mawk_cpu']:5.2f})  "
                  f"×Polars {row['x_polars']:5.2f}  RSS {m['rss_mb']:5.0f} MB", flush=True)
    return rows


def linearity(a: argparse.Namespace) -> list[dict]:
    """diagnose/analyze on the smallest synthetic size as 1 server run and as ``a.servers`` runs, interleaved."""
    n = min(a.lines)
    exe = [sys.executable, "-m", "vllmlog"]
    paths = {}
    for k in (1, a.servers):
        paths[k] = Path(a.dir) / (f"mixed-{n}.log" if k == 1 else f"mixed-{n}-{k}srv.log")
        if not paths[k].exists():
            with open(paths[k], "wb") as f:
                generate(f, n, servers=k)
    out = []
    for label, args in ANALYSIS:
        cmd = exe + [x.replace("{dir}", a.dir) for x in args]
        runs: dict[int, list[dict]] = {k: [] for k in paths}
        for _ in range(a.repeat):
            for k, p in paths.items():  # interleaved: both see the same machine
                runs[k].append(_time(cmd + [str(p)]))
        base = statistics.median(r["cpu"] for r in runs[1])
        for k in paths:
            cpu = statistics.median(r["cpu"] for r in runs[k])
            wall = statistics.median(r["wall"] for r in runs[k])
            rss = max(r["rss_mb"] for r in runs[k])
            out.append({"lines": n, "servers": k, "case": label, "wall": wall, "cpu": cpu, "rss_mb": rss,
                        "cpu_lines_per_s": n / max(1e-9, cpu), "vs_one": cpu / max(1e-9, base)})
            print(f"{n:>9,} lines {k:>4} server runs {label:28s} {wall:6.2f} s  cpu {cpu:6.2f} s  "
                  f"per line vs 1 run {cpu / max(1e-9, base):5.2f}  peak RSS {rss:6.0f} MB", flush=True)
    return out


RSS_CMDS = [("parse -j 1", ["parse", "--year", "2026", "-j", "1"]), ("summary --json", VLLMLOG[3][1]),
            ("diagnose --json", VLLMLOG[4][1]), ("analyze -o report.html", VLLMLOG[5][1])]


def rss(a: argparse.Namespace) -> list[dict]:
    """Peak RSS of parse (one process), summary, diagnose and analyze at several sizes of the ``--rss-input`` logs
    (synthetic and/or real INFO; a real log of N lines is the corpus repeated, as the real-log case). ``--rss-delete``:
    remove each file after its row (a 20 M-line real log is 4 GB)."""
    exe = [sys.executable, "-m", "vllmlog"]
    out = []
    for family in a.rss_input:
        for n in a.rss_lines:
            if family == "synthetic":
                p = Path(a.dir) / f"mixed-{n}.log"
                make = lambda f, n=n: generate(f, n)  # noqa: E731
            else:
                p = Path(a.dir) / f"real-info-{n}.log"
                make = lambda f, n=n: generate_real(f, n, "info")  # noqa: E731
            if not p.exists():
                with open(p, "wb") as f:
                    make(f)
            for label, args in RSS_CMDS:
                r = _time(exe + [x.replace("{dir}", a.dir) for x in args] + [str(p)])
                out.append({"input": family, "lines": n, "case": label, **r})
                print(f"{family:10s} {n:>11,} lines {label:28s} {r['wall']:8.2f} s  cpu {r['cpu']:8.2f} s  "
                      f"peak RSS {r['rss_mb']:6.0f} MB", flush=True)
            if a.rss_delete and n > a.real_lines:
                p.unlink()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[1_000_000, 5_000_000], help="synthetic log sizes")
    ap.add_argument("--real-lines", type=int, default=1_000_000, help="size of the real-log inputs")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="+", default=["synthetic", "real INFO", "real DEBUG"],
                    help="inputs to measure (synthetic, 'real INFO', 'real DEBUG')")
    ap.add_argument("--dir", default="/tmp/vllmlog-bench")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    ap.add_argument("--servers", type=int, default=300, help="server runs of the linearity case (0: skip it)")
    ap.add_argument("--rss-lines", type=int, nargs="*", default=[1_000_000, 5_000_000, 20_000_000],
                    help="sizes for the peak-RSS table (none: skip it)")
    ap.add_argument("--rss-input", nargs="+", default=["synthetic", "real INFO"], choices=("synthetic", "real INFO"),
                    help="logs of the peak-RSS table")
    ap.add_argument("--rss-delete", action="store_true", help="delete the peak-RSS table's large files after use")
    a = ap.parse_args(argv)
    os.makedirs(a.dir, exist_ok=True)
    rows = measure(a)
    lin = linearity(a) if a.servers > 1 else []
    mem = rss(a) if a.rss_lines else []
    _write(a, rows, lin, mem)
    return 0


def _write(a: argparse.Namespace, rows: list[dict], lin: list[dict], mem: list[dict]) -> None:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines = [
        "# vllmlog beside mawk, Polars and grep — throughput, ratios and peak memory",
        "",
        f"Measured {now} by `python bench/run.py --repeat {a.repeat}` on {platform.machine()} with {cpus} usable cores, "
        f"Python {platform.python_version()}. Whole processes under `/usr/bin/time` (start-up included), median of "
        f"{a.repeat} interleaved repeats; peak RSS is the largest process of the tree. `× mawk` = vllmlog's wall time / "
        "the mawk reference's wall time on the same file in the same run (below 1: faster than mawk); `× mawk CPU` the "
        "same for CPU time (user + sys: a multi-process run spends more CPU than its wall time); `load` = 1-minute load "
        "average during the repeats (the machine is shared: ratios are the figures to read, absolute times vary).",
        "",
        "| input | lines | MB | command | wall s | CPU s | lines/s (wall) | × mawk | × mawk CPU | × Polars | peak RSS MB | load |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['input']} | {r['lines']:,} | {r['mb']:.0f} | {r['case']} | {r['wall']:.2f} | {r['cpu']:.2f} | "
            f"{r['lines_per_s']:,.0f} | {r['x_mawk']:.2f} | {r['x_mawk_cpu']:.2f} | {r['x_polars']:.2f} | {r['rss_mb']:.0f} | {r['load']:.1f} |")
    lines.append("")
    if lin:
        lines += [
            "### Linear in server runs",
            "",
            "The same synthetic log as one server run and split into server runs (restarts: banner + `Application startup "
            "complete.`, requests in flight lost); median CPU time of the repeats, runs interleaved. `per line vs 1 run` "
            "= CPU of the split log / CPU of the one-run log (same line count): ≈ 1 is linear.",
            "",
            "| lines | server runs | command | wall s | CPU s | CPU lines/s | per line vs 1 run | peak RSS MB |",
            "|---:|---:|---|---:|---:|---:|---:|---:|",
        ]
        for r in lin:
            lines.append(f"| {r['lines']:,} | {r['servers']} | {r['case']} | {r['wall']:.2f} | {r['cpu']:.2f} | "
                         f"{r['cpu_lines_per_s']:,.0f} | {r['vs_one']:.2f} | {r['rss_mb']:.0f} |")
        lines.append("")
    if mem:
        lines += ["### Peak memory by file size (one run each)", "",
                  "| input | lines | command | wall s | CPU s | peak RSS MB |", "|---|---:|---|---:|---:|---:|"]
        for r in mem:
            lines.append(f"| {r['input']} | {r['lines']:,} | {r['case']} | {r['wall']:.2f} | {r['cpu']:.2f} | {r['rss_mb']:.0f} |")
        lines.append("")
    notes = ""
    out = Path(a.out)
    if out.exists():  # keep the hand-written analysis below the generated tables
        old = out.read_text(encoding="utf-8")
        i = old.find("\n## Notes")
        if i >= 0:
            notes = old[i:]
    out.write_text("\n".join(lines) + notes + ("" if notes.endswith("\n") or not notes else "\n"), encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
