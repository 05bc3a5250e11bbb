"""The terminal view of a capacity plan (Rich): no logic, a ``__rich_console__`` over the finished plan."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable, Iterator

from rich.console import Console, ConsoleOptions, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .figure import Figure, fmt_value

if TYPE_CHECKING:  # pragma: no cover
    from .plan import CapacityPlan, Check, ServerCapacity

_BASIS_STYLE = {"logged": "green", "derived": "cyan", "estimated": "yellow", "model": "magenta", "default": "dim"}
_LIMIT = {"max_num_seqs": "seats (--max-num-seqs)", "kv_cache": "KV cache", "compute": "compute",
          "unknown": "unknown", "headroom": "nothing (headroom)", "idle": "idle"}


def _figures(title: str, figs: Iterable[Figure], notes: list[str]) -> Table:
    """Label, value and basis on one row; the source below in dim; assumptions become numbered notes."""
    t = Table(title=title, title_justify="left", title_style="bold", show_header=False, box=None, pad_edge=False,
              expand=True)
    t.add_column("what", ratio=1)
    t.add_column("value", justify="right", no_wrap=True)
    t.add_column("basis", no_wrap=True)
    for f in figs:
        refs = ""
        for a in f.assumptions:
            if a not in notes:
                notes.append(a)
            refs += f"[{notes.index(a) + 1}]"
        label = Text(f.label)
        if f.source:
            label.append("\n" + f.source, style="dim")
        t.add_row(label, escape(f.text()), Text(f.basis + refs, style=_BASIS_STYLE.get(f.basis, "")))
    return t


def _notes(notes: list[str]) -> Iterator[Text]:
    for i, a in enumerate(notes, 1):
        yield Text(f"  [{i}] assumes {a}", style="dim italic")


def _check_line(c: Check) -> Text:
    err = c.error
    style = "green" if err is not None and abs(err) <= 0.10 else "yellow" if err is not None and abs(err) <= 0.25 else "red"
    t = Text("  ✓ " if style == "green" else "  ~ " if style == "yellow" else "  ✗ ", style=style)
    t.append(f"{c.name}: predicted {fmt_value(float(c.predicted))}, actual {fmt_value(float(c.actual))}")
    if err is not None:
        t.append(f" (error {err:+.0%})", style=style)
    t.append(f" — {c.actual_source}; {c.how}", style="dim")
    return t


class ServerView:
    """One server run's plan."""

    def __init__(self, sc: ServerCapacity) -> None:
        self.sc = sc

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        sc = self.sc
        name = (sc.replica or os.path.basename(sc.file)) + (f" (server run {sc.server + 1})" if sc.server else "")
        yield Text(f"══ {name}", style="bold")
        notes: list[str] = []
        yield _figures("What the server has", sc.facts.figures, notes)
        yield from _notes(notes)
        yield Text("")
        notes = []
        yield _figures("What the load needs", sc.load.figures + sc.model_figures, notes)
        yield from _notes(notes)
        yield Text("")
        yield Text.assemble(("Which limit binds: ", "bold"), (_LIMIT.get(sc.binding, sc.binding), "bold yellow"))
        for w in sc.windows:
            when = f"{w.start:%H:%M:%S}–{w.end:%H:%M:%S}" if w.start and w.end else "?"
            line = Text(f"  {when} ", style="dim")
            line.append(f"{_LIMIT.get(w.limit, w.limit)}", style="bold" if w.limit not in ("idle", "headroom") else "")
            line.append(f" ({w.intervals} interval{'s' if w.intervals != 1 else ''}, lines {w.first_line}–{w.last_line})"
                        f": {w.evidence}", style="dim" if w.limit in ("idle",) else "")
            yield line
        yield Text("")
        t = Table(title="What-if (model: requests of this log's length mix)", title_justify="left",
                  title_style="bold", header_style="dim", box=None, pad_edge=False, expand=True)
        t.add_column("change", ratio=5)
        t.add_column("KV tokens", justify="right", no_wrap=True)
        t.add_column("fit", justify="right", no_wrap=True)
        t.add_column("Running", justify="right", no_wrap=True)
        t.add_column("gen tok/s", justify="right", no_wrap=True)
        notes = []
        for w in sc.whatifs:
            refs = ""
            for a in w.assumptions:
                if a not in notes:
                    notes.append(a)
                refs += f"[{notes.index(a) + 1}]"
            cell = Text(w.change, style="bold" if w.proposed else "")
            cell.append(refs, style="dim")
            if w.note:
                cell.append("\n  " + w.note, style="dim")
            t.add_row(cell, fmt_value(w.kv_tokens), fmt_value(w.fits), fmt_value(w.running),
                      fmt_value(w.gen_tps))
        yield t
        yield Text(f"  Running = min(offered {sc.load.demand_peak}, seats, fit); fit = KV tokens ÷ tokens per request",
                   style="dim")
        yield from _notes(notes)
        yield Text("")
        r = sc.replicas
        yield Text("Replicas", style="bold")
        for f in (r.observed, r.saturation, r.per_replica):
            if f is not None:
                yield Text.assemble(f"  {f.label}: ", (f.text(), "bold"), "  ",
                                    (f.basis, _BASIS_STYLE.get(f.basis, "")))
                yield Text(f"    {f.source}", style="dim")
                for a in f.assumptions:
                    yield Text(f"    assumes {a}", style="dim italic")
        if r.target_rate is not None and r.replicas is not None:
            yield Text.assemble(f"  for {r.target_rate:g} req/s: ", (f"{r.replicas} replica"
                                                                    f"{'s' if r.replicas != 1 else ''}", "bold green"),
                                (f" ({sc.facts.config.world_size} device{'s' if sc.facts.config.world_size != 1 else ''}"
                                 f" each; {r.needed} just hold the SLO, the rest is {r.headroom:.0%} headroom)", "dim"))
        elif r.target_rate is None and r.per_replica is not None:
            yield Text("  give --target-rate R to get a replica count", style="dim")
        for a in r.assumptions:
            yield Text(f"    {a}", style="dim italic")
        if sc.checks:
            yield Text("")
            yield Text("Checks (model vs what the log states)", style="bold")
            for c in sc.checks:
                yield _check_line(c)
        yield Text("")
        yield Text("Advice", style="bold")
        for a in sc.advice or ["none: no flag change would lift the binding limit"]:
            yield Text(f"  • {a}")
        if sc.sizing is not None and sc.sizing.values():
            yield Text("Sizing (the values the diagnosis's fixes use)", style="bold")
            for a in sc.sizing.lines():
                yield Text(f"  • {a}", style="dim" if a.startswith("no `") else "")


