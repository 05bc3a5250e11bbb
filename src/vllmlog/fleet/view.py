"""The fleet on screen: a rich view over the finished fleet document (no logic beyond formatting)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..fmt import fmt_seconds

_STYLE = {"error": "bold red", "down": "bold red", "failing": "red", "degraded": "yellow", "incomplete": "magenta",
          "unknown": "magenta", "healthy": "green"}
_SEV = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "dim"}


def _pct(v: Any) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def _s(v: Any, basis: str | None = None) -> str:
    if v is None:
        return "—"
    if basis == "estimated" and v < 1.0:
        return "< 1 s"
    return fmt_seconds(v)


def _num(v: Any, fmt: str = "{:,.0f}") -> str:
    return "—" if v is None else fmt.format(v)


class FleetView:
    """``console.print(FleetView(doc))``: verdict, fleet RED/USE, fleet-wide incidents, the replica table,
    outliers and imbalance."""

    def __init__(self, doc: dict[str, Any], top: int = 30) -> None:
        self.doc = doc
        self.top = top

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        d = self.doc
        v = d["verdict"]
        head = Text()
        head.append(f"{v['label']}", style=_STYLE.get(v["status"], "bold"))
        head.append(f"  {v['headline']}")
        yield head
        tr = d["time_range"]
        yield Text(f"{d['replicas_read']} of {d['replicas_total']} replicas read, {d['lines']:,} lines, "
                   f"{tr['start'] or '?'} → {tr['end'] or '?'}", style="dim")
        if not d["coverage"]["complete"]:
            yield Text("INCOMPLETE: not read in full: " + ", ".join(d["coverage"]["incomplete_replicas"][:10]),
                       style="magenta")
        for u in d["coverage"]["unreadable"][:10]:
            yield Text(f"  unreadable {u['replica']}: {u['error']}", style="red")
        m = d.get("metrics")
        if m is not None:
            yield Text(f"/metrics history: {m['points']:,} points for {len(m['replicas_with_metrics'])} replica(s)"
                       + (f"; none for {', '.join(m['replicas_without'][:5])}" if m["replicas_without"] else "")
                       + (f"; {len(m['unmapped_targets'])} target(s) matched no replica" if m["unmapped_targets"]
                          else ""), style="dim")
        yield Text("")
        yield self._red_use()
        yield Text("")
        if d["incidents"]:
            yield Text("Fleet-wide incidents (one upstream cause is likelier than N faults)", style="bold")
            for f in d["incidents"]:
                t = Text()
                t.append(f"  {f['id']} ", style="bold")
                t.append(f"{f['severity'].upper()} ", style=_SEV.get(f["severity"], ""))
                t.append(f"{f['headline']} (from {f['onset']}, confidence {f['confidence']})")
                yield t
                for h in f["upstream_hypothesis"]:
                    yield Text(f"     likely upstream: {h}")
                for e in f["evidence"]:
                    yield Text(f"     {e}", style="dim")
                names = ", ".join(m["replica"] for m in f["replicas"][:8])
                more = f" (+{len(f['replicas']) - 8} more)" if len(f["replicas"]) > 8 else ""
                yield Text(f"     replicas: {names}{more}", style="dim")
            yield Text("")
        yield self._table()
        if d["outliers"]:
            yield Text("")
            yield Text("Outliers (far worse than their peers)", style="bold")
            for o in d["outliers"][:10]:
                yield Text(f"  {o['replica']}: {o['what']} {self._metric(o['metric'], o['value'])} vs peers' median "
                           f"{self._metric(o['metric'], o['peer_median'])} (score {o['score']})")
        imb = d["imbalance"]
        if imb.get("skewed"):
            yield Text("")
            yield Text(f"Router imbalance: max/median {imb['max_over_median']:.2f}, min/median "
                       f"{imb['min_over_median']:.2f}, CV {imb['cv']:.2f} ({imb['basis']})", style="bold yellow")
            if imb["hot"]:
                yield Text("  hot: " + ", ".join(imb["hot"]))
            if imb["cold"]:
                yield Text("  cold: " + ", ".join(imb["cold"]))

    @staticmethod
    def _metric(metric: str, v: Any) -> str:
        if metric.endswith("_rate") or metric.startswith("kv"):
            return _pct(v)
        return _s(v)

    def _red_use(self) -> Table:
        d = self.doc
        req = d["red"]["requests"]
        lat = d["red"].get("latency") or {}
        use = d["use"]
        t = Table(title="Fleet RED / USE", title_justify="left", show_header=True, box=None, pad_edge=False)
        t.add_column("requests")
        t.add_column("rate/s", justify="right")
        t.add_column("errors", justify="right")
        t.add_column("aborts", justify="right")
        for m in ("ttft_s", "e2e_s"):
            t.add_column(f"{m[:-2].upper()} p50/p99", justify="right")
        t.add_column("KV max", justify="right")
        t.add_column("Waiting max", justify="right")
        t.add_column("gen tok/s Σ", justify="right")
        cells = [f"{req['total']:,}", _num(req["rate_per_s"], "{:.2f}"),
                 f"{req['failed']:,} ({_pct(req['error_rate'])})", f"{req['aborted']:,} ({_pct(req['abort_rate'])})"]
        for m in ("ttft_s", "e2e_s"):
            x = lat.get(m) or {}
            cells.append(f"{_s(x.get('p50'), x.get('basis'))} / {_s(x.get('p99'), x.get('basis'))}"
                         + (" est." if x.get("basis") == "estimated" else ""))
        cells += [_pct(use["kv_cache_usage"]["max"]), _num(use["waiting"]["max"]),
                  _num(use["generation_tokens_per_s"]["sum"], "{:,.1f}")]
        t.add_row(*cells)
        x = lat.get("ttft_s") or {}
        if x.get("from") == "sketch":
            t.caption = f"latency percentiles: sketch (DDSketch, ±{x['relative_accuracy']:.0%}); counters exact"
        elif x.get("from"):
            t.caption = "latency percentiles: exact (Polars over the per-request rows)"
        t.caption_justify = "left"
        return t

    def _table(self) -> Table:
        rows = self.doc["replicas"]
        t = Table(title=f"Replicas, worst first ({len(rows)})", title_justify="left", box=None, pad_edge=False)
        for name, just in (("replica", "left"), ("verdict", "left"), ("req", "right"), ("err", "right"),
                           ("TTFT p99", "right"), ("KV max", "right"), ("wait max", "right"), ("what", "left")):
            t.add_column(name, justify=just, overflow="fold")  # type: ignore[arg-type]
        for r in rows[: self.top]:
            st = r["status"]
            what = r.get("reason") or ""
            wi = r.get("worst_incident")
            if wi:
                what = wi["headline"]
            flags = list(r.get("flags") or [])
            if r.get("load"):
                flags.append(f"load {r['load']}")
            if flags:
                what = f"[{', '.join(flags)}] " + what
            t.add_row(escape(r["replica"]), Text(r.get("label") or st.upper(), style=_STYLE.get(st, "")),
                      _num(r.get("requests")), _pct(r.get("error_rate")), _s(r.get("ttft_p99_s"), r.get("ttft_basis")),
                      _pct(r.get("kv_max")), _num(r.get("waiting_max")), Text(what[:160]))
        if len(rows) > self.top:
            t.add_row(f"… {len(rows) - self.top} more", "", "", "", "", "", "", "")
        return t


def render_fleet(doc: dict[str, Any], console: Console, top: int = 30) -> None:
    """Print the fleet document."""
    console.print(Group(FleetView(doc, top)))
