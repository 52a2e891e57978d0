/* Optional native core of the reconciler's nothing-changed pass
 * (docs/decisions/native.md).
 *
 * A full pass over 200k unchanged files in pure Python costs one
 * os.stat_result, one key string, one dict lookup and one filter call per
 * entry. Here one folder is listed and every entry fstatat()ed relative to
 * the already-open folder descriptor (AT_SYMLINK_NOFOLLOW: a symlink is
 * reported as a symlink, never followed), the key is looked up in a hash
 * index over the packed file table (reconciler/manifest.py and
 * ctindex/store/filetable.py record layout) and the full fingerprint
 * (size, mtime_ns, ctime_ns, inode, device) plus the racily-clean rule of
 * reconciler/fingerprint.py are checked in C. Only entries Python must look
 * at itself are returned: folders, files that differ or are unknown, stat
 * failures, trusted files with more than one link, and any entry decided here
 * whose name is not ASCII (the walker reports those). Everything else is a
 * counter.
 *
 * The rule applied here must stay identical to walk.Unchanged and
 * diff._Pass.on_files; tests/reconciler/test_native.py holds both paths to the same
 * results on random trees.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECORD_SIZE 64 /* "<qqqQQ16sq": size mtime ctime ino dev digest recorded */

/* Codes of the pending entries handed back to Python (reconciler/native.py). */
#define CODE_EXAMINE 0  /* stat it again and apply the full rule */
#define CODE_DIRHINT 1  /* the listing says folder (used if the stat fails) */
#define CODE_DONE 2     /* decided here: Python only checks the name and the link flag */
#define CODE_LINKED 4   /* a trusted file with st_nlink > 1 */

typedef struct {
    const char *key;
    Py_ssize_t key_len;
    const unsigned char *rec; /* NULL: removed by the delta */
} Entry;

typedef struct {
    PyObject_HEAD
    Py_buffer records;
    Py_buffer keys;
    int have_buffers;
    Entry *entries;
    Py_ssize_t n_entries;
    /* Open addressing, linear probing. A slot holds the key's upper 32 hash
     * bits above the entry index + 1 (0 = empty), so a probe rejects other
     * keys without touching their entries (the table is larger than the
     * caches: every touch would be a miss). */
    uint64_t *slots;
    uint64_t mask;
    Py_ssize_t live;
    char *arena; /* copies of the delta's keys and records */
} Table;

static uint64_t mix64(uint64_t h) {
    /* murmur3's finaliser: every input bit reaches the low bits the slot
     * index is taken from. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    /* Eight bytes a step: keys are paths of a few dozen bytes. */
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ mix64(w)) * 0x9fb21c651e98df25ULL;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, (size_t)(n - i));
    return mix64(h ^ w);
}

