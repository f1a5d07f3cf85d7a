/* The in-order fast paths: kwsniff.tcp.reassembly.TcpReassembler.feed's (tcp_feed) and
the engine's sink for bytes that only extend a partial frame (FrameSink, at the end).

tcp_setup(flow_type, direction_type, connection_type, control, ack) binds this file to
the reassembler's slotted classes (the offsets of the slots it reads and writes, the
flag bits); tcp_feed(table, frame, ts, seg, gap_on_ack, event_type) then does exactly
what feed does for a segment of a known, open connection that carries no control flag
and is either empty (a pure ACK) or the next bytes of its direction with nothing
pending, no FIN and no acknowledged hole to report: the same state changes in the same
objects, the same sink call, the same return value (an empty tuple, or a one-event
list). For every other segment it returns None having changed nothing, and the caller
runs feed. Every check is made before the first change. */

#include "_speedups.h"

#include <string.h>
#include <structmember.h>

enum { F_CONN, F_DIRS, F_CLOSED, F_N };
enum { D_BASE, D_NEXT, D_PENDING, D_FIN, D_ACK, D_N };
enum { C_LAST_TS, C_LAST_FRAME, C_PACKETS, C_BYTES, C_IGNORED, C_SINK, C_N };

static const char *flow_slots[F_N] = {"conn", "dirs", "closed"};
static const char *dir_slots[D_N] = {"base", "next", "pending", "fin", "ack"};
static const char *conn_slots[C_N] = {"last_ts", "last_frame", "packets", "bytes", "ignored",
                                      "sink"};

static PyTypeObject *flow_type, *dir_type, *conn_type;
static Py_ssize_t flow_off[F_N], dir_off[D_N], conn_off[C_N];
static long control_bits, ack_bit;
static PyObject *no_events;      /* the empty tuple feed returns */

/* The event class tcp_feed makes (kwsniff.tcp.events.StreamData), bound on first use:
   its slots, in its constructor's argument order, and that constructor; while the
   class's __init__ is that one (checked once per version tag) an event is allocated
   and its slots set here, which is what that __init__ does. */
enum { EV_N = 6 };
static const char *ev_slots[EV_N] = {"conn", "direction", "offset", "data", "frame", "ts"};
static PyTypeObject *ev_type;
static Py_ssize_t ev_off[EV_N];
static PyObject *ev_init, *s_init;
static unsigned int ev_version;

/* Whether ``t`` is the bound event class with its bound __init__ (binding it when it is
   another class whose slots are those); 0 means "call the class". */
