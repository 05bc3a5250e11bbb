#!/usr/bin/env python3
"""Fleet throughput and memory (not part of the unit tests).

    nice python bench/bench_fleet.py [--replicas 100] [--lines 200000] [--dir /tmp/vllmlog-bench-fleet]
                                     [--out bench/fleet-results.md] [--no-ray]

One replica log of ``--lines`` lines is written once and hard-linked ``--replicas`` times (``replica-NNN.log``: the
content is the same, the work is not shared — each worker reads and analyses its own file). ``--source sim``
(default): one long vLLM 0.32 server run from the simulator (``vllmlog simulate -s healthy -f v1``), what a
replica's log is; ``--source real``: the corpus's real CPU runs repeated with shifted ids
(``bench/make_real_log.py``) — real lines, but many short server runs one after the other. Then, in this
process (the driver), timed in the same invocation:

* **reference**: ``vllmlog.analyze.analyze`` on one replica log — the single-file analysis the fleet's map runs
  per replica — lines/s;
* ``fleet`` with ``--engine local`` and 1 worker, 2 workers, and ``--engine ray`` with 2 workers (a local Ray on
  loopback, started before the clock starts): lines/s over the whole fleet (wall), per worker, and as a ratio to
  the reference;
* peak RSS: the driver's own (``VmHWM`` of this process, which also reads the rows back for the exact
  percentiles) and each worker's (``VmHWM`` of every worker process, sampled from ``/proc`` while it runs);
* the driver's memory at a quarter of the replicas' lines vs all of them (it should not grow with the lines).

Results go to ``--out`` as Markdown, with the load average (the machine is shared) and the plan for 10¹⁰ lines.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def vm_hwm(pid: int | str = "self") -> int:
    """Peak resident set of a process, bytes (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


_TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int | str) -> float:
    """User + system CPU seconds of a process so far (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, ValueError, IndexError):
        return 0.0


def _cmdline(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _ppid(pid: str) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


class WorkerSampler:
    """Samples the peak RSS of worker processes: this process's descendants (the local pool and its
    forkserver) or, of those, Ray's worker processes (``ray::`` / ``default_worker.py``: the Ray this process
    started; another Ray on the machine is not counted)."""

    def __init__(self, ray: bool) -> None:
        self.ray = ray
        self.peaks: dict[str, int] = {}
        self.cpu: dict[str, float] = {}
        self.cpu0: dict[str, float] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "WorkerSampler":
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sample()
        self._stop.set()
        self._t.join()

    def _mine(self, pid: str, me: int) -> bool:
        p = int(pid)
        for _ in range(6):
            p = _ppid(str(p))
            if p == me:
                return True
            if p <= 1:
                return False
        return False

    def _sample(self) -> None:
        me = os.getpid()
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == me:
                continue
            if self.ray:
                cl = _cmdline(pid)
                # Ray's workers of the Ray this process started (its raylet is our descendant): not other Rays'
                if not ("ray::" in cl or "default_worker.py" in cl) or not self._mine(pid, me):
                    continue
            elif not self._mine(pid, me):
                continue
            h = vm_hwm(pid)
            if h > self.peaks.get(pid, 0):
                self.peaks[pid] = h
            c = cpu_s(pid)
            if pid not in self.cpu0:
                self.cpu0[pid] = c if self.ray else 0.0  # Ray's workers may predate this run
            if c:
                self.cpu[pid] = c

    def worker_cpu(self) -> float:
        """CPU seconds the workers spent during the run (sampled every 0.25 s: the last moments are missed)."""
        return sum(c - self.cpu0.get(p, 0.0) for p, c in self.cpu.items())

    def _run(self) -> None:
        self._sample()
        while not self._stop.wait(0.25):
            self._sample()

    def worker_peak(self) -> int:
        """The largest worker's peak RSS (the forkserver itself, a tiny process, included)."""
        return max(self.peaks.values(), default=0)


