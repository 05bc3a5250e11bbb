"""The capacity plan of a Run: per serving server run, what it has, what the load needs, which limit binds and
when, what-ifs, replicas for a target, checks of the model against what the logs show, and advice."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..numbers import SloTargets, describe
from .figure import ESTIMATED, MODEL, Figure
from .limits import Window, binding, windows
from .load import Load, busy, measure
from .model import (Footprint, Throughput, fit_throughput, fits, footprint, measured_footprint, pressure_footprint,
                    running)
from . import sizing
from .prom import for_state as prom_for
from .replicas import Replicas, plan as replica_plan
from .server import Server, facts
from .sizing import Sizing
from .whatif import WhatIf, whatifs

if TYPE_CHECKING:  # pragma: no cover
    from ..client import ClientRecord
    from ..run import Run
    from ..state import ServiceState


@dataclass
class Check:
    """A prediction of the model set against what a log or vLLM itself states."""

    name: str
    predicted: float
    actual: float
    actual_source: str
    how: str = ""

    @property
    def error(self) -> float | None:
        """(predicted − actual) ÷ actual."""
        return (self.predicted - self.actual) / self.actual if self.actual else None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "predicted": self.predicted, "actual": self.actual, "error": self.error,
                "actual_source": self.actual_source, "how": self.how}


@dataclass
class ServerCapacity:
    """The capacity plan of one server run."""

    file: str
    server: int
    facts: Server
    load: Load
    footprint: Footprint | None
    throughput: Throughput | None
    windows: list[Window]
    binding: str
    whatifs: list[WhatIf]
    replicas: Replicas
    checks: list[Check] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    model_figures: list[Figure] = field(default_factory=list)
    sizing: Sizing | None = None
    """The values the diagnosis's fixes name for this server run (``sizing.of``)."""
    replica: str | None = None
    """The fleet replica this run belongs to (``vllmlog capacity DIR``), else None."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file, "server": self.server, **({"replica": self.replica} if self.replica else {}),
            "has": {f.key: f.to_dict() for f in self.facts.figures},
            "load": {f.key: f.to_dict() for f in self.load.figures},
            "rate_series": {"bucket_s": self.load.bucket_s,
                            "points": [[t.isoformat(), r] for t, r in self.load.rate_series]},
            "model": {f.key: f.to_dict() for f in self.model_figures},
            "binding": self.binding, "windows": [w.to_dict() for w in self.windows],
            "what_if": [w.to_dict() for w in self.whatifs],
            "replicas": self.replicas.to_dict(),
            "checks": [c.to_dict() for c in self.checks],
            "advice": list(self.advice),
            "sizing": self.sizing.to_dict() if self.sizing is not None else None,
        }


@dataclass
class CapacityPlan:
    """Every serving server run's plan, and checks across runs of the same model and device."""

    servers: list[ServerCapacity]
    slo: SloTargets
    target_rate: float | None = None
    checks: list[Check] = field(default_factory=list)
    """Cross-run checks: one run's model predicting another run of the same model and device."""
    skipped: list[str] = field(default_factory=list)
    """Server runs left out (never served, no stats lines), with why."""
    trend: Any = None
    """``trend.Trend``: peak rate per day/hour, its trend and when it reaches the fleet's capacity."""
    fleet: list[Any] = field(default_factory=list)
    """``fleet.ReplicaCapacity`` per replica when the plan covers several (its throughput within the SLO)."""
    startup: list[Sizing] = field(default_factory=list)
    """Server runs that never served: the values their start-up lines give (the diagnosis's fixes name them)."""
    replica_names: dict[str, str] = field(default_factory=dict)
    """File → fleet replica name (``vllmlog capacity DIR``)."""

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"slo": asdict(self.slo), "target_rate": self.target_rate,
                "servers": [s.to_dict() for s in self.servers], "cross_checks": [c.to_dict() for c in self.checks],
                "skipped": list(self.skipped),
                "startup": [z.to_dict() for z in self.startup if z.values()],
                "fleet": [r.to_dict() for r in self.fleet], "trend": self.trend.to_dict() if self.trend is not None else None,
                "bases": {"logged": "a line of the log, a trace or the client's records states it",
                          "derived": "computed exactly from logged values",
                          "estimated": "approximated from logged values",
                          "model": "a prediction over the observed numbers, assumptions stated",
                          "default": "vLLM's default, not logged"}}


