/* ledger.core._hot: the compiled twin of ledger/core/hot.py (read that file for what each
 * function means; both give byte-identical answers, tests/property/test_hot_twins.py).
 *
 * Buffers in, buffers out: no Python object per entry except the keys and values that
 * split_hashes and index_values make for the store. The hashing loops run without the GIL.
 * SHA-256 is FIPS 180-4, written out here so the module needs nothing but a C compiler and the
 * Python headers. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The GIL is let go around a loop only when it is long: a short one (a stream's few digests)
 * would hand the GIL to the event loop and wait to get it back, for less work than the switch. */
#define RELEASE_MIN 256
#define BEGIN_RELEASE_IF(long_loop) \
    {                               \
        PyThreadState *_ts = (long_loop) ? PyEval_SaveThread() : NULL;
#define END_RELEASE_IF                      \
        if (_ts) PyEval_RestoreThread(_ts); \
    }

/* --- SHA-256 (FIPS 180-4) ------------------------------------------------------------------ */

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t s[8], const unsigned char *p) {
    uint32_t w[64], a, b, c, d, e, f, g, h, t1, t2;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = s[0]; b = s[1]; c = s[2]; d = s[3]; e = s[4]; f = s[5]; g = s[6]; h = s[7];
    for (i = 0; i < 64; i++) {
        t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    s[0] += a; s[1] += b; s[2] += c; s[3] += d; s[4] += e; s[5] += f; s[6] += g; s[7] += h;
}


/* SHA extensions (x86 SHA-NI), chosen at import when the CPU has them: same answers, ~4x the
 * speed of the portable rounds. Rounds four at a time; the message schedule per FIPS 180-4
 * with sha256msg1/sha256msg2. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_SHA_NI 1

__attribute__((target("sha,sse4.1,ssse3"))) static void sha256_block_ni(uint32_t s[8],
                                                                       const unsigned char *p) {
    const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_loadu_si128((const __m128i *)&s[0]);
    __m128i state1 = _mm_loadu_si128((const __m128i *)&s[4]);
    tmp = _mm_shuffle_epi32(tmp, 0xB1);
    state1 = _mm_shuffle_epi32(state1, 0x1B);
    __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);
    state1 = _mm_blend_epi16(state1, tmp, 0xF0);
    __m128i abef = state0, cdgh = state1, w[4], msg;
    int j;
    for (j = 0; j < 16; j++) {
        if (j < 4) {
            w[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), mask);
        } else {
            __m128i x = _mm_sha256msg1_epu32(w[j & 3], w[(j + 1) & 3]);
            x = _mm_add_epi32(x, _mm_alignr_epi8(w[(j + 3) & 3], w[(j + 2) & 3], 4));
            w[j & 3] = _mm_sha256msg2_epu32(x, w[(j + 3) & 3]);
        }
        msg = _mm_add_epi32(w[j & 3], _mm_loadu_si128((const __m128i *)&K[4 * j]));
        state1 = _mm_sha256rnds2_epu32(state1, state0, msg);
        msg = _mm_shuffle_epi32(msg, 0x0E);
        state0 = _mm_sha256rnds2_epu32(state0, state1, msg);
    }
    state0 = _mm_add_epi32(state0, abef);
    state1 = _mm_add_epi32(state1, cdgh);
    tmp = _mm_shuffle_epi32(state0, 0x1B);
    state1 = _mm_shuffle_epi32(state1, 0xB1);
    state0 = _mm_blend_epi16(tmp, state1, 0xF0);
    state1 = _mm_alignr_epi8(state1, tmp, 8);
    _mm_storeu_si128((__m128i *)&s[0], state0);
    _mm_storeu_si128((__m128i *)&s[4], state1);
}

static int cpu_has_sha_ni(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9))) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (b >> 29) & 1;
}
#endif

static void (*block_fn)(uint32_t s[8], const unsigned char *p) = sha256_block;

/* SHA-256 of the concatenation of up to three parts (prefix || middle || suffix). */
static void sha256_3(const unsigned char *a, size_t na, const unsigned char *b, size_t nb,
                     const unsigned char *c, size_t nc, unsigned char out[32]) {
    uint32_t s[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    unsigned char buf[128];
    int i;
    size_t fill = 0, total = na + nb + nc;
    uint64_t bits = (uint64_t)total * 8;
    if (total < 120) { /* the log's inputs (leaves, nodes, fingerprints): one or two blocks,
                        * padded in place, without the general loop below */
        size_t blocks = total < 56 ? 1 : 2, end = 64 * blocks;
        if (na) memcpy(buf, a, na);
        if (nb) memcpy(buf + na, b, nb);
        if (nc) memcpy(buf + na + nb, c, nc);
        buf[total] = 0x80;
        memset(buf + total + 1, 0, end - 8 - total - 1);
        for (i = 0; i < 8; i++) buf[end - 8 + i] = (unsigned char)(bits >> (56 - 8 * i));
        block_fn(s, buf);
        if (blocks == 2) block_fn(s, buf + 64);
        for (i = 0; i < 8; i++) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            uint32_t v = __builtin_bswap32(s[i]);
            memcpy(out + 4 * i, &v, 4);
#else
            out[4 * i] = (unsigned char)(s[i] >> 24);
            out[4 * i + 1] = (unsigned char)(s[i] >> 16);
            out[4 * i + 2] = (unsigned char)(s[i] >> 8);
            out[4 * i + 3] = (unsigned char)s[i];
#endif
        }
        return;
    }
    const unsigned char *parts[3] = {a, b, c};
    size_t lens[3] = {na, nb, nc};
    int k;
    for (k = 0; k < 3; k++) {
        const unsigned char *p = parts[k];
        size_t n = lens[k];
        while (n) {
            size_t take = 64 - fill < n ? 64 - fill : n;
            memcpy(buf + fill, p, take);
            fill += take;
            p += take;
            n -= take;
            if (fill == 64) {
                block_fn(s, buf);
                fill = 0;
            }
        }
    }
    buf[fill++] = 0x80;
    if (fill > 56) {
        memset(buf + fill, 0, 64 - fill);
        block_fn(s, buf);
        fill = 0;
    }
    memset(buf + fill, 0, 56 - fill);
    for (i = 0; i < 8; i++) buf[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
    block_fn(s, buf);
    for (i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(s[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s[i] >> 8);
        out[4 * i + 3] = (unsigned char)s[i];
    }
}

static const unsigned char NODE_PREFIX = 0x01;

static void node_hash(const unsigned char *left, const unsigned char *right, unsigned char out[32]) {
    unsigned char both[64];
    memcpy(both, left, 32);
    memcpy(both + 32, right, 32);
    sha256_3(&NODE_PREFIX, 1, both, 64, NULL, 0, out);
}

/* --- sequence_plain ------------------------------------------------------------------------ */

/* An open-addressing set of positions keyed by digest, hashed with a per-process seed so that
 * chosen digests cannot force collisions any cheaper than guessing the seed. */
static uint64_t seed = 0x9e3779b97f4a7c15ULL;

static uint64_t digest_slot(const unsigned char *d) {
    uint64_t x = seed, w;
    int i;
    for (i = 0; i < 4; i++) {
        memcpy(&w, d + 8 * i, 8);
        x ^= w;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
    }
    return x;
}

static PyObject *sequence_plain(PyObject *self, PyObject *args) {
    Py_buffer dg, kn, hp, fp, sx;
    PyObject *result = NULL, *new_b = NULL, *hash_b = NULL, *framed_b = NULL, *dups = NULL;
    int32_t *table = NULL, *source = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*", &dg, &kn, &hp, &fp, &sx)) return NULL;
    Py_ssize_t n = dg.len / 32, i, fresh = 0, ndup = 0, cap = 16;
    if (dg.len % 32 || kn.len != n || n > 0x3fffffff) {
        PyErr_SetString(PyExc_ValueError, "sequence_plain: digests not N x 32 or known not N flags");
        goto done;
    }
    const unsigned char *d = dg.buf, *known = kn.buf;
    while (cap < 2 * n) cap <<= 1;
    table = PyMem_Malloc(sizeof(int32_t) * (size_t)cap);
    source = PyMem_Malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!table || !source) {
        PyErr_NoMemory();
        goto done;
    }
    memset(table, 0xff, sizeof(int32_t) * (size_t)cap);
    /* source[i]: -2 new, -1 durable, k >= 0 repeats new entry number k */
    int32_t *number = PyMem_Malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!number) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < n; i++) {
        if (known[i]) {
            source[i] = -1;
            ndup++;
            continue;
        }
        uint64_t slot = digest_slot(d + 32 * i) & (uint64_t)(cap - 1);
        for (;;) {
            int32_t at = table[slot];
            if (at < 0) {
                table[slot] = (int32_t)i;
                number[i] = (int32_t)fresh++;
                source[i] = -2;
                break;
            }
            if (memcmp(d + 32 * at, d + 32 * i, 32) == 0) {
                source[i] = number[at];
                ndup++;
                break;
            }
            slot = (slot + 1) & (uint64_t)(cap - 1);
        }
    }
    Py_ssize_t fsize = fp.len + 32 + sx.len;
    new_b = PyBytes_FromStringAndSize(NULL, 32 * fresh);
    hash_b = PyBytes_FromStringAndSize(NULL, 32 * fresh);
    framed_b = PyBytes_FromStringAndSize(NULL, fsize * fresh);
    dups = PyList_New(2 * ndup);
    if (!new_b || !hash_b || !framed_b || !dups) {
        PyMem_Free(number);
        goto done;
    }
    Py_ssize_t j = 0;
    for (i = 0; i < n; i++) {
        if (source[i] == -2) continue;
        PyObject *p = PyLong_FromSsize_t(i), *s = PyLong_FromLong(source[i]);
        if (!p || !s) {
            Py_XDECREF(p);
            Py_XDECREF(s);
            PyMem_Free(number);
            goto done;
        }
        PyList_SET_ITEM(dups, j++, p);
        PyList_SET_ITEM(dups, j++, s);
    }
    unsigned char *nw = (unsigned char *)PyBytes_AS_STRING(new_b);
    unsigned char *hs = (unsigned char *)PyBytes_AS_STRING(hash_b);
    unsigned char *fr = (unsigned char *)PyBytes_AS_STRING(framed_b);
    BEGIN_RELEASE_IF(n >= RELEASE_MIN)
    for (i = 0; i < n; i++) {
        if (source[i] != -2) continue;
        const unsigned char *digest = d + 32 * i;
        memcpy(nw, digest, 32);
        sha256_3(hp.buf, (size_t)hp.len, digest, 32, sx.buf, (size_t)sx.len, hs);
        memcpy(fr, fp.buf, (size_t)fp.len);
        memcpy(fr + fp.len, digest, 32);
        memcpy(fr + fp.len + 32, sx.buf, (size_t)sx.len);
        nw += 32;
        hs += 32;
        fr += fsize;
    }
    END_RELEASE_IF
    PyMem_Free(number);
    result = PyTuple_Pack(4, new_b, hash_b, framed_b, dups);
done:
    Py_XDECREF(new_b);
    Py_XDECREF(hash_b);
    Py_XDECREF(framed_b);
    Py_XDECREF(dups);
    PyMem_Free(table);
    PyMem_Free(source);
    PyBuffer_Release(&dg);
    PyBuffer_Release(&kn);
    PyBuffer_Release(&hp);
    PyBuffer_Release(&fp);
    PyBuffer_Release(&sx);
    return result;
}

