/* The C entry point of the segment builder's Inverter (ctindex/store/_invert.c),
 * for another extension to add a document without building the Python dict
 * and list that `Inverter.add(tfw, tokens)` takes: the okf-markdown field
 * assembly (ctindex/providers/_words.c `assemble_into`) counts a document's
 * terms in its own table and hands the counts over as they are
 * (docs/decisions/native.md, "Analysis fed straight to the inverter").
 *
 * It travels as a PyCapsule, the CPython way for one extension to call
 * another: `PyCapsule_Import(CT_INVERT_CAPSULE, 0)`. The consumer checks
 * `version` and calls `add` only on objects whose type is `type`.
 */
#ifndef CTINDEX_INVERT_API_H
#define CTINDEX_INVERT_API_H

#include <Python.h>
#include <stddef.h>

#define CT_INVERT_CAPSULE "ctindex.store._invert._api"
#define CT_INVERT_API_VERSION 1

/* One distinct term of a document: the str (borrowed; exact str), its
 * cached hash, and its weighted count (clipped as `add` clips an int). */
typedef struct {
    PyObject *term;
    Py_hash_t hash;
    long count;
} CtCount;

typedef struct {
    int version;
    PyTypeObject *type; /* the Inverter type */
    /* Inverter.add(tfw, tokens) with tfw's items as `counts` (each term
     * once) and the token stream as `tokens` (borrowed exact str): the same
     * document, the same bytes written. 0, or -1 with an exception set and
     * nothing of the document added. */
    int (*add)(PyObject *inverter, const CtCount *counts, size_t ncounts,
               PyObject *const *tokens, size_t ntokens);
} CtInvertApi;

#endif
