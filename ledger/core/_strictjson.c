/* ledger.core._strictjson: the compiled reader and writer behind ledger/core/jcs.py's
 * loads_exact/loads_strict and canonical_exact (read jcs.py: its plain Python path is the
 * reference, the twin these functions must answer exactly as).
 *
 * read(data, safe_numbers) -> (value, exact) or None
 *   Parses JSON text (bytes as UTF-8, or str) into dict/list/str/int/float/bool/None and
 *   returns what loads_exact returns, but only when it is sure the plain path accepts the text
 *   and would return the same value and the same ``exact`` flag. Anything else (a syntax error,
 *   bad UTF-8, a duplicate member name, NaN/Infinity, a number outside the safe range or not
 *   finite, an escaped surrogate, a lone surrogate in a str, more than MAX_DEPTH brackets) gives
 *   None: the plain path then decides and names the problem, so every message stays its own.
 *   The checks that make the plain path walk the value (jcs._needs_walk) are made here on the
 *   same text, so ``exact`` is False exactly when it is False there.
 *
 * hashes_b64(value) -> tuple[bytes, ...] or None
 *   The receipt reader's list of base64 hashes (ledger_client/receipts/receipt.py,
 *   ``_hashes_b64``: its fast branch is the twin), decoded when every item is canonical.
 *
 * same_json(a, b) -> bool or None
 *   Whether two parsed values are the same JSON value (run_load's ``_same_json_plain`` is the
 *   twin); None when either holds anything but exact JSON types, or a NaN.
 *
 * dump_exact(value) -> bytes or None
 *   json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")) encoded as
 *   UTF-8, for exact dict/list/str/int/bool/None values; None for anything else (a float, a
 *   subclass, a non-string key, an int beyond 64 bits, a lone surrogate, deep nesting): the
 *   caller then runs json.dumps. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 64 /* jcs.MAX_DEPTH: more brackets than this and the plain path walks */
#define MAX_SAFE 9007199254740991LL /* 2**53 - 1 */
#define DUMP_DEPTH 200

/* --- a cache of short ASCII strings (member names and small values repeat across lines) ---- */

#define CACHE_SLOTS 4096
#define CACHE_MAX_LEN 32
static PyObject *cache[CACHE_SLOTS];

static PyObject *short_ascii(const unsigned char *s, Py_ssize_t n) {
    uint32_t h = 2166136261u;
    Py_ssize_t i;
    for (i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
    h ^= (uint32_t)n;
    PyObject **slot = &cache[h & (CACHE_SLOTS - 1)];
    PyObject *hit = *slot;
    if (hit != NULL && PyUnicode_GET_LENGTH(hit) == n && memcmp(PyUnicode_DATA(hit), s, n) == 0) {
        Py_INCREF(hit);
        return hit;
    }
    PyObject *made = PyUnicode_New(n, 127);
    if (made == NULL) return NULL;
    memcpy(PyUnicode_DATA(made), s, n);
    Py_XSETREF(*slot, made);
    Py_INCREF(made);
    return made;
}

/* A text often holds one large object twice (a run item's record beside its receipt and inside
 * it): an object whose text is byte for byte that of a large object read before is that value
 * (a JSON value's extent follows from its text, and its reading has no other input), so the
 * dict read then is given again instead of a copy. Parsed values are never mutated; the plain
 * path gives equal values. */
#define SHARE_SLOTS 8
#define SHARE_MIN 256

/* --- the reader ------------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *p, *end;
    int safe_numbers;
    int floats;
    int error; /* 1: a Python exception is set (memory); else None means "plain path decides" */
    char *buf; /* scratch for strings with escapes or non-ASCII */
    Py_ssize_t cap;
    int seen; /* objects of at least SHARE_MIN bytes read so far (up to SHARE_SLOTS) */
    const unsigned char *seen_at[SHARE_SLOTS];
    Py_ssize_t seen_len[SHARE_SLOTS];
    PyObject *seen_obj[SHARE_SLOTS]; /* strong references, released by py_read */
} Reader;

#define WS(c) ((c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r')

static inline void skip_ws(Reader *r) {
    while (r->p < r->end && WS(*r->p)) r->p++;
}

