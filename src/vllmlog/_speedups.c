/* vllmlog._speedups — the compiled fast path of the line parser (optional; pure Python is the fallback).
 *
 * scan() reads a run of physical lines that are each a complete, single-line record of a known shape
 * ("fast templates" declared next to the regex patterns in the vllmlog.parsing modules, compiled by
 * vllmlog/parsing/fast.py) and writes their JSON lines (the Event.to_dict() shape, byte for byte what the
 * Python path writes) or only counts them. It stops at the first line it cannot vouch for; the Python state
 * machine parses that one and hands the rest back. Numbers are never formatted here: every non-string field
 * goes through a memo dict (raw text -> JSON text) whose __missing__ runs the Python converter and orjson, so
 * the values are exactly the Python path's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <math.h>
#include <stdint.h>
#include <datetime.h>

enum { P_LIT = 0, H_DIGITS, H_NUM, H_NUMC, H_NUMCD, H_ID, H_TOK, H_WORD, H_UPPER, H_SEC, H_D3, H_TAIL, H_IDEND, H_W, H_REST };
enum { SRC_ENV = 0, SRC_UVICORN = 1 };
enum { E_TMPL = 0, E_GUARD = 1 };

typedef struct {
    int type;
    char *lit;        /* literal bytes (P_LIT) */
    Py_ssize_t len;
    char *key;        /* ',"name":' for an output field, NULL for a hole that is not output */
    Py_ssize_t keylen;
    int is_rid;
    int is_str;       /* output as a JSON string (escaped raw text) */
    PyObject *memo;   /* raw str -> JSON text (str); NULL for strings */
    int native_int;   /* 1: to_int over digits/commas, written here; 2 to_float, 3 to_ratio, 4 to_seconds: the
                       * number is parsed (strtod) and written as Python's repr when that has no exponent (the
                       * form orjson writes too); anything else goes through the memo (Python) */
    struct MemoSlot *cache;  /* direct-mapped cache in front of the memo (raw bytes -> JSON bytes) */
    PyObject *name;   /* field name (str) for Event.fields */
    PyObject *conv;   /* the Python converter (None: keep the string) */
    PyObject *values; /* dict raw str -> converted value (Event mode) */
} Part;

#define CACHE_SLOTS 2048
struct MemoSlot { unsigned char rawn, jsonn; char raw[22]; char json[40]; };

static inline unsigned slot_of(const char *s, Py_ssize_t n) {
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h & (CACHE_SLOTS - 1);
}

typedef struct {
    int etype;        /* E_TMPL or E_GUARD */
    int src;          /* SRC_ENV / SRC_UVICORN */
    int index;        /* template index (counts) */
    char *kind_json;  /* ',"kind":"decode_step","request_id":' */
    Py_ssize_t kind_json_len;
    char *prefix;     /* leading literal (dispatch) */
    Py_ssize_t prefix_len;
    char *contains;   /* guard: literal the guarded regex needs (NULL: none) */
    Py_ssize_t contains_len;
    int post;         /* a native post-processing routine (POST_*), 0 none: the pattern's ``post`` done here */
    int strict_decode;/* Decode line in the pure-Python fast path's exact form: no next-line check */
    int nparts;
    Part *parts;
    PyObject *kind;       /* str */
    PyObject *pattern_id; /* str */
} Entry;

typedef struct {
    int n;
    Entry *e;
    int ntemplates;
} Table;

/* ------------------------------------------------------------------ output buffer */
typedef struct { PyObject *o; char *p; Py_ssize_t n, cap; } Buf;  /* grows a bytes object in place */

static int buf_grow(Buf *b, Py_ssize_t more);
static inline int buf_reserve(Buf *b, Py_ssize_t more) {
    if (b->n + more <= b->cap) return 0;
    return buf_grow(b, more);
}
static int buf_grow(Buf *b, Py_ssize_t more) {
    Py_ssize_t cap = b->cap ? b->cap : 1 << 12;
    while (cap < b->n + more) cap *= 2;
    if (!b->o) {
        b->o = PyBytes_FromStringAndSize(NULL, cap);
        if (!b->o) return -1;
    } else if (_PyBytes_Resize(&b->o, cap) < 0) {
        b->o = NULL;
        b->p = NULL;
        b->n = b->cap = 0;
        return -1;
    }
    b->p = PyBytes_AS_STRING(b->o);
    b->cap = cap;
    return 0;
}
static void buf_free(Buf *b) { Py_CLEAR(b->o); b->p = NULL; b->n = b->cap = 0; }
static PyObject *buf_finish(Buf *b) {  /* the bytes written (no copy), the buffer given away */
    if (!b->o) return PyBytes_FromStringAndSize("", 0);
    if (_PyBytes_Resize(&b->o, b->n) < 0) { b->o = NULL; return NULL; }
    PyObject *r = b->o;
    b->o = NULL;
    b->p = NULL;
    b->n = b->cap = 0;
    return r;
}
static inline int buf_put(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->p + b->n, s, n); b->n += n;
    return 0;
}
static inline int buf_int(Buf *b, long long v) {
    char tmp[24];
    int k = 24;
    unsigned long long u = v < 0 ? (unsigned long long)(-v) : (unsigned long long)v;
    do { tmp[--k] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) tmp[--k] = '-';
    return buf_put(b, tmp + k, 24 - k);
}
/* JSON string body: escape '"' and '\\' (the caller has rejected control characters) */
static int buf_esc(Buf *b, const char *s, Py_ssize_t n) {
    if (buf_reserve(b, 2 * n) < 0) return -1;
    char *o = b->p + b->n;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\t') { *o++ = '\\'; *o++ = 't'; continue; }  /* the only control character let through */
        if (c == '"' || c == '\\') *o++ = '\\';
        *o++ = c;
    }
    b->n = o - b->p;
    return 0;
}

/* ------------------------------------------------------------------ table */
static void table_free(Table *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) {
        Entry *e = &t->e[i];
        PyMem_Free(e->kind_json); PyMem_Free(e->prefix); PyMem_Free(e->contains);
        for (int j = 0; j < e->nparts; j++) {
            PyMem_Free(e->parts[j].lit); PyMem_Free(e->parts[j].key); PyMem_Free(e->parts[j].cache);
            Py_XDECREF(e->parts[j].name); Py_XDECREF(e->parts[j].conv); Py_XDECREF(e->parts[j].values);
            Py_XDECREF(e->parts[j].memo);
        }
        PyMem_Free(e->parts);
        Py_XDECREF(e->kind); Py_XDECREF(e->pattern_id);
    }
    PyMem_Free(t->e);
    PyMem_Free(t);
}
static void capsule_free(PyObject *cap) { table_free((Table *)PyCapsule_GetPointer(cap, "vllmlog.fasttable")); }

static char *dup_bytes(PyObject *o, Py_ssize_t *len) {
    char *s; Py_ssize_t n;
    if (o == Py_None) { *len = 0; return NULL; }
    if (PyBytes_AsStringAndSize(o, &s, &n) < 0) return NULL;
    char *d = (char *)PyMem_Malloc(n + 1);
    if (!d) { PyErr_NoMemory(); return NULL; }
    memcpy(d, s, n); d[n] = 0; *len = n;
    return d;
}

/* entries: list of
 *   ("guard", prefix: bytes, contains: bytes|None)
 *   ("tmpl", index, src, kind_json: bytes, post, strict_decode,
 *            [(type, lit: bytes|None, key: bytes|None, is_rid, is_str, memo|None), ...])   prefix = first literal */
static PyObject *compile_table(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *lst;
    if (!PyArg_ParseTuple(args, "O!", &PyList_Type, &lst)) return NULL;
    Table *t = (Table *)PyMem_Calloc(1, sizeof(Table));
    if (!t) return PyErr_NoMemory();
    t->n = (int)PyList_GET_SIZE(lst);
    t->e = (Entry *)PyMem_Calloc(t->n ? t->n : 1, sizeof(Entry));
    if (!t->e) { PyMem_Free(t); return PyErr_NoMemory(); }
    for (int i = 0; i < t->n; i++) {
        PyObject *it = PyList_GET_ITEM(lst, i);
        Entry *e = &t->e[i];
        const char *tag;
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) < 3) { PyErr_SetString(PyExc_TypeError, "bad entry"); goto fail; }
        tag = PyUnicode_AsUTF8(PyTuple_GET_ITEM(it, 0));
        if (!tag) goto fail;
        if (strcmp(tag, "guard") == 0) {
            e->etype = E_GUARD;
            e->prefix = dup_bytes(PyTuple_GET_ITEM(it, 1), &e->prefix_len);
            if (!e->prefix) goto fail;
            if (PyTuple_GET_ITEM(it, 2) != Py_None) {
                e->contains = dup_bytes(PyTuple_GET_ITEM(it, 2), &e->contains_len);
                if (!e->contains) goto fail;
            }
            continue;
        }
        PyObject *parts;
        PyObject *kj;
        if (!PyArg_ParseTuple(it, "siiOiiO!UU", &tag, &e->index, &e->src, &kj, &e->post, &e->strict_decode,
                              &PyList_Type, &parts, &e->kind, &e->pattern_id))
            goto fail;
        Py_INCREF(e->kind);
        Py_INCREF(e->pattern_id);
        e->etype = E_TMPL;
        if (e->index + 1 > t->ntemplates) t->ntemplates = e->index + 1;
        e->kind_json = dup_bytes(kj, &e->kind_json_len);
        if (!e->kind_json) goto fail;
        e->nparts = (int)PyList_GET_SIZE(parts);
        e->parts = (Part *)PyMem_Calloc(e->nparts ? e->nparts : 1, sizeof(Part));
        if (!e->parts) { PyErr_NoMemory(); goto fail; }
        for (int j = 0; j < e->nparts; j++) {
            PyObject *pt = PyList_GET_ITEM(parts, j), *lit, *key, *memo;
            Part *p = &e->parts[j];
            PyObject *name, *conv;
            if (!PyArg_ParseTuple(pt, "iOOiiOiOO", &p->type, &lit, &key, &p->is_rid, &p->is_str, &memo, &p->native_int,
                                  &name, &conv)) goto fail;
            if (name != Py_None) { Py_INCREF(name); p->name = name; }
            if (conv != Py_None) {
                Py_INCREF(conv); p->conv = conv;
                p->values = PyDict_New();
                if (!p->values) goto fail;
            }
            if (memo != Py_None) {
                p->cache = (struct MemoSlot *)PyMem_Calloc(CACHE_SLOTS, sizeof(struct MemoSlot));
                if (!p->cache) { PyErr_NoMemory(); goto fail; }
            }
            if (lit != Py_None) { p->lit = dup_bytes(lit, &p->len); if (!p->lit) goto fail; }
            if (key != Py_None) { p->key = dup_bytes(key, &p->keylen); if (!p->key) goto fail; }
            if (memo != Py_None) { Py_INCREF(memo); p->memo = memo; }
        }
        if (e->nparts == 0 || e->parts[0].type != P_LIT) { PyErr_SetString(PyExc_ValueError, "a template starts with a literal"); goto fail; }
        e->prefix = (char *)PyMem_Malloc(e->parts[0].len + 1);
        if (!e->prefix) { PyErr_NoMemory(); goto fail; }
        memcpy(e->prefix, e->parts[0].lit, e->parts[0].len);
        e->prefix_len = e->parts[0].len;
    }
    return PyCapsule_New(t, "vllmlog.fasttable", capsule_free);
fail:
    table_free(t);
    return NULL;
}

/* ------------------------------------------------------------------ matching */
#define MAXH 16
typedef struct { const char *s; Py_ssize_t n; } Span;

static inline int isdig(char c) { return c >= '0' && c <= '9'; }

/* [0-9]+(\.[0-9]+)? */
static int kv_form(const char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n && isdig(s[i])) i++;
    if (i == 0) return 0;
    if (i == n) return 1;
    if (s[i] != '.') return 0;
    Py_ssize_t j = ++i;
    while (i < n && isdig(s[i])) i++;
    return i == n && i > j;
}

/* length of a whitespace character (Python's str.isspace) starting at s, 0 if none; ASCII controls are
 * rejected before matching */
