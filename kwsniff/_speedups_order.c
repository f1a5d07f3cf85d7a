/*
 * Reorder: the C copy of kwsniff.kafka.ordering.PyReorderer, the capture-order release
 * of exchanges (see that module for the contract).
 *
 * Same methods, same results: add(key, exchange), register(owner, force),
 * set_open(owner, key), forget(owner), drain(final=False), len(); the attributes limit,
 * dirty, next_index, out_of_order, forced, last_key and ready (the Python twin's heap
 * list; here the number of waiting exchanges: both are true exactly when something
 * waits), and marks (the twin's heap list of open-key marks; here their number, stale
 * ones included). The two heaps (waiting exchanges, owners' open keys) hold their keys'
 * values: an order key of four ints that fit in 64 bits is compared as such, any other
 * key with Python's comparison (as the twin's heapq does), so the order is the same.
 * Ties between equal keys go by insertion, as the twin's (key, sequence, ...) tuples do.
 * A comparison that raises leaves the heap holding every item and the error raised, as
 * heapq does; one that calls back into the buffer (a key or owner whose comparison runs
 * Python code that adds or opens something) gets RuntimeError instead of a heap changed
 * under it. Owners are referenced (dicts of open keys, versions, force callbacks)
 * until forget(); the type takes part in cyclic GC, so an abandoned run is freed.
 */

#include "_speedups.h"
#include <structmember.h>

typedef struct {
    int64_t q[4];       /* the key's four ints, when exact */
    int exact;          /* key is a tuple of four ints that fit in int64 */
    PyObject *key;      /* strong */
    PyObject *obj;      /* strong: the exchange (ready) or the owner (marks) */
    uint64_t seq;       /* insertion order: breaks ties between equal keys */
    long long ver;      /* marks: the owner's version when the mark was pushed */
} OEntry;

typedef struct {
    OEntry *v;
    Py_ssize_t n, cap;
} OHeap;

typedef struct {
    PyObject_HEAD
    OHeap ready, marks;
    PyObject *current;      /* owner -> open key */
    PyObject *versions;     /* owner -> int */
    PyObject *forcers;      /* owner -> callable */
    PyObject *last_key;     /* NULL or the key of the last exchange released in order */
    int64_t last_q[4];
    int last_exact;
    Py_ssize_t limit;
    char dirty;
    long long next_index;
    long long out_of_order, forced;
    uint64_t seq;
    int comparing;          /* keys or owners are being compared: no change allowed */
} ReorderObject;

static PyObject *s_problems, *s_index, *s_out_of_order_text;

/* ---- keys ---------------------------------------------------------------------------- */

static void key_values(OEntry *e) {
    e->exact = 0;
    PyObject *k = e->key;
    if (!PyTuple_CheckExact(k) || PyTuple_GET_SIZE(k) != 4)
        return;
    for (int i = 0; i < 4; i++) {
        PyObject *v = PyTuple_GET_ITEM(k, i);
        if (!PyLong_CheckExact(v))
            return;
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return;
        }
        e->q[i] = (int64_t)x;
    }
    e->exact = 1;
}

/* -1, 0 or 1 as key a <, == or > key b; 2 with an error set */
static int key_cmp(const int64_t *qa, int ea, PyObject *ka,
                   const int64_t *qb, int eb, PyObject *kb) {
    if (ea && eb) {
        for (int i = 0; i < 4; i++)
            if (qa[i] != qb[i])
                return qa[i] < qb[i] ? -1 : 1;
        return 0;
    }
    int eq = PyObject_RichCompareBool(ka, kb, Py_EQ);
    if (eq < 0)
        return 2;
    if (eq)
        return 0;
    int lt = PyObject_RichCompareBool(ka, kb, Py_LT);
    if (lt < 0)
        return 2;
    return lt ? -1 : 1;
}

/* 1 if entry a sorts before b, 0 if not, -1 with an error set */
static int entry_lt(const OEntry *a, const OEntry *b) {
    int c = key_cmp(a->q, a->exact, a->key, b->q, b->exact, b->key);
    if (c == 2)
        return -1;
    if (c)
        return c < 0;
    return a->seq < b->seq;
}

/* ---- heaps --------------------------------------------------------------------------- */

static void entry_clear(OEntry *e) {
    Py_CLEAR(e->key);
    Py_CLEAR(e->obj);
}

