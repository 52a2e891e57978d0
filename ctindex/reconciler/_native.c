/* Optional native core of the reconciler's nothing-changed pass
 * (docs/decisions/native.md).
 *
 * A full pass over 200k unchanged files in pure Python costs one
 * os.stat_result, one key string, one dict lookup and one filter call per
 * entry. Here one folder is listed and every entry fstatat()ed relative to
 * the already-open folder descriptor (AT_SYMLINK_NOFOLLOW: a symlink is
 * reported as a symlink, never followed), the key is looked up in the
 * packed file table (ctindex/store/filetable.py record layout) and the
 * full fingerprint (size, mtime_ns, ctime_ns, inode, device) plus the
 * racily-clean rule of
 * ctindex/reconciler/fingerprint.py are checked in C. Only entries Python must look
 * at itself are returned: folders, files that differ or are unknown, stat
 * failures, trusted files with more than one link, and any entry decided here
 * whose name is not ASCII (the walker reports those). Everything else is a
 * counter.
 *
 * The lookup: a base file table (ctindex/store/filetable.py) is written
 * sorted, so when its keys turn out to be in strictly increasing byte order
 * (checked once, sequentially, in Table_init) a key is found by binary
 * search, within the range of the folder being scanned, and no index over
 * the 200k keys is built at all; only the small delta gets a hash index,
 * consulted first. Keys the order check rejects (a table in walk order,
 * or names whose surrogate escapes sort differently as bytes than as code
 * points) get a hash index over every entry, as before.
 *
 * The rule applied here must stay identical to walk.Unchanged and
 * diff._Pass.on_files; tests/ctindex/reconciler/test_native.py holds both paths to the same
 * results on random trees.
 *
 * Beside the scan, `read_file`: one attempt of hashing.read_stable's read
 * (its pure `_attempt` is the specification, tests/ctindex/reconciler/test_hashing_native.py),
 * and `read_files`: that attempt for a folder's files at once, for a
 * rebuild's workers (ctindex/reconciler/capture.py KeyReader.read_keys).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RECORD_SIZE 64 /* "<qqqQQ16sq": size mtime ctime ino dev digest recorded */

/* Codes of the pending entries handed back to Python (ctindex/reconciler/native.py). */
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
    Entry *entries; /* the delta's n_delta entries, then the base's, in record order */
    Py_ssize_t n_entries;
    Py_ssize_t n_delta;
    /* The base keys are in strictly increasing byte order: the base is
     * searched in place and `slots` index only the delta. Otherwise `slots`
     * index every entry. */
    int ordered;
    /* Open addressing, linear probing. A slot holds the key's upper 32 hash
     * bits above the entry index + 1 (0 = empty), so a probe rejects other
     * keys without touching their entries (the table is larger than the
     * caches: every touch would be a miss). NULL when there is nothing to
     * index (an ordered base and no delta). */
    uint64_t *slots;
    uint64_t mask;
    /* Ordered only: the base entries the delta overrides or removes, as
     * sorted entry indices, so unseen() can skip them without a lookup. */
    Py_ssize_t *shadowed;
    Py_ssize_t n_shadowed;
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

/* The hash index's entry for `key` (removed ones included), or NULL. */
static const Entry *lookup_slots(const Table *t, const char *key, Py_ssize_t n) {
    if (t->slots == NULL)
        return NULL;
    uint64_t s = t->slots[find_slot(t, key, n, hash_bytes(key, n))];
    return s == 0 ? NULL : &t->entries[SLOT_INDEX(s) - 1];
}

/* Byte order of e's key and `key`, both from byte `skip` on (the bytes
 * before it are known to be equal). */
static int cmp_key(const Entry *e, const char *key, Py_ssize_t n, Py_ssize_t skip) {
    Py_ssize_t a = e->key_len - skip, b = n - skip;
    int c = memcmp(e->key + skip, key + skip, (size_t)(a < b ? a : b));
    return c != 0 ? c : (a > b) - (a < b);
}

/* First entry index in [lo, hi) whose key is not below `key`; the keys there
 * are ordered and share their first `skip` bytes with it. */