/* --- compact range ------------------------------------------------------------------------- */

static int popcount64(unsigned long long x) { return __builtin_popcountll(x); }

static PyObject *compact_extend(PyObject *self, PyObject *args) {
    unsigned long long size;
    Py_buffer st, lv;
    PyObject *result = NULL, *stack_b = NULL, *rows = NULL;
    unsigned char *work = NULL, *nodes = NULL;
    if (!PyArg_ParseTuple(args, "Ky*y*", &size, &st, &lv)) return NULL;
    Py_ssize_t depth = st.len / 32, count = lv.len / 32;
    if (st.len % 32 || depth != popcount64(size) || lv.len % 32 ||
        size + (unsigned long long)count < size || (size + (unsigned long long)count) >> 62) {
        PyErr_SetString(PyExc_ValueError,
                        "compact_extend: stack does not match size, or leaves not N x 32");
        goto done;
    }
    unsigned long long end = size + (unsigned long long)count;
    int top = 0; /* highest height with a completed node */
    Py_ssize_t counts[64] = {0}, offsets[64], total = 0;
    int h;
    for (h = 1; h < 63; h++) {
        counts[h] = (Py_ssize_t)((end >> h) - (size >> h));
        if (counts[h]) top = h;
        total += counts[h];
    }
    for (h = 1, offsets[0] = 0; h < 64; h++) offsets[h] = h == 1 ? 0 : offsets[h - 1] + counts[h - 1];
    work = PyMem_Malloc(32 * 64);
    nodes = PyMem_Malloc(32 * (size_t)(total ? total : 1));
    if (!work || !nodes) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(work, st.buf, (size_t)st.len);
    Py_ssize_t sp = depth, filled[64] = {0};
    const unsigned char *leaves = lv.buf;
    BEGIN_RELEASE_IF(lv.len >= 32 * RELEASE_MIN)
    unsigned long long index = size;
    Py_ssize_t k;
    for (k = 0; k < count; k++, index++) {
        unsigned char hash[32];
        memcpy(hash, leaves + 32 * k, 32);
        unsigned long long i = index;
        int level = 0;
        while (i & 1) {
            node_hash(work + 32 * (sp - 1), hash, hash);
            sp--;
            level++;
            i >>= 1;
            memcpy(nodes + 32 * (offsets[level] + filled[level]), hash, 32);
            filled[level]++;
        }
        memcpy(work + 32 * sp, hash, 32);
        sp++;
    }
    END_RELEASE_IF
    stack_b = PyBytes_FromStringAndSize((const char *)work, 32 * sp);
    rows = PyList_New(top);
    if (!stack_b || !rows) goto done;
    for (h = 1; h <= top; h++) {
        PyObject *row = PyBytes_FromStringAndSize((const char *)nodes + 32 * offsets[h], 32 * counts[h]);
        if (!row) goto done;
        PyList_SET_ITEM(rows, h - 1, row);
    }
    result = PyTuple_Pack(2, stack_b, rows);
done:
    Py_XDECREF(stack_b);
    Py_XDECREF(rows);
    PyMem_Free(work);
    PyMem_Free(nodes);
    PyBuffer_Release(&st);
    PyBuffer_Release(&lv);
    return result;
}