/* Store an entry: the heap takes its references, whatever happens. 0, or -1 with an
   error set (no memory: the entry is released; a comparison raised: it is stored). */
static int heap_push(OHeap *h, OEntry *e) {
    if (h->n == h->cap) {
        Py_ssize_t cap = h->cap ? h->cap * 2 : 64;
        OEntry *v = PyMem_Realloc(h->v, (size_t)cap * sizeof(OEntry));
        if (v == NULL) {
            entry_clear(e);
            PyErr_NoMemory();
            return -1;
        }
        h->v = v;
        h->cap = cap;
    }
    Py_ssize_t pos = h->n++;
    OEntry item = *e;
    while (pos > 0) {
        Py_ssize_t parent = (pos - 1) >> 1;
        int lt = entry_lt(&item, &h->v[parent]);
        if (lt < 0) {
            h->v[pos] = item;
            return -1;
        }
        if (!lt)
            break;
        h->v[pos] = h->v[parent];
        pos = parent;
    }
    h->v[pos] = item;
    return 0;
}

/* Take the smallest entry into *out (its references pass to the caller). */
static int heap_pop(OHeap *h, OEntry *out) {
    *out = h->v[0];
    Py_ssize_t n = --h->n;
    if (n == 0)
        return 0;
    OEntry item = h->v[n];
    Py_ssize_t pos = 0;
    for (;;) {
        Py_ssize_t child = 2 * pos + 1;
        if (child >= n)
            break;
        if (child + 1 < n) {
            int lt = entry_lt(&h->v[child + 1], &h->v[child]);
            if (lt < 0)
                goto fail;
            if (lt)
                child++;
        }
        int lt = entry_lt(&h->v[child], &item);
        if (lt < 0)
            goto fail;
        if (!lt)
            break;
        h->v[pos] = h->v[child];
        pos = child;
    }
    h->v[pos] = item;
    return 0;
fail:
    h->v[pos] = item;               /* every item still held; the error is raised */
    return -1;
}

static void heap_clear(OHeap *h) {
    Py_ssize_t n = h->n;
    OEntry *v = h->v;
    h->n = 0;
    h->v = NULL;
    h->cap = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        entry_clear(&v[i]);
    PyMem_Free(v);
}

/* ---- the type ------------------------------------------------------------------------ */

static PyObject *reorder_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    (void)args;
    (void)kwds;
    ReorderObject *self = (ReorderObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->current = PyDict_New();
    self->versions = PyDict_New();
    self->forcers = PyDict_New();
    if (self->current == NULL || self->versions == NULL || self->forcers == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    self->limit = 10000;
    self->next_index = 1;
    return (PyObject *)self;
}

static int reorder_init(ReorderObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"limit", NULL};
    Py_ssize_t limit = 10000;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|n:Reorder", kwlist, &limit))
        return -1;
    self->limit = limit;
    return 0;
}

static int reorder_traverse(ReorderObject *self, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < self->ready.n; i++) {
        Py_VISIT(self->ready.v[i].key);
        Py_VISIT(self->ready.v[i].obj);
    }
    for (Py_ssize_t i = 0; i < self->marks.n; i++) {
        Py_VISIT(self->marks.v[i].key);
        Py_VISIT(self->marks.v[i].obj);
    }
    Py_VISIT(self->current);
    Py_VISIT(self->versions);
    Py_VISIT(self->forcers);
    Py_VISIT(self->last_key);
    return 0;
}

static int reorder_clear(ReorderObject *self) {
    heap_clear(&self->ready);
    heap_clear(&self->marks);
    Py_CLEAR(self->current);
    Py_CLEAR(self->versions);
    Py_CLEAR(self->forcers);
    Py_CLEAR(self->last_key);
    return 0;
}

