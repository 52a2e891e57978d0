/* Optional native core of the okf-markdown provider (docs/decisions/native.md,
 * "Building the index" and "The per-document chain in C"): the parse of the
 * common document shape (`parse`, with `frontmatter`), the word tokenizer
 * (`terms` and `fields_terms`, with a memo in front of the stem cache) and
 * the assembly of a document's analysis from its terms (`assemble`, and
 * `assemble_into`, which hands it to the segment builder's C inverter
 * through ctindex/store/invert_api.h) of ctindex/providers/okf_markdown.py,
 * whose pure-Python code is the specification; the results are identical
 * (tests/ctindex/providers/test_okf_markdown_native.py).
 *
 * A word is a maximal run of code points for which str.isalnum() is true:
 * exactly what the pure path's regex `[^\W_]+` matches (CPython's sre defines
 * a word character as Py_UNICODE_ISALNUM or '_'), in the text's fold
 * (ctindex/providers/folding.py). ASCII text folds to itself; other text is
 * folded here, each character as that module's `fold_run` folds it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "../store/invert_api.h"

/* str.isalnum() of one code point; ASCII from a table (Py_UNICODE_ISALNUM
 * asks four Unicode databases in turn, and most text is ASCII). */
static unsigned char ascii_alnum[128];

static void init_ascii_alnum(void) {
    for (int c = 0; c < 128; c++)
        ascii_alnum[c] = (unsigned char)Py_UNICODE_ISALNUM((Py_UCS4)c);
}

static inline int is_alnum(Py_UCS4 ch) {
    return ch < 128 ? ascii_alnum[ch] : Py_UNICODE_ISALNUM(ch);
}

/* -- the word memo ----------------------------------------------------------
 *
 * Looking each word up in the Python stem cache costs a new str object, its
 * hash and a dict probe that misses the CPU caches three times (the index,
 * the entry, the key object): about a quarter of analysing a corpus. Short
 * words of one-byte-per-character text are looked up here first, by their
 * bytes, in one probe of one slot, with no allocation.
 *
 * The memo only ever holds what the cache answered (a strong reference to
 * the term), so it is right as long as the cache never maps a word to a
 * different term, which okf_markdown.py's stem cache never does (a word's
 * stem is a function of the word). It belongs to one cache dict: another
 * dict, or the same one emptied meanwhile (it is smaller, or no longer maps
 * the first word the memo took to the same term object), empties it first. It
 * is emptied too when half full, so its size stays bounded. */

#define MEMO_BITS 18
#define MEMO_SLOTS (1u << MEMO_BITS)
#define MEMO_KEY 19 /* longer words take the cache's own path */

typedef struct {
    uint32_t tag; /* upper hash bits; 0 = empty slot */
    uint8_t len;
    char key[MEMO_KEY];
    PyObject *term;
} MemoSlot;

static MemoSlot *memo;
static size_t memo_used;
static PyObject *memo_owner;      /* the cache dict the memo answers for (strong) */
static Py_ssize_t memo_owner_len; /* its size when last seen */
static PyObject *probe_word, *probe_term; /* the memo's first entry (strong) */

static void memo_clear(void) {
    if (memo == NULL)
        return;
    for (size_t i = 0; i < MEMO_SLOTS; i++) {
        if (memo[i].tag) {
            Py_DECREF(memo[i].term);
            memo[i].tag = 0;
        }
    }
    memo_used = 0;
    Py_CLEAR(probe_word);
    Py_CLEAR(probe_term);
}

/* Does the cache still map the probe word to the very same term object? */
static int probe_holds(PyObject *cache) {
    if (probe_word == NULL) return 1;
    PyObject *got = PyDict_GetItemWithError(cache, probe_word); /* borrowed */
    if (got == NULL && PyErr_Occurred()) return -1;
    return got == probe_term;
}

/* Ready the memo for a call with `cache`: -1 on allocation failure. */
static int memo_bind(PyObject *cache) {
    if (memo == NULL) {
        memo = PyMem_Calloc(MEMO_SLOTS, sizeof(MemoSlot));
        if (memo == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    int holds = cache == memo_owner ? probe_holds(cache) : 0;
    if (holds < 0) return -1;
    if (!holds || PyDict_GET_SIZE(cache) < memo_owner_len) {
        memo_clear();
        PyObject *old = memo_owner;
        Py_INCREF(cache);
        memo_owner = cache;
        Py_XDECREF(old);
    }
    memo_owner_len = PyDict_GET_SIZE(cache);
    return 0;
}

static uint64_t hash_word(const unsigned char *s, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 0x100000001b3ULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h;
}

/* The slot holding word `s`, or the empty one where it would go. */
static MemoSlot *memo_slot(const unsigned char *s, size_t n, uint64_t h) {
    uint32_t tag = (uint32_t)(h >> 32) | 1u;
    size_t i = (size_t)h & (MEMO_SLOTS - 1);
    for (;;) {
        MemoSlot *slot = &memo[i];
        if (slot->tag == 0 || (slot->tag == tag && slot->len == n && memcmp(slot->key, s, n) == 0))
            return slot;
        i = (i + 1) & (MEMO_SLOTS - 1);
    }
}

static void memo_put(MemoSlot *slot, const unsigned char *s, size_t n, uint64_t h,
                     PyObject *word, PyObject *term) {
    if (memo_used >= MEMO_SLOTS / 2) { /* bounded: start again */
        memo_clear();
        slot = memo_slot(s, n, h);
    }
    slot->tag = (uint32_t)(h >> 32) | 1u;
    slot->len = (uint8_t)n;
    memcpy(slot->key, s, n);
    Py_INCREF(term);
    slot->term = term;
    memo_used++;
    if (probe_word == NULL) {
        Py_INCREF(word);
        Py_INCREF(term);
        probe_word = word;
        probe_term = term;
    }
}

/* -- folding ----------------------------------------------------------------
 *
 * Folding a text is folding each of its characters and joining the results
 * (ctindex/providers/folding.py; tests/ctindex/providers/test_folding.py
 * checks it over every code point), so a non-ASCII text is folded here
 * character by character: ASCII is copied, any other character replaced by
 * its fold, which folding.fold_run computes once per process (a table for
 * the BMP; beyond it, asked each time). Calling the Python `fold` per text
 * instead made analysing accented text 2.8x slower (docs/decisions/native.md,
 * "Accent folding in the tokenizer"). */

static PyObject *fold_func;   /* ctindex.providers.folding.fold_run (strong), on first use */
static PyObject **fold_table; /* BMP code point -> its fold (strong), NULL until asked */

/* fold_run(chr(ch)) (new reference). */
static PyObject *fold_char(Py_UCS4 ch) {
    if (fold_func == NULL) {
        PyObject *mod = PyImport_ImportModule("ctindex.providers.folding");
        if (mod == NULL) return NULL;
        fold_func = PyObject_GetAttrString(mod, "fold_run");
        Py_DECREF(mod);
        if (fold_func == NULL) return NULL;
    }
    PyObject *one = PyUnicode_FromOrdinal((int)ch);
    if (one == NULL) return NULL;
    PyObject *out = PyObject_CallOneArg(fold_func, one);
    Py_DECREF(one);
    if (out != NULL && !PyUnicode_Check(out)) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_TypeError, "fold_run() must return str");
        return NULL;
    }
    return out;
}

/* The fold of `ch`: borrowed from the table in the BMP, else a new reference
 * also put in *owned (which the caller drops). NULL on error. */
