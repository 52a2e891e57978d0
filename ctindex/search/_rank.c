/* Optional native core of ranking (docs/decisions/native.md, "Ranking"):
 * the per-match loops of ctindex/search/matcher.py, whose pure-Python
 * functions (`_field_scores_py`, `_body_scores_py`, `_add_into_py`,
 * `_max_into_py`, `_min_span_py`) are the specification. Every float is
 * computed with the same operations in the same order as there, so the
 * scores are bit for bit the pure path's (tests/ctindex/search/
 * test_matcher_native.py); the build turns floating-point contraction off
 * (setup.py) so no multiply-add fuses two roundings into one.
 *
 * Why C: a query whose words are frequent scores every match, about a
 * microsecond per match and word in Python (five dict operations, a few
 * float objects); here it is a few dict operations at C speed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A read-only view of an array('I') (or any buffer of native uint32). */
typedef struct {
    Py_buffer view;
    const uint32_t *items;
    Py_ssize_t n;
} U32;

static int u32_get(PyObject *obj, U32 *out) {
    if (PyObject_GetBuffer(obj, &out->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (out->view.itemsize != 4 || out->view.format == NULL ||
        (strcmp(out->view.format, "I") != 0 && strcmp(out->view.format, "=I") != 0 &&
         strcmp(out->view.format, "<I") != 0)) {
        PyBuffer_Release(&out->view);
        PyErr_SetString(PyExc_TypeError, "_rank: lengths must be array('I')");
        return -1;
    }
    out->items = (const uint32_t *)out->view.buf;
    out->n = out->view.len / 4;
    return 0;
}

static int u32_at(const U32 *a, long long d, long long *out) {
    if (d < 0 || d >= a->n) {
        PyErr_SetString(PyExc_IndexError, "_rank: document id out of range");
        return -1;
    }
    *out = (long long)a->items[d];
    return 0;
}

/* got[key] = got.get(key, 0.0) + add */
static int add_score(PyObject *got, PyObject *key, double add) {
    PyObject *old = PyDict_GetItemWithError(got, key);
    double base = 0.0;
    if (old != NULL) {
        base = PyFloat_AsDouble(old);
        if (base == -1.0 && PyErr_Occurred()) return -1;
    } else if (PyErr_Occurred()) {
        return -1;
    }
    PyObject *val = PyFloat_FromDouble(base + add);
    if (val == NULL) return -1;
    int rc = PyDict_SetItem(got, key, val);
    Py_DECREF(val);
    return rc;
}

/* dict.get(key, 0) of a dict of ints, as a long long; -1 with an error set. */
static int int_get(PyObject *dict, PyObject *key, long long *out) {
    PyObject *v = PyDict_GetItemWithError(dict, key);
    if (v == NULL) {
        if (PyErr_Occurred()) return -1;
        *out = 0;
        return 0;
    }
    *out = PyLong_AsLongLong(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Whether `key` passes the filter `want` (None: every key does); -1 on error. */
static int wanted(PyObject *want, PyObject *key) {
    return want == Py_None ? 1 : PySet_Contains(want, key);
}

static int filter_ok(PyObject *want) {
    if (want == Py_None || PyAnySet_Check(want)) return 1;
    PyErr_SetString(PyExc_TypeError, "_rank: the filter is a set or None");
    return 0;
}

/* field_scores(got, posting, want, lens, a, bl, wf, k1): for d, t in
 * posting, d in want: n = t / (a + bl * lens[d]);
 * got[d] = got.get(d, 0.0) + wf * n / (n + k1) */
static PyObject *field_scores(PyObject *self, PyObject *args) {
    PyObject *got, *posting, *want, *lens_obj;
    double a, bl, wf, k1;
    if (!PyArg_ParseTuple(args, "O!O!OOdddd", &PyDict_Type, &got, &PyDict_Type, &posting,
                          &want, &lens_obj, &a, &bl, &wf, &k1))
        return NULL;
    if (!filter_ok(want)) return NULL;
    U32 lens;
    if (u32_get(lens_obj, &lens) < 0) return NULL;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    int ok = 1;
    while (ok && PyDict_Next(posting, &pos, &key, &value)) {
        int in = wanted(want, key);
        if (in <= 0) {
            ok = in == 0;
            continue;
        }
        long long d = PyLong_AsLongLong(key), t = PyLong_AsLongLong(value), len;
        if (PyErr_Occurred() || u32_at(&lens, d, &len) < 0) {
            ok = 0;
            break;
        }
        double n = (double)t / (a + bl * (double)len);
        if (add_score(got, key, wf * n / (n + k1)) < 0) ok = 0;
    }
    PyBuffer_Release(&lens.view);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* body_scores(got, main, want, (title, tags, desc), lengths, (f0, f1, f2),
 * (w0, w1, w2), a, bl, wf, k1): matcher._body_scores_py. */
static PyObject *body_scores(PyObject *self, PyObject *args) {
    PyObject *got, *main_, *want, *fields, *lengths_obj, *flens_obj;
    long long w[3];
    double a, bl, wf, k1;
    if (!PyArg_ParseTuple(args, "O!O!OO!OO(LLL)dddd", &PyDict_Type, &got, &PyDict_Type, &main_,
                          &want, &PyTuple_Type, &fields, &lengths_obj, &flens_obj, &w[0],
                          &w[1], &w[2], &a, &bl, &wf, &k1))
        return NULL;
    if (!filter_ok(want)) return NULL;
    if (PyTuple_GET_SIZE(fields) != 3 || !PyTuple_Check(flens_obj) ||
        PyTuple_GET_SIZE(flens_obj) != 3) {
        PyErr_SetString(PyExc_TypeError, "_rank.body_scores: three fields");
        return NULL;
    }
    PyObject *field[3];
    for (int f = 0; f < 3; f++) {
        field[f] = PyTuple_GET_ITEM(fields, f);
        if (!PyDict_Check(field[f])) {
            PyErr_SetString(PyExc_TypeError, "_rank.body_scores: field postings are dicts");
            return NULL;
        }
    }
    U32 lengths, flens[3];
    int have = 0, ok = 1;
    if (u32_get(lengths_obj, &lengths) < 0) return NULL;
    for (; have < 3; have++) {
        if (u32_get(PyTuple_GET_ITEM(flens_obj, have), &flens[have]) < 0) {
            ok = 0;
            break;
        }
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (ok && PyDict_Next(main_, &pos, &key, &value)) {
        int in = wanted(want, key);
        if (in <= 0) {
            ok = in == 0;
            continue;
        }
        long long d = PyLong_AsLongLong(key), body = PyLong_AsLongLong(value);
        if (PyErr_Occurred()) {
            ok = 0;
            break;
        }
        int in_field = 0;
        for (int f = 0; f < 3 && !in_field; f++) {
            int c = PyDict_Contains(field[f], key);
            if (c < 0) ok = 0;
            in_field = c > 0;
        }
        if (!ok) break;
        if (in_field) {
            long long t[3];
            for (int f = 0; f < 3; f++)
                if (int_get(field[f], key, &t[f]) < 0) ok = 0;
            if (!ok) break;
            body -= w[0] * t[0] + w[1] * t[1] + w[2] * t[2];
            if (body <= 0) continue;
        }
        long long len, fl[3];
        if (u32_at(&lengths, d, &len) < 0) {
            ok = 0;
            break;
        }
        for (int f = 0; f < 3; f++)
            if (u32_at(&flens[f], d, &fl[f]) < 0) ok = 0;
        if (!ok) break;
        long long body_len = len - w[0] * fl[0] - w[1] * fl[1] - w[2] * fl[2];
        double n = (double)body / (a + bl * (double)(body_len > 0 ? body_len : 0));
        if (add_score(got, key, wf * n / (n + k1)) < 0) ok = 0;
    }
    for (int f = 0; f < have; f++) PyBuffer_Release(&flens[f].view);
    PyBuffer_Release(&lengths.view);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* add_into(scores, got): for d, v in got.items(): scores[d] += v
 * (KeyError when a d is not in scores, as there). */
static PyObject *add_into(PyObject *self, PyObject *args) {
    PyObject *scores, *got;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &scores, &PyDict_Type, &got)) return NULL;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(got, &pos, &key, &value)) {
        PyObject *old = PyDict_GetItemWithError(scores, key);
        if (old == NULL) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, key);
            return NULL;
        }
        double s = PyFloat_AsDouble(old), v = PyFloat_AsDouble(value);
        if (PyErr_Occurred()) return NULL;
        PyObject *sum = PyFloat_FromDouble(s + v);
        if (sum == NULL) return NULL;
        int rc = PyDict_SetItem(scores, key, sum);
        Py_DECREF(sum);
        if (rc < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* max_into(best, got): for d, v in got.items(): if v > best.get(d, 0.0): best[d] = v */
static PyObject *max_into(PyObject *self, PyObject *args) {
    PyObject *best, *got;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &best, &PyDict_Type, &got)) return NULL;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(got, &pos, &key, &value)) {
        PyObject *old = PyDict_GetItemWithError(best, key);
        double b = 0.0, v = PyFloat_AsDouble(value);
        if (old == NULL && PyErr_Occurred()) return NULL;
        if (old != NULL) b = PyFloat_AsDouble(old);
        if (PyErr_Occurred()) return NULL;
        if (v > b && PyDict_SetItem(best, key, value) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* min_span(seq, ranks, sep): matcher._min_span_py on a stream already
 * narrowed (a buffer of u16 or u32 ranks); None or the span. */
static PyObject *min_span(PyObject *self, PyObject *args) {
    PyObject *seq_obj, *ranks_obj;
    unsigned long long sep;
    if (!PyArg_ParseTuple(args, "OOK", &seq_obj, &ranks_obj, &sep)) return NULL;
    PyObject *ranks = PySequence_Fast(ranks_obj, "_rank.min_span: ranks");
    if (ranks == NULL) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(ranks);
    Py_buffer view;
    if (PyObject_GetBuffer(seq_obj, &view, PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(ranks);
        return NULL;
    }
    PyObject *result = NULL;
    unsigned long long *want = PyMem_Calloc(k ? k : 1, sizeof *want);
    Py_ssize_t *last = PyMem_Calloc(k ? k : 1, sizeof *last);
    char *present = PyMem_Calloc(k ? k : 1, 1);
    if (want == NULL || last == NULL || present == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (view.itemsize != 2 && view.itemsize != 4) {
        PyErr_SetString(PyExc_TypeError, "_rank.min_span: a u16 or u32 stream");
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        want[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(ranks, i));
        if (PyErr_Occurred()) goto done;
    }
    Py_ssize_t n = view.len / view.itemsize;
    const uint16_t *s16 = view.buf;
    const uint32_t *s32 = view.buf;
    /* As the pure code's dict {rank: index}: a later equal rank wins, and
     * the separator overrides a rank equal to it. */
#define ITEM(p) (view.itemsize == 2 ? (unsigned long long)s16[p] : (unsigned long long)s32[p])
#define INDEX_OF(x, out)                              \
    do {                                              \
        out = -2;                                     \
        if ((x) == sep) {                             \
            out = -1;                                 \
        } else {                                      \
            for (Py_ssize_t j = k - 1; j >= 0; j--) { \
                if (want[j] == (x)) {                 \
                    out = j;                          \
                    break;                            \
                }                                     \
            }                                         \
        }                                             \
    } while (0)
    Py_ssize_t distinct = 0;
    for (Py_ssize_t p = 0; p < n; p++) {
        Py_ssize_t idx;
        INDEX_OF(ITEM(p), idx);
        if (idx >= 0 && !present[idx]) {
            present[idx] = 1;
            distinct++;
        }
    }
    if (distinct < k) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    long long best = -1;
    Py_ssize_t seen = 0;
    for (Py_ssize_t i = 0; i < k; i++) last[i] = -1;
    for (Py_ssize_t p = 0; p < n; p++) {
        Py_ssize_t idx;
        INDEX_OF(ITEM(p), idx);
        if (idx == -2) continue;
        if (idx == -1) {
            for (Py_ssize_t i = 0; i < k; i++) last[i] = -1;
            seen = 0;
            continue;
        }
        if (last[idx] < 0) seen++;
        last[idx] = p;
        if (seen == k) {
            Py_ssize_t lo = last[0];
            for (Py_ssize_t i = 1; i < k; i++)
                if (last[i] < lo) lo = last[i];
            long long span = (long long)(p - lo + 1);
            if (best < 0 || span < best) best = span;
        }
    }
#undef ITEM
#undef INDEX_OF
    result = best < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(best);
done:
    PyMem_Free(want);
    PyMem_Free(last);
    PyMem_Free(present);
    PyBuffer_Release(&view);
    Py_DECREF(ranks);
    return result;
}

static PyMethodDef methods[] = {
    {"field_scores", field_scores, METH_VARARGS, "Add one field's scores of a term."},
    {"body_scores", body_scores, METH_VARARGS, "Add the body's scores of a term."},
    {"add_into", add_into, METH_VARARGS, "scores[d] += v for each of got."},
    {"max_into", max_into, METH_VARARGS, "best[d] = max(best.get(d, 0.0), v) (strictly greater)."},
    {"min_span", min_span, METH_VARARGS, "Shortest run holding every rank inside one field."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rank", "Optional native core of ranking.", -1, methods,
};

PyMODINIT_FUNC PyInit__rank(void) { return PyModule_Create(&module); }
