/* Optional native core of segment building (docs/decisions/native.md,
 * "Segment building"): the postings inversion and the per-document token
 * streams of ctindex/store/segment.py, whose pure-Python functions
 * `_invert_py` and `_streams_py` are the specification. Output is
 * byte-identical to them (tests/ctindex/store/test_segment_native.py).
 *
 * Why C: inverting ~150 weighted terms per document through Python lists
 * costs one list append pair per (term, document) and an array conversion
 * per term; for a rebuild that is more CPU than a whole SQLite FTS5 build of
 * the same text. Here it is two passes over the documents' dicts and one
 * sort of the distinct terms.
 *
 * Everything written is little-endian, byte by byte, whatever the CPU.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TF_MAX 0xFFFF
#define SEQ_BLOCK_DOCS 64 /* segment.py SEQ_BLOCK_DOCS */

/* -- CRC-32 (the zlib / ISO-HDLC polynomial, as zlib.crc32) -------------- */

static uint32_t crc_table[4][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = crc_table[0][i];
        for (int t = 1; t < 4; t++) {
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
            crc_table[t][i] = c;
        }
    }
}

static uint32_t crc32_of(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 4) {
        c ^= (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
             ((uint32_t)p[3] << 24);
        c = crc_table[3][c & 0xFF] ^ crc_table[2][(c >> 8) & 0xFF] ^
            crc_table[1][(c >> 16) & 0xFF] ^ crc_table[0][c >> 24];
        p += 4;
        n -= 4;
    }
    while (n--) c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static void put16(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* -- a str -> u32 table ------------------------------------------------------
 * Open addressing on the str's cached hash, the value kept in the slot: one
 * probe into one array per lookup. (A dict lookup here costs three cache
 * misses, index, entry and the int object, and was 45 % of the time, `perf`.)
 */

typedef struct {
    PyObject *key; /* borrowed: the caller keeps every key alive */
    Py_hash_t hash;
    uint32_t val;
} Slot;

typedef struct {
    Slot *slots;
    size_t mask;
    size_t used;
} StrTable;

static int st_init(StrTable *t, size_t expected) {
    size_t size = 1024;
    while (size < 2 * expected) size <<= 1;
    t->slots = PyMem_Calloc(size, sizeof(Slot));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->mask = size - 1;
    t->used = 0;
    return 0;
}

static void st_free(StrTable *t) { PyMem_Free(t->slots); }

static int same_str(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    if (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b) &&
        PyUnicode_KIND(a) == PyUnicode_KIND(b)) {
        Py_ssize_t n = PyUnicode_GET_LENGTH(a);
        return n == PyUnicode_GET_LENGTH(b) &&
               memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * PyUnicode_KIND(a)) == 0;
    }
    return PyUnicode_Compare(a, b) == 0;
}

/* The slot holding `key`, or the empty slot where it belongs. */
static Slot *st_slot(StrTable *t, PyObject *key, Py_hash_t h) {
    size_t i = (size_t)h & t->mask;
    for (;;) {
        Slot *s = &t->slots[i];
        if (s->key == NULL || (s->hash == h && same_str(s->key, key))) return s;
        i = (i + 1) & t->mask;
    }
}

static int st_grow(StrTable *t) {
    StrTable bigger;
    if (st_init(&bigger, (t->mask + 1)) < 0) return -1; /* twice the slots */
    for (size_t i = 0; i <= t->mask; i++) {
        Slot *s = &t->slots[i];
        if (s->key != NULL) *st_slot(&bigger, s->key, s->hash) = *s;
    }
    bigger.used = t->used;
    st_free(t);
    *t = bigger;
    return 0;
}

/* Put key -> val in an empty slot found by st_slot (grows the table). */
static int st_put(StrTable *t, Slot *s, PyObject *key, Py_hash_t h, uint32_t val) {
    s->key = key;
    s->hash = h;
    s->val = val;
    if (++t->used * 2 > t->mask + 1) return st_grow(t);
    return 0;
}

/* -- invert ---------------------------------------------------------------- */

typedef struct {
    PyObject *term; /* borrowed: a key of one of the documents' dicts */
    uint32_t id;
} TermRef;

static int term_order(const void *a, const void *b) {
    /* str order is code-point order; str vs str never fails */
    return PyUnicode_Compare(((const TermRef *)a)->term, ((const TermRef *)b)->term);
}