static inline int uspace(const unsigned char *s, const unsigned char *end) {
    if (*s == ' ') return 1;
    if (*s < 0x80) return 0;
    if (s[0] == 0xC2 && end - s >= 2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
    if (end - s >= 3) {
        if (s[0] == 0xE1 && s[1] == 0x9A && s[2] == 0x80) return 3;
        if (s[0] == 0xE2 && s[1] == 0x80 && ((s[2] >= 0x80 && s[2] <= 0x8A) || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF)) return 3;
        if (s[0] == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) return 3;
        if (s[0] == 0xE3 && s[1] == 0x80 && s[2] == 0x80) return 3;
    }
    return 0;
}

static const char *find_lit(const char *s, const char *end, const char *lit, Py_ssize_t n) {
    if (n == 0) return s;
    while (end - s >= n) {
        const char *q = (const char *)memchr(s, lit[0], (end - s) - n + 1);
        if (!q) return NULL;
        if (memcmp(q, lit, n) == 0) return q;
        s = q + 1;
    }
    return NULL;
}

/* 1 match (holes filled), 0 no match */
static int match_tmpl(const Entry *e, const char *s, const char *end, Span *holes) {
    int h = 0;
    for (int j = 0; j < e->nparts; j++) {
        const Part *p = &e->parts[j];
        const char *st = s;
        switch (p->type) {
        case P_LIT:
            if (end - s < p->len || memcmp(s, p->lit, p->len) != 0) return 0;
            s += p->len;
            continue;
        case H_DIGITS: while (s < end && isdig(*s)) s++; goto backoff;
        case H_NUM: while (s < end && (isdig(*s) || *s == '.')) s++; goto backoff;
        case H_NUMC: while (s < end && (isdig(*s) || *s == ',')) s++; goto backoff;
        case H_NUMCD: while (s < end && (isdig(*s) || *s == ',' || *s == '.')) s++; goto backoff;
        backoff:
            /* a non-ASCII character right after the run may be a digit to Python's \d: not ours to decide */
            if (s < end && (unsigned char)*s >= 0x80) return 0;
            /* greedy like the regex: the longest run after which the next literal matches (one level of
             * backtracking; a deeper one fails here and the caller hands the line to Python) */
            if (j + 1 < e->nparts && e->parts[j + 1].type == P_LIT && e->parts[j + 1].len) {
                const Part *nx = &e->parts[j + 1];
                while (s > st && !(end - s >= nx->len && memcmp(s, nx->lit, nx->len) == 0)) s--;
            }
            break;
        case H_WORD: while (s < end && ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) s++; break;
        case H_UPPER: while (s < end && *s >= 'A' && *s <= 'Z') s++; break;
        case H_TOK: while (s < end && !uspace((const unsigned char *)s, (const unsigned char *)end)) s++; break;
        case H_ID: {
            /* \S+? followed by the next literal (which contains a space): its first occurrence */
            const Part *nx = &e->parts[j + 1];
            const char *q = find_lit(s + 1, end, nx->lit, nx->len);
            if (!q) return 0;
            for (const char *c = s; c < q; c++) if (uspace((const unsigned char *)c, (const unsigned char *)end)) return 0;
            s = q;
            break;
        }
        case H_SEC:
            while (s < end && (isdig(*s) || *s == '.')) s++;
            if (s == st) return 0;
            while (s < end && *s == ' ') s++;
            if (s < end && *s == 'm') s++;
            if (s >= end || *s != 's') return 0;
            s++;
            break;
        case H_D3:
            if (end - s < 3 || !isdig(s[0]) || !isdig(s[1]) || !isdig(s[2])) return 0;
            s += 3;
            if (s < end && (unsigned char)*s >= 0x80) return 0;
            break;
        case H_TAIL:
            if (s < end && *s != ' ') return 0;
            s = end;
            break;
        case H_IDEND: {
            /* \S+? followed by the template's last literal and the end: everything up to that literal */
            const Part *nx = &e->parts[j + 1];
            const char *q = end - nx->len;
            if (q <= s) return 0;
            for (const char *c = s; c < q; c++) if (uspace((const unsigned char *)c, (const unsigned char *)end)) return 0;
            s = q;
            break;
        }
        case H_W:
            while (s < end && (isdig(*s) || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) s++;
            if (s < end && (unsigned char)*s >= 0x80) return 0;  /* may be a word character to Python's \w */
            break;
        case H_REST:
            s = end;
            break;
        default: return 0;
        }
        if (s == st && p->type != H_TAIL && p->type != H_REST) return 0;
        if (h >= MAXH) return 0;
        holes[h].s = st; holes[h].n = s - st; h++;
    }
    return s == end;
}

static int level_len(const char *s, Py_ssize_t n, int uvicorn) {
    /* DEBUG INFO WARNING ERROR CRITICAL (+ TRACE for uvicorn) */
    switch (s[0]) {
    case 'I': return (n >= 4 && memcmp(s, "INFO", 4) == 0) ? 4 : 0;
    case 'D': return (n >= 5 && memcmp(s, "DEBUG", 5) == 0) ? 5 : 0;
    case 'W': return (n >= 7 && memcmp(s, "WARNING", 7) == 0) ? 7 : 0;
    case 'E': return (n >= 5 && memcmp(s, "ERROR", 5) == 0) ? 5 : 0;
    case 'C': return (n >= 8 && memcmp(s, "CRITICAL", 8) == 0) ? 8 : 0;
    case 'T': return (uvicorn && n >= 5 && memcmp(s, "TRACE", 5) == 0) ? 5 : 0;
    }
    return 0;
}

static int days_in(int y, int m) {
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2) return ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0) ? 29 : 28;
    return d[m - 1];
}

static inline int two(const char *s) { return (isdig(s[0]) && isdig(s[1])) ? (s[0] - '0') * 10 + (s[1] - '0') : -1; }

/* ------------------------------------------------------------------ one physical line, read as the parser does
 *
 * analyze_line() mirrors the first half of LineParser._run for one line: the wrappers the parser would strip
 * (journald, kubectl, docker compose, ANSI, \r updates, torch's [rankN]:, Ray's [repeated Nx]) make the line
 * L_BAIL (the Python state machine reads it); vLLM's process tag is stripped; then the line is an enveloped vLLM
 * line (L_ENV), a uvicorn line (L_UVI) or a raw line (L_RAW). Wherever Python's Unicode semantics (\s, \d, \w,
 * str.isupper) could read a non-ASCII character differently from an ASCII test, the line is L_BAIL too. */
enum { L_BAIL = 0, L_ENV = 1, L_UVI = 2, L_RAW = 3 };
#define MAX_TEXT 65536  /* parser.MAX_TEXT: a longer record's text is truncated by the Python path */

typedef struct {
    int shape;
    int L, mo, dd, hh, mi, ss, space1;
    int quotes;        /* '"' or '\\' in the line: its text needs escaping in JSON */
    int bracket;       /* raw line starting with '[' (C++ lines: own timestamp, level): a new record is Python's */
    int json;          /* raw line "{…}" (a JSON record): Python's */
    int cr;            /* the line ended in '\r' (vLLM's NewLineFormatter: the next line continues the record) */
    const char *tab;   /* the first tab of the line (NULL: none); tabs are the only control characters let through, and
                        * only inside an enveloped line's message: such a line may continue a C record (tab_continues),
                        * never start one (its text is escaped in JSON) */
    Py_ssize_t textn;  /* the physical line's length without its trailing '\r's (what the record's text keeps) */
    const char *srcs;  /* env: "file.py:N" */
    Py_ssize_t srcn;
    const char *proc;  /* "(APIServer pid=N) " prefix: what is inside the parentheses (NULL: none) */
    Py_ssize_t procn;
    const char *lvl;   /* env/uvicorn: the level word */
    const char *s;     /* the line after the process tag (raw lines: the message) */
    Py_ssize_t sn;
    const char *msg;   /* env/uvicorn: the message */
    Py_ssize_t msgn;
} LI;

static inline int isword(unsigned char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static inline int starts(const char *s, Py_ssize_t n, const char *lit) {
    size_t k = strlen(lit);
    return (size_t)n >= k && memcmp(s, lit, k) == 0;
}

/* strict UTF-8 (what bytes.decode('utf-8') accepts); 0 when invalid */
static int utf8_ok(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && s[i + 1] < 0xA0) return 0;
            if (c == 0xED && s[i + 1] > 0x9F) return 0;  /* surrogates */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && s[i + 1] < 0x90) return 0;
            if (c == 0xF4 && s[i + 1] > 0x8F) return 0;
            i += 4;
        } else
            return 0;
    }
    return 1;
}

/* all characters whitespace (str.strip() would leave nothing); no control characters reach here */
static int all_ws(const char *s, Py_ssize_t n) {
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    while (p < e) {
        int k = uspace(p, e);
        if (!k) return 0;
        p += k;
    }
    return 1;
}

/* the envelope's level word: its length; -1 for WARN / FATAL (Python normalises them: its business); 0 none */
static int env_level(const char *s, Py_ssize_t n) {
    int L = level_len(s, n, 0);
    if (L) return L;
    if ((n >= 5 && memcmp(s, "WARN ", 5) == 0) || (n >= 6 && memcmp(s, "FATAL ", 6) == 0)) return -1;
    return 0;
}

