/* The snippet window of an ASCII text in one pass: the optional C twin of
 * ctindex/search/snippet.py's ASCII path (term spans, matched words, the
 * best window, whitespace made single spaces). snippet.py's pure functions
 * are the specification; tests/ctindex/search/test_snippet_native.py
 * compares the two on generated texts, byte for byte.
 *
 * window(piece, stems, marked, prefixes, window_words, back) ->
 *     None | (core, spans, more_before, more_after)
 *
 * piece:        an ASCII str; its words are the maximal runs of ASCII letters
 *               and digits (the provider's ASCII word rule)
 * stems:        dict, raw word -> term; a word missing raises KeyError(word)
 *               (the caller fills the dict and calls again)
 * marked:       the query's terms (any container)
 * prefixes:     tuple of str; a term starting with one is matched too
 * window_words, back: the window holds the hit that starts the most distinct
 *               matched terms within `window_words` words (the earliest on a
 *               tie), from `back` words before it to `window_words` after
 *
 * None when no word is matched. Otherwise `core` is the window's text from
 * its first word's start to its last word's end with every run of
 * whitespace (str.isspace() in ASCII) made one space, `spans` the
 * [start, end) of each matched word in it, and the flags say whether words
 * of the piece lie before / after the window.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int is_word(Py_UCS1 c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Python's whitespace among ASCII: \t \n \v \f \r, the four separators 0x1C-0x1F, space. */
static int is_space(Py_UCS1 c) { return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20); }

typedef struct {
    Py_ssize_t *start, *end; /* word spans */
    Py_ssize_t *term;        /* per word: id of its matched term, or -1 */
    Py_ssize_t *hits;        /* indices of matched words */
    Py_ssize_t nwords, nhits;
    Py_ssize_t nterms; /* distinct matched terms: ids are 0..nterms-1 */
    Py_ssize_t best;   /* the window's first hit when `scan` settled it, else -1 */
} Words;

static void words_free(Words *w) {
    free(w->start);
    free(w->end);
    free(w->term);
    free(w->hits);
}

/* A memo of `stems` lookups, across calls: a word's term is the stems
 * dict's value for it, which never changes once there (a word always stems
 * alike; the provider may clear its dict when it grows, never change an
 * entry). Looking a word up in the dict makes a str of it and hashes it;
 * most words of a text are frequent ones met before, found here by their
 * bytes. Direct-mapped: a slot holds the last word whose hash led there.
 * The memo mirrors one dict, held so its identity cannot be reused, and
 * is emptied when another is passed. */
#define MEMO_SLOTS 8192 /* a power of two */
#define MEMO_WORD 24    /* longer words are not memoised */
typedef struct {
    uint64_t hash;
    Py_ssize_t len; /* 0: empty */
    char raw[MEMO_WORD];
    PyObject *term; /* strong */
} MemoSlot;
static MemoSlot memo[MEMO_SLOTS];
static PyObject *memo_of = NULL; /* the stems dict the memo mirrors (strong) */

static void memo_reset(PyObject *stems) {
    for (Py_ssize_t i = 0; i < MEMO_SLOTS; i++) {
        memo[i].len = 0;
        Py_CLEAR(memo[i].term);
    }
    Py_INCREF(stems);
    Py_XSETREF(memo_of, stems);
}

static uint64_t fnv1a(const Py_UCS1 *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* The term of the word s[0:n] (borrowed: the memo or the dict holds it);
 * NULL with KeyError(word) when the dict does not know it, or another error. */
static PyObject *term_of(const Py_UCS1 *s, Py_ssize_t n, PyObject *stems) {
    uint64_t h = fnv1a(s, n);
    MemoSlot *slot = &memo[h & (MEMO_SLOTS - 1)];
    if (slot->len == n && slot->hash == h && memcmp(slot->raw, s, n) == 0)
        return slot->term;
    PyObject *raw = PyUnicode_FromStringAndSize((const char *)s, n);
    if (raw == NULL)
        return NULL;
    PyObject *term = PyDict_GetItemWithError(stems, raw); /* borrowed */
    if (term == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, raw);
        Py_DECREF(raw);
        return NULL;
    }
    Py_DECREF(raw);
    if (n <= MEMO_WORD) {
        Py_INCREF(term);
        Py_XSETREF(slot->term, term);
        memcpy(slot->raw, s, n);
        slot->len = n;
        slot->hash = h;
    }
    return term;
}

/* 1 when `term` is matched, 0 when not, -1 on error. */
static int matched(PyObject *term, PyObject *marked, PyObject *prefixes) {
    int in = PySequence_Contains(marked, term);
    if (in != 0)
        return in;
    Py_ssize_t np = PyTuple_GET_SIZE(prefixes);
    for (Py_ssize_t i = 0; i < np; i++) {
        Py_ssize_t got =
            PyUnicode_Tailmatch(term, PyTuple_GET_ITEM(prefixes, i), 0, PY_SSIZE_T_MAX, -1);
        if (got != 0)
            return got < 0 ? -1 : 1;
    }
    return 0;
}