static PyObject *read_value(Reader *r);

/* ``*buf`` of ``*cap`` bytes grown (doubling from ``first``) to hold ``need``; on no memory
   a MemoryError is set, ``*error`` is 1 and -1 is returned. The reader's scratch and the
   writer's output both grow through it. */
static int grow_buffer(char **buf, Py_ssize_t *cap, Py_ssize_t need, Py_ssize_t first,
                       int *error) {
    if (need <= *cap) return 0;
    Py_ssize_t size = *cap ? *cap : first;
    while (size < need) size *= 2;
    char *b = PyMem_Realloc(*buf, size);
    if (b == NULL) {
        PyErr_NoMemory();
        *error = 1;
        return -1;
    }
    *buf = b;
    *cap = size;
    return 0;
}

static int grow(Reader *r, Py_ssize_t need) {
    return grow_buffer(&r->buf, &r->cap, need, 256, &r->error);
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Byte classes, one table look-up per byte in the two scans that see every byte of a text:
 * PLAIN marks what a string's fast scan passes over (printable ASCII but '"' and '\\'); WALK
 * what must_walk stops at ('[', '{', '\\', and a 4-byte UTF-8 lead byte 0xF0-0xFF). */
#define PLAIN 1
#define WALK 2
static unsigned char byte_class[256];

static void init_byte_class(void) {
    int c;
    for (c = 0x20; c < 0x80; c++) byte_class[c] |= PLAIN;
    byte_class['"'] &= (unsigned char)~PLAIN;
    byte_class['\\'] &= (unsigned char)~PLAIN;
    byte_class['['] |= WALK;
    byte_class['{'] |= WALK;
    byte_class['\\'] |= WALK;
    for (c = 0xF0; c < 0x100; c++) byte_class[c] |= WALK;
}

/* Eight bytes at a time: a word is skipped whole only when none of its bytes is one the scan
 * stops at (each test below is exact on whether such a byte exists in the word; a word that may
 * hold one is scanned byte by byte, which decides). */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#define ZERO_BYTE(v) (((v) - ONES) & ~(v) & HIGHS)     /* some byte of v is 0 */
#define BELOW(x, b) (((x) - ONES * (b)) & ~(x) & HIGHS) /* some byte < b (b <= 0x80) */

static inline uint64_t word_at(const unsigned char *p) {
    uint64_t x;
    memcpy(&x, p, sizeof x);
    return x;
}

/* r->p is just after the opening quote. */
static PyObject *read_string(Reader *r) {
    const unsigned char *start = r->p, *q = r->p;
    while (r->end - q >= 8) { /* whole words of printable ASCII other than '"' and '\\' */
        uint64_t x = word_at(q);
        if (ZERO_BYTE(x ^ (ONES * '"')) | ZERO_BYTE(x ^ (ONES * '\\')) | BELOW(x, 0x20) |
            (x & HIGHS))
            break;
        q += 8;
    }
    while (q < r->end && (byte_class[*q] & PLAIN)) q++; /* stops at '"', '\\', < 0x20, >= 0x80 */
    if (q >= r->end) return NULL;
    if (*q == '"') {
        Py_ssize_t n = q - start;
        r->p = q + 1;
        if (n <= CACHE_MAX_LEN) {
            PyObject *s = short_ascii(start, n);
            if (s == NULL) r->error = 1;
            return s;
        }
        PyObject *s = PyUnicode_New(n, 127);
        if (s == NULL) {
            r->error = 1;
            return NULL;
        }
        memcpy(PyUnicode_DATA(s), start, n);
        return s;
    }
    /* slow path: UTF-8 bytes (raw, and escapes written as UTF-8) into the scratch buffer */
    Py_ssize_t len = q - start;
    if (grow(r, len + 64) < 0) return NULL;
    memcpy(r->buf, start, len);
    while (1) {
        if (q >= r->end) return NULL;
        unsigned char c = *q;
        if (c == '"') break;
        if (c < 0x20) return NULL; /* a raw control character: the plain path refuses */
        if (grow(r, len + 4) < 0) return NULL;
        if (c != '\\') {
            r->buf[len++] = (char)c;
            q++;
            continue;
        }
        if (q + 1 >= r->end) return NULL;
        unsigned char e = q[1];
        q += 2;
        switch (e) {
        case '"': r->buf[len++] = '"'; break;
        case '\\': r->buf[len++] = '\\'; break;
        case '/': r->buf[len++] = '/'; break;
        case 'b': r->buf[len++] = '\b'; break;
        case 'f': r->buf[len++] = '\f'; break;
        case 'n': r->buf[len++] = '\n'; break;
        case 'r': r->buf[len++] = '\r'; break;
        case 't': r->buf[len++] = '\t'; break;
        case 'u': {
            if (r->end - q < 4) return NULL;
            int a = hexval(q[0]), b = hexval(q[1]), c2 = hexval(q[2]), d = hexval(q[3]);
            if ((a | b | c2 | d) < 0) return NULL;
            unsigned cp = (unsigned)(a << 12 | b << 8 | c2 << 4 | d);
            q += 4;
            if (cp >= 0xD800 && cp <= 0xDFFF) return NULL; /* the plain path walks it */
            if (cp < 0x80) {
                r->buf[len++] = (char)cp;
            } else if (cp < 0x800) {
                r->buf[len++] = (char)(0xC0 | cp >> 6);
                r->buf[len++] = (char)(0x80 | (cp & 0x3F));
            } else {
                r->buf[len++] = (char)(0xE0 | cp >> 12);
                r->buf[len++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                r->buf[len++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: return NULL;
        }
    }
    r->p = q + 1;
    PyObject *s = PyUnicode_DecodeUTF8(r->buf, len, "strict");
    if (s == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear(); /* bad UTF-8: the plain path names it */
        } else {
            r->error = 1;
        }
    }
    return s;
}

static PyObject *read_number(Reader *r) {
    const unsigned char *start = r->p, *q = r->p;
    int neg = 0, is_float = 0;
    if (q < r->end && *q == '-') {
        neg = 1;
        q++;
    }
    if (q >= r->end || *q < '0' || *q > '9') return NULL;
    const unsigned char *digits = q;
    if (*q == '0') {
        q++;
    } else {
        while (q < r->end && *q >= '0' && *q <= '9') q++;
    }
    Py_ssize_t ndigits = q - digits;
    if (q < r->end && *q == '.') {
        q++;
        if (q >= r->end || *q < '0' || *q > '9') return NULL;
        while (q < r->end && *q >= '0' && *q <= '9') q++;
        is_float = 1;
    }
    if (q < r->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < r->end && (*q == '+' || *q == '-')) q++;
        if (q >= r->end || *q < '0' || *q > '9') return NULL;
        while (q < r->end && *q >= '0' && *q <= '9') q++;
        is_float = 1;
    }
    r->p = q;
    if (!is_float) {
        if (ndigits > 16) return NULL;
        long long v = 0;
        for (const unsigned char *d = digits; d < q; d++) v = v * 10 + (*d - '0');
        if (v > MAX_SAFE) return NULL;
        PyObject *out = PyLong_FromLongLong(neg ? -v : v);
        if (out == NULL) r->error = 1;
        return out;
    }
    r->floats++;
    Py_ssize_t n = q - start;
    char small[64];
    char *text = small;
    if (n >= (Py_ssize_t)sizeof(small)) {
        text = PyMem_Malloc(n + 1);
        if (text == NULL) {
            PyErr_NoMemory();
            r->error = 1;
            return NULL;
        }
    }
    memcpy(text, start, n);
    text[n] = '\0';
    char *stop = NULL;
    double v = PyOS_string_to_double(text, &stop, NULL);
    int whole = stop == text + n;
    if (text != small) PyMem_Free(text);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return NULL;
    }
    if (!whole || !isfinite(v)) return NULL;
    if (r->safe_numbers && fabs(v) > (double)MAX_SAFE) return NULL;
    PyObject *out = PyFloat_FromDouble(v);
    if (out == NULL) r->error = 1;
    return out;
}

/* Members are read into a list of pairs first, so the dict is made at its final size once. */
static PyObject *read_object(Reader *r) {
    PyObject *small[32], **pairs = small;
    Py_ssize_t n = 0, cap = 32, i;
    PyObject *dict = NULL;
    skip_ws(r);
    if (r->p < r->end && *r->p == '}') {
        r->p++;
        dict = PyDict_New();
        if (dict == NULL) r->error = 1;
        return dict;
    }
    while (1) {
        if (r->p >= r->end || *r->p != '"') goto done;
        r->p++;
        PyObject *key = read_string(r);
        if (key == NULL) goto done;
        skip_ws(r);
        if (r->p >= r->end || *r->p != ':') {
            Py_DECREF(key);
            goto done;
        }
        r->p++;
        skip_ws(r);
        PyObject *value = read_value(r);
        if (value == NULL) {
            Py_DECREF(key);
            goto done;
        }
        if (n + 2 > cap) {
            PyObject **grown = PyMem_Malloc(sizeof(PyObject *) * cap * 2);
            if (grown == NULL) {
                PyErr_NoMemory();
                r->error = 1;
                Py_DECREF(key);
                Py_DECREF(value);
                goto done;
            }
            memcpy(grown, pairs, sizeof(PyObject *) * n);
            if (pairs != small) PyMem_Free(pairs);
            pairs = grown;
            cap *= 2;
        }
        pairs[n++] = key;
        pairs[n++] = value;
        skip_ws(r);
        if (r->p >= r->end) goto done;
        if (*r->p == '}') {
            r->p++;
            break;
        }
        if (*r->p != ',') goto done;
        r->p++;
        skip_ws(r);
    }
    dict = _PyDict_NewPresized(n / 2);
    if (dict == NULL) {
        r->error = 1;
        goto done;
    }
    for (i = 0; i < n; i += 2) {
        if (PyDict_SetItem(dict, pairs[i], pairs[i + 1]) < 0) {
            r->error = 1;
            Py_CLEAR(dict);
            goto done;
        }
    }
    if (PyDict_GET_SIZE(dict) != n / 2) Py_CLEAR(dict); /* a duplicate member name */
done:
    for (i = 0; i < n; i++) Py_DECREF(pairs[i]);
    if (pairs != small) PyMem_Free(pairs);
    return dict;
}

static PyObject *read_array(Reader *r) {
    PyObject *list = PyList_New(0);
    if (list == NULL) {
        r->error = 1;
        return NULL;
    }
    skip_ws(r);
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        return list;
    }
    while (1) {
        PyObject *value = read_value(r);
        if (value == NULL) goto fail;
        int bad = PyList_Append(list, value);
        Py_DECREF(value);
        if (bad < 0) {
            r->error = 1;
            goto fail;
        }
        skip_ws(r);
        if (r->p >= r->end) goto fail;
        if (*r->p == ']') {
            r->p++;
            return list;
        }
        if (*r->p != ',') goto fail;
        r->p++;
        skip_ws(r);
    }
fail:
    Py_DECREF(list);
    return NULL;
}

static PyObject *read_value(Reader *r) {
    if (r->p >= r->end) return NULL;
    unsigned char c = *r->p;
    switch (c) {
    case '{': {
        const unsigned char *start = r->p;
        int i;
        for (i = 0; i < r->seen; i++) {
            Py_ssize_t n = r->seen_len[i];
            if (r->end - start >= n && memcmp(start, r->seen_at[i], n) == 0) {
                r->p = start + n;
                Py_INCREF(r->seen_obj[i]);
                return r->seen_obj[i];
            }
        }
        r->p++;
        PyObject *obj = read_object(r);
        if (obj != NULL && r->p - start >= SHARE_MIN && r->seen < SHARE_SLOTS) {
            r->seen_at[r->seen] = start;
            r->seen_len[r->seen] = r->p - start;
            Py_INCREF(obj);
            r->seen_obj[r->seen++] = obj;
        }
        return obj;
    }
    case '[': r->p++; return read_array(r);
    case '"': r->p++; return read_string(r);
    case 't':
        if (r->end - r->p >= 4 && memcmp(r->p, "true", 4) == 0) {
            r->p += 4;
            Py_RETURN_TRUE;
        }
        return NULL;
    case 'f':
        if (r->end - r->p >= 5 && memcmp(r->p, "false", 5) == 0) {
            r->p += 5;
            Py_RETURN_FALSE;
        }
        return NULL;
    case 'n':
        if (r->end - r->p >= 4 && memcmp(r->p, "null", 4) == 0) {
            r->p += 4;
            Py_RETURN_NONE;
        }
        return NULL;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return read_number(r);
        return NULL;
    }
}

/* jcs._needs_walk on the text (brackets anywhere, an escaped surrogate anywhere) and whether
 * it has a character outside the Basic Multilingual Plane (a 4-byte UTF-8 sequence). */
static int must_walk(const unsigned char *s, Py_ssize_t n, int *astral) {
    Py_ssize_t brackets = 0, i;
    *astral = 0;
    for (i = 0; i < n; i++) {
        /* skip whole words holding none of '[', '{' (both 0x7B once 0x20 is set), '\\' and
         * 0xF0-0xFF (0xF0 once the low bits are cleared) */
        while (n - i >= 8) {
            uint64_t x = word_at(s + i);
            if (ZERO_BYTE((x | (ONES * 0x20)) ^ (ONES * '{')) | ZERO_BYTE(x ^ (ONES * '\\')) |
                ZERO_BYTE((x & (ONES * 0xF0)) ^ (ONES * 0xF0)))
                break;
            i += 8;
        }
        if (i >= n) break;
        unsigned char c = s[i];
        if (!(byte_class[c] & WALK)) continue; /* none of the bytes tested below */
        if (c == '[' || c == '{') {
            if (++brackets > MAX_DEPTH) return 1;
        } else if (c == '\\') {
            if (i + 3 < n && s[i + 1] == 'u' && (s[i + 2] == 'd' || s[i + 2] == 'D')) {
                unsigned char d = s[i + 3];
                if ((d >= '8' && d <= '9') || (d >= 'a' && d <= 'f') || (d >= 'A' && d <= 'F'))
                    return 1;
            }
        } else if (c >= 0xF0) {
            *astral = 1;
        }
    }
    return 0;
}

static PyObject *py_read(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *data;
    int safe_numbers;
    if (!PyArg_ParseTuple(args, "Op:read", &data, &safe_numbers)) return NULL;
    const char *s;
    Py_ssize_t n;
    if (PyBytes_CheckExact(data)) {
        s = PyBytes_AS_STRING(data);
        n = PyBytes_GET_SIZE(data);
    } else if (PyUnicode_CheckExact(data)) {
        s = PyUnicode_AsUTF8AndSize(data, &n); /* fails on a lone surrogate */
        if (s == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return NULL;
            PyErr_Clear();
            Py_RETURN_NONE;
        }
    } else {
        Py_RETURN_NONE;
    }
    int astral;
    if (must_walk((const unsigned char *)s, n, &astral)) Py_RETURN_NONE;
    Reader r = {(const unsigned char *)s, (const unsigned char *)s + n, safe_numbers, 0, 0, NULL, 0, 0};
    skip_ws(&r);
    PyObject *value = read_value(&r);
    PyMem_Free(r.buf);
    for (int i = 0; i < r.seen; i++) Py_DECREF(r.seen_obj[i]);
    if (value == NULL) {
        if (r.error) return NULL;
        Py_RETURN_NONE;
    }
    skip_ws(&r);
    if (r.p != r.end) {
        Py_DECREF(value);
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(NO)", value, (r.floats == 0 && !astral) ? Py_True : Py_False);
}

/* --- the writer ------------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
    int error; /* 1: a Python exception is set */
} Writer;

static int put(Writer *w, const char *s, Py_ssize_t n) {
    if (grow_buffer(&w->buf, &w->cap, w->len + n, 1024, &w->error) < 0) return -1;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    return 0;
}

/* json's escape_unicode with ensure_ascii=False: '"', '\\', the short escapes, other controls
 * as \u00xx (lower-case hex); everything else as it is. */
static int put_string(Writer *w, PyObject *str) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(str, &n);
    if (s == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) PyErr_Clear();
        else w->error = 1;
        return -1;
    }
    if (put(w, "\"", 1) < 0) return -1;
    Py_ssize_t i, run = 0;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        if (put(w, s + run, i - run) < 0) return -1;
        run = i + 1;
        char esc[8];
        Py_ssize_t k = 2;
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            k = 6;
        }
        if (put(w, esc, k) < 0) return -1;
    }
    if (put(w, s + run, n - run) < 0) return -1;
    return put(w, "\"", 1);
}