static void reorder_dealloc(ReorderObject *self) {
    PyObject_GC_UnTrack(self);
    reorder_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int check_alive(ReorderObject *self) {
    if (self->current == NULL || self->versions == NULL || self->forcers == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Reorder: cleared");
        return -1;
    }
    if (self->comparing) {
        PyErr_SetString(PyExc_RuntimeError, "Reorder changed while it compared keys");
        return -1;
    }
    return 0;
}

/* heap_push / heap_pop with changes to the buffer refused while they compare */
static int push(ReorderObject *self, OHeap *h, OEntry *e) {
    self->comparing = 1;
    int rc = heap_push(h, e);
    self->comparing = 0;
    return rc;
}

static int pop(ReorderObject *self, OHeap *h, OEntry *out) {
    self->comparing = 1;
    int rc = heap_pop(h, out);
    self->comparing = 0;
    return rc;
}

static int compare_keys(ReorderObject *self, const OEntry *a, const int64_t *qb, int eb,
                        PyObject *kb) {
    self->comparing = 1;
    int c = key_cmp(a->q, a->exact, a->key, qb, eb, kb);
    self->comparing = 0;
    return c;
}

/* add(key, exchange) */
static PyObject *reorder_add(ReorderObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "add(key, exchange)");
        return NULL;
    }
    if (check_alive(self) < 0)
        return NULL;
    OEntry e;
    e.key = Py_NewRef(args[0]);
    e.obj = Py_NewRef(args[1]);
    e.seq = ++self->seq;
    e.ver = 0;
    key_values(&e);
    if (push(self, &self->ready, &e) < 0)
        return NULL;
    self->dirty = 1;
    Py_RETURN_NONE;
}

static PyObject *reorder_register(ReorderObject *self, PyObject *const *args,
                                  Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "register(owner, force)");
        return NULL;
    }
    if (check_alive(self) < 0 || PyDict_SetItem(self->forcers, args[0], args[1]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int rebuild_marks(ReorderObject *self) {
    heap_clear(&self->marks);
    PyObject *owner, *key;
    Py_ssize_t pos = 0;
    while (PyDict_Next(self->current, &pos, &owner, &key)) {
        PyObject *ver = PyDict_GetItemWithError(self->versions, owner);
        if (ver == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, owner);
            return -1;
        }
        OEntry e;
        e.ver = PyLong_AsLongLong(ver);
        if (e.ver == -1 && PyErr_Occurred())
            return -1;
        e.key = Py_NewRef(key);
        e.obj = Py_NewRef(owner);
        e.seq = ++self->seq;
        key_values(&e);
        if (push(self, &self->marks, &e) < 0)
            return -1;
    }
    return 0;
}

/* set_open(owner, key): 0, or -1 with an error set */
static int set_open(ReorderObject *self, PyObject *owner, PyObject *key) {
    if (check_alive(self) < 0)
        return -1;
    PyObject *cur = PyDict_GetItemWithError(self->current, owner);    /* borrowed */
    if (cur == NULL && PyErr_Occurred())
        return -1;
    int same;
    if (cur == NULL)
        same = key == Py_None;
    else {
        Py_INCREF(cur);
        same = PyObject_RichCompareBool(cur, key, Py_EQ);
        Py_DECREF(cur);
        if (same < 0)
            return -1;
    }
    if (same)
        return 0;
    self->dirty = 1;
    PyObject *old = PyDict_GetItemWithError(self->versions, owner);
    if (old == NULL && PyErr_Occurred())
        return -1;
    long long ver = 1;
    if (old != NULL) {
        ver = PyLong_AsLongLong(old);
        if (ver == -1 && PyErr_Occurred())
            return -1;
        ver += 1;
    }
    PyObject *ver_o = PyLong_FromLongLong(ver);
    if (ver_o == NULL)
        return -1;
    int rc = PyDict_SetItem(self->versions, owner, ver_o);
    Py_DECREF(ver_o);
    if (rc < 0)
        return -1;
    if (key == Py_None) {
        if (PyDict_DelItem(self->current, owner) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError))
                return -1;
            PyErr_Clear();
        }
        return 0;
    }
    if (PyDict_SetItem(self->current, owner, key) < 0)
        return -1;
    OEntry e;
    e.key = Py_NewRef(key);
    e.obj = Py_NewRef(owner);
    e.seq = ++self->seq;
    e.ver = ver;
    key_values(&e);
    if (push(self, &self->marks, &e) < 0)
        return -1;
    if (self->marks.n > 4 * PyDict_GET_SIZE(self->current) + 1024)
        return rebuild_marks(self);
    return 0;
}

static PyObject *reorder_set_open(ReorderObject *self, PyObject *const *args,
                                  Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_open(owner, key)");
        return NULL;
    }
    if (set_open(self, args[0], args[1]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static int pop_quietly(PyObject *dict, PyObject *key) {
    if (PyDict_DelItem(dict, key) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError))
            return -1;
        PyErr_Clear();
    }
    return 0;
}