/* The early end of `scan` (`Settle`): best_start's sliding window, run as
 * the words are read. A hit's window is known once the word `window_words`
 * after it is read; the first hit whose window holds `most` distinct terms
 * (every term a word can match) is best_start's answer, as no later window
 * holds more and a tie goes to the earliest. Then no later word needs its
 * term: they are only counted, up to the one past the window (which says
 * whether words follow it). */
typedef struct {
    Py_ssize_t most; /* distinct terms a window can hold at most; -1: unknown */
    Py_ssize_t window_words;
    Py_ssize_t *counts; /* per term id: its hits in the window */
    Py_ssize_t behind, ahead, distinct;
} Settle;

/* After word `k` was read: settle every hit whose window is now known;
 * 1 when one holds `most` terms (w->best set), else 0. */
static int settle(Settle *st, Words *w, Py_ssize_t k) {
    while (st->behind < w->nhits && w->hits[st->behind] + st->window_words - 1 <= k) {
        Py_ssize_t h = w->hits[st->behind];
        while (st->ahead < w->nhits && w->hits[st->ahead] < h + st->window_words) {
            if (st->counts[w->term[w->hits[st->ahead]]]++ == 0)
                st->distinct++;
            st->ahead++;
        }
        if (st->distinct == st->most) {
            w->best = h;
            return 1;
        }
        if (--st->counts[w->term[h]] == 0)
            st->distinct--;
        st->behind++;
    }
    return 0;
}

/* Find the words, their terms and the matched ones; the ids number the
 * distinct matched terms (`ids`: term -> id, or -1 for a term not matched).
 * With `st->most` >= 0 the reading ends early once the window is settled.
 * 0 on success, -1 on error. */
static int scan(const Py_UCS1 *s, Py_ssize_t n, PyObject *stems, PyObject *marked,
                PyObject *prefixes, PyObject *ids, Words *w, Settle *st) {
    Py_ssize_t cap = n / 2 + 1; /* a word and a separator at least, but the last */
    w->start = malloc(cap * sizeof(Py_ssize_t));
    w->end = malloc(cap * sizeof(Py_ssize_t));
    w->term = malloc(cap * sizeof(Py_ssize_t));
    w->hits = malloc(cap * sizeof(Py_ssize_t));
    if (!w->start || !w->end || !w->term || !w->hits) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t i = 0;
    while (i < n) {
        if (!is_word(s[i])) {
            i++;
            continue;
        }
        Py_ssize_t b = i;
        while (i < n && is_word(s[i]))
            i++;
        Py_ssize_t k = w->nwords++;
        w->start[k] = b;
        w->end[k] = i;
        w->term[k] = -1;
        if (w->best >= 0) { /* settled: count up to the word past the window */
            if (k > w->best + st->window_words - 1)
                return 0;
            continue;
        }
        PyObject *term = term_of(s + b, i - b, stems); /* borrowed */
        if (term == NULL)
            return -1;
        PyObject *id = PyDict_GetItemWithError(ids, term); /* a term met before */
        if (id == NULL) {
            if (PyErr_Occurred())
                return -1;
            int m = matched(term, marked, prefixes);
            if (m < 0)
                return -1;
            id = PyLong_FromSsize_t(m ? w->nterms++ : -1);
            if (id == NULL)
                return -1;
            int bad = PyDict_SetItem(ids, term, id);
            Py_DECREF(id); /* the dict holds it */
            if (bad)
                return -1;
        }
        Py_ssize_t tid = PyLong_AsSsize_t(id);
        if (tid >= 0) {
            w->term[k] = tid;
            w->hits[w->nhits++] = k;
        }
        if (st->most >= 0 && settle(st, w, k) && k > w->best + st->window_words - 1)
            return 0; /* (this word is already past the window) */
    }
    return 0;
}

/* snippet.py _best_start: one sliding window over the hits with a count per term. */
static Py_ssize_t best_start(const Words *w, Py_ssize_t nterms, Py_ssize_t window_words,
                             Py_ssize_t *counts) {
    Py_ssize_t best = w->hits[0], best_score = -1, distinct = 0, ahead = 0;
    memset(counts, 0, nterms * sizeof(Py_ssize_t));
    for (Py_ssize_t behind = 0; behind < w->nhits; behind++) {
        Py_ssize_t h = w->hits[behind];
        while (ahead < w->nhits && w->hits[ahead] < h + window_words) {
            if (counts[w->term[w->hits[ahead]]]++ == 0)
                distinct++;
            ahead++;
        }
        if (distinct > best_score) {
            best = h;
            best_score = distinct;
        }
        if (--counts[w->term[h]] == 0)
            distinct--;
    }
    return best;
}

