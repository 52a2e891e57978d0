/* Optional native core of ranking (docs/decisions/native.md, "Ranking"):
 * the per-match loops of ctindex/search/matcher.py, whose pure-Python
 * functions (`_field_scores_py`, `_body_scores_py`, `_add_into_py`,
 * `_max_into_py`; ctindex/search/native_rank.py's `min_span_py`,
 * `span_scan_py`, `phrase_scan_py`, `restrict_py`) are the specification.
 * Every float is computed with the same operations in the same order as
 * there, so the scores are bit for bit the pure path's (tests/ctindex/search/
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
#include <stdlib.h>
#include <string.h>

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
        /* Each conversion checked before the next: no call with an error set. */
        long long d = PyLong_AsLongLong(key), t, len;
        if ((d == -1 && PyErr_Occurred()) || ((t = PyLong_AsLongLong(value)) == -1 && PyErr_Occurred()) ||
            u32_at(&lens, d, &len) < 0) {
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
        long long d = PyLong_AsLongLong(key), body;
        if ((d == -1 && PyErr_Occurred()) ||
            ((body = PyLong_AsLongLong(value)) == -1 && PyErr_Occurred())) {
            ok = 0;
            break;
        }
        int in_field = 0;
        for (int f = 0; ok && f < 3 && !in_field; f++) {
            int c = PyDict_Contains(field[f], key);
            if (c < 0) ok = 0;
            in_field = c > 0;
        }
        if (!ok) break;
        if (in_field) {
            long long t[3];
            for (int f = 0; ok && f < 3; f++)
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
        for (int f = 0; ok && f < 3; f++)
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
        double s = PyFloat_AsDouble(old), v;
        if (s == -1.0 && PyErr_Occurred()) return NULL;
        v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) return NULL;
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
        if (old == NULL && PyErr_Occurred()) return NULL;
        double b = 0.0, v = PyFloat_AsDouble(value);
        if (v == -1.0 && PyErr_Occurred()) return NULL;
        if (old != NULL) b = PyFloat_AsDouble(old);
        if (b == -1.0 && PyErr_Occurred()) return NULL;
        if (v > b && PyDict_SetItem(best, key, value) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* A read-only view of a buffer of u16 or u32 items. */
typedef struct {
    Py_buffer view;
    Py_ssize_t n;
    int wide;
} Ids;

static int ids_get(PyObject *obj, Ids *out) {
    if (PyObject_GetBuffer(obj, &out->view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (out->view.itemsize != 2 && out->view.itemsize != 4) {
        PyBuffer_Release(&out->view);
        PyErr_SetString(PyExc_TypeError, "_rank: arrays of u16 or u32 items");
        return -1;
    }
    out->wide = out->view.itemsize == 4;
    out->n = out->view.len / out->view.itemsize;
    return 0;
}

static inline uint32_t ids_at(const Ids *a, Py_ssize_t i) {
    return a->wide ? ((const uint32_t *)a->view.buf)[i] : ((const uint16_t *)a->view.buf)[i];
}

/* restrict(ids, tfs, docs): native_rank.restrict_py, {d: tfs[i]} for each d
 * of `docs` found at ids[i] by binary search in the sorted ids (a frequent
 * word's posting met by a few candidates); dict order is the iteration
 * order of `docs`, as there. */
static PyObject *restrict_(PyObject *self, PyObject *args) {
    PyObject *ids_obj, *tfs_obj, *docs;
    if (!PyArg_ParseTuple(args, "OOO", &ids_obj, &tfs_obj, &docs)) return NULL;
    Ids ids, tfs;
    if (ids_get(ids_obj, &ids) < 0) return NULL;
    if (ids_get(tfs_obj, &tfs) < 0) {
        PyBuffer_Release(&ids.view);
        return NULL;
    }
    PyObject *out = NULL, *it = NULL, *item;
    if (tfs.wide || tfs.n != ids.n) {
        PyErr_SetString(PyExc_TypeError, "_rank.restrict: u16/u32 ids and as many u16 counts");
        goto done;
    }
    out = PyDict_New();
    it = out ? PyObject_GetIter(docs) : NULL;
    if (it == NULL) goto done;
    while ((item = PyIter_Next(it)) != NULL) {
        long long d = PyLong_AsLongLong(item);
        if (d == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                Py_DECREF(item);
                break;
            }
            PyErr_Clear(); /* no id is that large: not found */
            Py_DECREF(item);
            continue;
        }
        Py_ssize_t lo = 0, hi = ids.n;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if ((long long)ids_at(&ids, mid) < d)
                lo = mid + 1;
            else
                hi = mid;
        }
        int rc = 0;
        if (lo < ids.n && (long long)ids_at(&ids, lo) == d) {
            PyObject *v = PyLong_FromUnsignedLong(ids_at(&tfs, lo));
            rc = v == NULL ? -1 : PyDict_SetItem(out, item, v);
            Py_XDECREF(v);
        }
        Py_DECREF(item);
        if (rc < 0) break;
    }
done:
    Py_XDECREF(it);
    PyBuffer_Release(&ids.view);
    PyBuffer_Release(&tfs.view);
    if (PyErr_Occurred()) {
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

/* anchor_positions(seq, anchor, limit): matcher._anchor_positions_py, the
 * first `limit` positions of `anchor` in a u16 or u32 stream, read in place
 * (the pure twin copies the stream to bytes to find them). As there, memchr
 * finds each byte that can start the anchor, many bytes at a time (a rare
 * anchor in a long page is a scan of the whole stream), and a byte off an
 * item boundary resumes the search at the next boundary. */
static PyObject *anchor_positions(PyObject *self, PyObject *args) {
    PyObject *seq_obj;
    unsigned long long anchor;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "OKn", &seq_obj, &anchor, &limit)) return NULL;
    Ids seq;
    if (ids_get(seq_obj, &seq) < 0) return NULL;
    PyObject *out = PyList_New(0);
    const Py_ssize_t size = seq.wide ? 4 : 2;
    unsigned char pat[4];
    if (seq.wide) {
        uint32_t v = (uint32_t)anchor;
        memcpy(pat, &v, 4);
    } else {
        uint16_t v = (uint16_t)anchor;
        memcpy(pat, &v, 2);
    }
    const int fits = anchor <= (seq.wide ? 0xFFFFFFFFull : 0xFFFFull);
    const char *s = seq.view.buf;
    const Py_ssize_t m = seq.n * size;
    Py_ssize_t q = 0;
    while (out != NULL && fits && q + size <= m && PyList_GET_SIZE(out) < limit) {
        const char *hit = memchr(s + q, pat[0], (size_t)(m - size + 1 - q));
        if (hit == NULL) break;
        Py_ssize_t at = hit - s, off = at % size;
        if (off) {
            q = at - off + size;
            continue;
        }
        q = at + size;
        if (memcmp(hit, pat, (size_t)size) != 0) continue;
        PyObject *pos = PyLong_FromSsize_t(at / size);
        if (pos == NULL || PyList_Append(out, pos) < 0) Py_CLEAR(out);
        Py_XDECREF(pos);
    }
    PyBuffer_Release(&seq.view);
    return out;
}

/* The shortest run of positions of stream s[0..n) holding every one of
 * want[0..k) with no sep inside it (native_rank.min_span_py's answer; its
 * first pass, which only spares Python the walk when a word is missing, is
 * left out: a run of all k words is then never seen); -1 when there is
 * none. Items are `size` bytes (2 or 4), little-endian when `le` (a
 * segment's run of streams, as stored) or native (an array('H'/'I')).
 * `last` is k slots of scratch. */
static inline unsigned long long item_at(const unsigned char *b, Py_ssize_t p, int size, int le) {
#if !PY_LITTLE_ENDIAN
    if (le) {
        const unsigned char *q = b + p * size;
        return size == 2 ? (unsigned long long)q[0] | (unsigned long long)q[1] << 8
                         : (unsigned long long)q[0] | (unsigned long long)q[1] << 8 |
                               (unsigned long long)q[2] << 16 | (unsigned long long)q[3] << 24;
    }
#else
    (void)le; /* little-endian is native here */
#endif
    if (size == 2) {
        uint16_t v;
        memcpy(&v, b + p * 2, 2);
        return v;
    }
    uint32_t v;
    memcpy(&v, b + p * 4, 4);
    return v;
}

/* As the pure code's dict {rank: index}: a later equal rank wins, and the
 * separator overrides a rank equal to it. -1: the separator; -2: neither. */
static inline Py_ssize_t index_of(unsigned long long x, const unsigned long long *want,
                                  Py_ssize_t k, unsigned long long sep) {
    if (x == sep) return -1;
    for (Py_ssize_t j = k - 1; j >= 0; j--)
        if (want[j] == x) return j;
    return -2;
}

static inline long long span_walk(const unsigned char *s, Py_ssize_t n, int size, int le,
                                  const unsigned long long *want, Py_ssize_t k,
                                  unsigned long long sep, Py_ssize_t *last) {
    long long best = -1;
    Py_ssize_t seen = 0;
    for (Py_ssize_t i = 0; i < k; i++) last[i] = -1;
    for (Py_ssize_t p = 0; p < n; p++) {
        Py_ssize_t idx = index_of(item_at(s, p, size, le), want, k, sep);
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
    return best;
}

/* span_walk with the item width a constant in each call, so each loop
 * reads its items without a branch. */
static long long span_in(const unsigned char *s, Py_ssize_t n, int size, int le,
                         const unsigned long long *want, Py_ssize_t k, unsigned long long sep,
                         Py_ssize_t *last) {
    if (k == 0) return -1; /* no word: no run holds every one of none */
    if (size == 2) return span_walk(s, n, 2, le, want, k, sep, last);
    return span_walk(s, n, 4, le, want, k, sep, last);
}

/* The ranks as k unsigned values, with k slots of scratch for span_in;
 * 0, or -1 with an error set. */
typedef struct {
    unsigned long long *want;
    Py_ssize_t *last;
    Py_ssize_t k;
} Ranks;

static void ranks_free(Ranks *r) {
    PyMem_Free(r->want);
    PyMem_Free(r->last);
}

static int ranks_get(PyObject *obj, Ranks *r) {
    r->want = NULL;
    r->last = NULL;
    PyObject *ranks = PySequence_Fast(obj, "_rank: ranks");
    if (ranks == NULL) return -1;
    Py_ssize_t k = r->k = PySequence_Fast_GET_SIZE(ranks);
    r->want = PyMem_Calloc(k ? k : 1, sizeof *r->want);
    r->last = PyMem_Calloc(k ? k : 1, sizeof *r->last);
    int rc = 0;
    if (r->want == NULL || r->last == NULL) {
        PyErr_NoMemory();
        rc = -1;
    }
    for (Py_ssize_t i = 0; rc == 0 && i < k; i++) {
        r->want[i] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(ranks, i));
        if (PyErr_Occurred()) rc = -1;
    }
    Py_DECREF(ranks);
    if (rc < 0) ranks_free(r);
    return rc;
}

static PyObject *span_object(long long best) {
    return best < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(best);
}

/* min_span(seq, ranks, sep): native_rank.min_span_py on a stream already
 * narrowed (a buffer of u16 or u32 ranks); None or the span. */
static PyObject *min_span(PyObject *self, PyObject *args) {
    PyObject *seq_obj, *ranks_obj;
    unsigned long long sep;
    if (!PyArg_ParseTuple(args, "OOK", &seq_obj, &ranks_obj, &sep)) return NULL;
    Ids seq;
    if (ids_get(seq_obj, &seq) < 0) return NULL;
    Ranks r;
    PyObject *result = NULL;
    if (ranks_get(ranks_obj, &r) == 0) {
        result =
            span_object(span_in(seq.view.buf, seq.n, seq.wide ? 4 : 2, 0, r.want, r.k, sep, r.last));
        ranks_free(&r);
    }
    PyBuffer_Release(&seq.view);
    return result;
}

/* span_scan(runs, starts, offs, docs, ranks, sep, size): native_rank.
 * span_scan_py, the min_span of each of `docs` (increasing ids; offs, an
 * array('Q'), gives their streams' bytes) read in place from the runs of
 * streams that hold them: runs[k] is the section from byte starts[k] on,
 * the runs in increasing order. One call per segment and query, rather
 * than one per run of streams or a stream copied and a call per document:
 * a pool of a hundred documents lies in dozens of runs. */
static PyObject *span_scan(PyObject *self, PyObject *args) {
    Py_buffer offs;
    PyObject *runs_obj, *starts_obj, *offs_obj, *docs_obj, *ranks_obj;
    unsigned long long sep;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "OOOOOKn", &runs_obj, &starts_obj, &offs_obj, &docs_obj,
                          &ranks_obj, &sep, &size))
        return NULL;
    PyObject *result = NULL, *docs = NULL, *out = NULL, *runs = NULL, *starts = NULL;
    Py_buffer *bufs = NULL;
    uint64_t *from = NULL;
    Py_ssize_t nruns = 0, got = 0;
    Ranks r = {NULL, NULL, 0};
    offs.obj = NULL;
    if (PyObject_GetBuffer(offs_obj, &offs, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (offs.itemsize != 8 || offs.format == NULL || strcmp(offs.format, "Q") != 0) {
        PyErr_SetString(PyExc_TypeError, "_rank.span_scan: offsets must be array('Q')");
        goto done;
    }
    if (size != 2 && size != 4) {
        PyErr_SetString(PyExc_ValueError, "span_scan: items of 2 or 4 bytes");
        goto done;
    }
    runs = PySequence_Fast(runs_obj, "_rank.span_scan: runs");
    starts = runs == NULL ? NULL : PySequence_Fast(starts_obj, "_rank.span_scan: starts");
    if (starts == NULL) goto done;
    nruns = PySequence_Fast_GET_SIZE(runs);
    if (PySequence_Fast_GET_SIZE(starts) != nruns) {
        PyErr_SetString(PyExc_ValueError, "span_scan: a start for each run");
        goto done;
    }
    bufs = PyMem_Calloc(nruns ? nruns : 1, sizeof *bufs);
    from = PyMem_Calloc(nruns ? nruns : 1, sizeof *from);
    if (bufs == NULL || from == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < nruns; got++) {
        from[got] = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(starts, got));
        if (PyErr_Occurred()) goto done;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(runs, got), &bufs[got], PyBUF_SIMPLE) < 0)
            goto done;
    }
    docs = PySequence_Fast(docs_obj, "_rank.span_scan: docs");
    if (docs == NULL || ranks_get(ranks_obj, &r) < 0) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(docs);
    const uint64_t *off = (const uint64_t *)offs.buf;
    Py_ssize_t noffs = offs.len / 8;
    out = PyList_New(n);
    if (out == NULL) goto done;
    Py_ssize_t k = 0; /* the run the last stream lay in: later ones lie in it or after */
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t d = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(docs, i));
        if (d == -1 && PyErr_Occurred()) goto done;
        if (d < 0 || d + 1 >= noffs || off[d + 1] < off[d] || (off[d + 1] - off[d]) % (uint64_t)size) {
            PyErr_SetString(PyExc_ValueError, "span_scan: a stream outside the runs");
            goto done;
        }
        while (k < nruns &&
               !(off[d] >= from[k] && off[d + 1] - from[k] <= (uint64_t)bufs[k].len))
            k++;
        if (k == nruns) {
            PyErr_SetString(PyExc_ValueError, "span_scan: a stream outside the runs");
            goto done;
        }
        const unsigned char *s = (const unsigned char *)bufs[k].buf + (off[d] - from[k]);
        Py_ssize_t items = (Py_ssize_t)((off[d + 1] - off[d]) / (uint64_t)size);
        PyObject *span = span_object(span_in(s, items, (int)size, 1, r.want, r.k, sep, r.last));
        if (span == NULL) goto done;
        PyList_SET_ITEM(out, i, span);
    }
    result = out;
    out = NULL;