static PyObject *char_fold(Py_UCS4 ch, PyObject **owned) {
    *owned = NULL;
    if (ch >= 0x10000) return *owned = fold_char(ch);
    if (fold_table == NULL) {
        fold_table = PyMem_Calloc(0x10000, sizeof(PyObject *));
        if (fold_table == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    if (fold_table[ch] == NULL) fold_table[ch] = fold_char(ch);
    return fold_table[ch];
}

/* The fold of `text` (new reference): `text` itself when it is ASCII. */
static PyObject *fold_of(PyObject *text) {
    if (PyUnicode_IS_ASCII(text)) {
        Py_INCREF(text);
        return text;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), used = 0, cap = n + 16;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_UCS4 *buf = PyMem_Malloc((size_t)cap * sizeof(Py_UCS4));
    if (buf == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch < 128) {
            buf[used++] = ch; /* room: cap keeps one slot per character left */
            continue;
        }
        PyObject *owned, *f = char_fold(ch, &owned);
        if (f == NULL) {
            PyMem_Free(buf);
            return NULL;
        }
        Py_ssize_t m = PyUnicode_GET_LENGTH(f);
        if (used + m + (n - i - 1) > cap) {
            cap = 2 * (used + m + (n - i - 1));
            Py_UCS4 *grown = PyMem_Realloc(buf, (size_t)cap * sizeof(Py_UCS4));
            if (grown == NULL) {
                Py_XDECREF(owned);
                PyMem_Free(buf);
                return PyErr_NoMemory();
            }
            buf = grown;
        }
        int fkind = PyUnicode_KIND(f);
        const void *fdata = PyUnicode_DATA(f);
        for (Py_ssize_t j = 0; j < m; j++) buf[used++] = PyUnicode_READ(fkind, fdata, j);
        Py_XDECREF(owned);
    }
    PyObject *out = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, buf, used);
    PyMem_Free(buf);
    return out;
}

/* -- terms ------------------------------------------------------------------ */

typedef struct {
    Py_ssize_t start, end; /* a word's code points */
    uint64_t h;            /* hash_word of its bytes, when the memo may hold it */
} Span;

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)0)
#endif

PyDoc_STRVAR(terms_doc,
             "terms(text, cache) -> (terms, missing)\n\n"
             "The words of `text` in order, each replaced by cache[word]; a word the\n"
             "cache lacks stays as the word itself and its index is listed in\n"
             "`missing` (None when every word was found). The cache must never map a\n"
             "word to a different term later (it may grow, or be cleared).");

/* terms() of one text, the memo already bound to `cache`: the list (new
 * reference) and, in *missing_out, the missing indexes (new reference) or
 * NULL; NULL on error. */
static PyObject *text_terms(PyObject *raw, PyObject *cache, PyObject **missing_out) {
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(raw) < 0) return NULL; /* a no-op from 3.12 on */
#endif
    PyObject *text = fold_of(raw);
    if (text == NULL) return NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) {
        Py_DECREF(text);
        return NULL;
    }
#endif
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const unsigned char *bytes = kind == PyUnicode_1BYTE_KIND ? data : NULL;
    /* Pass 1: the words' bounds, and each memo slot prefetched (the memo is
     * 8 MB: a probe that waits for memory was most of its cost). */
    Span local[256];
    Span *spans = local;
    size_t nspans = 0, cap = sizeof local / sizeof local[0];
    PyObject *out = NULL, *missing = NULL;
    Py_ssize_t i = 0;
    while (i < n) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (!is_alnum(ch)) {
            i++;
            continue;
        }
        Py_ssize_t start = i++;
        while (i < n && is_alnum(PyUnicode_READ(kind, data, i))) i++;
        if (nspans == cap) {
            Span *grown = PyMem_Malloc(2 * cap * sizeof(Span));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            memcpy(grown, spans, nspans * sizeof(Span));
            if (spans != local) PyMem_Free(spans);
            spans = grown;
            cap *= 2;
        }
        Span *sp = &spans[nspans++];
        sp->start = start;
        sp->end = i;
        sp->h = 0;
        size_t len = (size_t)(i - start);
        if (bytes != NULL && len <= MEMO_KEY) {
            sp->h = hash_word(bytes + start, len);
            PREFETCH(&memo[(size_t)sp->h & (MEMO_SLOTS - 1)]);
        }
    }
    /* Pass 2: each word's term, from the memo or the cache. */
    out = PyList_New((Py_ssize_t)nspans);
    if (out == NULL) goto fail;
    for (size_t k = 0; k < nspans; k++) {
        Py_ssize_t start = spans[k].start, end = spans[k].end;
        uint64_t h = spans[k].h;
        size_t len = (size_t)(end - start);
        MemoSlot *slot = NULL;
        if (bytes != NULL && len <= MEMO_KEY) {
            slot = memo_slot(bytes + start, len, h);
            if (slot->tag) {
                Py_INCREF(slot->term);
                PyList_SET_ITEM(out, (Py_ssize_t)k, slot->term);
                continue;
            }
        }
        PyObject *word = PyUnicode_Substring(text, start, end);
        if (word == NULL) goto fail;
        PyObject *term = PyDict_GetItemWithError(cache, word); /* borrowed */
        if (term == NULL && PyErr_Occurred()) {
            Py_DECREF(word);
            goto fail;
        }
        if (term == NULL) {
            PyObject *at = PyLong_FromSize_t(k);
            if (missing == NULL) missing = PyList_New(0);
            if (at == NULL || missing == NULL || PyList_Append(missing, at) < 0) {
                Py_XDECREF(at);
                Py_DECREF(word);
                goto fail;
            }
            Py_DECREF(at);
            term = word;
        } else if (slot != NULL) {
            memo_put(slot, bytes + start, len, h, word, term);
        }
        Py_INCREF(term);
        PyList_SET_ITEM(out, (Py_ssize_t)k, term);
        Py_DECREF(word);
    }
    if (spans != local) PyMem_Free(spans);
    Py_DECREF(text);
    *missing_out = missing;
    return out;
fail:
    if (spans != local) PyMem_Free(spans);
    Py_DECREF(text);
    Py_XDECREF(out); /* unset items are NULL: list_dealloc skips them */
    Py_XDECREF(missing);
    return NULL;
}

static PyObject *terms(PyObject *self, PyObject *args) {
    PyObject *text, *cache, *missing = NULL;
    if (!PyArg_ParseTuple(args, "UO!:terms", &text, &PyDict_Type, &cache)) return NULL;
    if (memo_bind(cache) < 0) return NULL;
    PyObject *out = text_terms(text, cache, &missing);
    if (out == NULL) return NULL;
    PyObject *result = Py_BuildValue("(NO)", out, missing ? missing : Py_None);
    Py_XDECREF(missing);
    return result;
}

PyDoc_STRVAR(fields_terms_doc,
             "fields_terms(docs, cache, stem=None) -> (terms, unknown)\n\n"
             "terms() of every text of every document (`docs`: a list of tuples of\n"
             "str), in one call: terms[d][f] is document d's field f. `unknown` lists\n"
             "(terms[d][f], missing) for each field that has words the cache lacks.\n"
             "With `stem`, those words are first handed to stem(words), as one set,\n"
             "which must put each in the cache; they are then looked up and put in\n"
             "place, and `unknown` is empty (okf_markdown._fields_terms, pure path).");

/* The words of `unknown` (as a set) to stem(words), then each one replaced
 * by cache[word] in its list: 0, or -1 with an exception. */
static int stem_unknown(PyObject *unknown, PyObject *cache, PyObject *stem) {
    Py_ssize_t n = PyList_GET_SIZE(unknown);
    PyObject *words = PySet_New(NULL);
    if (words == NULL) return -1;
    for (Py_ssize_t u = 0; u < n; u++) {
        PyObject *found = PyTuple_GET_ITEM(PyList_GET_ITEM(unknown, u), 0);
        PyObject *missing = PyTuple_GET_ITEM(PyList_GET_ITEM(unknown, u), 1);
        for (Py_ssize_t m = 0; m < PyList_GET_SIZE(missing); m++) {
            Py_ssize_t at = PyLong_AsSsize_t(PyList_GET_ITEM(missing, m));
            if (PySet_Add(words, PyList_GET_ITEM(found, at)) < 0) {
                Py_DECREF(words);
                return -1;
            }
        }
    }
    PyObject *done = PyObject_CallOneArg(stem, words);
    Py_DECREF(words);
    if (done == NULL) return -1;
    Py_DECREF(done);
    for (Py_ssize_t u = 0; u < n; u++) {
        PyObject *found = PyTuple_GET_ITEM(PyList_GET_ITEM(unknown, u), 0);
        PyObject *missing = PyTuple_GET_ITEM(PyList_GET_ITEM(unknown, u), 1);
        for (Py_ssize_t m = 0; m < PyList_GET_SIZE(missing); m++) {
            Py_ssize_t at = PyLong_AsSsize_t(PyList_GET_ITEM(missing, m));
            PyObject *word = PyList_GET_ITEM(found, at);
            PyObject *term = PyDict_GetItemWithError(cache, word); /* borrowed */
            if (term == NULL) {
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, word);
                return -1;
            }
            Py_INCREF(term);
            PyList_SetItem(found, at, term); /* drops the word */
        }
    }
    return 0;
}