static int put_value(Writer *w, PyObject *v, int depth);

/* The members in the order they are (1: written; 0: not in code point order; -1: failed). */
static int put_members_in_order(Writer *w, PyObject *dict, int depth) {
    Py_ssize_t pos = 0;
    PyObject *key, *value, *last = NULL;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) return -1;
        if (last != NULL) {
            int order = PyUnicode_Compare(last, key);
            if (order == -1 && PyErr_Occurred()) {
                w->error = 1;
                return -1;
            }
            if (order >= 0) return 0;
        }
        last = key;
    }
    if (put(w, "{", 1) < 0) return -1;
    pos = 0;
    int first = 1;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        Py_INCREF(value);
        int bad = (!first && put(w, ",", 1) < 0) || put_string(w, key) < 0 ||
                  put(w, ":", 1) < 0 || put_value(w, value, depth + 1) < 0;
        Py_DECREF(value);
        if (bad) return -1;
        first = 0;
    }
    if (put(w, "}", 1) < 0) return -1;
    return 1;
}

static int put_object(Writer *w, PyObject *dict, int depth) {
    Py_ssize_t n = PyDict_GET_SIZE(dict), pos = 0, i;
    if (n == 0) return put(w, "{}", 2);
    Py_ssize_t start = w->len;
    int done = put_members_in_order(w, dict, depth);
    if (done == 1) return 0;
    if (done < 0) return -1;
    w->len = start;
    PyObject *keys = PyList_New(n), *key, *value;
    if (keys == NULL) {
        w->error = 1;
        return -1;
    }
    i = 0;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key) || i >= n) {
            Py_DECREF(keys);
            return -1;
        }
        Py_INCREF(key);
        PyList_SET_ITEM(keys, i++, key);
    }
    if (PyList_Sort(keys) < 0) {
        Py_DECREF(keys);
        w->error = 1;
        return -1;
    }
    int bad = put(w, "{", 1);
    for (i = 0; i < n && !bad; i++) {
        key = PyList_GET_ITEM(keys, i);
        value = PyDict_GetItemWithError(dict, key);
        if (value == NULL) {
            if (PyErr_Occurred()) w->error = 1;
            bad = -1;
            break;
        }
        Py_INCREF(value);
        bad = (i && put(w, ",", 1) < 0) || put_string(w, key) < 0 || put(w, ":", 1) < 0 ||
              put_value(w, value, depth + 1) < 0;
        Py_DECREF(value);
    }
    Py_DECREF(keys);
    if (bad) return -1;
    return put(w, "}", 1);
}

