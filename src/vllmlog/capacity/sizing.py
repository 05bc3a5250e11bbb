"""The values the diagnosis's fixes and ``vllmlog capacity`` both name — ``--max-num-seqs``, the KV-cache size
(``--num-gpu-blocks-override``, ``VLLM_CPU_KVCACHE_SPACE``, ``--gpu-memory-utilization``), ``--max-model-len`` —
computed once per server run from its service state and cached, so a finding's fix and the capacity plan
never disagree on a number.

    from vllmlog.capacity import sizing
    sz = sizing.of(state)                # or sizing.for_view(run, view) inside a rule
    sz.more_seats.change                 # '--max-num-seqs 64' (None value: sz.more_seats.why says why not)

The serving runs' values come from the capacity model over this run alone (its own lines, vLLM's defaults,
the default SLO: ``capacity.plan.core``); a plan given other runs, the client's records or another SLO says so
when its own value differs. Start-up failures get what their lines state: the context the KV cache holds,
the blocks a hybrid model's state cache has, the model's own length limit.
"""

from __future__ import annotations

import logging
import math
import re
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..rules._util import ServerView
    from ..run import Run
    from ..state import ServerConfig, ServiceState

GIB = 1024**3
log = logging.getLogger(__name__)

_V0 = re.compile(r"max seq len \((\d{1,18})\) is larger than the maximum number of tokens that can be stored in KV "
                 r"cache \((\d{1,18})\)")
_V1 = re.compile(r"max seq len \((\d{1,18})\).*?estimated maximum model length is (\d{1,18})")
_FREE = re.compile(r"\((?P<free>[\d.]{1,30})/(?P<total>[\d.]{1,30}) GiB\) on startup is less than desired \w+ memory "
                   r"utilization \((?P<util>[\d.]{1,30}), (?P<want>[\d.]{1,30}) GiB\)")
_MODEL_LIMIT = re.compile(r"User-specified max_model_len \((\d{1,18})\) is greater than the derived max_model_len "
                          r"\((\w+)=([\d.]{1,30})")


@dataclass(frozen=True)
class Value:
    """One flag's advised value, or why none is named."""

    flag: str
    """``--max-num-seqs``, ``--max-model-len``, ``VLLM_CPU_KVCACHE_SPACE``, ``--gpu-memory-utilization``,
    ``--num-gpu-blocks-override``."""
    value: Any
    """The advised value (None: no value is advised, ``why`` says why)."""
    change: str
    """The flag as one would pass it: ``--max-num-seqs 64``, ``VLLM_CPU_KVCACHE_SPACE=3``,
    ``remove --num-gpu-blocks-override 16`` (empty when no value is advised)."""
    why: str
    """What the change does, from the model or the log (or why no value is advised)."""

    def __bool__(self) -> bool:
        return self.value is not None

    def to_dict(self) -> dict[str, Any]:
        return {"flag": self.flag, "value": self.value, "change": self.change, "why": self.why}


@dataclass(frozen=True)
class Sizing:
    """The sizing values of one server run."""

    file: str
    server: int
    served: bool
    """The run served and printed stats lines (the capacity model applies); else only start-up facts."""
    seats: int | None
    """``--max-num-seqs`` in force (logged, vLLM's default, or the plateau Running never passed)."""
    running_max: int
    more_seats: Value | None = None
    """Raise ``--max-num-seqs``: let the offered concurrency in, up to what the cache and the TPOT SLO allow."""
    fewer_seats: Value | None = None
    """Lower ``--max-num-seqs`` to what the cache holds (no preemption); never while one request runs at a time."""
    kv_memory: Value | None = None
    """Give the KV cache more room: remove the block override, ``VLLM_CPU_KVCACHE_SPACE``, or
    ``--gpu-memory-utilization``."""
    max_model_len: Value | None = None
    """The largest ``--max-model-len`` the model and the KV cache allow (a start-up failure)."""
    memory_fit: Value | None = None
    """The ``--gpu-memory-utilization`` that fits the memory free at start-up (a start-up failure)."""
    core: Any = field(default=None, repr=False, compare=False)
    """``plan.Core`` the values came from (a serving run; its load without latency and rate figures)."""

    def values(self) -> list[Value]:
        return [v for v in (self.more_seats, self.fewer_seats, self.kv_memory, self.max_model_len, self.memory_fit)
                if v is not None]

    def lines(self) -> list[str]:
        """Advice lines for the capacity plan: each value named, with what it does (or why none is)."""
        out = []
        for v in self.values():
            out.append(f"`{v.change}`: {v.why}" if v.value is not None and not v.change.startswith("remove")
                       else f"{v.change}: {v.why}" if v.value is not None else f"no `{v.flag}` value: {v.why}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "server": self.server, "served": self.served, "max_num_seqs": self.seats,
                "running_max": self.running_max,
                **{k: (getattr(self, k).to_dict() if getattr(self, k) is not None else None)
                   for k in ("more_seats", "fewer_seats", "kv_memory", "max_model_len", "memory_fit")}}


