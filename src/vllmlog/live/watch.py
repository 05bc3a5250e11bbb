"""The watch loop: follow → parse → pipeline → (periodically) rules → alert state → notifiers.

Each turn reads whatever arrived (a file poll or a stream ``select``), feeds it to the live state,
and completes the parser's open record once the input has been idle for ``flush_after_s`` (so the
last line of a burst is counted and diagnosed without waiting for the next one). The rules run on
a snapshot every ``diagnose_interval_s``, and sooner (at most every ``min_diagnose_interval_s``)
when an error, warning or lifecycle record arrives, which keeps alert latency well under a second.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Sequence, Union

from ..model import Event
from ..redact import Redactor
from ..run import LIFECYCLE, Run
from .alerts import AlertConfig, AlertEngine, Transition
from .exporter import Health
from .follow import FileFollower, Segment, StreamFollower
from .notify import Notifier
from .state import ERROR_CATEGORIES, LiveState

log = logging.getLogger(__name__)

Source = Union[FileFollower, StreamFollower]
Evaluator = Callable[[Run], Sequence[dict[str, Any]]]
_URGENT_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})


def default_evaluator(
    config: Any = None, known_codes: Callable[[], set[str]] | None = None,
) -> Evaluator | None:
    """``vllmlog.diagnose.diagnose`` as an evaluator, or None while the rules are not installed.

    Evidence texts the Run does not keep are looked up in the file only for findings whose code is
    not alerting yet (``known_codes``): re-reading a large, growing log every pass would cost more
    than everything else ``watch`` does.
    """
    try:
        from .. import diagnose as dg
    except ImportError:
        return None
    resolve = getattr(dg, "_resolve", None)  # evidence lookup; no public name for it (yet)

    def evaluate(run: Run) -> list[dict[str, Any]]:
        # the same incidents as `diagnose`: an alert is an incident (keyed by its cause's code); it resolves
        # once the incident's last moment is stale by the log's own clock (it recovered, or a restart made it
        # history) — AlertEngine's stale_after; findings outside incidents (notes) feed vllmlog_findings_active
        d = dg.run_diagnosis(run, config, fill_text=False)
        fs, incidents = list(d.findings), list(d.incidents)
        if resolve is not None and known_codes is not None and run.files and run.files[0] != "-":
            known = known_codes()
            new = [f for f in fs if f.code not in known]
            if new:
                try:
                    resolve(new)
                except Exception:  # noqa: BLE001  (evidence text is a nicety)
                    log.debug("evidence lookup failed", exc_info=True)
        out = [i.alert_dict() for i in incidents]
        in_incident = {id(f) for i in incidents for f in i.findings}
        out += [f.to_dict() if hasattr(f, "to_dict") else dict(f) for f in fs if id(f) not in in_incident]
        return out

    return evaluate


class Watcher:
    """Drives one source through the live state; ``run`` until stopped (or end of input)."""

    def __init__(
        self,
        source: Source,
        state: LiveState,
        *,
        engine: AlertEngine | None = None,
        notifiers: Sequence[Notifier] = (),
        evaluate: Evaluator | None = None,
        instance: str = "",
        health: Health | None = None,
        poll_interval: float = 0.1,
        flush_after_s: float = 0.3,
        spans: Any = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.source = source
        self.redactor = redactor or Redactor()
        """Every finding passes through it before it becomes an alert (stdout, Alertmanager, webhook): prompts,
        outputs and secrets a log line carries never leave in a notification (``--show-prompts`` keeps prompts)."""
        self.spans = spans
        """A ``traces.receiver.OtlpReceiver`` (``--otlp-listen``) whose spans each turn folds in."""
        self.state = state
        self.engine = engine or AlertEngine(AlertConfig())
        self.config = self.engine.config
        self.notifiers = list(notifiers)
        self.evaluate = evaluate
        self.instance = instance
        self.health = health or Health()
        self.poll_interval = poll_interval
        self.flush_after_s = flush_after_s
        self.transitions: list[Transition] = []
        """Every state change so far (bounded to the last 1000)."""
        self._last_line_wall = 0.0
        self._dirty = False
        self._urgent = False
        self._last_diag = 0.0
        self._next_urgent_diag = 0.0
        self._rate_t0 = time.monotonic()
        self._rate_n0 = 0
        self._diag_errors_logged: set[str] = set()
        self._stage_errors_logged: set[tuple[str, str]] = set()

    # ------------------------------------------------------------------ clocks and context
    def log_now(self, wall: float | None = None) -> float:
        """The log clock: the latest log timestamp, advanced by wall time since that line was read."""
        wall = time.time() if wall is None else wall
        ts = self.state.last_log_ts
        if ts is None:
            return wall
        return ts.timestamp() + max(0.0, wall - self._last_line_wall)

    def context(self) -> dict[str, Any]:
        """Labels every notification carries."""
        return {"instance": self.instance, "model": self.state.model, "file": self.state.file}

    # ------------------------------------------------------------------ one turn
    def _failed(self, stage: str, what: str) -> None:
        """One stage failed: count it (``vllmlog_watch_errors_total{stage}``), log the first of each kind."""
        self.health.errors[stage] += 1
        if (stage, what) not in self._stage_errors_logged:
            self._stage_errors_logged.add((stage, what))
            log.exception("%s failed (%s); the watcher carries on", stage, what)

    def step(self) -> int:
        """Read, parse, maybe diagnose; return the number of lines read. Each stage (read, parse, spans,
        rules, notify) is isolated: one that raises is counted and the others go on."""
        src = self.source
        try:
            segs: list[Segment] = src.poll(self.poll_interval) if isinstance(src, StreamFollower) else src.poll()
        except Exception:  # noqa: BLE001
            self._failed("read", "poll")
            segs = []
        wall = time.time()
        n = 0
        for s in segs:
            n += len(s.lines)
        try:
            if n:
                self._last_line_wall = wall
                self._dirty = True
                self.health.last_line_time = wall
                self._note(self.state.feed(segs))
            elif self._dirty and wall - self._last_line_wall >= self.flush_after_s:
                self._dirty = False
                self._note(self.state.flush())
        except Exception:  # noqa: BLE001  (a batch the parser or pipeline chokes on: counted, not fatal)
            self._failed("parse", "feed")
            self.health.lines_failed += n
        if self.spans is not None:
            try:
                got = self.spans.drain()
                if got:
                    self.state.feed_spans(got)
            except Exception:  # noqa: BLE001
                self._failed("spans", "feed_spans")
        try:
            self.state.release_ended()
        except Exception:  # noqa: BLE001
            self._failed("parse", "release_ended")
        self._update_health(src)
        self._maybe_diagnose(wall)
        if self.notifiers and self.engine.alerts:
            firing = self.engine.firing()
            if firing:
                ctx = self.context()
                for nt in self.notifiers:
                    try:
                        nt.tick(firing, ctx, wall)
                    except Exception:  # noqa: BLE001  (a notifier must never stop the reader)
                        self._failed("notify", str(getattr(nt, "name", nt)))
        return n

    def _note(self, events: list[Event]) -> None:
        if self._urgent or self.evaluate is None:
            return
        for e in events:
            if e.level in _URGENT_LEVELS or e.kind in ERROR_CATEGORIES or e.kind in LIFECYCLE:
                self._urgent = True
                return

    def _update_health(self, src: Source) -> None:
        h = self.health
        st = src.stats
        h.lines_read, h.bytes_read = st.lines_read, st.bytes_read
        h.rotations, h.truncations = st.rotations, st.truncations
        h.truncated_lines, h.invalid_utf8_lines = st.truncated_lines, st.invalid_utf8_lines
        h.lag_bytes = src.lag_bytes
        h.source_open = src.is_open if isinstance(src, FileFollower) else not src.eof
        m = time.monotonic()
        if m - self._rate_t0 >= 1.0:
            rate = (st.lines_read - self._rate_n0) / (m - self._rate_t0)
            h.lines_per_second = rate if h.lines_per_second == 0 else 0.5 * h.lines_per_second + 0.5 * rate
            self._rate_t0, self._rate_n0 = m, st.lines_read
        while st.events:
            log.info("%s", st.events.pop(0))

    def _maybe_diagnose(self, wall: float, force: bool = False) -> None:
        if self.evaluate is None:
            return
        m = time.monotonic()
        # periodic passes cost at most ~5 % of a core, whatever the state's size (a snapshot copies
        # every in-flight journey)
        interval = max(self.config.diagnose_interval_s, 20 * self.health.diagnose_seconds)
        due = force or m - self._last_diag >= interval
        if not due and self._urgent and m >= self._next_urgent_diag:
            due = True
        if due:
            self.diagnose(wall)

    def diagnose(self, wall: float | None = None) -> list[Transition]:
        """Run the rules on a snapshot now and notify the resulting state changes."""
        wall = time.time() if wall is None else wall
        assert self.evaluate is not None
        t0 = time.monotonic()
        self._urgent = False
        findings: Sequence[dict[str, Any]] | None
        try:
            findings = [self.redactor.value(dict(f)) for f in self.evaluate(self.state.snapshot())]  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001  (a failing rule must not stop the watcher)
            self.health.diagnose_errors += 1
            self.health.errors["rules"] += 1
            key = type(exc).__name__
            if key not in self._diag_errors_logged:
                self._diag_errors_logged.add(key)
                log.exception("diagnosis failed")
            findings = None
        dt = time.monotonic() - t0
        self.health.diagnose_runs += 1
        self.health.diagnose_seconds = dt
        self._last_diag = t0 + dt
        # bound the cost of event-triggered passes to ~20 % of the time
        self._next_urgent_diag = self._last_diag + max(self.config.min_diagnose_interval_s, 4 * dt)
        if findings is None:
            return []
        ts = self.state.last_log_ts
        try:
            out = self.engine.update(findings, self.log_now(wall), ts.timestamp() if ts is not None else None)
        except Exception:  # noqa: BLE001  (a finding the alert engine cannot take)
            self._failed("rules", "alerts")
            return []
        if out:
            self._emit(out)
        return out

    def _emit(self, transitions: list[Transition]) -> None:
        ctx = self.context()
        for t in transitions:
            self.transitions.append(t)
            for nt in self.notifiers:
                try:
                    nt.send(t, ctx)
                except Exception:  # noqa: BLE001
                    self._failed("notify", str(getattr(nt, "name", nt)))
        del self.transitions[:-1000]

    # ------------------------------------------------------------------ the loop
    def at_eof(self) -> bool:
        """Input exhausted: stdin closed, or a file read to its current end."""
        src = self.source
        if isinstance(src, StreamFollower):
            return src.eof
        return src.is_open and src.lag_bytes == 0

    def run(self, stop: threading.Event, *, exit_at_eof: bool = False) -> None:
        """Loop until ``stop`` is set (or, with ``exit_at_eof``, the input is exhausted).

        When a stream ends (the server exited) the final state is diagnosed and, unless
        ``exit_at_eof``, still served until ``stop`` is set."""
        eof = False
        try:
            while not stop.is_set():
                n = self.step()
                if n == 0 and self.at_eof() and (exit_at_eof or isinstance(self.source, StreamFollower)):
                    eof = True
                    break
                if n == 0 and isinstance(self.source, FileFollower):
                    stop.wait(self.poll_interval)
        finally:
            self.finish(eof=eof)
        if not exit_at_eof:  # stdin closed: keep serving the final numbers until stopped
            stop.wait()

    def finish(self, *, eof: bool = False) -> None:
        """Input is over (``eof``: journeys close as at the end of a file) or we stop: complete the
        last record, diagnose once more."""
        try:
            segs = self.source.close()
        except Exception:  # noqa: BLE001  (each stage fails alone, at the end too)
            self._failed("read", "close")
            segs = []
        try:
            if segs:
                self.state.feed(segs)
        except Exception:  # noqa: BLE001
            self._failed("parse", "feed")
            self.health.lines_failed += sum(len(s.lines) for s in segs)
        if self.spans is not None:
            try:
                self.state.feed_spans(self.spans.drain())
            except Exception:  # noqa: BLE001
                self._failed("spans", "feed_spans")
        try:
            if eof:
                self.state.end_of_input()
            else:
                self.state.flush()
        except Exception:  # noqa: BLE001
            self._failed("parse", "end_of_input" if eof else "flush")
        self._update_health(self.source)
        if self.evaluate is not None:
            self.diagnose()

    def close_notifiers(self, timeout: float = 5.0) -> None:
        """Deliver queued notifications (up to ``timeout`` each) and stop the workers."""
        for nt in self.notifiers:
            try:
                nt.close(timeout)
            except Exception:  # noqa: BLE001
                log.exception("closing notifier %s", getattr(nt, "name", nt))

    def notifier_stats(self) -> dict[tuple[str, str], int]:
        """(notifier, result) → count, for the exporter."""
        out: dict[tuple[str, str], int] = {}
        for nt in self.notifiers:
            for k, v in list(nt.counts.items()):
                out[(nt.name, k)] = v
        return out
