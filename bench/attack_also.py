"""Issue 15, the "Also" items, against the installed CLI and library.

* parallel ``parse`` (a 58+ MB file of real lines with timestamp-less continuation records and traceback lines
  everywhere, so chunk boundaries fall among them) equals ``-j 1`` byte for byte, ``ts`` included; the file
  renamed away and replaced mid-parse: no traceback, output unchanged;
* ``-o /nonexistent/x``, ``> /dev/full``, ``--listen`` with a bad port: one line on stderr, exit 2;
* a file starting with a run of NUL bytes (what copytruncate leaves) is read, not refused as binary;
* ``VLLMLOG_PURE=0`` keeps the compiled parser; the library accepts ``pathlib.Path``;
* ``analyze`` of 400,000 never-finished requests: bounded (evicted counted and said in the output).

    python bench/attack_also.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _attack import cli  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "corpus"


def verdict(ok: bool, what: str) -> int:
    print(f"{'PASS' if ok else 'FAIL'} {what}", flush=True)
    return 0 if ok else 1


def main() -> int:
    print(f"## attack: issue 15's 'Also' items ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    bad = 0
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        logs = sorted((CORPUS / "vllm-cpu").glob("*.log")) + sorted((CORPUS / "vllm-cpu-faults").glob("*.log"))
        body = b"".join(p.read_bytes() for p in logs)
        cont = b"  continuation line without a timestamp\n\tat frame.py:1\nTraceback (most recent call last):\n"
        big = d / "big.log"
        with big.open("wb") as fh:
            while fh.tell() < 60 << 20:
                fh.write(body)
                fh.write(cont)
        outs = {}
        for j in ("1", "4"):
            rc, out, err = cli("parse", str(big), "-j", j, timeout=1800)
            outs[j] = (rc, out, b"Traceback" in err)
        nts, nts1 = outs["4"][1].count(b'"ts":null'), outs["1"][1].count(b'"ts":null')
        bad += verdict(outs["1"][0] == outs["4"][0] == 0 and outs["1"][1] == outs["4"][1] and not outs["4"][2],
                       f"parse -j 4 == -j 1 on {big.stat().st_size / 1e6:.0f} MB: {len(outs['4'][1]):,} bytes, identical "
                       f"{outs['1'][1] == outs['4'][1]}, ts=null {nts} (-j 1: {nts1})")
        # rotation mid-parse: rename the file away and put another in its place while -j 4 runs
        copy = d / "rot.log"
        copy.write_bytes(big.read_bytes())
        p = subprocess.Popen([sys.executable, "-m", "vllmlog", "parse", str(copy), "-j", "4"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)

        def rotate() -> None:
            time.sleep(1.0)
            copy.rename(d / "rot.log.1")
            copy.write_bytes(b"(APIServer pid=1) INFO 12-02 20:00:00 [x.py:1] a new file\n")

        threading.Thread(target=rotate).start()
        out, err = p.communicate(timeout=1800)
        bad += verdict(p.returncode == 0 and out == outs["1"][1].replace(str(big).encode(), str(copy).encode())
                       and b"Traceback" not in err, f"parse -j 4 with the file rotated 1 s in: exit {p.returncode}, "
                       f"output equal {out == outs['1'][1].replace(str(big).encode(), str(copy).encode())}")
        small = CORPUS / "vllm-cpu" / "01-startup-and-light-load.log"
        for args, what in ((["parse", str(small), "-o", "/nonexistent/x"], "-o /nonexistent/x"),
                           (["summary", str(small), "-o", "/nonexistent/x"], "summary -o /nonexistent/x"),
                           (["watch", str(small), "--listen", "127.0.0.1:99999", "--exit-at-eof"], "--listen :99999"),
                           (["watch", str(small), "--listen", "127.0.0.1:port", "--exit-at-eof"], "--listen :port")):
            rc, out, err = cli(*args)
            lines = [x for x in err.decode().splitlines() if x.strip()]
            bad += verdict(rc == 2 and b"Traceback" not in err and 1 <= len(lines) <= 2,
                           f"{what}: exit {rc}, stderr {lines[:2]}")
        for cmd in (["parse", str(small)], ["summary", str(small)], ["export", str(small)]):
            with open("/dev/full", "wb") as full:
                r = subprocess.run([sys.executable, "-m", "vllmlog", *cmd], stdout=full, stderr=subprocess.PIPE)
            lines = [x for x in r.stderr.decode().splitlines() if x.strip()]
            bad += verdict(r.returncode == 2 and b"Traceback" not in r.stderr and 1 <= len(lines) <= 2,
                           f"{cmd[0]} > /dev/full: exit {r.returncode}, stderr {lines[:2]}")
        nul = d / "nul.log"
        nul.write_bytes(b"\x00" * 100_000 + small.read_bytes())
        rc, out, err = cli("summary", str(nul), "--json")
        bad += verdict(rc in (0, 3) and b"binary" not in err and b'"requests"' in out,
                       f"leading 100,000 NUL bytes: summary exit {rc} {err.decode()[:120]!r}")
        code = ("import vllmlog, pathlib; from vllmlog.parsing import fast; from vllmlog.analyze import analyze; p = pathlib.Path(%r); "
                "print(fast.AVAILABLE, len(list(vllmlog.parse(p))), len(analyze(p).findings) >= 0)" % str(small))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, env={**os.environ, "VLLMLOG_PURE": "0"})
        bad += verdict(r.stdout.split()[:1] == [b"True"] and r.returncode == 0,
                       f"VLLMLOG_PURE=0 compiled on, pathlib.Path accepted: {r.stdout.decode().strip()} {r.stderr.decode()[-200:]}")
        n = 400_000
        openlog = d / "open.log"
        with openlog.open("w") as fh:
            for i in range(n):
                fh.write(f"(EngineCore pid=2) INFO 12-02 10:{i // 6000 % 60:02d}:{i // 100 % 60:02d} [async_llm.py:1] "
                         f"Added request cmpl-{i:07d}-0.\n")
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", "import resource, sys, json; from vllmlog.analyze import analyze; "
                            f"a = analyze({str(openlog)!r}); print(len(a.run.journeys), a.run.journeys_evicted, "
                            "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)"], capture_output=True)
        kept, ev, rss = (r.stdout.split() + [b"?"] * 3)[:3]
        rc, out, err = cli("analyze", str(openlog), "--no-html")
        said = b"evicted" in out
        bad += verdict(r.returncode == 0 and int(kept) <= 200_000 and int(ev) == n - int(kept) and said,
                       f"analyze of {n:,} never-finished requests: kept {kept.decode()}, evicted {ev.decode()}, peak RSS "
                       f"{rss.decode()} MB, {time.monotonic() - t0:.0f} s, the text says 'evicted' {said}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