static PyObject *compact_root(PyObject *self, PyObject *arg) {
    Py_buffer st;
    unsigned char acc[32];
    if (PyObject_GetBuffer(arg, &st, PyBUF_SIMPLE) < 0) return NULL;
    if (st.len % 32) {
        PyBuffer_Release(&st);
        PyErr_SetString(PyExc_ValueError, "compact_root: stack not N x 32");
        return NULL;
    }
    const unsigned char *s = st.buf;
    if (st.len == 0) {
        sha256_3(NULL, 0, NULL, 0, NULL, 0, acc);
    } else {
        Py_ssize_t at = st.len - 32;
        memcpy(acc, s + at, 32);
        for (at -= 32; at >= 0; at -= 32) node_hash(s + at, acc, acc);
    }
    PyBuffer_Release(&st);
    return PyBytes_FromStringAndSize((const char *)acc, 32);
}

/* --- keys and values for the store --------------------------------------------------------- */

static PyObject *split_hashes(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    if (b.len % 32) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "split_hashes: buffer not N x 32");
        return NULL;
    }
    Py_ssize_t n = b.len / 32, i;
    PyObject *out = PyList_New(n);
    for (i = 0; out && i < n; i++) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)b.buf + 32 * i, 32);
        if (!key) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, key);
    }
    PyBuffer_Release(&b);
    return out;
}