/* docker compose's "name  | " prefix (envelope.DOCKER): 1 matches, 0 not, -1 cannot tell (non-ASCII) */
static int docker_prefix(const char *s, Py_ssize_t n) {
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    if (p >= e || !(isdig((char)*p) || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) return 0;
    p++;
    int run = 0;
    while (p < e && (isword(*p) || *p == '.' || *p == '-')) { p++; run++; }
    if (p < e && *p >= 0x80 && !uspace(p, e)) return -1;  /* \w is Unicode */
    if (run > 62) return 0;
    int k;
    while (p < e && (k = uspace(p, e))) p += k;
    return (e - p >= 2 && p[0] == '|' && p[1] == ' ') ? 1 : 0;
}

/* uvicorn's "LEVEL:<whitespace>message" (envelope.UVICORN): the message start, or NULL */
static const char *uvicorn_msg(const char *s, const char *end, const char **lvl, int *L) {
    int k = level_len(s, end - s, 1);
    if (!k || s + k >= end || s[k] != ':') return NULL;
    const char *m = s + k + 1;
    int w = uspace((const unsigned char *)m, (const unsigned char *)end);
    if (!w) return NULL;
    while (m < end && (w = uspace((const unsigned char *)m, (const unsigned char *)end))) m += w;
    *lvl = s;
    *L = k;
    return m;
}

static int analyze_line(const char *s, Py_ssize_t n, int year, LI *li, int validate) {
    const char *end = s + n;
    li->shape = L_BAIL;
    li->bracket = li->json = 0;
    li->proc = NULL;
    li->procn = 0;
    li->cr = 0;
    li->tab = NULL;
    while (n && s[n - 1] == '\r') { n--; li->cr = 1; }  /* text.rstrip("\r") */
    end = s + n;
    li->textn = n;
    if (n > MAX_TEXT) return L_BAIL;
    {
        /* control characters (\r, ESC, tabs) go to the Python path; quotes and backslashes are noted.
         * Eight bytes at a time: a byte < 0x20, or equal to '"' or '\\' (high bytes never flag). */
        const char *c = s;
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        uint64_t acc_q = 0, acc_h = 0;
        int quotes = 0;
        for (; end - c >= 8; c += 8) {
            uint64_t x;
            memcpy(&x, c, 8);
            if ((x - ones * 0x20) & ~x & highs) {  /* a control character in these 8 bytes: only tabs go on */
                for (int k = 0; k < 8; k++) {
                    unsigned char u = (unsigned char)c[k];
                    if (u == '\t') { if (!li->tab) li->tab = c + k; }
                    else if (u < 0x20) return L_BAIL;
                }
            }
            acc_h |= x & highs;
            uint64_t q = x ^ (ones * '"'), bs = x ^ (ones * '\\');
            acc_q |= ((q - ones) & ~q & highs) | ((bs - ones) & ~bs & highs);
        }
        for (; c < end; c++) {
            unsigned char u = (unsigned char)*c;
            if (u == '\t') { if (!li->tab) li->tab = c; quotes = 1; continue; }
            if (u < 0x20) return L_BAIL;
            if (u >= 0x80) acc_h = 1;
            if (u == '"' || u == '\\') quotes = 1;
        }
        li->quotes = quotes || acc_q != 0 || li->tab != NULL;  /* a tab is escaped in JSON too */
        if (acc_h && validate && !utf8_ok((const unsigned char *)s, n)) return L_BAIL;
    }
    if (n == 0) {  /* an empty raw line */
        li->shape = L_RAW; li->s = s; li->sn = 0; li->msg = s; li->msgn = 0;
        return L_RAW;
    }
    unsigned char c0 = (unsigned char)s[0];
    if (c0 >= 0x80) return L_BAIL;  /* str.isupper / isdigit of a non-ASCII first character */
    if (c0 >= 'A' && c0 <= 'Z') {  /* journald "Mon DD HH:MM:SS host unit: " (checked before anything else) */
        for (Py_ssize_t i = 0; i < n && i < 16; i++) if ((unsigned char)s[i] >= 0x80) return L_BAIL;
        if (n > 12 && s[3] == ' ' && s[9] == ':' && s[12] == ':') return L_BAIL;
    }
    if (c0 == '[' && starts(s, n, "[pod/")) return L_BAIL;
    if (isdig((char)c0)) {  /* kubectl/docker -t RFC 3339 stamp */
        for (Py_ssize_t i = 0; i < n && i < 12; i++) if ((unsigned char)s[i] >= 0x80) return L_BAIL;
        if (n > 10 && s[4] == '-' && s[10] == 'T') return L_BAIL;
        /* FastChat's "YYYY-MM-DD HH:MM:SS | LEVEL | name | …" (envelope.FASTCHAT): Python's */
        if (n > 24 && s[4] == '-' && s[10] == ' ' && s[19] == ' ' && s[20] == '|' && s[21] == ' ') return L_BAIL;
        /* loguru's "YYYY-MM-DD HH:MM:SS.mmm | LEVEL    | name:fn:N - …" (envelope.LOGURU) and a log console's
         * "YYYY-MM-DD HH:MM:SS.mmm | component | … | " (envelope.CONSOLE): Python's */
        if (n > 32 && s[4] == '-' && s[10] == ' ' && s[19] == '.')
            for (Py_ssize_t i = 20; i < 30; i++) if (s[i] == ' ' && s[i + 1] == '|' && s[i + 2] == ' ') return L_BAIL;
        /* Python logging's "YYYY-MM-DD HH:MM:SS[,mmm] - name - LEVEL - …" (envelope.PYLOG): Python's */
        if (n > 24 && s[4] == '-' && s[7] == '-' && s[10] == ' ' && s[13] == ':' && s[16] == ':')
            for (Py_ssize_t i = 19; i < 30 && i + 2 < n; i++) if (s[i] == ' ' && s[i + 1] == '-' && s[i + 2] == ' ') return L_BAIL;
    }
    if (c0 != '(' && c0 != '[' && !starts(s, n, "INFO") && !starts(s, n, "WARN") && !starts(s, n, "ERROR") &&
        !starts(s, n, "DEBUG") && !starts(s, n, "CRIT")) {
        int d = docker_prefix(s, n);
        if (d) return L_BAIL;  /* stripped by Python when " | " is in its first 72 characters: Python's call */
    }
    if (c0 == '(') {
        /* vLLM's process tag: ^\(([^()]*?\bpid=\d+[^()]*)\)\s? */
        const char *q = s + 1;
        while (q < end && *q != ')' && *q != '(') q++;
        if (q < end && *q == '(') return L_BAIL;  /* a Ray actor's tag with parentheses of its own (envelope.RAY_ACTOR) */
        if (q < end && *q == ')') {
            int ok = 0;
            for (const char *k = s + 1; k + 4 < q && !ok; k++) {
                if (memcmp(k, "pid=", 4) != 0) continue;
                unsigned char d = (unsigned char)k[4];
                if (d >= 0x80) return L_BAIL;  /* \d is Unicode */
                if (!isdig((char)d)) continue;
                unsigned char b = (unsigned char)k[-1];
                if (k != s + 1 && b >= 0x80) return L_BAIL;  /* \b next to a non-ASCII character */
                if (k == s + 1 || !isword(b)) ok = 1;
            }
            if (ok) {
                li->proc = s + 1;
                li->procn = q - (s + 1);
                q++;
                int w = uspace((const unsigned char *)q, (const unsigned char *)end);
                q += w;  /* \s? : one whitespace character */
                s = q;
                n = end - q;
                /* a second tag: "(EngineCore_DP0 pid=1) (Worker_TP0 pid=2) INFO …" (V1 0.11+ multiproc workers) —
                 * the inner one names the process: Python's */
                if (n > 0 && *q == '(') return L_BAIL;
            }
        }
    }
    li->s = s;
    li->sn = n;
    if (n >= 5 && s[0] == '[' && memcmp(s + 1, "rank", 4) == 0) return L_BAIL;  /* torch's [rankN]: prefix */
    if (n >= 8 && memcmp(end - 8, "cluster]", 8) == 0) return L_BAIL;   /* Ray's [repeated Nx across cluster] */
    int L = n ? env_level(s, n) : 0;
    if (L < 0) return L_BAIL;
    if (L && s[L] == ' ') {
        /* vLLM: "LEVEL MM-DD HH:MM:SS [file.py:N] message" — anything else that starts like it is Python's */
        const char *p = s + L + 1;
        if (end - p < 16) return L_BAIL;
        li->lvl = s;
        li->L = L;
        li->space1 = 1;
        li->mo = two(p); li->dd = two(p + 3); li->hh = two(p + 6); li->mi = two(p + 9); li->ss = two(p + 12);
        if (li->mo < 1 || li->mo > 12 || li->dd < 1 || li->hh < 0 || li->hh > 23 || li->mi < 0 || li->mi > 59 ||
            li->ss < 0 || li->ss > 59 || p[2] != '-' || p[5] != ' ' || p[8] != ':' || p[11] != ':')
            return L_BAIL;
        if (li->dd > days_in(year, li->mo)) return L_BAIL;
        p += 14;
        /* fractional seconds ("18:31:27,123" / ".123456"): the Python path keeps them in the timestamp */
        if (*p == '.' || *p == ',') return L_BAIL;
        if (p >= end || *p != ' ') return L_BAIL;
        p++;
        if (p < end && *p == '[') p++;
        li->srcs = p;
        /* the source runs to the first ']' and ends in ':digits'; no whitespace in it */
        const char *q = p;
        while (q < end && *q != ']' && !uspace((const unsigned char *)q, (const unsigned char *)end)) q++;
        if (q >= end || *q != ']') return L_BAIL;
        const char *d = q;
        while (d > p && isdig(d[-1])) d--;
        if (d == q || d - p < 2 || d[-1] != ':') return L_BAIL;
        for (const char *k = p; k < q; k++) if ((unsigned char)*k >= 0x80) return L_BAIL;
        li->srcn = q - p;
        q++;
        if (q < end && *q == ' ') q++; else li->space1 = 0;
        li->msg = q;
        li->msgn = end - q;
        if (li->tab && li->tab < q) return L_BAIL;  /* a tab in the envelope: \s to Python's regexes */
        li->shape = L_ENV;
        return L_ENV;
    }
    if (li->tab) return L_BAIL;  /* uvicorn and raw lines with tabs: Python's */
    const char *um = uvicorn_msg(s, end, &li->lvl, &li->L);
    if (um) {
        li->msg = um;
        li->msgn = end - um;
        li->shape = L_UVI;
        return L_UVI;
    }
    li->msg = s;
    li->msgn = n;
    li->bracket = s[0] == '[';
    li->json = s[0] == '{' && end[-1] == '}';
    li->shape = L_RAW;
    return L_RAW;
}

/* ------------------------------------------------------------------ native post-processing
 *
 * Some patterns compute their fields in a Python ``post`` function (parsing/requests.py). For the busiest ones the
 * same computation is done here, on the message the template matched: each routine either gives exactly the regex's
 * and post's result, or declines (0) — then the registry classifies the line itself. Every place where the regex
 * engine's Unicode classes (\d, \w, \s, str.strip) could differ from an ASCII test declines. */
enum { POST_NONE = 0, POST_RECEIVED = 1, POST_GENERATED = 2, POST_ABORTED_MANY = 3 };
enum { PF_INT = 0, PF_STR = 1, PF_NULL = 2, PF_IDS = 3 };
static PyObject *PNAME[8];
static const char *PNAME_S[8] = {"max_tokens", "n", "prompt_tokens", "finish_reason", "streaming", "output_tokens", "request_ids", NULL};
enum { PN_MAXTOK = 0, PN_N, PN_PROMPT, PN_FINISH, PN_STREAMING, PN_OUTPUT, PN_IDS };

typedef struct {
    int n;
    struct { int name; int type; long long iv; Span sv; } f[4];
    int has_rid;
    Span rid;
} Post;

static int post_add_int(Post *po, int name, long long v) {
    po->f[po->n].name = name; po->f[po->n].type = PF_INT; po->f[po->n].iv = v; po->n++;
    return 1;
}

/* ASCII digits at s (\d+ greedy): the count, 0 none, -1 cannot tell (non-ASCII next to them) or too long */
static int digits_at(const char *s, const char *end, long long *v) {
    const char *p = s;
    if (p < end && (unsigned char)*p >= 0x80) return -1;
    while (p < end && isdig(*p)) p++;
    if (p < end && (unsigned char)*p >= 0x80) return -1;
    int k = (int)(p - s);
    if (k == 0) return 0;
    if (k > 18) return -1;
    long long x = 0;
    for (const char *q = s; q < p; q++) x = x * 10 + (*q - '0');
    *v = x;
    return k;
}

/* re.search(lit + r"(\d+)") (with \b before the literal when ``wordb``): 1 found (v), 0 none, -1 cannot tell */
static int search_int(const char *s, const char *end, const char *lit, int wordb, long long *v) {
    Py_ssize_t ln = (Py_ssize_t)strlen(lit);
    const char *p = s;
    while ((p = find_lit(p, end, lit, ln)) != NULL) {
        int ok = 1;
        if (wordb && p > s) {
            unsigned char b = (unsigned char)p[-1];
            if (b >= 0x80) return -1;
            if (isword(b)) ok = 0;
        }
        if (ok) {
            int k = digits_at(p + ln, end, v);
            if (k < 0) return -1;
            if (k > 0) return 1;
        }
        p++;
    }
    return 0;
}

/* requests._received on the body after "Received request <id>: " */
static int post_received(const Span *body, Post *po) {
    const char *s = body->s, *end = body->s + body->n;
    long long v;
    int r = search_int(s, end, "max_tokens=", 1, &v);
    if (r < 0) return 0;
    if (r) post_add_int(po, PN_MAXTOK, v);
    r = search_int(s, end, "SamplingParams(n=", 0, &v);
    if (r < 0) return 0;
    if (r) post_add_int(po, PN_N, v);
    r = search_int(s, end, "prompt_token_ids len: ", 0, &v);
    if (r < 0) return 0;
    if (r) { post_add_int(po, PN_PROMPT, v); return 1; }
    const char *q = find_lit(s, end, "prompt_token_ids: [", 19);
    if (!q) return 1;
    const char *a = q + 19, *b = (const char *)memchr(a, ']', end - a);
    if (!b) return 1;
    if (find_lit(a, b, "...", 3)) return 1;
    long long commas = 0;
    int any = 0;
    for (const char *c = a; c < b; c++) {
        unsigned char u = (unsigned char)*c;
        if (u >= 0x80) return 0;  /* str.strip() of Unicode whitespace */
        if (u == ',') commas++;
        if (u != ' ') any = 1;
    }
    post_add_int(po, PN_PROMPT, any ? commas + 1 : 0);
    return 1;
}

/* the tail of the generated-response regex from position p:
 * (?:, )?(?:output_token_ids: (\[[^\]]*\]|None))?(?:, )?(?:finish_reason: (\w+))?$  — tried in the regex engine's
 * order; 1 match (ids / fin set, .s NULL when the group did not take part), 0 none, -1 cannot tell */
static int gen_tail(const char *p, const char *end, Span *ids, Span *fin) {
    for (int a = 0; a < 2; a++) {
        const char *pa = p;
        if (a == 0) { if (end - pa >= 2 && pa[0] == ',' && pa[1] == ' ') pa += 2; else continue; }
        for (int b = 0; b < 3; b++) {
            const char *pb = pa;
            Span sid = {NULL, 0};
            if (b < 2) {
                if (!starts(pb, end - pb, "output_token_ids: ")) continue;
                const char *x = pb + 18;
                if (b == 0) {
                    if (x >= end || *x != '[') continue;
                    const char *y = (const char *)memchr(x, ']', end - x);
                    if (!y) continue;
                    sid.s = x; sid.n = y + 1 - x;
                    pb = y + 1;
                } else {
                    if (!starts(x, end - x, "None")) continue;
                    sid.s = x; sid.n = 4;
                    pb = x + 4;
                }
            }
            for (int c = 0; c < 2; c++) {
                const char *pc = pb;
                if (c == 0) { if (end - pc >= 2 && pc[0] == ',' && pc[1] == ' ') pc += 2; else continue; }
                for (int d = 0; d < 2; d++) {
                    const char *pd = pc;
                    Span sf = {NULL, 0};
                    if (d == 0) {
                        if (!starts(pd, end - pd, "finish_reason: ")) continue;
                        const char *w = pd + 15, *z = w;
                        while (z < end && isword((unsigned char)*z)) z++;
                        if (z < end && (unsigned char)*z >= 0x80) return -1;
                        if (z == w || z != end) continue;  /* \w+ must reach the end ($) */
                        sf.s = w; sf.n = z - w;
                        pd = z;
                    }
                    if (pd == end) { *ids = sid; *fin = sf; return 1; }
                }
            }
        }
    }
    return 0;
}

static inline const char *next_char(const char *p, const char *end) {
    p++;
    while (p < end && ((unsigned char)*p & 0xC0) == 0x80) p++;
    return p;
}

/* requests.req.generated's regex + requests._generated, on the text after "Generated response " */
static int post_generated(const Span *rest, Post *po) {
    const char *s = rest->s, *end = rest->s + rest->n;
    static const char *MODES[2] = {" (streaming delta)", " (streaming complete)"};
    /* (?P<request_id>\S+?) : lazy, one character at a time */
    for (const char *re = s; re < end;) {
        if (uspace((const unsigned char *)re, (const unsigned char *)end)) break;  /* \S */
        re = next_char(re, end);
        for (int m = 0; m < 3; m++) {
            const char *pm = re;
            int mode = -1;
            if (m < 2) { if (!starts(pm, end - pm, MODES[m])) continue; pm += strlen(MODES[m]); mode = m; }
            for (int dt = 0; dt < 2; dt++) {
                const char *pd = pm;
                if (dt == 0) { if (!starts(pd, end - pd, " details")) continue; pd += 8; }
                if (!starts(pd, end - pd, ": ")) continue;
                const char *r = pd + 2;
                Span ids = {NULL, 0}, fin = {NULL, 0};
                int ok = 0;
                if (starts(r, end - r, "output: ")) {
                    for (const char *o = r + 8; o <= end; o = next_char(o, end)) {  /* (?P<_out>.*?) lazy */
                        int g = gen_tail(o, end, &ids, &fin);
                        if (g < 0) return 0;
                        if (g) { ok = 1; break; }
                        if (o == end) break;
                    }
                }
                if (!ok) {
                    int g = gen_tail(r, end, &ids, &fin);
                    if (g < 0) return 0;
                    ok = g;
                }
                if (!ok) continue;
                po->has_rid = 1;
                po->rid.s = s; po->rid.n = re - s;
                if (fin.s) {
                    if (fin.n == 4 && memcmp(fin.s, "None", 4) == 0) { po->f[po->n].name = PN_FINISH; po->f[po->n].type = PF_NULL; }
                    else { po->f[po->n].name = PN_FINISH; po->f[po->n].type = PF_STR; po->f[po->n].sv = fin; }
                    po->n++;
                }
                po->f[po->n].name = PN_STREAMING;
                if (mode < 0) po->f[po->n].type = PF_NULL;
                else {
                    po->f[po->n].type = PF_STR;
                    po->f[po->n].sv.s = mode == 0 ? "delta" : "complete";
                    po->f[po->n].sv.n = mode == 0 ? 5 : 8;
                }
                po->n++;
                if (ids.s && !(ids.n == 4 && memcmp(ids.s, "None", 4) == 0)) {
                    /* ids.strip("[]").strip(): count the commas of what is left */
                    const char *a = ids.s, *b = ids.s + ids.n;
                    while (a < b && (*a == '[' || *a == ']')) a++;
                    while (b > a && (b[-1] == '[' || b[-1] == ']')) b--;
                    long long commas = 0;
                    int any = 0;
                    for (const char *c = a; c < b; c++) {
                        if ((unsigned char)*c >= 0x80) return 0;
                        if (*c == ',') commas++;
                        if (*c != ' ') any = 1;
                    }
                    post_add_int(po, PN_OUTPUT, any ? commas + 1 : 0);
                }
                return 1;
            }
        }
    }
    return 0;
}

/* requests.req.aborted_many: (?P<ids>.+?)\.?$ then the ids split on ',' and stripped */
static int post_aborted_many(const Span *rest, Post *po) {
    const char *s = rest->s, *end = rest->s + rest->n;
    if (end == s) return 0;
    for (const char *c = s; c < end; c++) if ((unsigned char)*c >= 0x80) return 0;
    Py_ssize_t n = end - s;
    if (n >= 2 && end[-1] == '.') n--;
    po->f[0].name = PN_IDS; po->f[0].type = PF_IDS; po->f[0].sv.s = s; po->f[0].sv.n = n;
    po->n = 1;
    /* one id: it is the event's request id */
    int k = 0;
    const char *one = NULL, *one_e = NULL;
    const char *a = s, *e = s + n;
    while (a <= e) {
        const char *c = (const char *)memchr(a, ',', e - a);
        const char *b = c ? c : e;
        const char *x = a, *y = b;
        while (x < y && *x == ' ') x++;
        while (y > x && y[-1] == ' ') y--;
        if (y > x) { k++; one = x; one_e = y; }
        if (!c) break;
        a = c + 1;
    }
    if (k == 1) { po->has_rid = 1; po->rid.s = one; po->rid.n = one_e - one; }
    return 1;
}

static int run_post(int post, const Entry *e, const Span *holes, Post *po) {
    memset(po, 0, sizeof *po);
    int last = 0;
    for (int j = 0; j < e->nparts; j++) if (e->parts[j].type != P_LIT) last++;
    const Span *rest = &holes[last - 1];  /* the template's last hole: the text the post reads */
    switch (post) {
    case POST_RECEIVED: return post_received(rest, po);
    case POST_GENERATED: return post_generated(rest, po);
    case POST_ABORTED_MANY: return post_aborted_many(rest, po);
    }
    return 0;
}

static int put_post_fields(Buf *b, const Post *po, int firstf) {
    for (int i = 0; i < po->n; i++) {
        const char *nm = PNAME_S[po->f[i].name];
        if ((!firstf && buf_put(b, ",", 1) < 0) || buf_put(b, "\"", 1) < 0 || buf_put(b, nm, (Py_ssize_t)strlen(nm)) < 0 ||
            buf_put(b, "\":", 2) < 0)
            return -1;
        firstf = 0;
        switch (po->f[i].type) {
        case PF_INT: if (buf_int(b, po->f[i].iv) < 0) return -1; break;
        case PF_NULL: if (buf_put(b, "null", 4) < 0) return -1; break;
        case PF_STR:
            if (buf_put(b, "\"", 1) < 0 || buf_esc(b, po->f[i].sv.s, po->f[i].sv.n) < 0 || buf_put(b, "\"", 1) < 0) return -1;
            break;
        case PF_IDS: {
            if (buf_put(b, "[", 1) < 0) return -1;
            const char *a = po->f[i].sv.s, *e = a + po->f[i].sv.n;
            int any = 0;
            while (a <= e) {
                const char *c = (const char *)memchr(a, ',', e - a);
                const char *bb = c ? c : e, *x = a, *y = bb;
                while (x < y && *x == ' ') x++;
                while (y > x && y[-1] == ' ') y--;
                if (y > x) {
                    if ((any && buf_put(b, ",", 1) < 0) || buf_put(b, "\"", 1) < 0 || buf_esc(b, x, y - x) < 0 || buf_put(b, "\"", 1) < 0)
                        return -1;
                    any = 1;
                }
                if (!c) break;
                a = c + 1;
            }
            if (buf_put(b, "]", 1) < 0) return -1;
            break;
        }
        }
    }
    return 0;
}

static int dict_post_fields(PyObject *d, const Post *po) {
    for (int i = 0; i < po->n; i++) {
        PyObject *v = NULL;
        switch (po->f[i].type) {
        case PF_INT: v = PyLong_FromLongLong(po->f[i].iv); break;
        case PF_NULL: v = Py_None; Py_INCREF(v); break;
        case PF_STR: v = PyUnicode_DecodeUTF8(po->f[i].sv.s, po->f[i].sv.n, NULL); break;
        case PF_IDS: {
            v = PyList_New(0);
            const char *a = po->f[i].sv.s, *e = a + po->f[i].sv.n;
            while (v && a <= e) {
                const char *c = (const char *)memchr(a, ',', e - a);
                const char *bb = c ? c : e, *x = a, *y = bb;
                while (x < y && *x == ' ') x++;
                while (y > x && y[-1] == ' ') y--;
                if (y > x) {
                    PyObject *s = PyUnicode_DecodeUTF8(x, y - x, NULL);
                    if (!s || PyList_Append(v, s) < 0) { Py_XDECREF(s); Py_CLEAR(v); break; }
                    Py_DECREF(s);
                }
                if (!c) break;
                a = c + 1;
            }
            break;
        }
        }
        if (!v) return -1;
        int r = PyDict_SetItem(d, PNAME[po->f[i].name], v);
        Py_DECREF(v);
        if (r < 0) return -1;
    }
    return 0;
}


/* The template entry an enveloped or uvicorn line's message matches (holes filled), or NULL: then the record is
 * classified by the registry itself (memo / Python). Entries are in the registry's dispatch order; a guard (a
 * pattern without a template) that may match, or a template whose literals are all there but which did not
 * match (the regex may still), ends the search: the registry decides. */
static const Entry *match_entry(const Table *t, const LI *li, Span *holes, Post *po) {
    int src = li->shape == L_ENV ? SRC_ENV : SRC_UVICORN;
    const char *msg = li->msg, *end = li->msg + li->msgn;
    for (int k = 0; k < t->n; k++) {
        const Entry *e = &t->e[k];
        if (e->etype == E_TMPL && e->src != src) continue;
        if (end - msg < e->prefix_len || (e->prefix_len && msg[0] != e->prefix[0]) || memcmp(msg, e->prefix, e->prefix_len) != 0) continue;
        if (e->etype == E_GUARD) {
            if (!e->contains || find_lit(msg, end, e->contains, e->contains_len)) return NULL;
            continue;
        }
        if (match_tmpl(e, msg, end, holes)) {
            if (e->post && !run_post(e->post, e, holes, po)) return NULL;  /* declined: the registry decides */
            return e;
        }
        int all = 1;
        for (int j = 1; j < e->nparts; j++)
            if (e->parts[j].type == P_LIT && e->parts[j].len && !find_lit(msg, end, e->parts[j].lit, e->parts[j].len)) { all = 0; break; }
        if (all) return NULL;
    }
    return NULL;
}


/* envelope.EXC_LINE: 1 match, 0 not, -1 cannot tell (non-ASCII in the name) */
static int exc_line(const char *s, Py_ssize_t n) {
    static const char *SUF[] = {"Error", "Exception", "Exit", "Interrupt", "Warning", "Failure", "Timeout", "Cancelled", "Fault"};
    Py_ssize_t i = 0, comp = 0;
    for (;;) {
        if (i >= n) return 0;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) return -1;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')) return 0;
        comp = i;
        i++;
        while (i < n && isword((unsigned char)s[i])) i++;
        if (i < n && (unsigned char)s[i] >= 0x80) return -1;
        if (i < n && s[i] == '.') { i++; continue; }
        break;
    }
    Py_ssize_t cl = i - comp;
    const char *cs = s + comp;
    /* Ray: "ray.exceptions.RayTaskError(RuntimeError): …" (as envelope.EXC_LINE) */
    if (i < n && s[i] == '(') {
        Py_ssize_t j = i + 1;
        if (j >= n) return 0;
        unsigned char c0 = (unsigned char)s[j];
        if (c0 >= 0x80) return -1;
        if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || c0 == '_')) return 0;
        while (j < n && (isword((unsigned char)s[j]) || s[j] == '.')) j++;
        if (j < n && (unsigned char)s[j] >= 0x80) return -1;
        if (j >= n || s[j] != ')') return 0;
        i = j + 1;
    }
    if (i < n && s[i] != ':') return 0;
    if (cl == 9 && memcmp(cs, "Exception", 9) == 0) return 1;
    for (size_t k = 0; k < sizeof SUF / sizeof *SUF; k++) {
        Py_ssize_t sl = (Py_ssize_t)strlen(SUF[k]);
        if (cl > sl && memcmp(cs + cl - sl, SUF[k], sl) == 0) return 1;
    }
    return 0;
}