def gpu_util_up(util: float | None) -> float | None:
    """The ``--gpu-memory-utilization`` that gives the KV cache more room: 0.95 from below 0.9, else +0.03 up to
    0.95 (None at or above 0.95: what is left is the activations' headroom)."""
    u = 0.9 if util is None else util  # vLLM's default
    if u >= 0.95:
        return None
    return 0.95 if u < 0.9 else min(0.95, round(u + 0.03, 2))


_CACHE: dict[tuple[int, bool], tuple[weakref.ref, Sizing]] = {}


def of(st: ServiceState, run: Run | None = None) -> Sizing:
    """The sizing of one server run (computed once per ``ServiceState``; ``run``: the Run it belongs to, whose
    ``/metrics`` history, when merged, gives the request lengths the log may lack)."""
    from .prom import for_state

    prom = for_state(run, st) if run is not None else {}
    key = (id(st), bool(prom))
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is st:
        return hit[1]
    sz = _compute(st, prom)
    try:
        _CACHE[key] = (weakref.ref(st, lambda _r, k=key: _CACHE.pop(k, None)), sz)
    except TypeError:  # pragma: no cover - a ServiceState is weak-referenceable
        pass
    return sz


def for_view(run: Run, v: ServerView) -> Sizing | None:
    """The sizing of the server run a rule's ``ServerView`` shows (None when the run has no such state)."""
    from ..state import service_states

    for st in service_states(run):
        if st.view is v or (st.file, st.index) == (v.file, v.index):
            return of(st, run)
    return None


def context_fit(e: Any, blocks: list[Any] = ()) -> tuple[float | None, float | None]:
    """``(max seq len asked, tokens the KV cache holds)`` from a start-up KV-cache error (V0 ``… larger than the
    maximum number of tokens that can be stored in KV cache (N)``, V1 ``estimated maximum model length is N``), else
    the blocks of the last KV-cache line × 16."""
    f = e.fields
    max_len = _num(f.get("max_seq_len"))
    cap = _num(f.get("kv_cache_tokens")) or _num(f.get("estimated_max_model_len"))
    m0, m1 = _V0.search(e.text or ""), _V1.search(e.text or "")
    if m0:
        max_len, cap = float(m0[1]), float(m0[2])
    elif m1:
        max_len, cap = float(m1[1]), float(m1[2])
    if cap is None and blocks:
        nb = _num(blocks[-1].fields.get("num_gpu_blocks"))
        cap = nb * 16 if nb else None
    return max_len, cap


def model_limit(e: Any) -> tuple[int, str, int] | None:
    """``(max_model_len asked, the config key, the model's limit)`` from vLLM's ``User-specified max_model_len (N)
    is greater than the derived max_model_len (key=M …)``."""
    m = _MODEL_LIMIT.search(e.text or "")
    return (int(m[1]), m[2], int(float(m[3]))) if m else None


def free_memory_fit(e: Any) -> tuple[float | None, float | None, float | None, float | None, float | None]:
    """``(free GiB, total GiB, utilization asked, GiB asked, the utilization that fits)`` from vLLM's ``Free memory
    on device (F/T GiB) on startup is less than desired GPU memory utilization (U, W GiB)``: the fit leaves 2 % of
    the device free, rounded down to 0.01."""
    m = _FREE.search(e.text or "")
    if not m:
        return None, None, None, None, None
    free, total, util, want = (float(m[k]) for k in ("free", "total", "util", "want"))
    sugg = math.floor((free / total - 0.02) * 100) / 100 if free and total else None
    return free, total, util, want, sugg


