/* ledger.core._recordread: the compiled fast reading of a decision record (read
 * ledger/records/decision.py: ``_parse_record_fast`` and its helpers are the pure twin, the
 * reference these functions answer exactly as; ``_record_fast`` is the twin of ``record``).
 *
 * This module knows no record classes of its own: ``ledger.records.decision`` hands it the
 * classes, the caches and the Python readers it falls back to (``configure``), so the core does
 * not import the records package.
 *
 * configure(config: dict) -> None
 *   Takes the record classes, the shared caches (valid times, usages, costs, payloads: the
 *   twin's own dicts and set, so both readings share them) and the twin's helpers. Checks that
 *   the record members per schema version are the ones this reading knows (RuntimeError if not).
 *
 * parse(value) -> dict | None
 *   ``_parse_record_fast(value)``: the constructor arguments, or None for anything it leaves to
 *   the plain reading; it raises what the twin raises (every check that can raise is made by the
 *   twin's own helper, called here, in the twin's order).
 *
 * record(value) -> DecisionRecord | None
 *   ``_record_fast(value)``: ``parse`` built into a record through each slot's own setter. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_SAFE 9007199254740991LL /* 2**53 - 1 */
#define DEPTH 60 /* deeper JSON values are read by the twin's own _json_value_at */

enum {
    F_SCHEMA, F_RECORD_ID, F_RUN_ID, F_STEP, F_PARENT_DIGESTS, F_KIND, F_TIME, F_AGENT, F_MODEL,
    F_OTEL, F_EVIDENCE, F_CANDIDATES, F_SELECTED, F_PARAMETERS, F_CONSTRAINTS, F_EXPECTED,
    F_ACTUAL, F_PAYLOAD, F_STARTED, F_ENDED, F_USAGE, F_COST, F_MODEL_PARAMETERS, F_CHAIN,
    F_SIGNATURE, N_FIELDS
};
static const char *FIELD_NAMES[N_FIELDS] = {
    "schema", "record_id", "run_id", "step", "parent_digests", "kind", "time", "agent", "model",
    "otel", "evidence", "candidates", "selected", "parameters", "constraints", "expected_outcome",
    "actual_outcome", "payload", "started_at", "ended_at", "usage", "cost", "model_parameters",
    "chain", "signature",
};
#define MAX_VERSION 3
static const int FIELDS_IN[MAX_VERSION + 1] = {0, 18, 23, 25}; /* members of a v1, v2, v3 record */

static PyObject *S[N_FIELDS]; /* the member names */

enum {
    K_TRACE_ID, K_SPAN_ID, K_INPUT_TOKENS, K_OUTPUT_TOKENS, K_TOTAL_TOKENS, K_AMOUNT, K_CURRENCY,
    K_TOOL, K_INPUTS_USED, K_OUTPUTS_GENERATED, K_KEY, K_VALUE, K_SOURCE, K_TRUST_LABEL,
    K_CONSTRAINT_ID, K_PASSED, K_COMMITMENT, K_EMPTY, K_TOOL_CALL, K_PARAMETER_CONSTRUCTION,
    K_MEMORY_WRITE, K_CONSTRAINT_CHECK, K_PAYLOAD_VALUE, K_RUN_CLOSED, K_STEPS, K_RECORD_DIGEST,
    N_KEYS
};
static const char *KEY_NAMES[N_KEYS] = {
    "trace_id", "span_id", "input_tokens", "output_tokens", "total_tokens", "amount", "currency",
    "tool", "inputs_used", "outputs_generated", "key", "value", "source", "trust_label",
    "constraint_id", "passed", "commitment", "", "tool_call", "parameter_construction",
    "memory_write", "constraint_check", "payload.value", "run_closed", "steps", "record_digest",
};
static PyObject *K[N_KEYS];

/* --- what configure gives (strong references, replaced on each configure) --------------------- */

enum {
    T_RECORD, T_OTEL, T_USAGE, T_COST, T_COMMITMENT, T_TOOL_CALL, T_PARAMETER_CONSTRUCTION,
    T_MEMORY_WRITE, T_CONSTRAINT_CHECK, T_TOOL_SELECTION, T_RUN_CLOSED, T_RUN_STEP, N_TYPES
};
static const char *TYPE_KEYS[N_TYPES] = {
    "record", "otel", "usage", "cost", "commitment", "tool_call", "parameter_construction",
    "memory_write", "constraint_check", "tool_selection", "run_closed", "run_step",
};
static PyObject *T[N_TYPES];

enum {
    C_RFC3339, C_EMPTY_OR, C_JSON_VALUE, C_JSON_VALUE_AT, C_MODEL_PARAMETERS, C_CHAIN, C_SIGNATURE,
    C_PAYLOAD, C_CHECKED_ACROSS, C_COMMITMENT_FROM, C_PAYLOAD_TYPES, C_VERSIONS, C_TIMES, C_USAGES,
    C_COSTS, C_PAYLOADS, C_FORMAT_ERROR, C_SETTERS, C_PARSE_TWIN, C_RECORD_TWIN, N_CONFIG
};
static const char *CONFIG_KEYS[N_CONFIG] = {
    "rfc3339", "empty_or", "json_value", "json_value_at", "model_parameters", "chain",
    "signature", "payload", "checked_across", "commitment_from", "payload_types", "versions",
    "times", "usages", "costs", "payloads", "format_error", "setters", "parse_twin", "record_twin",
};
static PyObject *C[N_CONFIG];
static Py_ssize_t cache_max = 4096;

/* Each built class's slot descriptors, in the order its values are given. */
#define MAX_SLOTS 4
static PyObject *D[N_TYPES][MAX_SLOTS];
static const char *SLOT_NAMES[N_TYPES][MAX_SLOTS] = {
    [T_OTEL] = {"trace_id", "span_id"},
    [T_USAGE] = {"input_tokens", "output_tokens", "total_tokens"},
    [T_COST] = {"amount", "currency"},
    [T_COMMITMENT] = {"digest", "leaves"},
    [T_TOOL_CALL] = {"tool", "inputs_used", "outputs_generated"},
    [T_PARAMETER_CONSTRUCTION] = {"tool"},
    [T_MEMORY_WRITE] = {"key", "value", "source", "trust_label"},
    [T_CONSTRAINT_CHECK] = {"constraint_id", "passed"},
    [T_RUN_CLOSED] = {"steps"},
    [T_RUN_STEP] = {"step", "record_digest"},
};
static int configured = 0;
static PyObject *empty_tuple;