static PyObject *fields_terms(PyObject *self, PyObject *args) {
    PyObject *docs, *cache, *stem = Py_None;
    if (!PyArg_ParseTuple(args, "O!O!|O:fields_terms", &PyList_Type, &docs, &PyDict_Type, &cache,
                          &stem))
        return NULL;
    if (memo_bind(cache) < 0) return NULL;
    Py_ssize_t ndocs = PyList_GET_SIZE(docs);
    PyObject *out = PyList_New(ndocs), *unknown = PyList_New(0);
    if (out == NULL || unknown == NULL) goto fail;
    for (Py_ssize_t d = 0; d < ndocs; d++) {
        PyObject *texts = PyList_GET_ITEM(docs, d);
        if (!PyTuple_Check(texts)) {
            PyErr_SetString(PyExc_TypeError, "fields_terms: each document is a tuple of str");
            goto fail;
        }
        Py_ssize_t nf = PyTuple_GET_SIZE(texts);
        PyObject *fields = PyList_New(nf);
        if (fields == NULL) goto fail;
        PyList_SET_ITEM(out, d, fields);
        for (Py_ssize_t f = 0; f < nf; f++) {
            PyObject *text = PyTuple_GET_ITEM(texts, f), *missing = NULL;
            if (!PyUnicode_Check(text)) {
                PyErr_SetString(PyExc_TypeError, "fields_terms: each field is a str");
                goto fail;
            }
            PyObject *found = text_terms(text, cache, &missing);
            if (found == NULL) goto fail;
            PyList_SET_ITEM(fields, f, found);
            if (missing != NULL) {
                PyObject *pair = PyTuple_Pack(2, found, missing);
                Py_DECREF(missing);
                if (pair == NULL || PyList_Append(unknown, pair) < 0) {
                    Py_XDECREF(pair);
                    goto fail;
                }
                Py_DECREF(pair);
            }
        }
    }
    if (stem != Py_None && PyList_GET_SIZE(unknown) > 0) {
        if (stem_unknown(unknown, cache, stem) < 0) goto fail;
        Py_SETREF(unknown, PyList_New(0));
        if (unknown == NULL) goto fail;
    }
    return Py_BuildValue("(NN)", out, unknown);
fail:
    Py_XDECREF(out); /* unset items are NULL: list_dealloc skips them */
    Py_XDECREF(unknown);
    return NULL;
}

/* -- assemble --------------------------------------------------------------- */

/* A count per distinct str key, in first-insertion order: the dict a run of
 * `tfw[k] = tfw.get(k, 0) + n` (and `tfw[k] = 1`) statements builds, with one
 * probe per token and one dict insert per distinct key instead of a get, an
 * int and a set per token. Keys are exact str, so hashing and comparing them
 * runs no Python code. */
/* An entry is the inverter's CtCount (ctindex/store/invert_api.h), so the
 * counts can be handed to it as they are; here its term is a strong
 * reference. */
typedef CtCount TallyEntry;

typedef struct {
    TallyEntry *entries;
    Py_ssize_t used, cap; /* cap: entries allocated, half the slots */
    Py_ssize_t *slots;    /* entry index + 1; 0 = empty */
    size_t mask;
} Tally;

static int tally_init(Tally *t, Py_ssize_t expected) {
    size_t nslots = 16;
    while (nslots < (size_t)expected * 2) nslots <<= 1;
    t->entries = PyMem_Malloc(sizeof(TallyEntry) * (nslots / 2));
    t->slots = PyMem_Calloc(nslots, sizeof(Py_ssize_t));
    t->used = 0;
    t->cap = (Py_ssize_t)(nslots / 2);
    t->mask = nslots - 1;
    if (t->entries == NULL || t->slots == NULL) {
        PyMem_Free(t->entries);
        PyMem_Free(t->slots);
        t->entries = NULL;
        t->slots = NULL;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void tally_free(Tally *t) {
    for (Py_ssize_t i = 0; i < t->used; i++) Py_DECREF(t->entries[i].term);
    PyMem_Free(t->entries);
    PyMem_Free(t->slots);
}

static int tally_grow(Tally *t) {
    size_t nslots = (t->mask + 1) * 2;
    TallyEntry *entries = PyMem_Realloc(t->entries, sizeof(TallyEntry) * (nslots / 2));
    if (entries == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->entries = entries;
    Py_ssize_t *slots = PyMem_Calloc(nslots, sizeof(Py_ssize_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = nslots - 1;
    t->cap = (Py_ssize_t)(nslots / 2);
    for (Py_ssize_t i = 0; i < t->used; i++) {
        size_t j = (size_t)t->entries[i].hash & t->mask;
        while (t->slots[j]) j = (j + 1) & t->mask;
        t->slots[j] = i + 1;
    }
    return 0;
}

static int str_eq(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return n == PyUnicode_GET_LENGTH(b) && kind == PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)n * (size_t)kind) == 0;
}

/* count[key] += by, or (set) count[key] = by; `key` is borrowed (a
 * reference is taken if it is new). */
static int tally_put(Tally *t, PyObject *key, long by, int set) {
    Py_hash_t h = PyObject_Hash(key);
    if (h == -1) return -1;
    size_t i = (size_t)h & t->mask;
    for (;;) {
        Py_ssize_t at = t->slots[i];
        if (at == 0) break;
        TallyEntry *e = &t->entries[at - 1];
        if (e->hash == h && str_eq(e->term, key)) {
            e->count = set ? by : e->count + by;
            return 0;
        }
        i = (i + 1) & t->mask;
    }
    if (t->used >= t->cap) {
        if (tally_grow(t) < 0) return -1;
        i = (size_t)h & t->mask;
        while (t->slots[i]) i = (i + 1) & t->mask;
    }
    Py_INCREF(key);
    t->entries[t->used] = (TallyEntry){key, h, by};
    t->slots[i] = ++t->used;
    return 0;
}

/* tally_put of head + tail (a new str, released here). */
static int tally_put2(Tally *t, PyObject *head, PyObject *tail, long by, int set) {
    PyObject *key = PyUnicode_Concat(head, tail);
    if (key == NULL) return -1;
    int bad = tally_put(t, key, by, set);
    Py_DECREF(key);
    return bad;
}

/* facet(value): " ".join(fold(value).split()).casefold() (new reference). */
static PyObject *facet_of(PyObject *value, PyObject *space) {
    PyObject *folded_value = fold_of(value);
    if (folded_value == NULL) return NULL;
    PyObject *parts = PyUnicode_Split(folded_value, NULL, -1);
    Py_DECREF(folded_value);
    if (parts == NULL) return NULL;
    PyObject *joined = PyUnicode_Join(space, parts);
    Py_DECREF(parts);
    if (joined == NULL) return NULL;
    PyObject *folded = PyObject_CallMethod(joined, "casefold", NULL);
    Py_DECREF(joined);
    return folded;
}

/* tfw[head + part.casefold()] = 1 for each word `part` of `text`. */
static int put_words(Tally *t, PyObject *head, PyObject *text) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t i = 0;
    while (i < n) {
        if (!is_alnum(PyUnicode_READ(kind, data, i))) {
            i++;
            continue;
        }
        Py_ssize_t start = i++;
        while (i < n && is_alnum(PyUnicode_READ(kind, data, i))) i++;
        PyObject *part = PyUnicode_Substring(text, start, i);
        if (part == NULL) return -1;
        PyObject *folded = PyObject_CallMethod(part, "casefold", NULL);
        Py_DECREF(part);
        if (folded == NULL) return -1;
        int bad = tally_put2(t, head, folded, 1, 1);
        Py_DECREF(folded);
        if (bad) return -1;
    }
    return 0;
}

/* tfw[head + " ".join(seq)] = 1 when seq is not empty. */
static int put_joined(Tally *t, PyObject *head, PyObject *seq, PyObject *space) {
    if (PyList_GET_SIZE(seq) == 0) return 0;
    PyObject *joined = PyUnicode_Join(space, seq);
    if (joined == NULL) return -1;
    int bad = tally_put2(t, head, joined, 1, 1);
    Py_DECREF(joined);
    return bad;
}

static int check_tokens(PyObject *toks) {
    if (!PyList_Check(toks)) {
        PyErr_SetString(PyExc_TypeError, "assemble: each field is a list of str");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(toks); i++) {
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(toks, i))) {
            PyErr_SetString(PyExc_TypeError, "assemble: tokens must be str");
            return -1;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(PyList_GET_ITEM(toks, i)) < 0) return -1;
#endif
    }
    return 0;
}