static int direct_event(PyObject *t) {
    if ((PyTypeObject *)t == ev_type && ev_version != 0
            && (ev_type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)
            && ev_type->tp_version_tag == ev_version)
        return 1;
    if (!PyType_Check(t) || ((PyTypeObject *)t)->tp_init == NULL)
        return 0;
    if (s_init == NULL && (s_init = PyUnicode_InternFromString("__init__")) == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *init = _PyType_Lookup((PyTypeObject *)t, s_init);
    if ((PyTypeObject *)t != ev_type) {
        /* a class to bind: its own __init__ (not object's), its slots */
        if (init == NULL || ((PyTypeObject *)t)->tp_dictoffset != 0
                || ((PyTypeObject *)t)->tp_new != PyBaseObject_Type.tp_new
                || PyDict_GetItemWithError(((PyTypeObject *)t)->tp_dict, s_init) == NULL) {
            PyErr_Clear();
            return 0;
        }
        PyTypeObject *keep = NULL;
        const Binding b = {t, ev_slots, EV_N, ev_off, &keep};
        if (bind_classes(&b, 1, "tcp_feed") < 0) {
            PyErr_Clear();
            return 0;
        }
        Py_XSETREF(ev_type, keep);
        Py_XSETREF(ev_init, Py_NewRef(init));
    } else if (init != ev_init) {
        ev_version = 0;
        return 0;           /* a patched __init__: the class makes the event */
    }
    ev_version = (ev_type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? ev_type->tp_version_tag
                                                                     : 0;
    return 1;
}

/* Bind ``count`` classes: the offset of every named slot (a member descriptor of an
   object slot) is found first; only when all are found are the offsets and classes
   kept, so a failed call leaves the previous binding whole. 0, or -1 with TypeError. */
int bind_classes(const Binding *b, int count, const char *who) {
    Py_ssize_t found[MAX_BOUND_CLASSES][MAX_BOUND_SLOTS];
    if (count > MAX_BOUND_CLASSES) {
        PyErr_Format(PyExc_TypeError, "%s: too many classes", who);
        return -1;
    }
    for (int k = 0; k < count; k++) {
        if (!PyType_Check(b[k].given) || b[k].n > MAX_BOUND_SLOTS) {
            PyErr_Format(PyExc_TypeError, "%s: expected classes", who);
            return -1;
        }
        for (int i = 0; i < b[k].n; i++) {
            PyObject *descr = PyObject_GetAttrString(b[k].given, b[k].names[i]);
            if (descr == NULL)
                return -1;
            int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type)
                     && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
            if (ok)
                found[k][i] = ((PyMemberDescrObject *)descr)->d_member->offset;
            Py_DECREF(descr);
            if (!ok) {
                PyErr_Format(PyExc_TypeError, "%s: %s is not an object slot", who,
                             b[k].names[i]);
                return -1;
            }
        }
    }
    for (int k = 0; k < count; k++) {
        memcpy(b[k].offsets, found[k], (size_t)b[k].n * sizeof(Py_ssize_t));
        Py_INCREF(b[k].given);
        Py_XSETREF(*b[k].keep, (PyTypeObject *)b[k].given);
    }
    return 0;
}

PyObject *tcp_setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ft, *dt, *ct;
    long control, ack;
    if (!PyArg_ParseTuple(args, "OOOll", &ft, &dt, &ct, &control, &ack))
        return NULL;
    if (no_events == NULL && (no_events = PyTuple_New(0)) == NULL)
        return NULL;
    const Binding classes[3] = {{ft, flow_slots, F_N, flow_off, &flow_type},
                                {dt, dir_slots, D_N, dir_off, &dir_type},
                                {ct, conn_slots, C_N, conn_off, &conn_type}};
    if (bind_classes(classes, 3, "tcp_setup") < 0)
        return NULL;
    control_bits = control;
    ack_bit = ack;
    Py_RETURN_NONE;
}

/* Replace a slot's value (a new reference is taken of ``v``). */
static inline void set_slot(PyObject *obj, Py_ssize_t off, PyObject *v) {
    Py_INCREF(v);
    Py_XSETREF(SLOT(obj, off), v);
}

/* A per-direction counter list of exactly two ints (Connection.packets/.bytes). */
static inline int counters_ok(PyObject *v) {
    return v != NULL && PyList_CheckExact(v) && PyList_GET_SIZE(v) == 2;
}

/* counters[d] += n (as Python's ``counters[d] += n``): 0, or -1 with an error set. */
static int add_counter(PyObject *counters, Py_ssize_t d, Py_ssize_t n) {
    PyObject *amount = PyLong_FromSsize_t(n);
    if (amount == NULL)
        return -1;
    PyObject *sum = PyNumber_Add(PyList_GET_ITEM(counters, d), amount);
    Py_DECREF(amount);
    if (sum == NULL)
        return -1;
    return PyList_SetItem(counters, d, sum);     /* (steals sum, releases the old value) */
}

const char tcp_feed_doc[] =
    "tcp_feed(table, frame, ts, seg, gap_on_ack, event_type) -> () or [event], or None "
    "(nothing changed: TcpReassembler.feed decides)";

