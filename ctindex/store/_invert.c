/* Optional native core of segment building (docs/decisions/native.md,
 * "Segment building"): the postings inversion and the per-document token
 * streams of ctindex/store/segment_build.py, whose pure-Python `PyInverter`
 * (ctindex/store/invert.py: `invert_py`, `streams_py`) is the specification. Output is
 * byte-identical to it (tests/ctindex/store/test_segment_build_native.py).
 *
 * Why C: inverting ~150 weighted terms per document through Python lists
 * costs one list append pair per (term, document) and an array conversion
 * per term; for a rebuild that is more CPU than a whole SQLite FTS5 build of
 * the same text. Here it is one pass over each document's dict as it is
 * added, one sort of the distinct terms and one pass over the pairs.
 *
 * Besides: the C entry point another extension adds a document through
 * (invert_api.h, a capsule), and `record`, a segment record's JSON.
 *
 * Everything written is little-endian, byte by byte, whatever the CPU.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "invert_api.h"

#define TF_MAX 0xFFFF
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)0)
#endif
#define SEQ_BLOCK_DOCS 64 /* segment.py SEQ_BLOCK_DOCS */

#include "crc32.h"

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

/* -- inversion helpers ----------------------------------------------------- */

/* A term to sort, with the first 16 bytes of its UTF-8 (surrogates encoded
 * as any other code point; zero-padded) as two big-endian integers. UTF-8's
 * byte order is code-point order, and cutting and zero-padding keep it, so
 * unequal keys order their terms as str comparison would and only equal
 * ones need it: the comparisons read the array, not ~180,000 scattered str
 * objects (sorting them by PyUnicode_Compare alone was ~15 % of inverting). */
typedef struct {
    uint64_t hi, lo;
    PyObject *term; /* borrowed: a key of the Inverter's table */
    uint32_t id;
} TermRef;

static void sort_key(TermRef *t) {
    unsigned char buf[16 + 3] = {0};
    size_t n = 0;
    int kind = PyUnicode_KIND(t->term);
    const void *data = PyUnicode_DATA(t->term);
    Py_ssize_t len = PyUnicode_GET_LENGTH(t->term);
    for (Py_ssize_t i = 0; i < len && n < 16; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 0x80) {
            buf[n++] = (unsigned char)c;
        } else if (c < 0x800) {
            buf[n++] = (unsigned char)(0xC0 | (c >> 6));
            buf[n++] = (unsigned char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            buf[n++] = (unsigned char)(0xE0 | (c >> 12));
            buf[n++] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            buf[n++] = (unsigned char)(0x80 | (c & 0x3F));
        } else {
            buf[n++] = (unsigned char)(0xF0 | (c >> 18));
            buf[n++] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            buf[n++] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            buf[n++] = (unsigned char)(0x80 | (c & 0x3F));
        }
    }
    uint64_t hi = 0, lo = 0;
    for (int k = 0; k < 8; k++) {
        hi = (hi << 8) | buf[k];
        lo = (lo << 8) | buf[8 + k];
    }
    t->hi = hi;
    t->lo = lo;
}