/* envelope.is_tb_continuation: 1, 0, or -1 cannot tell */
static int tb_cont(const char *s, Py_ssize_t n) {
    if (n == 0) return 1;
    if (s[0] == ' ' || s[0] == '\t') return 1;
    static const char *TB[] = {"Traceback (most recent call last)", "During handling of the above exception",
                               "The above exception was the direct cause", "Stack (most recent call last)", "^", "~", "+", "|"};
    for (size_t k = 0; k < sizeof TB / sizeof *TB; k++) if (starts(s, n, TB[k])) return 1;
    return exc_line(s, n);
}

/* parser.PYWARN (\.py:\d+: \w*Warning: ) searched: 1, 0, -1 cannot tell */
static int pywarn(const char *s, Py_ssize_t n) {
    const char *end = s + n, *p = s;
    while ((p = find_lit(p, end, "Warning: ", 9)) != NULL) {
        const char *j = p;
        while (j > s && isword((unsigned char)j[-1])) j--;
        if (j > s && (unsigned char)j[-1] >= 0x80) return -1;
        if (j - s >= 2 && j[-2] == ':' && j[-1] == ' ') {
            const char *k = j - 2, *d = k;
            while (d > s && isdig(d[-1])) d--;
            if (d > s && (unsigned char)d[-1] >= 0x80) return -1;
            if (d < k && d - s >= 4 && memcmp(d - 4, ".py:", 4) == 0) return 1;
        }
        p++;
    }
    return 0;
}

static PyObject *LEVELS[6];  /* interned level names, by length of the level word and first letter */

static PyObject *level_str(const char *s, int L) {
    int k = s[0] == 'I' ? 0 : s[0] == 'D' ? 1 : s[0] == 'W' ? 2 : s[0] == 'E' ? 3 : s[0] == 'C' ? 4 : 5;
    if (!LEVELS[k]) {
        LEVELS[k] = PyUnicode_FromStringAndSize(s, L);
        if (!LEVELS[k]) return NULL;
        PyUnicode_InternInPlace(&LEVELS[k]);
    }
    Py_INCREF(LEVELS[k]);
    return LEVELS[k];
}

/* the digits of to_int over [0-9,]: 0 ok (dg/nd set, nd == 0 means "0"), 1 no digits (None), 2 too long */
static int int_digits(const char *s, Py_ssize_t n, char *dg, int *nd_out) {
    int nd = 0, any = 0;
    for (Py_ssize_t c = 0; c < n; c++) {
        char ch = s[c];
        if (ch == ',') continue;
        any = 1;
        if (nd == 0 && ch == '0') continue;
        if (nd >= 18) return 2;
        dg[nd++] = ch;
    }
    *nd_out = nd;
    return any ? 0 : 1;
}

/* to_float / to_ratio / to_seconds of a [0-9.,]+ run (+ ' '* 'ms'|'s' for seconds): 0 ok, 1 not a plain number */
static int native_double(const Part *p, const char *s, Py_ssize_t n, double *out) {
    char num[40];
    int k = 0;
    double mult = 1.0;
    Py_ssize_t c = 0;
    for (; c < n && k < 38; c++) {
        char ch = s[c];
        if (isdig(ch) || ch == '.') num[k++] = ch;
        else if (ch != ',') break;
    }
    if (c < n) {
        if (p->native_int != 4) return 1;
        while (c < n && s[c] == ' ') c++;
        if (n - c == 2 && s[c] == 'm' && s[c + 1] == 's') mult = 1e-3;
        else if (!(n - c == 1 && s[c] == 's')) return 1;
    }
    if (k == 0) return 1;
    num[k] = 0;
    char *endp = NULL;
    double v = PyOS_string_to_double(num, &endp, NULL);
    if (v == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 1; }
    if (!endp || *endp) return 1;
    if (p->native_int == 3) v = v / 100.0;
    else if (p->native_int == 4) v = v * mult;
    *out = v;
    return 0;
}

/* the Python value of a hole for Event.fields (new reference): the pattern's converter, natively when it is
 * one of the catalogue's number converters, else through a memo of the Python converter */
static PyObject *hole_value(const Part *p, const char *s, Py_ssize_t n) {
    if (p->is_str) return PyUnicode_FromStringAndSize(s, n);
    if (p->native_int == 1) {
        char dg[24];
        int nd;
        int r = int_digits(s, n, dg, &nd);
        if (r == 1) Py_RETURN_NONE;
        if (r == 0) {
            long long v = 0;
            for (int i = 0; i < nd; i++) v = v * 10 + (dg[i] - '0');
            return PyLong_FromLongLong(v);
        }
    } else if (p->native_int >= 2) {
        double v;
        if (native_double(p, s, n, &v) == 0) return PyFloat_FromDouble(v);
    }
    PyObject *key = PyUnicode_FromStringAndSize(s, n);
    if (!key) return NULL;
    PyObject *v = PyDict_GetItemWithError(p->values, key);
    if (v) { Py_INCREF(v); Py_DECREF(key); return v; }
    if (PyErr_Occurred()) { Py_DECREF(key); return NULL; }
    v = PyObject_CallOneArg(p->conv, key);
    if (v) {
        if (PyDict_GET_SIZE(p->values) >= 65536) PyDict_Clear(p->values);
        if (PyDict_SetItem(p->values, key, v) < 0) { Py_DECREF(v); v = NULL; }
    }
    Py_DECREF(key);
    return v;
}

/* the JSON text of a non-string field (JSON mode): 0 written, 1 the converter declined (the Python path takes
 * the line), -1 error. to_int natively; cached values; to_float/to_ratio/to_seconds natively when Python's repr
 * has no exponent (orjson then writes the same); else the memo dict, whose __missing__ runs the converter */