PyObject *tcp_feed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6 || flow_type == NULL)
        Py_RETURN_NONE;
    PyObject *table = args[0], *frame = args[1], *ts = args[2], *seg = args[3];
    int gap_on_ack = PyObject_IsTrue(args[4]);
    if (gap_on_ack < 0 || !PyDict_CheckExact(table) || !PyTuple_CheckExact(seg)
            || PyTuple_GET_SIZE(seg) != 6) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *key = PyTuple_GET_ITEM(seg, 0), *seq_o = PyTuple_GET_ITEM(seg, 1);
    PyObject *ack = PyTuple_GET_ITEM(seg, 2), *flags_o = PyTuple_GET_ITEM(seg, 3);
    PyObject *payload = PyTuple_GET_ITEM(seg, 4), *missing = PyTuple_GET_ITEM(seg, 5);
    if (!PyLong_CheckExact(flags_o) || !PyLong_CheckExact(seq_o) || !PyBytes_CheckExact(payload)
            || !PyLong_CheckExact(missing) || PyLong_AsLong(missing) != 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    long flags = PyLong_AsLong(flags_o);
    if (flags == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (flags & control_bits)
        Py_RETURN_NONE;
    PyObject *entry = PyDict_GetItemWithError(table, key);      /* borrowed */
    if (entry == NULL || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *flow = PyTuple_GET_ITEM(entry, 0), *d_o = PyTuple_GET_ITEM(entry, 1);
    if (!Py_IS_TYPE(flow, flow_type) || !PyLong_CheckExact(d_o))
        Py_RETURN_NONE;
    long d = PyLong_AsLong(d_o);
    PyObject *conn = SLOT(flow, flow_off[F_CONN]), *dirs = SLOT(flow, flow_off[F_DIRS]);
    if ((d != 0 && d != 1) || SLOT(flow, flow_off[F_CLOSED]) != Py_False
            || conn == NULL || !Py_IS_TYPE(conn, conn_type)
            || dirs == NULL || !PyTuple_CheckExact(dirs) || PyTuple_GET_SIZE(dirs) != 2)
        Py_RETURN_NONE;
    PyObject *ds = PyTuple_GET_ITEM(dirs, d), *peer = PyTuple_GET_ITEM(dirs, d ^ 1);
    if (!Py_IS_TYPE(ds, dir_type) || !Py_IS_TYPE(peer, dir_type))
        Py_RETURN_NONE;
    PyObject *packets = SLOT(conn, conn_off[C_PACKETS]), *bytes = SLOT(conn, conn_off[C_BYTES]);
    if (!counters_ok(packets) || !counters_ok(bytes))
        Py_RETURN_NONE;
    int acking = (flags & ack_bit) != 0;
    if (acking && gap_on_ack) {
        /* an acknowledged hole or FIN of the peer: feed reports it */
        PyObject *pending = SLOT(peer, dir_off[D_PENDING]), *fin = SLOT(peer, dir_off[D_FIN]);
        if (pending == NULL || !PyList_CheckExact(pending) || PyList_GET_SIZE(pending) != 0
                || fin != Py_None)
            Py_RETURN_NONE;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(payload);
    PyObject *nxt = NULL;
    long long next_offset = 0;
    if (n > 0) {
        /* the next bytes of an unignored direction, in order, nothing pending, no FIN */
        PyObject *base = SLOT(ds, dir_off[D_BASE]), *pending = SLOT(ds, dir_off[D_PENDING]);
        nxt = SLOT(ds, dir_off[D_NEXT]);
        if (SLOT(conn, conn_off[C_IGNORED]) != Py_False || base == NULL
                || !PyLong_CheckExact(base) || nxt == NULL || !PyLong_CheckExact(nxt)
                || pending == NULL || !PyList_CheckExact(pending)
                || PyList_GET_SIZE(pending) != 0 || SLOT(ds, dir_off[D_FIN]) != Py_None)
            Py_RETURN_NONE;
        int o1, o2, o3;
        next_offset = PyLong_AsLongLongAndOverflow(nxt, &o1);
        long long base_v = PyLong_AsLongLongAndOverflow(base, &o2);
        long long seq_v = PyLong_AsLongLongAndOverflow(seq_o, &o3);
        if (o1 || o2 || o3 || PyErr_Occurred() || next_offset < 0 || next_offset > ((long long)1 << 60)) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        /* Python: (seq - base - nxt) & 0xFFFFFFFF == 0 (two's complement, any sign) */
        if ((((unsigned long long)seq_v - (unsigned long long)base_v
              - (unsigned long long)next_offset) & 0xFFFFFFFFull) != 0)
            Py_RETURN_NONE;
    }
    /* every check passed: feed's changes, in feed's order */
    set_slot(conn, conn_off[C_LAST_TS], ts);
    set_slot(conn, conn_off[C_LAST_FRAME], frame);
    if (add_counter(packets, d, 1) < 0)
        return NULL;
    if (acking)
        set_slot(peer, dir_off[D_ACK], ack);
    if (n == 0) {
        Py_INCREF(no_events);
        return no_events;
    }
    if (add_counter(bytes, d, n) < 0)
        return NULL;
    Py_INCREF(nxt);                      /* the old offset: the event's and the sink's */
    PyObject *new_next = PyLong_FromLongLong(next_offset + n);
    if (new_next == NULL) {
        Py_DECREF(nxt);
        return NULL;
    }
    Py_XSETREF(SLOT(ds, dir_off[D_NEXT]), new_next);
    PyObject *call[6] = {NULL, d_o, nxt, payload, frame, ts};
    PyObject *sink = SLOT(conn, conn_off[C_SINK]);
    Py_INCREF(conn);                     /* (held across the consumer's code) */
    Py_INCREF(d_o);
    if (sink != NULL && sink != Py_None) {
        Py_INCREF(sink);
        PyObject *r = PyObject_Vectorcall(sink, call + 1, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                          NULL);
        Py_DECREF(sink);
        int taken = r == NULL ? -1 : PyObject_IsTrue(r);
        Py_XDECREF(r);
        if (taken != 0) {
            Py_DECREF(nxt);
            Py_DECREF(conn);
            Py_DECREF(d_o);
            if (taken < 0)
                return NULL;
            Py_INCREF(no_events);
            return no_events;
        }
    }
    call[0] = conn;
    call[1] = d_o;
    PyObject *event;
    if (direct_event(args[5])) {
        event = ev_type->tp_alloc(ev_type, 0);
        if (event != NULL)
            for (int i = 0; i < EV_N; i++)
                SLOT(event, ev_off[i]) = Py_NewRef(call[i]);
    } else {
        event = PyObject_Vectorcall(args[5], call, 6, NULL);
    }
    Py_DECREF(nxt);
    Py_DECREF(conn);
    Py_DECREF(d_o);
    if (event == NULL)
        return NULL;
    PyObject *out = PyList_New(1);
    if (out == NULL) {
        Py_DECREF(event);
        return NULL;
    }
    PyList_SET_ITEM(out, 0, event);
    return out;
}

/* ---- FrameSink: the C copy of kwsniff.engine.Engine._sink's closure ------------------

FrameSink(fallback, conv, framers, reorder, engine, ctx, summary, kafka, kafka07) is
called like the closure (d, offset, data, frame, ts) -> bool and does what it does:
steps aside (False) unless the conversation is Kafka, nothing waits to be released and
no sweep is due, then lets Framer.extend take the bytes and moves the run clock. Where
anything is not as expected (types, sizes) it calls ``fallback``, the closure itself,
before changing anything. sink_setup(framer_type, reorderer_type, context_type,
summary_type) binds the slot offsets it uses (the C Reorder is read directly). */

enum { FR_WANT_END, FR_LAST_OFFSET, FR_BUF, FR_SEGS, FR_N };
enum { RO_DIRTY, RO_READY, RO_N };
static const char *framer_slots[FR_N] = {"want_end", "last_offset", "buf", "segs"};
static const char *reorder_slots[RO_N] = {"dirty", "ready"};
static const char *now_slots[1] = {"now"};
static const char *last_ts_slots[1] = {"last_ts"};

static PyTypeObject *framer_type, *reorder_type, *ctx_type, *summary_type;
static Py_ssize_t framer_off[FR_N], reorder_off[RO_N], now_off, last_ts_off;
static PyObject *s_state, *s_next_sweep, *s_append;

PyObject *sink_setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ft, *rt, *ct, *st;
    if (!PyArg_ParseTuple(args, "OOOO", &ft, &rt, &ct, &st))
        return NULL;
    if (s_state == NULL && (s_state = PyUnicode_InternFromString("state")) == NULL)
        return NULL;
    if (s_next_sweep == NULL
            && (s_next_sweep = PyUnicode_InternFromString("_next_sweep")) == NULL)
        return NULL;
    if (s_append == NULL && (s_append = PyUnicode_InternFromString("append")) == NULL)
        return NULL;
    /* the reorder buffer: the C Reorder (read directly) or a class with slots */
    if (rt == (PyObject *)&ReorderType) {
        const Binding classes[3] = {{ft, framer_slots, FR_N, framer_off, &framer_type},
                                    {ct, now_slots, 1, &now_off, &ctx_type},
                                    {st, last_ts_slots, 1, &last_ts_off, &summary_type}};
        if (bind_classes(classes, 3, "sink_setup") < 0)
            return NULL;
        Py_INCREF(rt);
        Py_XSETREF(reorder_type, (PyTypeObject *)rt);
        Py_RETURN_NONE;
    }
    const Binding classes[4] = {{ft, framer_slots, FR_N, framer_off, &framer_type},
                                {rt, reorder_slots, RO_N, reorder_off, &reorder_type},
                                {ct, now_slots, 1, &now_off, &ctx_type},
                                {st, last_ts_slots, 1, &last_ts_off, &summary_type}};
    if (bind_classes(classes, 4, "sink_setup") < 0)
        return NULL;
    Py_RETURN_NONE;
}

enum { S_FALLBACK, S_CONV, S_FRAMERS, S_REORDER, S_ENGINE, S_CTX, S_SUMMARY, S_KAFKA,
       S_KAFKA07, S_N };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *refs[S_N];
} FrameSinkObject;

static PyObject *sink_fallback(FrameSinkObject *self, PyObject *const *args) {
    return PyObject_Vectorcall(self->refs[S_FALLBACK], args, 5, NULL);
}

int framer_extend(PyObject *framer, PyObject *offset_o, PyObject *data, PyObject *frame,
                  PyObject *ts) {
    if (framer_type == NULL || !Py_IS_TYPE(framer, framer_type) || !PyBytes_CheckExact(data))
        return 2;
    long long offset, want_end, last_offset;
    PyObject *want_o = SLOT(framer, framer_off[FR_WANT_END]);
    PyObject *last_o = SLOT(framer, framer_off[FR_LAST_OFFSET]);
    PyObject *buf = SLOT(framer, framer_off[FR_BUF]), *segs = SLOT(framer, framer_off[FR_SEGS]);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (small_int(offset_o, &offset) < 0 || small_int(want_o, &want_end) < 0 || last_o == NULL
            || buf == NULL || !PyByteArray_CheckExact(buf) || segs == NULL
            || offset > ((long long)1 << 60) || offset < -((long long)1 << 60))
        return 2;
    long long end = offset + n;
    if (end >= want_end || end == offset || last_o == Py_None)
        return 0;                        /* (None: offset != last_offset) */
    if (small_int(last_o, &last_offset) < 0)
        return 2;
    if (offset != last_offset)
        return 0;
    PyObject *end_o = PyLong_FromLongLong(end);
    PyObject *seg = end_o != NULL ? PyList_New(4) : NULL;
    if (seg == NULL) {
        Py_XDECREF(end_o);
        return -1;
    }
    PyList_SET_ITEM(seg, 0, Py_NewRef(offset_o));
    PyList_SET_ITEM(seg, 1, Py_NewRef(end_o));
    PyList_SET_ITEM(seg, 2, Py_NewRef(frame));
    PyList_SET_ITEM(seg, 3, Py_NewRef(ts));
    Py_XSETREF(SLOT(framer, framer_off[FR_LAST_OFFSET]), end_o);
    Py_ssize_t had = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, had + n) < 0) {
        Py_DECREF(seg);
        return -1;
    }
    memcpy(PyByteArray_AS_STRING(buf) + had, PyBytes_AS_STRING(data), (size_t)n);
    PyObject *appended = PyObject_CallMethodOneArg(segs, s_append, seg);   /* (a deque) */
    Py_DECREF(seg);
    if (appended == NULL)
        return -1;
    Py_DECREF(appended);
    return 1;
}