/* The window's text with whitespace runs made single spaces, and its
 * matched words' spans in it. */
static PyObject *flatten(const Py_UCS1 *s, const Words *w, Py_ssize_t first, Py_ssize_t last) {
    Py_ssize_t from = w->start[first], to = w->end[last];
    char *out = malloc(to - from + 1);
    if (out == NULL)
        return PyErr_NoMemory();
    PyObject *spans = PyList_New(0);
    if (spans == NULL) {
        free(out);
        return NULL;
    }
    Py_ssize_t len = 0, word = first;
    for (Py_ssize_t i = from; i < to;) {
        if (is_space(s[i])) {
            out[len++] = ' ';
            while (i < to && is_space(s[i]))
                i++;
            continue;
        }
        while (word <= last && w->start[word] < i)
            word++;
        if (word <= last && w->start[word] == i && w->term[word] >= 0) {
            Py_ssize_t n = w->end[word] - i;
            PyObject *span = Py_BuildValue("(nn)", len, len + n);
            if (span == NULL || PyList_Append(spans, span) < 0) {
                Py_XDECREF(span);
                Py_DECREF(spans);
                free(out);
                return NULL;
            }
            Py_DECREF(span);
        }
        out[len++] = (char)s[i++];
    }
    PyObject *core = PyUnicode_FromStringAndSize(out, len);
    free(out);
    if (core == NULL) {
        Py_DECREF(spans);
        return NULL;
    }
    return Py_BuildValue("(NN)", core, spans);
}

static PyObject *window(PyObject *self, PyObject *args) {
    PyObject *piece, *stems, *marked, *prefixes;
    Py_ssize_t window_words, back;
    if (!PyArg_ParseTuple(args, "UO!OO!nn", &piece, &PyDict_Type, &stems, &marked, &PyTuple_Type,
                          &prefixes, &window_words, &back))
        return NULL;
    if (!PyUnicode_IS_ASCII(piece)) {
        PyErr_SetString(PyExc_ValueError, "window: the piece must be ASCII");
        return NULL;
    }
    if (window_words < 1 || back < 0) {
        PyErr_SetString(PyExc_ValueError, "window: window_words >= 1, back >= 0");
        return NULL;
    }
    const Py_UCS1 *s = PyUnicode_1BYTE_DATA(piece);
    Py_ssize_t n = PyUnicode_GET_LENGTH(piece);
    if (stems != memo_of)
        memo_reset(stems);
    Words w = {NULL, NULL, NULL, NULL, 0, 0, 0, -1};
    /* A window holds at most every term of a set of terms, when no prefix can
     * match others; otherwise the whole piece is read. */
    Settle st = {-1, window_words, NULL, 0, 0, 0};
    PyObject *ids = PyDict_New();
    PyObject *result = NULL;
    Py_ssize_t *counts = NULL;
    if (ids == NULL)
        goto done;
    if (PyAnySet_Check(marked) && PyTuple_GET_SIZE(prefixes) == 0 && PySet_GET_SIZE(marked) > 0) {
        st.most = PySet_GET_SIZE(marked);
        st.counts = calloc(st.most, sizeof(Py_ssize_t));
        if (st.counts == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    if (scan(s, n, stems, marked, prefixes, ids, &w, &st) < 0)
        goto done;
    if (w.nhits == 0) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    Py_ssize_t best = w.best;
    if (best < 0) {
        counts = malloc((w.nterms + 1) * sizeof(Py_ssize_t));
        if (counts == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        best = best_start(&w, w.nterms, window_words, counts);
    }
    Py_ssize_t first = best - back > 0 ? best - back : 0;
    Py_ssize_t last = (best + window_words < w.nwords ? best + window_words : w.nwords) - 1;
    PyObject *flat = flatten(s, &w, first, last);
    if (flat == NULL)
        goto done;
    result = Py_BuildValue("(OONN)", PyTuple_GET_ITEM(flat, 0), PyTuple_GET_ITEM(flat, 1),
                           PyBool_FromLong(first > 0), PyBool_FromLong(last < w.nwords - 1));
    Py_DECREF(flat);
done:
    free(counts);
    free(st.counts);
    words_free(&w);
    Py_XDECREF(ids);
    return result;
}

static PyMethodDef methods[] = {
    {"window", window, METH_VARARGS,
     "window(piece, stems, marked, prefixes, window_words, back) -> None | "
     "(core, spans, more_before, more_after): ctindex/search/snippet.py's ASCII window"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_snippet", "The snippet window's optional C twin.", -1, methods,
};

PyMODINIT_FUNC PyInit__snippet(void) { return PyModule_Create(&module); }