def plan(run: Run, *, slo: SloTargets | None = None, target_rate: float | None = None, headroom: float = 0.1,
         client: Sequence[ClientRecord] = (), numbers: dict[str, Any] | None = None,
         replica_names: dict[str, str] | None = None, detail: bool = True) -> CapacityPlan:
    """The capacity plan of ``run``. ``client``: the load generator's records (lengths, latency) when the log lacks
    them; ``numbers``: ``numbers.compute(run)`` when already computed (used for a run of one server run);
    ``replica_names``: file → replica (a fleet's logs, ``fleet.inputs.discover``), else one replica per file;
    ``detail=False``: the server runs' plans only — no cross-run checks, trend or fleet rows (what the report's
    capacity section shows)."""
    from ..state import service_states

    slo = slo or SloTargets()
    out = CapacityPlan([], slo, target_rate, replica_names=dict(replica_names or {}))
    states = []
    for st in service_states(run):
        if not st.lifecycle.serving or not st.intervals:
            why = "never served" if not st.lifecycle.serving else "no stats lines"
            out.skipped.append(f"{out.replica_names.get(st.file, st.file)} server run {st.index + 1}: {why}")
            out.startup.append(sizing.of(st, run))
            continue
        states.append(st)
    peers_of = _peer_lists(states)
    fits = _SessionFits()
    for st in states:
        # runs of the same model on the same device share one step-time model when this run alone shows too few
        # batch sizes (their throughput at a batch size is a property of model × device, not of the flags)
        p = peers_of[id(st)]
        shared = (lambda sess=p.session: fits(sess)) if p.session is not None else None
        whole = numbers if numbers is not None and len(states) == 1 and len(st.view.journeys) == len(run.journeys) \
            else None
        out.servers.append(server_plan(st, slo, target_rate, headroom, _client_for(st, client), p.near, whole, run,
                                       shared=shared))
        out.servers[-1].replica = out.replica_names.get(st.file)
    if not detail:
        return out
    out.checks = cross_checks(out.servers, states, peers_of)
    from .trend import trend

    out.trend = trend(run, out.servers)
    from .fleet import replicas

    rows = replicas(out.servers, replica_names)
    if len(rows) > 1:
        out.fleet = rows
    return out


#: Runs further apart than this are not assumed to have had the same machine (throughput is a property of model ×
#: device × what else the machine was doing: the real CPU runs of two days differ 2–3×).
SESSION_S = 6 * 3600.0


def _peers(a: ServiceState, b: ServiceState) -> bool:
    """Same model, device and world size, started within ``SESSION_S`` of each other."""
    ca, cb = a.config, b.config
    if ca.model != cb.model or ca.device != cb.device or ca.world_size != cb.world_size:
        return False
    ta, tb = a.lifecycle.start_ts, b.lifecycle.start_ts
    return ta is None or tb is None or abs((ta - tb).total_seconds()) <= SESSION_S


#: A run with at most this many peers pools its step-time fit with them (its intervals first, then theirs in log
#: order) and its leave-one-out check fits on them. A run with more — many restarts of one model within a session:
#: a crash-looping pod, a benchmark sweep — uses its session's pooled fit, computed once for the session (the same
#: intervals, summed in log order), and its check fits on its ``MAX_PEERS`` nearest peers in start time: one fit per
#: run over every other run's intervals would be quadratic in server runs.
MAX_PEERS = 16


@dataclass
class Peers:
    """The runs one serving run is compared with (``_peer_lists``)."""

    near: list[ServiceState]
    """Every peer (``_peers``) in log order when there are at most ``MAX_PEERS``, else the nearest ``MAX_PEERS`` in
    start time (equal distance: an earlier start first, then the nearer in start order; runs without a start time
    after the timed ones; for a run without one, the nearest in log order)."""
    session: list[ServiceState] | None = None
    """With more peers than that: the runs of its session in log order (itself included), whose one pooled fit it
    uses — the group's timed runs cut into sessions of ``SESSION_S`` from each session's first start, plus the
    group's untimed runs (an untimed run's session: the whole group)."""


