/* Optional native core of the okf-markdown analysis (docs/decisions/native.md,
 * "Analysis"): the word tokenizer and the per-field term counting of
 * ctindex/providers/okf_markdown.py, whose pure-Python code is the
 * specification; the results are identical
 * (tests/ctindex/providers/test_okf_markdown_native.py).
 *
 * A word is a maximal run of code points for which str.isalnum() is true:
 * exactly what the pure path's regex `[^\W_]+` matches (CPython's sre defines
 * a word character as Py_UNICODE_ISALNUM or '_').
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyDoc_STRVAR(terms_doc,
             "terms(text, cache) -> (terms, missing)\n\n"
             "The words of `text` in order, each replaced by cache[word]; a word the\n"
             "cache lacks stays as the word itself and its index is listed in\n"
             "`missing` (None when every word was found).");

static PyObject *terms(PyObject *self, PyObject *args) {
    PyObject *text, *cache;
    if (!PyArg_ParseTuple(args, "UO!:terms", &text, &PyDict_Type, &cache)) return NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) return NULL; /* a no-op from 3.12 on */
#endif
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    PyObject *out = PyList_New(0);
    PyObject *missing = NULL;
    if (out == NULL) return NULL;
    Py_ssize_t i = 0;
    while (i < n) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (!Py_UNICODE_ISALNUM(ch)) {
            i++;
            continue;
        }
        Py_ssize_t start = i++;
        while (i < n && Py_UNICODE_ISALNUM(PyUnicode_READ(kind, data, i))) i++;
        PyObject *word = PyUnicode_Substring(text, start, i);
        if (word == NULL) goto fail;
        PyObject *term = PyDict_GetItemWithError(cache, word); /* borrowed */
        if (term == NULL && PyErr_Occurred()) {
            Py_DECREF(word);
            goto fail;
        }
        if (term == NULL) {
            PyObject *at = PyLong_FromSsize_t(PyList_GET_SIZE(out));
            if (missing == NULL) missing = PyList_New(0);
            if (at == NULL || missing == NULL || PyList_Append(missing, at) < 0) {
                Py_XDECREF(at);
                Py_DECREF(word);
                goto fail;
            }
            Py_DECREF(at);
            term = word;
        }
        int bad = PyList_Append(out, term);
        Py_DECREF(word);
        if (bad < 0) goto fail;
    }
    PyObject *result = Py_BuildValue("(OO)", out, missing ? missing : Py_None);
    Py_DECREF(out);
    Py_XDECREF(missing);
    return result;
fail:
    Py_DECREF(out);
    Py_XDECREF(missing);
    return NULL;
}

/* tfw[key] += by, for an exact-str key and an int count. */
static int bump(PyObject *tfw, PyObject *key, long by) {
    PyObject *old = PyDict_GetItemWithError(tfw, key); /* borrowed */
    if (old == NULL && PyErr_Occurred()) return -1;
    PyObject *sum;
    if (old == NULL) {
        sum = PyLong_FromLong(by);
    } else {
        PyObject *inc = PyLong_FromLong(by);
        if (inc == NULL) return -1;
        sum = PyNumber_Add(old, inc);
        Py_DECREF(inc);
    }
    if (sum == NULL) return -1;
    int bad = PyDict_SetItem(tfw, key, sum);
    Py_DECREF(sum);
    return bad;
}

PyDoc_STRVAR(count_field_doc,
             "count_field(tfw, toks, weight, head) -> None\n\n"
             "For each token t: tfw[t] += weight and tfw[head + t] += 1 (missing\n"
             "keys count from 0), in order.");

static PyObject *count_field(PyObject *self, PyObject *args) {
    PyObject *tfw, *toks, *head;
    long weight;
    if (!PyArg_ParseTuple(args, "O!O!lU:count_field", &PyDict_Type, &tfw, &PyList_Type, &toks,
                          &weight, &head))
        return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(toks); i++) {
        PyObject *t = PyList_GET_ITEM(toks, i);
        /* exact str: hashing and comparing it runs no Python code, so the
         * list and the dict cannot change under the loop */
        if (!PyUnicode_CheckExact(t)) {
            PyErr_SetString(PyExc_TypeError, "count_field: tokens must be str");
            return NULL;
        }
        Py_INCREF(t);
        PyObject *key = PyUnicode_Concat(head, t);
        int bad = key == NULL || bump(tfw, t, weight) < 0 || bump(tfw, key, 1) < 0;
        Py_XDECREF(key);
        Py_DECREF(t);
        if (bad) return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(count_doc,
             "count(toks) -> dict\n\n"
             "token -> number of occurrences, keys in first-occurrence order\n"
             "(as dict(collections.Counter(toks))).");

static PyObject *count(PyObject *self, PyObject *arg) {
    if (!PyList_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "count: tokens must be a list");
        return NULL;
    }
    PyObject *tfw = PyDict_New();
    if (tfw == NULL) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(arg); i++) {
        PyObject *t = PyList_GET_ITEM(arg, i);
        if (!PyUnicode_CheckExact(t)) { /* see count_field */
            PyErr_SetString(PyExc_TypeError, "count: tokens must be str");
            Py_DECREF(tfw);
            return NULL;
        }
        Py_INCREF(t);
        int bad = bump(tfw, t, 1);
        Py_DECREF(t);
        if (bad < 0) {
            Py_DECREF(tfw);
            return NULL;
        }
    }
    return tfw;
}

static PyMethodDef methods[] = {
    {"count", count, METH_O, count_doc},
    {"terms", terms, METH_VARARGS, terms_doc},
    {"count_field", count_field, METH_VARARGS, count_field_doc},
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

PyMODINIT_FUNC PyInit__words(void) { return PyModule_Create(&module); }