class PlanView:
    """The whole plan: every server run, then cross-run checks."""

    def __init__(self, plan: CapacityPlan) -> None:
        self.plan = plan

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        p = self.plan
        legend = Text("bases: ", style="dim")
        for b, st in _BASIS_STYLE.items():
            legend.append(b, style=st)
            legend.append(" ")
        yield legend
        if not p.servers:
            yield Text("No server run served with stats lines: nothing to plan from.", style="yellow")
        for i, sc in enumerate(p.servers):
            if i:
                yield Text("")
            yield ServerView(sc)
        if p.checks:
            yield Text("")
            yield Text("Checks across runs of the same model and device", style="bold")
            for c in p.checks:
                yield _check_line(c)
        if p.fleet:
            yield Text("")
            t = Table(title="Fleet: each replica's throughput within the SLO", title_justify="left", title_style="bold",
                      header_style="dim", box=None, pad_edge=False, expand=True)
            for c, j in (("replica", "left"), ("runs", "right"), ("bound by", "left"), ("SLO req/s", "right"),
                         ("saturation req/s", "right"), ("peak req/s", "right"), ("peak ÷ SLO", "right"),
                         ("requests", "right")):
                t.add_column(c, justify=j, no_wrap=c != "replica", ratio=3 if c == "replica" else None)
            for r in p.fleet:
                share = r.load_share
                t.add_row(escape(r.name), str(r.server_runs), _LIMIT.get(r.binding, r.binding), fmt_value(r.slo_rate),
                          fmt_value(r.saturation_rate), fmt_value(r.peak_rate),
                          Text(f"{share:.0%}", style="red" if share > 1 else "") if share is not None else "–",
                          f"{r.requests:,}")
            yield t
            yield Text("  SLO req/s: the rate one replica sustains within the SLO (model, see each run's Replicas); "
                       "peak: its busiest bucket of arrivals (logged)", style="dim")
        tr = p.trend
        if tr is not None:
            yield Text("")
            yield Text(f"Trend (peak rate per {tr.period})", style="bold")
            for t, r, n in tr.points[-14:]:
                yield Text(f"  {t:%Y-%m-%d %H:%M}  {r:6.2f} req/s peak  ({n:,} requests)")
            for f in tr.figures:
                yield Text.assemble(f"  {f.label}: ", (f.text(), "bold"), "  ", (f.basis, _BASIS_STYLE.get(f.basis, "")))
                yield Text(f"    {f.source}", style="dim")
                for a in f.assumptions:
                    yield Text(f"    assumes {a}", style="dim italic")
        for s in p.skipped:
            yield Text(f"skipped {s}", style="dim")
        for z in p.startup:
            if z.values():
                yield Text(f"Sizing of {p.replica_names.get(z.file) or os.path.basename(z.file)} server run {z.server + 1} (from its start-up lines: no "
                           "capacity model without stats lines)", style="bold")
                for a in z.lines():
                    yield Text(f"  • {a}", style="dim" if a.startswith("no `") else "")