def _peer_lists(states: Sequence[ServiceState], limit: int = MAX_PEERS) -> dict[int, Peers]:
    """``id(st)`` → its ``Peers`` among ``states``; linear in ``len(states)`` for a bounded ``limit``."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, o in enumerate(states):
        c = o.config
        groups.setdefault((c.model, c.device, c.world_size), []).append(i)
    ts = [o.lifecycle.start_ts for o in states]
    out: dict[int, Peers] = {}
    for members in groups.values():
        timed = sorted((i for i in members if ts[i] is not None), key=lambda i: (ts[i], i))
        untimed = [i for i in members if ts[i] is None]
        secs = [(ts[i] - ts[timed[0]]).total_seconds() for i in timed]
        pos = {i: k for k, i in enumerate(timed)}
        sessions: list[list[int]] = []
        session_of: dict[int, int] = {}
        for k, i in enumerate(timed):
            if not sessions or secs[k] - secs[pos[sessions[-1][0]]] > SESSION_S:
                sessions.append([])
            sessions[-1].append(i)
            session_of[i] = len(sessions) - 1
        shared: dict[int, list[ServiceState]] = {}

        def session(key: int, idx: list[int]) -> list[ServiceState]:
            if key not in shared:
                shared[key] = [states[k] for k in sorted(idx)]
            return shared[key]

        for at, i in enumerate(members):
            if ts[i] is None:  # every run of the group is a peer
                n = len(members) - 1
                picked = _nearest(members, at, limit, lambda x, y: abs(x - y))
                sess = session(-1, members) if n > limit else None
            else:
                k = pos[i]
                n = bisect.bisect_right(secs, secs[k] + SESSION_S) - bisect.bisect_left(secs, secs[k] - SESSION_S) \
                    - 1 + len(untimed)
                picked = _nearest(timed, k, limit, lambda x, y: abs((ts[x] - ts[y]).total_seconds()), SESSION_S)
                if len(picked) < limit and untimed:
                    picked += untimed[:limit - len(picked)]
                sess = session(session_of[i], sessions[session_of[i]] + untimed) if n > limit else None
            out[id(states[i])] = Peers([states[k] for k in sorted(picked)], sess)
    return out


def _nearest(seq: list[int], at: int, limit: int, dist: Any, within: float | None = None) -> list[int]:
    """Up to ``limit`` items of ``seq`` other than ``seq[at]``, nearest to it by ``dist`` (``seq`` ordered so that
    ``dist`` grows away from ``at`` on both sides; equal distance: the left one first), none further than ``within``."""
    me = seq[at]
    lo, hi = at - 1, at + 1
    got: list[int] = []
    while len(got) < limit:
        dl = dist(seq[lo], me) if lo >= 0 else None
        dh = dist(seq[hi], me) if hi < len(seq) else None
        if within is not None:
            dl = dl if dl is not None and dl <= within else None
            dh = dh if dh is not None and dh <= within else None
        if dl is None and dh is None:
            break
        if dh is None or (dl is not None and dl <= dh):
            got.append(seq[lo])
            lo -= 1
        else:
            got.append(seq[hi])
            hi += 1
    return got


class _SessionFits:
    """One pooled step-time fit per session (``Peers.session``), computed when a run first needs it."""

    def __init__(self) -> None:
        self._fits: dict[int, tuple[list[ServiceState], Throughput | None]] = {}

    def __call__(self, session: list[ServiceState]) -> Throughput | None:
        hit = self._fits.get(id(session))
        if hit is None:
            hit = self._fits[id(session)] = (session, fit_throughput(session[0].intervals,
                                                                     [o.intervals for o in session[1:]]))
        return hit[1]


def _client_for(st: ServiceState, client: Sequence[ClientRecord]) -> list[ClientRecord]:
    if not client:
        return []
    from ..client import match

    pairs, _how = match(client, st.view.journeys)
    return [r for r in client if r.index in pairs]


@dataclass
class Core:
    """The model of one server run before any target or headroom: its facts, load, footprint, step-time model,
    limit windows and what-ifs (what ``sizing`` and the plan both read)."""

    facts: Server
    load: Load
    footprint: Footprint | None
    model_footprint: Footprint | None
    throughput: Throughput | None
    windows: list[Window]
    binding: str
    whatifs: list[WhatIf]


def core(st: ServiceState, slo: SloTargets, client: Sequence[ClientRecord] = (), peers: Sequence[ServiceState] = (),
         numbers: dict[str, Any] | None = None, prom: dict[str, Any] | None = None, *, light: bool = False,
         shared: Callable[[], Throughput | None] | None = None) -> Core:
    """Facts, load, footprint, step-time model, windows and what-ifs of one serving server run (``prom``: its
    ``/metrics`` histograms, ``prom.for_state``; ``light``: the load without latency and rate figures — the
    what-ifs are the same; ``shared``: the pooled fit of its session, used instead of pooling with ``peers``
    when it has too many, ``Peers.session``)."""
    s = facts(st)
    ld = measure(st, client, numbers, prom, light=light)
    xs = st.intervals
    tp = fit_throughput(xs)
    if (tp is None or len(tp.batch_sizes) < 2) and (peers or shared is not None):
        pooled = shared() if shared is not None else fit_throughput(xs, [o.intervals for o in peers])
        if pooled is not None and len(pooled.batch_sizes) >= 2:
            tp = pooled
    fp = footprint(ld, s.kv.block_size)
    measured = measured_footprint(ld, s.kv.tokens, s.kv.block_size)
    if measured is not None and (fp is None or (ld.lengths.basis == ESTIMATED and
                                                not 0.5 <= fp.mean / measured.mean <= 2.0)):
        fp = measured  # no lengths, or estimates the cache's own usage contradicts (an excerpt of a longer run)
    pressed = pressure_footprint(xs, s.kv.tokens)
    model_fp = fp
    if pressed is not None:
        fp = pressed
    ws = windows(xs, s.seats, tp)
    bind = binding(ws)
    wi = whatifs(s, ld, fp, tp, bind, slo.tokens_per_s, pressed=pressed is not None)
    return Core(s, ld, fp, model_fp, tp, ws, bind, wi)


def server_plan(st: ServiceState, slo: SloTargets, target: float | None, headroom: float,
                client: Sequence[ClientRecord] = (), peers: Sequence[ServiceState] = (),
                numbers: dict[str, Any] | None = None, run: Run | None = None, *,
                shared: Callable[[], Throughput | None] | None = None) -> ServerCapacity:
    """The plan of one serving server run (``peers``: other runs of the same model and device; ``run``: the Run it
    belongs to, for its ``/metrics`` history; ``shared``: its session's pooled fit, see ``core``)."""
    sz = sizing.of(st, run)
    c = core(st, slo, client, peers, numbers, prom_for(run, st), shared=shared)
    s, ld, fp, model_fp, tp, ws, bind, wi = (c.facts, c.load, c.footprint, c.model_footprint, c.throughput,
                                             c.windows, c.binding, c.whatifs)
    base = wi[0]
    sc = ServerCapacity(st.file, st.index, s, ld, fp, tp, ws, bind, wi,
                        replica_plan(ld, tp, s.seats, base.fits, slo, target, headroom))
    if model_fp is not None and model_fp is not fp:
        sc.model_figures.append(model_fp.figure)
    if fp is not None:
        sc.model_figures.append(fp.figure)
        if base.fits is not None:
            sc.model_figures.append(Figure("fits", "requests of this mix that fit at once", base.fits, "req", MODEL,
                                           f"capacity {s.kv.tokens:,} ÷ {fp.mean:,.0f} tokens per request"))
    if tp is not None:
        sc.model_figures.append(tp.figure())
    sc.checks = checks(st, s, ld, model_fp, tp, ws)
    sc.sizing = sz
    sc.advice = advice(s, ld, wi, bind, tp, sz)
    return sc


def checks(st: ServiceState, s: Server, ld: Load, fp: Footprint | None, tp: Throughput | None,
           ws: list[Window]) -> list[Check]:
    """The model against what this run's own lines state."""
    out: list[Check] = []
    cfg = s.config
    K, B = s.kv.tokens, s.kv.block_size
    if K and cfg.max_model_len and cfg.max_concurrency and cfg.sources.get("max_concurrency") == "logged":
        pred = K / (math.ceil(cfg.max_model_len / B) * B)
        out.append(Check(f"max concurrency at {cfg.max_model_len} tokens/request", pred, cfg.max_concurrency,
                         "vLLM's 'Maximum concurrency for N tokens per request' line",
                         "capacity ÷ max_model_len rounded up to whole blocks"))
    kvw = [w for w in ws if w.limit == "kv_cache"]
    if kvw and fp is not None and K:
        obs = describe(x.running for x in st.intervals if x.binding == "kv_cache")["p50"]
        if obs:
            pred = running(ld.demand_peak, s.seats, fits(K, fp))
            out.append(Check("Running while the KV cache binds (lifetime-average model)", pred, obs,
                             "stats lines (median Running of the KV-bound intervals)",
                             f"capacity {K:,} ÷ {fp.mean:,.0f} tokens per request; the what-ifs use the footprint "
                             "measured while the cache binds instead"))
    if ld.kv_per_running and fp is not None:
        unbound = [x for x in busy(st.intervals) if x.kv is not None and x.kv < 0.9 and x.running >= 2]
        if unbound and K:
            obs = describe(x.kv * K / x.running for x in unbound)["p50"]
            res = 0.0005 * K / describe(x.running for x in unbound)["p50"]
            if obs and res < 0.25 * fp.mean:
                out.append(Check("KV tokens per running request", fp.mean, obs,
                                 "KV usage × capacity ÷ Running (stats lines, cache not full)",
                                 "prompt + output ÷ 2 + block ÷ 2"))
    if tp is not None and len(tp.batch_sizes) >= 2:
        pts = [x for x in busy(st.intervals) if x.gen_tps > 0]
        errs = [abs(tp.tokens_per_s(x.running) - x.gen_tps) / x.gen_tps for x in pts]
        if errs:
            mean_obs = math.fsum(x.gen_tps for x in pts) / len(pts)
            mean_pred = math.fsum(tp.tokens_per_s(x.running) for x in pts) / len(pts)
            out.append(Check("generation tok/s (in-sample fit)", mean_pred, mean_obs, "stats lines",
                             f"mean absolute error per interval {math.fsum(errs) / len(errs):.0%}"))
    return out


def cross_checks(servers: Sequence[ServerCapacity], states: Sequence[ServiceState] = (),
                 peers_of: dict[int, Peers] | None = None) -> list[Check]:
    """One run's model predicting another run of the same model and device: Running under the other's flags at
    the other's offered concurrency (a re-run of the same load with a changed flag), and the other run's
    throughput at its Running from a step-time model fitted without it (leave-one-out)."""
    out: list[Check] = []
    by_file = {(st.file, st.index): st for st in states}
    if peers_of is None or not len(by_file) == len(servers) == len(states):
        # servers are not the plans of states, in order: the peers among the states the servers have
        mine = [by_file[k] for k in ((a.file, a.server) for a in servers) if k in by_file]
        peers_of = _peer_lists(mine)
    for b in servers:
        sb = by_file.get((b.file, b.server))
        peers = peers_of[id(sb)].near if sb is not None and id(sb) in peers_of else []
        if sb is None or not peers:
            continue
        tp = fit_throughput(peers[0].intervals, [p.intervals for p in peers[1:]])
        if tp is None or len(tp.batch_sizes) < 2:
            continue
        ws = [w for w in b.windows if w.running[0] == w.running[1] and w.running[0] >= 1 and w.gen_tps > 0]
        if ws:
            w = max(ws, key=lambda w: w.seconds)
            n = w.running[0]
            out.append(Check(f"generation tok/s of {_name(b)} at Running {n}, fitted without it", tp.tokens_per_s(n),
                             w.gen_tps, f"{_name(b)}'s stats lines", f"step time a + b·Running fitted on {len(peers)} "
                             f"other run(s), Running {', '.join(map(str, tp.batch_sizes))}"))
    for a in servers:
        for b in servers:
            if a is b or a.facts.config.model != b.facts.config.model or a.facts.config.device != b.facts.config.device:
                continue
            if a.footprint is not None and b.facts.kv.tokens and b.load.running_max and _same_mix(a.load, b.load):
                fa = a.footprint
                pred = running(b.load.demand_peak, b.facts.seats, fits(b.facts.kv.tokens, fa))
                changed = _diff(a.facts, b.facts)
                # a limit sets b's Running, or a's was bound and b is the run with the flag changed
                if changed and (pred < b.load.demand_peak or a.binding in ("kv_cache", "max_num_seqs")):
                    out.append(Check(f"Running peak of {_name(b)} from {_name(a)}'s model ({changed})", pred,
                                     b.load.running_max, f"{_name(b)}'s stats lines",
                                     f"min(offered {b.load.demand_peak}, seats {b.facts.seats}, "
                                     f"{b.facts.kv.tokens:,} ÷ {fa.mean:,.0f} tokens)"))
    return out


def _same_mix(a: Load, b: Load) -> bool:
    """The two runs carried requests of about the same length (a re-run of one load): mean max_tokens (logged)
    or mean lengths within 15 %."""
    pairs = [(a.lengths.max_tokens_mean, b.lengths.max_tokens_mean), (a.lengths.output, b.lengths.output)]
    for x, y in pairs:
        if x and y:
            return abs(x - y) / max(x, y) <= 0.15
    return False


def _diff(a: Server, b: Server) -> str:
    parts = []
    if a.kv.tokens != b.kv.tokens:
        parts.append(f"KV {a.kv.tokens:,} → {b.kv.tokens:,} tokens")
    if a.seats != b.seats:
        parts.append(f"seats {a.seats} → {b.seats}")
    return ", ".join(parts)


def _name(sc: ServerCapacity) -> str:
    import os

    return (sc.replica or os.path.basename(sc.file)) + (f"#{sc.server + 1}" if sc.server else "")


def advice(s: Server, ld: Load, wi: list[WhatIf], bind: str, tp: Throughput | None,
           sz: Sizing | None = None) -> list[str]:
    """Concrete advice from the what-ifs that change the binding limit, reconciled with the server's facts. The
    values are the sizing's (``sizing.of``: what the diagnosis's fixes name); where this plan's own inputs (other
    runs, the client's records, another SLO) give another value, the advice says so."""
    from ..rules.advice import reconcile

    cfg = s.config
    base = wi[0]
    out: list[str] = []
    by = {w.key: w for w in wi if w.proposed}
    more = sz.more_seats if sz is not None else None
    if bind == "max_num_seqs":
        w = by.get("max_num_seqs")
        if more:
            n = f"{w.running:,.0f} of the {ld.demand_peak}" if w is not None and w.running is not None \
                and w.running < ld.demand_peak else f"the {ld.demand_peak}"
            txt = f"`{more.change}` (now {s.seats}): lets {n} offered requests run at once"
            if w is not None and w.fits:
                txt += f"; the KV cache holds {w.fits:,.0f} of this mix"
            if w is not None and w.note:
                txt += f"; {w.note}"
            if w is not None and w.seats != more.value:
                txt += f" (with this plan's inputs the model gives `{w.change}`: {'; '.join(w.assumptions[1:]) or 'other runs or the client records'})"
            elif w is None:
                txt += " (with this plan's inputs the model proposes no change)"
            out.append(txt)
        elif more is not None:
            out.append(f"no `--max-num-seqs` value: {more.why}")
    fewer = sz.fewer_seats if sz is not None else None
    kvm = sz.kv_memory if sz is not None else None
    if bind == "kv_cache" or fewer:
        for key in () if kvm else ("num_gpu_blocks_override", "kv_space", "gpu_memory_utilization", "kv_cache_dtype"):
            w = by.get(key)
            if w is None or w.running is None or base.running is None or w.running <= base.running:
                continue
            out.append(f"`{w.change}`" if not w.change.startswith("remove") else w.change)
            out[-1] += f": {base.kv_tokens:,} → {w.kv_tokens:,} KV tokens, Running {base.running:.0f} → {w.running:.0f} " \
                       f"at the offered {ld.demand_peak}"
            break
        if kvm:
            out.append(_kv_line(kvm))
        elif kvm is not None:
            out.append(f"no `{kvm.flag}` value: {kvm.why}")
        if fewer:
            out.append(f"or, at this cache size, `{fewer.change}` (now {s.seats}): {fewer.why.split(' (now ')[0]}")
    if bind == "compute" or (tp is not None and bind == "max_num_seqs" and "compute-bound" in
                             (by.get("max_num_seqs").note if by.get("max_num_seqs") else "")):
        out.append("compute is the limit: more replicas (see the replica count) or a faster device; more seats only "
                   "share the same throughput")
    if bind == "headroom":
        out.append("nothing binds: the server has headroom at this load")
    return reconcile(out, cfg, max_running=ld.running_max)


def _kv_line(v: sizing.Value) -> str:
    if v.flag == "--num-gpu-blocks-override":
        return f"remove `--num-gpu-blocks-override {v.value}`: {v.why}"
    return f"give the KV cache more memory: `{v.change}`: {v.why}"
