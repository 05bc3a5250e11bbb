"""The Capacity section of ``analyze``'s HTML report: the binding limit per window, the what-ifs, replicas,
checks and advice of ``capacity.plan`` (every value escaped; figures keep their basis)."""

from __future__ import annotations

import logging
import os
from html import escape
from typing import TYPE_CHECKING, Any

from .figure import fmt_value

if TYPE_CHECKING:  # pragma: no cover
    from ..run import Run
    from .plan import ServerCapacity

log = logging.getLogger(__name__)

_LIMIT = {"max_num_seqs": "seats (--max-num-seqs)", "kv_cache": "KV cache", "compute": "compute",
          "unknown": "unknown", "headroom": "nothing (headroom)", "idle": "idle"}
_KEYS = ("kv_cache_tokens", "max_num_seqs", "max_model_len", "device")
_LOAD = ("rate_mean", "concurrency_peak", "running_max", "prompt_tokens_mean", "output_tokens_mean",
         "kv_tokens_per_running")


def e(v: Any) -> str:
    return escape(str(v), quote=True)


def _fig_rows(figs: list[Any]) -> str:
    return "".join(f"<tr><td>{e(f.label)}</td><td class='num'>{e(f.text())}</td>"
                   f"<td><span class='basis'>{e(f.basis)}</span> <span class='muted'>{e(f.source)}</span></td></tr>"
                   for f in figs)


def _server(sc: ServerCapacity) -> str:
    name = os.path.basename(sc.file) + (f" (server run {sc.server + 1})" if sc.server else "")
    facts = [f for f in sc.facts.figures if f.key in _KEYS] + [f for f in sc.load.figures if f.key in _LOAD] \
        + sc.model_figures[:2]
    wins = "".join(
        f"<tr><td>{e(f'{w.start:%H:%M:%S}' if w.start else '?')}–{e(f'{w.end:%H:%M:%S}' if w.end else '?')}</td>"
        f"<td>{e(_LIMIT.get(w.limit, w.limit))}</td><td>{e(w.evidence)}</td></tr>" for w in sc.windows)
    whatif = "".join(
        f"<tr><td>{e(w.change)}<div class='muted'>{e(w.note)}{(' — assumes ' + e('; '.join(w.assumptions))) if w.assumptions else ''}</div></td>"
        f"<td class='num'>{e(fmt_value(w.kv_tokens))}</td><td class='num'>{e(fmt_value(w.fits))}</td>"
        f"<td class='num'>{e(fmt_value(w.running))}</td><td class='num'>{e(fmt_value(w.gen_tps))}</td></tr>"
        for w in sc.whatifs)
    r = sc.replicas
    rep = ""
    for f in (r.observed, r.saturation, r.per_replica):
        if f is not None:
            rep += f"<li>{e(f.label)}: <b>{e(f.text())}</b> <span class='basis'>{e(f.basis)}</span> " \
                   f"<span class='muted'>{e(f.source)}</span></li>"
    if r.target_rate is not None and r.replicas is not None:
        rep += (f"<li>for {e(f'{r.target_rate:g}')} req/s: <b>{r.replicas} replicas</b> ({r.needed} just hold the SLO, "
                f"{e(f'{r.headroom:.0%}')} headroom)</li>")
    checks = "".join(
        f"<li>{e(c.name)}: predicted {e(fmt_value(float(c.predicted)))}, actual {e(fmt_value(float(c.actual)))}"
        + (f" (error {e(f'{c.error:+.0%}')})" if c.error is not None else "") + "</li>" for c in sc.checks)
    advice = "".join(f"<li>{e(a)}</li>" for a in sc.advice)
    sizing = "".join(f"<li>{e(a)}</li>" for a in (sc.sizing.lines() if sc.sizing is not None else ()))
    return (f"<h3>{e(name)}: bound by {e(_LIMIT.get(sc.binding, sc.binding))}</h3>"
            f"<div class='tablewrap'><table><tbody>{_fig_rows(facts)}</tbody></table></div>"
            f"<div class='tablewrap'><table><thead><tr><th>window</th><th>limit</th><th>evidence</th></tr></thead>"
            f"<tbody>{wins}</tbody></table></div>"
            "<div class='tablewrap'><table><thead><tr><th>what-if (model)</th><th>KV tokens</th><th>fit</th>"
            f"<th>Running</th><th>gen tok/s</th></tr></thead><tbody>{whatif}</tbody></table></div>"
            + (f"<ul>{rep}</ul>" if rep else "")
            + (f"<p>Checks (model vs what the log states)</p><ul>{checks}</ul>" if checks else "")
            + (f"<p>Advice</p><ul>{advice}</ul>" if advice else "")
            + (f"<p>Sizing (the values the diagnosis's fixes use)</p><ul>{sizing}</ul>" if sizing else ""))


def capacity_section(run: Run, numbers: dict[str, Any] | None = None) -> str:
    """``<section id='capacity'>`` for the report (an explanation instead when the plan cannot be made)."""
    head = "<section id='capacity'><h2>Capacity</h2>"
    try:
        from . import plan

        p = plan(run, numbers=numbers, detail=False)  # the section shows the servers' plans only
    except Exception as exc:  # noqa: BLE001 - a section never breaks the report; say why instead
        log.warning("capacity section unavailable: %s", exc)
        return head + f"<p class='unavailable'>Capacity unavailable: {e(exc)}</p></section>"
    if not p.servers:
        return head + "<p class='muted'>No server run served with stats lines: nothing to plan from.</p></section>"
    return (head + "<p class='muted'>From the server's own facts; bases: logged, derived, estimated, model, default. "
            "<code>vllmlog capacity LOG --target-rate R</code> adds replicas for a target.</p>"
            + "".join(_server(sc) for sc in p.servers) + "</section>")