done:
    ranks_free(&r);
    Py_XDECREF(out);
    Py_XDECREF(docs);
    for (Py_ssize_t j = 0; j < got; j++) PyBuffer_Release(&bufs[j]);
    PyMem_Free(bufs);
    PyMem_Free(from);
    Py_XDECREF(starts);
    Py_XDECREF(runs);
    if (offs.obj != NULL) PyBuffer_Release(&offs);
    return result;
}

/* -- dense scoring: one term over a segment's posting arrays ------------- */

/* mask(ndocs, docs) -> bytearray with 1 at every doc of the set `docs`. */
static PyObject *mask(PyObject *self, PyObject *args) {
    Py_ssize_t ndocs;
    PyObject *docs;
    if (!PyArg_ParseTuple(args, "nO", &ndocs, &docs)) return NULL;
    if (!PyAnySet_Check(docs)) {
        PyErr_SetString(PyExc_TypeError, "_rank.mask: a set");
        return NULL;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, ndocs);
    if (out == NULL) return NULL;
    char *m = PyByteArray_AS_STRING(out);
    memset(m, 0, (size_t)ndocs);
    PyObject *it = PyObject_GetIter(docs), *item;
    if (it == NULL) goto fail;
    while ((item = PyIter_Next(it)) != NULL) {
        Py_ssize_t d = PyLong_AsSsize_t(item);
        Py_DECREF(item);
        if (d == -1 && PyErr_Occurred()) break;
        if (d < 0 || d >= ndocs) {
            PyErr_SetString(PyExc_IndexError, "_rank.mask: document id out of range");
            break;
        }
        m[d] = 1;
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) goto fail;
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* Per-document scratch of score_term, all zeros between calls (the GIL is
 * held throughout, so one is enough), grown to the largest segment seen. */
static struct {
    double *tmp;
    int32_t *ftf; /* title, tags, description counts, 3 per document */
    unsigned char *touched;
    Py_ssize_t cap;
} scratch;

static int scratch_reserve(Py_ssize_t ndocs) {
    if (ndocs <= scratch.cap) return 0;
    double *tmp = PyMem_Calloc(ndocs, sizeof *tmp);
    int32_t *ftf = PyMem_Calloc(3 * ndocs, sizeof *ftf);
    unsigned char *touched = PyMem_Calloc(ndocs, 1);
    if (tmp == NULL || ftf == NULL || touched == NULL) {
        PyMem_Free(tmp);
        PyMem_Free(ftf);
        PyMem_Free(touched);
        return -1;
    }
    PyMem_Free(scratch.tmp);
    PyMem_Free(scratch.ftf);
    PyMem_Free(scratch.touched);
    scratch.tmp = tmp;
    scratch.ftf = ftf;
    scratch.touched = touched;
    scratch.cap = ndocs;
    return 0;
}

/* A term's postings in one segment as score_term and score_docs read them,
 * from their arguments ((ids, tfs), fields, lengths, flens, fparams): the
 * main posting, four field postings (title, tags, description, ID; each
 * (ids, tfs) or None), the weighted lengths, four fields' raw lengths and
 * each field's (a, bl, wf). term_get fills it (0, or -1 with an error set);
 * term_release frees what it took, whether it succeeded or not. */
typedef struct {
    Ids main_ids, main_tfs, fids[4], ftfs[4];
    U32 lengths, flens[4];
    int present[4];
    double fa[4], fbl[4], fwf[4];
    /* what term_release gives back */
    int got_ids[4], got_tfs[4], nflens, have_main_ids, have_main_tfs, have_len;
} Term;

static void term_release(Term *t) {
    for (int f = 0; f < 4; f++) {
        if (t->got_ids[f]) PyBuffer_Release(&t->fids[f].view);
        if (t->got_tfs[f]) PyBuffer_Release(&t->ftfs[f].view);
    }
    for (int f = 0; f < t->nflens; f++) PyBuffer_Release(&t->flens[f].view);
    if (t->have_len) PyBuffer_Release(&t->lengths.view);
    if (t->have_main_tfs) PyBuffer_Release(&t->main_tfs.view);
    if (t->have_main_ids) PyBuffer_Release(&t->main_ids.view);
}

static int term_get(Term *t, PyObject *main_ids, PyObject *main_tfs, PyObject *fields,
                    PyObject *lengths, PyObject *flens, PyObject *fparams, const char *who) {
    memset(t, 0, sizeof *t);
    if (PyTuple_GET_SIZE(fields) != 4 || PyTuple_GET_SIZE(flens) != 4 ||
        PyTuple_GET_SIZE(fparams) != 4) {
        PyErr_Format(PyExc_TypeError, "_rank.%s: four fields", who);
        return -1;
    }
    if (ids_get(main_ids, &t->main_ids) < 0) return -1;
    t->have_main_ids = 1;
    if (ids_get(main_tfs, &t->main_tfs) < 0) return -1;
    t->have_main_tfs = 1;
    if (u32_get(lengths, &t->lengths) < 0) return -1;
    t->have_len = 1;
    for (; t->nflens < 4; t->nflens++)
        if (u32_get(PyTuple_GET_ITEM(flens, t->nflens), &t->flens[t->nflens]) < 0) return -1;
    for (int f = 0; f < 4; f++) {
        PyObject *pair = PyTuple_GET_ITEM(fields, f);
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(fparams, f), "ddd", &t->fa[f], &t->fbl[f],
                              &t->fwf[f]))
            return -1;
        t->present[f] = pair != Py_None;
        if (!t->present[f]) continue;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_TypeError, "_rank.%s: a field is (ids, tfs) or None", who);
            return -1;
        }
        if (ids_get(PyTuple_GET_ITEM(pair, 0), &t->fids[f]) < 0) return -1;
        t->got_ids[f] = 1;
        if (ids_get(PyTuple_GET_ITEM(pair, 1), &t->ftfs[f]) < 0) return -1;
        t->got_tfs[f] = 1;
        if (t->fids[f].n != t->ftfs[f].n) {
            PyErr_Format(PyExc_ValueError, "_rank.%s: a posting's arrays differ", who);
            return -1;
        }
    }
    if (t->main_ids.n != t->main_tfs.n) {
        PyErr_Format(PyExc_ValueError, "_rank.%s: a posting's arrays differ", who);
        return -1;
    }
    return 0;
}

