"""The incremental line parser: physical lines → typed ``Event`` objects.

One ``LineParser`` per input file keeps the state that crosses lines (the open multi-line record,
the last timestamp, the year), so the same object serves a whole file read in batches and a file
followed live. Every physical line ends up in exactly one event.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from typing import Any, Iterable

import orjson

from ..ingest import decode_lines
from ..model import Event
from . import engine, failures, handbook, raw, requests, runtime, startup, uvicorn  # noqa: F401  (register patterns)
from . import fast
from .fields import dumps_safe
from .envelope import (ANSI, RAY_ACTOR, CONSOLE, DOCKER, EXC_LINE, FASTCHAT, LOGURU, JOURNAL, K8S_PREFIX, K8S_TS, PROC, PYLOG, RAY_REPEAT, TORCH_RANK, UVICORN, VLLM,
                       is_tb_continuation)
from .registry import MESSAGES, RAW, LinePattern
from .templates import template

MAX_TEXT = 65536  # characters of a record's text kept in the event (longer lines are truncated)
_LEVEL_NORM = {"WARN": "WARNING", "FATAL": "CRITICAL"}
_JSON_TS_KEYS = ("asctime", "timestamp", "time", "@timestamp", "ts")
_JSON_LEVEL_KEYS = ("levelname", "level", "severity")
_JSON_MSG_KEYS = ("message", "msg")


def _first_str(obj: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    """The value of the first of ``keys`` whose value is a string."""
    for k in keys:
        v = obj.get(k)
        if isinstance(v, str):
            return v
    return None


class _Rec:
    """A record under construction (possibly multi-line)."""

    __slots__ = (
        "line", "line_end", "ts", "ts_inherited", "level", "process", "source", "msg", "texts",
        "tb", "key", "cont", "exc", "extra_msgs", "env", "fields", "repeated", "raw_cont",
    )

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.tb = False
        self.cont = False
        self.env = False
        self.key: tuple[Any, ...] | None = None
        self.ts_inherited = False
        self.exc: list[tuple[str, str]] = []
        self.extra_msgs: list[str] = []
        self.fields: dict[str, Any] | None = None
        self.repeated = 0
        self.raw_cont = 0  # which raw lines may continue this record: 1 warning source, 2 nanobind, 3 after "…:", 4 C++ stack, 5 asyncio handle


class LineParser:
    """Parse the physical lines of one input, in order, into events (call ``feed`` then ``close``)."""

    def __init__(self, file: str, year: int | None = None, *, keep_text: bool = True) -> None:
        self.file = file
        self.year = year if year is not None else datetime.now().year
        self._last_month = 0
        self._ts_cache: dict[tuple[str, ...], datetime] = {}
        self.last_ts: datetime | None = None
        self._cur: _Rec | None = None
        self._prev_cr = False
        self.kinds: Counter[str] = Counter()
        self.unknown_templates: Counter[str] = Counter()
        self._template_examples: dict[str, int] = {}
        self.lines = 0
        self.keep_text = keep_text
        self._end_hint = 0
        self._fkey: str | None = None
        self._fts: datetime | None = None
        self._fiso = "null"
        self._mode = 0
        self._fjson_b = _jstr(file).encode()  # the file name as JSON, for the compiled scanner
        self._ltj = b"null"
        self._ltj_of: datetime | None = None
        self.covered = 0
        """Physical lines that ended up in a finished event (== ``lines`` after ``close``)."""

    # ------------------------------------------------------------------ public
    def end_hint(self, end_month: int) -> None:
        """The year came from the file's mtime (the log's end): a log that starts in a later month
        than 'now' began the year before (checked at the first timestamp)."""
        self._end_hint = end_month

    def feed(self, lines: Iterable[tuple[int, str]]) -> list[Event]:
        """Parse a batch of ``(line_number, text)``; return the events completed so far."""
        out: list[Any] = []
        self._run(lines, out, 0)
        return out

    def feed_lines(self, first: int, lines: list[str]) -> list[Event]:
        """``feed`` for a list of consecutive lines numbered from ``first`` (the compiled fast path)."""
        out: list[Any] = []
        self._block(first, lines, out, 0)
        return out

    def feed_jsonl(self, lines: Iterable[tuple[int, str]]) -> str:
        """Parse a batch; return the completed events as JSON lines (``Event.to_dict`` shape), fast."""
        out: list[Any] = []
        self._run(lines, out, 1)
        return "".join(out)

    def feed_count(self, lines: Iterable[tuple[int, str]]) -> None:
        """Parse a batch only to count kinds and unknown templates (``--stats``)."""
        self._run(lines, None, 2)

    def feed_lines_jsonl(self, first: int, lines: list[str]) -> str:
        """``feed_jsonl`` for a list of consecutive lines numbered from ``first`` (the compiled fast path)."""
        return self.feed_lines_jsonb(first, lines).decode()

    def feed_lines_jsonb(self, first: int, lines: list[str]) -> bytes:
        """``feed_lines_jsonl`` as UTF-8 bytes (what a writer wants: no decode/encode round trip)."""
        out: list[Any] = []
        self._block(first, lines, out, 1)
        return b"".join(out)

    def feed_lines_count(self, first: int, lines: list[str]) -> None:
        """``feed_count`` for a list of consecutive lines numbered from ``first`` (the compiled fast path)."""
        self._block(first, lines, None, 2)

    def feed_raw_jsonb(self, first: int, body: bytes) -> tuple[bytes, int]:
        """JSON lines of ``body`` — consecutive lines joined by ``\\n``, no final newline, none over-long —
        numbered from ``first``; and how many of its lines had invalid UTF-8 (decoded with replacement)."""
        out: list[bytes] = []
        bad = self._block(first, body, out, 1)
        return b"".join(out), bad

    def feed_raw_pieces(self, first: int, body: bytes, out: list[bytes]) -> int:
        """``feed_raw_jsonb`` appending the output in pieces to ``out`` (no join: for writers)."""
        return self._block(first, body, out, 1)

    def feed_raw_count(self, first: int, body: bytes) -> int:
        """``feed_raw_jsonb`` counting only; returns the lines with invalid UTF-8."""
        return self._block(first, body, None, 2)

    def _block(self, first: int, src: list[str] | bytes, out: list[Any] | None, mode: int) -> int:
        """Alternate between the compiled scanner (runs of lines it vouches for) and ``_run`` (the rest).

        ``src``: a list of lines, or bytes of ``\\n``-joined lines (decoded here only where Python parses
        them). Returns the number of lines with invalid UTF-8 (bytes input only)."""
        is_bytes = isinstance(src, bytes)
        scan = fast.scan
        if scan is None:
            lines, bad = decode_lines(src) if is_bytes else (src, 0)  # type: ignore[arg-type]
            self._run_b(zip(range(first, first + len(lines)), lines), out, mode)
            return bad
        table, kinds_of = fast.TABLE, fast.KINDS
        end = len(src) + 1 if is_bytes else len(src)  # the cursor past the last line
        cur = 0
        lineno = first
        bad = 0
        while cur < end:
            nxt = -1
            if not self._end_hint:
                lt = self.last_ts
                if lt is not self._ltj_of:
                    self._ltj = b"null" if lt is None else ('"' + lt.isoformat() + '"').encode()
                    self._ltj_of = lt
                chunk, stop, done, nxt, counts, lts, _, hits, prev_cr = scan(
                    table, src, cur, lineno, self.year, self._last_month, self._ltj, self._fjson_b, self.keep_text, mode,
                    Event, self.last_ts, self.file, self._pending(), self._prev_cr)
                if hits:
                    self._count_hits(hits)
                if done:
                    c = self._cur
                    if c is not None:
                        self._mode = mode
                        ev = self._finish(c)
                        self._cur = None
                        if out is not None:
                            out.append(ev.encode() if mode == 1 else ev)
                    if out is not None:
                        if mode == 1:
                            out.append(chunk)
                        else:
                            out.extend(chunk)
                    kinds = self.kinds
                    for k, n in enumerate(counts):
                        if n:
                            kinds[kinds_of[k]] += n
                    self.lines += done
                    self.covered += done
                    self._prev_cr = bool(prev_cr)
                    if lts is not None:
                        self._ts(*[f"{v:02d}" for v in lts])
                    cur = stop
                    lineno += done
                    if cur >= end:
                        break
            # the Python state machine takes [cur, nxt): at least the line the scanner stopped at
            if is_bytes:
                if nxt <= cur:
                    nl = src.find(b"\n", cur)  # type: ignore[union-attr]
                    nxt = end if nl < 0 else nl + 1
                seg = src[cur:nxt - 1] if nxt < end else src[cur:]
                lines, b = decode_lines(seg)  # type: ignore[arg-type]
                bad += b
            else:
                nxt = min(max(nxt, cur + 1), end)
                lines = src[cur:nxt]  # type: ignore[assignment]
            self._run_b(zip(range(lineno, lineno + len(lines)), lines), out, mode)
            lineno += len(lines)
            cur = nxt
        return bad

    def _pending(self) -> tuple[Any, ...] | None:
        """What the compiled scanner needs to know of the open record to tell whether a line continues it."""
        c = self._cur
        if c is None:
            return None
        if c.env:
            k = c.key
            return (1, k[0], k[1], int(k[2]), int(k[3]), int(k[4]), int(k[5]), k[6], k[7] is None, c.tb, bool(c.exc),
                    c.cont, c.raw_cont)
        shape = 2 if c.fields and c.fields.get("_uvicorn") else 3
        return (shape, c.process, c.level, 0, 0, 0, 0, None, True, c.tb, bool(c.exc), c.cont, c.raw_cont)

    def _count_hits(self, hits: list[tuple[str, str | None, int, int]]) -> None:
        """Counters of the records the scanner classified (kind, unknown template and its first line)."""
        kinds = self.kinds
        for kind, tkey, n, line in sorted(hits, key=lambda h: h[3]):
            kinds[kind] += n
            if tkey is not None:
                self.unknown_templates[tkey] += n
                self._template_examples.setdefault(tkey, line)

    def _run_b(self, lines: Iterable[tuple[int, str]], out: list[Any] | None, mode: int) -> None:
        """``_run`` appending one UTF-8 chunk to ``out`` (mode 1 of ``_block``; events or nothing otherwise)."""
        if out is None or mode == 0:
            self._run(lines, out, mode)
            return
        tmp: list[Any] = []
        self._run(lines, tmp, mode)
        if tmp:
            out.append("".join(tmp).encode())

    def close_jsonl(self) -> str:
        """``close`` for ``feed_jsonl``."""
        return "".join(_jsonl(e) for e in self.close())

    def close_count(self) -> None:
        """``close`` for ``feed_count``."""
        self.close()

    def _run(self, lines: Iterable[tuple[int, str]], out: list[Any] | None, mode: int) -> None:
        """The hot loop. mode 0: Event objects into ``out``; 1: JSON strings; 2: count only."""
        self._mode = mode
        if mode != 2:
            emit = out.append  # type: ignore[union-attr]  (_finish returns an Event or a JSON line)
        else:
            def emit(ev: Event) -> None:
                pass
        vllm_match = VLLM.match
        fast = _FAST_DECODE.match
        app = out.append if out is not None else None
        keep = self.keep_text
        file = self.file
        fjson = _jstr(file)
        n_fast = 0
        n = 0
        kvmap = _KV_JSON
        fiso = self._fiso
        rest = _FAST_REST.match
        psrc = ""
        pre: str | None = None  # envelope + "Decode step " of the last fast line (valid only within a run of them)
        plen = 0
        jmid = ""
        for lineno, text in lines:
            n += 1
            if pre is not None and text.startswith(pre) and len(text) <= MAX_TEXT:
                # same second, same source as the previous Decode line: match only the tail
                fr = rest(text, plen)
                if fr is not None:
                    n_fast += 1
                    if mode == 1:
                        step, rid, bs, kv = fr.groups()
                        app(
                            f'{{"file":{fjson},"line":{lineno},"line_end":{lineno}{jmid}{rid}",'
                            f'"fields":{{"step":{step},"batch_size":{bs},"kv_cache_usage":{kvmap[kv]}}},'
                            f'"text":"{text if keep else ""}"}}\n'
                        )
                    elif mode == 0:
                        step, rid, bs, kv = fr.groups()
                        app(Event(
                            file, lineno, lineno, self._fts, "INFO", None, psrc, "decode_step", rid,
                            {"step": int(step), "batch_size": int(bs), "kv_cache_usage": float(kv) / 100.0},
                            text if keep else "", "handbook.decode_step", None, False,
                        ))
                    continue
            if text[:1] == "I":
                fm = fast(text)
                if fm is not None and not self._prev_cr and len(text) <= MAX_TEXT:  # longer: _finish truncates the text
                    # the dominant handbook line: one regex, no record, JSON by one f-string. It is finished at
                    # once: a Decode line is never the head of a multi-line record (the general path would only
                    # attach an indented or Traceback line of the same source and second to it)
                    if self._cur is not None:
                        emit(self._finish(self._cur))
                        self._cur = None
                    if fm[1] != self._fkey:
                        tkey = fm[1]
                        fts = self._ts(tkey[:2], tkey[3:5], tkey[6:8], tkey[9:11], tkey[12:14])
                        self._fkey = tkey
                        self._fts = fts
                        self._fiso = fiso = '"' + fts.isoformat() + '"' if fts is not None else "null"
                    n_fast += 1
                    plen = fm.start(3)
                    pre = text[:plen]
                    psrc = fm[2]
                    jmid = f',"ts":{fiso},"level":"INFO","process":null,"source":"{psrc}","kind":"decode_step","request_id":"'
                    if mode == 1:
                        _, src, step, rid, bs, kv = fm.groups()
                        app(
                            f'{{"file":{fjson},"line":{lineno},"line_end":{lineno},"ts":{fiso},"level":"INFO",'
                            f'"process":null,"source":"{src}","kind":"decode_step","request_id":"{rid}",'
                            f'"fields":{{"step":{step},"batch_size":{bs},"kv_cache_usage":{kvmap[kv]}}},'
                            f'"text":"{text if keep else ""}"}}\n'
                        )
                    elif mode == 0:
                        app(Event(
                            file, lineno, lineno, self._fts, "INFO", None, fm[2], "decode_step", fm[4],
                            {"step": int(fm[3]), "batch_size": int(fm[5]), "kv_cache_usage": float(fm[6]) / 100.0},
                            text if keep else "", "handbook.decode_step", None, False,
                        ))
                    continue
            pre = None
            cr = False
            if text.endswith("\r"):
                cr = True
                text = text.rstrip("\r")
            s = text
            if "\r" in s:  # tqdm-style in-place updates: the visible state is the last segment
                parts = [p for p in s.split("\r") if p.strip()]
                s = parts[-1] if parts else ""
            if "\x1b" in s:
                s = ANSI.sub("", s)
            wrap_ts = None
            jproc = None
            c0 = s[:1]
            if c0.isupper() and len(s) > 20 and s[3] == " " and s[9] == ":" and s[12] == ":":
                m = JOURNAL.match(s)
                if m:
                    if m.group(2):  # the unit's pid: what tells apart two processes' tracebacks without a vLLM tag
                        jproc = f"{m.group(1)} pid={m.group(2)}"
                    s = s[m.end():]
                    c0 = s[:1]
            if s[1:4] == " | " or (c0.isdigit() and s[4:5] == "-" and s[23:26] == " | " or s[19:22] == " | "):
                m = CONSOLE.match(s)
                if m:
                    wrap_ts = m.group(1).replace(" ", "T")
                    s = s[m.end():]
                    c0 = s[:1]
            if c0 == "[" and s.startswith("[pod/"):
                m = K8S_PREFIX.match(s)
                if m:
                    s = s[m.end():]
                    c0 = s[:1]
            if c0.isdigit() and len(s) > 20 and s[4] == "-" and s[10] == "T":
                m = K8S_TS.match(s)
                if m:
                    wrap_ts = m.group(1)
                    s = s[m.end():]
                    c0 = s[:1]
            if c0.isdigit() and len(s) > 24 and s[4] == "-" and s[10] == " " and s[19:22] == " | ":
                m = FASTCHAT.match(s)
                if m:
                    inner = s[m.end():]
                    if vllm_match(inner) or UVICORN.match(inner) or PROC.match(inner):
                        # vLLM's own line, captured by FastChat's stdout/stderr logger: read it as vLLM wrote it
                        wrap_ts = m.group(1).replace(" ", "T")
                        s = inner
                    else:
                        # FastChat's own record, or a raw line (a traceback) on stderr: the shape of Python logging's
                        # "%(asctime)s - %(name)s - %(levelname)s - %(message)s" (PYLOG below), the logger as source
                        s = f"{m.group(1)} - {m.group(3)} - {m.group(2)} - {inner}"
                    c0 = s[:1]
            if c0.isdigit() and s[19:20] == "." and s[4:5] == "-" and " | " in s[20:30]:
                m = LOGURU.match(s)
                if m:  # loguru: read as Python logging's "asctime - name - level - msg" (PYLOG below), logger as source
                    lvl = {"TRACE": "DEBUG", "SUCCESS": "INFO"}.get(m.group(3), m.group(3))
                    s = f"{m.group(1)}.{m.group(2)} - {m.group(4)} - {lvl} - {s[m.end():]}"
                    c0 = s[:1]
            if " | " in s[:72] and c0 != "(" and c0 != "[":
                m = DOCKER.match(s)
                if m and not VLLM.match(s) and not s.startswith(("INFO", "WARN", "ERROR", "DEBUG", "CRIT")):
                    s = s[m.end():]
                    c0 = s[:1]
            process = None
            if c0 == "(":
                m = PROC.match(s) or RAY_ACTOR.match(s)
                if m:
                    process = m.group(1)
                    s = s[m.end():]
                    c0 = s[:1]
                    if c0 == "(":  # a Ray actor's tag, then vLLM's own: the inner one names the process
                        m = PROC.match(s)
                        if m:
                            process = m.group(1)
                            s = s[m.end():]
                            c0 = s[:1]
            if process is None and jproc is not None:
                process = jproc
            if c0 == "[" and s[1:5] == "rank":
                m = TORCH_RANK.match(s)
                if m:
                    if process is None:
                        process = "rank" + m.group(1)
                    s = s[m.end():]
                    c0 = s[:1]
            repeated = 0
            if s.endswith("cluster]"):
                m = RAY_REPEAT.search(s)
                if m:
                    repeated = int(m.group(1))
                    s = s[: m.start()]
            m = vllm_match(s) if c0 in "DIWECF" else None
            g = m.groups() if m is not None else None
            if g is None and c0 in "12" and s[4:5] == "-" and " - " in s[:80]:
                mp = PYLOG.match(s)
                if mp is not None:  # "%(asctime)s - %(name)s - %(levelname)s - %(message)s": the logger names the source
                    yy, mo, dd, hh, mi, ss, frac, name, level, msg = mp.groups()
                    g = (level, yy, mo, dd, hh, mi, ss, frac, name, msg)
            if g is not None:
                level, yy, mo, dd, hh, mi, ss, frac, src, msg = g
                if level in _LEVEL_NORM:
                    level = _LEVEL_NORM[level]
                if yy is not None:  # a dated prefix (logging-config --format text) states the year
                    if int(yy) != self.year:
                        self._set_year(int(yy))
                    self._last_month = int(mo)
                    self._end_hint = 0
                ts = self._ts(mo, dd, hh, mi, ss)
                if frac is not None and ts is not None:
                    ts = ts.replace(microsecond=int((frac + "00000")[:6]))
                    self.last_ts = ts
                elif wrap_ts is not None and ts is not None:
                    ts = _finer(ts, wrap_ts)  # kubectl/docker -t stamp: its fraction, when it is the same second
                key = (process, level, mo, hh, mi, ss, src, frac)
                cur = self._cur
                if cur is not None and cur.env and cur.key[0] == process and (
                    (self._prev_cr and cur.key == key)
                    or (cur.key[1] == level and cur.key[6] == src and (cur.tb or msg.startswith("Traceback")) and is_tb_continuation(msg))
                    # a record printed without \r: indented lines, or the rest of a multi-line exception message
                    or (cur.key == key and (msg[:1] in (" ", "\t") or (cur.tb and cur.exc and MESSAGES.match(msg) is None)))
                ):
                    self._continue(cur, lineno, text, msg)
                    self._prev_cr = cr
                    continue
                if cur is not None:
                    emit(self._finish(cur))
                r = _Rec()
                r.line = r.line_end = lineno
                r.ts = ts
                r.ts_inherited = False
                r.level = level
                r.process = process
                r.source = src
                r.msg = msg
                r.texts.append(text)
                r.key = key
                r.env = True
                r.repeated = repeated
                if msg.startswith("Traceback") or msg.endswith("Traceback (most recent call last):"):
                    r.tb = True  # also V1 0.7–0.8's "EngineCore hit an exception: Traceback (most recent call last):"
                elif msg[-1:] == ":":
                    r.raw_cont = 3
                elif msg.startswith("Exception in callback "):
                    r.raw_cont = 5  # asyncio: "handle: <Handle …>" then the traceback
                    r.cont = True
                self._cur = r
                self._prev_cr = cr
                continue
            # ---- no vLLM envelope
            cur = self._cur
            if c0 == "{" and s.endswith("}"):
                r = self._json(lineno, text, s, process)
                if r is not None:
                    if cur is not None:
                        emit(self._finish(cur))
                    self._cur = r
                    self._prev_cr = False
                    continue
            if cur is not None and cur.raw_cont and (process is None or cur.process == process) and self._raw_continues(cur, s):
                self._continue(cur, lineno, text, s)
                self._prev_cr = cr
                continue
            if cur is not None and cur.tb and (process is None or cur.process == process) and is_tb_continuation(s):
                self._continue(cur, lineno, text, s)
                self._prev_cr = cr
                continue
            if cur is not None and cur.cont and (process is None or cur.process == process) and s.startswith("Traceback"):
                cur.tb = True
                self._continue(cur, lineno, text, s)
                self._prev_cr = cr
                continue
            if cur is not None:
                emit(self._finish(cur))
            r = _Rec()
            r.line = r.line_end = lineno
            r.ts = self.last_ts
            r.ts_inherited = True
            r.process = process
            r.source = None
            r.texts.append(text)
            r.key = None
            r.env = False
            r.repeated = repeated
            r.cont = False
            mu = UVICORN.match(s) if c0 in "DIWECT" else None
            if mu is not None:
                r.level = mu.group(1)
                r.msg = mu.group(2)
                r.source = None
                r.fields = {"_uvicorn": True}
                if r.msg.startswith("Exception in ASGI application"):
                    r.cont = True  # uvicorn prints the handler's traceback below, without a prefix
            else:
                r.level = None
                r.msg = s
                if s.startswith(_TB_HEADS):
                    r.tb = True  # Ray prints an actor's creation-task / unhandled-error traceback without the header line
                elif s.startswith("Process ") and s.endswith(":"):
                    r.cont = True  # multiprocessing prints "Process X:" then the traceback
                elif c0 == "[":
                    mc = CPP_TS.match(s)
                    if mc is not None:  # C++ (glog / c10) lines carry their own timestamp
                        ts = self._ts(mc.group(2), mc.group(3), mc.group(4), mc.group(5), mc.group(6))
                        if ts is not None:
                            ts = ts.replace(microsecond=int((mc.group(7) + "00000")[:6]))
                            self.last_ts = ts
                            r.ts = ts
                            r.ts_inherited = False
                        r.level = _CPP_LEVEL.get(mc.group(1))
                        r.raw_cont = 4  # a c10 error may be followed by its C++ stack
                    elif (mc := CPP_NO_TS.match(s)) is not None:  # older c10 logging: "[E file.cpp:N] …", no time
                        r.level = _CPP_LEVEL.get(mc.group(1))
                        r.raw_cont = 4
                elif s.startswith("Exception in callback "):
                    r.raw_cont = 5
                    r.cont = True
                elif s.startswith("terminate called after throwing"):
                    r.raw_cont = 4  # "  what():  …", then the C++ stack
                elif s.startswith("nanobind: "):
                    r.raw_cont = 2
                elif "Warning: " in s and PYWARN.search(s):
                    r.raw_cont = 1
            if wrap_ts is not None and r.ts is None:
                r.ts = _parse_iso(wrap_ts)
                r.ts_inherited = False
            self._cur = r
            self._prev_cr = cr
        self.lines += n
        if n_fast:
            self.kinds["decode_step"] += n_fast
            self.covered += n_fast

    def close(self) -> list[Event]:
        """Finish the open record at end of input."""
        if self._cur is None:
            return []
        self._mode = 0
        ev = self._finish(self._cur)
        self._cur = None
        return [ev]

    # ------------------------------------------------------------------ internals
    def _ts(self, mo: str, dd: str, hh: str, mi: str, ss: str) -> datetime | None:
        key = (mo, dd, hh, mi, ss)
        ts = self._ts_cache.get(key)
        month = int(mo)
        if self._end_hint:
            if month > self._end_hint:
                self.year -= 1
            self._end_hint = 0
        if month < self._last_month and self._last_month == 12 and month == 1:
            self.year += 1  # Dec → Jan rollover
            self._ts_cache.clear()
            ts = None
        if month != self._last_month:
            self._last_month = month
        if ts is None:
            try:
                ts = datetime(self.year, month, int(dd), int(hh), int(mi), int(ss))
            except ValueError:
                return self.last_ts
            if len(self._ts_cache) > 4096:
                self._ts_cache.clear()
            self._ts_cache[key] = ts
        self.last_ts = ts
        self._fkey = None
        return ts

    def _set_year(self, year: int) -> None:
        """The input states its year (dated prefix, JSON timestamp): cached timestamps carry the old one."""
        self.year = year
        self._ts_cache.clear()
        self._fkey = None

    def _raw_continues(self, cur: _Rec, s: str) -> bool:
        k = cur.raw_cont
        if k == 1:  # the warnings module prints the offending source line indented below the warning
            return s[:2] == "  " and not s.startswith("  File ")
        if k == 2:
            return s.startswith((" - ", "nanobind: "))
        if k == 4:  # c10's C++ stack below an error: "Exception raised from f at file:N (most recent call first):", frames
            return s.startswith(("Exception raised from ", "frame #", "  what():  "))
        if k == 5:  # asyncio's exception handler: "handle: <Handle …>" below "Exception in callback …"
            return s.startswith("handle: <")
        # a message ending in ':' continued on raw lines (e.g. the default chat template)
        if not s.strip() or s.startswith(("Traceback", "Process ")) or UVICORN.match(s) or RAW.match(s) is not None:
            return False
        return True

    def _continue(self, cur: _Rec, lineno: int, text: str, msg: str) -> None:
        _continue(cur, lineno, text, msg)

    def _json(self, lineno: int, text: str, s: str, process: str | None) -> _Rec | None:
        try:
            obj = orjson.loads(s)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(obj, dict):
            return None
        msg = _first_str(obj, _JSON_MSG_KEYS)
        if msg is None:
            return None
        r = _Rec()
        r.line = r.line_end = lineno
        r.texts.append(text)
        r.key = None
        r.env = False
        r.cont = False
        lvl = _first_str(obj, _JSON_LEVEL_KEYS)
        r.level = _LEVEL_NORM.get(lvl.upper(), lvl.upper()) if lvl else None
        tsv = _first_str(obj, _JSON_TS_KEYS)
        ts = _parse_iso(tsv) if tsv else None
        if ts is not None:
            if ts.year != self.year:  # cached timestamps (and the fast path's) carry the old year
                self._ts_cache.clear()
                self._fkey = None
            self.year = ts.year
            self._last_month = ts.month
            self.last_ts = ts
            r.ts_inherited = False
        else:
            r.ts_inherited = True
        r.ts = ts if ts is not None else self.last_ts
        pname = obj.get("vllm_process_name")
        pid = obj.get("process")
        if process is None and pname:
            process = f"{pname} pid={pid}" if pid is not None else str(pname)
        r.process = process
        fn, ln = obj.get("filename"), obj.get("lineno")
        r.source = f"{fn}:{ln}" if fn and ln is not None else None
        lines = msg.split("\n")
        r.msg = lines[0].rstrip("\r")
        for extra in lines[1:]:
            self._continue(r, lineno, "", extra.rstrip("\r"))
        r.texts = [text]
        r.line_end = lineno
        exc = obj.get("exc_info")
        if isinstance(exc, str):
            r.tb = True
            for extra in exc.split("\n"):
                self._continue(r, lineno, "", extra.rstrip("\r"))
            r.texts = [text]
            r.line_end = lineno
        rid = obj.get("request_id")
        r.fields = {"_json": True}
        if isinstance(rid, str):
            r.fields["_request_id"] = rid
        return r

    def _finish(self, r: _Rec) -> Event:
        kind, pattern, rid, fields, tmpl, level = _classify_memo(r)
        if tmpl is not None:
            self.unknown_templates[f"{kind}\t{tmpl}"] += 1
            self._template_examples.setdefault(f"{kind}\t{tmpl}", r.line)
        if self.keep_text and self._mode != 2:
            text = "\n".join(r.texts) if len(r.texts) > 1 else r.texts[0]
            if len(text) > MAX_TEXT:
                text = text[:MAX_TEXT] + f"…[truncated {len(text) - MAX_TEXT} chars]"
        else:
            text = ""
        self.kinds[kind] += 1
        self.covered += r.line_end - r.line + 1
        mode = self._mode
        if mode == 2:
            return None  # type: ignore[return-value]  (count only)
        if mode == 1:  # the Event.to_dict() shape, without building the Event
            ts = r.ts
            return dumps_safe({
                "file": self.file, "line": r.line, "line_end": r.line_end,
                "ts": ts.isoformat() if ts is not None else None, "level": level, "process": r.process,
                "source": r.source, "kind": kind, "request_id": rid, "fields": fields, "text": text,
            }, option=_NL).decode()
        return Event(
            self.file, r.line, r.line_end, r.ts, level, r.process, r.source, kind, rid, fields, text,
            pattern, tmpl, r.ts_inherited,
        )

    def template_example_line(self, key: str) -> int | None:
        """First line number where an unknown template was seen."""
        return self._template_examples.get(key)


def _classify(r: _Rec) -> tuple[str, str | None, str | None, dict[str, Any], str | None, str | None]:
    """What a finished record is: (kind, pattern id, request id, fields, unknown-message template, level).

    A pure function of the record's shape (enveloped, uvicorn, raw, JSON), level and messages: the compiled scanner
    memoises it by those (``_c_classify``)."""
    msg = r.msg
    extra = r.fields or {}
    rid: str | None = extra.get("_request_id")
    hit: tuple[LinePattern, str | None, dict[str, Any]] | None = None
    if extra.get("_uvicorn"):
        hit = _access(msg) or MESSAGES.match(msg)  # most uvicorn lines are access lines
    elif r.env or extra:
        hit = MESSAGES.match(msg)
    else:
        hit = RAW.match(msg) or MESSAGES.match(msg)
    fields: dict[str, Any]
    pattern = None
    tmpl = None
    if hit is not None:
        p, prid, fields = hit
        kind = p.kind
        pattern = p.id
        if prid is not None:
            rid = prid
    else:
        fields = {}
        if r.tb:
            kind = "traceback"
        elif not msg.strip():
            kind = "blank" if not r.env else "log"
        elif r.env or r.level is not None:
            kind = "log"
        else:
            kind = "unparsed"
    # multi-line records: later lines (logo, memory profiling) and exception lines add facts
    if r.extra_msgs:
        for m2 in r.extra_msgs[:32]:
            h2 = MESSAGES.match(m2) if m2.strip() else None
            if h2 is not None:
                for k, v in h2[2].items():
                    fields.setdefault(k, v)
                if kind in ("log", "unparsed", "blank"):
                    kind, pattern = h2[0].kind, h2[0].id
                if rid is None and h2[1] is not None:
                    rid = h2[1]
    if r.exc:
        etype, emsg = r.exc[-1]
        fields["exc_type"] = etype
        fields["exc_message"] = emsg[:2000]
        if len(r.exc) > 1:
            fields["exc_chain"] = [f"{t}: {m[:200]}" for t, m in r.exc[-6:]]
        # the last matching exception types the record (exc_kind, its fields); a chain ("The above exception
        # was the direct cause …") may hold the real cause earlier — every matched kind goes to exc_kinds
        matched: list[str] = []
        last = True
        for t, m in reversed(r.exc):
            h3 = MESSAGES.match(m) or MESSAGES.match(f"{t}: {m}")
            if h3 is not None:
                if h3[0].kind not in matched:
                    matched.append(h3[0].kind)
                if last:
                    last = False
                    fields.setdefault("exc_kind", h3[0].kind)
                    for k, v in h3[2].items():
                        fields.setdefault(k, v)
                    if kind in ("traceback", "log", "unparsed"):
                        kind, pattern = h3[0].kind, h3[0].id
        if len(matched) > 1:
            fields["exc_kinds"] = matched[::-1]
    if kind in ("log", "unparsed", "traceback"):
        tmpl = template(msg) if kind != "traceback" else template(f"{fields.get('exc_type', '')}: {fields.get('exc_message', '')}")
    if r.repeated:
        fields["repeated"] = r.repeated
    level = r.level
    if level is None and kind == "nccl_timeout":
        level = "ERROR"
    return kind, pattern, rid, fields, tmpl, level


#: One-line records the Python path classified: (env, extra, uvicorn, tb, level, message) → (kind, pattern, fields,
#: template, level). What the compiled scanner's memo does for its records (``_c_classify``), for the lines it leaves to
#: Python — JSON-logging records, raw lines, the first lines of a file: a log repeats them (start-up lines of every
#: restart) and each was one or two registry searches.
_MEMO: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_MEMO_MAX = 1 << 15


def _classify_memo(r: _Rec) -> tuple[str, str | None, str | None, dict[str, Any], str | None, str | None]:
    """``_classify``, memoised for one-line records that name no request (their fields are copied)."""
    if r.extra_msgs or r.exc or r.repeated:
        return _classify(r)
    extra = r.fields
    if extra:
        if "_request_id" in extra:
            return _classify(r)
        key = (r.env, True, bool(extra.get("_uvicorn")), r.tb, r.level, r.msg)
    else:
        key = (r.env, False, False, r.tb, r.level, r.msg)
    hit = _MEMO.get(key)
    if hit is not None:
        return hit[0], hit[1], None, dict(hit[2]), hit[3], hit[4]
    out = _classify(r)
    if out[2] is None:  # a record naming a request: its message is most likely unique
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        _MEMO[key] = (out[0], out[1], dict(out[3]), out[4], out[5])
    return out


#: Raw lines that open a traceback: Python's header, and Ray's two header-less forms (an actor's creation task, an
#: unhandled error of a remote task) whose frames follow directly.
_TB_HEADS = ("Traceback (most recent call last)", "Exception raised in creation task: ",
             "Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): ")


def _continue(cur: _Rec, lineno: int, text: str, msg: str) -> None:
    """A physical line joins an open record: traceback lines give its exception chain, other lines extra messages."""
    cur.line_end = lineno
    cur.texts.append(text)
    if cur.tb or msg.startswith("Traceback"):
        cur.tb = True
        if msg and msg[0] not in " \t":
            m = EXC_LINE.match(msg)
            if m:
                cur.exc.append((m.group(1), m.group(2) or ""))
    else:
        cur.extra_msgs.append(msg)


def _c_classify(key: str) -> tuple[Any, ...]:
    """The compiled scanner's hook: classify a record it grouped, given by its memo key — shape (``E`` enveloped,
    ``U`` uvicorn, ``R`` raw), level, then its messages, ``\n``-separated — exactly as ``_finish`` would.

    Returns (kind, pattern, request id, fields, template, level when the record has none, JSON of
    ``,"kind":…,"request_id":…,"fields":{…}``, unknown-template key, cacheable). A record naming a request is not
    kept in the memo (its message is most likely unique)."""
    shape = key[0]
    level, _, rest = key[1:].partition("\n")
    msgs = rest.split("\n")
    r = _Rec()
    r.msg = msgs[0]
    r.level = level or None
    r.texts.append("")
    if shape == "E":
        r.env = True
        # as the Python path does: V1 0.7–0.8 print "EngineCore hit an exception: Traceback (most recent call last):"
        r.tb = r.msg.startswith("Traceback") or r.msg.endswith("Traceback (most recent call last):")
    elif shape == "U":
        r.fields = {"_uvicorn": True}
    else:
        r.tb = r.msg.startswith(_TB_HEADS)
    for m in msgs[1:]:
        _continue(r, 0, "", m)
    kind, pattern, rid, fields, tmpl, lvl = _classify(r)
    frag = dumps_safe({"kind": kind, "request_id": rid, "fields": fields})
    return (kind, pattern, rid, fields, tmpl, lvl if r.level is None else None, b"," + frag[1:-1],
            f"{kind}\t{tmpl}" if tmpl is not None else None, rid is None)


def _message_matches(msg: str) -> bool:
    return MESSAGES.match(msg) is not None


def _raw_matches(s: str) -> bool:
    return RAW.match(s) is not None


if fast._speedups is not None:
    fast._speedups.set_hooks(_c_classify, _message_matches, _raw_matches)


# c10/glog: [W914 04:53:45.615225908 file.cpp:N] — the month is not zero-padded
CPP_TS = re.compile(r"^(?:\[rank\d+\]:)?\[([EWIF])(\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+) ")
CPP_NO_TS = re.compile(r"^(?:\[rank\d+\]:)?\[([EWIF]) [\w.]+\.(?:cpp|cc|cu|h|hpp):\d+\] ")
_CPP_LEVEL = {"E": "ERROR", "W": "WARNING", "I": "INFO", "F": "CRITICAL"}
PYWARN = re.compile(r"\.py:\d+: \w*Warning: ")

_FAST_DECODE = re.compile(
    # no lazy quantifiers (3-4x faster); the classes exclude what JSON would have to escape, so the fast
    # path can write the line's parts into JSON verbatim
    # (numbers without leading zeros and within 64 bits, so they can be copied into JSON as they are)
    r'INFO (\d\d-\d\d \d\d:\d\d:\d\d) \[?([^\]\s"\\\x00-\x1f]+:\d+)\] Decode step (0|[1-9][0-9]{0,17}) for ([^\s"\\\x00-\x1f]+)\. '
    r"Batch size: (0|[1-9][0-9]{0,17}), KV cache usage: ([0-9]{1,15}(?:\.[0-9]{1,15})?)%\Z"
)
class _KvJson(dict):  # type: ignore[type-arg]
    """'45' → '0.45' (JSON of the ratio, as orjson would print it), computed once per distinct value."""

    def __missing__(self, k: str) -> str:
        v = orjson.dumps(float(k) / 100.0).decode()
        self[k] = v
        return v


_KV_JSON = _KvJson()
_FAST_REST = re.compile(
    r'(0|[1-9][0-9]{0,17}) for ([^\s"\\\x00-\x1f]+)\. Batch size: (0|[1-9][0-9]{0,17}), KV cache usage: ([0-9]{1,15}(?:\.[0-9]{1,15})?)%\Z'
)


def _access(msg: str) -> tuple[LinePattern, str | None, dict[str, Any]] | None:
    r = _ACCESS.match(msg)
    return None if r is None else (_ACCESS, r[0], r[1])


_ACCESS = next(p for p in MESSAGES.patterns if p.id == "uvicorn.access")
_NL = orjson.OPT_APPEND_NEWLINE


def _jstr(s: str) -> str:
    return orjson.dumps(s).decode()


def _jsonl(ev: Event) -> str:
    return dumps_safe(ev.to_dict(), option=orjson.OPT_APPEND_NEWLINE).decode()


def _finer(ts: datetime, wrap: str) -> datetime:
    """``ts`` (whole seconds) with the sub-second part of a wrapper's RFC 3339 stamp of the same second."""
    w = _parse_iso(wrap)
    if w is None or not w.microsecond or ts.microsecond:
        return ts
    if w.replace(microsecond=0) == ts:
        return w
    return ts


def _parse_iso(s: str) -> datetime | None:
    s = s.strip().replace(",", ".")
    if s.endswith("Z"):
        s = s[:-1]
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        try:
            dt = datetime.fromisoformat(s[:26])
        except ValueError:
            return None
    return dt.replace(tzinfo=None)
