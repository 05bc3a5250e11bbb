#!/usr/bin/env python3
"""Score the diagnosis on a folder of labelled incident logs, the way an outside judge does.

Each case is ``NN-slug.log`` + ``NN-slug.json`` (``category``, optional ``accepted_categories``,
``secondary_categories``, ``evidence_line_numbers``). Every case runs through the real command line,
``vllmlog diagnose --json LOG --year 2026``; the answer is the first incident of severity ≥ warning when the
JSON has ``incidents``, otherwise the first finding of severity ≥ warning.

* top-1: the answer's category is the label's ``category`` or one of its ``accepted_categories``
  (``lenient`` also accepts a ``secondary_categories`` entry);
* evidence: the answer cites at least one of the labelled evidence lines;
* healthy controls: nothing at warning or above.

    python bench/score_diagnosis.py DIR [DIR …] [--md] [--vllmlog PATH]

Prints one row per case and the totals (``--md``: a Markdown table for docs/diagnosis-accuracy.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

RANK = {"info": 0, "warning": 1, "error": 2, "critical": 3}


def answer(doc: dict) -> dict | None:
    """The judged answer: first incident (or finding) at warning or above."""
    for key in ("incidents", "findings"):
        items = doc.get(key)
        if key == "incidents" and items is None:
            continue
        for it in items or []:
            if RANK.get(str(it.get("severity", "info")).lower(), 0) >= 1:
                return it
        if key == "incidents":
            return None
    return None


def cited_lines(it: dict, log: Path) -> set[int]:
    """Line numbers the answer cites in the case's own log."""
    out: set[int] = set()
    for e in it.get("evidence") or []:
        f = str(e.get("file") or "")
        if not f or Path(f).name == log.name:
            if isinstance(e.get("line"), int):
                out.add(e["line"])
    return out


def score_case(label: Path, exe: list[str]) -> dict:
    d = json.loads(label.read_text())
    log = label.with_suffix(".log")
    proc = subprocess.run(exe + ["diagnose", "--json", str(log), "--year", "2026"], capture_output=True, text=True)
    row = {"case": label.stem, "label": d["category"], "accepted": d.get("accepted_categories") or [],
           "secondary": d.get("secondary_categories") or [], "rc": proc.returncode}
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        row.update(got=f"(no JSON: exit {proc.returncode}: {proc.stderr.strip()[-200:]})", ok=False, lenient=False,
                   evidence=False, code="")
        return row
    top = answer(doc)
    if d["category"] == "healthy":
        row.update(got=(top or {}).get("category", "healthy") if top else "healthy", code=(top or {}).get("code", ""),
                   ok=top is None, lenient=top is None, evidence=True)
        return row
    got = (top or {}).get("category") if top else None
    ok = got is not None and (got == d["category"] or got in row["accepted"])
    row.update(got=got or "(nothing ≥ warning)", code=(top or {}).get("code", "") if top else "", ok=ok,
               lenient=ok or (got in row["secondary"]),
               evidence=bool(top) and bool(cited_lines(top, log) & set(d.get("evidence_line_numbers") or [])))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--md", action="store_true", help="Markdown table")
    ap.add_argument("--vllmlog", default=shutil.which("vllmlog") or "vllmlog", help="the vllmlog executable")
    a = ap.parse_args(argv)
    exe = [a.vllmlog]
    rows = []
    for d in a.dirs:
        for label in sorted(d.glob("*.json")):
            if not label.with_suffix(".log").exists():
                continue
            rows.append(score_case(label, exe))
    faults = [r for r in rows if r["label"] != "healthy"]
    healthy = [r for r in rows if r["label"] == "healthy"]
    if a.md:
        print("| case | label | answer | top-1 | evidence |")
        print("|---|---|---|---|---|")
    for r in rows:
        mark = "✔" if r["ok"] else ("~" if r["lenient"] else "✘")
        ev = "✔" if r["evidence"] else "✘"
        if a.md:
            print(f"| {r['case']} | {r['label']} | {r['got']} {r['code']} | {mark} | {ev if r['label'] != 'healthy' else '–'} |")
        else:
            print(f"{mark} {ev} {r['case']:<55} label={r['label']:<30} got={r['got']} {r['code']}")
    n = len(faults)
    top1 = sum(r["ok"] for r in faults)
    len1 = sum(r["lenient"] for r in faults)
    evid = sum(r["evidence"] for r in faults)
    clean = sum(r["ok"] for r in healthy)
    print()
    print(f"fault cases: {n}; top-1 {top1}/{n} = {100 * top1 / max(n, 1):.0f} % "
          f"(accepting secondary: {len1}/{n} = {100 * len1 / max(n, 1):.0f} %); "
          f"labelled evidence cited {evid}/{n} = {100 * evid / max(n, 1):.0f} %")
    print(f"healthy controls: {clean}/{len(healthy)} without a warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