/* score_term(acc, mask, (ids, tfs), fields, lengths, flens, fparams,
 * (a, bl, wf), (w0, w1, w2), k1, add): matcher._per_field_scores for one
 * term and one segment, then its sum into the scores, on arrays: per
 * document of the mask, got = 0.0, plus each field's share (title, tags,
 * description, ID, in that order), plus the body's, and acc[d] += got
 * (`add`) or acc[d] = got where got > acc[d] (a prefix's best expansion).
 * `fields` holds four (ids, tfs) or None; `fparams` four (a, bl, wf). The
 * same operations in the same order as the pure dict loops, so the same
 * floats; a document the term misses adds 0.0, which changes no score. */
static PyObject *score_term(PyObject *self, PyObject *args) {
    PyObject *acc_obj, *mask_obj, *main_ids_obj, *main_tfs_obj, *fields, *lengths_obj,
        *flens_obj, *fparams;
    double ba, bbl, bwf, k1;
    long long w[3];
    int add;
    if (!PyArg_ParseTuple(args, "OO(OO)O!OO!O!(ddd)(LLL)dp", &acc_obj, &mask_obj, &main_ids_obj,
                          &main_tfs_obj, &PyTuple_Type, &fields, &lengths_obj, &PyTuple_Type,
                          &flens_obj, &PyTuple_Type, &fparams, &ba, &bbl, &bwf, &w[0], &w[1],
                          &w[2], &k1, &add))
        return NULL;
    Py_buffer acc, maskb;
    Term t;
    int have_mask = 0, have_term = 0, ok = 0;
    uint32_t *seen = NULL; /* the documents touched, to apply and clear */
    Py_ssize_t nseen = 0;
    if (PyObject_GetBuffer(acc_obj, &acc, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (acc.itemsize != 8) {
        PyErr_SetString(PyExc_TypeError, "_rank.score_term: acc is array('d')");
        goto done;
    }
    Py_ssize_t ndocs = acc.len / 8;
    if (PyObject_GetBuffer(mask_obj, &maskb, PyBUF_C_CONTIGUOUS) < 0) goto done;
    have_mask = 1;
    if (maskb.len != ndocs) {
        PyErr_SetString(PyExc_ValueError, "_rank.score_term: mask and acc differ in length");
        goto done;
    }
    have_term = 1;
    if (term_get(&t, main_ids_obj, main_tfs_obj, fields, lengths_obj, flens_obj, fparams,
                 "score_term") < 0)
        goto done;
    if (t.lengths.n < ndocs || t.flens[0].n < ndocs || t.flens[1].n < ndocs ||
        t.flens[2].n < ndocs || t.flens[3].n < ndocs) {
        PyErr_SetString(PyExc_ValueError, "_rank.score_term: lengths shorter than acc");
        goto done;
    }
    Py_ssize_t most = t.main_ids.n;
    for (int f = 0; f < 4; f++) most += t.present[f] ? t.fids[f].n : 0;
    seen = PyMem_Malloc((most ? most : 1) * sizeof *seen);
    if (seen == NULL || scratch_reserve(ndocs) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    double *tmp = scratch.tmp;
    int32_t *ftf = scratch.ftf;
    unsigned char *touched = scratch.touched; /* 1: in a field posting, 2: scored */
    const unsigned char *m = maskb.buf;
    double *a = acc.buf;
    /* The fields, in order: their shares, and the first three's counts. */
    for (int f = 0; f < 4; f++) {
        if (!t.present[f]) continue;
        const Ids *ids = &t.fids[f], *tfs = &t.ftfs[f];
        for (Py_ssize_t i = 0; i < ids->n; i++) {
            uint32_t d = ids_at(ids, i);
            if (d >= (uint32_t)ndocs) {
                PyErr_SetString(PyExc_IndexError, "_rank: document id out of range");
                goto done;
            }
            if (!m[d]) continue;
            uint32_t tf = ids_at(tfs, i);
            if (!touched[d]) seen[nseen++] = d;
            if (f < 3) {
                ftf[3 * (Py_ssize_t)d + f] = (int32_t)tf;
                touched[d] |= 1;
            }
            double n = (double)tf / (t.fa[f] + t.fbl[f] * (double)t.flens[f].items[d]);
            tmp[d] = tmp[d] + t.fwf[f] * n / (n + k1);
            touched[d] |= 2;
        }
    }
    for (Py_ssize_t i = 0; i < t.main_ids.n; i++) {
        uint32_t d = ids_at(&t.main_ids, i);
        if (d >= (uint32_t)ndocs) {
            PyErr_SetString(PyExc_IndexError, "_rank: document id out of range");
            goto done;
        }
        if (!m[d]) continue;
        long long body = (long long)ids_at(&t.main_tfs, i);
        if (touched[d] & 1) {
            const int32_t *c = &ftf[3 * (Py_ssize_t)d];
            body -= w[0] * c[0] + w[1] * c[1] + w[2] * c[2];
            if (body <= 0) continue;
        }
        long long body_len = (long long)t.lengths.items[d] - w[0] * t.flens[0].items[d] -
                             w[1] * t.flens[1].items[d] - w[2] * t.flens[2].items[d];
        double n = (double)body / (ba + bbl * (double)(body_len > 0 ? body_len : 0));
        if (!touched[d]) seen[nseen++] = d;
        tmp[d] = tmp[d] + bwf * n / (n + k1);
        touched[d] |= 2;
    }
    for (Py_ssize_t i = 0; i < nseen; i++) {
        uint32_t d = seen[i];
        if (!(touched[d] & 2)) continue;
        if (add)
            a[d] = a[d] + tmp[d];
        else if (tmp[d] > a[d]) /* _max_into: strictly higher, from 0.0 */
            a[d] = tmp[d];
    }
    ok = 1;
done:
    /* The scratch goes back to zeros, touched documents only: the work of a
     * call is its postings' length, never the segment's size. */
    for (Py_ssize_t i = 0; i < nseen; i++) {
        uint32_t d = seen[i];
        scratch.tmp[d] = 0.0;
        scratch.ftf[3 * (Py_ssize_t)d] = scratch.ftf[3 * (Py_ssize_t)d + 1] =
            scratch.ftf[3 * (Py_ssize_t)d + 2] = 0;
        scratch.touched[d] = 0;
    }
    PyMem_Free(seen);
    if (have_term) term_release(&t);
    if (have_mask) PyBuffer_Release(&maskb);
    PyBuffer_Release(&acc);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* -- sparse scoring: one term over a few matches of a segment ----------- */

/* A match of score_docs: its id and the dict key it came as. */
typedef struct {
    uint32_t d;
    PyObject *key;
} Doc;

static int by_doc(const void *a, const void *b) {
    uint32_t x = ((const Doc *)a)->d, y = ((const Doc *)b)->d;
    return (x > y) - (x < y);
}

/* found[i] = 1 + the count of docs[i] in the posting (ids, tfs), 0 where
 * it is absent. The posting's ids are sorted, as the docs are: a merge when
 * the docs are not a sliver of the posting, else a binary search per doc
 * from where the last one ended (the bulk of a frequent word's posting is
 * skipped, as native_rank.restrict_py skips it). */
static void lookup_counts(const Ids *ids, const Ids *tfs, const Doc *docs, Py_ssize_t n,
                          uint64_t *found) {
    Py_ssize_t lo = 0, p = ids->n;
    if (n * 8 >= p) {
        for (Py_ssize_t i = 0; i < n; i++) {
            while (lo < p && ids_at(ids, lo) < docs[i].d) lo++;
            found[i] = lo < p && ids_at(ids, lo) == docs[i].d ? 1 + (uint64_t)ids_at(tfs, lo) : 0;
        }
        return;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t hi = p;
        while (lo < hi) {
            Py_ssize_t mid = lo + (hi - lo) / 2;
            if (ids_at(ids, mid) < docs[i].d)
                lo = mid + 1;
            else
                hi = mid;
        }
        found[i] = lo < p && ids_at(ids, lo) == docs[i].d ? 1 + (uint64_t)ids_at(tfs, lo) : 0;
    }
}

/* score_docs(scores, docs, (ids, tfs), fields, lengths, flens, fparams,
 * (a, bl, wf), (w0, w1, w2), k1, add): score_term for the documents of the
 * set `docs` only, into the dict `scores` (d -> float), each document's
 * counts found in the postings rather than each posting walked into a
 * per-document scratch: per document, got = 0.0, plus each field's share
 * (title, tags, description, ID), plus the body's, then scores[d] =
 * scores.get(d, 0.0) + got (`add`) or got where it is strictly higher
 * (a prefix's best expansion); a document no posting holds is left as it
 * is. The operations and their order are score_term's and the dict loops'
 * (matcher._per_field_scores, then _add_into or _max_into), so the floats
 * are the same. */
static PyObject *score_docs(PyObject *self, PyObject *args) {
    PyObject *scores, *docs_obj, *main_ids_obj, *main_tfs_obj, *fields, *lengths_obj, *flens_obj,
        *fparams;
    double ba, bbl, bwf, k1;
    long long w[3];
    int add;
    if (!PyArg_ParseTuple(args, "O!O(OO)O!OO!O!(ddd)(LLL)dp", &PyDict_Type, &scores, &docs_obj,
                          &main_ids_obj, &main_tfs_obj, &PyTuple_Type, &fields, &lengths_obj,
                          &PyTuple_Type, &flens_obj, &PyTuple_Type, &fparams, &ba, &bbl, &bwf,
                          &w[0], &w[1], &w[2], &k1, &add))
        return NULL;
    if (!PyAnySet_Check(docs_obj)) {
        PyErr_SetString(PyExc_TypeError, "_rank.score_docs: docs is a set");
        return NULL;
    }
    Term t;
    int ok = 0;
    Doc *docs = NULL;
    uint64_t *found = NULL; /* per posting (four fields, then main), per doc */
    Py_ssize_t n = PySet_GET_SIZE(docs_obj);
    if (term_get(&t, main_ids_obj, main_tfs_obj, fields, lengths_obj, flens_obj, fparams,
                 "score_docs") < 0)
        goto done;
    docs = PyMem_Malloc((n ? n : 1) * sizeof *docs);
    found = PyMem_Calloc(5 * (n ? n : 1), sizeof *found);
    if (docs == NULL || found == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    {
        /* The set's own key objects (borrowed: the set holds them and is
         * not changed here) become the dict's keys. */
        PyObject *it = PyObject_GetIter(docs_obj), *key;
        Py_ssize_t i = 0;
        if (it == NULL) goto done;
        while (i < n && (key = PyIter_Next(it)) != NULL) {
            Py_DECREF(key);
            long long d = PyLong_AsLongLong(key);
            if ((d == -1 && PyErr_Occurred()) || d < 0 || d >= t.lengths.n ||
                d >= t.flens[0].n || d >= t.flens[1].n || d >= t.flens[2].n || d >= t.flens[3].n) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_IndexError, "_rank: document id out of range");
                Py_DECREF(it);
                goto done;
            }
            docs[i].d = (uint32_t)d;
            docs[i].key = key;
            i++;
        }
        Py_DECREF(it);
        if (PyErr_Occurred()) goto done;
        n = i;
    }
    qsort(docs, (size_t)n, sizeof *docs, by_doc);
    for (int f = 0; f < 4; f++)
        if (t.present[f]) lookup_counts(&t.fids[f], &t.ftfs[f], docs, n, found + f * n);
    lookup_counts(&t.main_ids, &t.main_tfs, docs, n, found + 4 * n);
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t d = docs[i].d;
        double got = 0.0;
        int scored = 0, in_field = 0;
        for (int f = 0; f < 4; f++) {
            uint64_t tf = found[f * n + i];
            if (!tf) continue;
            tf -= 1;
            if (f < 3) in_field = 1;
            double x = (double)tf / (t.fa[f] + t.fbl[f] * (double)t.flens[f].items[d]);
            got = got + t.fwf[f] * x / (x + k1);
            scored = 1;
        }
        uint64_t mt = found[4 * n + i];
        if (mt) {
            long long body = (long long)(mt - 1);
            int keep = 1;
            if (in_field) {
                long long t0 = found[i] ? (long long)found[i] - 1 : 0;
                long long t1 = found[n + i] ? (long long)found[n + i] - 1 : 0;
                long long t2 = found[2 * n + i] ? (long long)found[2 * n + i] - 1 : 0;
                body -= w[0] * t0 + w[1] * t1 + w[2] * t2;
                keep = body > 0;
            }
            if (keep) {
                long long body_len = (long long)t.lengths.items[d] -
                                     w[0] * t.flens[0].items[d] - w[1] * t.flens[1].items[d] -
                                     w[2] * t.flens[2].items[d];
                double x = (double)body / (ba + bbl * (double)(body_len > 0 ? body_len : 0));
                got = got + bwf * x / (x + k1);
                scored = 1;
            }
        }
        if (!scored) continue;
        PyObject *old = PyDict_GetItemWithError(scores, docs[i].key);
        double base = 0.0;
        if (old != NULL) {
            base = PyFloat_AsDouble(old);
            if (base == -1.0 && PyErr_Occurred()) goto done;
        } else if (PyErr_Occurred()) {
            goto done;
        }
        if (!add && !(got > base)) continue; /* _max_into: strictly higher, from 0.0 */
        PyObject *val = PyFloat_FromDouble(add ? base + got : got);
        if (val == NULL) goto done;
        int rc = PyDict_SetItem(scores, docs[i].key, val);
        Py_DECREF(val);
        if (rc < 0) goto done;
    }
    ok = 1;
done:
    PyMem_Free(docs);
    PyMem_Free(found);
    term_release(&t);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* add_arrays(acc, other): acc[d] += other[d] for every d (adding 0.0
 * leaves a score as it is, so this is `_add_into` of the nonzero ones). */
static PyObject *add_arrays(PyObject *self, PyObject *args) {
    PyObject *acc_obj, *other_obj;
    if (!PyArg_ParseTuple(args, "OO", &acc_obj, &other_obj)) return NULL;
    Py_buffer acc, other;
    if (PyObject_GetBuffer(acc_obj, &acc, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(other_obj, &other, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&acc);
        return NULL;
    }
    int ok = acc.itemsize == 8 && other.itemsize == 8 && acc.len == other.len;
    if (ok) {
        double *a = acc.buf;
        const double *b = other.buf;
        for (Py_ssize_t i = 0; i < acc.len / 8; i++)
            if (b[i] != 0.0) a[i] = a[i] + b[i];
    } else {
        PyErr_SetString(PyExc_ValueError, "_rank.add_arrays: two array('d') of one length");
    }
    PyBuffer_Release(&other);
    PyBuffer_Release(&acc);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* -- the leaders' cut -------------------------------------------------------- */

static void swap_d(double *a, double *b) {
    double t = *a;
    *a = *b;
    *b = t;
}

/* The k-th largest of v[0..n) (1 <= k <= n), reordering v: Hoare's
 * selection with a median-of-three pivot. */
static double kth_largest_of(double *v, Py_ssize_t n, Py_ssize_t k) {
    Py_ssize_t lo = 0, hi = n - 1, want = k - 1; /* index in descending order */
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (v[mid] > v[lo]) swap_d(&v[mid], &v[lo]);
        if (v[hi] > v[lo]) swap_d(&v[hi], &v[lo]);
        if (v[mid] > v[hi]) swap_d(&v[mid], &v[hi]);
        double pivot = v[hi]; /* the median of the three */
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] > pivot) i++;
            while (v[j] < pivot) j--;
            if (i <= j) {
                swap_d(&v[i], &v[j]);
                i++;
                j--;
            }
        }
        if (want <= j)
            hi = j;
        else if (want >= i)
            lo = i;
        else
            return v[want];
    }
    return v[want];
}

/* One partition's scores as kth_largest and at_least take them: a dict
 * (d -> float), or (acc, mask), an array('d') and a bytearray of as many
 * items, the scores being acc[d] where mask[d] is set (matcher.DenseScores:
 * the dense scores, never gathered into a dict). */
typedef struct {
    PyObject *dict; /* or NULL: the arrays */
    Py_buffer acc, mask;
    Py_ssize_t n; /* how many scores */
} Scores;

static void scores_release(Scores *s) {
    if (s->dict == NULL) {
        PyBuffer_Release(&s->acc);
        PyBuffer_Release(&s->mask);
    }
}

static int scores_get(PyObject *obj, Scores *s, const char *who) {
    s->dict = NULL;
    if (PyDict_Check(obj)) {
        s->dict = obj;
        s->n = PyDict_GET_SIZE(obj);
        return 0;
    }
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2) {
        PyErr_Format(PyExc_TypeError, "_rank.%s: scores are a dict or (acc, mask)", who);
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(obj, 0), &s->acc, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(obj, 1), &s->mask, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&s->acc);
        return -1;
    }
    if (s->acc.itemsize != 8 || s->mask.itemsize != 1 || s->acc.len / 8 != s->mask.len) {
        scores_release(s);
        PyErr_Format(PyExc_TypeError, "_rank.%s: acc is array('d'), mask as many bytes", who);
        return -1;
    }
    const unsigned char *m = s->mask.buf;
    Py_ssize_t n = 0;
    for (Py_ssize_t d = 0; d < s->mask.len; d++) n += m[d] != 0;
    s->n = n;
    return 0;
}

