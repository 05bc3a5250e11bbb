"""Engines: who runs ``map_replica`` over the replicas. The same function, the same options, the same reduce.

``local`` — a process pool on this machine (``workers`` processes; 0 runs in this process). ``ray`` — one Ray
task per replica on a Ray cluster (``address``: ``auto``, ``ray://host:10001``, or None to start a local one),
at most ``2 × cluster CPUs`` in flight so the driver holds only finished results. ``ray-data`` — the same map as
a Ray Data ``map`` over a dataset of the replicas' specs, results streamed back. Either way the workers open
the files themselves: the driver sends a replica's name and paths (or fsspec URLs) and gets a compact dict back.
Results are returned sorted by replica name, whatever order they finished in.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, Sequence

from ..errors import ConfigError
from .inputs import ReplicaSpec
from .mapper import map_replica

ENGINES = ("local", "ray", "ray-data")
Progress = Callable[[dict[str, Any]], None]


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def run_local(specs: Sequence[ReplicaSpec], opts: dict[str, Any], workers: int | None = None,
              progress: Progress | None = None, fn: Callable[..., Any] = map_replica) -> list[Any]:
    """Map every replica in a process pool (``workers=0``: in this process)."""
    w = default_workers() if workers is None else workers
    out: list[dict[str, Any]] = []
    if w <= 0 or len(specs) == 0:
        for s in specs:
            r = fn(s.to_dict(), opts)
            out.append(r)
            if progress:
                progress(r)
    else:
        import multiprocessing as mp

        # forkserver: workers start from a clean interpreter (no driver threads or state copied), cheaply
        ctx = mp.get_context("forkserver") if "forkserver" in mp.get_all_start_methods() else mp.get_context("spawn")
        lost: list[ReplicaSpec] = []
        with ProcessPoolExecutor(max_workers=min(w, len(specs)), mp_context=ctx) as pool:
            futs = {pool.submit(fn, s.to_dict(), opts): s for s in specs}
            for f in as_completed(futs):
                try:
                    r = f.result()
                except BrokenProcessPool:  # a worker died (killed, out of memory): which replica did it is unknown
                    lost.append(futs[f])
                    continue
                out.append(r)
                if progress:
                    progress(r)
        for s in lost:  # each again, alone in a fresh worker: the one that kills it again is reported, not fatal
            with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
                try:
                    r = pool.submit(fn, s.to_dict(), opts).result()
                except BrokenProcessPool as exc:
                    r = _died(s, fn, f"the worker analysing it died ({exc})")
            out.append(r)
            if progress:
                progress(r)
    return _ordered(out)


def _died(spec: ReplicaSpec, fn: Callable[..., Any], why: str) -> Any:
    """The result of a task whose worker died: an error result for the map, the spec unsplit for the pod split."""
    if getattr(fn, "__name__", "") in ("split_pods", "split_hosts"):
        return {"parent": spec.name, "pods": [spec.to_dict()]}
    return {"schema": "vllmlog.fleet.replica/1", "replica": spec.name, "files": list(spec.paths), "error": why}


def _ordered(out: list[Any]) -> list[Any]:
    """Results sorted by replica name (map results), or as they came (other tasks)."""
    if all(isinstance(r, dict) and "replica" in r for r in out):
        return sorted(out, key=lambda r: r["replica"])
    return out


def run_ray(specs: Sequence[ReplicaSpec], opts: dict[str, Any], address: str | None = None,
            workers: int | None = None, progress: Progress | None = None,
            fn: Callable[..., Any] = map_replica) -> list[Any]:
    """Map every replica as a Ray task (``pip install 'vllmlog[ray]'``)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--engine ray needs Ray", hint="pip install 'vllmlog[ray]'") from None
    started = _ray_started(ray, address, workers)
    try:
        task = ray.remote(num_cpus=1, max_retries=1)(fn)
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        limit = max(1, (workers or cpus)) * 2
        out: list[dict[str, Any]] = []
        pending: list[Any] = []
        by_ref: dict[Any, ReplicaSpec] = {}
        todo = list(specs)
        while todo or pending:
            while todo and len(pending) < limit:
                spec = todo.pop(0)
                ref = task.remote(spec.to_dict(), opts)
                by_ref[ref] = spec
                pending.append(ref)
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    r = ray.get(ref)
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                        ray.exceptions.OutOfMemoryError) as exc:  # retried once already (max_retries=1)
                    r = _died(by_ref[ref], fn, f"the Ray worker analysing it died ({type(exc).__name__})")
                out.append(r)
                if progress:
                    progress(r)
        return _ordered(out)
    finally:
        if started:
            ray.shutdown()