static int64_t get_i64(const unsigned char *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return v; /* the table is little-endian; setup.py builds only there */
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

#define SLOT_INDEX(s) ((uint32_t)((s) & 0xffffffffULL)) /* entry index + 1 */
#define SLOT_TAG(h) ((h) & 0xffffffff00000000ULL)

/* Slot holding `key`, or the empty slot where it would go. */
static uint64_t find_slot(const Table *t, const char *key, Py_ssize_t n, uint64_t h) {
    uint64_t i = h & t->mask, tag = SLOT_TAG(h);
    for (;;) {
        uint64_t s = t->slots[i];
        if (s == 0)
            return i;
        if (SLOT_TAG(s) == tag) {
            const Entry *e = &t->entries[SLOT_INDEX(s) - 1];
            if (e->key_len == n && memcmp(e->key, key, (size_t)n) == 0)
                return i;
        }
        i = (i + 1) & t->mask;
    }
}

static const Entry *lookup(const Table *t, const char *key, Py_ssize_t n) {
    if (t->slots == NULL)
        return NULL;
    uint64_t s = t->slots[find_slot(t, key, n, hash_bytes(key, n))];
    if (s == 0)
        return NULL;
    const Entry *e = &t->entries[SLOT_INDEX(s) - 1];
    return e->rec == NULL ? NULL : e;
}

static void Table_dealloc(Table *self) {
    PyMem_Free(self->entries);
    PyMem_Free(self->slots);
    PyMem_Free(self->arena);
    if (self->have_buffers) {
        PyBuffer_Release(&self->records);
        PyBuffer_Release(&self->keys);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Table(records, keys, count, delta): `records` holds count packed records,
 * `keys` the count keys joined by NUL (in record order), `delta` a list of
 * (key bytes, packed record bytes or None) that override the base: None
 * removes the key. */
static int Table_init(Table *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"records", "keys", "count", "delta", NULL};
    Py_ssize_t count;
    PyObject *delta;
    if (self->have_buffers) {
        PyErr_SetString(PyExc_TypeError, "Table is already initialised");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y*y*nO!", kwlist, &self->records,
                                     &self->keys, &count, &PyList_Type, &delta))
        return -1;
    self->have_buffers = 1;
    if (count < 0 || self->records.len != count * RECORD_SIZE) {
        PyErr_SetString(PyExc_ValueError, "records do not match count");
        return -1;
    }
    Py_ssize_t nd = PyList_GET_SIZE(delta);
    Py_ssize_t total = count + nd;
    if (total >= (Py_ssize_t)UINT32_MAX / 2) {
        PyErr_SetString(PyExc_OverflowError, "table too large");
        return -1;
    }
    self->entries = PyMem_Calloc((size_t)(total ? total : 1), sizeof(Entry));
    uint64_t cap = 16;
    while (cap < (uint64_t)total * 2)
        cap <<= 1;
    self->slots = PyMem_Calloc((size_t)cap, sizeof(uint64_t));
    if (self->entries == NULL || self->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->mask = cap - 1;

    /* The delta's keys and records are copied: the list may change later. */
    size_t arena_len = 0;
    for (Py_ssize_t j = 0; j < nd; j++) {
        PyObject *item = PyList_GET_ITEM(delta, j);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 ||
            !PyBytes_Check(PyTuple_GET_ITEM(item, 0))) {
            PyErr_SetString(PyExc_TypeError, "delta items are (bytes, bytes | None)");
            return -1;
        }
        PyObject *rec = PyTuple_GET_ITEM(item, 1);
        if (rec != Py_None && !(PyBytes_Check(rec) && PyBytes_GET_SIZE(rec) == RECORD_SIZE)) {
            PyErr_SetString(PyExc_TypeError, "delta records are packed 64-byte records");
            return -1;
        }
        arena_len += (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(item, 0)) + RECORD_SIZE;
    }
    self->arena = PyMem_Malloc(arena_len ? arena_len : 1);
    if (self->arena == NULL) {
        PyErr_NoMemory();
        return -1;
    }

    Py_ssize_t n = 0;
    char *out = self->arena;
    /* Delta first: a later delta item for the same key wins, like dict.update. */
    for (Py_ssize_t j = 0; j < nd; j++) {
        PyObject *item = PyList_GET_ITEM(delta, j);
        PyObject *kb = PyTuple_GET_ITEM(item, 0);
        PyObject *rec = PyTuple_GET_ITEM(item, 1);
        Py_ssize_t kl = PyBytes_GET_SIZE(kb);
        memcpy(out, PyBytes_AS_STRING(kb), (size_t)kl);
        Entry *e = &self->entries[n];
        e->key = out;
        e->key_len = kl;
        out += kl;
        if (rec == Py_None) {
            e->rec = NULL;
        } else {
            memcpy(out, PyBytes_AS_STRING(rec), RECORD_SIZE);
            e->rec = (const unsigned char *)out;
            out += RECORD_SIZE;
        }
        uint64_t h = hash_bytes(e->key, kl);
        self->slots[find_slot(self, e->key, kl, h)] = SLOT_TAG(h) | (uint64_t)(n + 1);
        n++;
    }
    Py_ssize_t first_base = n;
    const char *kp = self->keys.buf;
    const char *kend = kp + self->keys.len;
    const unsigned char *rp = self->records.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        const char *nul = memchr(kp, 0, (size_t)(kend - kp));
        const char *stop = nul ? nul : kend;
        if (nul == NULL && i != count - 1) {
            PyErr_SetString(PyExc_ValueError, "fewer keys than records");
            return -1;
        }
        Entry *e = &self->entries[n];
        e->key = kp;
        e->key_len = stop - kp;
        e->rec = rp + (size_t)i * RECORD_SIZE;
        uint64_t h = hash_bytes(e->key, e->key_len);
        uint64_t s = find_slot(self, e->key, e->key_len, h);
        uint64_t held = self->slots[s];
        /* A key the delta holds keeps the delta's answer; a repeated base key
         * takes the later record, as dict(zip(keys, records)) does. */
        if (held == 0 || (Py_ssize_t)(SLOT_INDEX(held) - 1) >= first_base)
            self->slots[s] = SLOT_TAG(h) | (uint64_t)(n + 1);
        n++;
        kp = stop + 1;
    }
    if (count && kp < kend) {
        PyErr_SetString(PyExc_ValueError, "more keys than records");
        return -1;
    }
    self->n_entries = n;
    Py_ssize_t live = 0;
    for (uint64_t i = 0; i <= self->mask; i++) {
        uint64_t s = self->slots[i];
        if (s && self->entries[SLOT_INDEX(s) - 1].rec != NULL)
            live++;
    }
    self->live = live;
    return 0;
}

