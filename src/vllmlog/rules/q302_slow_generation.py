"""Q302 slow-generation."""

from __future__ import annotations

import re
from statistics import median
from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Evidence, Finding, Rule, Severity
from .registry import register


@register
class SlowGeneration(Rule):
    """## What it detects
    Per-request generation speed below the handbook's 20 tokens/s: the handbook's ``Token generation
    speed … below threshold`` lines, journeys whose TPOT is above 1/20 s, or stats lines whose
    generation throughput divided by Running stays below the target during pure decode.
    ## Why it matters
    Users see text appear slowly; long answers take minutes and clients time out.
    ## How to fix
    Too large a batch for the GPU (lower ``--max-num-seqs``), KV pressure (see K202), a model too big
    for the hardware (more GPUs / ``--tensor-parallel-size``, quantization), or long prefills stalling
    decode (``--max-num-batched-tokens`` / chunked prefill)."""

    code, slug, category, severity = "Q302", "slow-generation", "slow_throughput", Severity.WARNING
    title = "Generation slower than target"
    explains = ("slow", "aborting", "queueing")
    needs_symptom = True
    options: dict[str, Any] = {"min_generation_tps": 20.0, "min_samples": 3, "min_fraction": 0.1}
    consequence_of = ("kv_cache_pressure_preemption", "engine_hang", "queue_backlog")

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """A queue of compute: decode is slow because of a setting the log names (enforce-eager, CPU offload …),
        and neither the seats nor the KV cache is what holds the waiting requests back — each sequence simply
        takes longer, so the same arrivals need more of them in flight (Little's law) than the engine admits."""
        if symptom.kind == "queueing" and finding.data.get("slow_settings") and (finding.data.get(
                "median_decode_tps") or 0) < 0.8 * float(finding.data.get("target_tps") or 0):  # clearly, not marginally
            return True if symptom.data.get("binding") not in ("max_num_seqs", "kv_cache") else None
        return None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        from ..state import service_states
        from ..symptoms.progress import full_windows

        target = float(options["min_generation_tps"])
        states = {(st.file, st.index): st for st in service_states(run)}
        for v in u.servers(run):
            hb = [e for e in v.of("slow_generation") if not v.in_shutdown(e.line)]
            decode = []
            st = states.get((v.file, v.index))
            # only windows the requests ran through (throughput is averaged since the last stats line)
            full = {id(b.sample) for _, b in full_windows(st).values()} if st is not None else None
            for samples in v.by_engine().values():
                for s in samples:
                    if v.in_shutdown(s.line) or not s.running or s.generation_throughput is None:
                        continue
                    if full is not None and id(s) not in full:
                        continue
                    if s.generation_throughput <= 0:
                        continue
                    decode.append((s, s.generation_throughput / s.running))
            js = [j for j in v.journeys if getattr(j, "tpot_s", None)
                  and (j.sources or {}).get("tpot_s") != "estimated"]
            slow_j = [j for j in js if j.tpot_s > 1.0 / target]
            speeds = [x for _, x in decode]
            stat_slow = len(decode) >= int(options["min_samples"]) and median(speeds) < target
            hb_ids = {e.request_id for e in hb}
            n_req = max(len(js), u.request_count(run, v.file), 1)
            hb_slow = len(hb) >= int(options["min_samples"]) and len(hb_ids) / n_req >= float(options["min_fraction"])
            j_slow = len(slow_j) >= int(options["min_samples"]) and len(slow_j) / max(len(js), 1) >= float(options["min_fraction"])
            if not (stat_slow or hb_slow or j_slow):
                continue
            evid: list[Evidence | None] = []
            parts = []
            times = []
            if stat_slow:
                slow_s = [s for s, x in decode if x < target]
                evid += [u.sample_ev(s) for s in u.pick(slow_s, None, limit=5)]
                parts.append(f"per-request decode speed {median(speeds):.1f} tokens/s (median of {len(decode)} "
                             f"busy stats intervals, generation throughput / Running; target {target:.0f})")
                times += [s.ts for s in slow_s if s.ts]
            if hb_slow or hb:
                evid += [u.first(e) for e in hb[:4]]
                if hb:
                    sp = [u.num(e.fields.get("generation_speed")) or 0 for e in hb]
                    parts.append(f"{len(hb)} slow-generation lines for {len(hb_ids)} requests (min {min(sp):.1f} tokens/s)")
                    times += [e.ts for e in hb if e.ts]
            if j_slow:
                evid += [Evidence(j.file, j.last_line, "") for j in slow_j[:3] if j.last_line]
                parts.append(f"{len(slow_j)}/{len(js)} requests with TPOT > {1000 / target:.0f} ms")
                times += [j.finish_ts for j in slow_j if j.finish_ts]
            times = [t for t in times if t]
            slow_cfg = u.slow_settings(v)
            # a smaller batch only helps a batch: with one or two requests running there is nothing to trade
            batched = median(s.running for s, _ in decode) > 2 if decode else True
            evid[0:0] = [u.first(e) for e, _ in slow_cfg[:2]]
            if slow_cfg:
                parts.append("running with " + ", ".join(what for _, what in slow_cfg))
            yield self.finding(
                "Generation below target: " + "; ".join(parts) + ".", evidence=u.dedupe(evid),
                first_seen=min(times) if times else None, last_seen=max(times) if times else None,
                count=len(hb) or len(slow_j) or len(decode), file=v.file, server=v.index,
                process=(decode[0][0].process if decode else (hb[0].process if hb else None)),
                root_cause=(f"The engine runs with {' and '.join(w for _, w in slow_cfg)}, which decodes far slower than "
                            "the default fast path." if slow_cfg else
                            "Each sequence gets too little GPU time per step: the batch is large for the hardware, the KV "
                            "cache thrashes, or long prefills interleave with decode."),
                remediation=("".join(f"{fix}; " for _, (_e, what) in enumerate(slow_cfg) for fix in [u.SLOW_FIX.get(
                                 what.split(" ", 1)[0], "")] if fix)
                             + (f"Lower `--max-num-seqs` (now {u.arg(v, 'max_num_seqs') or 'default'}) to trade throughput "
                                "for per-request speed; " if batched else "")
                             + "check KV pressure (K202); "
                             + ("" if any(w.startswith("no-p2p") for _, w in slow_cfg) else  # more ranks: more all-reduce
                                "use more GPUs (`--tensor-parallel-size`) or a quantized model; ")
                             + "bound long prefills with `--max-num-batched-tokens`."),
                data={"target_tps": target, "median_decode_tps": median(speeds) if speeds else None,
                      "slow_settings": [what for _, what in slow_cfg]},
            )
