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

_SHAREABLE = frozenset({str, int, float, bool, type(None), datetime})

#: Distinct values remembered at most (then new ones are kept as they are): bounds the table in a long ``watch``.
MAX_SHARED = 1 << 17


class Sharer:
    """Replaces an event's strings and timestamp by an equal one seen before (``share``)."""

    __slots__ = ("_seen", "_fields")

    def __init__(self) -> None:
        self._seen: dict[Any, Any] = {}
        self._fields: dict[tuple[Any, ...], dict[str, Any]] = {}

    def share(self, e: Event) -> Event:
        """``e`` with its text, process, source, level, timestamp and str field values shared, and its fields dict
        when an equal one of scalar values was seen (in place)."""
        seen = self._seen
        # one C call per value (~146k kept events per 1M real lines): setdefault adds, get(v, v) once the table is full
        put = seen.setdefault if len(seen) < MAX_SHARED else seen.get
        # str and datetime values only: they never compare equal to each other (an int would equal a float)
        t = e.text
        if t:
            e.text = put(t, t)
        t = e.process
        if t is not None:
            e.process = put(t, t)
        t = e.source
        if t is not None:
            e.source = put(t, t)
        t = e.level
        if t is not None:
            e.level = put(t, t)
        t = e.ts
        if t is not None and type(t) is datetime:
            e.ts = put(t, t)
        f = e.fields
        types = tuple(map(type, f.values()))
        key = None
        if _SHAREABLE.issuperset(types):  # scalars and str only (a list or dict value: this dict stays its own)
            key = (tuple(f.items()), types)  # by value and type: 400 is not 400.0
            got = self._fields.get(key)
            if got is not None:  # equal fields share one dict: nothing writes a kept event's fields
                e.fields = got
                return e
        for k, v in f.items():
            if type(v) is str:
                w = put(v, v)
                if w is not v:
                    f[k] = w  # an existing key: the dict does not resize while iterated
        if key is not None and len(self._fields) < MAX_SHARED:
            self._fields[key] = f
        return e

    def clear(self) -> None:
        """Forget the values seen (the kept events still share theirs)."""
        self._seen.clear()
        self._fields.clear()