static int term_order(const void *pa, const void *pb) {
    const TermRef *a = pa, *b = pb;
    if (a->hi != b->hi) return a->hi < b->hi ? -1 : 1;
    if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
    /* str order is code-point order; str vs str never fails */
    return PyUnicode_Compare(a->term, b->term);
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

/* Room for `need` elements of `elem` bytes in the array *arrp points to,
 * whose capacity is *cap: doubled from `first` until it fits. Every growing
 * array of this file goes through here (GROW below). The array pointer is
 * read and written with memcpy, so one function serves every element type. */
static int grow_array(void *arrp, size_t *cap, size_t need, size_t first, size_t elem) {
    if (need <= *cap) return 0;
    size_t size = *cap ? *cap : first;
    while (size < need) size *= 2;
    void *arr;
    memcpy(&arr, arrp, sizeof arr);
    void *grown = PyMem_Realloc(arr, size * elem);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(arrp, &grown, sizeof grown);
    *cap = size;
    return 0;
}

#define GROW(arr, cap, need, first) grow_array(&(arr), &(cap), (need), (first), sizeof *(arr))

/* -- Inverter --------------------------------------------------------------
 * A segment's documents are added one at a time, in doc-id order, and each
 * document's dict and token list can be dropped as soon as it is added: a
 * worker then holds (term id, tf) pairs and token ids, 8 and 4 bytes each,
 * instead of every document's dict of ~100 counts and list of tokens until
 * its segment is written (docs/decisions/native.md, "Documents streamed
 * into the segment").
 *
 * The table owns one reference to each distinct term. A token that is not
 * (yet) a term gets an id with no postings; `streams` refuses it if no
 * document ever made it a term, as the pure path's rank lookup does.
 */

#define SEP_ID 0xFFFFFFFFu /* a token that is the field separator */
#define NO_RANK 0xFFFFFFFFu

typedef struct {
    size_t pairs, toks; /* where a document's pairs and token ids end */
} DocEnd;

typedef struct {
    PyObject *term;
    Py_hash_t hash;
    uint32_t tf;
} Entry;

typedef struct {
    PyObject *term; /* borrowed from the document's dict */
    uint32_t id, stamp;
} Local;

typedef struct {
    PyObject_HEAD PyObject *sep;
    StrTable ids;         /* term -> id (first-seen order); keys owned */
    uint32_t *df;         /* per id: documents holding it (0: a token only) */
    size_t nterms, cap_terms;
    uint32_t *pairs; /* (id, tf) per (document, term), documents in order */
    size_t npairs, cap_pairs;
    uint32_t *toks; /* token ids, documents in order */
    size_t ntoks, cap_toks;
    DocEnd *ends; /* per document */
    size_t ndocs, cap_docs;
    uint32_t *rank; /* per id, set by postings(): its rank among the terms */
    size_t nranked; /* terms with postings */
    Entry *entries; /* scratch: the document being added's dict entries */
    size_t cap_entries;
    Local *local; /* the document's own terms by address (see inverter_add) */
    size_t local_mask;
    uint32_t stamp; /* marks the current document's slots of `local` */
} Inverter;

static void inverter_dealloc(Inverter *self) {
    if (self->ids.slots != NULL) {
        for (size_t i = 0; i <= self->ids.mask; i++) Py_XDECREF(self->ids.slots[i].key);
        st_free(&self->ids);
    }
    PyMem_Free(self->df);
    PyMem_Free(self->pairs);
    PyMem_Free(self->toks);
    PyMem_Free(self->ends);
    PyMem_Free(self->entries);
    PyMem_Free(self->local);
    PyMem_Free(self->rank);
    Py_XDECREF(self->sep);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int inverter_init(Inverter *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"sep", NULL};
    PyObject *sep;
    if (self->sep != NULL) {
        PyErr_SetString(PyExc_TypeError, "Inverter: already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "U:Inverter", kwlist, &sep)) return -1;
    if (!PyUnicode_CheckExact(sep)) {
        PyErr_SetString(PyExc_TypeError, "Inverter: sep must be a str");
        return -1;
    }
    if (st_init(&self->ids, 65536) < 0) return -1;
    Py_INCREF(sep);
    self->sep = sep;
    return 0;
}

/* The home slot of an object's address in a table of mask + 1 slots. */
static size_t local_home(PyObject *o, size_t mask) {
    uint64_t x = (uint64_t)(uintptr_t)o >> 4;
    return (size_t)((x * 0x9E3779B97F4A7C15u) >> 32) & mask;
}

/* The id of `term` (exact str, hash h), added with df 0 if new; -1 on error. */
static int64_t term_id(Inverter *self, PyObject *term, Py_hash_t h) {
    Slot *slot = st_slot(&self->ids, term, h);
    if (slot->key != NULL) return slot->val;
    if (self->nterms >= SEP_ID) {
        PyErr_SetString(PyExc_OverflowError, "Inverter: too many distinct terms");
        return -1;
    }
    if (GROW(self->df, self->cap_terms, self->nterms + 1, 4096) < 0) return -1;
    uint32_t id = (uint32_t)self->nterms;
    self->df[self->nterms++] = 0;
    Py_INCREF(term);
    if (st_put(&self->ids, slot, term, h, id) < 0) return -1; /* the table keeps it */
    return id;
}

/* Whether another document may be added; -1 with an exception if not. */
static int can_add(Inverter *self) {
    if (self->sep == NULL) {
        PyErr_SetString(PyExc_TypeError, "Inverter: not initialised");
        return -1;
    }
    if (self->rank != NULL) {
        PyErr_SetString(PyExc_ValueError, "Inverter: add after postings()");
        return -1;
    }
    if (self->ndocs >= 0xFFFFFFFFu) {
        PyErr_SetString(PyExc_OverflowError, "Inverter: too many documents");
        return -1;
    }
    return 0;
}

/* The next document, its n distinct terms in self->entries (each term's
 * home slot already prefetched) and its token stream; on an error nothing
 * of it is added. Both ways in, add() and the C entry point, end here. */
static int add_entries(Inverter *self, size_t n, PyObject *const *tokens, size_t ntokens) {
    size_t first_pair = self->npairs, first_tok = self->ntoks;
    if (GROW(self->ends, self->cap_docs, self->ndocs + 1, 1024) < 0 ||
        GROW(self->pairs, self->cap_pairs, 2 * (self->npairs + n), 1 << 17) < 0 ||
        GROW(self->toks, self->cap_toks, self->ntoks + ntokens, 1 << 16) < 0)
        return -1;
    /* A document's tokens are nearly all the very str objects it counts:
     * they are looked up by address in a small table of this document's
     * terms (a stamp per slot: nothing to clear between documents). */
    size_t want = 256;
    while (want < 2 * n) want *= 2;
    if (self->local == NULL || want > self->local_mask + 1) {
        PyMem_Free(self->local);
        self->local = PyMem_Calloc(want, sizeof(Local));
        if (self->local == NULL) {
            self->local_mask = 0;
            PyErr_NoMemory();
            return -1;
        }
        self->local_mask = want - 1;
        self->stamp = 0;
    }
    if (++self->stamp == 0) { /* wrapped: every slot is stale again */
        memset(self->local, 0, (self->local_mask + 1) * sizeof(Local));
        self->stamp = 1;
    }
    for (size_t i = 0; i < n; i++) {
        Entry *e = &self->entries[i];
        int64_t id = term_id(self, e->term, e->hash);
        if (id < 0) goto undo;
        self->pairs[2 * self->npairs] = (uint32_t)id;
        self->pairs[2 * self->npairs + 1] = e->tf;
        self->npairs++;
        self->df[id]++;
        if (PyUnicode_GET_LENGTH(e->term) == PyUnicode_GET_LENGTH(self->sep) &&
            same_str(e->term, self->sep))
            continue; /* sep is never a token's term */
        size_t j = local_home(e->term, self->local_mask);
        while (self->local[j].stamp == self->stamp) j = (j + 1) & self->local_mask;
        self->local[j] = (Local){e->term, (uint32_t)id, self->stamp};
    }
    /* Nothing below runs Python code (exact str tokens only), so the
     * caller's token array can not change under the walk. */
    for (size_t i = 0; i < ntokens; i++) {
        PyObject *tok = tokens[i];
        if (!PyUnicode_CheckExact(tok)) {
            PyErr_SetString(PyExc_TypeError, "Inverter.add: tokens must be str");
            goto undo;
        }
        int64_t id = -1;
        if (tok == self->sep) {
            id = SEP_ID;
        } else {
            for (size_t j = local_home(tok, self->local_mask); self->local[j].stamp == self->stamp;
                 j = (j + 1) & self->local_mask) {
                if (self->local[j].term == tok) {
                    id = self->local[j].id;
                    break;
                }
            }
        }
        if (id < 0) {
            Py_hash_t h = PyObject_Hash(tok);
            if (h == -1) goto undo;
            id = same_str(tok, self->sep) ? (int64_t)SEP_ID : term_id(self, tok, h);
            if (id < 0) goto undo;
        }
        self->toks[self->ntoks++] = (uint32_t)id;
    }
    self->ends[self->ndocs].pairs = self->npairs;
    self->ends[self->ndocs].toks = self->ntoks;
    self->ndocs++;
    return 0;
undo: /* terms first seen here stay, with no postings: postings() skips them */
    for (size_t i = first_pair; i < self->npairs; i++) self->df[self->pairs[2 * i]]--;
    self->npairs = first_pair;
    self->ntoks = first_tok;
    return -1;
}

PyDoc_STRVAR(add_doc,
             "add(tfw, tokens)\n\n"
             "The next document (doc ids count up from 0): its dict term -> weighted\n"
             "tf and its token stream (str tokens; sep between fields). Neither is\n"
             "kept. On an error nothing of the document is added.");

static PyObject *inverter_add(Inverter *self, PyObject *args) {
    PyObject *tfw, *tokens;
    if (!PyArg_ParseTuple(args, "O!O!:add", &PyDict_Type, &tfw, &PyList_Type, &tokens))
        return NULL;
    size_t n = (size_t)PyDict_GET_SIZE(tfw);
    if (can_add(self) < 0 || GROW(self->entries, self->cap_entries, n, 256) < 0) return NULL;
    /* The dict's entries first, each term's home slot prefetched: with
     * ~180,000 terms the table is ~12 MB, and a lookup that waits for its
     * slot to come from memory was most of this function's time. */
    Py_ssize_t pos = 0;
    PyObject *term, *w;
    size_t k = 0;
    while (PyDict_Next(tfw, &pos, &term, &w)) {
        /* Exact types only: hashing and converting them runs no Python code,
         * so nothing can change the dict under the walk. */
        if (!PyUnicode_CheckExact(term) || !PyLong_Check(w)) {
            PyErr_SetString(PyExc_TypeError, "Inverter.add: terms must be str, tfs int");
            return NULL;
        }
        Entry *e = &self->entries[k++];
        if (tf_value(w, &e->tf) < 0) return NULL;
        e->term = term;
        e->hash = PyObject_Hash(term);
        if (e->hash == -1) return NULL;
        PREFETCH(&self->ids.slots[(size_t)e->hash & self->ids.mask]);
    }
    if (add_entries(self, n, PySequence_Fast_ITEMS(tokens), (size_t)PyList_GET_SIZE(tokens)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The capsule's add (invert_api.h): add() without the dict and the list. */
static int api_add(PyObject *obj, const CtCount *counts, size_t n, PyObject *const *tokens,
                   size_t ntokens);

PyDoc_STRVAR(postings_doc,
             "postings(docs32) -> (terms, postings, entries)\n\n"
             "terms: the distinct terms of the documents' dicts, sorted; postings:\n"
             "per term, its doc ids (u32 if docs32 else u16) then its tfs (u16);\n"
             "entries: per term, <QII (postings offset, df, crc32 of its postings).\n"
             "Once, after the last add(). As invert.invert_py.");

static PyObject *inverter_postings(Inverter *self, PyObject *args) {
    int docs32;
    if (!PyArg_ParseTuple(args, "p:postings", &docs32)) return NULL;
    if (self->sep == NULL || self->rank != NULL) {
        PyErr_SetString(PyExc_ValueError, "Inverter: postings() once, after init");
        return NULL;
    }
    size_t dsize = docs32 ? 4 : 2;
    if (self->ndocs > (docs32 ? (size_t)0xFFFFFFFFu : (size_t)0x10000)) {
        PyErr_SetString(PyExc_OverflowError, "too many documents for the doc-id width");
        return NULL;
    }
    size_t nalloc = self->nterms ? self->nterms : 1;
    PyObject *terms = NULL, *postings = NULL, *entries = NULL, *result = NULL;
    TermRef *order = PyMem_Malloc(nalloc * sizeof(TermRef));
    uint64_t *start = PyMem_Malloc(nalloc * sizeof(uint64_t));
    uint32_t *fill = PyMem_Calloc(nalloc, sizeof(uint32_t));
    uint32_t *rank = PyMem_Malloc(nalloc * sizeof(uint32_t));
    if (order == NULL || start == NULL || fill == NULL || rank == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* The terms with postings, in code-point order. */
    size_t n = 0;
    for (size_t i = 0; i <= self->ids.mask; i++) {
        Slot *s = &self->ids.slots[i];
        if (s->key == NULL) continue;
        rank[s->val] = NO_RANK;
        if (self->df[s->val] > 0) {
            order[n].term = s->key;
            order[n].id = s->val;
            sort_key(&order[n]);
            n++;
        }
    }
    qsort(order, n, sizeof(TermRef), term_order);
    terms = PyList_New((Py_ssize_t)n);
    if (terms == NULL) goto done;
    uint64_t off = 0;
    for (size_t r = 0; r < n; r++) {
        uint32_t id = order[r].id;
        rank[id] = (uint32_t)r;
        start[id] = off;
        off += (uint64_t)self->df[id] * (dsize + 2);
        Py_INCREF(order[r].term);
        PyList_SET_ITEM(terms, (Py_ssize_t)r, order[r].term);
    }
    /* Each term's doc ids then tfs, documents in increasing order. */
    postings = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)off);
    entries = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 16));
    if (postings == NULL || entries == NULL) goto done;
    unsigned char *pb = (unsigned char *)PyBytes_AS_STRING(postings);
    const uint32_t *df = self->df;
    size_t i = 0;
    for (size_t d = 0; d < self->ndocs; d++) {
        for (; i < self->ends[d].pairs; i++) {
            uint32_t id = self->pairs[2 * i], tf = self->pairs[2 * i + 1];
            uint32_t k = fill[id]++;
            unsigned char *base = pb + start[id];
            if (docs32)
                put32(base + 4 * (size_t)k, (uint32_t)d);
            else
                put16(base + 2 * (size_t)k, (uint32_t)d);
            put16(base + dsize * df[id] + 2 * (size_t)k, tf);
        }
    }
    unsigned char *eb = (unsigned char *)PyBytes_AS_STRING(entries);
    for (size_t r = 0; r < n; r++) {
        uint32_t id = order[r].id;
        size_t len = (size_t)df[id] * (dsize + 2);
        put64(eb + 16 * r, start[id]);
        put32(eb + 16 * r + 8, df[id]);
        put32(eb + 16 * r + 12, crc32_of(pb + start[id], len));
    }
    result = Py_BuildValue("(OOO)", terms, postings, entries);
    if (result != NULL) {
        /* the pairs are spent; streams() needs the ranks */
        PyMem_Free(self->pairs);
        self->pairs = NULL;
        self->npairs = self->cap_pairs = 0;
        self->rank = rank;
        self->nranked = n;
        rank = NULL;
    }
done:
    PyMem_Free(order);
    PyMem_Free(start);
    PyMem_Free(fill);
    PyMem_Free(rank);
    Py_XDECREF(terms);
    Py_XDECREF(postings);
    Py_XDECREF(entries);
    return result;
}

/* The term with id `id` (borrowed): only for the KeyError of a refused token,
 * so a scan of the table rather than an array kept for every term. */
static PyObject *term_of_id(Inverter *self, uint32_t id) {
    for (size_t i = 0; i <= self->ids.mask; i++)
        if (self->ids.slots[i].key != NULL && self->ids.slots[i].val == id)
            return self->ids.slots[i].key;
    return Py_None; /* unreachable: every id has its slot */
}

PyDoc_STRVAR(streams_doc,
             "streams(word_base, seq32) -> (seqs, seq_offs, seq_crcs)\n\n"
             "seqs: every document's tokens as their rank among the terms from rank\n"
             "word_base on (sep as the width's largest value; u32 if seq32 else\n"
             "u16); seq_offs: <Q offsets of each document's stream (ndocs + 1);\n"
             "seq_crcs: <I crc32 of each run of 64 documents' streams. A token that\n"
             "is neither one of those terms nor sep raises KeyError. After\n"
             "postings(). As invert.streams_py of terms[word_base:].");

static PyObject *inverter_streams(Inverter *self, PyObject *args) {
    Py_ssize_t word_base;
    int seq32;
    if (!PyArg_ParseTuple(args, "np:streams", &word_base, &seq32)) return NULL;
    if (self->rank == NULL) {
        PyErr_SetString(PyExc_ValueError, "Inverter: streams() after postings()");
        return NULL;
    }
    if (word_base < 0 || (size_t)word_base > self->nranked) {
        PyErr_SetString(PyExc_ValueError, "Inverter.streams: word_base out of range");
        return NULL;
    }
    size_t ssize = seq32 ? 4 : 2;
    uint32_t sep_rank = seq32 ? 0xFFFFFFFFu : 0xFFFFu;
    if (self->nranked - (size_t)word_base > (size_t)sep_rank) {
        PyErr_SetString(PyExc_OverflowError, "streams: too many terms for the rank width");
        return NULL;
    }
    size_t ndocs = self->ndocs;
    size_t nblocks = (ndocs + SEQ_BLOCK_DOCS - 1) / SEQ_BLOCK_DOCS;
    PyObject *seqs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(self->ntoks * ssize));
    PyObject *offs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((ndocs + 1) * 8));
    PyObject *crcs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(nblocks * 4));
    PyObject *result = NULL;
    if (seqs == NULL || offs == NULL || crcs == NULL) goto done;
    unsigned char *sb = (unsigned char *)PyBytes_AS_STRING(seqs);
    unsigned char *ob = (unsigned char *)PyBytes_AS_STRING(offs);
    uint32_t base = (uint32_t)word_base;
    size_t n = 0;
    put64(ob, 0);
    for (size_t d = 0; d < ndocs; d++) {
        for (; n < self->ends[d].toks; n++) {
            uint32_t id = self->toks[n], v;
            if (id == SEP_ID) {
                v = sep_rank;
            } else if (self->rank[id] == NO_RANK || self->rank[id] < base) {
                PyErr_SetObject(PyExc_KeyError, term_of_id(self, id));
                goto done;
            } else {
                v = self->rank[id] - base;
            }
            if (seq32)
                put32(sb + 4 * n, v);
            else
                put16(sb + 2 * n, v);
        }
        put64(ob + 8 * (d + 1), (uint64_t)(n * ssize));
    }
    unsigned char *cb = (unsigned char *)PyBytes_AS_STRING(crcs);
    for (size_t b = 0; b < nblocks; b++) {
        size_t first = b * SEQ_BLOCK_DOCS;
        size_t last = first + SEQ_BLOCK_DOCS < ndocs ? first + SEQ_BLOCK_DOCS : ndocs;
        size_t lo = first ? self->ends[first - 1].toks : 0, hi = self->ends[last - 1].toks;
        put32(cb + 4 * b, crc32_of(sb + lo * ssize, (hi - lo) * ssize));
    }
    result = Py_BuildValue("(OOO)", seqs, offs, crcs);
done:
    Py_XDECREF(seqs);
    Py_XDECREF(offs);
    Py_XDECREF(crcs);
    return result;
}