static int write_number(Buf *b, const Part *p, const char *s, Py_ssize_t n) {
    if (p->native_int == 1) {
        char dg[24];
        int nd;
        int r = int_digits(s, n, dg, &nd);
        if (r == 1) return buf_put(b, "null", 4);
        if (r == 0) return nd == 0 ? buf_put(b, "0", 1) : buf_put(b, dg, nd);
    }
    struct MemoSlot *slot = n <= 22 ? &p->cache[slot_of(s, n)] : NULL;
    if (slot && slot->rawn == n && slot->jsonn && memcmp(slot->raw, s, n) == 0) return buf_put(b, slot->json, slot->jsonn);
    double v;
    if (p->native_int >= 2 && native_double(p, s, n, &v) == 0) {
        char *r = PyOS_double_to_string(v, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (!r) return -1;
        size_t rn = strlen(r);
        int plain = rn < 40 && !strpbrk(r, "eni");  /* no exponent, inf or nan */
        int rc = 0;
        if (plain) {
            rc = buf_put(b, r, (Py_ssize_t)rn);
            if (rc == 0 && slot) {
                memcpy(slot->raw, s, n); slot->rawn = (unsigned char)n;
                memcpy(slot->json, r, rn); slot->jsonn = (unsigned char)rn;
            }
        }
        PyMem_Free(r);
        if (plain) return rc;
    }
    PyObject *key = PyUnicode_DecodeUTF8(s, n, NULL);
    if (!key) return -1;
    PyObject *val = PyObject_GetItem(p->memo, key);
    Py_DECREF(key);
    if (!val) return -1;
    if (val == Py_None) { Py_DECREF(val); return 1; }
    Py_ssize_t vn;
    const char *vs = PyUnicode_AsUTF8AndSize(val, &vn);
    int rc = (!vs || buf_put(b, vs, vn) < 0) ? -1 : 0;
    if (rc == 0 && slot && vn > 0 && vn <= 40) {
        memcpy(slot->raw, s, n); slot->rawn = (unsigned char)n;
        memcpy(slot->json, vs, vn); slot->jsonn = (unsigned char)vn;
    }
    Py_DECREF(val);
    return rc;
}

/* ------------------------------------------------------------------ records and their classification memo
 *
 * The scanner groups lines into records exactly as LineParser._run does (continuation rules mirrored below; where
 * Python's answer needs the registry — "does this message match a pattern?" — it asks Python through a hook). A
 * record's classification (kind, request id, fields, template) depends only on its shape, level and messages, so it
 * is memoised by that key: a record seen before (the same warning, the same traceback) costs a hash lookup; a new
 * one is classified by the parser's own Python code (hook), once. Single-line records whose message matches a fast
 * template are written from the template directly. */

static PyObject *HOOK_CLASSIFY, *HOOK_MSG_MATCH, *HOOK_RAW_MATCH;

typedef struct MEnt {
    uint64_t h;
    char *key;
    Py_ssize_t klen;
    char *frag;        /* ',"kind":…,"request_id":…,"fields":{…}' */
    Py_ssize_t flen;
    PyObject *kind, *pattern, *rid, *fields, *tmpl, *lvl_none, *tkey;
    long hits;         /* in the current scan */
    Py_ssize_t first;  /* first line of the current scan's hits */
    int touched;
} MEnt;

#define MEMO_SLOTS (1 << 17)
#define MEMO_MAX_ENTRIES (1 << 16)
#define MEMO_MAX_BYTES (48L << 20)
static MEnt **MEMO;
static long memo_n, memo_bytes, memo_hits_total, memo_miss_total;
static int memo_full;

static void ment_free(MEnt *m) {
    if (!m) return;
    PyMem_Free(m->key); PyMem_Free(m->frag);
    Py_XDECREF(m->kind); Py_XDECREF(m->pattern); Py_XDECREF(m->rid); Py_XDECREF(m->fields); Py_XDECREF(m->tmpl);
    Py_XDECREF(m->lvl_none); Py_XDECREF(m->tkey);
    PyMem_Free(m);
}
static void memo_clear_all(void) {
    if (!MEMO) return;
    for (long i = 0; i < MEMO_SLOTS; i++) { ment_free(MEMO[i]); MEMO[i] = NULL; }
    memo_n = memo_bytes = 0;
    memo_full = 0;
}
static inline uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        h = (h ^ x) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
    h ^= h >> 32;
    return h ? h : 1;
}
static MEnt *memo_get(uint64_t h, const char *k, Py_ssize_t n) {
    if (!MEMO) return NULL;
    for (long i = (long)(h & (MEMO_SLOTS - 1)), probe = 0; probe < MEMO_SLOTS; probe++, i = (i + 1) & (MEMO_SLOTS - 1)) {
        MEnt *m = MEMO[i];
        if (!m) return NULL;
        if (m->h == h && m->klen == n && memcmp(m->key, k, n) == 0) return m;
    }
    return NULL;
}
static int memo_put(MEnt *m) {  /* 1 stored (owned by the memo), 0 not (full: the caller keeps it) */
    if (!MEMO) {
        MEMO = (MEnt **)PyMem_Calloc(MEMO_SLOTS, sizeof(MEnt *));
        if (!MEMO) return 0;
    }
    if (memo_n >= MEMO_MAX_ENTRIES || memo_bytes + m->klen + m->flen > MEMO_MAX_BYTES) { memo_full = 1; return 0; }
    long i = (long)(m->h & (MEMO_SLOTS - 1));
    while (MEMO[i]) i = (i + 1) & (MEMO_SLOTS - 1);
    MEMO[i] = m;
    memo_n++;
    memo_bytes += m->klen + m->flen + (long)sizeof(MEnt);
    return 1;
}

/* classify a record's key through the parser's own Python code (parser._c_classify): a new entry */
static MEnt *classify_key(const char *k, Py_ssize_t n, uint64_t h, int *cache) {
    if (!HOOK_CLASSIFY) { PyErr_SetString(PyExc_RuntimeError, "_speedups: no classify hook"); return NULL; }
    PyObject *ks = PyUnicode_DecodeUTF8(k, n, NULL);
    if (!ks) return NULL;
    PyObject *r = PyObject_CallOneArg(HOOK_CLASSIFY, ks);
    Py_DECREF(ks);
    if (!r) return NULL;
    /* (kind, pattern, rid, fields, tmpl, level_if_none, frag: bytes, tkey, cache: bool) */
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 9 || !PyBytes_Check(PyTuple_GET_ITEM(r, 6))) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "_speedups: bad classify result");
        return NULL;
    }
    MEnt *m = (MEnt *)PyMem_Calloc(1, sizeof(MEnt));
    if (!m) { Py_DECREF(r); PyErr_NoMemory(); return NULL; }
    m->h = h;
    m->klen = n;
    m->key = (char *)PyMem_Malloc(n ? n : 1);
    PyObject *fb = PyTuple_GET_ITEM(r, 6);
    m->flen = PyBytes_GET_SIZE(fb);
    m->frag = (char *)PyMem_Malloc(m->flen ? m->flen : 1);
    if (!m->key || !m->frag) { ment_free(m); Py_DECREF(r); PyErr_NoMemory(); return NULL; }
    memcpy(m->key, k, n);
    memcpy(m->frag, PyBytes_AS_STRING(fb), m->flen);
    PyObject **dst[] = {&m->kind, &m->pattern, &m->rid, &m->fields, &m->tmpl, &m->lvl_none};
    for (int i = 0; i < 6; i++) { *dst[i] = PyTuple_GET_ITEM(r, i); Py_INCREF(*dst[i]); }
    m->tkey = PyTuple_GET_ITEM(r, 7);
    Py_INCREF(m->tkey);
    *cache = PyObject_IsTrue(PyTuple_GET_ITEM(r, 8));
    Py_DECREF(r);
    return m;
}

/* ask the registry (MESSAGES.match / RAW.match) whether a message matches a pattern: 1, 0, -1 error */
static int hook_bool(PyObject *hook, const char *s, Py_ssize_t n) {
    if (!hook) { PyErr_SetString(PyExc_RuntimeError, "_speedups: no match hook"); return -1; }
    PyObject *ms = PyUnicode_DecodeUTF8(s, n, NULL);
    if (!ms) return -1;
    PyObject *r = PyObject_CallOneArg(hook, ms);
    Py_DECREF(ms);
    if (!r) return -1;
    int v = PyObject_IsTrue(r);
    Py_DECREF(r);
    return v;
}

/* the record being assembled: a C record (lines [start, …) of the source), or the Python parser's open record
 * (``pending``: only its continuation state is known here) */
typedef struct {
    int active;        /* 0 none, 1 C record, 2 the Python parser's open record */
    int shape;         /* L_ENV / L_UVI / L_RAW */
    const char *proc; Py_ssize_t procn;
    const char *lvl; Py_ssize_t L;        /* NULL: no level */
    int mo, hh, mi, ss, frac_none;
    const char *src; Py_ssize_t srcn;
    int tb, has_exc, cont, raw_cont;
    /* C record */
    Py_ssize_t start, next;               /* cursor of its first line; of the line after its last */
    Py_ssize_t lineno;                    /* line number of its first line */
    int nlines;
    LI first;                             /* its first line */
    const char *line0; Py_ssize_t line0n; /* its first physical line */
    const Entry *tmpl;                    /* single-line record matching a fast template */
    Span holes[MAXH];
    Post post;                            /* its native post-processing result */
    int quotes;
    Py_ssize_t text_bytes;
    char ts_json[48]; Py_ssize_t ts_json_n;
    PyObject *ts_obj;                     /* Event mode: its timestamp (borrowed from the scanner's state) */
    int lt[5];                            /* committed timestamp state after this record's lines */
    int lt_set;
} Rec;

static inline int proc_eq(const Rec *r, const LI *li) {
    if (!r->proc || !li->proc) return !r->proc && !li->proc;
    return r->procn == li->procn && memcmp(r->proc, li->proc, li->procn) == 0;
}

/* LineParser._raw_continues: 1, 0, -1 error */
static int raw_continues(const Rec *r, const char *s, Py_ssize_t n) {
    switch (r->raw_cont) {
    case 1: return n >= 2 && s[0] == ' ' && s[1] == ' ' && !starts(s, n, "  File ");
    case 2: return starts(s, n, " - ") || starts(s, n, "nanobind: ");
    case 4: return starts(s, n, "Exception raised from ") || starts(s, n, "frame #") || starts(s, n, "  what():  ");
    case 5: return starts(s, n, "handle: <");
    }
    if (all_ws(s, n) || starts(s, n, "Traceback") || starts(s, n, "Process ")) return 0;
    const char *lv; int L;
    if (uvicorn_msg(s, s + n, &lv, &L)) return 0;
    int m = hook_bool(HOOK_RAW_MATCH, s, n);
    return m < 0 ? -1 : !m;
}

/* Does line ``li`` continue record ``r``? 1 yes, 2 yes and the record becomes a traceback, 0 no (it starts a new
 * record), -1 cannot tell here (a non-ASCII ambiguity) → the Python path, -2 error. Mirrors LineParser._run. */
static int continues_rec(const Rec *r, const LI *li, int prev_cr) {
    if (li->shape == L_ENV) {
        if (r->shape != L_ENV || !proc_eq(r, li)) return 0;
        const char *msg = li->msg;
        Py_ssize_t mn = li->msgn;
        int lvl_eq = r->lvl && r->L == li->L && memcmp(r->lvl, li->lvl, li->L) == 0;
        int src_eq = r->src && r->srcn == li->srcn && memcmp(r->src, li->srcs, li->srcn) == 0;
        int same = lvl_eq && src_eq && r->frac_none && r->mo == li->mo && r->hh == li->hh && r->mi == li->mi && r->ss == li->ss;
        if (prev_cr && same) return 1;  /* the line before ended in '\r': the same record goes on */
        if (lvl_eq && src_eq && (r->tb || starts(msg, mn, "Traceback"))) {
            int t = tb_cont(msg, mn);
            if (t) return t;  /* 1, or -1 */
        }
        int key_eq = lvl_eq && src_eq && r->frac_none && r->mo == li->mo && r->hh == li->hh && r->mi == li->mi && r->ss == li->ss;
        if (!key_eq) return 0;
        if (mn && (msg[0] == ' ' || msg[0] == '\t')) return 1;
        if (r->tb && r->has_exc) {  /* the rest of a multi-line exception message: unless a pattern knows the line */
            int m = hook_bool(HOOK_MSG_MATCH, msg, mn);
            return m < 0 ? -2 : !m;
        }
        return 0;
    }
    /* no envelope (uvicorn lines included: Python tries them as continuations first) */
    if (li->json) return -1;  /* a JSON record line: Python's */
    const char *s = li->s;
    Py_ssize_t n = li->sn;
    int proc_ok = !li->proc || (r->proc && proc_eq(r, li));
    if (r->raw_cont && proc_ok) {
        int k = raw_continues(r, s, n);
        if (k < 0) return -2;
        if (k) return 1;
    }
    if (r->tb && proc_ok) {
        int t = tb_cont(s, n);
        if (t) return t;
    }
    if (r->cont && proc_ok && starts(s, n, "Traceback")) return 2;
    return 0;
}

/* an enveloped line with a tab in its message (li->tab) is taken only where the Python path's answer does not hang on
 * what a tab is to a regex: it continues the open C record as the next line of a '\r'-continued record of the same key
 * (vLLM's NewLineFormatter: ompmultiprocessing's "\tlocal_rank=0, core ids=[0]" lines) or as an indented line (leading
 * space or tab: is_tb_continuation and the indented-line rule) — and, a traceback's line, only indented (the exception
 * line parser never reads it). 1 take it, 0 leave it to Python. */
static int tab_continues(const Rec *r, const LI *li, int prev_cr) {
    if (r->active != 1 || li->shape != L_ENV || r->shape != L_ENV) return 0;
    const char *msg = li->msg;
    Py_ssize_t mn = li->msgn;
    int ws = mn && (msg[0] == ' ' || msg[0] == '\t');
    if (!ws && (r->tb || starts(msg, mn, "Traceback"))) return 0;
    int same = proc_eq(r, li) && r->lvl && r->L == li->L && memcmp(r->lvl, li->lvl, li->L) == 0 && r->src &&
               r->srcn == li->srcn && memcmp(r->src, li->srcs, li->srcn) == 0 && r->frac_none && r->mo == li->mo &&
               r->hh == li->hh && r->mi == li->mi && r->ss == li->ss;
    if (!(ws || (prev_cr && same))) return 0;
    return continues_rec(r, li, prev_cr) == 1;
}