/* --- small helpers ------------------------------------------------------------------------------ */

/* A new instance of ``type`` as ``object.__new__(type)``, each slot set through its own
   descriptor's setter (what the twin's setters and the frozen dataclass's __init__ do). */
static PyObject *make(int t, PyObject **values, int n) {
    PyObject *obj = PyBaseObject_Type.tp_new((PyTypeObject *)T[t], empty_tuple, NULL);
    if (obj == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *d = D[t][i];
        if (Py_TYPE(d)->tp_descr_set(d, obj, values[i]) < 0) {
            Py_DECREF(obj);
            return NULL;
        }
    }
    return obj;
}

static PyObject *call2(int c, PyObject *a, PyObject *b) {
    PyObject *args[2] = {a, b};
    return PyObject_Vectorcall(C[c], args, 2, NULL);
}

static PyObject *call3(int c, PyObject *a, PyObject *b, PyObject *d) {
    PyObject *args[3] = {a, b, d};
    return PyObject_Vectorcall(C[c], args, 3, NULL);
}

/* A member of an exact dict: borrowed, NULL when absent (then *err says whether an exception is
   set, as ``dict.get`` would raise it). */
static inline PyObject *member(PyObject *d, PyObject *key, int *err) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred()) *err = 1;
    return v;
}

static inline int is_scalar(PyObject *v) { /* type(v) in (str, int, float, bool, NoneType) */
    return v == Py_None || PyUnicode_CheckExact(v) || PyLong_CheckExact(v) || PyBool_Check(v) ||
           PyFloat_CheckExact(v);
}

static inline int nonempty_str(PyObject *v) {
    return PyUnicode_CheckExact(v) && PyUnicode_GET_LENGTH(v) > 0;
}

static unsigned char HEX[256]; /* 1 for the lowercase hex digits [0-9a-f] */

static inline int is_hex(unsigned char c) { return HEX[c]; }

/* The ASCII bytes of an exact str of length ``n``, or NULL (no exception). */
static inline const unsigned char *ascii_of(PyObject *v, Py_ssize_t n) {
    if (!PyUnicode_CheckExact(v) || !PyUnicode_IS_ASCII(v) || PyUnicode_GET_LENGTH(v) != n)
        return NULL;
    return (const unsigned char *)PyUnicode_DATA(v);
}

/* An exact str of ``n`` lowercase hex digits (``[0-9a-f]{n}``). */
static int hex_str(PyObject *v, Py_ssize_t n) {
    const unsigned char *p = ascii_of(v, n);
    if (p == NULL) return 0;
    unsigned char all = 1;
    for (Py_ssize_t i = 0; i < n; i++) all &= HEX[p[i]];
    return all;
}

/* An id of ``n`` lowercase hex digits that are not all zero (the OTel ids). */
static int otel_id(PyObject *v, Py_ssize_t n) {
    if (!hex_str(v, n)) return 0;
    const unsigned char *p = PyUnicode_DATA(v);
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] != '0') return 1;
    return 0;
}

static int uuid7(PyObject *v) { /* _UUID7 */
    const unsigned char *p = ascii_of(v, 36);
    if (p == NULL) return 0;
    for (int i = 0; i < 36; i++) {
        unsigned char c = p[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') return 0;
        } else if (i == 14) {
            if (c != '7') return 0;
        } else if (i == 19) {
            if (c != '8' && c != '9' && c != 'a' && c != 'b') return 0;
        } else if (!is_hex(c)) {
            return 0;
        }
    }
    return 1;
}

static int amount_text(PyObject *v) { /* _AMOUNT: (?:0|[1-9][0-9]*)(?:\.[0-9]+)? */
    if (!PyUnicode_IS_ASCII(v)) return 0;
    const unsigned char *p = PyUnicode_DATA(v);
    Py_ssize_t n = PyUnicode_GET_LENGTH(v), i = 0;
    if (n == 0 || p[0] < '0' || p[0] > '9') return 0;
    if (p[0] == '0') {
        i = 1;
    } else {
        while (i < n && p[i] >= '0' && p[i] <= '9') i++;
    }
    if (i == n) return 1;
    if (p[i] != '.' || i + 1 == n) return 0;
    for (i++; i < n; i++)
        if (p[i] < '0' || p[i] > '9') return 0;
    return 1;
}

static int currency_text(PyObject *v) { /* _CURRENCY: [A-Z]{3} */
    const unsigned char *p = ascii_of(v, 3);
    if (p == NULL) return 0;
    for (int i = 0; i < 3; i++)
        if (p[i] < 'A' || p[i] > 'Z') return 0;
    return 1;
}

/* ``cache[key] = value``, the cache emptied first when full (the twin's caches' rule). */
static int cache_put(PyObject *cache, PyObject *key, PyObject *value) {
    if (PyDict_GET_SIZE(cache) >= cache_max) PyDict_Clear(cache);
    return PyDict_SetItem(cache, key, value);
}

/* --- the twin's helpers ------------------------------------------------------------------------ */

static PyObject *digests_fast(PyObject *v) { /* _digests_fast */
    if (!PyList_CheckExact(v)) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(v);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!hex_str(PyList_GET_ITEM(v, i), 64)) Py_RETURN_NONE;
    if (n > 1) {
        PyObject *set = PySet_New(v);
        if (set == NULL) return NULL;
        Py_ssize_t unique = PySet_GET_SIZE(set);
        Py_DECREF(set);
        if (unique != n) Py_RETURN_NONE;
    }
    return PyList_AsTuple(v);
}

