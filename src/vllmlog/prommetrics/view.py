"""Rich view of finished scrape reports (rendering only, no logic)."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from .report import TargetReport

SEVERITY_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}


def _fmt(v: float | None, pct: bool = False) -> str:
    if v is None:
        return "–"
    return f"{v:.1%}" if pct else f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"


class ScrapeView:
    """Targets one after another: gauges, rates, bucket-estimated latency, findings with evidence, notes."""

    def __init__(self, reports: list[TargetReport]) -> None:
        self.reports = reports

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for r in self.reports:
            d = r.to_dict()
            head = Text.assemble((d["target"], "bold"), f"  vLLM {d['vllm_version_guess']}  {d['samples']} samples "
                                 f"over {d['window_s']:.0f} s")
            if d["error"]:
                head.append(f"  {d['error']}", style="red")
            yield head
            if r.snapshots:
                rt = d["rates"]
                yield Text(f"  running {_fmt(d['running'])}  waiting {_fmt(d['waiting'])}  "
                           f"KV cache {_fmt(d['kv_cache_usage'], pct=True)}")
                yield Text(f"  requests/s {_fmt(rt['requests_per_s'])}  prompt tok/s {_fmt(rt['prompt_tokens_per_s'])}"
                           f"  gen tok/s {_fmt(rt['generation_tokens_per_s'])}  preemptions/s "
                           f"{_fmt(rt['preemptions_per_s'])}  aborts/s {_fmt(rt['aborts_per_s'])}  errors/s "
                           f"{_fmt(rt['errors_per_s'])}")
                if d["quantiles"]:
                    t = Table(title="  latency (s, bucket estimates)", title_justify="left", box=None, padding=(0, 2))
                    for c in ("", "p50", "p90", "p95", "p99", "mean", "count"):
                        t.add_column(c, justify="right" if c else "left")
                    for k, q in d["quantiles"].items():
                        t.add_row(k, *(f"≤{q['first_bucket_le']:g}" if c in q["in_first_bucket"] else _fmt(q.get(c))
                                       for c in ("p50", "p90", "p95", "p99", "mean", "count")))
                    yield t
            for f in d["findings"]:
                yield Text.assemble("  ", (f["severity"].upper(), SEVERITY_STYLE[f["severity"]]),
                                    f" {f['code']} {f['category']}: {f['message']}")
                for ev in f["evidence"][:1]:
                    where = f"{ev['file']}:{ev['line']}" if ev.get("line") else ev["file"]
                    yield Text(f"      {where}  {ev['text']}", style="dim")
            if not d["findings"]:
                yield Text("  no findings", style="green")
            for n in d["notes"]:
                yield Text(f"  note: {n}", style="dim")