/* one Event (Event mode) of a template line: file, line, line_end, ts, level, process, source, kind, request_id,
 * fields, text, pattern, template, ts_inherited */
static PyObject *build_event(PyObject *cls, PyObject *file, Py_ssize_t lineno, PyObject *ts, const char *s, Py_ssize_t n,
                             PyObject *line_obj, const LI *in, const Entry *hit, const Span *holes, const Post *po,
                             int keep_text, PyObject **src_cache, const char **src_cache_s, Py_ssize_t *src_cache_n) {
    PyObject *ln = NULL, *lvl = NULL, *srco = NULL, *rid = NULL, *fields = NULL, *text = NULL, *ev = NULL;
    PyObject *proc = NULL;
    ln = PyLong_FromSsize_t(lineno);
    lvl = level_str(in->lvl, in->L);
    if (!ln || !lvl) goto done;
    if (in->proc) {
        proc = PyUnicode_DecodeUTF8(in->proc, in->procn, NULL);
        if (!proc) goto done;
    }
    if (in->shape == L_ENV) {
        if (*src_cache && *src_cache_n == in->srcn && memcmp(*src_cache_s, in->srcs, in->srcn) == 0) {
            srco = *src_cache;
            Py_INCREF(srco);
        } else {
            srco = PyUnicode_FromStringAndSize(in->srcs, in->srcn);
            if (!srco) goto done;
            Py_XDECREF(*src_cache);
            *src_cache = srco;
            Py_INCREF(srco);
            *src_cache_s = in->srcs;
            *src_cache_n = in->srcn;
        }
    } else {
        srco = Py_None;
        Py_INCREF(srco);
    }
    fields = PyDict_New();
    if (!fields) goto done;
    int h = 0;
    for (int j = 0; j < hit->nparts; j++) {
        const Part *p = &hit->parts[j];
        if (p->type == P_LIT) continue;
        Span sp = holes[h++];
        if (p->is_rid) {
            rid = PyUnicode_DecodeUTF8(sp.s, sp.n, NULL);
            if (!rid) goto done;
            continue;
        }
        if (!p->name) continue;
        PyObject *v = hole_value(p, sp.s, sp.n);
        if (!v) goto done;
        int r = PyDict_SetItem(fields, p->name, v);
        Py_DECREF(v);
        if (r < 0) goto done;
    }
    if (hit->post) {
        if (dict_post_fields(fields, po) < 0) goto done;
        if (po->has_rid) {
            Py_XDECREF(rid);
            rid = PyUnicode_DecodeUTF8(po->rid.s, po->rid.n, NULL);
            if (!rid) goto done;
        }
    }
    if (!rid) { rid = Py_None; Py_INCREF(rid); }
    if (!keep_text) text = PyUnicode_FromStringAndSize("", 0);
    else if (line_obj) { text = line_obj; Py_INCREF(text); }
    else text = PyUnicode_DecodeUTF8(s, n, NULL);
    if (!text) goto done;
    {
        PyObject *args[14] = {file, ln, ln, ts ? ts : Py_None, lvl, proc ? proc : Py_None, srco, hit->kind, rid, fields, text,
                              hit->pattern_id, Py_None, in->shape == L_UVI ? Py_True : Py_False};
        ev = PyObject_Vectorcall(cls, args, 14, NULL);
    }
done:
    Py_XDECREF(ln); Py_XDECREF(lvl); Py_XDECREF(proc); Py_XDECREF(srco); Py_XDECREF(rid); Py_XDECREF(fields); Py_XDECREF(text);
    return ev;
}

/* '{"file":…,"line":N,"line_end":M,"ts":…,"level":…,"process":…,"source":…' of a record */
static int put_head(Buf *b, const Buf *head, Py_ssize_t line, Py_ssize_t line_end, const char *ts, Py_ssize_t tsn,
                    const char *lvl, Py_ssize_t L, const char *lvl_json, const char *proc, Py_ssize_t procn,
                    const char *src, Py_ssize_t srcn) {
    if (buf_put(b, head->p, head->n) < 0 || buf_int(b, line) < 0 || buf_put(b, ",\"line_end\":", 12) < 0 || buf_int(b, line_end) < 0 ||
        buf_put(b, ",\"ts\":", 6) < 0 || buf_put(b, ts, tsn) < 0 || buf_put(b, ",\"level\":", 9) < 0)
        return -1;
    if (lvl) {
        if (buf_put(b, "\"", 1) < 0 || buf_put(b, lvl, L) < 0 || buf_put(b, "\"", 1) < 0) return -1;
    } else if (buf_put(b, lvl_json, (Py_ssize_t)strlen(lvl_json)) < 0) return -1;
    if (buf_put(b, ",\"process\":", 11) < 0) return -1;
    if (proc) {
        if (buf_put(b, "\"", 1) < 0 || buf_esc(b, proc, procn) < 0 || buf_put(b, "\"", 1) < 0) return -1;
    } else if (buf_put(b, "null", 4) < 0) return -1;
    if (buf_put(b, ",\"source\":", 10) < 0) return -1;
    if (src) {
        if (buf_put(b, "\"", 1) < 0 || buf_esc(b, src, srcn) < 0 || buf_put(b, "\"", 1) < 0) return -1;
    } else if (buf_put(b, "null", 4) < 0) return -1;
    return 0;
}

/* the JSON line of a template record: 0 written, 1 a converter declined (classify it instead), -1 error */
static int put_template(Buf *b, const Buf *head, Py_ssize_t lineno, const char *ts, Py_ssize_t tsn, const LI *in,
                        const Entry *hit, const Span *holes, const Post *po, const char *s, Py_ssize_t n, int keep_text) {
    Py_ssize_t mark = b->n;
    if (put_head(b, head, lineno, lineno, ts, tsn, in->lvl, in->L, NULL, in->proc, in->procn,
                 in->shape == L_ENV ? in->srcs : NULL, in->srcn) < 0)
        return -1;
    if (buf_put(b, hit->kind_json, hit->kind_json_len) < 0) return -1;
    int h = 0, have_rid = 0;
    if (hit->post && po->has_rid) {
        if (buf_put(b, "\"", 1) < 0 || buf_esc(b, po->rid.s, po->rid.n) < 0 || buf_put(b, "\"", 1) < 0) return -1;
        have_rid = 1;
    }
    for (int j = 0; j < hit->nparts && !have_rid; j++) {
        const Part *p = &hit->parts[j];
        if (p->type == P_LIT) continue;
        if (p->is_rid) {
            if (buf_put(b, "\"", 1) < 0 || buf_esc(b, holes[h].s, holes[h].n) < 0 || buf_put(b, "\"", 1) < 0) return -1;
            have_rid = 1;
        }
        h++;
    }
    if (!have_rid && buf_put(b, "null", 4) < 0) return -1;
    if (buf_put(b, ",\"fields\":{", 11) < 0) return -1;
    h = 0;
    int firstf = 1;
    for (int j = 0; j < hit->nparts; j++) {
        const Part *p = &hit->parts[j];
        if (p->type == P_LIT) continue;
        Span sp = holes[h++];
        if (!p->key) continue;
        if (buf_put(b, p->key + firstf, p->keylen - firstf) < 0) return -1;
        firstf = 0;
        if (p->is_str) {
            if (buf_put(b, "\"", 1) < 0 || buf_esc(b, sp.s, sp.n) < 0 || buf_put(b, "\"", 1) < 0) return -1;
            continue;
        }
        int r = write_number(b, p, sp.s, sp.n);
        if (r < 0) return -1;
        if (r > 0) { b->n = mark; return 1; }
    }
    if (hit->post && put_post_fields(b, po, firstf) < 0) return -1;
    if (buf_put(b, "},\"text\":\"", 10) < 0 || (keep_text && (in->quotes ? buf_esc(b, s, n) : buf_put(b, s, n)) < 0) ||
        buf_put(b, "\"}\n", 3) < 0)
        return -1;
    return 0;
}

/* Where the lines come from: a list of str (cursor = index) or one bytes buffer of '\n'-separated lines
 * (cursor = byte offset of a line's start; past the last line = length + 1). Bytes are UTF-8-checked per line
 * (an invalid line is left to Python, which decodes it with replacement and counts it). */
typedef struct {
    PyObject *list;
    Py_ssize_t nlines;
    const char *buf;
    Py_ssize_t blen;
} Src;

static inline const char *line_utf8(PyObject *o, Py_ssize_t *n) {
    if (!PyUnicode_Check(o)) return NULL;
    if (PyUnicode_IS_COMPACT_ASCII(o)) { *n = PyUnicode_GET_LENGTH(o); return (const char *)PyUnicode_DATA(o); }
    const char *s = PyUnicode_AsUTF8AndSize(o, n);
    if (!s) PyErr_Clear();
    return s;
}

static inline int src_line(const Src *src, Py_ssize_t cur, const char **s, Py_ssize_t *n, Py_ssize_t *next, int *ok) {
    *ok = 1;
    if (src->list) {
        if (cur >= src->nlines) return 0;
        *s = line_utf8(PyList_GET_ITEM(src->list, cur), n);
        if (!*s) *ok = 0;
        *next = cur + 1;
        return 1;
    }
    if (cur > src->blen) return 0;
    const char *b = src->buf + cur;
    const char *e = (const char *)memchr(b, '\n', src->blen - cur);
    Py_ssize_t le = e ? e - src->buf : src->blen;
    *s = b;
    *n = le - cur;
    *next = le + 1;
    return 1;
}

/* the text of a record: its physical lines joined by '\n' — as a JSON string body when ``json`` (the newline
 * escaped, quotes and backslashes too when ``esc``), else as is */
static int put_text(Buf *b, const Src *src, const Rec *r, int esc, int json) {
    Py_ssize_t pos = r->start;  /* bytes: the record's lines are contiguous from its start */
    for (Py_ssize_t i = 0; i < r->nlines; i++) {
        Py_ssize_t n;
        const char *s;
        if (src->buf) {
            if (i == 0 && r->nlines == 1) { s = r->line0; n = r->line0n; }
            else {
                s = src->buf + pos;
                const char *e = (const char *)memchr(s, '\n', src->blen - pos);
                n = e ? e - s : src->blen - pos;
                pos += n + 1;
            }
        } else {
            s = line_utf8(PyList_GET_ITEM(src->list, r->start + i), &n);
            if (!s) return -1;
        }
        while (n && s[n - 1] == '\r') n--;
        if (i && buf_put(b, json ? "\\n" : "\n", json ? 2 : 1) < 0) return -1;
        if ((esc ? buf_esc(b, s, n) : buf_put(b, s, n)) < 0) return -1;
    }
    return 0;
}

static PyObject *text_obj(const Src *src, const Rec *r) {
    if (src->list && r->nlines == 1 && r->line0n == PyUnicode_GET_LENGTH(PyList_GET_ITEM(src->list, r->start)) &&
        PyUnicode_IS_COMPACT_ASCII(PyList_GET_ITEM(src->list, r->start))) {
        PyObject *o = PyList_GET_ITEM(src->list, r->start);
        Py_INCREF(o);
        return o;
    }
    Buf t = {NULL, NULL, 0, 0};
    if (put_text(&t, src, r, 0, 0) < 0) { buf_free(&t); return NULL; }
    PyObject *o = PyUnicode_DecodeUTF8(t.p ? t.p : "", t.n, NULL);
    buf_free(&t);
    return o;
}

/* the memo key of a C record: shape, level, then its messages, '\n'-separated (no line holds a control character) */
static int key_start(Buf *k, const LI *li) {
    k->n = 0;
    char sh = li->shape == L_ENV ? 'E' : li->shape == L_UVI ? 'U' : 'R';
    if (buf_put(k, &sh, 1) < 0) return -1;
    if (li->shape != L_RAW && buf_put(k, li->lvl, li->L) < 0) return -1;
    if (buf_put(k, "\n", 1) < 0) return -1;
    return buf_put(k, li->msg, li->msgn);
}

typedef struct {
    PyObject *hits;    /* list of (kind, tkey, n, first_line) for the records classified this scan */
    MEnt **touched;
    Py_ssize_t ntouched, cap;
} Hits;

static int hits_touch(Hits *hs, MEnt *m, Py_ssize_t line) {
    if (!m->touched) {
        if (hs->ntouched == hs->cap) {
            Py_ssize_t cap = hs->cap ? 2 * hs->cap : 64;
            MEnt **t = (MEnt **)PyMem_Realloc(hs->touched, cap * sizeof(MEnt *));
            if (!t) { PyErr_NoMemory(); return -1; }
            hs->touched = t;
            hs->cap = cap;
        }
        hs->touched[hs->ntouched++] = m;
        m->touched = 1;
        m->hits = 0;
        m->first = line;
    }
    m->hits++;
    return 0;
}
static int hits_one(Hits *hs, MEnt *m, Py_ssize_t line) {  /* an entry that is not kept in the memo */
    PyObject *t = Py_BuildValue("(OOnn)", m->kind, m->tkey, (Py_ssize_t)1, line);
    if (!t) return -1;
    int r = PyList_Append(hs->hits, t);
    Py_DECREF(t);
    return r;
}
static int hits_flush(Hits *hs) {
    int err = 0;
    for (Py_ssize_t i = 0; i < hs->ntouched; i++) {
        MEnt *m = hs->touched[i];
        if (!err) {
            PyObject *t = Py_BuildValue("(OOln)", m->kind, m->tkey, m->hits, m->first);
            if (!t || PyList_Append(hs->hits, t) < 0) err = 1;
            Py_XDECREF(t);
        }
        m->touched = 0;
        m->hits = 0;
    }
    hs->ntouched = 0;
    return err ? -1 : 0;
}