static PyObject *rfc3339(PyObject *v, PyObject *path) { /* _rfc3339 */
    if (PyUnicode_CheckExact(v)) {
        int seen = PySet_Contains(C[C_TIMES], v);
        if (seen < 0) return NULL;
        if (seen) return Py_NewRef(v);
    }
    return call2(C_RFC3339, v, path);
}

static PyObject *empty_or(PyObject *v, PyObject *name) { /* _empty_or */
    if (PyList_CheckExact(v) && PyList_GET_SIZE(v) == 0) return PyTuple_New(0);
    return call2(C_EMPTY_OR, v, name);
}

/* Commitment.from_json_obj(obj, "") for an object whose only member is ``commitment`` (its
   value ``text``): the whole-field form built here, anything else by the twin. */
static PyObject *commitment(PyObject *obj, PyObject *text) {
    const unsigned char *p = ascii_of(text, 71);
    if (p != NULL && memcmp(p, "sha256:", 7) == 0) {
        unsigned char raw[32];
        int ok = 1;
        for (int i = 0; i < 32 && ok; i++) {
            unsigned char hi = p[7 + 2 * i], lo = p[8 + 2 * i];
            if (!is_hex(hi) || !is_hex(lo)) ok = 0;
            else raw[i] = (unsigned char)(((hi <= '9' ? hi - '0' : hi - 'a' + 10) << 4) |
                                          (lo <= '9' ? lo - '0' : lo - 'a' + 10));
        }
        if (ok) {
            PyObject *digest = PyBytes_FromStringAndSize((const char *)raw, 32);
            if (digest == NULL) return NULL;
            PyObject *zero = PyLong_FromLong(0);
            PyObject *values[2] = {digest, zero};
            PyObject *made = zero == NULL ? NULL : make(T_COMMITMENT, values, 2);
            Py_DECREF(digest);
            Py_XDECREF(zero);
            return made;
        }
    }
    return call2(C_COMMITMENT_FROM, obj, K[K_EMPTY]);
}

static PyObject *json_value_at(PyObject *v, int depth);

/* A copy of the exact dict ``v`` with each member's value read by json_value_at at ``depth``. */
static PyObject *members_read(PyObject *v, int depth) {
    PyObject *out = PyDict_New(), *key, *item;
    Py_ssize_t pos = 0;
    if (out == NULL) return NULL;
    while (PyDict_Next(v, &pos, &key, &item)) {
        Py_INCREF(key);
        Py_INCREF(item);
        PyObject *read = json_value_at(item, depth);
        Py_DECREF(item);
        if (read == NULL || PyDict_SetItem(out, key, read) < 0) {
            Py_DECREF(key);
            Py_XDECREF(read);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(key);
        Py_DECREF(read);
    }
    return out;
}

/* _json_value_at(v, None): the value with its commitments read. */
static PyObject *json_value_at(PyObject *v, int depth) {
    if (is_scalar(v)) return Py_NewRef(v);
    if (PyDict_CheckExact(v)) {
        if (PyDict_GET_SIZE(v) == 1) {
            PyObject *text = PyDict_GetItemWithError(v, K[K_COMMITMENT]);
            if (text != NULL) return commitment(v, text);
            if (PyErr_Occurred()) return NULL;
        }
        if (depth >= DEPTH) return call2(C_JSON_VALUE_AT, v, Py_None);
        return members_read(v, depth + 1);
    }
    if (PyList_CheckExact(v)) {
        if (depth >= DEPTH) return call2(C_JSON_VALUE_AT, v, Py_None);
        PyObject *out = PyList_New(0);
        if (out == NULL) return NULL;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            PyObject *item = Py_NewRef(PyList_GET_ITEM(v, i));
            PyObject *read = json_value_at(item, depth + 1);
            Py_DECREF(item);
            if (read == NULL || PyList_Append(out, read) < 0) {
                Py_XDECREF(read);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(read);
        }
        return out;
    }
    return call2(C_JSON_VALUE_AT, v, Py_None);
}

/* _json_value(v, path): a problem is named by the twin's own reading again with the path. */
static PyObject *json_value(PyObject *v, PyObject *path) {
    if (is_scalar(v)) return Py_NewRef(v);
    PyObject *read = json_value_at(v, 0);
    if (read == NULL && PyErr_ExceptionMatches(C[C_FORMAT_ERROR])) {
        PyErr_Clear();
        return call2(C_JSON_VALUE, v, path);
    }
    return read;
}

static PyObject *otel_fast(PyObject *v) { /* _otel_fast */
    if (!PyDict_CheckExact(v) || PyDict_GET_SIZE(v) != 2) Py_RETURN_NONE;
    int err = 0;
    PyObject *trace = member(v, K[K_TRACE_ID], &err);
    PyObject *span = err ? NULL : member(v, K[K_SPAN_ID], &err);
    if (err) return NULL;
    if (trace == NULL || span == NULL || !otel_id(trace, 32) || !otel_id(span, 16)) Py_RETURN_NONE;
    PyObject *values[2] = {trace, span};
    return make(T_OTEL, values, 2);
}

static PyObject *evidence_fast(PyObject *v) { /* _evidence_fast */
    if (!PyDict_CheckExact(v)) Py_RETURN_NONE;
    int empty = PyDict_Contains(v, K[K_EMPTY]);
    if (empty < 0) return NULL;
    if (empty) Py_RETURN_NONE;
    PyObject *key, *item;
    Py_ssize_t pos = 0;
    while (PyDict_Next(v, &pos, &key, &item))
        if (!hex_str(item, 64)) Py_RETURN_NONE;
    return PyDict_Copy(v);
}

static PyObject *parameters_fast(PyObject *v) { /* _parameters_fast */
    if (!PyDict_CheckExact(v)) Py_RETURN_NONE;
    if (PyDict_GET_SIZE(v) == 1) {
        int whole = PyDict_Contains(v, K[K_COMMITMENT]);
        if (whole < 0) return NULL;
        if (whole) Py_RETURN_NONE;
    }
    return members_read(v, 0);
}

static PyObject *usage_fast(PyObject *v) { /* _usage_fast */
    if (!PyDict_CheckExact(v) || PyDict_GET_SIZE(v) != 3) Py_RETURN_NONE;
    PyObject *counts[3];
    int err = 0;
    for (int i = 0; i < 3; i++) {
        counts[i] = member(v, K[K_INPUT_TOKENS + i], &err);
        if (err) return NULL;
        if (counts[i] == NULL) Py_RETURN_NONE;
    }
    for (int i = 0; i < 3; i++) {
        PyObject *count = counts[i];
        if (count == Py_None) continue;
        if (!PyLong_CheckExact(count)) Py_RETURN_NONE;
        int overflow = 0;
        long long n = PyLong_AsLongLongAndOverflow(count, &overflow);
        if (n == -1 && PyErr_Occurred()) return NULL;
        if (overflow || n < 0 || n > MAX_SAFE) Py_RETURN_NONE;
    }
    PyObject *key = PyTuple_Pack(3, counts[0], counts[1], counts[2]);
    if (key == NULL) return NULL;
    PyObject *found = PyDict_GetItemWithError(C[C_USAGES], key);
    if (found != NULL) {
        Py_DECREF(key);
        return Py_NewRef(found);
    }
    PyObject *made = PyErr_Occurred() ? NULL : make(T_USAGE, counts, 3);
    if (made != NULL && cache_put(C[C_USAGES], key, made) < 0) Py_CLEAR(made);
    Py_DECREF(key);
    return made;
}

static PyObject *cost_fast(PyObject *v) { /* _cost_fast */
    if (!PyDict_CheckExact(v) || PyDict_GET_SIZE(v) != 2) Py_RETURN_NONE;
    int err = 0;
    PyObject *amount = member(v, K[K_AMOUNT], &err);
    PyObject *currency = err ? NULL : member(v, K[K_CURRENCY], &err);
    if (err) return NULL;
    if (amount == NULL || currency == NULL || !PyUnicode_CheckExact(amount) ||
        !PyUnicode_CheckExact(currency))
        Py_RETURN_NONE;
    PyObject *key = PyTuple_Pack(2, amount, currency);
    if (key == NULL) return NULL;
    PyObject *found = PyDict_GetItemWithError(C[C_COSTS], key);
    if (found != NULL || PyErr_Occurred()) {
        Py_DECREF(key);
        return Py_XNewRef(found);
    }
    if (!amount_text(amount) || !currency_text(currency)) {
        Py_DECREF(key);
        Py_RETURN_NONE;
    }
    PyObject *values[2] = {amount, currency};
    PyObject *made = make(T_COST, values, 2);
    if (made != NULL && cache_put(C[C_COSTS], key, made) < 0) Py_CLEAR(made);
    Py_DECREF(key);
    return made;
}

/* A shared payload: the one stored under ``key``, else ``t`` made of ``values`` and stored.
   A key that cannot be hashed (TypeError) is found nowhere, as in the twin. */
static PyObject *shared_lookup(PyObject *key, int *err) {
    PyObject *found = PyDict_GetItemWithError(C[C_PAYLOADS], key);
    if (found == NULL && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) PyErr_Clear();
        else *err = 1;
    }
    return found;
}