/* Growable buffer of pending entries: name bytes, NUL, one code byte. */
typedef struct {
    char *buf;
    size_t len, cap;
    Py_ssize_t count;
} Pending;

static int pending_add(Pending *p, const char *name, size_t n, unsigned char code) {
    if (p->len + n + 2 > p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 4096;
        while (cap < p->len + n + 2)
            cap *= 2;
        char *nb = PyMem_RawRealloc(p->buf, cap);
        if (nb == NULL)
            return -1;
        p->buf = nb;
        p->cap = cap;
    }
    memcpy(p->buf + p->len, name, n);
    p->buf[p->len + n] = 0;
    p->buf[p->len + n + 1] = (char)code;
    p->len += n + 2;
    p->count++;
    return 0;
}

static int is_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] & 0x80)
            return 0;
    return 1;
}

#if defined(__APPLE__)
#define MTIME_NS(st) ((int64_t)(st).st_mtimespec.tv_sec * 1000000000LL + (st).st_mtimespec.tv_nsec)
#define CTIME_NS(st) ((int64_t)(st).st_ctimespec.tv_sec * 1000000000LL + (st).st_ctimespec.tv_nsec)
#else
#define MTIME_NS(st) ((int64_t)(st).st_mtim.tv_sec * 1000000000LL + (st).st_mtim.tv_nsec)
#define CTIME_NS(st) ((int64_t)(st).st_ctim.tv_sec * 1000000000LL + (st).st_ctim.tv_nsec)
#endif

/* scan(fd, prefix, seen, granularity_ns) -> (entries, trusted, symlinks,
 * other, pending): list the open folder `fd` whose key is `prefix` (bytes,
 * "" for the base) and compare every regular file against the table.
 * `seen` (a bytearray of one byte per table entry) gets a 1 for each entry
 * trusted as unchanged; `trusted` counts those newly marked. `pending` is a
 * list of (name, code) in listing order. OSError when the folder can not be
 * listed (nothing is marked then). */
