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
    int check_next;   /* the next line must not continue this record */
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
 *   ("tmpl", index, src, kind_json: bytes, check_next, strict_decode,
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
        if (!PyArg_ParseTuple(it, "siiOiiO!UU", &tag, &e->index, &e->src, &kj, &e->check_next, &e->strict_decode,
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

/* the next line would continue an enveloped record: "] " + indentation or a Traceback (over-approximated;
 * a control character anywhere — an ANSI colour code the parser strips first, a \r — counts as a maybe) */
static int continues(const char *s, Py_ssize_t n) {
    const char *end = s + n;
    for (const char *c = s; c < end; c++)
        if ((unsigned char)*c < 0x20) return 1;
    const char *q = s;
    while ((q = (const char *)memchr(q, ']', end - q)) != NULL) {
        q++;
        const char *r = q;
        if (r < end && *r == ' ') r++;
        if (r < end && (*r == ' ' || *r == '\t')) return 1;
        if (end - r >= 9 && memcmp(r, "Traceback", 9) == 0) return 1;
    }
    return 0;
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

typedef struct {
    int L, src, mo, dd, hh, mi, ss, frac, space1;
    const char *srcs;
    Py_ssize_t srcn;
    const char *proc;  /* "(APIServer pid=N) " prefix: what is inside the parentheses (NULL: none) */
    Py_ssize_t procn;
    const char *lvl;   /* the level word (after the prefix) */
} Info;

/* Parse one line: the template entry it matches (holes filled, info set), or NULL. No state is consulted. */
#define MAX_TEXT 65536  /* parser.MAX_TEXT: a longer line's text is truncated by the Python path */

static const Entry *classify(const Table *t, const char *s, Py_ssize_t n, int year, Info *in, Span *holes, int *quotes_out,
                             int ascii_only) {
    if (n < 6 || n > MAX_TEXT) return NULL;
    const char *end = s + n;
    int quotes = 0;
    {
        /* control characters (\r, ESC, tabs) go to the Python path; quotes and backslashes are noted.
         * Eight bytes at a time: a byte < 0x20, or equal to '"' or '\\' (high bytes never flag). */
        const char *c = s;
        const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
        uint64_t acc_q = 0;
        for (; end - c >= 8; c += 8) {
            uint64_t x;
            memcpy(&x, c, 8);
            if ((x - ones * 0x20) & ~x & highs) return NULL;
            if (ascii_only && (x & highs)) return NULL;
            uint64_t q = x ^ (ones * '"'), bs = x ^ (ones * '\\');
            acc_q |= ((q - ones) & ~q & highs) | ((bs - ones) & ~bs & highs);
        }
        for (; c < end; c++) {
            unsigned char u = (unsigned char)*c;
            if (u < 0x20 || (ascii_only && u >= 0x80)) return NULL;
            if (u == '"' || u == '\\') quotes = 1;
        }
        if (acc_q) quotes = 1;
    }
    *quotes_out = quotes;
    if (n >= 8 && memcmp(end - 8, "cluster]", 8) == 0) return NULL;  /* Ray's [repeated Nx across cluster] */
    in->proc = NULL;
    in->procn = 0;
    if (s[0] == '(') {
        /* vLLM's process tag: ^\(([^()]*?\bpid=\d+[^()]*)\)\s? */
        const char *q = s + 1;
        while (q < end && *q != ')' && *q != '(') q++;
        if (q >= end || *q != ')') return NULL;
        int ok = 0;
        for (const char *k = s + 1; k + 4 < q && !ok; k++) {
            if (memcmp(k, "pid=", 4) != 0 || !isdig(k[4])) continue;
            unsigned char b = (unsigned char)k[-1];
            int word = b >= 0x80 || isdig((char)b) || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || b == '_';
            if (k == s + 1 || !word) ok = 1;
        }
        if (!ok) return NULL;
        in->proc = s + 1;
        in->procn = q - (s + 1);
        q++;
        if (q < end && *q == ' ') q++;
        n = end - q;
        s = q;
        if (n < 6) return NULL;
    }
    in->lvl = s;
    int L = level_len(s, n, 1);
    if (!L) return NULL;
    in->L = L;
    in->frac = 0;
    in->space1 = 1;
    const char *msg;
    if (s[L] == ':') {
        /* uvicorn: "INFO:     message" */
        const char *m = s + L + 1;
        if (m >= end || *m != ' ') return NULL;
        while (m < end && *m == ' ') m++;
        msg = m;
        in->src = SRC_UVICORN;
    } else if (s[L] == ' ' && s[0] != 'T') {
        /* vLLM: "LEVEL MM-DD HH:MM:SS[.fff] [file.py:N] message"; quotes would need escaping in 'source' */
        const char *p = s + L + 1;
        if (end - p < 16 || quotes) return NULL;
        in->mo = two(p); in->dd = two(p + 3); in->hh = two(p + 6); in->mi = two(p + 9); in->ss = two(p + 12);
        if (in->mo < 1 || in->mo > 12 || in->dd < 1 || in->hh < 0 || in->hh > 23 || in->mi < 0 || in->mi > 59 ||
            in->ss < 0 || in->ss > 59 || p[2] != '-' || p[5] != ' ' || p[8] != ':' || p[11] != ':')
            return NULL;
        if (in->dd > days_in(year, in->mo)) return NULL;
        p += 14;
        /* fractional seconds ("18:31:27,123" / ".123456"): the Python path keeps them in the timestamp */
        if (*p == '.' || *p == ',') return NULL;
        if (p >= end || *p != ' ') return NULL;
        p++;
        if (p < end && *p == '[') p++;
        in->srcs = p;
        /* the source runs to the first ']' and ends in ':digits'; no whitespace in it */
        const char *q = p;
        while (q < end && *q != ']' && !uspace((const unsigned char *)q, (const unsigned char *)end)) q++;
        if (q >= end || *q != ']') return NULL;
        const char *d = q;
        while (d > p && isdig(d[-1])) d--;
        if (d == q || d - p < 2 || d[-1] != ':') return NULL;
        in->srcn = q - p;
        q++;
        if (q < end && *q == ' ') q++; else in->space1 = 0;
        msg = q;
        in->src = SRC_ENV;
    } else
        return NULL;

    /* dispatch: entries in the registry's order */
    for (int k = 0; k < t->n; k++) {
        const Entry *e = &t->e[k];
        if (e->etype == E_TMPL && e->src != in->src) continue;
        if (end - msg < e->prefix_len || (e->prefix_len && msg[0] != e->prefix[0]) || memcmp(msg, e->prefix, e->prefix_len) != 0) continue;
        if (e->etype == E_GUARD) {
            if (!e->contains || find_lit(msg, end, e->contains, e->contains_len)) return NULL;
            continue;
        }
        if (match_tmpl(e, msg, end, holes)) {
            /* an enveloped message ending in ':' may go on in the raw lines below it (the parser's raw_cont 3:
             * a chat template, a config dump): the Python state machine decides */
            if (in->src == SRC_ENV && end[-1] == ':') return NULL;
            return e;
        }
        /* no match here: the regex may still match when every literal of the template is in the message */
        int all = 1;
        for (int j = 1; j < e->nparts; j++)
            if (e->parts[j].type == P_LIT && e->parts[j].len && !find_lit(msg, end, e->parts[j].lit, e->parts[j].len)) { all = 0; break; }
        if (all) return NULL;
    }
    return NULL;
}

static inline const char *line_utf8(PyObject *o, Py_ssize_t *n) {
    if (!PyUnicode_Check(o)) return NULL;
    if (PyUnicode_IS_COMPACT_ASCII(o)) { *n = PyUnicode_GET_LENGTH(o); return (const char *)PyUnicode_DATA(o); }
    const char *s = PyUnicode_AsUTF8AndSize(o, n);
    if (!s) PyErr_Clear();
    return s;
}

/* Where the lines come from: a list of str (cursor = index) or one bytes buffer of '\n'-separated lines
 * (cursor = byte offset of a line's start; past the last line = length + 1). Bytes must be ASCII to be handled
 * here (UTF-8 validation and the invalid-line accounting stay in Python). */
typedef struct {
    PyObject *list;
    Py_ssize_t nlines;
    const char *buf;
    Py_ssize_t blen;
} Src;

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
    return 1;  /* non-ASCII bytes: classify(ascii_only) rejects the line */
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

/* one Event (Event mode): file, line, line_end, ts, level, process, source, kind, request_id, fields, text,
 * pattern, template, ts_inherited */
static PyObject *build_event(PyObject *cls, PyObject *file, Py_ssize_t lineno, PyObject *ts, const char *s, Py_ssize_t n,
                             PyObject *line_obj, const Info *in, const Entry *hit, const Span *holes, int keep_text,
                             PyObject **src_cache, const char **src_cache_s, Py_ssize_t *src_cache_n) {
    PyObject *ln = NULL, *lvl = NULL, *srco = NULL, *rid = NULL, *fields = NULL, *text = NULL, *ev = NULL;
    PyObject *proc = NULL;
    ln = PyLong_FromSsize_t(lineno);
    lvl = level_str(in->lvl, in->L);
    if (!ln || !lvl) goto done;
    if (in->proc) {
        proc = PyUnicode_FromStringAndSize(in->proc, in->procn);
        if (!proc) goto done;
    }
    if (in->src == SRC_ENV) {
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
            rid = PyUnicode_FromStringAndSize(sp.s, sp.n);
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
    if (!rid) { rid = Py_None; Py_INCREF(rid); }
    if (!keep_text) text = PyUnicode_FromStringAndSize("", 0);
    else if (line_obj) { text = line_obj; Py_INCREF(text); }
    else text = PyUnicode_FromStringAndSize(s, n);
    if (!text) goto done;
    {
        PyObject *args[14] = {file, ln, ln, ts ? ts : Py_None, lvl, proc ? proc : Py_None, srco, hit->kind, rid, fields, text,
                              hit->pattern_id, Py_None, in->src == SRC_UVICORN ? Py_True : Py_False};
        ev = PyObject_Vectorcall(cls, args, 14, NULL);
    }
done:
    Py_XDECREF(ln); Py_XDECREF(lvl); Py_XDECREF(proc); Py_XDECREF(srco); Py_XDECREF(rid); Py_XDECREF(fields); Py_XDECREF(text);
    return ev;
}

/* scan(table, src, start, first_lineno, year, month, last_ts_json: bytes, file_json: bytes, keep_text, mode)
 * src: a list of str, or bytes of '\n'-separated lines (no final newline).
 * -> (out: bytes|None, stop, consumed, next, counts: list[int], last_ts: (mo, dd, hh, mi, ss)|None, last_ts_json)
 *
 * The ``consumed`` lines from cursor ``start`` to ``stop`` were handled (JSON in out when mode == 1, counted per
 * template); the line at ``stop`` was not. ``next`` is the cursor of the first line after it that looks
 * handleable (the caller parses [stop, next) itself). month: the parser's current month (an enveloped line of
 * another month is left to Python: rollover, year bookkeeping). */
static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *cap, *lines, *ltj, *fj, *event_cls = NULL, *last_ts = Py_None, *file_str = NULL;
    Py_ssize_t start, first;
    int year, month, keep_text, mode;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOnniiO!O!pi|OOO", &cap, &lines, &start, &first, &year, &month,
                          &PyBytes_Type, &ltj, &PyBytes_Type, &fj, &keep_text, &mode, &event_cls, &last_ts, &file_str))
        return NULL;
    if (mode == 0 && (!event_cls || !file_str)) {
        PyErr_SetString(PyExc_TypeError, "mode 0 needs event_cls, last_ts, file_str");
        return NULL;
    }
    PyObject *events = NULL, *cur_dt = NULL, *src_cache = NULL;
    const char *src_cache_s = NULL;
    Py_ssize_t src_cache_n = 0;
    if (mode == 0) {
        events = PyList_New(0);
        if (!events) return NULL;
        Py_INCREF(last_ts);
    }
    Table *t = (Table *)PyCapsule_GetPointer(cap, "vllmlog.fasttable");
    if (!t) return NULL;
    Src src = {NULL, 0, NULL, 0};
    if (PyList_Check(lines)) { src.list = lines; src.nlines = PyList_GET_SIZE(lines); }
    else if (PyBytes_Check(lines)) { src.buf = PyBytes_AS_STRING(lines); src.blen = PyBytes_GET_SIZE(lines); }
    else { PyErr_SetString(PyExc_TypeError, "lines: a list of str or bytes"); return NULL; }
    if (start < 0) start = 0;
    if (year < 1 || year > 9999) month = -1;
    const char *fjs = PyBytes_AS_STRING(fj);
    Py_ssize_t fjn = PyBytes_GET_SIZE(fj);
    char lastts[48], curts[48];
    Py_ssize_t lastts_n = PyBytes_GET_SIZE(ltj), curts_n;
    if (lastts_n >= (Py_ssize_t)sizeof lastts) { lastts_n = 4; memcpy(lastts, "null", 4); }
    else memcpy(lastts, PyBytes_AS_STRING(ltj), lastts_n);
    int lt[5] = {-1, 0, 0, 0, 0};
    long *counts = (long *)PyMem_Calloc(t->ntemplates ? t->ntemplates : 1, sizeof(long));
    if (!counts) return PyErr_NoMemory();
    Buf b = {NULL, NULL, 0, 0};
    Span holes[MAXH];
    Info in;
    if (mode == 1) {
        /* a first guess at the output size (it grows if needed; a scan often stops early, so no exact count) */
        Py_ssize_t guess = src.list ? (src.nlines - start) * (320 + fjn) : (src.blen - start) * 4 + 4096;
        if (guess > (16 << 20)) guess = 16 << 20;
        if (guess > 0 && buf_reserve(&b, guess) < 0) { PyMem_Free(counts); return NULL; }
    }
    /* '{"file":<file>,"line":' once */
    Buf head = {NULL, NULL, 0, 0};
    if (buf_put(&head, "{\"file\":", 8) < 0 || buf_put(&head, fjs, fjn) < 0 || buf_put(&head, ",\"line\":", 8) < 0) {
        buf_free(&head); buf_free(&b); PyMem_Free(counts); return NULL;
    }
    Py_ssize_t cur = start, consumed = 0, nxtcur = 0;
    int err = 0;
    const char *s;
    Py_ssize_t n;
    int lok;

    while (src_line(&src, cur, &s, &n, &nxtcur, &lok)) {
        if (!lok) break;
        int quotes;
        const Entry *hit = classify(t, s, n, year > 0 ? year : 2000, &in, holes, &quotes, src.buf != NULL);
        if (!hit) break;
        if (in.src == SRC_ENV && in.mo != month) break;
        if (hit->check_next) {
            /* a Decode line in the pure-Python fast path's exact form (INFO, no fraction of a second, one space
             * after ']', step and batch size without leading zeros and at most 18 digits, kv [0-9]+(\.[0-9]+)?) is a record of its own
             * there, whatever follows; any other line must not be continued by the next one */
            int strict = hit->strict_decode && !in.proc && in.L == 4 && in.lvl[0] == 'I' && !in.frac && in.space1 &&
                         !(holes[0].n > 1 && holes[0].s[0] == '0') && !(holes[2].n > 1 && holes[2].s[0] == '0') &&
                         holes[0].n <= 18 && holes[2].n <= 18 &&
                         kv_form(holes[3].s, holes[3].n);
            if (!strict) {
                const char *ns;
                Py_ssize_t nn, nn2;
                int nok;
                if (!src_line(&src, nxtcur, &ns, &nn, &nn2, &nok)) break;  /* the next line is in the next block */
                if (!ns || continues(ns, nn)) break;
            }
        }
        if (in.src == SRC_ENV) {
            if (in.mo != lt[0] || in.dd != lt[1] || in.hh != lt[2] || in.mi != lt[3] || in.ss != lt[4])
                curts_n = snprintf(curts, sizeof curts, "\"%04d-%02d-%02dT%02d:%02d:%02d\"", year, in.mo, in.dd, in.hh, in.mi, in.ss);
            else {
                memcpy(curts, lastts, lastts_n);
                curts_n = lastts_n;
            }
        } else {
            memcpy(curts, lastts, lastts_n);
            curts_n = lastts_n;
        }
        if (mode == 0) {
            PyObject *ts;
            if (in.src == SRC_ENV) {
                if (!cur_dt || in.mo != lt[0] || in.dd != lt[1] || in.hh != lt[2] || in.mi != lt[3] || in.ss != lt[4]) {
                    PyObject *d = PyDateTime_FromDateAndTime(year, in.mo, in.dd, in.hh, in.mi, in.ss, 0);
                    if (!d) { err = 1; break; }
                    Py_XDECREF(cur_dt);
                    cur_dt = d;
                }
                ts = cur_dt;
            } else
                ts = last_ts;
            PyObject *ev = build_event(event_cls, file_str, first + consumed, ts, s, n,
                                       src.list ? PyList_GET_ITEM(src.list, cur) : NULL, &in, hit, holes, keep_text,
                                       &src_cache, &src_cache_s, &src_cache_n);
            if (!ev) { err = 1; break; }
            int r = PyList_Append(events, ev);
            Py_DECREF(ev);
            if (r < 0) { err = 1; break; }
            if (in.src == SRC_ENV) {
                Py_DECREF(last_ts);
                last_ts = cur_dt;
                Py_INCREF(last_ts);
            }
        }
        if (mode == 1) {
            Py_ssize_t mark = b.n, lineno = first + consumed;
            int rejected = 0;
            if (buf_put(&b, head.p, head.n) < 0 || buf_int(&b, lineno) < 0 || buf_put(&b, ",\"line_end\":", 12) < 0 || buf_int(&b, lineno) < 0 ||
                buf_put(&b, ",\"ts\":", 6) < 0 || buf_put(&b, curts, curts_n) < 0 || buf_put(&b, ",\"level\":\"", 10) < 0 ||
                buf_put(&b, in.lvl, in.L) < 0 || buf_put(&b, "\",\"process\":", 12) < 0)
                { err = 1; break; }
            if (in.proc) {
                if (buf_put(&b, "\"", 1) < 0 || buf_esc(&b, in.proc, in.procn) < 0 || buf_put(&b, "\"", 1) < 0) { err = 1; break; }
            } else if (buf_put(&b, "null", 4) < 0) { err = 1; break; }
            if (buf_put(&b, ",\"source\":", 10) < 0) { err = 1; break; }
            if (in.src == SRC_ENV) {
                if (buf_put(&b, "\"", 1) < 0 || buf_put(&b, in.srcs, in.srcn) < 0 || buf_put(&b, "\"", 1) < 0) { err = 1; break; }
            } else if (buf_put(&b, "null", 4) < 0) { err = 1; break; }
            if (buf_put(&b, hit->kind_json, hit->kind_json_len) < 0) { err = 1; break; }
            int h = 0, have_rid = 0;
            for (int j = 0; j < hit->nparts && !err; j++) {
                const Part *p = &hit->parts[j];
                if (p->type == P_LIT) continue;
                if (p->is_rid) {
                    if (buf_put(&b, "\"", 1) < 0 || buf_esc(&b, holes[h].s, holes[h].n) < 0 || buf_put(&b, "\"", 1) < 0) err = 1;
                    have_rid = 1;
                }
                h++;
            }
            if (err) break;
            if (!have_rid && buf_put(&b, "null", 4) < 0) { err = 1; break; }
            if (buf_put(&b, ",\"fields\":{", 11) < 0) { err = 1; break; }
            h = 0;
            int firstf = 1;
            for (int j = 0; j < hit->nparts; j++) {
                const Part *p = &hit->parts[j];
                if (p->type == P_LIT) continue;
                Span sp = holes[h++];
                if (!p->key) continue;
                if (buf_put(&b, p->key + firstf, p->keylen - firstf) < 0) { err = 1; break; }
                firstf = 0;
                if (p->is_str) {
                    if (buf_put(&b, "\"", 1) < 0 || buf_esc(&b, sp.s, sp.n) < 0 || buf_put(&b, "\"", 1) < 0) { err = 1; break; }
                    continue;
                }
                int r = write_number(&b, p, sp.s, sp.n);
                if (r < 0) { err = 1; break; }
                if (r > 0) { rejected = 1; break; }
            }
            if (err) break;
            if (rejected) { b.n = mark; break; }
            if (buf_put(&b, "},\"text\":\"", 10) < 0 || (keep_text && (quotes ? buf_esc(&b, s, n) : buf_put(&b, s, n)) < 0) ||
                buf_put(&b, "\"}\n", 3) < 0) { err = 1; break; }
        }
        counts[hit->index]++;
        if (in.src == SRC_ENV) {
            lt[0] = in.mo; lt[1] = in.dd; lt[2] = in.hh; lt[3] = in.mi; lt[4] = in.ss;
            memcpy(lastts, curts, curts_n);
            lastts_n = curts_n;
        }
        consumed++;
        cur = nxtcur;
    }
    Py_XDECREF(cur_dt);
    Py_XDECREF(src_cache);
    if (mode == 0) Py_DECREF(last_ts);
    buf_free(&head);
    if (err) {
        buf_free(&b);
        Py_XDECREF(events);
        PyMem_Free(counts);
        return NULL;
    }
    Py_ssize_t stop = cur;
    /* where could the compiled path take over again? (the line at stop is left to Python in any case) */
    Py_ssize_t probe = stop, after;
    int have = src_line(&src, probe, &s, &n, &after, &lok);
    if (have) {
        probe = after;
        while (src_line(&src, probe, &s, &n, &after, &lok)) {
            int quotes;
            if (lok && classify(t, s, n, year > 0 ? year : 2000, &in, holes, &quotes, src.buf != NULL)) break;
            probe = after;
        }
    }
    PyObject *out = mode == 1 ? buf_finish(&b) : mode == 0 ? events : (Py_INCREF(Py_None), Py_None);
    buf_free(&b);
    PyObject *cl = PyList_New(t->ntemplates);
    for (int k = 0; cl && k < t->ntemplates; k++) PyList_SET_ITEM(cl, k, PyLong_FromLong(counts[k]));
    PyMem_Free(counts);
    PyObject *lto = lt[0] < 0 ? (Py_INCREF(Py_None), Py_None) : Py_BuildValue("(iiiii)", lt[0], lt[1], lt[2], lt[3], lt[4]);
    PyObject *ltjo = PyBytes_FromStringAndSize(lastts, lastts_n);
    if (!out || !cl || !lto || !ltjo) { Py_XDECREF(out); Py_XDECREF(cl); Py_XDECREF(lto); Py_XDECREF(ltjo); return NULL; }
    return Py_BuildValue("(NnnnNNN)", out, stop, consumed, probe, cl, lto, ltjo);
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

static PyMethodDef methods[] = {
    {"count_nl", count_lines, METH_O, "count_nl(bytes) -> number of newlines (memchr)"},
    {"compile", compile_table, METH_VARARGS, "compile(entries) -> table (see vllmlog/parsing/fast.py)"},
    {"scan", scan, METH_VARARGS, "scan(table, lines_or_bytes, start, first, year, month, last_ts_json, file_json, keep_text, mode)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_speedups", "Compiled fast path of the vllmlog line parser.", -1, methods};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyDateTime_IMPORT;
    if (!PyDateTimeAPI) return NULL;
    return PyModule_Create(&mod);
}