/* A weighted term frequency as the pure path stores it: clipped to u16 when
 * it overflows (values are never negative: the provider adds positive field
 * weights; a negative one is refused, as array("H") refuses it). */
static int tf_value(PyObject *w, uint32_t *out) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(w, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow > 0 || v > TF_MAX) {
        *out = TF_MAX;
        return 0;
    }
    if (overflow < 0 || v < 0) {
        PyErr_SetString(PyExc_OverflowError, "a term frequency is negative");
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int grow_u32(uint32_t **arr, size_t *cap, size_t need, size_t first) {
    if (need <= *cap) return 0;
    size_t size = *cap ? *cap : first;
    while (size < need) size *= 2;
    uint32_t *grown = PyMem_Realloc(*arr, size * sizeof(uint32_t));
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *arr = grown;
    *cap = size;
    return 0;
}

PyDoc_STRVAR(invert_doc,
             "invert(tfws, docs32) -> (terms, postings, entries)\n\n"
             "tfws: one dict term -> weighted tf per document, in doc-id order.\n"
             "terms: the distinct terms, sorted; postings: per term, its doc ids\n"
             "(u32 if docs32 else u16) then its tfs (u16); entries: per term, <QII\n"
             "(postings offset, df, crc32 of its postings). As segment._invert_py.");

static PyObject *invert(PyObject *self, PyObject *args) {
    PyObject *tfws;
    int docs32;
    if (!PyArg_ParseTuple(args, "O!p:invert", &PyList_Type, &tfws, &docs32)) return NULL;
    Py_ssize_t ndocs = PyList_GET_SIZE(tfws);
    size_t dsize = docs32 ? 4 : 2;
    if (ndocs > (docs32 ? (Py_ssize_t)0xFFFFFFFFu : (Py_ssize_t)0x10000)) {
        PyErr_SetString(PyExc_OverflowError, "too many documents for the doc-id width");
        return NULL;
    }
    StrTable ids;
    if (st_init(&ids, 65536) < 0) return NULL;
    PyObject *terms = NULL, *postings = NULL, *entries = NULL, *result = NULL;
    uint32_t *pairs = NULL; /* (id, tf) per (document, term), documents in order */
    uint32_t *df = NULL, *fill = NULL;
    uint64_t *start = NULL;
    TermRef *order = NULL;
    size_t npairs = 0, cap_pairs = 0, nterms = 0, cap_terms = 0;
    size_t *doc_end = PyMem_Malloc(sizeof(size_t) * (size_t)(ndocs > 0 ? ndocs : 1));
    if (doc_end == NULL) {
        PyErr_NoMemory();
        goto done;
    }

    /* Pass 1: term ids (first-seen order), document frequencies, the pairs. */
    for (Py_ssize_t d = 0; d < ndocs; d++) {
        PyObject *tfw = PyList_GET_ITEM(tfws, d);
        if (!PyDict_Check(tfw)) {
            PyErr_SetString(PyExc_TypeError, "invert: each document's tfw must be a dict");
            goto done;
        }
        if (grow_u32(&pairs, &cap_pairs, 2 * (npairs + (size_t)PyDict_GET_SIZE(tfw)), 1 << 17) <
            0)
            goto done;
        Py_ssize_t pos = 0;
        PyObject *term, *w;
        while (PyDict_Next(tfw, &pos, &term, &w)) {
            /* Exact types only: hashing and converting them runs no Python code,
             * so nothing can change the dicts under the walk. */
            if (!PyUnicode_CheckExact(term) || !PyLong_Check(w)) {
                PyErr_SetString(PyExc_TypeError, "invert: terms must be str, tfs int");
                goto done;
            }
            uint32_t tf;
            if (tf_value(w, &tf) < 0) goto done;
            Py_hash_t h = PyObject_Hash(term);
            if (h == -1) goto done;
            Slot *slot = st_slot(&ids, term, h);
            uint32_t id;
            if (slot->key != NULL) {
                id = slot->val;
            } else {
                if (nterms >= 0xFFFFFFFFu) {
                    PyErr_SetString(PyExc_OverflowError, "invert: too many distinct terms");
                    goto done;
                }
                if (grow_u32(&df, &cap_terms, nterms + 1, 4096) < 0) goto done;
                id = (uint32_t)nterms;
                df[nterms++] = 0;
                if (st_put(&ids, slot, term, h, id) < 0) goto done;
            }
            pairs[2 * npairs] = id;
            pairs[2 * npairs + 1] = tf;
            npairs++;
            df[id]++;
        }
        doc_end[d] = npairs;
    }

    /* The terms in code-point order. */
    size_t nalloc = nterms ? nterms : 1;
    order = PyMem_Malloc(nalloc * sizeof(TermRef));
    start = PyMem_Malloc(nalloc * sizeof(uint64_t));
    fill = PyMem_Calloc(nalloc, sizeof(uint32_t));
    if (order == NULL || start == NULL || fill == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i <= ids.mask; i++) {
        Slot *s = &ids.slots[i];
        if (s->key != NULL) {
            order[s->val].term = s->key;
            order[s->val].id = s->val;
        }
    }
    qsort(order, nterms, sizeof(TermRef), term_order);

    terms = PyList_New((Py_ssize_t)nterms);
    if (terms == NULL) goto done;
    uint64_t off = 0;
    for (size_t r = 0; r < nterms; r++) {
        uint32_t id = order[r].id;
        start[id] = off;
        off += (uint64_t)df[id] * (dsize + 2);
        Py_INCREF(order[r].term);
        PyList_SET_ITEM(terms, (Py_ssize_t)r, order[r].term);
    }

    /* Pass 2: each term's doc ids then tfs, documents in increasing order. */
    postings = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)off);
    entries = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(nterms * 16));
    if (postings == NULL || entries == NULL) goto done;
    unsigned char *pb = (unsigned char *)PyBytes_AS_STRING(postings);
    {
        size_t i = 0;
        for (Py_ssize_t d = 0; d < ndocs; d++) {
            for (; i < doc_end[d]; i++) {
                uint32_t id = pairs[2 * i], tf = pairs[2 * i + 1];
                uint32_t k = fill[id]++;
                unsigned char *base = pb + start[id];
                if (docs32)
                    put32(base + 4 * (size_t)k, (uint32_t)d);
                else
                    put16(base + 2 * (size_t)k, (uint32_t)d);
                put16(base + dsize * df[id] + 2 * (size_t)k, tf);
            }
        }
    }
    unsigned char *eb = (unsigned char *)PyBytes_AS_STRING(entries);
    for (size_t r = 0; r < nterms; r++) {
        uint32_t id = order[r].id;
        size_t len = (size_t)df[id] * (dsize + 2);
        put64(eb + 16 * r, start[id]);
        put32(eb + 16 * r + 8, df[id]);
        put32(eb + 16 * r + 12, crc32_of(pb + start[id], len));
    }
    result = Py_BuildValue("(OOO)", terms, postings, entries);