/* The counts as a dict, in insertion order (new reference). */
static PyObject *tally_dict(const Tally *t) {
    PyObject *tfw = PyDict_New();
    if (tfw == NULL) return NULL;
    for (Py_ssize_t i = 0; i < t->used; i++) {
        PyObject *v = PyLong_FromLong(t->entries[i].count);
        int bad = v == NULL || PyDict_SetItem(tfw, t->entries[i].term, v) < 0;
        Py_XDECREF(v);
        if (bad) {
            Py_DECREF(tfw);
            return NULL;
        }
    }
    return tfw;
}

/* The layout argument, unpacked (okf_markdown._LAYOUT). */
typedef struct {
    long weight[3];
    PyObject *head[4], *sep, *f_type, *f_type_word, *f_tag, *exact[4];
} Layout;

static PyObject *layout_seen; /* the layout last unpacked (strong), mostly the only one */
static Layout layout_cache;

/* `layout` unpacked; NULL on error. The strs stay borrowed from the tuple,
 * which the cache keeps alive. */
static const Layout *layout_of(PyObject *layout) {
    if (layout == layout_seen) return &layout_cache;
    Layout l;
    if (!PyArg_ParseTuple(layout, "(lll)(UUUU)U(UUU)(UUUU):assemble layout", &l.weight[0],
                          &l.weight[1], &l.weight[2], &l.head[0], &l.head[1], &l.head[2],
                          &l.head[3], &l.sep, &l.f_type, &l.f_type_word, &l.f_tag, &l.exact[0],
                          &l.exact[1], &l.exact[2], &l.exact[3]))
        return NULL;
    Py_INCREF(layout);
    Py_XSETREF(layout_seen, layout);
    layout_cache = l;
    return &layout_cache;
}

/* One document assembled: its counts, its token stream (borrowed strs, in
 * a buffer of its own), its weighted length and per-field lengths. */
typedef struct {
    Tally tally;
    PyObject **tokens;
    size_t ntokens;
    long length, flens[4];
} Assembly;

static void assembly_free(Assembly *a) {
    tally_free(&a->tally);
    PyMem_Free(a->tokens);
}

/* _assemble's counts and token stream; 0, or -1 with nothing left to free. */
static int assemble_core(PyObject *fields, PyObject *doc_type, PyObject *tags, const Layout *l,
                         Assembly *out) {
    Py_ssize_t nf = PyList_GET_SIZE(fields), ntags = PyTuple_GET_SIZE(tags);
    if (nf != ntags + 5) {
        PyErr_SetString(PyExc_ValueError,
                        "assemble: body, title, each tag, description, ID, last segment");
        return -1;
    }
    for (Py_ssize_t j = 0; j < nf; j++)
        if (check_tokens(PyList_GET_ITEM(fields, j)) < 0) return -1;
    for (Py_ssize_t j = 0; j < ntags; j++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(tags, j))) {
            PyErr_SetString(PyExc_TypeError, "assemble: tags are str");
            return -1;
        }
    }
    PyObject *body = PyList_GET_ITEM(fields, 0);
    PyObject *title = PyList_GET_ITEM(fields, 1);
    PyObject *ids = PyList_GET_ITEM(fields, nf - 2);
    PyObject *last = PyList_GET_ITEM(fields, nf - 1);
    Py_ssize_t nbody = PyList_GET_SIZE(body), nfield_tok = 0;
    for (Py_ssize_t j = 1; j < nf - 2; j++) nfield_tok += PyList_GET_SIZE(PyList_GET_ITEM(fields, j));

    /* The token stream: title, each tag, description, each followed by sep;
     * then the body. */
    size_t ntokens = (size_t)(nbody + nfield_tok + (nf - 3));
    PyObject **tokens = PyMem_Malloc((ntokens ? ntokens : 1) * sizeof(PyObject *));
    if (tokens == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t at = 0;
    for (Py_ssize_t j = 1; j < nf - 2; j++) {
        PyObject *toks = PyList_GET_ITEM(fields, j);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(toks); i++) tokens[at++] = PyList_GET_ITEM(toks, i);
        tokens[at++] = l->sep;
    }
    for (Py_ssize_t i = 0; i < nbody; i++) tokens[at++] = PyList_GET_ITEM(body, i);

    Tally *tally = &out->tally;
    if (tally_init(tally, nbody + 2 * nfield_tok + ntags + 16) < 0) {
        PyMem_Free(tokens);
        return -1;
    }
    PyObject *space = NULL, *kind = NULL, *set = NULL, *sorted = NULL;
    long length = (long)nbody, flens[3] = {0, 0, 0};
    for (Py_ssize_t i = 0; i < nbody; i++)
        if (tally_put(tally, PyList_GET_ITEM(body, i), 1, 0) < 0) goto fail;
    for (Py_ssize_t j = 1; j < nf - 2; j++) {
        PyObject *toks = PyList_GET_ITEM(fields, j);
        int s = j == 1 ? 0 : (j == nf - 3 ? 2 : 1); /* title, tags, description */
        length += l->weight[s] * (long)PyList_GET_SIZE(toks);
        flens[s] += (long)PyList_GET_SIZE(toks);
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(toks); i++) {
            PyObject *t = PyList_GET_ITEM(toks, i);
            if (tally_put(tally, t, l->weight[s], 0) < 0 ||
                tally_put2(tally, l->head[s], t, 1, 0) < 0)
                goto fail;
        }
    }
    space = PyUnicode_FromString(" ");
    if (space == NULL) goto fail;
    if (PyUnicode_GET_LENGTH(doc_type) > 0) {
        kind = facet_of(doc_type, space);
        if (kind == NULL || tally_put2(tally, l->f_type, kind, 1, 1) < 0) goto fail;
        /* the words of each whitespace-separated part are the words of the
         * whole: whitespace is never alphanumeric */
        if (put_words(tally, l->f_type_word, kind) < 0) goto fail;
    }
    for (Py_ssize_t j = 0; j < ntags; j++) {
        PyObject *f = facet_of(PyTuple_GET_ITEM(tags, j), space);
        int bad = f == NULL || tally_put2(tally, l->f_tag, f, 1, 1) < 0;
        Py_XDECREF(f);
        if (bad) goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ids); i++)
        if (tally_put2(tally, l->head[3], PyList_GET_ITEM(ids, i), 1, 0) < 0) goto fail;
    set = PySet_New(title);
    sorted = set == NULL ? NULL : PySequence_List(set);
    if (sorted == NULL || PyList_Sort(sorted) < 0) goto fail;
    if (put_joined(tally, l->exact[0], title, space) < 0 ||
        put_joined(tally, l->exact[1], ids, space) < 0 ||
        put_joined(tally, l->exact[2], last, space) < 0 ||
        put_joined(tally, l->exact[3], sorted, space) < 0)
        goto fail;
    Py_DECREF(space);
    Py_XDECREF(kind);
    Py_DECREF(set);
    Py_DECREF(sorted);
    out->tokens = tokens;
    out->ntokens = ntokens;
    out->length = length;
    out->flens[0] = flens[0];
    out->flens[1] = flens[1];
    out->flens[2] = flens[2];
    out->flens[3] = (long)PyList_GET_SIZE(ids);
    return 0;
fail:
    tally_free(tally);
    PyMem_Free(tokens);
    Py_XDECREF(space);
    Py_XDECREF(kind);
    Py_XDECREF(set);
    Py_XDECREF(sorted);
    return -1;
}

/* The token stream as a list (new reference). */
static PyObject *tokens_list(const Assembly *a) {
    PyObject *list = PyList_New((Py_ssize_t)a->ntokens);
    if (list == NULL) return NULL;
    for (size_t i = 0; i < a->ntokens; i++) {
        Py_INCREF(a->tokens[i]);
        PyList_SET_ITEM(list, (Py_ssize_t)i, a->tokens[i]);
    }
    return list;
}

PyDoc_STRVAR(assemble_doc,
             "assemble(fields, doc_type, tags, layout) -> (tokens, tfw, length, flens)\n\n"
             "okf_markdown._assemble: `fields` holds the terms of the body, the title,\n"
             "each tag, the description, the concept ID and its last segment.");