static PyObject *index_values(PyObject *self, PyObject *args) {
    long long first, count;
    int width, i;
    if (!PyArg_ParseTuple(args, "LLi", &first, &count, &width)) return NULL;
    if (first < 0 || count < 0 || width < 1 || width > 8 ||
        (width < 8 && ((unsigned long long)(first + count) >> (8 * width)))) {
        PyErr_SetString(PyExc_ValueError, "index_values: indexes do not fit the width");
        return NULL;
    }
    PyObject *out = PyList_New((Py_ssize_t)count);
    long long k;
    for (k = 0; out && k < count; k++) {
        unsigned char buf[8];
        unsigned long long v = (unsigned long long)(first + k);
        for (i = 0; i < width; i++) buf[i] = (unsigned char)(v >> (8 * (width - 1 - i)));
        PyObject *value = PyBytes_FromStringAndSize((const char *)buf, width);
        if (!value) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)k, value);
    }
    return out;
}

static PyObject *present(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "present: want a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), i;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out) {
        PyObject **items = PySequence_Fast_ITEMS(seq);
        char *p = PyBytes_AS_STRING(out);
        for (i = 0; i < n; i++) p[i] = items[i] != Py_None;
    }
    Py_DECREF(seq);
    return out;
}

/* --- bundle_leaf_hashes -------------------------------------------------------------------- */

static const unsigned char LEAF_PREFIX = 0x00;