done:
    PyMem_Free(doc_end);
    PyMem_Free(pairs);
    PyMem_Free(df);
    PyMem_Free(fill);
    PyMem_Free(start);
    PyMem_Free(order);
    st_free(&ids);
    Py_XDECREF(terms);
    Py_XDECREF(postings);
    Py_XDECREF(entries);
    return result;
}

/* -- streams --------------------------------------------------------------- */

PyDoc_STRVAR(streams_doc,
             "streams(token_lists, terms, sep, seq32) -> (seqs, seq_offs, seq_crcs)\n\n"
             "seqs: every document's tokens as their rank in the sorted `terms`\n"
             "(`sep` as the width's largest value; u32 if seq32 else u16);\n"
             "seq_offs: <Q offsets of each document's stream (ndocs + 1);\n"
             "seq_crcs: <I crc32 of each run of 64 documents' streams.\n"
             "A token that is neither a term nor sep raises KeyError.\n"
             "As segment._streams_py.");

static PyObject *streams(PyObject *self, PyObject *args) {
    PyObject *lists, *terms, *sep;
    int seq32;
    if (!PyArg_ParseTuple(args, "O!O!Up:streams", &PyList_Type, &lists, &PyList_Type, &terms,
                          &sep, &seq32))
        return NULL;
    Py_ssize_t ndocs = PyList_GET_SIZE(lists);
    Py_ssize_t nterms = PyList_GET_SIZE(terms);
    size_t ssize = seq32 ? 4 : 2;
    uint32_t sep_rank = seq32 ? 0xFFFFFFFFu : 0xFFFFu;
    if ((size_t)nterms > (size_t)sep_rank) {
        PyErr_SetString(PyExc_OverflowError, "streams: too many terms for the rank width");
        return NULL;
    }
    PyObject *seqs = NULL, *offs = NULL, *crcs = NULL, *result = NULL;
    StrTable rank;
    if (st_init(&rank, (size_t)nterms + 1) < 0) return NULL;
    for (Py_ssize_t r = 0; r <= nterms; r++) { /* the terms, then sep (it wins, as in a dict) */
        PyObject *t = r < nterms ? PyList_GET_ITEM(terms, r) : sep;
        if (!PyUnicode_CheckExact(t)) {
            PyErr_SetString(PyExc_TypeError, "streams: terms must be str");
            goto done;
        }
        Py_hash_t h = PyObject_Hash(t);
        if (h == -1) goto done;
        Slot *slot = st_slot(&rank, t, h);
        uint32_t v = r < nterms ? (uint32_t)r : sep_rank;
        if (slot->key != NULL)
            slot->val = v;
        else if (st_put(&rank, slot, t, h, v) < 0)
            goto done;
    }
    size_t total = 0;
    for (Py_ssize_t d = 0; d < ndocs; d++) {
        PyObject *toks = PyList_GET_ITEM(lists, d);
        if (!PyList_Check(toks)) {
            PyErr_SetString(PyExc_TypeError, "streams: each token stream must be a list");
            goto done;
        }
        total += (size_t)PyList_GET_SIZE(toks);
    }
    Py_ssize_t nblocks = (ndocs + SEQ_BLOCK_DOCS - 1) / SEQ_BLOCK_DOCS;
    seqs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(total * ssize));
    offs = PyBytes_FromStringAndSize(NULL, (ndocs + 1) * 8);
    crcs = PyBytes_FromStringAndSize(NULL, nblocks * 4);
    if (seqs == NULL || offs == NULL || crcs == NULL) goto done;
    unsigned char *sb = (unsigned char *)PyBytes_AS_STRING(seqs);
    unsigned char *ob = (unsigned char *)PyBytes_AS_STRING(offs);
    size_t n = 0;
    put64(ob, 0);
    for (Py_ssize_t d = 0; d < ndocs; d++) {
        PyObject *toks = PyList_GET_ITEM(lists, d);
        Py_ssize_t len = PyList_GET_SIZE(toks);
        for (Py_ssize_t i = 0; i < len; i++) {
            PyObject *tok = PyList_GET_ITEM(toks, i);
            /* exact str only: its hash runs no Python code that could resize a list */
            Py_hash_t h = PyUnicode_CheckExact(tok) ? PyObject_Hash(tok) : -1;
            Slot *slot = h == -1 ? NULL : st_slot(&rank, tok, h);
            if (slot == NULL || slot->key == NULL) {
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, tok);
                goto done;
            }
            if (seq32)
                put32(sb + 4 * n, slot->val);
            else
                put16(sb + 2 * n, slot->val);
            n++;
        }
        put64(ob + 8 * (size_t)(d + 1), (uint64_t)(n * ssize));
    }
    unsigned char *cb = (unsigned char *)PyBytes_AS_STRING(crcs);
    for (Py_ssize_t b = 0; b < nblocks; b++) {
        Py_ssize_t first = b * SEQ_BLOCK_DOCS;
        Py_ssize_t last = first + SEQ_BLOCK_DOCS < ndocs ? first + SEQ_BLOCK_DOCS : ndocs;
        uint64_t lo = 0, hi = 0;
        for (int k = 0; k < 8; k++) {
            lo |= (uint64_t)ob[8 * first + k] << (8 * k);
            hi |= (uint64_t)ob[8 * last + k] << (8 * k);
        }
        put32(cb + 4 * b, crc32_of(sb + lo, (size_t)(hi - lo)));
    }
    result = Py_BuildValue("(OOO)", seqs, offs, crcs);
done:
    st_free(&rank);
    Py_XDECREF(seqs);
    Py_XDECREF(offs);
    Py_XDECREF(crcs);
    return result;
}

/* -- module ---------------------------------------------------------------- */

static PyObject *crc32_py(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t c = crc32_of((const unsigned char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(c);
}

static PyMethodDef methods[] = {
    {"invert", invert, METH_VARARGS, invert_doc},
    {"streams", streams, METH_VARARGS, streams_doc},
    {"crc32", crc32_py, METH_O, "crc32(data) -> int, as zlib.crc32 (tested against it)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_invert",
    "Native postings inversion and token streams (ctindex/store/segment.py).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__invert(void) {
    crc_init();
    return PyModule_Create(&module);
}