/* kth_largest(parts, k): the k-th largest of every score of the parts
 * (each a dict or (acc, mask): Scores), as heapq.nlargest(k, values)[-1];
 * k between 1 and their number. */
static PyObject *kth_largest(PyObject *self, PyObject *args) {
    PyObject *parts_obj;
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "On", &parts_obj, &k)) return NULL;
    PyObject *seq = PySequence_Fast(parts_obj, "_rank.kth_largest: a sequence of scores");
    if (seq == NULL) return NULL;
    Py_ssize_t n = 0, parts = PySequence_Fast_GET_SIZE(seq), got_parts = 0;
    Scores *sc = PyMem_Calloc(parts ? parts : 1, sizeof *sc);
    double *v = NULL;
    PyObject *result = NULL;
    if (sc == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got_parts < parts; got_parts++) {
        if (scores_get(PySequence_Fast_GET_ITEM(seq, got_parts), &sc[got_parts], "kth_largest") < 0)
            goto done;
        n += sc[got_parts].n;
    }
    if (k < 1 || k > n) {
        PyErr_SetString(PyExc_ValueError, "_rank.kth_largest: k out of range");
        goto done;
    }
    v = PyMem_Malloc(n * sizeof *v);
    if (v == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < parts; i++) {
        if (sc[i].dict == NULL) {
            const double *acc = sc[i].acc.buf;
            const unsigned char *m = sc[i].mask.buf;
            for (Py_ssize_t d = 0; d < sc[i].mask.len; d++) {
                if (!m[d]) continue;
                if (acc[d] != acc[d]) {
                    PyErr_SetString(PyExc_ValueError, "_rank.kth_largest: a NaN score");
                    goto done;
                }
                v[at++] = acc[d];
            }
            continue;
        }
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(sc[i].dict, &pos, &key, &value)) {
            double x = PyFloat_AsDouble(value);
            if (x == -1.0 && PyErr_Occurred()) goto done;
            if (x != x) {
                PyErr_SetString(PyExc_ValueError, "_rank.kth_largest: a NaN score");
                goto done;
            }
            /* A value's __float__ may run Python code that grows a dict:
             * never write past the n counted above. */
            if (at >= n) {
                PyErr_SetString(PyExc_RuntimeError, "_rank.kth_largest: a dict changed size");
                goto done;
            }
            v[at++] = x;
        }
    }
    if (at != n) {
        PyErr_SetString(PyExc_RuntimeError, "_rank.kth_largest: a dict changed size");
        goto done;
    }
    result = PyFloat_FromDouble(kth_largest_of(v, n, k));