static PyObject *assemble(PyObject *self, PyObject *args) {
    PyObject *fields, *doc_type, *tags, *layout;
    if (!PyArg_ParseTuple(args, "O!UO!O!:assemble", &PyList_Type, &fields, &doc_type,
                          &PyTuple_Type, &tags, &PyTuple_Type, &layout))
        return NULL;
    const Layout *l = layout_of(layout);
    Assembly a;
    if (l == NULL || assemble_core(fields, doc_type, tags, l, &a) < 0) return NULL;
    PyObject *tokens = tokens_list(&a);
    PyObject *tfw = tokens == NULL ? NULL : tally_dict(&a.tally);
    assembly_free(&a);
    if (tfw == NULL) {
        Py_XDECREF(tokens);
        return NULL;
    }
    return Py_BuildValue("(NNl(llll))", tokens, tfw, a.length, a.flens[0], a.flens[1],
                         a.flens[2], a.flens[3]);
}

/* The segment builder's Inverter C entry point (invert_api.h), or NULL when
 * that extension is not there (then `.add` is called). Looked up once. */
static const CtInvertApi *invert_api;
static int invert_api_looked;

static const CtInvertApi *inverter_api(void) {
    if (!invert_api_looked) {
        invert_api_looked = 1;
        const CtInvertApi *api = PyCapsule_Import(CT_INVERT_CAPSULE, 0);
        if (api == NULL)
            PyErr_Clear(); /* not built: the Python method serves */
        else if (api->version == CT_INVERT_API_VERSION)
            invert_api = api;
    }
    return invert_api;
}

PyDoc_STRVAR(assemble_into_doc,
             "assemble_into(fields, doc_type, tags, layout, inverter) -> (length, flens)\n\n"
             "okf_markdown._assemble_into: inverter.add(tfw, tokens) of what assemble()\n"
             "returns, without building the dict and the list when the inverter is\n"
             "ctindex/store/_invert.c's (its C entry point, invert_api.h).");

static PyObject *assemble_into(PyObject *self, PyObject *args) {
    PyObject *inverter, *fields, *doc_type, *tags, *layout;
    if (!PyArg_ParseTuple(args, "O!UO!O!O:assemble_into", &PyList_Type, &fields, &doc_type,
                          &PyTuple_Type, &tags, &PyTuple_Type, &layout, &inverter))
        return NULL;
    const Layout *l = layout_of(layout);
    Assembly a;
    if (l == NULL || assemble_core(fields, doc_type, tags, l, &a) < 0) return NULL;
    const CtInvertApi *api = inverter_api();
    int bad;
    if (api != NULL && Py_TYPE(inverter) == api->type) {
        bad = api->add(inverter, a.tally.entries, (size_t)a.tally.used, a.tokens, a.ntokens);
    } else {
        PyObject *tokens = tokens_list(&a);
        PyObject *tfw = tokens == NULL ? NULL : tally_dict(&a.tally);
        PyObject *got = tfw == NULL ? NULL : PyObject_CallMethod(inverter, "add", "OO", tfw, tokens);
        bad = got == NULL;
        Py_XDECREF(got);
        Py_XDECREF(tfw);
        Py_XDECREF(tokens);
    }
    assembly_free(&a);
    if (bad) return NULL;
    return Py_BuildValue("(l(llll))", a.length, a.flens[0], a.flens[1], a.flens[2], a.flens[3]);
}

/* -- frontmatter ------------------------------------------------------------
 * ctindex/providers/frontmatter.py read_without_yaml, its specification:
 * block YAML of the usual shape (block mappings and sequences by
 * indentation, folded plain scalars, one-line quoted scalars, `[a, b]`
 * lists and `{k: v}` mappings; comments skipped) read without libyaml,
 * else None. The same functions, the same checks, in the same order; it
 * reads the block's UTF-8 bytes, since every character it looks at is
 * ASCII, and builds only the values it returns: the rest of the block is
 * checked, not converted
 * (tests/ctindex/providers/test_okf_markdown_native.py). A function's NULL
 * with no exception set is the pure reader's _Decline: ask YAML. */

#define FM_MAX_DEPTH 24 /* frontmatter._MAX_DEPTH */
#define FM_MAX_KEY 64   /* _KEY: a letter and at most 63 more */

typedef struct {
    Py_ssize_t text, end; /* the line without its indent and trailing spaces */
    Py_ssize_t indent;
} FmLine;

typedef struct {
    const char *s;
    FmLine *lines;
    Py_ssize_t n, at;
    PyObject *not_scalar;
} FmReader;

static PyObject *fm_decline(void) { return NULL; /* no exception set: ask YAML */ }

/* _UNSAFE over valid UTF-8: a C0 control but "\n", DEL, U+0080-U+009F,
 * U+2028, U+2029, U+FEFF, U+FFFE, U+FFFF. */
static int fm_unsafe(const unsigned char *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c < 0x80) {
            if ((c < 0x20 && c != '\n') || c == 0x7f) return 1;
        } else if (c == 0xc2) {
            if (i + 1 < n && s[i + 1] < 0xa0) return 1;
        } else if (c == 0xe2) {
            if (i + 2 < n && s[i + 1] == 0x80 && (s[i + 2] == 0xa8 || s[i + 2] == 0xa9)) return 1;
        } else if (c == 0xef) {
            if (i + 2 < n && s[i + 1] == 0xbb && s[i + 2] == 0xbf) return 1;
            if (i + 2 < n && s[i + 1] == 0xbf && (s[i + 2] == 0xbe || s[i + 2] == 0xbf)) return 1;
        }
    }
    return 0;
}

/* _KEY.match(text): the key's length, the rest's start in *rest; else -1. */
static Py_ssize_t fm_key(const char *s, Py_ssize_t a, Py_ssize_t b, Py_ssize_t *rest) {
    char c = a < b ? s[a] : 0;
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) return -1;
    Py_ssize_t i = a + 1;
    while (i < b && i - a < FM_MAX_KEY) {
        c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            break;
        i++;
    }
    if (i >= b || s[i] != ':') return -1;
    Py_ssize_t key = i - a;
    i++;
    if (i < b && s[i] != ' ') return -1;
    while (i < b && s[i] == ' ') i++;
    *rest = i;
    return key;
}

static int fm_indicator(char c) { return c && strchr("-?:,[]{}#&*!|>'\"%@`", c) != NULL; }

/* _check_plain: 0, or 1 to decline. */
static int fm_bad_plain(const char *s, Py_ssize_t a, Py_ssize_t b) {
    if (fm_indicator(s[a]) || s[b - 1] == ':') return 1;
    for (Py_ssize_t i = a; i + 1 < b; i++)
        if ((s[i] == ':' && s[i + 1] == ' ') || (s[i] == ' ' && s[i + 1] == '#')) return 1;
    return 0;
}

static int fm_is_null(const char *s, Py_ssize_t n) {
    return (n == 1 && s[0] == '~') ||
           (n == 4 && (memcmp(s, "null", 4) == 0 || memcmp(s, "Null", 4) == 0 ||
                       memcmp(s, "NULL", 4) == 0));
}

static int fm_dash(const char *s, const FmLine *l) {
    return s[l->text] == '-' && (l->end - l->text == 1 || s[l->text + 1] == ' ');
}

/* peek(): the next line that is not empty, or NULL. */
static FmLine *fm_peek(FmReader *r) {
    while (r->at < r->n) {
        FmLine *l = &r->lines[r->at];
        if (l->end > l->text && r->s[l->text] != '#') return l; /* not empty, not a comment */
        r->at++;
    }
    return NULL;
}

/* _uncommented: the end of [a, b) before a " #" comment, its spaces
 * dropped, with *cut set when there was one; else b. */
static Py_ssize_t fm_uncommented(const char *s, Py_ssize_t a, Py_ssize_t b, int *cut) {
    for (Py_ssize_t i = a; i + 1 < b; i++)
        if (s[i] == ' ' && s[i + 1] == '#') {
            while (i > a && s[i - 1] == ' ') i--;
            *cut = 1;
            return i;
        }
    *cut = 0;
    return b;
}

/* _ends: [j, b) is nothing, or spaces and a comment. */
static int fm_ends(const char *s, Py_ssize_t j, Py_ssize_t b) {
    if (j == b) return 1;
    if (s[j] != ' ') return 0;
    while (j < b && s[j] == ' ') j++;
    return j < b && s[j] == '#';
}