static PyObject *sink_call(PyObject *obj, PyObject *const *args, size_t nargsf,
                           PyObject *kwnames) {
    FrameSinkObject *self = (FrameSinkObject *)obj;
    if (kwnames != NULL || PyVectorcall_NARGS(nargsf) != 5 || framer_type == NULL)
        return PyObject_Vectorcall(self->refs[S_FALLBACK], args, nargsf, kwnames);
    PyObject *d_o = args[0], *offset_o = args[1], *data = args[2], *frame = args[3];
    PyObject *ts = args[4];
    PyObject **r = self->refs;
    /* the conversation is Kafka, nothing waits to be released */
    PyObject *state = PyObject_GetAttr(r[S_CONV], s_state);
    if (state == NULL)
        return NULL;
    int kafka = PyObject_RichCompareBool(state, r[S_KAFKA], Py_EQ);
    if (kafka == 0)
        kafka = PyObject_RichCompareBool(state, r[S_KAFKA07], Py_EQ);
    Py_DECREF(state);
    if (kafka < 0)
        return NULL;
    if (!kafka)
        Py_RETURN_FALSE;
    PyObject *reorder = r[S_REORDER];
    if (!Py_IS_TYPE(reorder, reorder_type))
        return sink_fallback(self, args);
    if (reorder_type == &ReorderType) {
        if (reorder_busy(reorder))
            Py_RETURN_FALSE;
    } else {
        PyObject *dirty = SLOT(reorder, reorder_off[RO_DIRTY]);
        PyObject *ready = SLOT(reorder, reorder_off[RO_READY]);
        if (dirty == NULL || ready == NULL)
            return sink_fallback(self, args);
        int is_dirty = PyObject_IsTrue(dirty);
        if (is_dirty < 0)
            return NULL;
        if (is_dirty) {
            int is_ready = PyObject_IsTrue(ready);
            if (is_ready < 0)
                return NULL;
            if (is_ready)
                Py_RETURN_FALSE;
        }
    }
    /* no sweep due */
    PyObject *nxt = PyObject_GetAttr(r[S_ENGINE], s_next_sweep);
    if (nxt == NULL)
        return NULL;
    int due = nxt == Py_None ? 1 : PyObject_RichCompareBool(ts, nxt, Py_GE);
    Py_DECREF(nxt);
    if (due < 0)
        return NULL;
    if (due)
        Py_RETURN_FALSE;
    /* Framer.extend: the next bytes, ending before the partial frame does */
    PyObject *framers = r[S_FRAMERS];
    long long d;
    if (small_int(d_o, &d) < 0 || !PyTuple_CheckExact(framers) || d < 0
            || d >= PyTuple_GET_SIZE(framers))
        return sink_fallback(self, args);
    PyObject *ctx = r[S_CTX], *summary = r[S_SUMMARY];
    if (!Py_IS_TYPE(ctx, ctx_type) || !Py_IS_TYPE(summary, summary_type)
            || SLOT(ctx, now_off) == NULL || SLOT(summary, last_ts_off) == NULL)
        return sink_fallback(self, args);
    int taken = framer_extend(PyTuple_GET_ITEM(framers, d), offset_o, data, frame, ts);
    if (taken < 0)
        return NULL;
    if (taken == 2)
        return sink_fallback(self, args);
    if (taken == 0)
        Py_RETURN_FALSE;
    /* taken: then the run clock's changes */
    int later = PyObject_RichCompareBool(ts, SLOT(ctx, now_off), Py_GT);
    if (later < 0)
        return NULL;
    if (later)
        set_slot(ctx, now_off, ts);
    PyObject *last = SLOT(summary, last_ts_off);
    later = last == Py_None ? 1 : PyObject_RichCompareBool(ts, last, Py_GT);
    if (later < 0)
        return NULL;
    if (later)
        set_slot(summary, last_ts_off, ts);
    Py_RETURN_TRUE;
}