static PyObject *shared_make(PyObject *key, int t, PyObject **values, int n) {
    PyObject *made = make(t, values, n);
    if (made != NULL && cache_put(C[C_PAYLOADS], key, made) < 0) Py_CLEAR(made);
    return made;
}

static PyObject *run_steps_fast(PyObject *v) { /* _run_steps_fast */
    if (!PyList_CheckExact(v)) Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(v);
    long long last = -1;
    for (Py_ssize_t i = 0; i < n; i++) { /* everything checked before anything is built */
        PyObject *item = PyList_GET_ITEM(v, i);
        if (!PyDict_CheckExact(item) || PyDict_GET_SIZE(item) != 2) Py_RETURN_NONE;
        int err = 0;
        PyObject *step = member(item, S[F_STEP], &err);
        PyObject *digest = err ? NULL : member(item, K[K_RECORD_DIGEST], &err);
        if (err) return NULL;
        if (step == NULL || digest == NULL || !PyLong_CheckExact(step) || !hex_str(digest, 64))
            Py_RETURN_NONE;
        int overflow = 0;
        long long s = PyLong_AsLongLongAndOverflow(step, &overflow);
        if (s == -1 && PyErr_Occurred()) return NULL;
        if (overflow || s <= last || s > MAX_SAFE) Py_RETURN_NONE;
        last = s;
    }
    PyObject *out = PyTuple_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(v, i);
        PyObject *values[2] = {PyDict_GetItem(item, S[F_STEP]),
                               PyDict_GetItem(item, K[K_RECORD_DIGEST])};
        PyObject *made = make(T_RUN_STEP, values, 2);
        if (made == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, made);
    }
    return out;
}