static PyObject *fm_mapping(FmReader *r, Py_ssize_t col, int depth, PyObject *meta);
static PyObject *fm_sequence(FmReader *r, Py_ssize_t col, int depth, int keep);
static PyObject *fm_block_value(FmReader *r, Py_ssize_t col, int depth, int indentless, int keep);
static PyObject *fm_inline(FmReader *r, Py_ssize_t a, Py_ssize_t b, Py_ssize_t parent, int keep);

static PyObject *fm_str(const char *s, Py_ssize_t n) { return PyUnicode_DecodeUTF8(s, n, NULL); }

/* A quoted scalar or a flow list, the whole rest of its line. */
static PyObject *fm_single(FmReader *r, Py_ssize_t a, Py_ssize_t b, int keep) {
    const char *s = r->s;
    Py_ssize_t i = a + 1, quotes = 0;
    for (;;) {
        const char *q = memchr(s + i, '\'', (size_t)(b - i));
        if (q == NULL) return fm_decline();
        Py_ssize_t close = q - s;
        if (close + 1 < b && s[close + 1] == '\'') {
            i = close + 2;
            quotes++;
            continue;
        }
        if (!fm_ends(s, close + 1, b)) return fm_decline();
        if (!keep) Py_RETURN_NONE;
        if (quotes == 0) return fm_str(s + a + 1, close - a - 1);
        char *buf = PyMem_Malloc((size_t)(close - a));
        if (buf == NULL) return PyErr_NoMemory();
        Py_ssize_t m = 0;
        for (Py_ssize_t j = a + 1; j < close; j++) {
            buf[m++] = s[j];
            if (s[j] == '\'') j++;
        }
        PyObject *v = fm_str(buf, m);
        PyMem_Free(buf);
        return v;
    }
}

static PyObject *fm_double(FmReader *r, Py_ssize_t a, Py_ssize_t b, int keep) {
    const char *s = r->s;
    const char *q = memchr(s + a + 1, '"', (size_t)(b - a - 1));
    if (q == NULL || memchr(s + a + 1, '\\', (size_t)(q - s - a - 1)) != NULL ||
        !fm_ends(s, q - s + 1, b))
        return fm_decline();
    if (!keep) Py_RETURN_NONE;
    return fm_str(s + a + 1, q - s - a - 1);
}

/* _check_flow: 0, or 1 to decline. */
static int fm_bad_flow(const char *s, Py_ssize_t x, Py_ssize_t y) {
    if (x == y || fm_indicator(s[x])) return 1;
    for (Py_ssize_t j = x; j < y; j++) {
        char c = s[j], d = j + 1 < y ? s[j + 1] : 0;
        if (c == '[' || c == ']' || c == '{' || c == '}' || c == '#') return 1;
        if (c == ':' && !((d >= 'A' && d <= 'Z') || (d >= 'a' && d <= 'z') ||
                          (d >= '0' && d <= '9') || d == '/'))
            return 1;
    }
    return 0;
}

/* _flow_parts of a one-line flow collection [a, b) whose last character
 * must be `close`: its inside in [*lo, *hi); 1 when it has parts, 0 when it
 * holds only spaces, -1 when the line does not end with `close`. */
static int fm_flow_inner(const char *s, Py_ssize_t a, Py_ssize_t b, char close, Py_ssize_t *lo,
                         Py_ssize_t *hi) {
    if (s[b - 1] != close) return -1;
    *lo = a + 1;
    *hi = b - 1;
    for (Py_ssize_t i = *lo; i < *hi; i++)
        if (s[i] != ' ') return 1;
    return 0;
}

/* The next part from *p up to hi (inner.split(","), stripped) in [*x, *y);
 * 0 past the last one. */
static int fm_flow_part(const char *s, Py_ssize_t *p, Py_ssize_t hi, Py_ssize_t *x,
                        Py_ssize_t *y) {
    if (*p > hi) return 0;
    Py_ssize_t q = *p;
    while (q < hi && s[q] != ',') q++;
    *x = *p;
    *y = q;
    while (*x < *y && s[*x] == ' ') (*x)++;
    while (*y > *x && s[*y - 1] == ' ') (*y)--;
    *p = q + 1;
    return 1;
}