done:
    PyMem_Free(v);
    for (Py_ssize_t i = 0; i < got_parts; i++) scores_release(&sc[i]);
    PyMem_Free(sc);
    Py_DECREF(seq);
    return result;
}

/* at_least(scores, bar) -> [d for d, v in scores.items() if v >= bar], the
 * scores a dict (its order) or (acc, mask) (increasing d). */
static PyObject *at_least(PyObject *self, PyObject *args) {
    PyObject *scores_obj;
    double bar;
    if (!PyArg_ParseTuple(args, "Od", &scores_obj, &bar)) return NULL;
    Scores sc;
    if (scores_get(scores_obj, &sc, "at_least") < 0) return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL) goto fail;
    if (sc.dict == NULL) {
        const double *acc = sc.acc.buf;
        const unsigned char *m = sc.mask.buf;
        for (Py_ssize_t d = 0; d < sc.mask.len; d++) {
            if (!m[d] || !(acc[d] >= bar)) continue;
            PyObject *key = PyLong_FromSsize_t(d);
            int rc = key == NULL ? -1 : PyList_Append(out, key);
            Py_XDECREF(key);
            if (rc < 0) goto fail;
        }
        scores_release(&sc);
        return out;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(sc.dict, &pos, &key, &value)) {
        double x = PyFloat_AsDouble(value);
        if (x == -1.0 && PyErr_Occurred()) goto fail;
        if (x >= bar && PyList_Append(out, key) < 0) goto fail;
    }
    return out;