static PyObject *payload_fast(PyObject *kind, PyObject *v) { /* _payload_fast */
    if (PyDict_CheckExact(v)) {
        Py_ssize_t size = PyDict_GET_SIZE(v);
        int err = 0;
        if (size == 3 && PyUnicode_Compare(kind, K[K_TOOL_CALL]) == 0) {
            PyObject *tool = member(v, K[K_TOOL], &err);
            PyObject *used = err ? NULL : member(v, K[K_INPUTS_USED], &err);
            PyObject *made = err ? NULL : member(v, K[K_OUTPUTS_GENERATED], &err);
            if (err) return NULL;
            if (used != NULL && made != NULL && tool != NULL && PyList_CheckExact(used) &&
                PyList_CheckExact(made) && PyUnicode_CheckExact(tool)) {
                Py_ssize_t nu = PyList_GET_SIZE(used), nm = PyList_GET_SIZE(made);
                PyObject *key = PyTuple_New(3 + nu + nm);
                if (key == NULL) return NULL;
                PyTuple_SET_ITEM(key, 0, Py_NewRef(kind));
                PyTuple_SET_ITEM(key, 1, Py_NewRef(tool));
                PyObject *count = PyLong_FromSsize_t(nu);
                if (count == NULL) {
                    Py_DECREF(key);
                    return NULL;
                }
                PyTuple_SET_ITEM(key, 2, count);
                for (Py_ssize_t i = 0; i < nu; i++)
                    PyTuple_SET_ITEM(key, 3 + i, Py_NewRef(PyList_GET_ITEM(used, i)));
                for (Py_ssize_t i = 0; i < nm; i++)
                    PyTuple_SET_ITEM(key, 3 + nu + i, Py_NewRef(PyList_GET_ITEM(made, i)));
                PyObject *found = shared_lookup(key, &err);
                if (found != NULL || err) {
                    Py_DECREF(key);
                    return Py_XNewRef(found);
                }
                PyObject *used_ok = digests_fast(used);
                PyObject *made_ok = used_ok == NULL ? NULL : digests_fast(made);
                PyObject *out = NULL;
                if (used_ok != NULL && made_ok != NULL) {
                    if (PyUnicode_GET_LENGTH(tool) > 0 && used_ok != Py_None &&
                        made_ok != Py_None) {
                        PyObject *values[3] = {tool, used_ok, made_ok};
                        out = shared_make(key, T_TOOL_CALL, values, 3);
                    } else {
                        out = Py_None; /* left to the plain reading below */
                    }
                }
                Py_XDECREF(used_ok);
                Py_XDECREF(made_ok);
                Py_DECREF(key);
                if (out != Py_None) return out;
            }
        } else if (size == 1 && PyUnicode_Compare(kind, K[K_PARAMETER_CONSTRUCTION]) == 0) {
            PyObject *tool = member(v, K[K_TOOL], &err);
            if (err) return NULL;
            if (tool != NULL && nonempty_str(tool)) {
                PyObject *key = PyTuple_Pack(2, kind, tool);
                if (key == NULL) return NULL;
                PyObject *found = shared_lookup(key, &err);
                PyObject *out = found != NULL || err ? Py_XNewRef(found)
                                                     : shared_make(key, T_PARAMETER_CONSTRUCTION,
                                                                   &tool, 1);
                Py_DECREF(key);
                return out;
            }
        } else if (size == 4 && PyUnicode_Compare(kind, K[K_MEMORY_WRITE]) == 0) {
            PyObject *key = member(v, K[K_KEY], &err);
            PyObject *source = err ? NULL : member(v, K[K_SOURCE], &err);
            PyObject *label = err ? NULL : member(v, K[K_TRUST_LABEL], &err);
            PyObject *value = err ? NULL : member(v, K[K_VALUE], &err);
            if (err) return NULL;
            if (value != NULL && key != NULL && nonempty_str(key) && source != NULL &&
                nonempty_str(source) && label != NULL && nonempty_str(label)) {
                PyObject *values[4] = {key, value, source, label}, *out = NULL;
                for (int i = 0; i < 4; i++) Py_INCREF(values[i]); /* held: Python may run */
                PyObject *item = json_value(value, K[K_PAYLOAD_VALUE]);
                if (item != NULL) {
                    Py_SETREF(values[1], item);
                    out = make(T_MEMORY_WRITE, values, 4);
                }
                for (int i = 0; i < 4; i++) Py_DECREF(values[i]);
                return out;
            }
        } else if (size == 2 && PyUnicode_Compare(kind, K[K_CONSTRAINT_CHECK]) == 0) {
            PyObject *constraint = member(v, K[K_CONSTRAINT_ID], &err);
            PyObject *passed = err ? NULL : member(v, K[K_PASSED], &err);
            if (err) return NULL;
            if (constraint != NULL && nonempty_str(constraint) && passed != NULL &&
                PyBool_Check(passed)) {
                PyObject *key = PyTuple_Pack(3, kind, constraint, passed);
                if (key == NULL) return NULL;
                PyObject *found = shared_lookup(key, &err);
                PyObject *values[2] = {constraint, passed};
                PyObject *out = found != NULL || err
                                    ? Py_XNewRef(found)
                                    : shared_make(key, T_CONSTRAINT_CHECK, values, 2);
                Py_DECREF(key);
                return out;
            }
        } else if (size == 1 && PyUnicode_Compare(kind, K[K_RUN_CLOSED]) == 0) {
            PyObject *steps = member(v, K[K_STEPS], &err);
            if (err) return NULL;
            PyObject *read = steps == NULL ? Py_NewRef(Py_None) : run_steps_fast(steps);
            if (read == NULL) return NULL;
            if (read != Py_None) {
                PyObject *out = make(T_RUN_CLOSED, &read, 1);
                Py_DECREF(read);
                return out;
            }
            Py_DECREF(read);
        }
    }
    return call3(C_PAYLOAD, kind, v, S[F_PAYLOAD]);
}

/* --- the record ---------------------------------------------------------------------------------- */

static PyObject *REC[N_FIELDS]; /* DecisionRecord's slot descriptor per member (none for kind) */

static void clear_values(PyObject **v) {
    for (int f = 0; f < N_FIELDS; f++) Py_CLEAR(v[f]);
}

/* The fast reading's values, in the twin's order of reading, into ``v`` (new references, by
   member; kind's stays NULL): 1 when read, 0 when left to the plain reading (None), -1 with the
   exception a helper raised. The checks across members are not made here. */
static int read_members(PyObject **m, PyObject **v, long version);

static int read_values(PyObject *value, PyObject **v, PyObject **version_obj, long *version) {
    for (int f = 0; f < N_FIELDS; f++) v[f] = NULL;
    if (!PyDict_CheckExact(value)) return 0;
    int err = 0;
    PyObject *schema = member(value, S[F_SCHEMA], &err);
    if (err) return -1;
    if (schema == NULL || !PyUnicode_CheckExact(schema)) return 0;
    *version_obj = PyDict_GetItemWithError(C[C_VERSIONS], schema);
    if (*version_obj == NULL) return PyErr_Occurred() ? -1 : 0;
    *version = PyLong_AsLong(*version_obj);
    if (*version < 1 || *version > MAX_VERSION) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "a schema version this reading does not know");
        return -1;
    }
    int n = FIELDS_IN[*version];
    if (PyDict_GET_SIZE(value) != n) return 0;
    PyObject *m[N_FIELDS] = {NULL};
    for (int i = 0; i < n; i++) {
        m[i] = member(value, S[i], &err);
        if (err) return -1;
        if (m[i] == NULL) return 0;
    }
    /* held while the twin's helpers run (Python code: the dict may change meanwhile) */
    for (int i = 0; i < n; i++) Py_INCREF(m[i]);
    int read = read_members(m, v, *version);
    for (int i = 0; i < n; i++) Py_DECREF(m[i]);
    return read;
}