static PyObject *fm_flow(FmReader *r, Py_ssize_t a, Py_ssize_t b, int keep) {
    const char *s = r->s;
    Py_ssize_t lo, hi, x, y;
    int has = fm_flow_inner(s, a, b, ']', &lo, &hi);
    if (has < 0) return fm_decline();
    PyObject *list = keep ? PyList_New(0) : NULL;
    if (keep && list == NULL) return NULL;
    for (Py_ssize_t p = lo; has && fm_flow_part(s, &p, hi, &x, &y);) {
        if (fm_bad_flow(s, x, y)) {
            Py_XDECREF(list);
            return fm_decline();
        }
        if (keep) {
            PyObject *item = fm_is_null(s + x, y - x) ? (Py_INCREF(Py_None), Py_None)
                                                      : fm_str(s + x, y - x);
            if (item == NULL || PyList_Append(list, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(list);
                return NULL;
            }
            Py_DECREF(item);
        }
    }
    if (keep) return list;
    Py_RETURN_NONE;
}

/* _flow_mapping: `{k: v, ...}` on one line, checked, never kept. */
static PyObject *fm_flow_map(FmReader *r, Py_ssize_t a, Py_ssize_t b) {
    const char *s = r->s;
    Py_ssize_t lo, hi, x, y, rest;
    int has = fm_flow_inner(s, a, b, '}', &lo, &hi);
    if (has < 0) return fm_decline();
    for (Py_ssize_t p = lo; has && fm_flow_part(s, &p, hi, &x, &y);)
        if (fm_key(s, x, y, &rest) < 0 || fm_bad_flow(s, rest, y)) return fm_decline();
    Py_INCREF(r->not_scalar);
    return r->not_scalar;
}

/* inline(): text [a, b) of a line already consumed; a plain scalar goes on
 * over the lines indented past `parent`, folded. */
static PyObject *fm_inline(FmReader *r, Py_ssize_t a, Py_ssize_t b, Py_ssize_t parent, int keep) {
    const char *s = r->s;
    if (s[a] == '\'') return fm_single(r, a, b, keep);
    if (s[a] == '"') return fm_double(r, a, b, keep);
    int cut; /* a comment ends the scalar */
    if (s[a] == '[') return fm_flow(r, a, fm_uncommented(s, a, b, &cut), keep);
    if (s[a] == '{') return fm_flow_map(r, a, fm_uncommented(s, a, b, &cut));
    b = fm_uncommented(s, a, b, &cut);
    if (fm_bad_plain(s, a, b)) return fm_decline();
    /* First pass: check the continuation lines (each one's comment cut off
     * in place: it is consumed) and size the value. */
    Py_ssize_t size = b - a, breaks = 0, at = r->at, last = r->at;
    for (; !cut && at < r->n; at++) {
        FmLine *l = &r->lines[at];
        if (l->end == l->text) {
            breaks++;
        } else if (s[l->text] == '#') {
            break; /* a comment line ends it too (fm_peek skips the line) */
        } else if (l->indent > parent) {
            l->end = fm_uncommented(s, l->text, l->end, &cut);
            if (fm_bad_plain(s, l->text, l->end)) return fm_decline();
            size += (breaks ? breaks : 1) + l->end - l->text;
            breaks = 0;
            last = at + 1;
        } else {
            break;
        }
    }
    if (last == r->at) { /* one line */
        r->at = last;
        if (!keep) Py_RETURN_NONE;
        if (fm_is_null(s + a, b - a)) Py_RETURN_NONE;
        return fm_str(s + a, b - a);
    }
    Py_ssize_t from = r->at;
    r->at = last;
    if (!keep) Py_RETURN_NONE;
    char *buf = PyMem_Malloc((size_t)size);
    if (buf == NULL) return PyErr_NoMemory();
    memcpy(buf, s + a, (size_t)(b - a));
    Py_ssize_t m = b - a;
    breaks = 0;
    for (Py_ssize_t j = from; j < last; j++) {
        const FmLine *l = &r->lines[j];
        if (l->end == l->text) {
            breaks++;
            continue;
        }
        if (breaks) {
            memset(buf + m, '\n', (size_t)breaks);
            m += breaks;
        } else {
            buf[m++] = ' ';
        }
        memcpy(buf + m, s + l->text, (size_t)(l->end - l->text));
        m += l->end - l->text;
        breaks = 0;
    }
    PyObject *v = fm_is_null(buf, m) ? (Py_INCREF(Py_None), Py_None) : fm_str(buf, m);
    PyMem_Free(buf);
    return v;
}

/* The wanted key of text [a, a + n), as the interned str; NULL if not wanted. */
static PyObject *k_title, *k_type, *k_description, *k_tags;

static PyObject *fm_wanted(const char *s, Py_ssize_t n) {
    if (n == 5 && memcmp(s, "title", 5) == 0) return k_title;
    if (n == 4 && memcmp(s, "type", 4) == 0) return k_type;
    if (n == 11 && memcmp(s, "description", 11) == 0) return k_description;
    if (n == 4 && memcmp(s, "tags", 4) == 0) return k_tags;
    return NULL;
}

/* mapping(): keys at column `col`; `meta` the top-level dict to fill, or
 * NULL for a nested mapping (then only checked: not_scalar). */
static PyObject *fm_mapping(FmReader *r, Py_ssize_t col, int depth, PyObject *meta) {
    if (depth > FM_MAX_DEPTH) return fm_decline();
    const char *s = r->s;
    FmLine *l;
    while ((l = fm_peek(r)) != NULL && l->indent >= col) {
        Py_ssize_t rest = 0, key = l->indent == col ? fm_key(s, l->text, l->end, &rest) : -1;
        if (key < 0) return fm_decline();
        r->at++;
        PyObject *name = meta != NULL ? fm_wanted(s + l->text, key) : NULL;
        PyObject *value = rest < l->end && s[rest] != '#' /* `key: # note`: no value here */
                              ? fm_inline(r, rest, l->end, col, name != NULL)
                              : fm_block_value(r, col, depth, 1, name != NULL);
        if (value == NULL) return NULL;
        int bad = name != NULL && PyDict_SetItem(meta, name, value) < 0;
        Py_DECREF(value);
        if (bad) return NULL;
    }
    if (meta != NULL) {
        Py_INCREF(meta);
        return meta;
    }
    Py_INCREF(r->not_scalar);
    return r->not_scalar;
}

static PyObject *fm_sequence(FmReader *r, Py_ssize_t col, int depth, int keep) {
    if (depth > FM_MAX_DEPTH) return fm_decline();
    const char *s = r->s;
    PyObject *items = keep ? PyList_New(0) : NULL;
    if (keep && items == NULL) return NULL;
    FmLine *l;
    while ((l = fm_peek(r)) != NULL && l->indent >= col) {
        if (l->indent > col) {
            Py_XDECREF(items);
            return fm_decline();
        }
        if (!fm_dash(s, l)) break;
        r->at++;
        Py_ssize_t rest = l->text + 1, unused;
        while (rest < l->end && s[rest] == ' ') rest++;
        PyObject *item;
        if (rest == l->end || s[rest] == '#') {
            item = fm_block_value(r, col, depth, 0, keep);
        } else if (fm_key(s, rest, l->end, &unused) >= 0) {
            /* `- key: value`: a mapping whose keys sit where this one does */
            r->at--;
            l->indent = col + rest - l->text;
            l->text = rest;
            item = fm_mapping(r, l->indent, depth + 1, NULL);
        } else {
            item = fm_inline(r, rest, l->end, col, keep);
        }
        if (item == NULL) {
            Py_XDECREF(items);
            return NULL;
        }
        if (keep && PyList_CheckExact(item)) {
            Py_DECREF(item);
            Py_INCREF(r->not_scalar);
            item = r->not_scalar;
        }
        int bad = keep && PyList_Append(items, item) < 0;
        Py_DECREF(item);
        if (bad) {
            Py_DECREF(items);
            return NULL;
        }
    }
    if (keep) return items;
    Py_RETURN_NONE;
}

static PyObject *fm_block_value(FmReader *r, Py_ssize_t col, int depth, int indentless, int keep) {
    const char *s = r->s;
    FmLine *l = fm_peek(r);
    if (l == NULL || l->indent < col) Py_RETURN_NONE;
    if (l->indent == col) {
        if (indentless && fm_dash(s, l)) return fm_sequence(r, col, depth + 1, keep);
        Py_RETURN_NONE;
    }
    Py_ssize_t unused;
    if (fm_dash(s, l)) return fm_sequence(r, l->indent, depth + 1, keep);
    if (fm_key(s, l->text, l->end, &unused) >= 0) return fm_mapping(r, l->indent, depth + 1, NULL);
    r->at++;
    return fm_inline(r, l->text, l->end, col, keep);
}

/* read_without_yaml over UTF-8 `s` (valid): a new dict, Py_None (ask YAML),
 * or NULL with an exception. */
static PyObject *fm_read(const char *s, Py_ssize_t n, PyObject *not_scalar) {
    if (fm_unsafe((const unsigned char *)s, n)) Py_RETURN_NONE;
    Py_ssize_t count = 1;
    for (const char *p = s; (p = memchr(p, '\n', (size_t)(s + n - p))) != NULL; p++) count++;
    FmReader r = {s, PyMem_Malloc((size_t)count * sizeof(FmLine)), count, 0, not_scalar};
    if (r.lines == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0, pos = 0; i < count; i++) {
        const char *nl = memchr(s + pos, '\n', (size_t)(n - pos));
        Py_ssize_t eol = nl ? nl - s : n, a = pos, b = eol;
        while (a < b && s[a] == ' ') a++;
        while (b > a && s[b - 1] == ' ') b--;
        r.lines[i] = (FmLine){a, b, a - pos};
        pos = eol + 1;
    }
    PyObject *out = NULL, *meta = NULL;
    Py_ssize_t unused;
    FmLine *first = fm_peek(&r);
    if (first == NULL || first->indent != 0 || fm_key(s, first->text, first->end, &unused) < 0)
        goto done;
    if ((meta = PyDict_New()) == NULL) goto done;
    out = fm_mapping(&r, 0, 0, meta); /* keys at column 0: it reads every line */
done:
    Py_XDECREF(meta);
    PyMem_Free(r.lines);
    if (out == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}

PyDoc_STRVAR(frontmatter_doc,
             "frontmatter(block, not_scalar) -> dict | None\n\n"
             "frontmatter.read_without_yaml(block): the wanted fields of a block of\n"
             "the usual YAML shape (NOT_SCALAR given as not_scalar), None for the rest.");

static PyObject *frontmatter(PyObject *self, PyObject *args) {
    PyObject *text, *not_scalar;
    if (!PyArg_ParseTuple(args, "UO:frontmatter", &text, &not_scalar)) return NULL;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    if (s == NULL) { /* a lone surrogate: not YAML's either */
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return fm_read(s, n, not_scalar);
}

/* -- parse -------------------------------------------------------------------
 * okf_markdown.parse, its specification, for the shape concept documents
 * nearly always have: no NUL, valid UTF-8, frontmatter opened by "---\n"
 * that `fm_read` reads without YAML, a title in it, and no field of
 * the wrong kind. Anything else -- no frontmatter, CRLF, YAML, a warning
 * to give -- returns None before any work is wasted, and the pure parse
 * runs (tests/ctindex/providers/test_okf_markdown_native.py holds the two
 * equal). The frontmatter and the body are decoded apart: they are split
 * at ASCII bytes, so each is valid UTF-8 exactly when the whole is. */

#define MAX_FRONTMATTER_BYTES (64 * 1024) /* okf_markdown.MAX_FRONTMATTER_BYTES */

static PyObject *s_space, *s_comma, *s_md;

/* " ".join(value.split()) (new reference): `value` itself when it already
 * is that, which is nearly always. */
static PyObject *collapse(PyObject *value) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(value);
    int kind = PyUnicode_KIND(value);
    const void *data = PyUnicode_DATA(value);
    int prev_space = 1; /* a leading space is to go */
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        int space = Py_UNICODE_ISSPACE(c);
        if (space && (c != ' ' || prev_space || i == n - 1)) {
            PyObject *parts = PyUnicode_Split(value, NULL, -1);
            if (parts == NULL) return NULL;
            PyObject *joined = PyUnicode_Join(s_space, parts);
            Py_DECREF(parts);
            return joined;
        }
        prev_space = space;
    }
    Py_INCREF(value);
    return value;
}

/* _scalar(meta, name): "" for a missing or null field, else its collapsed
 * str; NULL with no exception for a list (the pure parse warns of it). */
static PyObject *scalar_field(PyObject *meta, PyObject *name) {
    PyObject *v = PyDict_GetItemWithError(meta, name);
    if (v == NULL && PyErr_Occurred()) return NULL;
    if (v == NULL || v == Py_None) return PyUnicode_New(0, 0);
    if (!PyUnicode_CheckExact(v)) return NULL;
    return collapse(v);
}

/* _tags(meta) as a tuple; NULL with no exception where the pure parse warns. */
static PyObject *tags_field(PyObject *meta, PyObject *not_scalar) {
    PyObject *v = PyDict_GetItemWithError(meta, k_tags);
    if (v == NULL && PyErr_Occurred()) return NULL;
    if (v == NULL || v == Py_None) return PyTuple_New(0);
    PyObject *items;
    if (PyUnicode_CheckExact(v)) {
        items = PyUnicode_Split(v, s_comma, -1);
    } else if (PyList_CheckExact(v)) {
        Py_INCREF(v);
        items = v;
    } else {
        return NULL;
    }
    PyObject *out = items == NULL ? NULL : PyList_New(0);
    for (Py_ssize_t i = 0; out != NULL && i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (item == Py_None || item == not_scalar) continue;
        if (!PyUnicode_CheckExact(item)) { /* fm_read gives str, None or not_scalar only */
            Py_CLEAR(out);
            break;
        }
        PyObject *text = collapse(item);
        int bad = text == NULL;
        if (!bad && PyUnicode_GET_LENGTH(text) > 0) {
            int has = PySequence_Contains(out, text);
            bad = has < 0 || (!has && PyList_Append(out, text) < 0);
        }
        Py_XDECREF(text);
        if (bad) {
            Py_CLEAR(out);
            if (!PyErr_Occurred()) PyErr_NoMemory();
        }
    }
    Py_XDECREF(items);
    if (out == NULL) return NULL;
    PyObject *tuple = PyList_AsTuple(out);
    Py_DECREF(out);
    return tuple;
}

/* okf_markdown.concept_id (new reference). */
static PyObject *concept_id_of(PyObject *key, PyObject *root) {
    Py_ssize_t nroot = PyUnicode_GET_LENGTH(root), nkey = PyUnicode_GET_LENGTH(key);
    Py_ssize_t start = 0;
    if (nroot > 0 && nkey > nroot && PyUnicode_READ_CHAR(key, nroot) == '/') {
        Py_ssize_t head = PyUnicode_Tailmatch(key, root, 0, nroot, -1);
        if (head < 0) return NULL;
        if (head) start = nroot + 1;
    }
    Py_ssize_t end = nkey;
    Py_ssize_t md = PyUnicode_Tailmatch(key, s_md, start, nkey, 1);
    if (md < 0) return NULL;
    if (md) end -= 3;
    return PyUnicode_Substring(key, start, end);
}

/* The first line after the opening one that is "---" or "..." and then
 * only CRs (okf_markdown._CLOSING): its start and end, or -1. */
static Py_ssize_t closing_line(const char *raw, Py_ssize_t n, Py_ssize_t from, Py_ssize_t *eol) {
    for (Py_ssize_t pos = from; pos < n;) {
        const char *nl = memchr(raw + pos, '\n', (size_t)(n - pos));
        Py_ssize_t end = nl ? (Py_ssize_t)(nl - raw) : n;
        if (end - pos >= 3 &&
            (memcmp(raw + pos, "---", 3) == 0 || memcmp(raw + pos, "...", 3) == 0)) {
            Py_ssize_t i = pos + 3;
            while (i < end && raw[i] == '\r') i++;
            if (i == end) {
                *eol = end;
                return pos;
            }
        }
        pos = end + 1;
    }
    return -1;
}

static PyObject *decoded(const char *s, Py_ssize_t n, int *invalid) {
    PyObject *text = PyUnicode_DecodeUTF8(s, n, NULL);
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        *invalid = 1;
    }
    return text;
}