static int put_value(Writer *w, PyObject *v, int depth) {
    if (depth > DUMP_DEPTH) return -1;
    if (v == Py_None) return put(w, "null", 4);
    if (v == Py_True) return put(w, "true", 4);
    if (v == Py_False) return put(w, "false", 5);
    if (PyUnicode_CheckExact(v)) return put_string(w, v);
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow) return -1;
        if (x == -1 && PyErr_Occurred()) {
            w->error = 1;
            return -1;
        }
        char text[32];
        int k = snprintf(text, sizeof(text), "%lld", x);
        return put(w, text, k);
    }
    if (PyDict_CheckExact(v)) return put_object(w, v, depth);
    if (PyList_CheckExact(v)) {
        Py_ssize_t i, n = PyList_GET_SIZE(v);
        if (put(w, "[", 1) < 0) return -1;
        for (i = 0; i < n; i++) {
            PyObject *item = PyList_GET_ITEM(v, i);
            Py_INCREF(item);
            int bad = (i && put(w, ",", 1) < 0) || put_value(w, item, depth + 1) < 0;
            Py_DECREF(item);
            if (bad) return -1;
            if (n != PyList_GET_SIZE(v)) return -1; /* changed under us: json.dumps decides */
        }
        return put(w, "]", 1);
    }
    return -1; /* a float, a subclass, anything else: json.dumps decides */
}