static PyMethodDef inverter_methods[] = {
    {"add", (PyCFunction)inverter_add, METH_VARARGS, add_doc},
    {"postings", (PyCFunction)inverter_postings, METH_VARARGS, postings_doc},
    {"streams", (PyCFunction)inverter_streams, METH_VARARGS, streams_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject InverterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ctindex.store._invert.Inverter",
    .tp_basicsize = sizeof(Inverter),
    .tp_dealloc = (destructor)inverter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Inverter(sep): a segment's postings and token streams, fed one\n"
              "document at a time (invert.PyInverter is the specification).",
    .tp_methods = inverter_methods,
    .tp_init = (initproc)inverter_init,
    .tp_new = PyType_GenericNew,
};

static int api_add(PyObject *obj, const CtCount *counts, size_t n, PyObject *const *tokens,
                   size_t ntokens) {
    if (Py_TYPE(obj) != &InverterType) {
        PyErr_SetString(PyExc_TypeError, "Inverter API: not an Inverter");
        return -1;
    }
    Inverter *self = (Inverter *)obj;
    if (can_add(self) < 0 || GROW(self->entries, self->cap_entries, n, 256) < 0) return -1;
    for (size_t k = 0; k < n; k++) {
        const CtCount *c = &counts[k];
        if (!PyUnicode_CheckExact(c->term)) {
            PyErr_SetString(PyExc_TypeError, "Inverter.add: terms must be str, tfs int");
            return -1;
        }
        if (c->count < 0) { /* as tf_value refuses a negative int */
            PyErr_SetString(PyExc_OverflowError, "a term frequency is negative");
            return -1;
        }
        Entry *e = &self->entries[k];
        e->term = c->term;
        e->hash = c->hash;
        e->tf = c->count > TF_MAX ? TF_MAX : (uint32_t)c->count;
        PREFETCH(&self->ids.slots[(size_t)e->hash & self->ids.mask]);
    }
    return add_entries(self, n, tokens, ntokens);
}

static CtInvertApi api = {CT_INVERT_API_VERSION, &InverterType, api_add};

/* -- records -----------------------------------------------------------------
 * A segment record is its StoredDoc as compact JSON
 * (json.JSONEncoder(separators=(",", ":")).encode, ASCII only: segment.py
 * SegmentBuilder._record, the specification). Here: str, int and tuples of
 * them, the only types a StoredDoc holds; None for anything else, and the
 * json module encodes it. json's own C encoder runs per string, behind
 * Python's iterencode machinery per field: ~5 us a small record. */

typedef struct {
    char *buf;
    size_t len, cap;
} Out;

static int out_room(Out *o, size_t more) {
    return GROW(o->buf, o->cap, o->len + more, 256);
}

static void put_u_escape(Out *o, unsigned v) {
    static const char hex[] = "0123456789abcdef";
    char *p = o->buf + o->len;
    p[0] = '\\';
    p[1] = 'u';
    p[2] = hex[(v >> 12) & 0xF];
    p[3] = hex[(v >> 8) & 0xF];
    p[4] = hex[(v >> 4) & 0xF];
    p[5] = hex[v & 0xF];
    o->len += 6;
}

/* A str as json's ensure_ascii encoder writes it (lowercase \u escapes, a
 * surrogate pair above U+FFFF, lone surrogates as they are). */
static int put_json_str(Out *o, PyObject *str) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(str);
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    if (out_room(o, 2 + 12 * (size_t)n) < 0) return -1; /* the worst case */
    o->buf[o->len++] = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
            o->buf[o->len++] = (char)c;
            continue;
        }
        char short_form = 0;
        switch (c) {
        case '\\': short_form = '\\'; break;
        case '"': short_form = '"'; break;
        case '\b': short_form = 'b'; break;
        case '\f': short_form = 'f'; break;
        case '\n': short_form = 'n'; break;
        case '\r': short_form = 'r'; break;
        case '\t': short_form = 't'; break;
        }
        if (short_form) {
            o->buf[o->len++] = '\\';
            o->buf[o->len++] = short_form;
        } else if (c >= 0x10000) {
            unsigned v = (unsigned)(c - 0x10000);
            put_u_escape(o, 0xD800 | (v >> 10));
            put_u_escape(o, 0xDC00 | (v & 0x3FF));
        } else {
            put_u_escape(o, (unsigned)c);
        }
    }
    o->buf[o->len++] = '"';
    return 0;
}