def mib(b: int) -> str:
    return f"{b / 2**20:,.0f} MiB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=100)
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "vllmlog-bench-fleet"))
    ap.add_argument("--out", default=str(HERE / "fleet-results.md"))
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--configs", default="local1,local2,ray2", help="which runs: local1, local2, ray2 (comma-separated; "
                    "two bench processes may run different ones side by side on a shared machine)")
    ap.add_argument("--source", choices=("sim", "real"), default="sim")
    ap.add_argument("--scaling", default="", help="comma-separated replica sizes (lines): the map's CPU per replica at "
                    "each, in this process, written to --scaling-out instead of the engine runs")
    ap.add_argument("--scaling-out", default=str(HERE / "fleet-scaling.md"))
    args = ap.parse_args(argv)

    def generate(f, n: int) -> None:  # type: ignore[no-untyped-def]
        if args.source == "real":
            from make_real_log import generate as real

            real(f, n)
            return
        import io

        from vllmlog.simulate import build_config, simulate

        buf = io.StringIO()
        simulate(build_config("healthy", fmt="v1", seed=7, max_lines=n), buf)
        f.write(buf.getvalue().encode("utf-8"))

    from vllmlog.analyze import analyze
    from vllmlog.fleet import analyze_fleet

    d = Path(args.dir)
    if args.scaling:
        return scaling(args, d, generate)
    logs = d / f"fleet-{args.source}-{args.replicas}x{args.lines}"
    small = d / f"fleet-{args.source}-{args.replicas}x{args.lines // 4}"
    for folder, n in ((logs, args.lines), (small, args.lines // 4)):
        src = d / f"replica-{args.source}-{n}.log"
        if not src.exists():
            d.mkdir(parents=True, exist_ok=True)
            with open(src, "wb") as f:
                generate(f, n)
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(args.replicas):
            p = folder / f"replica-{i:03d}.log"
            if not p.exists():
                os.link(src, p)
    def count(folder: Path) -> int:
        with open(folder / "replica-000.log", "rb") as f:
            return f.read().count(b"\n")

    per_replica = count(logs)  # the simulator stops near --lines, not at it
    total = per_replica * args.replicas
    total_small = count(small) * args.replicas
    results: list[tuple[str, float, int, int, float, float, float]] = []

    analyze([str(logs / "replica-001.log")])  # warm: imports, the rule registry
    t0 = time.perf_counter()
    c0 = time.process_time()
    analyze([str(logs / "replica-000.log")])
    ref_s = time.perf_counter() - t0
    ref_cpu = time.process_time() - c0
    ref_rate = per_replica / ref_cpu
    print(f"reference analyze: {per_replica:,} lines in {ref_s:.2f} s wall, {ref_cpu:.2f} s CPU = {ref_rate:,.0f} "
          "lines per CPU-second", flush=True)

    def one(label: str, engine: str, workers: int, folder: Path, lines: int) -> tuple[float, int, int, float, float]:
        out = tempfile.mkdtemp(prefix="fleet-out-", dir=d)
        with WorkerSampler(engine == "ray") as ws:
            t = time.perf_counter()
            c = time.process_time()
            fa = analyze_fleet([str(folder)], engine=engine, workers=workers, out_dir=out)
            wall = time.perf_counter() - t
            drv_cpu = time.process_time() - c
        assert fa.report["replicas_read"] == args.replicas, fa.report["coverage"]
        assert fa.report["lines"] == lines, (fa.report["lines"], lines)
        rate = lines / wall
        print(f"{label}: {lines:,} lines in {wall:.1f} s = {rate:,.0f} lines/s ({rate / workers:,.0f} per worker); "
              f"driver peak {mib(vm_hwm())}, worker peak {mib(ws.worker_peak())}; CPU: workers {ws.worker_cpu():.1f} s, "
              f"driver {drv_cpu:.1f} s", flush=True)
        return wall, vm_hwm(), ws.worker_peak(), ws.worker_cpu(), drv_cpu

    drv_small = None
    ray_failed = None
    wanted = set(args.configs.split(","))
    for key, label, engine, workers in (("local1", "local, 1 worker", "local", 1), ("local2", "local, 2 workers", "local", 2),
                                        ("ray2", "ray, 2 workers", "ray", 2)):
        if key not in wanted:
            continue
        if engine == "ray":
            if args.no_ray:
                continue
            import ray

            try:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
            except Exception as exc:  # a loaded machine can time Ray's start-up out: say so, keep the other rows
                ray_failed = f"{type(exc).__name__}: {exc}"
                print(f"{label}: Ray did not start ({ray_failed})", flush=True)
                continue
        try:
            if label == "local, 2 workers":
                # the driver's memory against the lines: ¼ of the lines vs all, each in a fresh interpreter (this
                # process has run the reference analyze: its own peak says nothing of the driver); the full run
                # in the child is also the table's row
                drv_small = _in_child(str(small), workers, total_small)[1]
                wall, drv, wpk, wcpu, dcpu = _in_child(str(logs), workers, total)
                drv_full = drv
                print(f"{label}: {total:,} lines in {wall:.1f} s = {total / wall:,.0f} lines/s; driver alone: "
                      f"{mib(drv_small)} at ¼ of the lines, {mib(drv_full)} at all; worker peak {mib(wpk)}; CPU: "
                      f"workers {wcpu:.1f} s, driver {dcpu:.1f} s", flush=True)
            else:
                wall, drv, wpk, wcpu, dcpu = one(label, engine, workers, logs, total)
            results.append((label, wall, drv, wpk, total / wall, wcpu, dcpu))
        finally:
            if engine == "ray":
                ray.shutdown()

    load = os.getloadavg()
    per_worker = max(total / r[5] for r in results if r[5])
    need = 1e10 / 600
    lines_md = [
        "# Fleet benchmark (`bench/bench_fleet.py`)",
        "",
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC · {platform.machine()}, {os.cpu_count()} CPUs shared with other "
        f"work (load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end) · Python {platform.python_version()}",
        "",
        f"Fleet: {args.replicas} replicas × {per_replica:,} lines = {total:,} lines, "
        + ("one simulated vLLM 0.32 server run per replica (`vllmlog simulate -s healthy -f v1`)" if args.source == "sim"
           else "real vLLM 0.32 lines (`bench/make_real_log.py`)")
        + "; one file hard-linked per replica: every worker reads and analyses its own.",
        "",
        f"Reference (same run): `analyze` of one replica log in the driver: {ref_s:.2f} s wall, {ref_cpu:.2f} s CPU = "
        f"**{ref_rate:,.0f} lines per CPU-second**.",
        "",
        "The machine is shared, so wall time says little about the code; the CPU seconds the workers spent are the "
        "rate that scales (lines ÷ workers' CPU-seconds), and its ratio to the reference says what the fleet's map "
        "costs over a plain `analyze` per line (the map skips analyze's summary and timeline, and writes the rows).",
        "",
        "| engine | wall | lines/s (wall) | workers' CPU | lines per worker CPU-s | × reference | driver CPU | driver peak RSS | worker peak RSS |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, wall, drv, wpk, rate, wcpu, dcpu in results:
        per = total / wcpu if wcpu else 0.0
        lines_md.append(f"| {label} | {wall:.1f} s | {rate:,.0f} | {wcpu:.1f} s | {per:,.0f} | {per / ref_rate:.2f} | "
                        f"{dcpu:.1f} s | {mib(drv)} | {mib(wpk)} |")
    if ray_failed:
        lines_md += ["", f"Ray did not start in this run ({ray_failed[:200]}); `tests/test_fleet_ray.py` shows the same "
                     "results on a real local Ray."]
    if drv_small is not None:
        lines_md += ["", f"Driver peak RSS, local with 2 workers, in a fresh process: {mib(drv_small)} at ¼ of the lines "
                     f"vs {mib(drv_full)} at all of them (× {drv_full / drv_small:.2f} for × 4 lines): the driver holds the "
                     "replicas' compact results and reads one rows column at a time, never the log lines."]
    workers_needed = need / per_worker
    lines_md += [
        "",
        "## Plan: a day of 10¹⁰ lines in 10 minutes",
        "",
        f"10¹⁰ lines in 600 s is {need:,.0f} lines/s. At the best per-worker rate measured here ({per_worker:,.0f} "
        f"lines per CPU-second), that is **{workers_needed:,.0f} workers** (one core each) if every worker is "
        f"busy all the time; with 25 % headroom for stragglers and uneven replicas, **{workers_needed * 1.25:,.0f}**. "
        "A worker analyses a whole replica, so the fleet needs at least that many replicas' streams (or their "
        "rotated pieces as separate tasks) to keep every worker busy; on Ray that is a cluster of e.g. "
        f"{-(-int(workers_needed * 1.25) // 32)} nodes × 32 CPUs, `vllmlog fleet s3://bucket/day/ --engine ray "
        "--address auto --out /shared/fleet`. The driver does not read the logs: it holds one compact result per "
        "replica (a few KB) and the rows' columns for the exact percentiles (8 bytes per request per metric).",
        "",
        f"The rate is for {per_replica:,}-line replicas. The map's cost per line no longer grows with a replica's "
        "length (`bench/fleet-scaling.md`, `--scaling`: the diagnosis's quadratic symptom detector was made linear, "
        "commit 8dde63d), so the plan does not depend on how the day is cut into replicas, as long as there are "
        "more replica streams than workers (a worker analyses one replica: its rotated pieces are one stream). "
        "With fewer, longer replicas than workers, cut a replica's day at its rotation points and give each piece "
        "its own task (a journey spanning a cut is then split: the numbers of the requests at the seams change).",
        "",
        "What the driver needs for that: the replicas' compact results (a few KB each; with `--percentiles sketch` "
        "also their DDSketches, no rows) and, for exact percentiles, one rows column at a time (8 bytes per request: "
        "a day of 10¹⁰ lines is ~10⁸ requests at ~100 lines a request, 0.8 GB per column), which Polars reads from "
        "the shared `--out`. The workers write their rows there; the logs are read by the workers from the "
        "bucket (`s3://…` through fsspec), never through the driver.",
    ]
    Path(args.out).write_text("\n".join(lines_md) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


def scaling(args: argparse.Namespace, d: Path, generate) -> int:  # type: ignore[no-untyped-def]
    """CPU of one replica's map (and of its parse alone) at several replica sizes: is the per-line cost flat?"""
    from vllmlog.fleet import map_replica
    from vllmlog.run import load

    d.mkdir(parents=True, exist_ok=True)
    map_replica({"name": "warm", "paths": [str(HERE.parent / "tests" / "data" / "fleet" / "light-load.log.gz")]}, {})
    rows = []
    for n in (int(x) for x in args.scaling.split(",")):
        src = d / f"replica-{args.source}-{n}.log"
        if not src.exists():
            with open(src, "wb") as f:
                generate(f, n)
        lines = src.read_bytes().count(b"\n")
        c = time.process_time()
        map_replica({"name": "x", "paths": [str(src)]}, {"rows_dir": str(d / "scaling-rows")})
        cm = time.process_time() - c
        c = time.process_time()
        load(str(src))
        cl = time.process_time() - c
        rows.append((lines, cm, cl))
        print(f"{lines:,} lines: map {cm:.2f} CPU-s ({lines / cm:,.0f} lines/CPU-s), parse+journeys {cl:.2f} CPU-s "
              f"({lines / cl:,.0f})", flush=True)
    load_avg = os.getloadavg()
    md = ["# Fleet map cost against replica size (`bench/bench_fleet.py --scaling …`)", "",
          f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC · load average {load_avg[0]:.1f} (shared machine; CPU "
          "seconds of this process, not wall time) · one simulated vLLM 0.32 server run per size", "",
          "| lines in the replica | map CPU | lines per CPU-s | × smallest | of which parse + journeys (`run.load`) |",
          "|---:|---:|---:|---:|---:|"]
    base = rows[0][0] / rows[0][1]
    for lines, cm, cl in rows:
        md.append(f"| {lines:,} | {cm:.2f} s | {lines / cm:,.0f} | {lines / cm / base:.2f} | {cl:.2f} s "
                  f"({lines / cl:,.0f} lines/s) |")
    Path(args.scaling_out).write_text("\n".join(md) + "\n", encoding="utf-8")
    print(f"wrote {args.scaling_out}")
    return 0


def _driver(folder: str, workers: int, lines: int, q) -> None:  # type: ignore[no-untyped-def]
    from vllmlog.fleet import analyze_fleet

    out = tempfile.mkdtemp(prefix="fleet-out-", dir=os.path.dirname(folder))
    with WorkerSampler(False) as ws:
        t = time.perf_counter()
        c = time.process_time()
        fa = analyze_fleet([folder], engine="local", workers=workers, out_dir=out)
        wall = time.perf_counter() - t
        drv_cpu = time.process_time() - c
    assert fa.report["lines"] == lines
    q.put((wall, vm_hwm(), ws.worker_peak(), ws.worker_cpu(), drv_cpu))


def _in_child(folder: str, workers: int, lines: int) -> tuple[float, int, int, float, float]:
    """A local fleet run in a fresh interpreter: wall, the driver's peak RSS, the largest worker's peak RSS, the
    workers' CPU, the driver's CPU."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_driver, args=(folder, workers, lines, q))
    p.start()
    r = q.get()
    p.join()
    return r


if __name__ == "__main__":
    raise SystemExit(main())