typedef struct {
    /* scan-wide state */
    const Table *t;
    Src src;
    int mode, keep_text, year;
    Buf b, head, key;
    PyObject *events, *event_cls, *file_str;
    long *counts;
    Hits hs;
    PyObject *src_cache; const char *src_cache_s; Py_ssize_t src_cache_n;
} Scan;

/* write (or count, or build the Event of) a finished C record: 0 done, -1 error */
static int emit_rec(Scan *sc, Rec *r) {
    const LI *in = &r->first;
    if (r->nlines == 1 && r->tmpl) {
        const Entry *hit = r->tmpl;
        if (sc->mode == 1) {
            int w = put_template(&sc->b, &sc->head, r->lineno, r->ts_json, r->ts_json_n, in, hit, r->holes, &r->post, r->line0,
                                 r->line0n, sc->keep_text);
            if (w < 0) return -1;
            if (w == 0) { sc->counts[hit->index]++; return 0; }
            /* a converter declined: the registry classifies the line (below) */
        } else {
            if (sc->mode == 0) {
                PyObject *ev = build_event(sc->event_cls, sc->file_str, r->lineno, r->ts_obj, r->line0, r->line0n,
                                           sc->src.list && !in->cr ? PyList_GET_ITEM(sc->src.list, r->start) : NULL, in, hit, r->holes,
                                           &r->post, sc->keep_text, &sc->src_cache, &sc->src_cache_s, &sc->src_cache_n);
                if (!ev) return -1;
                int a = PyList_Append(sc->events, ev);
                Py_DECREF(ev);
                if (a < 0) return -1;
            }
            sc->counts[hit->index]++;
            return 0;
        }
    }
    uint64_t h = hash_bytes(sc->key.p, sc->key.n);
    MEnt *m = memo_get(h, sc->key.p, sc->key.n);
    int kept = 1;
    if (m) memo_hits_total++;
    else {
        int cache = 0;
        m = classify_key(sc->key.p, sc->key.n, h, &cache);
        if (!m) return -1;
        memo_miss_total++;
        kept = cache && memo_put(m);
    }
    Py_ssize_t line_end = r->lineno + r->nlines - 1;
    int rc = 0;
    if (sc->mode == 1) {
        const char *lj = m->lvl_none == Py_None ? "null" : "\"ERROR\"";
        if (put_head(&sc->b, &sc->head, r->lineno, line_end, r->ts_json, r->ts_json_n, r->shape == L_RAW ? NULL : in->lvl,
                     in->L, lj, in->proc, in->procn, r->shape == L_ENV ? in->srcs : NULL, in->srcn) < 0 ||
            buf_put(&sc->b, m->frag, m->flen) < 0 || buf_put(&sc->b, ",\"text\":\"", 9) < 0 ||
            (sc->keep_text && put_text(&sc->b, &sc->src, r, r->quotes, 1) < 0) || buf_put(&sc->b, "\"}\n", 3) < 0)
            rc = -1;
    } else if (sc->mode == 0) {
        PyObject *ln = PyLong_FromSsize_t(r->lineno), *le = PyLong_FromSsize_t(line_end);
        PyObject *lvl = r->shape == L_RAW ? (Py_INCREF(m->lvl_none), m->lvl_none) : level_str(in->lvl, in->L);
        PyObject *proc = in->proc ? PyUnicode_DecodeUTF8(in->proc, in->procn, NULL) : (Py_INCREF(Py_None), Py_None);
        PyObject *srco = r->shape == L_ENV ? PyUnicode_FromStringAndSize(in->srcs, in->srcn) : (Py_INCREF(Py_None), Py_None);
        PyObject *fields = PyDict_Copy(m->fields);
        PyObject *text = sc->keep_text ? text_obj(&sc->src, r) : PyUnicode_FromStringAndSize("", 0);
        PyObject *ev = NULL;
        if (ln && le && lvl && proc && srco && fields && text) {
            PyObject *a[14] = {sc->file_str, ln, le, r->ts_obj ? r->ts_obj : Py_None, lvl, proc, srco, m->kind, m->rid, fields,
                               text, m->pattern, m->tmpl, r->shape == L_ENV ? Py_False : Py_True};
            ev = PyObject_Vectorcall(sc->event_cls, a, 14, NULL);
        }
        Py_XDECREF(ln); Py_XDECREF(le); Py_XDECREF(lvl); Py_XDECREF(proc); Py_XDECREF(srco); Py_XDECREF(fields);
        Py_XDECREF(text);
        if (!ev || PyList_Append(sc->events, ev) < 0) rc = -1;
        Py_XDECREF(ev);
    }
    if (rc == 0) rc = kept ? hits_touch(&sc->hs, m, r->lineno) : hits_one(&sc->hs, m, r->lineno);
    if (!kept) ment_free(m);
    return rc;
}

static void rec_release(Rec *r) { Py_CLEAR(r->ts_obj); r->active = 0; }

/* start a C record at line li: 0 ok, 1 the Python path must take it */
static int rec_start(Scan *sc, Rec *r, const LI *li, const char *line, Py_ssize_t n, Py_ssize_t cur, Py_ssize_t next,
                     Py_ssize_t lineno, const char *ts, Py_ssize_t tsn, PyObject *ts_obj, const Entry *tm, const Span *tmh) {
    if (li->shape == L_RAW && (li->bracket || li->json)) return 1;
    memset(r, 0, sizeof *r);
    r->active = 1;
    r->shape = li->shape;
    r->proc = li->proc; r->procn = li->procn;
    r->first = *li;
    r->line0 = line; r->line0n = n;
    r->start = cur; r->next = next; r->lineno = lineno; r->nlines = 1;
    r->quotes = li->quotes;
    r->text_bytes = n;
    memcpy(r->ts_json, ts, tsn); r->ts_json_n = tsn;
    if (ts_obj) { Py_INCREF(ts_obj); r->ts_obj = ts_obj; }
    const char *msg = li->msg;
    Py_ssize_t mn = li->msgn;
    if (li->shape == L_ENV) {
        r->lvl = li->lvl; r->L = li->L;
        r->mo = li->mo; r->hh = li->hh; r->mi = li->mi; r->ss = li->ss; r->frac_none = 1;
        r->src = li->srcs; r->srcn = li->srcn;
        /* also V1 0.7-0.8's "EngineCore hit an exception: Traceback (most recent call last):" (as parser.py) */
        if (starts(msg, mn, "Traceback") || (mn >= 34 && memcmp(msg + mn - 34, "Traceback (most recent call last):", 34) == 0))
            r->tb = 1;
        else if (mn && msg[mn - 1] == ':') r->raw_cont = 3;
        else if (starts(msg, mn, "Exception in callback ")) { r->raw_cont = 5; r->cont = 1; }
    } else if (li->shape == L_UVI) {
        r->lvl = li->lvl; r->L = li->L;
        if (starts(msg, mn, "Exception in ASGI application")) r->cont = 1;
    } else {
        /* Ray prints an actor's creation-task traceback without the header line (as parser.py) */
        if (starts(msg, mn, "Traceback (most recent call last)") || starts(msg, mn, "Exception raised in creation task: ") ||
            starts(msg, mn, "Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "))
            r->tb = 1;
        else if (starts(msg, mn, "Process ") && mn && msg[mn - 1] == ':') r->cont = 1;
        else if (starts(msg, mn, "Exception in callback ")) { r->raw_cont = 5; r->cont = 1; }
        else if (starts(msg, mn, "terminate called after throwing")) r->raw_cont = 4;
        else if (starts(msg, mn, "nanobind: ")) r->raw_cont = 2;
        else if (find_lit(msg, msg + mn, "Warning: ", 9)) {
            int w = pywarn(msg, mn);
            if (w < 0) { rec_release(r); return 1; }
            if (w) r->raw_cont = 1;
        }
    }
    if (tm) { r->tmpl = tm; memcpy(r->holes, tmh, sizeof r->holes); }
    if (key_start(&sc->key, li) < 0) { rec_release(r); return -1; }
    return 0;
}

#define MAX_KEY (1 << 20)

/* line li continues C record r (c: continues_rec's answer): 0 ok, 1 the Python path must take the record */
static int rec_add(Scan *sc, Rec *r, const LI *li, Py_ssize_t n, Py_ssize_t next, int c) {
    const char *msg = li->shape == L_ENV ? li->msg : li->s;
    Py_ssize_t mn = li->shape == L_ENV ? li->msgn : li->sn;
    if (c == 2) r->tb = 1;
    if (r->tb || starts(msg, mn, "Traceback")) {
        r->tb = 1;
        if (mn && msg[0] != ' ' && msg[0] != '\t') {
            int x = exc_line(msg, mn);
            if (x < 0) return 1;
            if (x) r->has_exc = 1;
        }
    }
    r->nlines++;
    r->next = next;
    r->text_bytes += 1 + n;
    r->quotes |= li->quotes;
    r->tmpl = NULL;
    if (r->text_bytes > MAX_TEXT || sc->key.n + mn + 1 > MAX_KEY) return 1;
    if (buf_put(&sc->key, "\n", 1) < 0 || buf_put(&sc->key, msg, mn) < 0) return -1;
    return 0;
}

/* scan(table, src, start, first_lineno, year, month, last_ts_json, file_json, keep_text, mode, event_cls, last_ts,
 *      file_str, pending)
 * src: a list of str, or bytes of '\n'-separated lines (no final newline). pending: None, or the continuation state
 * of the Python parser's open record (shape, process, level, mo, hh, mi, ss, source, frac_none, tb, has_exc, cont,
 * raw_cont) — a first line that continues it is left to Python.
 * prev_cr: the line before ``start`` ended in '\r'.
 * -> (out: bytes|list|None, stop, consumed, next, counts: list[int], last_ts: (mo, dd, hh, mi, ss)|None,
 *     last_ts_json, hits: list[(kind, template_key|None, n, first_line)], prev_cr after the consumed lines)
 *
 * The ``consumed`` lines from cursor ``start`` to ``stop`` were handled (records written in mode 1, Events in mode 0,
 * counted per template and per classified record); the line at ``stop`` was not. ``next`` is the cursor of the
 * first line after it the scanner may take again (the caller parses [stop, next) itself). month: the parser's
 * current month (an enveloped line of another month is left to Python: rollover, year bookkeeping). */