static PyObject *sink_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (kwds != NULL && PyDict_GET_SIZE(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "FrameSink takes positional arguments only");
        return NULL;
    }
    if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != S_N) {
        PyErr_Format(PyExc_TypeError, "FrameSink takes %d arguments", S_N);
        return NULL;
    }
    FrameSinkObject *self = (FrameSinkObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    for (int i = 0; i < S_N; i++) {
        self->refs[i] = PyTuple_GET_ITEM(args, i);
        Py_INCREF(self->refs[i]);
    }
    self->vectorcall = sink_call;
    return (PyObject *)self;
}

static int sink_traverse(FrameSinkObject *self, visitproc visit, void *arg) {
    for (int i = 0; i < S_N; i++)
        Py_VISIT(self->refs[i]);
    return 0;
}

static int sink_clear(FrameSinkObject *self) {
    for (int i = 0; i < S_N; i++)
        Py_CLEAR(self->refs[i]);
    return 0;
}

static void sink_dealloc(FrameSinkObject *self) {
    PyObject_GC_UnTrack(self);
    sink_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject FrameSinkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kwsniff._speedups.FrameSink",
    .tp_doc = "FrameSink(fallback, conv, framers, reorder, engine, ctx, summary, kafka, "
              "kafka07): the C copy of kwsniff.engine.Engine._sink's closure",
    .tp_basicsize = sizeof(FrameSinkObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = sink_new,
    .tp_traverse = (traverseproc)sink_traverse,
    .tp_clear = (inquiry)sink_clear,
    .tp_dealloc = (destructor)sink_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FrameSinkObject, vectorcall),
};