static PyObject *py_dump_exact(PyObject *self, PyObject *value) {
    (void)self;
    Writer w = {NULL, 0, 0, 0};
    int bad = put_value(&w, value, 0);
    PyObject *out = NULL;
    if (!bad) {
        out = PyBytes_FromStringAndSize(w.buf, w.len);
    } else if (!w.error) {
        out = Py_None;
        Py_INCREF(out);
    }
    PyMem_Free(w.buf);
    return out;
}

/* --- the same JSON value ---------------------------------------------------------------------- */

#define UNKNOWN (-2)

/* 1: the same JSON value (types included: 1, 1.0 and true differ; so do 0.0 and -0.0; member
 * order does not matter), 0: not, UNKNOWN: something else than exact JSON types (the caller's
 * pure path decides). */
static int same_value(PyObject *a, PyObject *b, int depth) {
    if (depth > DUMP_DEPTH) return UNKNOWN;
    PyTypeObject *ta = Py_TYPE(a), *tb = Py_TYPE(b);
    int known = (ta == &PyDict_Type || ta == &PyList_Type || ta == &PyUnicode_Type ||
                 ta == &PyLong_Type || ta == &PyFloat_Type || ta == &PyBool_Type ||
                 a == Py_None);
    int known_b = (tb == &PyDict_Type || tb == &PyList_Type || tb == &PyUnicode_Type ||
                   tb == &PyLong_Type || tb == &PyFloat_Type || tb == &PyBool_Type ||
                   b == Py_None);
    if (!known || !known_b) return UNKNOWN;
    if (ta == &PyFloat_Type && isnan(PyFloat_AS_DOUBLE(a))) return UNKNOWN;
    if (tb == &PyFloat_Type && isnan(PyFloat_AS_DOUBLE(b))) return UNKNOWN;
    if (a == b) return 1;
    if (ta != tb) return 0;
    if (ta == &PyUnicode_Type) {
        int eq = PyUnicode_Compare(a, b);
        if (eq == -1 && PyErr_Occurred()) return -1;
        return eq == 0;
    }
    if (ta == &PyLong_Type) return PyObject_RichCompareBool(a, b, Py_EQ);
    if (ta == &PyFloat_Type) {
        double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
        return memcmp(&x, &y, sizeof(double)) == 0;
    }
    if (ta == &PyBool_Type || a == Py_None) return 0; /* singletons, and not the same one */
    if (ta == &PyList_Type) {
        Py_ssize_t n = PyList_GET_SIZE(a), i;
        if (n != PyList_GET_SIZE(b)) return 0;
        int answer = 1;
        for (i = 0; i < n && i < PyList_GET_SIZE(a) && i < PyList_GET_SIZE(b); i++) {
            PyObject *x = PyList_GET_ITEM(a, i), *y = PyList_GET_ITEM(b, i);
            Py_INCREF(x);
            Py_INCREF(y);
            int r = same_value(x, y, depth + 1);
            Py_DECREF(x);
            Py_DECREF(y);
            if (r == -1 || r == UNKNOWN) return r;
            if (r == 0) answer = 0; /* read on: an unknown type later leaves it to Python */
        }
        if (i != n || n != PyList_GET_SIZE(a) || n != PyList_GET_SIZE(b)) return UNKNOWN;
        return answer;
    }
    /* dicts */
    if (PyDict_GET_SIZE(a) != PyDict_GET_SIZE(b)) return 0;
    Py_ssize_t pos = 0;
    PyObject *key, *x;
    while (PyDict_Next(b, &pos, &key, &x))
        if (!PyUnicode_CheckExact(key)) return UNKNOWN; /* as for a's names below */
    pos = 0;
    int answer = 1;
    while (PyDict_Next(a, &pos, &key, &x)) {
        if (!PyUnicode_CheckExact(key)) return UNKNOWN;
        PyObject *y = PyDict_GetItemWithError(b, key);
        if (y == NULL) {
            if (PyErr_Occurred()) return -1;
            answer = 0;
            continue;
        }
        Py_INCREF(x);
        Py_INCREF(y);
        int r = same_value(x, y, depth + 1);
        Py_DECREF(x);
        Py_DECREF(y);
        if (r == -1 || r == UNKNOWN) return r;
        if (r == 0) answer = 0;
    }
    return answer;
}