def _ray_started(ray: Any, address: str | None, workers: int | None) -> bool:
    """``ray.init`` unless a Ray is up: ``address``, or a Ray of our own for this run on loopback. True when we
    started it (and must shut it down)."""
    if ray.is_initialized():
        return False
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if address:
        kw["address"] = address
    else:  # a Ray of our own, for this run: on loopback only
        kw["address"] = "local"  # a new instance, never one found on the machine
        kw["num_cpus"] = workers or default_workers()
        kw["_node_ip_address"] = "127.0.0.1"
    ray.init(**kw)
    return True


class _Task:
    """A Ray Data ``map`` over spec rows: each row ``{"spec": pickled spec}`` → ``{"result": pickled result}``
    (pickled both ways: a result's nested dicts, None and int keys pass through Arrow unchanged)."""

    def __init__(self, fn: Callable[..., Any], opts: dict[str, Any]) -> None:
        self.fn, self.opts = fn, opts

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        import pickle

        spec = pickle.loads(row["spec"])
        return {"result": pickle.dumps(self.fn(spec, self.opts), protocol=5)}


def run_ray_data(specs: Sequence[ReplicaSpec], opts: dict[str, Any], address: str | None = None,
                 workers: int | None = None, progress: Progress | None = None,
                 fn: Callable[..., Any] = map_replica) -> list[Any]:
    """Map every replica with Ray Data (``pip install 'vllmlog[ray]'``): a dataset of the replicas' specs (names
    and paths only — each task opens its replica's files itself, as everywhere), ``map`` with one CPU a task,
    results streamed back as they finish (``iter_rows``). A task whose worker dies is retried by Ray Data; if
    the dataset still fails, the replicas not yet returned run as Ray tasks (``run_ray``), whose failures are
    per replica."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise ConfigError("--engine ray-data needs Ray Data", hint="pip install 'vllmlog[ray]'") from None
    import pickle

    started = _ray_started(ray, address, workers)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False  # stderr stays the command's own (a --json run prints nothing else)
        out: list[Any] = []
        if specs:
            ds = ray.data.from_items([{"spec": pickle.dumps(s.to_dict(), protocol=5)} for s in specs],
                                     override_num_blocks=len(specs))
            ds = ds.map(_Task(fn, opts), num_cpus=1)
            try:
                for row in ds.iter_rows():
                    r = pickle.loads(row["result"])
                    out.append(r)
                    if progress:
                        progress(r)
            except Exception:  # noqa: BLE001 - a dataset that failed after Ray Data's retries
                done = {r["replica"] for r in out if isinstance(r, dict) and "replica" in r}
                out += run_ray([s for s in specs if s.name not in done], opts, address, workers, progress, fn)
        return _ordered(out)
    finally:
        if started:
            ray.shutdown()


def run_engine(engine: str, specs: Sequence[ReplicaSpec], opts: dict[str, Any], *, workers: int | None = None,
               address: str | None = None, progress: Progress | None = None,
               fn: Callable[..., Any] = map_replica) -> list[Any]:
    """Run ``fn(spec, opts)`` (the map, by default) over the replicas with ``engine`` (``local`` or ``ray``)."""
    if engine == "local":
        if address:
            raise ConfigError("--address is for --engine ray", hint="drop --address, or add --engine ray")
        return run_local(specs, opts, workers, progress, fn)
    if engine == "ray":
        return run_ray(specs, opts, address, workers, progress, fn)
    if engine == "ray-data":
        return run_ray_data(specs, opts, address, workers, progress, fn)
    raise ConfigError(f"unknown engine {engine!r}", hint="use --engine local, ray or ray-data")