/* 1: written; 0: a type left to the json module; -1: error. */
static int put_json(Out *o, PyObject *v, int depth) {
    if (PyUnicode_CheckExact(v)) return put_json_str(o, v) < 0 ? -1 : 1;
    if (PyLong_CheckExact(v)) {
        PyObject *text = PyObject_Str(v);
        if (text == NULL) return -1;
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(text, &n);
        int bad = s == NULL || out_room(o, (size_t)n) < 0;
        if (!bad) {
            memcpy(o->buf + o->len, s, (size_t)n);
            o->len += (size_t)n;
        }
        Py_DECREF(text);
        return bad ? -1 : 1;
    }
    if (PyTuple_Check(v) && depth < 2) { /* a StoredDoc, or its tags */
        if (out_room(o, 1) < 0) return -1;
        o->buf[o->len++] = '[';
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v); i++) {
            if (i > 0) {
                if (out_room(o, 1) < 0) return -1;
                o->buf[o->len++] = ',';
            }
            int got = put_json(o, PyTuple_GET_ITEM(v, i), depth + 1);
            if (got <= 0) return got;
        }
        if (out_room(o, 1) < 0) return -1;
        o->buf[o->len++] = ']';
        return 1;
    }
    return 0;
}

static Out record_out; /* reused: records are built one after another */