fail:
    Py_XDECREF(out);
    scores_release(&sc);
    return NULL;
}

/* -- phrases: the streams of one run ------------------------------------- */

/* Whether the stream s[0..m) holds the pattern at an item boundary. memchr
 * finds each byte that can start it (a scan many bytes at a time); one off
 * an item boundary resumes at the next boundary. */
static int holds_aligned(const char *s, Py_ssize_t m, const char *pat, Py_ssize_t plen,
                         Py_ssize_t size) {
    Py_ssize_t q = 0;
    while (q + plen <= m) {
        const char *hit = memchr(s + q, (unsigned char)pat[0], (size_t)(m - plen + 1 - q));
        if (hit == NULL) return 0;
        Py_ssize_t at = hit - s;
        Py_ssize_t off = at % size;
        if (off) {
            q = at - off + size;
            continue;
        }
        if (memcmp(hit, pat, (size_t)plen) == 0) return 1;
        q = at + size;
    }
    return 0;
}

/* phrase_scan(run, offs, start, wanted, pattern, size): native_rank.
 * phrase_scan_py. Each wanted stream is scanned on its own (offs, an
 * array('Q'), gives its bytes within the run), so a hit is never mapped back
 * to its document and a stream that is not wanted is never read. */
static PyObject *phrase_scan(PyObject *self, PyObject *args) {
    Py_buffer run, pat, offs;
    PyObject *offs_obj, *wanted_obj;
    unsigned long long start;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "y*OKOy*n", &run, &offs_obj, &start, &wanted_obj, &pat, &size))
        return NULL;
    PyObject *result = NULL, *wanted = NULL, *out = NULL;
    offs.obj = NULL;
    if (PyObject_GetBuffer(offs_obj, &offs, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) goto done;
    if (offs.itemsize != 8 || offs.format == NULL || strcmp(offs.format, "Q") != 0) {
        PyErr_SetString(PyExc_TypeError, "_rank.phrase_scan: offsets must be array('Q')");
        goto done;
    }
    wanted = PySequence_Fast(wanted_obj, "_rank.phrase_scan: wanted");
    if (wanted == NULL) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(wanted);
    if (pat.len == 0 || n == 0) {
        PyErr_SetString(PyExc_ValueError, "phrase_scan: an empty pattern or no wanted document");
        goto done;
    }
    if (size <= 0) {
        PyErr_SetString(PyExc_ValueError, "phrase_scan: the item size must be positive");
        goto done;
    }
    const uint64_t *off = (const uint64_t *)offs.buf;
    Py_ssize_t noffs = offs.len / 8;
    out = PyList_New(0);
    if (out == NULL) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *id = PySequence_Fast_GET_ITEM(wanted, i);
        Py_ssize_t d = PyLong_AsSsize_t(id);
        if (d == -1 && PyErr_Occurred()) goto done;
        if (d < 0 || d + 1 >= noffs || off[d] < start || off[d + 1] < off[d] ||
            off[d + 1] - start > (uint64_t)run.len) {
            PyErr_SetString(PyExc_ValueError, "phrase_scan: a wanted stream outside the run");
            goto done;
        }
        const char *s = (const char *)run.buf + (off[d] - start);
        Py_ssize_t m = (Py_ssize_t)(off[d + 1] - off[d]);
        if (holds_aligned(s, m, (const char *)pat.buf, pat.len, size) &&
            PyList_Append(out, id) < 0)
            goto done;
    }
    result = out;
    out = NULL;