static PyObject *py_same_json(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *a, *b;
    if (!PyArg_ParseTuple(args, "OO:same_json", &a, &b)) return NULL;
    int r = same_value(a, b, 0);
    if (r == -1) return NULL;
    if (r == UNKNOWN) Py_RETURN_NONE;
    return PyBool_FromLong(r);
}

/* --- padded base64 hashes --------------------------------------------------------------------- */

static signed char b64_value[256];

/* hashes_b64(value) -> tuple[bytes, ...] or None: a non-empty list of str, each the canonical
 * padded standard base64 of 32 bytes (43 digits, the last with its two low bits zero, then
 * "="), decoded; None for anything else (the caller's reader then names the problem). */
static PyObject *py_hashes_b64(PyObject *self, PyObject *value) {
    (void)self;
    if (!PyList_CheckExact(value) || PyList_GET_SIZE(value) == 0) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(value), i;
    /* the tuple first: allocating it may run a GC pass, so Python code that changes the list,
     * and the items are checked after it (the bytes made below are not GC-tracked) */
    PyObject *out = PyTuple_New(n);
    if (out == NULL) return NULL;
    if (PyList_GET_SIZE(value) != n) goto unknown;
    for (i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(value, i);
        if (!PyUnicode_CheckExact(item) || !PyUnicode_IS_ASCII(item) ||
            PyUnicode_GET_LENGTH(item) != 44)
            goto unknown;
        const unsigned char *t = PyUnicode_1BYTE_DATA(item);
        for (int k = 0; k < 43; k++)
            if (b64_value[t[k]] < 0) goto unknown;
        if (t[43] != '=' || (b64_value[t[42]] & 3) != 0) goto unknown;
    }
    for (i = 0; i < n; i++) {
        const unsigned char *t = PyUnicode_1BYTE_DATA(PyList_GET_ITEM(value, i));
        PyObject *raw = PyBytes_FromStringAndSize(NULL, 32);
        if (raw == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        unsigned char *o = (unsigned char *)PyBytes_AS_STRING(raw);
        int k, j = 0;
        for (k = 0; k < 40; k += 4) { /* 10 full groups: 30 bytes */
            uint32_t v = (uint32_t)b64_value[t[k]] << 18 | (uint32_t)b64_value[t[k + 1]] << 12 |
                         (uint32_t)b64_value[t[k + 2]] << 6 | (uint32_t)b64_value[t[k + 3]];
            o[j++] = (unsigned char)(v >> 16);
            o[j++] = (unsigned char)(v >> 8);
            o[j++] = (unsigned char)v;
        }
        uint32_t v = (uint32_t)b64_value[t[40]] << 18 | (uint32_t)b64_value[t[41]] << 12 |
                     (uint32_t)b64_value[t[42]] << 6;
        o[30] = (unsigned char)(v >> 16);
        o[31] = (unsigned char)(v >> 8);
        PyTuple_SET_ITEM(out, i, raw);
    }
    return out;
unknown:
    Py_DECREF(out); /* its unset slots are NULL: freed as such */
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"same_json", py_same_json, METH_VARARGS, "Whether two values are the same JSON, or None."},
    {"hashes_b64", py_hashes_b64, METH_O, "A list of base64 32-byte hashes decoded, or None."},
    {"read", py_read, METH_VARARGS, "loads_exact's answer, or None: the plain path decides."},
    {"dump_exact", py_dump_exact, METH_O, "Sorted compact JSON as UTF-8, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ledger.core._strictjson",
    "The compiled strict JSON reader and canonical writer (ledger/core/_strictjson.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__strictjson(void) {
    const char *digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    memset(b64_value, -1, sizeof(b64_value));
    for (int i = 0; i < 64; i++) b64_value[(unsigned char)digits[i]] = (signed char)i;
    init_byte_class();
    return PyModule_Create(&module);
}
