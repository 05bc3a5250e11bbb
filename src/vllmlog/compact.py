"""Equal values shared among the events a ``Run`` keeps (its notable events), so a long log holds one copy of
each repeated string and timestamp rather than one per event.

A real log repeats itself: the same process tags (``APIServer pid=31488``), vLLM's ``file.py:N`` sources,
access-log paths and methods, and whole warning lines (a shutdown sequence, an environment notice printed
at every start). The parser makes a new object for each of them per line; a kept event holds them for the
life of the run, and most kept events' field dicts equal another's (access lines of one client and path, the
same notice at every start). Sharing equal values — str and datetime, each immutable, and field dicts, which
nothing writes once the event is kept — cuts about half of a notable event's memory on real vLLM logs and
changes nothing a reader can see (values are equal; the events are the same objects).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .model import Event

_SCALARS = frozenset({int, float, bool, type(None), datetime})

#: Distinct values remembered at most (then new ones are kept as they are): bounds the table in a long ``watch``.
MAX_SHARED = 1 << 17


class Sharer:
    """Replaces an event's strings and timestamp by an equal one seen before (``share``)."""

    __slots__ = ("_seen", "_fields")

    def __init__(self) -> None:
        self._seen: dict[Any, Any] = {}
        self._fields: dict[tuple[Any, ...], dict[str, Any]] = {}

    def _one(self, v: Any) -> Any:
        seen = self._seen
        got = seen.get(v)
        if got is None:
            if len(seen) < MAX_SHARED:
                seen[v] = v
            return v
        return got

    def share(self, e: Event) -> Event:
        """``e`` with its text, process, source, level, timestamp and str field values shared, and its fields dict
        when an equal one of scalar values was seen (in place)."""
        one = self._one
        # str and datetime values only: they never compare equal to each other (an int would equal a float)
        if e.text:
            e.text = one(e.text)
        if e.process is not None:
            e.process = one(e.process)
        if e.source is not None:
            e.source = one(e.source)
        if e.level is not None:
            e.level = one(e.level)
        ts = e.ts
        if ts is not None and type(ts) is datetime:
            e.ts = one(ts)
        f = e.fields
        key: list[Any] | None = []
        for k, v in f.items():
            t = type(v)
            if t is str:
                w = one(v)
                if w is not v:
                    f[k] = w  # an existing key: the dict does not resize while iterated
            elif t not in _SCALARS:
                key = None  # a list or dict value: this dict stays its own
            if key is not None:
                key += (k, t, v)
        if key is not None:  # equal fields (type by type: 400 is not 400.0) share one dict; nothing writes a kept one
            tk = tuple(key)
            got = self._fields.get(tk)
            if got is None:
                if len(self._fields) < MAX_SHARED:
                    self._fields[tk] = f
            else:
                e.fields = got
        return e

    def clear(self) -> None:
        """Forget the values seen (the kept events still share theirs)."""
        self._seen.clear()
        self._fields.clear()