done:
    Py_XDECREF(out);
    Py_XDECREF(wanted);
    if (offs.obj != NULL) PyBuffer_Release(&offs);
    PyBuffer_Release(&pat);
    PyBuffer_Release(&run);
    return result;
}

/* -- a prefix's documents: the union of its terms' postings --------------- */

/* Checksums as the segment writer's (ctindex/store/crc32.h), the table
 * built on first use. */
#include "../store/crc32.h"
static int crc_ready;

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* One term of the run: where its posting starts, how many documents, its
 * CRC, and its place in the dictionary (the tie-break of the order). */
typedef struct {
    uint64_t off;
    uint32_t df, want;
    Py_ssize_t at;
} PEntry;

/* Most frequent first; equal counts keep dictionary order (Python's stable
 * sort on -df). */
static int by_df_desc(const void *a, const void *b) {
    const PEntry *x = a, *y = b;
    if (x->df != y->df) return x->df > y->df ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* Adds the ids of one checked posting: marks those below ndocs, puts any
 * other in `extra` (a damaged but checksummed posting stays the pure
 * path's set); keeps `count` = distinct ids seen. */
static int union_ids(const unsigned char *ids, uint32_t df, int wide, Py_ssize_t ndocs,
                     unsigned char *seen, PyObject **extra, Py_ssize_t *count) {
    for (uint32_t k = 0; k < df; k++) {
        uint32_t d = wide ? le32(ids + 4 * (size_t)k)
                          : (uint32_t)ids[2 * (size_t)k] | ((uint32_t)ids[2 * (size_t)k + 1] << 8);
        if ((Py_ssize_t)d < ndocs) {
            *count += !seen[d];
            seen[d] = 1;
            continue;
        }
        if (*extra == NULL && (*extra = PySet_New(NULL)) == NULL) return -1;
        PyObject *key = PyLong_FromUnsignedLong(d);
        if (key == NULL) return -1;
        Py_ssize_t before = PySet_GET_SIZE(*extra);
        int rc = PySet_Add(*extra, key);
        Py_DECREF(key);
        if (rc < 0) return -1;
        *count += PySet_GET_SIZE(*extra) - before;
    }
    return 0;
}

/* The set of the marked ids and the extra ones. */
static PyObject *id_set(const unsigned char *seen, Py_ssize_t ndocs, PyObject *extra) {
    PyObject *out = PySet_New(extra);
    if (out == NULL) return NULL;
    for (Py_ssize_t d = 0; d < ndocs; d++) {
        if (!seen[d]) continue;
        PyObject *key = PyLong_FromSsize_t(d);
        if (key == NULL || PySet_Add(out, key) < 0) {
            Py_XDECREF(key);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(key);
    }
    return out;
}

/* prefix_union(data, first, entries, wide, ndocs) -> (ids, bad): the union
 * of the doc ids of the dictionary entries `entries` (packed <QII: postings
 * offset, df, CRC), whose postings lie in `data` (read from offset `first`),
 * each posting checked against its CRC before it is used. Most frequent
 * first, stopping once ndocs ids are in (the rest could add nothing); `bad`
 * is the index in `entries` of the first posting, in that order, out of
 * `data` or failing its CRC (ids then empty), else -1.
 * native_rank.prefix_union_py is the specification. */
static PyObject *prefix_union(PyObject *self, PyObject *args) {
    PyObject *data_obj, *ents_obj;
    unsigned long long first;
    int wide;
    Py_ssize_t ndocs;
    if (!PyArg_ParseTuple(args, "OKOpn", &data_obj, &first, &ents_obj, &wide, &ndocs))
        return NULL;
    if (ndocs < 0) {
        PyErr_SetString(PyExc_ValueError, "_rank.prefix_union: ndocs < 0");
        return NULL;
    }
    if (!crc_ready) {
        crc_init();
        crc_ready = 1;
    }
    Py_buffer data, ents;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(ents_obj, &ents, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    PyObject *result = NULL, *extra = NULL, *ids = NULL;
    PEntry *order = NULL;
    unsigned char *seen = NULL;
    Py_ssize_t n = ents.len / 16, bad = -1, count = 0;
    size_t width = wide ? 6 : 4;
    if (ents.len % 16) {
        PyErr_SetString(PyExc_ValueError, "_rank.prefix_union: entries of 16 bytes");
        goto done;
    }
    order = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *order);
    seen = PyMem_Calloc((size_t)(ndocs ? ndocs : 1), 1);
    if (order == NULL || seen == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *e = (const unsigned char *)ents.buf + 16 * i;
        order[i] = (PEntry){le64(e), le32(e + 8), le32(e + 12), i};
    }
    qsort(order, (size_t)n, sizeof *order, by_df_desc);
    const unsigned char *buf = data.buf;
    size_t len = (size_t)data.len;
    for (Py_ssize_t i = 0; i < n; i++) {
        const PEntry *e = &order[i];
        uint64_t start = e->off - first;
        uint64_t need = (uint64_t)e->df * width;
        if (e->off < first || start > len || need > len - start ||
            crc32_of(buf + start, (size_t)need) != e->want) {
            bad = e->at;
            break;
        }
        if (union_ids(buf + start, e->df, wide, ndocs, seen, &extra, &count) < 0) goto done;
        if (count >= ndocs) break;
    }
    ids = bad >= 0 ? PySet_New(NULL) : id_set(seen, ndocs, extra);
    if (ids != NULL) result = Py_BuildValue("(Nn)", ids, bad);
done:
    Py_XDECREF(extra);
    PyMem_Free(order);
    PyMem_Free(seen);
    PyBuffer_Release(&ents);
    PyBuffer_Release(&data);
    return result;
}


static PyMethodDef methods[] = {
    {"field_scores", field_scores, METH_VARARGS, "Add one field's scores of a term."},
    {"body_scores", body_scores, METH_VARARGS, "Add the body's scores of a term."},
    {"add_into", add_into, METH_VARARGS, "scores[d] += v for each of got."},
    {"max_into", max_into, METH_VARARGS, "best[d] = max(best.get(d, 0.0), v) (strictly greater)."},
    {"mask", mask, METH_VARARGS, "A bytearray marking a set of document ids."},
    {"add_arrays", add_arrays, METH_VARARGS, "acc[d] += other[d] where other[d] is not 0."},
    {"score_term", score_term, METH_VARARGS, "One term's scores added into a dense array."},
    {"score_docs", score_docs, METH_VARARGS, "One term's scores of a few documents, in a dict."},
    {"kth_largest", kth_largest, METH_VARARGS, "The k-th largest value of some dicts."},
    {"at_least", at_least, METH_VARARGS, "The keys of a dict whose value reaches a bar."},
    {"min_span", min_span, METH_VARARGS, "Shortest run holding every rank inside one field."},
    {"span_scan", span_scan, METH_VARARGS,
     "min_span of each of some documents' streams in runs of streams, read in place."},
    {"anchor_positions", anchor_positions, METH_VARARGS, "The first positions of a rank."},
    {"restrict", restrict_, METH_VARARGS, "A posting's counts of some documents."},
    {"phrase_scan", phrase_scan, METH_VARARGS, "The wanted streams of a run holding a pattern."},
    {"prefix_union", prefix_union, METH_VARARGS, "The checked union of a prefix's postings."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rank", "Optional native core of ranking.", -1, methods,
};

PyMODINIT_FUNC PyInit__rank(void) { return PyModule_Create(&module); }