/* read_values for the members ``m`` of a record of schema ``version``. */
static int read_members(PyObject **m, PyObject **v, long version) {
    PyObject *kind = m[F_KIND], *step = m[F_STEP], *model = m[F_MODEL];
    if (!PyUnicode_CheckExact(kind)) return 0;
    int known = PyDict_Contains(C[C_PAYLOAD_TYPES], kind);
    if (known < 0) return -1;
    if (!known || !uuid7(m[F_RECORD_ID]) || !nonempty_str(m[F_RUN_ID]) ||
        !nonempty_str(m[F_AGENT]) || !PyLong_CheckExact(step) ||
        !(model == Py_None || nonempty_str(model)))
        return 0;
    int overflow = 0;
    long long step_n = PyLong_AsLongLongAndOverflow(step, &overflow);
    if (step_n == -1 && PyErr_Occurred()) return -1;
    if (overflow || step_n < 0 || step_n > MAX_SAFE) return 0;
    PyObject *selected = m[F_SELECTED], *otel = m[F_OTEL];
    if (!(selected == Py_None || nonempty_str(selected))) return 0;

    /* in the twin's order: a helper that raises stops the reading where the twin's stops */
    v[F_SCHEMA] = Py_NewRef(m[F_SCHEMA]);
    v[F_RECORD_ID] = Py_NewRef(m[F_RECORD_ID]);
    v[F_RUN_ID] = Py_NewRef(m[F_RUN_ID]);
    v[F_STEP] = Py_NewRef(step);
    v[F_AGENT] = Py_NewRef(m[F_AGENT]);
    v[F_MODEL] = Py_NewRef(model);
    v[F_SELECTED] = Py_NewRef(selected);
    if ((v[F_PARENT_DIGESTS] = digests_fast(m[F_PARENT_DIGESTS])) == NULL ||
        (v[F_TIME] = rfc3339(m[F_TIME], S[F_TIME])) == NULL ||
        (v[F_OTEL] = otel == Py_None ? Py_NewRef(Py_None) : otel_fast(otel)) == NULL ||
        (v[F_EVIDENCE] = evidence_fast(m[F_EVIDENCE])) == NULL ||
        (v[F_CANDIDATES] = empty_or(m[F_CANDIDATES], S[F_CANDIDATES])) == NULL ||
        (v[F_PARAMETERS] = parameters_fast(m[F_PARAMETERS])) == NULL ||
        (v[F_CONSTRAINTS] = empty_or(m[F_CONSTRAINTS], S[F_CONSTRAINTS])) == NULL ||
        (v[F_EXPECTED] = json_value(m[F_EXPECTED], S[F_EXPECTED])) == NULL ||
        (v[F_ACTUAL] = json_value(m[F_ACTUAL], S[F_ACTUAL])) == NULL)
        goto fail;
    if (version >= 2) {
        PyObject *started = m[F_STARTED], *ended = m[F_ENDED], *mp = m[F_MODEL_PARAMETERS];
        if ((v[F_STARTED] = started == Py_None ? Py_NewRef(Py_None)
                                               : rfc3339(started, S[F_STARTED])) == NULL ||
            (v[F_ENDED] = ended == Py_None ? Py_NewRef(Py_None) : rfc3339(ended, S[F_ENDED])) ==
                NULL ||
            (v[F_USAGE] = m[F_USAGE] == Py_None ? Py_NewRef(Py_None) : usage_fast(m[F_USAGE])) ==
                NULL ||
            (v[F_COST] = m[F_COST] == Py_None ? Py_NewRef(Py_None) : cost_fast(m[F_COST])) ==
                NULL ||
            (v[F_MODEL_PARAMETERS] =
                 PyDict_CheckExact(mp) && PyDict_GET_SIZE(mp) == 0
                     ? PyDict_New()
                     : call2(C_MODEL_PARAMETERS, mp, S[F_MODEL_PARAMETERS])) == NULL)
            goto fail;
    }
    if (version >= 3) {
        PyObject *chain = m[F_CHAIN], *signature = m[F_SIGNATURE];
        if ((v[F_CHAIN] = chain == Py_None ? Py_NewRef(Py_None)
                                           : call2(C_CHAIN, chain, S[F_CHAIN])) == NULL ||
            (v[F_SIGNATURE] = signature == Py_None
                                  ? Py_NewRef(Py_None)
                                  : call2(C_SIGNATURE, signature, S[F_SIGNATURE])) == NULL)
            goto fail;
    }
    if (v[F_PARENT_DIGESTS] == Py_None || (otel != Py_None && v[F_OTEL] == Py_None) ||
        v[F_EVIDENCE] == Py_None || v[F_PARAMETERS] == Py_None ||
        (version >= 2 && m[F_USAGE] != Py_None && v[F_USAGE] == Py_None) ||
        (version >= 2 && m[F_COST] != Py_None && v[F_COST] == Py_None)) {
        clear_values(v);
        return 0;
    }
    for (int f = FIELDS_IN[version]; f < N_FIELDS; f++) /* the later members' defaults */
        if ((v[f] = f == F_MODEL_PARAMETERS ? PyDict_New() : Py_NewRef(Py_None)) == NULL)
            goto fail;
    if ((v[F_PAYLOAD] = payload_fast(kind, m[F_PAYLOAD])) == NULL) goto fail;
    return 1;
fail:
    clear_values(v);
    return -1;
}

/* The twin's arguments dict, members in its order (payload last, no kind). */
static PyObject *args_of(PyObject **v) {
    PyObject *args = PyDict_New();
    if (args == NULL) return NULL;
    for (int f = 0; f <= N_FIELDS; f++) {
        int g = f == N_FIELDS ? F_PAYLOAD : f;
        if ((f < N_FIELDS && (f == F_KIND || f == F_PAYLOAD)) || v[g] == NULL) continue;
        if (PyDict_SetItem(args, S[g], v[g]) < 0) {
            Py_DECREF(args);
            return NULL;
        }
    }
    return args;
}