static PyObject *bundle_leaf_hashes(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *p = (const unsigned char *)b.buf;
    Py_ssize_t n = b.len, at = 0, count = 0;
    while (at < n) { /* every length and entry inside the bytes, before any hashing */
        if (at + 2 > n) {
            PyBuffer_Release(&b);
            return PyErr_Format(PyExc_ValueError,
                                "entry bundle ends inside the length of entry %zd", count);
        }
        Py_ssize_t end = at + 2 + ((Py_ssize_t)p[at] << 8 | (Py_ssize_t)p[at + 1]);
        if (end > n) {
            PyBuffer_Release(&b);
            return PyErr_Format(PyExc_ValueError, "entry bundle ends inside entry %zd", count);
        }
        at = end;
        count++;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, count * 32);
    if (out) {
        unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        at = 0;
        while (at < n) {
            Py_ssize_t len = (Py_ssize_t)p[at] << 8 | (Py_ssize_t)p[at + 1];
            sha256_3(&LEAF_PREFIX, 1, p + at + 2, (size_t)len, NULL, 0, o);
            o += 32;
            at += 2 + len;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&b);
    return out;
}

/* --- the derived dedup table (ledger/core/hot.py: dedup_insert, dedup_find, dedup_rehash) -- */

#define SLOT 12
#define FP_BYTES 6
#define MAX_VALUE (1ULL << 48)

static uint64_t get48(const unsigned char *p) {
    uint64_t v = 0;
    int i;
    for (i = FP_BYTES - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void put48(unsigned char *p, uint64_t v) {
    int i;
    for (i = 0; i < FP_BYTES; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* The table's slot count (a power of two), or 0 with ValueError set. */
static uint64_t slot_count(Py_ssize_t len) {
    uint64_t count = (uint64_t)len / SLOT;
    if (len % SLOT || count == 0 || (count & (count - 1))) {
        PyErr_SetString(PyExc_ValueError,
                        "dedup table: not a power-of-two number of 12-byte slots");
        return 0;
    }
    return count;
}

static int check_args(Py_ssize_t key_len, Py_ssize_t digests_len, unsigned long long mask) {
    if (key_len != 16 || digests_len % 32 || mask >= MAX_VALUE) {
        PyErr_SetString(PyExc_ValueError,
                        "dedup table: key not 16 bytes, digests not N x 32 or mask over 48 bits");
        return 0;
    }
    return 1;
}

static uint64_t fingerprint(const unsigned char *key, const unsigned char *digest, uint64_t mask) {
    unsigned char h[32];
    sha256_3(key, 16, digest, 32, NULL, 0, h);
    return get48(h) & mask;
}

/* Put one pair into its chain: 1 written, 0 already there, -1 full. */
static int put_pair(unsigned char *slots, uint64_t count, uint64_t fp, uint64_t value) {
    uint64_t at = fp & (count - 1), n;
    for (n = 0; n < count; n++) {
        unsigned char *s = slots + SLOT * at;
        uint64_t v = get48(s + FP_BYTES);
        if (!v) {
            put48(s, fp);
            put48(s + FP_BYTES, value);
            return 1;
        }
        if (v == value && get48(s) == fp) return 0;
        at = (at + 1) & (count - 1);
    }
    return -1;
}

/* The slots are random positions in a table far bigger than the caches: each probe's first
 * slot is a cache (and TLB) miss. The loops below prefetch the first slot of the fingerprint
 * AHEAD places on while probing this one, so the misses overlap instead of following one
 * another; the order of the probes and writes, and so every answer and every byte of the
 * table, is the same as one fingerprint at a time. */
#define AHEAD 16

static void prefetch_slot(const unsigned char *slots, uint64_t at) {
    const unsigned char *s = slots + SLOT * at;
    __builtin_prefetch(s, 1, 3);
    __builtin_prefetch(s + SLOT - 1, 1, 3); /* a slot may straddle two cache lines */
}

static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Fingerprints, 8 bytes little-endian each (the form dedup_fingerprints answers). */
static void fingerprints_into(const unsigned char *key, const unsigned char *d, Py_ssize_t n,
                              uint64_t mask, unsigned char *out) {
    Py_ssize_t k;
    int i;
    for (k = 0; k < n; k++) {
        uint64_t fp = fingerprint(key, d + 32 * k, mask);
        for (i = 0; i < 8; i++) out[8 * k + i] = (unsigned char)(fp >> (8 * i));
    }
}

/* Put fingerprints fps[k] with values first + k + 1: slots written, or -1 when full. */
static long long insert_fps(unsigned char *slots, uint64_t count, const unsigned char *fps,
                            Py_ssize_t n, uint64_t first) {
    long long written = 0;
    Py_ssize_t k;
    for (k = 0; k < n && k < AHEAD; k++) prefetch_slot(slots, get64(fps + 8 * k) & (count - 1));
    for (k = 0; k < n; k++) {
        if (k + AHEAD < n) prefetch_slot(slots, get64(fps + 8 * (k + AHEAD)) & (count - 1));
        int r = put_pair(slots, count, get64(fps + 8 * k), first + (uint64_t)k + 1);
        if (r < 0) return -1;
        written += r;
    }
    return written;
}

/* Flat (position, index) candidates of fps into *found; 0, or -1 out of memory. */
static int find_fps(const unsigned char *slots, uint64_t count, const unsigned char *fps,
                    Py_ssize_t n, uint64_t **found, Py_ssize_t *nfound) {
    Py_ssize_t cap = 0, k;
    for (k = 0; k < n && k < AHEAD; k++) prefetch_slot(slots, get64(fps + 8 * k) & (count - 1));
    for (k = 0; k < n; k++) {
        if (k + AHEAD < n) prefetch_slot(slots, get64(fps + 8 * (k + AHEAD)) & (count - 1));
        uint64_t fp = get64(fps + 8 * k), at = fp & (count - 1), step;
        for (step = 0; step < count; step++) {
            const unsigned char *s = slots + SLOT * at;
            uint64_t v = get48(s + FP_BYTES);
            if (!v) break;
            if (get48(s) == fp) {
                if (*nfound + 2 > cap) {
                    Py_ssize_t more = cap ? 2 * cap : 64;
                    uint64_t *grown = realloc(*found, sizeof(uint64_t) * (size_t)more);
                    if (!grown) return -1;
                    *found = grown;
                    cap = more;
                }
                (*found)[(*nfound)++] = (uint64_t)k;
                (*found)[(*nfound)++] = v - 1;
            }
            at = (at + 1) & (count - 1);
        }
    }
    return 0;
}

static PyObject *found_list(const uint64_t *found, Py_ssize_t nfound) {
    PyObject *result = PyList_New(nfound);
    Py_ssize_t k;
    for (k = 0; result && k < nfound; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong(found[k]);
        if (!v) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, k, v);
    }
    return result;
}

static int check_fps(Py_ssize_t len) {
    if (len % 8) {
        PyErr_SetString(PyExc_ValueError, "dedup table: fingerprints not N x 8 bytes");
        return 0;
    }
    return 1;
}

static int check_first(long long first, Py_ssize_t n) {
    if (first < 0 || (uint64_t)first + (uint64_t)n >= MAX_VALUE) {
        PyErr_SetString(PyExc_ValueError, "dedup table: index over 48 bits");
        return 0;
    }
    return 1;
}

/* The fingerprints' values: none over 48 bits (what a table slot holds). */
static int check_fp_values(const unsigned char *fps, Py_ssize_t n) {
    Py_ssize_t k;
    for (k = 0; k < n; k++)
        if (get64(fps + 8 * k) >= MAX_VALUE) {
            PyErr_SetString(PyExc_ValueError, "dedup table: a fingerprint over 48 bits");
            return 0;
        }
    return 1;
}

static PyObject *dedup_fingerprints(PyObject *self, PyObject *args) {
    Py_buffer kb, db;
    unsigned long long mask;
    if (!PyArg_ParseTuple(args, "y*Ky*", &kb, &mask, &db)) return NULL;
    PyObject *result = NULL;
    if (!check_args(kb.len, db.len, mask)) goto done;
    Py_ssize_t n = db.len / 32;
    result = PyBytes_FromStringAndSize(NULL, 8 * n);
    if (!result) goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
    const unsigned char *key = kb.buf, *d = db.buf;
    BEGIN_RELEASE_IF(n >= RELEASE_MIN)
    fingerprints_into(key, d, n, mask, out);
    END_RELEASE_IF
done:
    PyBuffer_Release(&kb);
    PyBuffer_Release(&db);
    return result;
}

static PyObject *dedup_insert_fps(PyObject *self, PyObject *args) {
    Py_buffer tb, fb;
    long long first;
    if (!PyArg_ParseTuple(args, "w*y*L", &tb, &fb, &first)) return NULL;
    PyObject *result = NULL;
    uint64_t count = slot_count(tb.len);
    if (!count || !check_fps(fb.len)) goto done;
    Py_ssize_t n = fb.len / 8;
    if (!check_first(first, n) || !check_fp_values(fb.buf, n)) goto done;
    long long written;
    unsigned char *slots = tb.buf;
    const unsigned char *fps = fb.buf;
    BEGIN_RELEASE_IF(fb.len >= 8 * RELEASE_MIN)
    written = insert_fps(slots, count, fps, n, (uint64_t)first);
    END_RELEASE_IF
    if (written < 0)
        PyErr_SetString(PyExc_ValueError, "dedup table: full");
    else
        result = PyLong_FromLongLong(written);
done:
    PyBuffer_Release(&tb);
    PyBuffer_Release(&fb);
    return result;
}

static PyObject *dedup_find_fps(PyObject *self, PyObject *args) {
    Py_buffer tb, fb;
    if (!PyArg_ParseTuple(args, "y*y*", &tb, &fb)) return NULL;
    PyObject *result = NULL;
    uint64_t *found = NULL;
    Py_ssize_t nfound = 0;
    uint64_t count = slot_count(tb.len);
    if (!count || !check_fps(fb.len)) goto done;
    Py_ssize_t n = fb.len / 8;
    if (!check_fp_values(fb.buf, n)) goto done;
    const unsigned char *slots = tb.buf, *fps = fb.buf;
    int r;
    BEGIN_RELEASE_IF(fb.len >= 8 * RELEASE_MIN)
    r = find_fps(slots, count, fps, n, &found, &nfound);
    END_RELEASE_IF
    if (r < 0)
        PyErr_NoMemory();
    else
        result = found_list(found, nfound);
done:
    free(found);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&fb);
    return result;
}

/* The digest forms: the digests' fingerprints (dedup_fingerprints), then the fingerprint
 * form (dedup_insert_fps, dedup_find_fps): one code path, the pure twin's order of checks. */
static PyObject *with_fingerprints(PyObject *self, PyObject *args, int inserting) {
    PyObject *slots, *key, *digests;
    unsigned long long mask;
    long long first = 0;
    if (inserting ? !PyArg_ParseTuple(args, "OOKOL", &slots, &key, &mask, &digests, &first)
                  : !PyArg_ParseTuple(args, "OOKO", &slots, &key, &mask, &digests))
        return NULL;
    PyObject *asked = Py_BuildValue("(OKO)", key, mask, digests);
    PyObject *fps = asked ? dedup_fingerprints(self, asked) : NULL;
    Py_XDECREF(asked);
    if (!fps) return NULL;
    PyObject *then = inserting ? Py_BuildValue("(OOL)", slots, fps, first)
                               : Py_BuildValue("(OO)", slots, fps);
    Py_DECREF(fps);
    if (!then) return NULL;
    PyObject *result = inserting ? dedup_insert_fps(self, then) : dedup_find_fps(self, then);
    Py_DECREF(then);
    return result;
}

static PyObject *dedup_insert(PyObject *self, PyObject *args) {
    return with_fingerprints(self, args, 1);
}

static PyObject *dedup_find(PyObject *self, PyObject *args) {
    return with_fingerprints(self, args, 0);
}

static PyObject *dedup_count(PyObject *self, PyObject *arg) {
    Py_buffer tb;
    if (PyObject_GetBuffer(arg, &tb, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = NULL;
    uint64_t count = slot_count(tb.len), i;
    if (count) {
        long long used = 0;
        const unsigned char *slots = tb.buf;
        Py_BEGIN_ALLOW_THREADS
        for (i = 0; i < count; i++) used += get48(slots + SLOT * i + FP_BYTES) != 0;
        Py_END_ALLOW_THREADS
        result = PyLong_FromLongLong(used);
    }
    PyBuffer_Release(&tb);
    return result;
}

static PyObject *dedup_rehash(PyObject *self, PyObject *args) {
    Py_buffer ob, nb;
    if (!PyArg_ParseTuple(args, "y*w*", &ob, &nb)) return NULL;
    PyObject *result = NULL;
    uint64_t old_count = slot_count(ob.len), count = old_count ? slot_count(nb.len) : 0, i;
    if (!count) goto done;
    long long moved = 0;
    int full = 0;
    const unsigned char *source = ob.buf;
    unsigned char *target = nb.buf;
    Py_BEGIN_ALLOW_THREADS
    for (i = 0; i < old_count; i++) {
        const unsigned char *s = source + SLOT * i;
        uint64_t v = get48(s + FP_BYTES);
        if (!v) continue;
        int r = put_pair(target, count, get48(s), v);
        if (r < 0) {
            full = 1;
            break;
        }
        moved += r;
    }
    Py_END_ALLOW_THREADS
    if (full)
        PyErr_SetString(PyExc_ValueError, "dedup table: full");
    else
        result = PyLong_FromLongLong(moved);
done:
    PyBuffer_Release(&ob);
    PyBuffer_Release(&nb);
    return result;
}

static PyObject *bundle_digests(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    const unsigned char *p = (const unsigned char *)b.buf;
    Py_ssize_t n = b.len, at = 0, count = 0;
    while (at < n) {
        if (at + 2 > n) {
            PyBuffer_Release(&b);
            return PyErr_Format(PyExc_ValueError,
                                "entry bundle ends inside the length of entry %zd", count);
        }
        Py_ssize_t len = (Py_ssize_t)p[at] << 8 | (Py_ssize_t)p[at + 1];
        if (at + 2 + len > n) {
            PyBuffer_Release(&b);
            return PyErr_Format(PyExc_ValueError, "entry bundle ends inside entry %zd", count);
        }
        if (len < 41) {
            PyBuffer_Release(&b);
            return PyErr_Format(PyExc_ValueError,
                                "entry %zd of the bundle is too short for a record digest", count);
        }
        at += 2 + len;
        count++;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, count * 32);
    if (out) {
        unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
        for (at = 0; at < n; o += 32) {
            memcpy(o, p + at + 2 + 9, 32);
            at += 2 + ((Py_ssize_t)p[at] << 8 | (Py_ssize_t)p[at + 1]);
        }
    }
    PyBuffer_Release(&b);
    return out;
}

static PyMethodDef methods[] = {
    {"sequence_plain", sequence_plain, METH_VARARGS, "See ledger/core/hot.py."},
    {"compact_extend", compact_extend, METH_VARARGS, "See ledger/core/hot.py."},
    {"compact_root", compact_root, METH_O, "See ledger/core/hot.py."},
    {"split_hashes", split_hashes, METH_O, "See ledger/core/hot.py."},
    {"index_values", index_values, METH_VARARGS, "See ledger/core/hot.py."},
    {"present", present, METH_O, "See ledger/core/hot.py."},
    {"bundle_leaf_hashes", bundle_leaf_hashes, METH_O, "See ledger/core/hot.py."},
    {"bundle_digests", bundle_digests, METH_O, "See ledger/core/hot.py."},
    {"dedup_insert", dedup_insert, METH_VARARGS, "See ledger/core/hot.py."},
    {"dedup_find", dedup_find, METH_VARARGS, "See ledger/core/hot.py."},
    {"dedup_fingerprints", dedup_fingerprints, METH_VARARGS, "See ledger/core/hot.py."},
    {"dedup_insert_fps", dedup_insert_fps, METH_VARARGS, "See ledger/core/hot.py."},
    {"dedup_find_fps", dedup_find_fps, METH_VARARGS, "See ledger/core/hot.py."},
    {"dedup_rehash", dedup_rehash, METH_VARARGS, "See ledger/core/hot.py."},
    {"dedup_count", dedup_count, METH_O, "See ledger/core/hot.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ledger.core._hot",
    "The compiled twin of ledger.core.hot (C; see ledger/core/_hot.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__hot(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    /* the dedup table's seed: from os.urandom, so digests cannot be chosen to collide */
    PyObject *os = PyImport_ImportModule("os");
    PyObject *raw = os ? PyObject_CallMethod(os, "urandom", "i", 8) : NULL;
    Py_XDECREF(os);
    if (!raw) {
        Py_DECREF(m);
        return NULL;
    }
    memcpy(&seed, PyBytes_AS_STRING(raw), 8);
    seed |= 1;
#ifdef HAVE_SHA_NI
    if (cpu_has_sha_ni() && !getenv("LEDGER_NO_SHA_NI")) block_fn = sha256_block_ni;
#endif
    const char *sha = block_fn == sha256_block ? "portable" : "sha-ni";
    if (PyModule_AddStringConstant(m, "SHA256", sha) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_DECREF(raw);
    if (PyModule_AddStringConstant(m, "CORE", "native") < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