static PyObject *reorder_forget(ReorderObject *self, PyObject *owner) {
    if (set_open(self, owner, Py_None) < 0 || pop_quietly(self->versions, owner) < 0
            || pop_quietly(self->forcers, owner) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* The smallest valid open key: 1 with marks.v[0] valid, 0 when no owner has one, -1
   with an error set. Stale marks (an owner's earlier keys) are dropped on the way. */
static int watermark(ReorderObject *self) {
    OHeap *m = &self->marks;
    while (m->n) {
        int valid = 0;
        self->comparing = 1;        /* (owners' __eq__ may run Python code) */
        PyObject *owner = m->v[0].obj;
        long long want = m->v[0].ver;
        PyObject *ver = PyDict_GetItemWithError(self->versions, owner);
        if (ver == NULL && PyErr_Occurred())
            valid = -1;
        else if (ver != NULL) {
            long long v = PyLong_AsLongLong(ver);
            if (v == -1 && PyErr_Occurred())
                valid = -1;
            else if (v == want)
                valid = PyDict_Contains(self->current, owner);
        }
        self->comparing = 0;
        if (valid)
            return valid;           /* 1, or -1 with an error set */
        OEntry gone;
        int rc = pop(self, m, &gone);
        entry_clear(&gone);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int note_out_of_order(PyObject *ex) {
    PyObject *problems = PyObject_GetAttr(ex, s_problems);
    if (problems == NULL)
        return -1;
    int rc;
    if (PyList_CheckExact(problems))
        rc = PyList_Append(problems, s_out_of_order_text);
    else {
        PyObject *r = PyObject_CallMethod(problems, "append", "O", s_out_of_order_text);
        rc = r == NULL ? -1 : 0;
        Py_XDECREF(r);
    }
    Py_DECREF(problems);
    return rc;
}

/* Release one exchange (the top of ready) into out: 0, or -1 with an error set. */
static int release_top(ReorderObject *self, PyObject *out) {
    OEntry e;
    if (pop(self, &self->ready, &e) < 0) {
        entry_clear(&e);
        return -1;
    }
    int rc = -1;
    int later = 0;
    if (self->last_key != NULL) {
        int c = compare_keys(self, &e, self->last_q, self->last_exact, self->last_key);
        if (c == 2)
            goto done;
        later = c < 0;
    }
    if (later) {
        if (note_out_of_order(e.obj) < 0)
            goto done;
        self->out_of_order++;
    } else {
        Py_INCREF(e.key);
        Py_XSETREF(self->last_key, e.key);
        memcpy(self->last_q, e.q, sizeof(e.q));
        self->last_exact = e.exact;
    }
    PyObject *index = PyLong_FromLongLong(self->next_index);
    if (index == NULL)
        goto done;
    int set = PyObject_SetAttr(e.obj, s_index, index);
    Py_DECREF(index);
    if (set < 0)
        goto done;
    self->next_index++;
    rc = PyList_Append(out, e.obj);
done:
    entry_clear(&e);
    return rc;
}

/* The owner of the smallest open key cannot hold more back: give up its oldest item
   (its force callback), or stop ordering on it. 0, or -1 with an error set. */
static int force_owner(ReorderObject *self) {
    OEntry *top = &self->marks.v[0];
    PyObject *owner = Py_NewRef(top->obj);
    PyObject *wm = Py_NewRef(top->key);
    int rc = -1;
    PyObject *force = PyDict_GetItemWithError(self->forcers, owner);
    if (force == NULL && PyErr_Occurred())
        goto done;
    self->forced++;
    int give_up = 1;
    if (force != NULL) {
        Py_INCREF(force);
        PyObject *r = PyObject_CallNoArgs(force);
        Py_DECREF(force);
        if (r == NULL)
            goto done;
        int ok = PyObject_IsTrue(r);
        Py_DECREF(r);
        if (ok < 0)
            goto done;
        if (ok) {
            PyObject *cur = PyDict_GetItemWithError(self->current, owner);
            if (cur == NULL && PyErr_Occurred())
                goto done;
            if (cur == NULL)
                give_up = wm == Py_None;
            else {
                Py_INCREF(cur);
                give_up = PyObject_RichCompareBool(cur, wm, Py_EQ);
                Py_DECREF(cur);
                if (give_up < 0)
                    goto done;
            }
        }
    }
    rc = give_up ? set_open(self, owner, Py_None) : 0;
done:
    Py_DECREF(owner);
    Py_DECREF(wm);
    return rc;
}

static PyObject *reorder_drain(ReorderObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"final", NULL};
    int final = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:drain", kwlist, &final))
        return NULL;
    if (check_alive(self) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    while (self->ready.n) {
        if (!final) {
            int has = watermark(self);
            if (has < 0)
                goto fail;
            if (has) {
                const OEntry *m = &self->marks.v[0];
                int c = compare_keys(self, &self->ready.v[0], m->q, m->exact, m->key);
                if (c == 2)
                    goto fail;
                if (c >= 0) {           /* held back by the smallest open key */
                    if (self->ready.n <= self->limit)
                        break;
                    if (force_owner(self) < 0)
                        goto fail;
                    continue;
                }
            }
        }
        if (release_top(self, out) < 0)
            goto fail;
    }
    self->dirty = 0;
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static Py_ssize_t reorder_len(ReorderObject *self) {
    return self->ready.n;
}

static PyObject *get_ready(ReorderObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(self->ready.n);
}

static PyObject *get_last_key(ReorderObject *self, void *closure) {
    (void)closure;
    return Py_NewRef(self->last_key != NULL ? self->last_key : Py_None);
}

static PyObject *get_marks(ReorderObject *self, void *closure) {
    (void)closure;
    return PyLong_FromSsize_t(self->marks.n);
}

int reorder_busy(PyObject *obj) {
    ReorderObject *self = (ReorderObject *)obj;
    return self->dirty && self->ready.n > 0;
}

static PyMethodDef reorder_methods[] = {
    {"add", (PyCFunction)(void (*)(void))reorder_add, METH_FASTCALL,
     "add(key, exchange): an exchange ready to be released at its order key."},
    {"register", (PyCFunction)(void (*)(void))reorder_register, METH_FASTCALL,
     "register(owner, force): the callback that makes owner give up its oldest item."},
    {"set_open", (PyCFunction)(void (*)(void))reorder_set_open, METH_FASTCALL,
     "set_open(owner, key): the smallest key owner may still produce (None: none)."},
    {"forget", (PyCFunction)reorder_forget, METH_O,
     "forget(owner): owner produces nothing more."},
    {"drain", (PyCFunction)(void (*)(void))reorder_drain, METH_VARARGS | METH_KEYWORDS,
     "drain(final=False) -> list: the exchanges that can be released now, indexed."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef reorder_members[] = {
    {"limit", T_PYSSIZET, offsetof(ReorderObject, limit), 0, "exchanges held at most"},
    {"dirty", T_BOOL, offsetof(ReorderObject, dirty), 0,
     "something was added or an open key moved since drain()"},
    {"next_index", T_LONGLONG, offsetof(ReorderObject, next_index), 0,
     "the index the next released exchange gets"},
    {"out_of_order", T_LONGLONG, offsetof(ReorderObject, out_of_order), 0,
     "exchanges released out of capture order"},
    {"forced", T_LONGLONG, offsetof(ReorderObject, forced), 0,
     "times an owner was made to give something up"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef reorder_getset[] = {
    {"ready", (getter)get_ready, NULL, "the number of exchanges waiting", NULL},
    {"last_key", (getter)get_last_key, NULL, "the key released last in order, or None",
     NULL},
    {"marks", (getter)get_marks, NULL, "open-key marks held (stale ones included)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods reorder_as_sequence = {
    .sq_length = (lenfunc)reorder_len,
};

PyTypeObject ReorderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kwsniff._speedups.Reorder",
    .tp_doc = PyDoc_STR("Reorder(limit=10000): the C copy of "
                        "kwsniff.kafka.ordering.PyReorderer."),
    .tp_basicsize = sizeof(ReorderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = reorder_new,
    .tp_init = (initproc)reorder_init,
    .tp_dealloc = (destructor)reorder_dealloc,
    .tp_traverse = (traverseproc)reorder_traverse,
    .tp_clear = (inquiry)reorder_clear,
    .tp_methods = reorder_methods,
    .tp_members = reorder_members,
    .tp_getset = reorder_getset,
    .tp_as_sequence = &reorder_as_sequence,
};

int reorder_init_module(void) {
    s_problems = PyUnicode_InternFromString("problems");
    s_index = PyUnicode_InternFromString("index");
    s_out_of_order_text = PyUnicode_FromString(
        "released out of capture order (reorder buffer limit)");
    if (s_problems == NULL || s_index == NULL || s_out_of_order_text == NULL)
        return -1;
    return PyType_Ready(&ReorderType);
}