static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *cap, *lines, *ltj, *fj, *event_cls = NULL, *last_ts = Py_None, *file_str = NULL, *pending = Py_None;
    Py_ssize_t start, first;
    int year, month, keep_text, mode, prev_cr = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOnniiO!O!pi|OOOOp", &cap, &lines, &start, &first, &year, &month,
                          &PyBytes_Type, &ltj, &PyBytes_Type, &fj, &keep_text, &mode, &event_cls, &last_ts, &file_str, &pending,
                          &prev_cr))
        return NULL;
    if (mode == 0 && (!event_cls || !file_str)) {
        PyErr_SetString(PyExc_TypeError, "mode 0 needs event_cls, last_ts, file_str");
        return NULL;
    }
    Table *t = (Table *)PyCapsule_GetPointer(cap, "vllmlog.fasttable");
    if (!t) return NULL;
    Scan sc;
    memset(&sc, 0, sizeof sc);
    sc.t = t; sc.mode = mode; sc.keep_text = keep_text; sc.event_cls = event_cls; sc.file_str = file_str;
    if (PyList_Check(lines)) { sc.src.list = lines; sc.src.nlines = PyList_GET_SIZE(lines); }
    else if (PyBytes_Check(lines)) { sc.src.buf = PyBytes_AS_STRING(lines); sc.src.blen = PyBytes_GET_SIZE(lines); }
    else { PyErr_SetString(PyExc_TypeError, "lines: a list of str or bytes"); return NULL; }
    if (start < 0) start = 0;
    if (year < 1 || year > 9999) month = -1;
    int yr = year > 0 ? year : 2000;
    sc.year = yr;
    if (memo_full) memo_clear_all();

    Rec rec;
    memset(&rec, 0, sizeof rec);
    if (pending != Py_None) {
        PyObject *pp, *pl, *ps;
        int shape, mo, hh, mi, ss, fn, tb, hx, ct, rc;
        if (!PyArg_ParseTuple(pending, "iOOiiiiOiiiii", &shape, &pp, &pl, &mo, &hh, &mi, &ss, &ps, &fn, &tb, &hx, &ct, &rc))
            return NULL;
        rec.active = 2;
        rec.shape = shape;
        if (pp != Py_None && !(rec.proc = PyUnicode_AsUTF8AndSize(pp, &rec.procn))) return NULL;
        if (pl != Py_None) {
            if (!(rec.lvl = PyUnicode_AsUTF8AndSize(pl, &rec.L))) return NULL;
        }
        if (ps != Py_None && !(rec.src = PyUnicode_AsUTF8AndSize(ps, &rec.srcn))) return NULL;
        rec.mo = mo; rec.hh = hh; rec.mi = mi; rec.ss = ss; rec.frac_none = fn;
        rec.tb = tb; rec.has_exc = hx; rec.cont = ct; rec.raw_cont = rc;
    }

    PyObject *cur_dt = NULL;
    if (mode == 0) {
        sc.events = PyList_New(0);
        if (!sc.events) return NULL;
    }
    Py_INCREF(last_ts);  /* the timestamp a line without one inherits (Event mode) */
    const char *fjs = PyBytes_AS_STRING(fj);
    Py_ssize_t fjn = PyBytes_GET_SIZE(fj);
    char lastts[48], curts[48], c_lastts[48];
    Py_ssize_t lastts_n = PyBytes_GET_SIZE(ltj), curts_n = 0, c_lastts_n;
    if (lastts_n >= (Py_ssize_t)sizeof lastts) { lastts_n = 4; memcpy(lastts, "null", 4); }
    else memcpy(lastts, PyBytes_AS_STRING(ltj), lastts_n);
    memcpy(c_lastts, lastts, lastts_n);
    c_lastts_n = lastts_n;
    int lt[5] = {-1, 0, 0, 0, 0}, c_lt[5] = {-1, 0, 0, 0, 0};
    sc.counts = (long *)PyMem_Calloc(t->ntemplates ? t->ntemplates : 1, sizeof(long));
    sc.hs.hits = PyList_New(0);
    if (!sc.counts || !sc.hs.hits) { PyErr_NoMemory(); goto fail; }
    if (mode == 1) {
        Py_ssize_t guess = sc.src.list ? (sc.src.nlines - start) * (320 + fjn) : (sc.src.blen - start) * 2 + 4096;
        if (guess > (16 << 20)) guess = 16 << 20;
        if (guess > 0 && buf_reserve(&sc.b, guess) < 0) goto fail;
    }
    if (buf_put(&sc.head, "{\"file\":", 8) < 0 || buf_put(&sc.head, fjs, fjn) < 0 || buf_put(&sc.head, ",\"line\":", 8) < 0)
        goto fail;

    Py_ssize_t cur = start, lineno = first, nxt = 0;
    Py_ssize_t c_cur = start, c_consumed = 0;   /* committed: what the caller gets */
    int c_prev_cr = prev_cr;
    Py_ssize_t probe = -1;
    int err = 0;
    const char *s;
    Py_ssize_t n;
    int lok;
    Span holes[MAXH];
    Post post;
    LI li;

    int cts[5] = {-1, 0, 0, 0, 0};  /* the second curts / cur_dt stand for */
    for (;;) {
        if (!src_line(&sc.src, cur, &s, &n, &nxt, &lok)) { probe = cur; break; }  /* end of the block */
        if (!lok) break;
        int shape = analyze_line(s, n, yr, &li, sc.src.buf != NULL);
        if (shape == L_BAIL || (shape == L_ENV && li.mo != month)) break;
        if (li.tab && !tab_continues(&rec, &li, prev_cr)) break;
        n = li.textn;  /* without its trailing '\r's */
        if (shape == L_ENV && (li.mo != cts[0] || li.dd != cts[1] || li.hh != cts[2] || li.mi != cts[3] || li.ss != cts[4])) {
            /* the line's timestamp (JSON text; a datetime in Event mode) */
            curts_n = snprintf(curts, sizeof curts, "\"%04d-%02d-%02dT%02d:%02d:%02d\"", yr, li.mo, li.dd, li.hh, li.mi, li.ss);
            if (mode == 0) {
                PyObject *d = PyDateTime_FromDateAndTime(yr, li.mo, li.dd, li.hh, li.mi, li.ss, 0);
                if (!d) { err = 1; break; }
                Py_XDECREF(cur_dt);
                cur_dt = d;
            }
            cts[0] = li.mo; cts[1] = li.dd; cts[2] = li.hh; cts[3] = li.mi; cts[4] = li.ss;
        }
        const Entry *tm = NULL;
        int tm_done = 0, strict = 0;
        if (shape == L_ENV && starts(li.msg, li.msgn, "Decode step ")) {
            tm = match_entry(t, &li, holes, &post);
            tm_done = 1;
            /* a Decode line in the pure-Python fast path's exact form (INFO, no process tag, one space after ']', no
             * quotes, step and batch size without leading zeros and at most 18 digits, kv [0-9]+(\.[0-9]+)?) is a
             * record of its own there, whatever comes before or after it */
            strict = tm && tm->strict_decode && !prev_cr && !li.cr && !li.proc && li.L == 4 && li.lvl[0] == 'I' && li.space1 && !li.quotes &&
                     !(holes[0].n > 1 && holes[0].s[0] == '0') && !(holes[2].n > 1 && holes[2].s[0] == '0') &&
                     holes[0].n <= 18 && holes[2].n <= 18 && kv_form(holes[3].s, holes[3].n);
        }
        if (rec.active && !strict) {
            int c = continues_rec(&rec, &li, prev_cr);
            if (c == -2) { err = 1; break; }
            if (c == -1) break;
            if (c > 0) {
                if (rec.active == 2) break;  /* the Python parser's open record goes on here */
                int a = rec_add(&sc, &rec, &li, n, nxt, c);
                if (a < 0) { err = 1; break; }
                if (a > 0) break;
                goto ts_update;
            }
        }
        /* this line starts a new record: the one before is finished */
        if (rec.active == 1) {
            if (emit_rec(&sc, &rec) < 0) { err = 1; break; }
            c_consumed += rec.nlines;
            c_cur = cur;
            c_prev_cr = prev_cr;
            memcpy(c_lt, lt, sizeof lt);
            memcpy(c_lastts, lastts, lastts_n); c_lastts_n = lastts_n;
        }
        rec_release(&rec);
        {
            int st = rec_start(&sc, &rec, &li, s, n, cur, nxt, lineno, shape == L_ENV ? curts : lastts,
                               shape == L_ENV ? curts_n : lastts_n, mode == 0 ? (shape == L_ENV ? cur_dt : last_ts) : NULL,
                               NULL, holes);
            if (st < 0) { err = 1; break; }
            if (st > 0) break;
            if (shape != L_RAW) {
                if (!tm_done) tm = match_entry(t, &li, holes, &post);
                if (tm) { rec.tmpl = tm; memcpy(rec.holes, holes, sizeof holes); rec.post = post; }
            }
        }
        if (strict) {  /* finished at once */
            if (emit_rec(&sc, &rec) < 0) { err = 1; break; }
            c_consumed += 1;
            c_cur = nxt;
            rec_release(&rec);
        }
    ts_update:
        if (shape == L_ENV) {
            lt[0] = li.mo; lt[1] = li.dd; lt[2] = li.hh; lt[3] = li.mi; lt[4] = li.ss;
            memcpy(lastts, curts, curts_n); lastts_n = curts_n;
            if (mode == 0) { Py_DECREF(last_ts); last_ts = cur_dt; Py_INCREF(last_ts); }
        }
        if (strict) {
            memcpy(c_lt, lt, sizeof lt);
            memcpy(c_lastts, lastts, lastts_n); c_lastts_n = lastts_n;
            c_prev_cr = 0;
        }
        prev_cr = li.cr;
        cur = nxt;
        lineno++;
    }
    if (probe < 0 && !err) {
        /* where could the scanner take over again? after the line it stopped at, past the lines it cannot read */
        Py_ssize_t after;
        probe = nxt > cur ? nxt : cur + 1;
        while (src_line(&sc.src, probe, &s, &n, &after, &lok)) {
            if (lok && analyze_line(s, n, yr, &li, sc.src.buf != NULL) != L_BAIL && !li.tab &&
                !(li.shape == L_RAW && (li.bracket || li.json)))
                break;
            probe = after;
        }
    }
    rec_release(&rec);
    Py_XDECREF(cur_dt);
    Py_DECREF(last_ts);
    Py_XDECREF(sc.src_cache);
    buf_free(&sc.head);
    buf_free(&sc.key);
    if (hits_flush(&sc.hs) < 0) err = 1;
    PyMem_Free(sc.hs.touched);
    if (err) goto fail_out;
    Py_ssize_t stop = c_cur;
    PyObject *out = mode == 1 ? buf_finish(&sc.b) : mode == 0 ? sc.events : (Py_INCREF(Py_None), Py_None);
    sc.events = NULL;
    buf_free(&sc.b);
    PyObject *cl = PyList_New(t->ntemplates);
    for (int k = 0; cl && k < t->ntemplates; k++) PyList_SET_ITEM(cl, k, PyLong_FromLong(sc.counts[k]));
    PyMem_Free(sc.counts);
    PyObject *lto = c_lt[0] < 0 ? (Py_INCREF(Py_None), Py_None) : Py_BuildValue("(iiiii)", c_lt[0], c_lt[1], c_lt[2], c_lt[3], c_lt[4]);
    PyObject *ltjo = PyBytes_FromStringAndSize(c_lastts, c_lastts_n);
    if (!out || !cl || !lto || !ltjo) {
        Py_XDECREF(out); Py_XDECREF(cl); Py_XDECREF(lto); Py_XDECREF(ltjo); Py_XDECREF(sc.hs.hits);
        return NULL;
    }
    return Py_BuildValue("(NnnnNNNNi)", out, stop, c_consumed, probe, cl, lto, ltjo, sc.hs.hits, c_prev_cr);
fail:
    Py_XDECREF(cur_dt);
    Py_DECREF(last_ts);
    buf_free(&sc.head);
    buf_free(&sc.key);
    PyMem_Free(sc.hs.touched);
fail_out:
    buf_free(&sc.b);
    Py_XDECREF(sc.events);
    Py_XDECREF(sc.hs.hits);
    PyMem_Free(sc.counts);
    return NULL;
}

static PyObject *set_hooks(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *a, *b, *c;
    if (!PyArg_ParseTuple(args, "OOO", &a, &b, &c)) return NULL;
    Py_XSETREF(HOOK_CLASSIFY, (Py_INCREF(a), a));
    Py_XSETREF(HOOK_MSG_MATCH, (Py_INCREF(b), b));
    Py_XSETREF(HOOK_RAW_MATCH, (Py_INCREF(c), c));
    Py_RETURN_NONE;
}

static PyObject *memo_info(PyObject *self, PyObject *noargs) {
    (void)self; (void)noargs;
    return Py_BuildValue("{s:l,s:l,s:l,s:l}", "entries", memo_n, "bytes", memo_bytes, "hits", memo_hits_total,
                         "misses", memo_miss_total);
}

static PyObject *memo_clear(PyObject *self, PyObject *noargs) {
    (void)self; (void)noargs;
    memo_clear_all();
    Py_RETURN_NONE;
}

static PyObject *count_lines(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyBytes_Check(arg)) { PyErr_SetString(PyExc_TypeError, "bytes expected"); return NULL; }
    const char *c = PyBytes_AS_STRING(arg), *e = c + PyBytes_GET_SIZE(arg);
    Py_ssize_t n = 0;
    Py_BEGIN_ALLOW_THREADS  /* bytes are immutable and referenced by the caller */
    while ((c = (const char *)memchr(c, '\n', e - c)) != NULL) { n++; c++; }
    Py_END_ALLOW_THREADS
    return PyLong_FromSsize_t(n);
}

/* ---- capacity: the least-squares objective of the step-time model's reverse fit (capacity/model.py _reverse_fit)
 * sse(b) over points (n, g): z = g / (1 - b g); a = sum(n z) / sum(z z) (0 when sum(z z) is 0); err = sum((n - a z) ** 2).
 * The same IEEE operations in the same order as the Python loop on CPython < 3.12 (sum() adds left to right;
 * x ** 2 calls libm pow, which is not always x * x: the exponent is read through a volatile so the compiler
 * keeps the pow call). Returns (err, a), or None when a value is not finite (the Python loop then runs). */
static volatile double TWO = 2.0;

static PyObject *reverse_sse(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer nb, gb;
    double b;
    if (!PyArg_ParseTuple(args, "y*y*d", &nb, &gb, &b)) return NULL;
    PyObject *res = NULL;
    Py_ssize_t k = nb.len / (Py_ssize_t)sizeof(double);
    if (gb.len != nb.len || nb.len % (Py_ssize_t)sizeof(double)) {
        PyErr_SetString(PyExc_ValueError, "reverse_sse: two buffers of as many doubles expected");
        goto done;
    }
    const double *n = (const double *)nb.buf, *g = (const double *)gb.buf;
    double *z = (double *)PyMem_Malloc((size_t)(k ? k : 1) * sizeof(double));
    if (!z) { PyErr_NoMemory(); goto done; }
    double zz = 0.0, nz = 0.0, a = 0.0, err = 0.0, two = TWO;
    int finite = 1;
    for (Py_ssize_t i = 0; i < k; i++) {
        double den = 1.0 - b * g[i];
        if (den == 0.0) { finite = 0; break; }
        z[i] = g[i] / den;
        zz += z[i] * z[i];
    }
    if (finite && zz != 0.0) {
        for (Py_ssize_t i = 0; i < k; i++) nz += n[i] * z[i];
        a = nz / zz;
    }
    if (finite) {
        for (Py_ssize_t i = 0; i < k; i++) {
            double d = n[i] - a * z[i];
            err += d == 0.0 ? 0.0 : pow(fabs(d), two);
        }
        finite = isfinite(err) && isfinite(a) && isfinite(zz);
    }
    PyMem_Free(z);
    if (finite) res = Py_BuildValue("(dd)", err, a);
    else { Py_INCREF(Py_None); res = Py_None; }
done:
    PyBuffer_Release(&nb);
    PyBuffer_Release(&gb);
    return res;
}

static PyMethodDef methods[] = {
    {"count_nl", count_lines, METH_O, "count_nl(bytes) -> number of newlines (memchr)"},
    {"compile", compile_table, METH_VARARGS, "compile(entries) -> table (see vllmlog/parsing/fast.py)"},
    {"scan", scan, METH_VARARGS, "scan(table, lines_or_bytes, start, first, year, month, last_ts_json, file_json, keep_text, mode, event_cls, last_ts, file_str, pending)"},
    {"set_hooks", set_hooks, METH_VARARGS, "set_hooks(classify, message_matches, raw_matches)"},
    {"memo_info", memo_info, METH_NOARGS, "memo_info() -> counters of the record classification memo"},
    {"memo_clear", memo_clear, METH_NOARGS, "memo_clear(): forget every memoised record classification"},
    {"reverse_sse", reverse_sse, METH_VARARGS, "reverse_sse(n_doubles, g_doubles, b) -> (err, a) or None (capacity/model.py)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_speedups", "Compiled fast path of the vllmlog line parser.", -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyDateTime_IMPORT;
    if (!PyDateTimeAPI) return NULL;
    for (int i = 0; PNAME_S[i]; i++) {
        PNAME[i] = PyUnicode_InternFromString(PNAME_S[i]);
        if (!PNAME[i]) return NULL;
    }
    return PyModule_Create(&mod);
}