PyDoc_STRVAR(parse_doc,
             "parse(key, data, scope_root, document) -> Document | None\n\n"
             "okf_markdown.parse of a file of the common shape (see above), built as\n"
             "`document` (the Document class); None: parse it the pure way.");

static PyObject *parse(PyObject *self, PyObject *args) {
    PyObject *key, *data, *root, *cls, *not_scalar;
    if (!PyArg_ParseTuple(args, "UOUO!O:parse", &key, &data, &root, &PyType_Type, &cls,
                          &not_scalar))
        return NULL;
    if (!PyBytes_CheckExact(data) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type))
        Py_RETURN_NONE;
    const char *raw = PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (memchr(raw, 0, (size_t)n) != NULL) Py_RETURN_NONE;
    if (n >= 3 && memcmp(raw, "\xef\xbb\xbf", 3) == 0) {
        raw += 3;
        n -= 3;
    }
    if (n < 4 || memcmp(raw, "---\n", 4) != 0) Py_RETURN_NONE;
    Py_ssize_t eol, end = closing_line(raw, n, 4, &eol);
    if (end < 0 || end - 4 > MAX_FRONTMATTER_BYTES) Py_RETURN_NONE;
    int invalid = 0;
    PyObject *block = decoded(raw + 4, end - 4, &invalid); /* valid UTF-8? */
    if (block == NULL) {
        if (invalid) Py_RETURN_NONE;
        return NULL;
    }
    Py_DECREF(block);
    PyObject *meta = fm_read(raw + 4, end - 4, not_scalar);
    if (meta == NULL) return NULL;
    PyObject *fields[10] = {NULL};
    PyObject *out = NULL;
    if (meta == Py_None) goto done;
    fields[3] = scalar_field(meta, k_title);
    if (fields[3] == NULL || PyUnicode_GET_LENGTH(fields[3]) == 0) goto done; /* heading, stem */
    if ((fields[4] = scalar_field(meta, k_type)) == NULL) goto done;
    if ((fields[5] = scalar_field(meta, k_description)) == NULL) goto done;
    if ((fields[6] = tags_field(meta, not_scalar)) == NULL) goto done;
    fields[7] = eol < n ? decoded(raw + eol + 1, n - eol - 1, &invalid) : PyUnicode_New(0, 0);
    if (fields[7] == NULL) goto done;
    if ((fields[1] = concept_id_of(key, root)) == NULL) goto done;
    if ((fields[9] = PyLong_FromSsize_t(PyBytes_GET_SIZE(data))) == NULL) goto done;
    fields[0] = key;
    fields[2] = root;
    fields[8] = Py_None;
    Py_INCREF(key);
    Py_INCREF(root);
    Py_INCREF(Py_None);
    out = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 10);
    if (out == NULL) goto done;
    for (int i = 0; i < 10; i++) {
        PyTuple_SET_ITEM(out, i, fields[i]);
        fields[i] = NULL;
    }
done:
    for (int i = 0; i < 10; i++) Py_XDECREF(fields[i]);
    Py_DECREF(meta);
    if (out == NULL && !PyErr_Occurred()) Py_RETURN_NONE;
    return out;
}

static PyMethodDef methods[] = {
    {"terms", terms, METH_VARARGS, terms_doc},
    {"fields_terms", fields_terms, METH_VARARGS, fields_terms_doc},
    {"assemble", assemble, METH_VARARGS, assemble_doc},
    {"assemble_into", assemble_into, METH_VARARGS, assemble_into_doc},
    {"frontmatter", frontmatter, METH_VARARGS, frontmatter_doc},
    {"parse", parse, METH_VARARGS, parse_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_words",
    "Native word tokenizer and field counting (ctindex/providers/okf_markdown.py).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__words(void) {
    init_ascii_alnum();
    k_title = PyUnicode_InternFromString("title");
    k_type = PyUnicode_InternFromString("type");
    k_description = PyUnicode_InternFromString("description");
    k_tags = PyUnicode_InternFromString("tags");
    s_space = PyUnicode_InternFromString(" ");
    s_comma = PyUnicode_InternFromString(",");
    s_md = PyUnicode_InternFromString(".md");
    if (!k_title || !k_type || !k_description || !k_tags || !s_space || !s_comma || !s_md)
        return NULL;
    return PyModule_Create(&module);
}