static PyObject *record_py(PyObject *self, PyObject *doc) {
    if (!PyTuple_Check(doc)) Py_RETURN_NONE;
    record_out.len = 0;
    int got = put_json(&record_out, doc, 0);
    if (got < 0) return NULL;
    if (got == 0) Py_RETURN_NONE;
    PyObject *rec = PyBytes_FromStringAndSize(record_out.buf, (Py_ssize_t)record_out.len);
    if (record_out.cap > (1 << 20)) { /* a huge body: do not keep its buffer */
        PyMem_Free(record_out.buf);
        record_out = (Out){NULL, 0, 0};
    }
    return rec;
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
    {"crc32", crc32_py, METH_O, "crc32(data) -> int, as zlib.crc32 (tested against it)"},
    {"record", record_py, METH_O,
     "record(doc) -> bytes | None: a StoredDoc as segment.py's record JSON; None: not"
     " of str, int and tuples (the json module then)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_invert",
    "Native postings inversion and token streams (ctindex/store/segment_build.py).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__invert(void) {
    crc_init();
    if (PyType_Ready(&InverterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&InverterType);
    if (PyModule_AddObject(m, "Inverter", (PyObject *)&InverterType) < 0) {
        Py_DECREF(&InverterType);
        Py_DECREF(m);
        return NULL;
    }
    PyObject *capsule = PyCapsule_New(&api, CT_INVERT_CAPSULE, NULL);
    if (capsule == NULL || PyModule_AddObject(m, "_api", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
