"""Finished journeys kept as columns: the ``Run.journeys`` of a long log in a fraction of the memory.

A ``Journey`` object is ~830 bytes on a real vLLM log (48 slots, its own id strings, line numbers, an alias
list), and ``analyze``/``diagnose`` keep one per request: ~170 MB per million real log lines. Here a finished
journey is a row of typed columns instead — timestamps, strings and ``sources`` dicts as small codes into
tables of the distinct values (the parser already shares one datetime per second), numbers in ``array``
columns, request ids in a byte blob, and a column that holds the same value in every row (or none at all)
as a single value — ~120 bytes a row.

Readers see a ``Sequence`` of ``JourneyRow``: a two-word view of one row whose attributes read the columns,
equal to the ``Journey`` it was made from (``materialize()`` gives that object back). A field written after the
run is built (``client.compare`` adds the client's timings) turns that one column into a list of values. The order is ``JourneyBuilder.finish``'s: by file, server run and first line, stable —
so each server run's journeys are one contiguous range (``groups()``), which the rules' per-server views
take as slices instead of lists of their own.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from array import array
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Callable, Iterator

from .journeys import Journey

#: Rows packed together (the builder hands journeys over one by one; columns grow a batch at a time).
BATCH = 4096
#: At most this many rows are also kept as row objects (~56 bytes each): passes over a table that size iterate a
#: list; a larger one makes the row objects of each pass as it goes (memory stays at the columns).
ROW_CACHE = 1 << 20

FIELDS: tuple[str, ...] = tuple(Journey.__slots__)  # type: ignore[attr-defined]
_HINTS = {n: str(Journey.__annotations__.get(n, "")) for n in FIELDS}
_INT_NONE = -(1 << 63)
_NAN = float("nan")
_BOOLS = (False, True)
#: Strings unique to almost every row: a blob, not a table of distinct values.
_BLOB_FIELDS = frozenset({"request_id", "engine_request_id", "trace_id"})
_NONE_ONLY = {type(None)}
_FLOAT_TYPES = {float, type(None)}
_INT_TYPES = {int, type(None)}
_BOOL_ONLY = {bool}
_LIST_ONLY = {list}
_STR_TYPES = {str, type(None)}
_TS_TYPES = {datetime, str, type(None)}


def _kind(name: str) -> str:
    if name == "aliases":
        return "aliases"
    if name in _BLOB_FIELDS:
        return "blob"
    h = _HINTS[name].replace(" ", "")
    if h in ("float|None", "float"):
        return "float"
    if h in ("int|None", "int"):
        return "int"
    if h == "bool":
        return "bool"
    return "table"  # str, datetime, the sources dict, anything else: codes into the distinct values


class _Column:
    """One field's values (``extend`` a batch, ``getter`` once the table is sealed)."""

    __slots__ = ("name", "kind", "n", "data", "tab", "index", "extra", "lo", "hi", "none")

    def __init__(self, name: str) -> None:
        self.name = name
        self.kind = _kind(name)
        self.n = 0
        self.data: Any = None
        """None while every value so far was None (no storage); then an array, a blob or a list."""
        self.tab: list[Any] = []
        self.index: dict[Any, int] = {}
        self.extra: Any = None
        self.lo = self.hi = 0
        """Smallest and largest value of an int column (its array's type is chosen by ``seal``)."""
        self.none: int = _INT_NONE
        """An int column's value for None."""

    # -- filling
    def extend(self, vals: list[Any], rows: list[Journey]) -> None:
        n0 = self.n
        self.n += len(vals)
        k = self.kind
        if k == "object":
            self.data.extend(vals)
            return
        types = set(map(type, vals))
        if self.data is None:
            if types == _NONE_ONLY and k != "bool" and k != "aliases":
                return  # still all None: nothing stored
            self._start(n0)
        try:
            if k == "float":
                if not types <= _FLOAT_TYPES:
                    raise TypeError  # an int, anything else: kept as the objects they are
                nones = vals.count(None)
                if nones:
                    total = sum([v for v in vals if v is not None])
                    self.data.extend([_NAN if v is None else v for v in vals])
                else:
                    total = sum(vals)
                    self.data.extend(vals)
                if total != total:
                    raise TypeError  # a NaN (or inf and -inf) among them: NaN stands for None here
                self.extra += nones
            elif k == "int":
                if not types <= _INT_TYPES:
                    raise TypeError
                nn = [v for v in vals if v is not None] if None in types else vals
                if nn:
                    lo, hi = min(nn), max(nn)
                    if lo == _INT_NONE:
                        raise OverflowError  # the sentinel itself: kept as objects
                    if self.lo == self.hi == 0 and len(self.data) == self.extra:
                        self.lo, self.hi = lo, hi
                    else:
                        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
                self.data.extend([_INT_NONE if v is None else v for v in vals] if nn is not vals else vals)
                self.extra += len(vals) - len(nn)
            elif k == "bool":
                if types != _BOOL_ONLY:
                    raise TypeError
                self.data.extend(vals)
            elif k == "blob":
                self._blob(vals, n0, rows)
            elif k == "aliases":
                self._aliases(vals, rows, n0)
            else:
                self._table(vals, types)
        except (TypeError, OverflowError, UnicodeError):
            self._to_objects(n0)
            self.data.extend(vals)

    def _start(self, n0: int) -> None:
        k = self.kind
        if k == "float":
            self.data = array("d", [_NAN]) * n0
            self.extra = n0  # rows holding None
        elif k == "int":
            self.data = array("q", [_INT_NONE]) * n0
            self.extra = n0
        elif k == "bool":
            self.data = array("b")
        elif k == "blob":
            self.data = bytearray()
            self.index = {"ends": array("q", [0]) * n0, "rid": self.index.get("rid")}  # type: ignore[dict-item]
            self.extra = set(range(n0))  # rows whose value is None
            self.tab = [set()]  # engine ids: rows stored whole (not the request id + a suffix)
        elif k == "aliases":
            self.data = array("b")
            self.extra = {}
            self.tab = [self.index.pop("engine")]
        else:
            self.tab = [None]
            self.index = {None: 0}
            self.data = array("I", [0]) * n0

    def _table(self, vals: list[Any], types: set[type]) -> None:
        index = self.index
        tab = self.tab
        # equal str / naive datetimes share a code (the same text, the same instant); any other object by identity
        # (an aware datetime equal to another in another zone prints differently; dicts are the builder's shared
        # sources dicts): identities are keyed as 1-tuples, never equal to a str or a datetime
        by_value = types <= _STR_TYPES or (types <= _TS_TYPES and all(v.tzinfo is None for v in vals if v is not None))
        keys = vals if by_value else [v if v is None or type(v) is str else (id(v),) for v in vals]
        codes = list(map(index.get, keys))
        if None in codes:  # values not seen before
            for i, c in enumerate(codes):
                if c is None:
                    key = keys[i]
                    c = index.get(key)
                    if c is None:
                        c = index[key] = len(tab)
                        tab.append(vals[i])
                    codes[i] = c
        if len(tab) > 0xFFFFFFFF:
            raise OverflowError
        self.data.extend(codes)

    def _blob(self, vals: list[Any], n0: int, rows: list[Journey]) -> None:
        ends = self.index["ends"]  # type: ignore[index]
        if not all(v is None or type(v) is str for v in vals):
            raise TypeError
        if self.name == "engine_request_id":
            # the engine's id is the API id plus "-<8 hex>": only what follows the request id is stored
            whole = self.tab[0]
            enc = []
            for i, v in enumerate(vals):
                if v is None:
                    enc.append(b"")
                    continue
                rid = rows[i].request_id
                if type(rid) is str and v.startswith(rid):
                    v = v[len(rid):]
                else:
                    whole.add(n0 + i)
                enc.append(v.encode("utf-8", "surrogatepass"))
        else:
            enc = [b"" if v is None else v.encode("utf-8", "surrogatepass") for v in vals]
        base = ends[-1] if len(ends) else 0
        ends.extend(itertools.islice(itertools.accumulate(map(len, enc), initial=base), 1, None))
        self.data += b"".join(enc)
        nones = self.extra
        for i, v in enumerate(vals):
            if v is None:
                nones.add(n0 + i)

    def _aliases(self, vals: list[Any], rows: list[Journey], n0: int) -> None:
        if set(map(type, vals)) != _LIST_ONLY:
            raise TypeError
        engs = [j.engine_request_id for j in rows]
        # the usual case: no alias, or one — the engine's id for the request
        codes = [0 if not v else 1 if len(v) == 1 and v[0] == e and type(v[0]) is str else 2 for v, e in zip(vals, engs)]
        if 2 in codes:
            extra = self.extra
            for i, c in enumerate(codes):
                if c == 2:
                    extra[n0 + i] = tuple(vals[i])
        self.data.extend(codes)

    def _to_objects(self, n0: int) -> None:
        """Fall back to a list of the values themselves (rows ``[0, n0)`` decoded from what was stored)."""
        vals = [self._get(i) for i in range(n0)]
        self.kind = "object"
        self.data = vals
        self.tab, self.index, self.extra = [], {}, None

    # -- reading
    def _get(self, i: int) -> Any:
        """Row ``i``'s value (the slow, general way; sealed tables read through ``getter``)."""
        k = self.kind
        d = self.data
        if k == "object":
            return d[i]
        if d is None:
            return None
        if k == "float":
            v = d[i]
            return None if v != v else v
        if k == "int":
            v = d[i]
            return None if v == self.none else v
        if k == "bool":
            return _BOOLS[d[i]]
        if k == "blob":
            if i in self.extra:
                return None
            ends = self.index["ends"]  # type: ignore[index]
            v = bytes(d[ends[i - 1] if i else 0:ends[i]]).decode("utf-8", "surrogatepass")
            if self.name == "engine_request_id" and i not in self.tab[0]:
                v = self.index["rid"]._get(i) + v  # type: ignore[attr-defined]
            return v
        if k == "aliases":
            code = d[i]
            return [] if code == 0 else [self.tab[0]._get(i)] if code == 1 else list(self.extra[i])
        return self.tab[d[i]]

    def seal(self) -> None:
        """Shrink what was over-allocated, drop the build-time index, and store an int column in the smallest
        array type its values fit (the type's lowest value standing for None)."""
        if self.kind == "table":
            self.index = {}
            if self.data is not None and len(self.tab) <= 0xFFFF:
                self.data = array("B" if len(self.tab) <= 0xFF else "H", self.data)
        if self.kind == "blob" and self.data is not None:
            self.data = bytes(self.data)
        if self.kind == "int" and self.data is not None:
            d = self.data
            for tc, bits in (("b", 8), ("h", 16), ("i", 32)):
                low = -(1 << (bits - 1))
                if array(tc).itemsize * 8 == bits and low < self.lo and self.hi < -low:
                    self.data = array(tc, (low if v == _INT_NONE else v for v in d)) if self.extra else array(tc, d)
                    self.none = low
                    break

    def freeze(self, value: Any) -> None:
        """Every row holds ``value``: keep it alone."""
        self.kind = "object"
        self.data = None
        self.tab, self.index, self.extra = [value], {}, None