def _num(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def _compute(st: ServiceState, prom: dict[str, Any]) -> Sizing:
    from ..numbers import SloTargets
    from .plan import core
    from .server import facts

    v = st.view
    c = None
    if st.lifecycle.serving and st.intervals:
        try:
            c = core(st, SloTargets(), prom=prom, light=True)
        except (ArithmeticError, ValueError) as exc:  # a fix must not be lost to the model: the start-up facts remain
            log.warning("capacity model failed for %s server run %d: %s", st.file, st.index + 1, exc)
    start = _startup(st, c.facts if c is not None else facts(st))
    if c is not None:
        rows = {w.key: w for w in c.whatifs}
        s, ld = c.facts, c.load
        # a server run that served after a start-up error (a retry inside one run): the start-up values stay
        return Sizing(st.file, st.index, True, s.seats, ld.running_max,
                      more_seats=_more_seats(rows, s, ld, c.throughput),
                      fewer_seats=start.fewer_seats or _fewer_seats(rows, s, ld, c.footprint),
                      kv_memory=_kv_memory(st.config, rows, s), max_model_len=start.max_model_len,
                      memory_fit=start.memory_fit, core=c)
    return start


def _startup(st: ServiceState, s: Any) -> Sizing:
    """The values a server run's start-up lines give: the context the KV cache holds, a hybrid model's state-cache
    blocks, the model's own length limit, the utilisation that fits the free memory."""
    v = st.view
    cfg = st.config
    fewer = None
    max_len = None
    evs = [e for e in v.of("kv_cache_insufficient", "kv_cache_no_memory") if not v.serving(e.line)]
    if evs:
        e = evs[0]
        blocks_av = _num(e.fields.get("available_blocks"))
        want = _num(e.fields.get("max_num_seqs"))
        if blocks_av is not None and want:
            fewer = Value("--max-num-seqs", int(blocks_av), f"--max-num-seqs {int(blocks_av)}",
                          f"--max-num-seqs {int(want)} needs one cache block per running sequence (hybrid/Mamba state "
                          f"cache) and only {int(blocks_av)} fit")
        else:
            mx, cap = context_fit(e, v.of("kv_cache_blocks", "kv_cache_size", "kv_cache_memory", before=e.line))
            if cap and (mx is None or cap < mx) and e.kind != "kv_cache_no_memory" \
                    and e.fields.get("exc_kind") != "kv_cache_no_memory":
                max_len = Value("--max-model-len", int(cap), f"--max-model-len {int(cap)}",
                                f"the largest context the {int(cap):,}-token KV cache holds"
                                + (f" (asked {int(mx):,})" if mx else ""))
    for e in v.of("config_error", "max_model_len_too_large"):
        if v.serving(e.line):
            continue
        lim = model_limit(e)
        if lim is not None:
            want, key, limit = lim
            if max_len is None or limit < max_len.value:
                max_len = Value("--max-model-len", limit, f"--max-model-len {limit}",
                                f"the model's own limit ({key}={limit}; asked {want:,})")
            break
    fit = None
    for e in v.of("insufficient_free_memory"):
        if v.serving(e.line):
            continue
        free, total, util, _want, sugg = free_memory_fit(e)
        if sugg:
            fit = Value("--gpu-memory-utilization", sugg, f"--gpu-memory-utilization {sugg:.2f}",
                        f"fits the {free:.2f} GiB of {total:.2f} GiB free at start-up (asked {util:g})")
        break
    # more KV memory only where the lines show the cache short (a start-up KV error, 0 blocks, preemption, failed
    # allocations): a run that died of something else gets no KV advice
    short = bool(v.of("kv_cache_insufficient", "kv_cache_no_memory", "preemption", "block_allocation_failed")) or any(
        _num(e.fields.get("num_gpu_blocks" if e.kind == "kv_cache_blocks" else "kv_cache_tokens")) == 0
        for e in v.of("kv_cache_blocks", "kv_cache_size"))
    return Sizing(st.file, st.index, False, s.seats, st.coverage.max_running, fewer_seats=fewer,
                  max_model_len=max_len, kv_memory=_kv_memory(cfg, {}, s) if short and not fit else None,
                  memory_fit=fit)


def _more_seats(rows: dict[str, Any], s: Any, ld: Any, tp: Any) -> Value:
    from ..numbers import SloTargets

    w = rows.get("max_num_seqs")
    now = s.seats
    if w is not None and w.proposed:
        # one clause (a fix is split into items at '; ')
        who = f"all {ld.demand_peak}" if w.running >= ld.demand_peak else f"{w.running:,.0f} of the {ld.demand_peak}"
        why = (f"lets {who} offered requests run at once (now {now}"
               + (f", the KV cache holds {w.fits:,.0f} of this mix" if w.fits else "") + ")"
               + (f" — {w.note.replace('; ', ', ')}" if w.note else ""))
        return Value("--max-num-seqs", w.seats, w.change, why)
    if w is not None:
        return Value("--max-num-seqs", None, "", w.note)
    base = rows["as_run"]
    if not now:
        why = "the seat limit is not known"
    elif ld.demand_peak <= now:
        why = f"the offered concurrency (peak {ld.demand_peak}) fits the {now} seats"
    elif base.fits is not None and int(base.fits) <= now:
        why = f"the KV cache holds only {base.fits:,.0f} requests of this mix: more seats would only preempt"
    elif tp is not None and tp.b > 0:
        per = tp.tokens_per_s(now) / now if now else 0
        slo = SloTargets().tokens_per_s
        why = (f"at Running {now} each request already generates {per:,.0f} tok/s "
               f"({'below' if per < slo else 'near'} the {slo:g} tok/s TPOT SLO): more seats only share the same "
               "throughput")
    else:
        why = "the model shows no room for more seats"
    return Value("--max-num-seqs", None, "", why)


def _fewer_seats(rows: dict[str, Any], s: Any, ld: Any, fp: Any) -> Value | None:
    w = rows.get("max_num_seqs_kv")
    if w is not None:
        return Value("--max-num-seqs", w.seats, w.change,
                     f"as many seats as the cache holds requests of this mix ({s.kv.tokens:,} ÷ {fp.mean:,.0f} tokens "
                     f"held while the cache was full): no preemption, no recompute (now {s.seats})"
                     if fp is not None and s.kv.tokens else w.note)
    if ld.running_max <= 1:
        return Value("--max-num-seqs", None, "", "one request runs at a time: fewer seats cannot help")
    return None


def _kv_memory(cfg: ServerConfig, rows: dict[str, Any], s: Any) -> Value | None:
    kv = s.kv
    for key in ("num_gpu_blocks_override", "kv_space", "gpu_memory_utilization"):
        w = rows.get(key)
        if w is None:
            continue
        base = rows.get("as_run")
        gain = (f": {base.kv_tokens:,} → {w.kv_tokens:,} KV tokens" if base is not None and base.kv_tokens
                and w.kv_tokens else "")
        if base is not None and w.running is not None and base.running is not None:
            gain += f", Running {base.running:,.0f} → {w.running:,.0f} at the offered peak"
        if key == "num_gpu_blocks_override":
            return Value("--num-gpu-blocks-override", cfg.num_gpu_blocks_override, w.change,
                         f"it caps the KV cache at {cfg.num_gpu_blocks_override} blocks whatever memory is free{gain}")
        if key == "kv_space":
            g = int(w.change.split("=", 1)[1])
            return Value("VLLM_CPU_KVCACHE_SPACE", g, w.change, f"the CPU KV cache's memory (now "
                         f"{kv.memory_gib:g} GiB){gain}")
        u = float(w.change.split()[-1])
        return Value("--gpu-memory-utilization", u, w.change, f"more of the GPU for the KV cache (now "
                     f"{cfg.gpu_memory_utilization:g}){gain}")
    # no what-if row: the start-up facts alone
    if cfg.num_gpu_blocks_override:
        toks = f" ({cfg.kv_cache_tokens:,} tokens)" if cfg.kv_cache_tokens else ""
        return Value("--num-gpu-blocks-override", cfg.num_gpu_blocks_override,
                     f"remove --num-gpu-blocks-override {cfg.num_gpu_blocks_override}",
                     f"it caps the KV cache at {cfg.num_gpu_blocks_override} blocks{toks} whatever memory is free")
    if cfg.cpu:
        need = kv.bytes_per_token * cfg.max_model_len / GIB if kv.bytes_per_token and cfg.max_model_len else None
        if need is not None and kv.memory_gib and need > kv.memory_gib:
            g = math.ceil(need)
            return Value("VLLM_CPU_KVCACHE_SPACE", g, f"VLLM_CPU_KVCACHE_SPACE={g}",
                         f"holds one {cfg.max_model_len:,}-token request at {kv.bytes_per_token:,.0f} bytes per KV token "
                         f"(now {kv.memory_gib:g} GiB)")
        return Value("VLLM_CPU_KVCACHE_SPACE", None, "", "no load in the log to size it from"
                     + (f" (now {kv.memory_gib:g} GiB)" if kv.memory_gib else ""))
    u = cfg.gpu_memory_utilization
    u2 = gpu_util_up(u)
    if u2 is None:
        return Value("--gpu-memory-utilization", None, "", f"already {u:g}: what is left is the activations' headroom")
    return Value("--gpu-memory-utilization", u2, f"--gpu-memory-utilization {u2:g}",
                 "more of the GPU for the KV cache" + (f" (now {u:g})" if u is not None else " (vLLM's default 0.9)"))