/* Whether the checks across members (``_checked_across``) pass as the values stand: the
   common case (no candidates, nothing selected, no chain link, not both times, schema v2 on,
   no tool selection, a run closing after every step it lists). 0: the twin's to check. */
static int plainly_across(PyObject **v, long version) {
    PyObject *candidates = v[F_CANDIDATES], *payload = v[F_PAYLOAD];
    if (!(version >= 2 && PyTuple_CheckExact(candidates) && PyTuple_GET_SIZE(candidates) == 0 &&
          v[F_SELECTED] == Py_None && v[F_CHAIN] == Py_None &&
          !PyObject_TypeCheck(payload, (PyTypeObject *)T[T_TOOL_SELECTION]) &&
          (v[F_STARTED] == Py_None || v[F_ENDED] == Py_None)))
        return 0;
    if (Py_TYPE(payload) != (PyTypeObject *)T[T_RUN_CLOSED])
        return !PyObject_TypeCheck(payload, (PyTypeObject *)T[T_RUN_CLOSED]);
    PyObject *steps = PyObject_GetAttr(payload, K[K_STEPS]);
    if (steps == NULL) return -1;
    int after = 0;
    if (PyTuple_CheckExact(steps) && PyTuple_GET_SIZE(steps) == 0) {
        after = 1;
    } else if (PyTuple_CheckExact(steps) && PyLong_CheckExact(v[F_STEP])) {
        PyObject *last = PyTuple_GET_ITEM(steps, PyTuple_GET_SIZE(steps) - 1);
        if (Py_TYPE(last) == (PyTypeObject *)T[T_RUN_STEP]) {
            PyObject *last_step = PyObject_GetAttr(last, S[F_STEP]);
            if (last_step == NULL) after = -1;
            else if (PyLong_CheckExact(last_step))
                after = PyObject_RichCompareBool(last_step, v[F_STEP], Py_LT);
            Py_XDECREF(last_step);
        }
    }
    Py_DECREF(steps);
    return after;
}

/* Whether ``v`` is plain JSON of the exact built-in types (str, int, float, bool, None, dict with
   str keys, list) down to ``PLAIN_DEPTH`` levels. The readings above keep borrowed references
   across dict look-ups, hashing and comparisons: on plain JSON none of those runs Python code
   (a str subclass's ``__eq__`` or ``__hash__`` could change a dict under a look-up), so only such
   values are read here; anything else (Python objects given directly) is read by the twin. */
#define PLAIN_DEPTH 64
static int all_plain(PyObject *v, int depth) {
    if (is_scalar(v)) return 1;
    if (depth >= PLAIN_DEPTH) return 0;
    if (PyDict_CheckExact(v)) {
        PyObject *key, *item;
        Py_ssize_t pos = 0;
        while (PyDict_Next(v, &pos, &key, &item))
            if (!PyUnicode_CheckExact(key) || !all_plain(item, depth + 1)) return 0;
        return 1;
    }
    if (PyList_CheckExact(v)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++)
            if (!all_plain(PyList_GET_ITEM(v, i), depth + 1)) return 0;
        return 1;
    }
    return 0;
}

/* _parse_record_fast(value) (``record`` 0), or _record_fast(value) (``record`` 1). */
static PyObject *read_record(PyObject *value, int record) {
    if (!all_plain(value, 0)) /* not plain JSON: the twin reads it (all_plain) */
        return PyObject_CallOneArg(C[record ? C_RECORD_TWIN : C_PARSE_TWIN], value);
    PyObject *v[N_FIELDS], *version_obj = NULL, *out = NULL;
    long version = 0;
    int read = read_values(value, v, &version_obj, &version);
    if (read <= 0) return read < 0 ? NULL : Py_NewRef(Py_None);
    Py_INCREF(version_obj); /* held while the twin's helpers run */
    int plain = plainly_across(v, version);
    if (plain < 0) goto done;
    if (plain && record) { /* each slot set through its own descriptor, as the twin's setters */
        out = PyBaseObject_Type.tp_new((PyTypeObject *)T[T_RECORD], empty_tuple, NULL);
        for (int f = 0; f < N_FIELDS && out != NULL; f++)
            if (f != F_KIND && Py_TYPE(REC[f])->tp_descr_set(REC[f], out, v[f]) < 0)
                Py_CLEAR(out);
        goto done;
    }
    PyObject *args = args_of(v);
    if (args == NULL || plain) {
        out = args;
        goto done;
    }
    out = call3(C_CHECKED_ACROSS, args, value, version_obj);
    Py_DECREF(args);
    if (out == NULL || !record) goto done;
    PyObject *checked = out, *name, *item;
    Py_ssize_t pos = 0;
    out = NULL;
    if (!PyDict_Check(checked)) {
        PyErr_SetString(PyExc_TypeError, "the checks across fields gave no dict");
    } else {
        out = PyBaseObject_Type.tp_new((PyTypeObject *)T[T_RECORD], empty_tuple, NULL);
        while (out != NULL && PyDict_Next(checked, &pos, &name, &item)) {
            PyObject *setter = PyDict_GetItemWithError(C[C_SETTERS], name);
            if (setter == NULL && !PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, name);
            if (setter == NULL || Py_TYPE(setter)->tp_descr_set(setter, out, item) < 0)
                Py_CLEAR(out);
        }
    }
    Py_DECREF(checked);
done:
    clear_values(v);
    Py_DECREF(version_obj);
    return out;
}

static int ready(void) {
    if (configured) return 0;
    PyErr_SetString(PyExc_RuntimeError,
                    "ledger.core._recordread is not configured (ledger.records.decision does it)");
    return -1;
}

static PyObject *py_parse(PyObject *self, PyObject *value) {
    return ready() < 0 ? NULL : read_record(value, 0);
}