class JourneyRow:
    """A read-only view of one finished journey in a ``JourneyTable`` (attributes as on ``Journey``)."""

    __slots__ = ("_i",)
    __hash__ = None  # type: ignore[assignment]  # as Journey (a dataclass with eq): not hashable
    _table: "JourneyTable"
    # ``dataclasses.replace(row, …)`` / ``asdict(row)`` work as on a Journey: the fields are Journey's, and calling
    # the row class (what ``replace`` does) makes a Journey
    __dataclass_fields__ = Journey.__dataclass_fields__  # type: ignore[attr-defined]
    __dataclass_params__ = Journey.__dataclass_params__  # type: ignore[attr-defined]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:  # noqa: D102
        return Journey(*args, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        # a write (client.compare adds the client's timings): that field's column becomes a list of values
        self._table._set(self._i, name, value)

    def materialize(self) -> Journey:
        """The journey as a ``Journey`` object of its own (a copy: changing it changes nothing here)."""
        return self._table._materialize(self)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (as ``Journey.to_dict``)."""
        return self.materialize().to_dict()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in FIELDS)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (JourneyRow, Journey)):
            return self._values() == tuple(getattr(other, n) for n in FIELDS)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(self.materialize())

    def __reduce__(self) -> Any:
        return (_identity, (self.materialize(),))


_SET_I = JourneyRow.__dict__["_i"].__set__  # the slot itself (JourneyRow.__setattr__ is for the fields)


def _identity(x: Any) -> Any:
    return x


class JourneyTable(Sequence):  # type: ignore[type-arg]
    """Finished journeys as columns (``append`` while building, ``seal`` once, then read as a sequence)."""

    def __init__(self) -> None:
        self._cols = [_Column(n) for n in FIELDS]
        self._cols[FIELDS.index("aliases")].index["engine"] = self._cols[FIELDS.index("engine_request_id")]
        self._cols[FIELDS.index("engine_request_id")].index["rid"] = self._cols[FIELDS.index("request_id")]
        self._get = [operator.attrgetter(n) for n in FIELDS]
        self._pending: list[Journey] = []
        self._n = 0
        self._runs: list[list[Any]] = []
        """[file, server, first physical row, end] of consecutive rows of one server run, in emission order."""
        self._order: array | None = None
        """Physical row of each position (sorted by file, server run, first line); set by ``seal``."""
        self._groups: list[tuple[str, int, int, int]] = []
        self._tail: list[Any] = []
        """Journeys appended after sealing (``list.append`` semantics: at the end, in no particular order)."""
        self._rowlist: list[JourneyRow] | None = None
        self._cls: type[JourneyRow] | None = None
        self._build: Callable[[JourneyRow], Journey] | None = None

    # -- building
    def append(self, j: Any) -> None:
        """Add a finished journey (it must not change afterwards; the object itself is not kept). Once sealed, as
        ``list.append``: kept as it is, after the rows."""
        if self._order is not None:
            self._tail.append(j)
            return
        self._pending.append(j)
        if len(self._pending) >= BATCH:
            self._pack()

    def _pack(self) -> None:
        rows = self._pending
        if not rows:
            return
        got = {}
        for col, get in zip(self._cols, self._get):
            vals = got[col.name] = list(map(get, rows))
            col.extend(vals, rows)
        runs = self._runs
        cur = runs[-1] if runs else None
        p = self._n
        for (f, s), grp in itertools.groupby(zip(got["file"], got["server"])):
            n = len(list(grp))
            if cur is None or cur[0] != f or cur[1] != s:
                cur = [f, s, p, p]
                runs.append(cur)
            p += n
            cur[3] = p
        self._n = p
        self._pending = []

    def seal(self) -> "JourneyTable":
        """No more rows: order them as ``JourneyBuilder.finish`` does and prepare the row views."""
        if self._order is not None:
            return self
        self._pack()
        by_key: dict[tuple[Any, Any], list[tuple[int, int]]] = {}
        for f, s, a, b in self._runs:
            by_key.setdefault((f, s), []).append((a, b))
        self._runs = []
        try:
            keys = sorted(by_key)
        except TypeError:  # a server that is not an int: the builder's sort would have failed too
            keys = list(by_key)
        first = self._cols[FIELDS.index("first_line")]
        fl: Callable[[int], Any] = (first.data.__getitem__ if first.data is not None and first.kind != "object"
                                    else (lambda i: first._get(i)))
        none_first = first.data is None
        order = array("I" if self._n < (1 << 32) else "Q")
        groups = []
        for key in keys:
            rows: list[int] = []
            for a, b in by_key[key]:
                rows.extend(range(a, b))
            if not none_first and any(fl(x) > fl(y) for x, y in zip(rows, rows[1:])):
                rows.sort(key=fl)  # stable: equal first lines keep their emission order
            start = len(order)
            order.extend(rows)
            groups.append((key[0], key[1], start, len(order)))
        self._order = order
        self._groups = groups
        for c in self._cols:
            c.seal()
        self._cls = self._row_class()
        self._build = self._builder()
        return self

    def _getter(self, c: _Column) -> Any:
        """The row class's attribute for column ``c``: a plain value when every row holds the same, else a
        property reading the column."""
        d = c.data
        k = c.kind
        n = self._n
        if k != "object" and d is None:
            return None
        if k == "object":
            if n and all(v is d[0] for v in d):
                return d[0]
            return property(lambda s, d=d: d[s._i])
        if k == "float":
            if not c.extra:  # no None row
                if d.count(d[0]) == n:
                    return d[0]
                return property(lambda s, d=d: d[s._i])

            def fget(s: JourneyRow, d: array = d) -> Any:
                v = d[s._i]
                return None if v != v else v
            return property(fget)
        if k == "int":
            if d.count(d[0]) == n:
                return None if d[0] == c.none else d[0]
            if not c.extra:
                return property(lambda s, d=d: d[s._i])

            def iget(s: JourneyRow, d: array = d, none: int = c.none) -> Any:
                v = d[s._i]
                return None if v == none else v
            return property(iget)
        if k == "bool":
            if n and d.count(d[0]) == n:
                return _BOOLS[d[0]]
            return property(lambda s, d=d: _BOOLS[d[s._i]])
        if k == "table":
            tab = c.tab
            if len(tab) == 2 and d.count(1) == n:
                return tab[1]  # one value in every row (file, seen_in, …)
            return property(lambda s, d=d, tab=tab: tab[d[s._i]])
        if k == "blob":
            ends = c.index["ends"]
            nones = c.extra

            if c.name == "engine_request_id":
                whole = c.tab[0]

                def eget(s: JourneyRow, d: bytes = d, ends: array = ends, nones: set[int] = nones,
                         whole: set[int] = whole) -> Any:
                    i = s._i
                    if nones and i in nones:
                        return None
                    v = d[ends[i - 1] if i else 0:ends[i]].decode("utf-8", "surrogatepass")
                    return v if whole and i in whole else s.request_id + v
                return property(eget)

            def bget(s: JourneyRow, d: bytes = d, ends: array = ends, nones: set[int] = nones) -> Any:
                i = s._i
                if nones and i in nones:
                    return None
                return d[ends[i - 1] if i else 0:ends[i]].decode("utf-8", "surrogatepass")
            return property(bget)
        if k == "aliases":
            extra = c.extra

            def aget(s: JourneyRow, d: array = d, extra: dict[int, tuple[str, ...]] = extra) -> Any:
                code = d[s._i]
                if code == 0:
                    return []
                if code == 1:
                    return [s.engine_request_id]
                return list(extra[s._i])
            return property(aget)
        raise AssertionError(k)

    def _row_class(self) -> type[JourneyRow]:
        ns: dict[str, Any] = {"__slots__": (), "_table": self}
        for c in self._cols:
            ns[c.name] = self._getter(c)
        for c in self._cols:
            if not isinstance(ns[c.name], property) and c.kind != "aliases":
                c.freeze(ns[c.name])  # the same in every row: the class holds it, the column nothing
        return type("JourneyRow", (JourneyRow,), ns)

    def _builder(self) -> Callable[[JourneyRow], Journey]:
        names = [n for n in FIELDS if n != "aliases"]
        body = "\n".join(f"    j.{n} = r.{n}" for n in names)
        src = f"def build(r):\n    j = new(Journey)\n{body}\n    j.aliases = r.aliases\n    return j\n"
        ns: dict[str, Any] = {"new": object.__new__, "Journey": Journey}
        exec(compile(src, "<journey-row>", "exec"), ns)  # noqa: S102 - generated from the class's own slots
        return ns["build"]  # type: ignore[no-any-return]

    def _materialize(self, r: JourneyRow) -> Journey:
        return self._build(r)  # type: ignore[misc]

    # -- reading
    def _sealed(self) -> array:
        if self._order is None:
            self.seal()
        return self._order  # type: ignore[return-value]

    def _row(self, phys: int) -> JourneyRow:
        r = object.__new__(self._cls)  # type: ignore[arg-type]
        _SET_I(r, phys)
        return r

    def _set(self, phys: int, name: str, value: Any) -> None:
        cls = self._cls
        if cls is None or name not in FIELDS:
            raise AttributeError(f"'JourneyRow' object has no attribute {name!r}")
        c = self._cols[FIELDS.index(name)]
        if c.kind != "written":
            attr = cls.__dict__[name]
            if isinstance(attr, property):
                get = attr.fget
                vals = [get(self._row(i)) for i in range(self._n)]
            else:
                vals = [attr] * self._n
            c.kind, c.data, c.tab, c.index, c.extra = "written", vals, [], {}, None
            setattr(cls, name, property(lambda s, d=vals: d[s._i]))
        c.data[phys] = value

    def __len__(self) -> int:
        return self._n + len(self._pending) + len(self._tail)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __getitem__(self, i: Any) -> Any:
        order = self._sealed()
        n = len(order)
        if isinstance(i, slice):
            a, b, step = i.indices(len(self))
            if step == 1 and b <= n:
                return JourneyRange(self, a, max(a, b))
            return [self[k] for k in range(a, b, step)]
        if i < 0:
            i += len(self)
        if i >= n:
            return self._tail[i - n]
        if i < 0:
            raise IndexError("journey index out of range")
        rl = self._rows()
        return rl[i] if rl is not None else self._row(order[i])

    def __iter__(self) -> Iterator[Any]:
        order = self._sealed()
        rl = self._rows()
        it = iter(rl) if rl is not None else self._iter(order)
        return itertools.chain(it, self._tail) if self._tail else it

    def _rows(self) -> list[JourneyRow] | None:
        """The rows as objects, made once, when there are at most ``ROW_CACHE`` of them (a pass over them is then
        a list's; above that each pass makes its own and memory stays at the columns)."""
        rl = self._rowlist
        if rl is None and self._n <= ROW_CACHE:
            rl = self._rowlist = list(self._iter(self._order))
        return rl

    def _iter(self, phys: Any) -> Iterator[JourneyRow]:
        cls = self._cls
        new = object.__new__
        set_i = _SET_I
        for i in phys:
            r = new(cls)
            set_i(r, i)
            yield r

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, Sequence)) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<JourneyTable of {len(self):,} journeys>"

    def groups(self) -> list[tuple[str, int, int, int]] | None:
        """(file, server run index, start, end) of each server run's journeys, in order (``self[start:end]``);
        None once journeys were appended after sealing (they are in no group)."""
        self._sealed()
        return None if self._tail else list(self._groups)

    def copies(self) -> list[Journey]:
        """The rows so far as ``Journey`` objects, in the order they were added (a table still being built)."""
        out = []
        cols = self._cols
        for i in range(self._n):
            j = object.__new__(Journey)
            for c in cols:
                setattr(j, c.name, c._get(i))
            out.append(j)
        return out + list(self._pending)

    def materialize(self) -> list[Journey]:
        """Every journey as a ``Journey`` object of its own, in order (for code that changes them)."""
        b = self._build if self._order is not None else None
        if b is None:
            self.seal()
            b = self._build
        return [b(r) for r in self]  # type: ignore[misc]