static Py_ssize_t lower_bound(const Table *t, Py_ssize_t lo, Py_ssize_t hi, const char *key,
                              Py_ssize_t n, Py_ssize_t skip) {
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (cmp_key(&t->entries[mid], key, n, skip) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The ordered base's entry for `key` within [lo, hi), or NULL. */
static const Entry *search_base(const Table *t, Py_ssize_t lo, Py_ssize_t hi, const char *key,
                                Py_ssize_t n, Py_ssize_t skip) {
    Py_ssize_t i = lower_bound(t, lo, hi, key, n, skip);
    if (i < hi && cmp_key(&t->entries[i], key, n, skip) == 0)
        return &t->entries[i];
    return NULL;
}

/* The live entry for `key`, or NULL. The delta answers first; an ordered
 * base is searched in [lo, hi) only (all of it, or one folder's range, whose
 * keys share their first `skip` bytes with `key`). */
static const Entry *lookup_in(const Table *t, const char *key, Py_ssize_t n, Py_ssize_t lo,
                              Py_ssize_t hi, Py_ssize_t skip) {
    const Entry *e = lookup_slots(t, key, n);
    if (e == NULL && t->ordered)
        e = search_base(t, lo, hi, key, n, skip);
    return e == NULL || e->rec == NULL ? NULL : e;
}

static const Entry *lookup(const Table *t, const char *key, Py_ssize_t n) {
    return lookup_in(t, key, n, t->n_delta, t->n_entries, 0);
}

static int cmp_index(const void *a, const void *b) {
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return (x > y) - (x < y);
}

static void Table_dealloc(Table *self) {
    PyMem_Free(self->entries);
    PyMem_Free(self->slots);
    PyMem_Free(self->shadowed);
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
    if (self->entries == NULL) {
        PyErr_NoMemory();
        return -1;
    }

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
        n++;
    }
    Py_ssize_t first_base = n;
    self->n_delta = nd;
    /* The base file is written sorted, but by code point of the str keys
     * (ctindex/store/filetable.py encode_base), and a surrogate escape
     * (U+DC80..U+DCFF, three bytes as code point, one byte 0x80..0xFF here)
     * does not keep that order as bytes. So the order is checked, not
     * trusted: each key against the one before it, while the entries are
     * laid out (the previous key is still in cache). Equal neighbours fail
     * too: a repeated key needs the hash index's "later record wins". */
    int ordered = 1;
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
        if (ordered && i > 0 && cmp_key(e - 1, e->key, e->key_len, 0) >= 0)
            ordered = 0;
        n++;
        kp = stop + 1;
    }
    if (count && kp < kend) {
        PyErr_SetString(PyExc_ValueError, "more keys than records");
        return -1;
    }
    self->n_entries = n;
    self->ordered = ordered;

    Py_ssize_t indexed = ordered ? nd : total;
    if (indexed) {
        uint64_t cap = 16;
        while (cap < (uint64_t)indexed * 2)
            cap <<= 1;
        self->slots = PyMem_Calloc((size_t)cap, sizeof(uint64_t));
        if (self->slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->mask = cap - 1;
    }
    /* Delta first: a later delta item for the same key wins, like dict.update. */
    for (Py_ssize_t j = 0; j < nd; j++) {
        const Entry *e = &self->entries[j];
        uint64_t h = hash_bytes(e->key, e->key_len);
        self->slots[find_slot(self, e->key, e->key_len, h)] = SLOT_TAG(h) | (uint64_t)(j + 1);
    }
    Py_ssize_t live = 0;
    if (ordered) {
        /* Every base key is distinct and live; each delta key (its last
         * item) overrides or removes one base entry, or adds a key. */
        live = count;
        if (nd) {
            self->shadowed = PyMem_Malloc((size_t)nd * sizeof(Py_ssize_t));
            if (self->shadowed == NULL) {
                PyErr_NoMemory();
                return -1;
            }
        }
        for (uint64_t i = 0; self->slots != NULL && i <= self->mask; i++) {
            uint64_t s = self->slots[i];
            if (s == 0)
                continue;
            const Entry *e = &self->entries[SLOT_INDEX(s) - 1];
            const Entry *b = search_base(self, first_base, n, e->key, e->key_len, 0);
            if (b != NULL) {
                self->shadowed[self->n_shadowed++] = b - self->entries;
                if (e->rec == NULL)
                    live--;
            } else if (e->rec != NULL) {
                live++;
            }
        }
        if (self->n_shadowed > 1)
            qsort(self->shadowed, (size_t)self->n_shadowed, sizeof(Py_ssize_t), cmp_index);
    } else {
        for (Py_ssize_t i = first_base; i < n; i++) {
            const Entry *e = &self->entries[i];
            uint64_t h = hash_bytes(e->key, e->key_len);
            uint64_t s = find_slot(self, e->key, e->key_len, h);
            uint64_t held = self->slots[s];
            /* A key the delta holds keeps the delta's answer; a repeated base
             * key takes the later record, as dict(zip(keys, records)) does. */
            if (held == 0 || (Py_ssize_t)(SLOT_INDEX(held) - 1) >= first_base)
                self->slots[s] = SLOT_TAG(h) | (uint64_t)(i + 1);
        }
        for (uint64_t i = 0; self->slots != NULL && i <= self->mask; i++) {
            uint64_t s = self->slots[i];
            if (s && self->entries[SLOT_INDEX(s) - 1].rec != NULL)
                live++;
        }
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
    /* An ordered base: the folder's keys are the range [prefix/, prefix0)
     * ('0' follows '/'), found once here; each name is then searched inside
     * it, comparing only the bytes after the shared "prefix/". */
    Py_ssize_t lo = self->n_delta, hi = self->n_entries;
    if (self->ordered && plen) {
        lo = lower_bound(self, lo, hi, key, (Py_ssize_t)base_len, 0);
        key[base_len - 1] = '0';
        hi = lower_bound(self, lo, hi, key, (Py_ssize_t)base_len, 0);
        key[base_len - 1] = '/';
    }

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
            const Entry *e =
                lookup_in(self, key, (Py_ssize_t)(base_len + nlen), lo, hi, (Py_ssize_t)base_len);
            int trusted = 0;
            if (e != NULL) {
                const unsigned char *r = e->rec;
                int64_t size = get_i64(r), mtime = get_i64(r + 8), ctime = get_i64(r + 16);
                uint64_t ino = get_u64(r + 24), dev = get_u64(r + 32);
                int64_t recorded = get_i64(r + 56);
                /* Full fingerprint, then git's racily-clean rule on both stamps
                 * (ctindex/reconciler/fingerprint.py). */
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

/* Append e's key to `out`; -1 on error. */
static int append_key(PyObject *out, const Entry *e) {
    PyObject *k = PyBytes_FromStringAndSize(e->key, e->key_len);
    if (k == NULL || PyList_Append(out, k) < 0) {
        Py_XDECREF(k);
        return -1;
    }
    Py_DECREF(k);
    return 0;
}

/* unseen(seen) -> list of the live keys (bytes) not marked in `seen`, in no
 * particular order (ctindex/reconciler/diff.py sorts what it keeps of them). */
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
    /* The indexed entries: the delta's last item per key, and with an
     * unordered base every base key's answer too. */
    for (uint64_t i = 0; self->slots != NULL && i <= self->mask; i++) {
        uint64_t s = self->slots[i];
        if (s == 0)
            continue;
        const Entry *e = &self->entries[SLOT_INDEX(s) - 1];
        if (e->rec == NULL || marks[SLOT_INDEX(s) - 1])
            continue;
        if (append_key(out, e) < 0) {
            Py_CLEAR(out);
            goto done;
        }
    }
    if (self->ordered) { /* the base entries the delta leaves alone */
        Py_ssize_t next = 0;
        for (Py_ssize_t i = self->n_delta; i < self->n_entries; i++) {
            if (next < self->n_shadowed && self->shadowed[next] == i) {
                next++;
                continue;
            }
            if (marks[i])
                continue;
            if (append_key(out, &self->entries[i]) < 0) {
                Py_CLEAR(out);
                goto done;
            }
        }
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

static PyObject *Table_get_ordered(Table *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(self->ordered);
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
    {"ordered", (getter)Table_get_ordered, NULL,
     "whether the base is searched in place (keys in byte order) instead of hashed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TableType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "reconciler._native.Table",
    .tp_basicsize = sizeof(Table),
    .tp_dealloc = (destructor)Table_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Key lookup over a packed file table, for the folder scan.",
    .tp_methods = Table_methods,
    .tp_getset = Table_getset,
    .tp_init = (initproc)Table_init,
    .tp_new = PyType_GenericNew,
};

/* One attempt of ctindex/reconciler/hashing.py read_stable's read, whose pure
 * `_attempt` is the specification: `path` opened relative to the open folder
 * `dir_fd` with `flags` (hashing.FILE_FLAGS: O_NOFOLLOW kept), fstat, every
 * byte to EOF, fstat again. Returns ATTEMPT_READ with *data (a new
 * reference), the second fstat in *after and *stable (the two fstats agree on
 * size, mtime and ctime and the bytes read are that size); ATTEMPT_NOT_REGULAR;
 * ATTEMPT_OPEN_ERRNO (the open failed) or ATTEMPT_ERRNO (a later call did)
 * with errno set and no Python error, the caller deciding whether and how to
 * raise; ATTEMPT_PYERR with a Python error set (memory). */
enum { ATTEMPT_READ, ATTEMPT_NOT_REGULAR, ATTEMPT_OPEN_ERRNO, ATTEMPT_ERRNO, ATTEMPT_PYERR };

static int attempt_read(int dir_fd, const char *path, int flags, PyObject **data,
                        struct stat *after, int *stable) {
    int fd;
    Py_BEGIN_ALLOW_THREADS
    do {
        fd = openat(dir_fd, path, flags);
    } while (fd < 0 && errno == EINTR);
    Py_END_ALLOW_THREADS
    if (fd < 0)
        return ATTEMPT_OPEN_ERRNO;
    struct stat before;
    *data = NULL;
    if (fstat(fd, &before) < 0)
        goto fail;
    if (!S_ISREG(before.st_mode)) {
        close(fd);
        return ATTEMPT_NOT_REGULAR;
    }
    Py_ssize_t cap = before.st_size > 0 ? (Py_ssize_t)before.st_size + 1 : 1, len = 0;
    *data = PyBytes_FromStringAndSize(NULL, cap);
    if (*data == NULL) {
        close(fd);
        return ATTEMPT_PYERR;
    }
    for (;;) {
        if (len == cap) { /* longer than its stat said: read on to EOF */
            Py_ssize_t more = cap < (1 << 16) ? (1 << 16) : cap;
            if (_PyBytes_Resize(data, cap + more) < 0) {
                close(fd);
                return ATTEMPT_PYERR;
            }
            cap += more;
        }
        ssize_t got;
        Py_BEGIN_ALLOW_THREADS
        got = read(fd, PyBytes_AS_STRING(*data) + len, (size_t)(cap - len));
        Py_END_ALLOW_THREADS
        if (got < 0) {
            if (errno == EINTR)
                continue;
            goto fail;
        }
        if (got == 0)
            break;
        len += got;
    }
    if (fstat(fd, after) < 0)
        goto fail;
    close(fd);
    if (len != cap && _PyBytes_Resize(data, len) < 0)
        return ATTEMPT_PYERR;
    *stable = (int64_t)before.st_size == (int64_t)after->st_size &&
              (int64_t)after->st_size == (int64_t)len && MTIME_NS(before) == MTIME_NS(*after) &&
              CTIME_NS(before) == CTIME_NS(*after);
    return ATTEMPT_READ;
fail: {
    int saved = errno;
    Py_CLEAR(*data);
    close(fd);
    errno = saved;
    return ATTEMPT_ERRNO;
}
}

/* read_file(dir_fd, name, flags) -> (data, stable, size, mtime_ns, ctime_ns,
 * ino, dev) | None: attempt_read for Python. None for a file that is not
 * regular; OSError as the os calls raise it (a failed open names the file,
 * as os.open does; fstat and read do not). Why C: five os calls, two stat_result objects and two
 * fingerprints per file were ~60 % of reading a small one. */
static PyObject *read_file(PyObject *self, PyObject *args) {
    int dir_fd, flags;
    PyObject *name, *encoded = NULL, *data = NULL;
    if (!PyArg_ParseTuple(args, "iUi:read_file", &dir_fd, &name, &flags) ||
        !PyUnicode_FSConverter(name, &encoded))
        return NULL;
    struct stat after;
    int stable = 0;
    int got = attempt_read(dir_fd, PyBytes_AS_STRING(encoded), flags, &data, &after, &stable);
    Py_DECREF(encoded);
    switch (got) {
    case ATTEMPT_NOT_REGULAR:
        Py_RETURN_NONE;
    case ATTEMPT_PYERR:
        return NULL;
    case ATTEMPT_OPEN_ERRNO:
        return PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, name);
    case ATTEMPT_ERRNO:
        return PyErr_SetFromErrno(PyExc_OSError);
    default:
        break;
    }
    return Py_BuildValue("(NOLLLKK)", data, stable ? Py_True : Py_False,
                         (long long)after.st_size, (long long)MTIME_NS(after),
                         (long long)CTIME_NS(after), (unsigned long long)after.st_ino,
                         (unsigned long long)after.st_dev);
}
static void put_u64(unsigned char *p, uint64_t v) {
    memcpy(p, &v, 8); /* little-endian, as get_i64 reads it */
}

/* read_files(dir_fd, names, flags, digest) -> (datas, records): one
 * attempt_read of each name in the open folder dir_fd, for a rebuild's
 * worker reading a folder's files (ctindex/reconciler/capture.py KeyReader.read_keys).
 * datas[i] is the file's bytes when that one attempt read a regular file
 * stably, else None: the caller reads that name again with the whole of
 * hashing.read_stable (retries, and the outcome it reports: gone, an error,
 * dirty), so every case but the plain one keeps its pure-Python handling.
 * `records` holds, for each bytes in datas in order, the entry
 * read_stable's result makes (ctindex/reconciler/capture.py _ENTRY): the second
 * fstat's size, mtime_ns, ctime_ns, inode, device, then digest(data) (16
 * bytes) and the clock read just before the open (CLOCK_REALTIME, what
 * time.time_ns reads). Why C: per small file, read_stable's Python (a
 * Fingerprint, a ReadResult, a Captured, the shipment's pack) cost about as
 * much as the six system calls themselves. */
static PyObject *read_files(PyObject *self, PyObject *args) {
    int dir_fd, flags;
    PyObject *names, *digest;
    if (!PyArg_ParseTuple(args, "iO!iO:read_files", &dir_fd, &PyList_Type, &names, &flags,
                          &digest))
        return NULL;
    /* A tuple of the names: the digest callback runs Python code, which
     * must not be able to shorten the list under this loop. */
    PyObject *held = PyList_AsTuple(names);
    if (held == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(held);
    PyObject *datas = PyList_New(n);
    PyObject *records = PyBytes_FromStringAndSize(NULL, n * RECORD_SIZE);
    if (datas == NULL || records == NULL)
        goto error;
    Py_ssize_t used = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(held, i);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "read_files: names must be str");
            goto error;
        }
        PyObject *encoded = PyUnicode_EncodeFSDefault(name);
        if (encoded == NULL)
            goto error;
        /* The clock is read before the open, as read_stable does: a later
         * edit stamped within this instant's granularity stays racy. */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t recorded = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
        PyObject *data = NULL;
        struct stat after;
        int stable = 0;
        int got = attempt_read(dir_fd, PyBytes_AS_STRING(encoded), flags, &data, &after, &stable);
        Py_DECREF(encoded);
        if (got == ATTEMPT_PYERR)
            goto error;
        if (got != ATTEMPT_READ || !stable) {
            Py_XDECREF(data);
            Py_INCREF(Py_None);
            PyList_SET_ITEM(datas, i, Py_None);
            continue;
        }
        PyObject *d = PyObject_CallOneArg(digest, data);
        if (d == NULL || !PyBytes_Check(d) || PyBytes_GET_SIZE(d) != 16) {
            if (d != NULL)
                PyErr_SetString(PyExc_ValueError, "read_files: digest must return 16 bytes");
            Py_XDECREF(d);
            Py_DECREF(data);
            goto error;
        }
        unsigned char *rec = (unsigned char *)PyBytes_AS_STRING(records) + used;
        put_u64(rec, (uint64_t)(int64_t)after.st_size);
        put_u64(rec + 8, (uint64_t)MTIME_NS(after));
        put_u64(rec + 16, (uint64_t)CTIME_NS(after));
        put_u64(rec + 24, (uint64_t)after.st_ino);
        put_u64(rec + 32, (uint64_t)after.st_dev);
        memcpy(rec + 40, PyBytes_AS_STRING(d), 16);
        put_u64(rec + 56, (uint64_t)recorded);
        Py_DECREF(d);
        used += RECORD_SIZE;
        PyList_SET_ITEM(datas, i, data);
    }
    Py_DECREF(held);
    if (used != n * RECORD_SIZE && _PyBytes_Resize(&records, used) < 0) {
        Py_DECREF(datas);
        return NULL;
    }
    return Py_BuildValue("(NN)", datas, records);
error:
    Py_DECREF(held);
    Py_XDECREF(records);
    Py_XDECREF(datas); /* a list's unset items are NULL: freed safely */
    return NULL;
}

static PyMethodDef native_functions[] = {
    {"read_file", read_file, METH_VARARGS,
     "read_file(dir_fd, name, flags) -> (data, stable, size, mtime_ns, ctime_ns, ino, dev) | None"},
    {"read_files", read_files, METH_VARARGS,
     "read_files(dir_fd, names, flags, digest) -> (datas, records): stable reads, else None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "ctindex.reconciler._native",
    "Optional native folder scan of the reconciler (docs/decisions/native.md).", -1,
    native_functions,
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
