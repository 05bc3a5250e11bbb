"""Rule engine building blocks: ``Severity``, ``Evidence``, ``Finding`` and the ``Rule`` base class."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

if TYPE_CHECKING:
    from ..run import Run

#: Every finding carries exactly one of these categories (issue 4's taxonomy).
CATEGORIES = (
    "startup_oom", "kv_cache_capacity_error", "runtime_oom", "kv_cache_pressure_preemption", "queue_backlog",
    "engine_hang", "engine_dead", "distributed_nccl", "model_load_failure", "config_error", "request_too_long",
    "bad_request_params", "client_abort", "timeout", "slow_throughput",
)


class Severity(IntEnum):
    """How bad a finding is; ordered critical > error > warning > info."""

    INFO = 0
    """Worth knowing; not a fault."""
    WARNING = 1
    """Service degraded (slow, queueing, near capacity)."""
    ERROR = 2
    """Requests are failing."""
    CRITICAL = 3
    """Service down or cannot start."""

    @property
    def label(self) -> str:
        """Lower-case name used in JSON and on the command line."""
        return self.name.lower()

    @classmethod
    def parse(cls, value: str | Severity) -> Severity:
        """``"warning"`` → ``Severity.WARNING`` (case-insensitive); raises ValueError."""
        if isinstance(value, Severity):
            return value
        try:
            return cls[str(value).strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {value!r} (use critical, error, warning or info)") from None

    def lowered(self, steps: int = 1) -> Severity:
        """This severity lowered by ``steps`` (never below INFO)."""
        return Severity(max(0, int(self) - steps))


@dataclass(slots=True)
class Evidence:
    """One real log line backing a finding."""

    file: str
    line: int
    text: str = ""
    fallback: str = field(default="", repr=False, compare=False)
    """Shown when the line cannot be read back (standard input): a rendering of what the line said."""

    def to_dict(self) -> dict[str, Any]:
        """JSON shape ``{file, line, text}``."""
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass(slots=True)
class Probe:
    """A request to look up lines the Run does not keep (high-volume kinds) to enrich evidence.

    ``diagnose`` resolves probes by reading ``file`` lines ``first``..``last`` and keeping up to
    ``limit`` lines containing ``needle`` (rules themselves never read files)."""

    file: str
    first: int
    last: int
    needle: str
    limit: int = 2


@dataclass
class Finding:
    """A diagnosis: what is wrong, the lines that show it, why, and which flag fixes it."""

    code: str
    rule: str
    category: str
    severity: Severity
    title: str
    message: str
    evidence: list[Evidence] = field(default_factory=list)
    root_cause: str = ""
    remediation: str = ""
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    count: int = 1
    file: str | None = None
    """Input file the finding is about (multi-file input)."""
    process: str | None = None
    """vLLM process tag of the primary evidence (``EngineCore pid=2500``), when logged."""
    server: int = 0
    """Index of the server run (restart) within ``file``."""
    caused_by: str | None = None
    """Code of the finding this one is a consequence of (its severity was lowered)."""
    incident: str | None = None
    """Id of the incident this finding belongs to (``I1`` …), None for notes outside any incident."""
    data: dict[str, Any] = field(default_factory=dict)
    """Numbers behind the message (thresholds, peaks, suggested values)."""
    probes: list[Probe] = field(default_factory=list, repr=False)

    @property
    def first_line(self) -> int:
        """Line number of the first evidence line (0 when none)."""
        return min((e.line for e in self.evidence if e.file == self.file), default=0) if self.evidence else 0

    def sort_key(self) -> tuple[Any, ...]:
        """Severity (worst first), then time, then position."""
        ts = self.first_seen or datetime.max
        return (-int(self.severity), ts, self.file or "", self.first_line, self.code)

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape (shared with the ``M1xx`` /metrics checks)."""
        return {
            "code": self.code,
            "rule": self.rule,
            "category": self.category,
            "severity": self.severity.label,
            "title": self.title,
            "message": self.message,
            "evidence": [e.to_dict() for e in self.evidence],
            "root_cause": self.root_cause,
            "remediation": self.remediation,
            "first_seen": self.first_seen.isoformat() if self.first_seen else None,
            "last_seen": self.last_seen.isoformat() if self.last_seen else None,
            "count": self.count,
            "file": self.file,
            "process": self.process,
            "server": self.server,
            "caused_by": self.caused_by,
            "incident": self.incident,
            "data": {k: v for k, v in self.data.items() if k not in _INTERNAL},
        }


#: ``Finding.data`` keys used by ``diagnose`` itself, not part of the public JSON.
_INTERNAL = frozenset({"can_explain", "consequence_of", "onset_ts", "duplicate_of", "logged_late"})


class Rule:
    """Base class of a diagnosis rule: a stable code, a slug, a category, a default severity,
    configurable ``options`` and a pure ``detect(run, options)``."""

    code: ClassVar[str] = ""
    slug: ClassVar[str] = ""
    category: ClassVar[str] = ""
    severity: ClassVar[Severity] = Severity.WARNING
    title: ClassVar[str] = ""
    options: ClassVar[dict[str, Any]] = {}
    default_on: ClassVar[bool] = True
    consequence_of: ClassVar[tuple[str, ...]] = ()
    """Categories that, when found in the same server run, explain this rule's findings."""
    consequence_any_time: ClassVar[tuple[str, ...]] = ()
    """Of ``consequence_of``, the causes that may be *logged* after their symptom (an NCCL watchdog fires
    minutes after the hang it explains)."""
    explains: ClassVar[tuple[str, ...]] = ()
    """Symptom kinds (``symptoms.KINDS``) this rule's findings can be the cause of."""
    fallback: ClassVar[bool] = False
    """A generic explainer (engine failed to start, engine died, engine hung): any specific cause that explains the
    same symptom is preferred to it."""
    needs_symptom: ClassVar[bool] = False
    """The finding only matters when clients feel it (KV near full, a queue, a slow speed): without a symptom
    it is saturation and reported as info."""

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """Is this finding's mechanism present behind ``symptom``? True: verified (its signature is there);
        False: refuted (do not attach); None: cannot tell (time and kind fit)."""
        return None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        """Yield findings for ``run`` (pure: no I/O, no printing)."""
        raise NotImplementedError

    def finding(self, message: str, **kw: Any) -> Finding:
        """A finding pre-filled with this rule's code, slug, category, severity and title."""
        kw.setdefault("severity", self.severity)
        kw.setdefault("title", self.title)
        kw.setdefault("category", self.category)
        return Finding(code=self.code, rule=self.slug, message=message, **kw)

    @classmethod
    def doc(cls) -> str:
        """The rule's docstring (*What it detects / Why it matters / How to fix*)."""
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def section(cls, heading: str) -> str:
        """One section of the docstring (``"What it detects"`` …), without its heading."""
        text = cls.doc()
        marker = f"## {heading}"
        i = text.find(marker)
        if i < 0:
            return ""
        rest = text[i + len(marker):]
        j = rest.find("\n## ")
        return (rest if j < 0 else rest[:j]).strip()