static PyObject *Table_scan(Table *self, PyObject *args) {
    int fd;
    Py_buffer prefix, seen;
    long long gran;
    if (!PyArg_ParseTuple(args, "iy*w*L", &fd, &prefix, &seen, &gran))
        return NULL;
    PyObject *result = NULL;
    char *key = NULL;
    Pending pend = {NULL, 0, 0, 0};
    if (seen.len != self->n_entries) {
        PyErr_SetString(PyExc_ValueError, "seen must have one byte per table entry");
        goto done;
    }
    Py_ssize_t plen = prefix.len;
    size_t key_cap = (size_t)plen + 1 + 256 + 1;
    key = PyMem_RawMalloc(key_cap);
    if (key == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(key, prefix.buf, (size_t)plen);
    size_t base_len = (size_t)plen;
    if (plen)
        key[base_len++] = '/';

    Py_ssize_t n_entries = 0, n_trusted = 0, n_symlinks = 0, n_other = 0;
    int err = 0, oom = 0;
    unsigned char *marks = seen.buf;
    Py_BEGIN_ALLOW_THREADS
    /* Like os.scandir(fd): a duplicate descriptor, rewound, so the caller's
     * fd stays open and usable for the openat() of the sub-folders. */
    int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    DIR *dir = dfd < 0 ? NULL : fdopendir(dfd);
    if (dir == NULL) {
        err = errno;
        if (dfd >= 0)
            close(dfd);
    } else {
        rewinddir(dir);
        for (;;) {
            errno = 0;
            struct dirent *de = readdir(dir);
            if (de == NULL) {
                err = errno;
                break;
            }
            const char *name = de->d_name;
            if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)))
                continue;
            n_entries++;
            size_t nlen = strlen(name);
#ifdef DT_DIR
            unsigned char dtype = de->d_type;
            if (dtype == DT_DIR) { /* Python stats, filters and opens folders */
                if (pending_add(&pend, name, nlen, CODE_EXAMINE | CODE_DIRHINT) < 0) {
                    oom = 1;
                    break;
                }
                continue;
            }
#else
            unsigned char dtype = 0;
#endif
            struct stat st;
            if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                /* Python stats again and triages the error as the pure walk does. */
                if (pending_add(&pend, name, nlen, CODE_EXAMINE) < 0) {
                    oom = 1;
                    break;
                }
                continue;
            }
            (void)dtype;
            if (S_ISDIR(st.st_mode)) {
                if (pending_add(&pend, name, nlen, CODE_EXAMINE | CODE_DIRHINT) < 0) {
                    oom = 1;
                    break;
                }
                continue;
            }
            if (!S_ISREG(st.st_mode)) {
                if (S_ISLNK(st.st_mode))
                    n_symlinks++;
                else
                    n_other++;
                /* The walk reports an undecodable name of any kind. */
                if (!is_ascii(name, nlen) && pending_add(&pend, name, nlen, CODE_DONE) < 0) {
                    oom = 1;
                    break;
                }
                continue;
            }
            if (base_len + nlen + 1 > key_cap) {
                size_t cap = (base_len + nlen + 1) * 2;
                char *nk = PyMem_RawRealloc(key, cap);
                if (nk == NULL) {
                    oom = 1;
                    break;
                }
                key = nk;
                key_cap = cap;
            }
            memcpy(key + base_len, name, nlen);
            const Entry *e = lookup(self, key, (Py_ssize_t)(base_len + nlen));
            int trusted = 0;
            if (e != NULL) {
                const unsigned char *r = e->rec;
                int64_t size = get_i64(r), mtime = get_i64(r + 8), ctime = get_i64(r + 16);
                uint64_t ino = get_u64(r + 24), dev = get_u64(r + 32);
                int64_t recorded = get_i64(r + 56);
                /* Full fingerprint, then git's racily-clean rule on both stamps
                 * (reconciler/fingerprint.py). */
                trusted = size == (int64_t)st.st_size && mtime == MTIME_NS(st) &&
                          ctime == CTIME_NS(st) && ino == (uint64_t)st.st_ino &&
                          dev == (uint64_t)st.st_dev && recorded - mtime >= gran &&
                          recorded - ctime >= gran;
            }
            if (trusted) {
                Py_ssize_t idx = e - self->entries;
                if (!marks[idx]) {
                    marks[idx] = 1;
                    n_trusted++;
                }
                if (st.st_nlink > 1 || !is_ascii(name, nlen)) {
                    unsigned char code = CODE_DONE | (st.st_nlink > 1 ? CODE_LINKED : 0);
                    if (pending_add(&pend, name, nlen, code) < 0) {
                        oom = 1;
                        break;
                    }
                }
            } else if (pending_add(&pend, name, nlen, CODE_EXAMINE) < 0) {
                oom = 1;
                break;
            }
        }
        closedir(dir);
    }
    Py_END_ALLOW_THREADS
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        goto done;
    }
    PyObject *list = PyList_New(pend.count);
    if (list == NULL)
        goto done;
    size_t off = 0;
    for (Py_ssize_t i = 0; i < pend.count; i++) {
        size_t nlen = strlen(pend.buf + off);
        /* The same decoding os.scandir gives DirEntry.name (surrogateescape). */
        PyObject *nm = PyUnicode_DecodeFSDefaultAndSize(pend.buf + off, (Py_ssize_t)nlen);
        if (nm == NULL) {
            Py_DECREF(list);
            goto done;
        }
        PyObject *tup = Py_BuildValue("(Ni)", nm, (int)(unsigned char)pend.buf[off + nlen + 1]);
        if (tup == NULL) {
            Py_DECREF(list);
            goto done;
        }
        PyList_SET_ITEM(list, i, tup);
        off += nlen + 2;
    }
    result = Py_BuildValue("(nnnnN)", n_entries, n_trusted, n_symlinks, n_other, list);