static PyObject *py_record(PyObject *self, PyObject *value) {
    return ready() < 0 ? NULL : read_record(value, 1);
}

static PyObject *py_configure(PyObject *self, PyObject *config) {
    if (!PyDict_Check(config)) {
        PyErr_SetString(PyExc_TypeError, "configure takes a dict");
        return NULL;
    }
    PyObject *types[N_TYPES], *items[N_CONFIG], *slots[N_TYPES][MAX_SLOTS] = {{NULL}};
    for (int i = 0; i < N_TYPES; i++) {
        types[i] = PyDict_GetItemString(config, TYPE_KEYS[i]);
        if (types[i] == NULL || !PyType_Check(types[i])) {
            PyErr_Format(PyExc_TypeError, "configure: %s is not a class", TYPE_KEYS[i]);
            return NULL;
        }
    }
    for (int i = 0; i < N_CONFIG; i++) {
        items[i] = PyDict_GetItemString(config, CONFIG_KEYS[i]);
        if (items[i] == NULL) {
            PyErr_Format(PyExc_KeyError, "configure: %s is missing", CONFIG_KEYS[i]);
            return NULL;
        }
    }
    if (!PyAnySet_CheckExact(items[C_TIMES]) || !PyDict_CheckExact(items[C_USAGES]) ||
        !PyDict_CheckExact(items[C_COSTS]) || !PyDict_CheckExact(items[C_PAYLOADS]) ||
        !PyDict_CheckExact(items[C_VERSIONS]) || !PyDict_Check(items[C_PAYLOAD_TYPES]) ||
        !PyDict_Check(items[C_SETTERS])) {
        PyErr_SetString(PyExc_TypeError, "configure: a cache, version or setter table is wrong");
        return NULL;
    }
    /* the members of each version must be the ones this reading reads */
    PyObject *fields_of = PyDict_GetItemString(config, "fields_of");
    if (fields_of == NULL || !PyDict_Check(fields_of) || PyDict_GET_SIZE(fields_of) != MAX_VERSION) {
        PyErr_SetString(PyExc_RuntimeError, "configure: the record versions changed");
        return NULL;
    }
    for (long v = 1; v <= MAX_VERSION; v++) {
        PyObject *key = PyLong_FromLong(v);
        PyObject *names = key == NULL ? NULL : PyDict_GetItemWithError(fields_of, key);
        Py_XDECREF(key);
        if (names == NULL || !PyTuple_Check(names) || PyTuple_GET_SIZE(names) != FIELDS_IN[v]) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_RuntimeError, "configure: the members of v%ld changed", v);
            return NULL;
        }
        for (int i = 0; i < FIELDS_IN[v]; i++) {
            PyObject *name = PyTuple_GET_ITEM(names, i);
            if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, FIELD_NAMES[i])) {
                PyErr_Format(PyExc_RuntimeError, "configure: the members of v%ld changed", v);
                return NULL;
            }
        }
    }
    PyObject *name, *setter;
    Py_ssize_t pos = 0;
    while (PyDict_Next(items[C_SETTERS], &pos, &name, &setter))
        if (Py_TYPE(setter)->tp_descr_set == NULL) {
            PyErr_SetString(PyExc_TypeError, "configure: a record setter is not a slot");
            return NULL;
        }
    PyObject *rec[N_FIELDS] = {NULL};
    for (int f = 0; f < N_FIELDS; f++) {
        if (f == F_KIND) continue;
        rec[f] = PyDict_GetItemWithError(items[C_SETTERS], S[f]);
        if (rec[f] == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_RuntimeError, "configure: no record setter for %s",
                             FIELD_NAMES[f]);
            return NULL;
        }
    }
    PyObject *max = PyDict_GetItemString(config, "cache_max");
    Py_ssize_t new_max = max == NULL ? 4096 : PyLong_AsSsize_t(max);
    if (new_max == -1 && PyErr_Occurred()) return NULL;
    for (int t = 0; t < N_TYPES; t++) {
        for (int i = 0; i < MAX_SLOTS && SLOT_NAMES[t][i] != NULL; i++) {
            PyObject *d = PyObject_GetAttrString(types[t], SLOT_NAMES[t][i]);
            if (d == NULL || Py_TYPE(d)->tp_descr_set == NULL) {
                if (d != NULL)
                    PyErr_Format(PyExc_TypeError, "configure: %s.%s is not a slot",
                                 TYPE_KEYS[t], SLOT_NAMES[t][i]);
                Py_XDECREF(d);
                for (int u = 0; u < N_TYPES; u++)
                    for (int j = 0; j < MAX_SLOTS; j++) Py_XDECREF(slots[u][j]);
                return NULL;
            }
            slots[t][i] = d;
        }
    }
    for (int t = 0; t < N_TYPES; t++) {
        Py_XSETREF(T[t], Py_NewRef(types[t]));
        for (int i = 0; i < MAX_SLOTS; i++) Py_XSETREF(D[t][i], slots[t][i]);
    }
    for (int i = 0; i < N_CONFIG; i++) Py_XSETREF(C[i], Py_NewRef(items[i]));
    for (int f = 0; f < N_FIELDS; f++) Py_XSETREF(REC[f], Py_XNewRef(rec[f]));
    cache_max = new_max;
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", py_configure, METH_O, "Take the record classes, caches and the twin's helpers."},
    {"parse", py_parse, METH_O, "_parse_record_fast's answer: the arguments, or None."},
    {"record", py_record, METH_O, "_record_fast's answer: the record, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "ledger.core._recordread",
    "The compiled fast reading of a decision record (ledger/core/_recordread.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__recordread(void) {
    for (int c = 0; c < 256; c++) HEX[c] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    for (int i = 0; i < N_FIELDS; i++)
        if ((S[i] = PyUnicode_InternFromString(FIELD_NAMES[i])) == NULL) return NULL;
    for (int i = 0; i < N_KEYS; i++)
        if ((K[i] = PyUnicode_InternFromString(KEY_NAMES[i])) == NULL) return NULL;
    if ((empty_tuple = PyTuple_New(0)) == NULL) return NULL;
    return PyModule_Create(&module);
}