class JourneyRange(Sequence):  # type: ignore[type-arg]
    """Positions ``[start, end)`` of a ``JourneyTable`` (a server run's or a file's journeys)."""

    __slots__ = ("table", "start", "end", "_by_request")

    def __init__(self, table: JourneyTable, start: int, end: int) -> None:
        self.table = table
        self.start = start
        self.end = end
        self._by_request: RequestIndex | None = None

    def __len__(self) -> int:
        return self.end - self.start

    def __bool__(self) -> bool:
        return self.end > self.start

    def __iter__(self) -> Iterator[JourneyRow]:
        t = self.table
        rl = t._rows()
        if rl is not None:
            return iter(rl[self.start:self.end])
        return t._iter(t._sealed()[self.start:self.end])

    def __getitem__(self, i: Any) -> Any:
        n = self.end - self.start
        if isinstance(i, slice):
            a, b, step = i.indices(n)
            if step == 1:
                return JourneyRange(self.table, self.start + a, self.start + max(a, b))
            return [self.table[self.start + k] for k in range(a, b, step)]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("journey index out of range")
        return self.table[self.start + i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, Sequence)) and not isinstance(other, (str, bytes)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<journeys {self.start:,}–{self.end:,} of a JourneyTable>"

    def by_request(self) -> "RequestIndex":
        """The range's journeys by request id (the last one of an id wins), as ``{j.request_id: j}`` would."""
        if self._by_request is None:
            self._by_request = RequestIndex(self)
        return self._by_request


class RequestIndex(Mapping):  # type: ignore[type-arg]
    """``get(request_id)`` over a ``JourneyRange`` in ~12 bytes a row (hashes sorted, rows decoded on a hit); a
    ``Mapping`` equal to ``{j.request_id: j for j in rng}`` (iterating it builds that dict)."""

    __slots__ = ("_rng", "_hashes", "_pos")

    def __init__(self, rng: JourneyRange) -> None:
        self._rng = rng
        hashes = array("q", map(hash, (r.request_id for r in rng)))
        buckets: list[array] = [array("I" if len(rng) < (1 << 32) else "Q") for _ in range(256)]
        for p, h in enumerate(hashes):
            buckets[h & 255].append(p)
        pos = array(buckets[0].typecode)
        for bk in buckets:
            pos.extend(sorted(bk, key=hashes.__getitem__))  # stable: equal hashes in position order
        self._pos = pos
        self._hashes = array("q", map(hashes.__getitem__, pos))  # sorted by (hash & 255, hash): see _key

    def _key(self, h: int) -> tuple[int, int]:
        return (h & 255, h)

    def get(self, rid: Any, default: Any = None) -> Any:
        """The last journey of the range with ``request_id == rid``, else ``default``."""
        if not isinstance(rid, str):
            return default
        h = hash(rid)
        hs = self._hashes
        # entries are grouped by h & 255 (bucket order), sorted by hash inside a bucket
        lo = bisect.bisect_left(hs, (h & 255, h), key=self._key)
        hi = bisect.bisect_right(hs, (h & 255, h), lo=lo, key=self._key)
        best = None
        for k in range(lo, hi):
            p = self._pos[k]
            r = self._rng[p]
            if r.request_id == rid and (best is None or p > best[0]):
                best = (p, r)
        return default if best is None else best[1]

    def __getitem__(self, rid: str) -> Any:
        r = self.get(rid, _MISSING)
        if r is _MISSING:
            raise KeyError(rid)
        return r

    def __contains__(self, rid: object) -> bool:
        return self.get(rid, _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[str]:
        return iter({r.request_id: r for r in self._rng})

    def __len__(self) -> int:
        return len({r.request_id for r in self._rng})


_MISSING = object()