done:
    PyMem_RawFree(key);
    PyMem_RawFree(pend.buf);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&seen);
    return result;
}

/* unseen(seen) -> list of the live keys (bytes) not marked in `seen`. */
static PyObject *Table_unseen(Table *self, PyObject *arg) {
    Py_buffer seen;
    if (PyObject_GetBuffer(arg, &seen, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = NULL;
    if (seen.len != self->n_entries) {
        PyErr_SetString(PyExc_ValueError, "seen must have one byte per table entry");
        goto done;
    }
    out = PyList_New(0);
    if (out == NULL)
        goto done;
    const unsigned char *marks = seen.buf;
    for (uint64_t i = 0; i <= self->mask; i++) {
        uint64_t s = self->slots[i];
        if (s == 0)
            continue;
        const Entry *e = &self->entries[SLOT_INDEX(s) - 1];
        if (e->rec == NULL || marks[SLOT_INDEX(s) - 1])
            continue;
        PyObject *k = PyBytes_FromStringAndSize(e->key, e->key_len);
        if (k == NULL || PyList_Append(out, k) < 0) {
            Py_XDECREF(k);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(k);
    }
done:
    PyBuffer_Release(&seen);
    return out;
}

/* get(key bytes) -> packed record bytes, or None. */
static PyObject *Table_get(Table *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "key must be bytes");
        return NULL;
    }
    const Entry *e = lookup(self, PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg));
    if (e == NULL)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)e->rec, RECORD_SIZE);
}

static PyObject *Table_get_live(Table *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(self->live);
}

static PyObject *Table_get_size(Table *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(self->n_entries);
}

static PyMethodDef Table_methods[] = {
    {"scan", (PyCFunction)Table_scan, METH_VARARGS,
     "scan(fd, prefix, seen, granularity_ns) -> (entries, trusted, symlinks, other, pending)"},
    {"unseen", (PyCFunction)Table_unseen, METH_O, "unseen(seen) -> [key bytes]"},
    {"get", (PyCFunction)Table_get, METH_O, "get(key bytes) -> record bytes | None"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Table_getset[] = {
    {"live", (getter)Table_get_live, NULL, "number of keys the table holds", NULL},
    {"size", (getter)Table_get_size, NULL, "length a seen bytearray must have", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "reconciler._native.Table",
    .tp_basicsize = sizeof(Table),
    .tp_dealloc = (destructor)Table_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Hash index over a packed file table, for the folder scan.",
    .tp_methods = Table_methods,
    .tp_getset = Table_getset,
    .tp_init = (initproc)Table_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "ctindex.reconciler._native",
    "Optional native folder scan of the reconciler (docs/decisions/native.md).", -1, NULL,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&TableType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&TableType);
    if (PyModule_AddObject(m, "Table", (PyObject *)&TableType) < 0) {
        Py_DECREF(&TableType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "RECORD_SIZE", RECORD_SIZE) < 0 ||
        PyModule_AddIntConstant(m, "CODE_DIRHINT", CODE_DIRHINT) < 0 ||
        PyModule_AddIntConstant(m, "CODE_DONE", CODE_DONE) < 0 ||
        PyModule_AddIntConstant(m, "CODE_LINKED", CODE_LINKED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
