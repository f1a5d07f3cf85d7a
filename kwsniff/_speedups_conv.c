/* The in-order path of a Kafka conversation, in C (kwsniff._speedups).

conv_setup(classes, constants, request_plans, response_plans, request_fields, framing)
binds this file to kwsniff.kafka.conversation: ``classes`` is (Conversation, Pending,
Exchange, ConnectionSummary, Context, Options, Framer, KafkaMessage, ApiHistory), whose
slots it reads and writes by offset; ``constants`` (KAFKA07, PAIRED, the protocol/kind
"kafka", the kind "acks0", KAFKA); the plans are kwsniff.kafka.decoding's (see
_speedups_msg.c); ``request_fields`` is kwsniff.kafka.plausible.request_fields;
``framing`` (Frame, QUIET, SYNCED) of kwsniff.kafka.framing.

conv_data(conv, d, offset, data, frame, ts) is Conversation.data for a Kafka
conversation: the framer's extend path (framer_extend) or, SYNCED with nothing
buffered outside probation, its cut path (Framer._fast with cut_frames, without a loss
of synchronisation), else Framer.data; then conv_frames and conv_refresh. Any other
conversation goes to data.

conv_refresh(conv) is Conversation._refresh for a Kafka conversation without SASL
tokens, orphans or out-of-order partial frames: open_key() (the oldest waiting request
that holds back the order, the framers' partial frames) to the reorder buffer's
set_open. Anything else runs _refresh.

conv_frames(conv, d, frames) does what Conversation._frames(d, frames) does, with the
same state changes in the same objects. For each frame it counts the bytes, then takes
these two cases itself:

* a request whose message defer_request makes (its body deferred: the engine's
  ``defer_bodies``), that passes request_fields, with no bytes missing or skipped
  before it, when no SASL token or 0.7 pairing is under way, no orphan waits, no
  request waits with its correlation id and the pending table has room: it is placed,
  counted (a new (api key, version) through the histories' Python methods) and waits;
* a response whose correlation id a waiting "kafka" request (in capture order) holds,
  whose message defer_response makes, with no bytes missing or skipped before it, when
  no SASL token or 0.7 pairing is under way and no older request waits: it becomes a
  paired Exchange in the reorder buffer.

Every other frame goes to the Python method (_request, _response or _legacy). All three
step aside for a conversation that is not exactly a bound Conversation, or whose
class's data, _request, _response, _refresh or open_key are not those bound (a
subclass, a test's patch). Every check is made before the first change. The framer's
problems are reported by the Python _framer_problems when there are some. */

#include "_speedups.h"

#include <structmember.h>

enum { CL_CONV, CL_PENDING, CL_EXCHANGE, CL_SUMMARY, CL_CONTEXT, CL_OPTIONS, CL_FRAMER,
       CL_MESSAGE, CL_HISTORY, CL_N };

enum { P_KEY, P_MSG, P_CORR, P_DONE, P_OVERTAKEN, P_CONV, P_KIND, P_UNORDERED, P_N };
enum { X_INDEX, X_STREAM, X_CLIENT, X_BROKER, X_STATUS, X_REQUEST, X_RESPONSE, X_PROTOCOL,
       X_PROBLEMS, X_N };
enum { S_CLIENT, S_BROKER, S_FROM_CLIENT, S_FROM_BROKER, S_REQUESTS, S_VERSIONS,
       S_STATUSES, S_N };
enum { CX_OPTIONS, CX_REORDER, CX_N };
enum { O_BODIES, O_DEFER, O_N };
enum { FR_PROBLEMS, FR_FILL_FRAME, FR_HELD, FR_POS, FR_BUF, FR_SEGS, FR_BASE, FR_WANT_END,
       FR_LAST_OFFSET, FR_STATE, FR_PROBATION, FR_MAX_FRAME, FR_PENDING_SKIP, FR_FRAMES_CUT,
       FR_N };
enum { M_API_KEY, M_API_VERSION, M_CORR, M_CLIENT_ID, M_BODY, M_BODY_OFFSET, M_FRAME_FIRST,
       M_FRAME_LAST, M_TS_FIRST, M_TS_LAST, M_STREAM_OFFSET, M_N };
enum { H_PAIRS, H_N };

static const char *pending_slots[P_N] = {"key", "msg", "corr", "done", "overtaken", "conv",
                                         "kind", "unordered"};
static const char *exchange_slots[X_N] = {"index", "stream", "client", "broker", "status",
                                          "request", "response", "protocol", "problems"};
static const char *summary_slots[S_N] = {"client", "broker", "bytes_from_client",
                                         "bytes_from_broker", "requests", "versions_used",
                                         "statuses"};
static const char *context_slots[CX_N] = {"options", "reorder"};
static const char *options_slots[O_N] = {"bodies", "defer_bodies"};
static const char *framer_slots[FR_N] = {"problems", "_fill_frame", "held", "pos", "buf",
                                         "segs", "base", "want_end", "last_offset", "state",
                                         "probation", "max_frame", "_pending_skip",
                                         "frames_cut"};
static const char *message_slots[M_N] = {"api_key", "api_version", "correlation_id",
                                         "client_id", "body", "body_offset", "frame_first",
                                         "frame_last", "ts_first", "ts_last", "stream_offset"};
static const char *history_slots[H_N] = {"pairs"};

static PyTypeObject *types[CL_N];
static Py_ssize_t p_off[P_N], x_off[X_N], s_off[S_N], cx_off[CX_N], o_off[O_N], fr_off[FR_N],
    m_off[M_N], h_off[H_N];

/* the conversation's slots read or written here */
enum { A_SASL_RAW, A_FIFO, A_CTX, A_SUMMARY, A_CONN, A_LAST_CLIENT_ID, A_LAST_PAIR,
       A_HISTORY, A_LAST_REQ_CORR, A_CORR_HI, A_ORPHANS, A_PENDING, A_LAST_RESP_CORR,
       A_CLIENT_DIR, A_STATE, A_FRAMERS, A_UNORDERED_PARTIAL, A_CLIENT_KEY, A_N };
static const char *attr_names[A_N] = {
    "sasl_raw", "fifo", "ctx", "summary", "conn", "last_client_id", "last_pair", "history",
    "last_req_corr", "corr_hi", "orphans", "pending", "last_resp_corr", "client_dir",
    "state", "framers", "unordered_partial", "client_key"};
static PyObject *attr[A_N];
static Py_ssize_t conv_off[A_N];

static PyObject *c_kafka07, *c_paired, *c_kafka, *c_acks0, *c_kafka_state;
static PyObject *frame_class, *quiet, *synced;      /* Frame, framing.QUIET, SYNCED */
static PyObject *plans_req, *plans_resp, *request_fields;
static PyObject *m_request, *m_response, *m_legacy, *m_framer_problems, *m_frames,
    *m_note_client_id, *m_add, *s_limit, *s_index, *s_a, *s_b, *one, *m_refresh,
    *m_open_key, *m_set_open, *m_note, *m_history, *m_data, *m_append;
/* the class's methods at setup */
static PyObject *bound_request, *bound_response, *bound_refresh, *bound_open_key, *bound_data;
static unsigned int methods_version;      /* (see methods_bound) */
/* requests and responses conv_frames took, data framer_fast took */
static unsigned long long taken[3];

const char conv_setup_doc[] =
    "conv_setup(classes, constants, request_plans, response_plans, request_fields, framing): "
    "bind conv_frames, conv_refresh and conv_data to kwsniff.kafka.conversation (see the "
    "module comment)";

static int intern_all(void) {
    static const struct { PyObject **where; const char *text; } names[] = {
        {&m_request, "_request"}, {&m_response, "_response"}, {&m_legacy, "_legacy"},
        {&m_framer_problems, "_framer_problems"}, {&m_frames, "_frames"},
        {&m_note_client_id, "note_client_id"}, {&m_add, "add"}, {&s_limit, "limit"},
        {&s_index, "index"}, {&s_a, "a"}, {&s_b, "b"}, {&m_refresh, "_refresh"},
        {&m_open_key, "open_key"}, {&m_set_open, "set_open"}, {&m_note, "note"},
        {&m_history, "history"}, {&m_data, "data"}, {&m_append, "append"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*names[i].where == NULL
                && (*names[i].where = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    for (int i = 0; i < A_N; i++)
        if (attr[i] == NULL && (attr[i] = PyUnicode_InternFromString(attr_names[i])) == NULL)
            return -1;
    if (one == NULL && (one = PyLong_FromLong(1)) == NULL)
        return -1;
    return 0;
}

/* The number of names in a class's __slots__, or -1 with an error. */
Py_ssize_t slot_count(PyObject *cls) {
    PyObject *slots = PyObject_GetAttrString(cls, "__slots__");
    if (slots == NULL)
        return -1;
    Py_ssize_t n = PyUnicode_Check(slots) ? 1 : PySequence_Size(slots);
    Py_DECREF(slots);
    return n;
}

PyObject *conv_setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *classes, *consts, *preq, *presp, *rf, *framing;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OO!", &PyTuple_Type, &classes, &PyTuple_Type, &consts,
                          &PyDict_Type, &preq, &PyDict_Type, &presp, &rf, &PyTuple_Type,
                          &framing))
        return NULL;
    if (PyTuple_GET_SIZE(framing) != 3 || !PyType_Check(PyTuple_GET_ITEM(framing, 0))
            || !PyType_IsSubtype((PyTypeObject *)PyTuple_GET_ITEM(framing, 0), &FrameType)
            || !PyTuple_CheckExact(PyTuple_GET_ITEM(framing, 1))
            || !PyLong_CheckExact(PyTuple_GET_ITEM(framing, 2))) {
        PyErr_SetString(PyExc_TypeError, "conv_setup: framing is (Frame, QUIET, SYNCED)");
        return NULL;
    }
    if (PyTuple_GET_SIZE(classes) != CL_N || PyTuple_GET_SIZE(consts) != 5) {
        PyErr_SetString(PyExc_TypeError, "conv_setup: 9 classes and 5 constants");
        return NULL;
    }
    for (int i = 0; i < 5; i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(consts, i))) {
            PyErr_SetString(PyExc_TypeError, "conv_setup: the constants are strings");
            return NULL;
        }
    if (intern_all() < 0)
        return NULL;
    PyObject *conv = PyTuple_GET_ITEM(classes, CL_CONV);
    if (!PyType_Check(conv)) {
        PyErr_SetString(PyExc_TypeError, "conv_setup: expected classes");
        return NULL;
    }
    /* every slot of a Pending and an Exchange is set here */
    Py_ssize_t np = slot_count(PyTuple_GET_ITEM(classes, CL_PENDING));
    Py_ssize_t nx = slot_count(PyTuple_GET_ITEM(classes, CL_EXCHANGE));
    if (np < 0 || nx < 0)
        return NULL;
    if (np != P_N || nx != X_N) {
        PyErr_SetString(PyExc_TypeError, "conv_setup: Pending or Exchange has other slots");
        return NULL;
    }
    PyObject *req = _PyType_Lookup((PyTypeObject *)conv, m_request);
    PyObject *resp = _PyType_Lookup((PyTypeObject *)conv, m_response);
    PyObject *refresh = _PyType_Lookup((PyTypeObject *)conv, m_refresh);
    PyObject *open_key = _PyType_Lookup((PyTypeObject *)conv, m_open_key);
    PyObject *data_m = _PyType_Lookup((PyTypeObject *)conv, m_data);
    if (req == NULL || resp == NULL || refresh == NULL || open_key == NULL || data_m == NULL) {
        PyErr_SetString(PyExc_TypeError, "conv_setup: no _request/_response/_refresh/open_key");
        return NULL;
    }
    const Binding b[CL_N] = {
        {conv, attr_names, A_N, conv_off, &types[CL_CONV]},
        {PyTuple_GET_ITEM(classes, CL_PENDING), pending_slots, P_N, p_off, &types[CL_PENDING]},
        {PyTuple_GET_ITEM(classes, CL_EXCHANGE), exchange_slots, X_N, x_off,
         &types[CL_EXCHANGE]},
        {PyTuple_GET_ITEM(classes, CL_SUMMARY), summary_slots, S_N, s_off, &types[CL_SUMMARY]},
        {PyTuple_GET_ITEM(classes, CL_CONTEXT), context_slots, CX_N, cx_off,
         &types[CL_CONTEXT]},
        {PyTuple_GET_ITEM(classes, CL_OPTIONS), options_slots, O_N, o_off, &types[CL_OPTIONS]},
        {PyTuple_GET_ITEM(classes, CL_FRAMER), framer_slots, FR_N, fr_off, &types[CL_FRAMER]},
        {PyTuple_GET_ITEM(classes, CL_MESSAGE), message_slots, M_N, m_off, &types[CL_MESSAGE]},
        {PyTuple_GET_ITEM(classes, CL_HISTORY), history_slots, H_N, h_off, &types[CL_HISTORY]},
    };
    if (bind_classes(b, CL_N, "conv_setup") < 0)
        return NULL;
    Py_XSETREF(bound_request, Py_NewRef(req));
    Py_XSETREF(bound_response, Py_NewRef(resp));
    Py_XSETREF(bound_refresh, Py_NewRef(refresh));
    Py_XSETREF(bound_open_key, Py_NewRef(open_key));
    Py_XSETREF(bound_data, Py_NewRef(data_m));
    methods_version = 0;
    Py_XSETREF(frame_class, Py_NewRef(PyTuple_GET_ITEM(framing, 0)));
    Py_XSETREF(quiet, Py_NewRef(PyTuple_GET_ITEM(framing, 1)));
    Py_XSETREF(synced, Py_NewRef(PyTuple_GET_ITEM(framing, 2)));
    Py_XSETREF(c_kafka07, Py_NewRef(PyTuple_GET_ITEM(consts, 0)));
    Py_XSETREF(c_paired, Py_NewRef(PyTuple_GET_ITEM(consts, 1)));
    Py_XSETREF(c_kafka, Py_NewRef(PyTuple_GET_ITEM(consts, 2)));
    Py_XSETREF(c_acks0, Py_NewRef(PyTuple_GET_ITEM(consts, 3)));
    Py_XSETREF(c_kafka_state, Py_NewRef(PyTuple_GET_ITEM(consts, 4)));
    Py_XSETREF(plans_req, Py_NewRef(preq));
    Py_XSETREF(plans_resp, Py_NewRef(presp));
    Py_XSETREF(request_fields, Py_NewRef(rf));
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ helpers */

/* The bound Conversation's data, _request, _response, _refresh and open_key are still
   those conv_setup found (no patch on it or a base class since): 1 or 0. The answer is
   kept for the class's version tag, which any change of the class or a base renews. */
static int methods_bound(void) {
    PyTypeObject *t = types[CL_CONV];
    if (t == NULL)
        return 0;
    if (methods_version != 0 && (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)
            && t->tp_version_tag == methods_version)
        return 1;
    int ok = _PyType_Lookup(t, m_request) == bound_request
        && _PyType_Lookup(t, m_response) == bound_response
        && _PyType_Lookup(t, m_refresh) == bound_refresh
        && _PyType_Lookup(t, m_open_key) == bound_open_key
        && _PyType_Lookup(t, m_data) == bound_data;
    methods_version = ok && (t->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) ? t->tp_version_tag : 0;
    return ok;
}

/* 1 when ``v`` is the int 0, 0 when it is another value. */
static inline int is_zero(PyObject *v) {
    long long x;
    return small_int(v, &x) == 0 && x == 0;
}

/* A slot of the conversation (borrowed); NULL when unset (no error is set). */
static inline PyObject *get(PyObject *conv, int a) {
    return SLOT(conv, conv_off[a]);
}

/* conv.<slot> = v; 0 (kept the -1-on-error shape of the other setters) */
static inline int put(PyObject *conv, int a, PyObject *v) {
    Py_XSETREF(SLOT(conv, conv_off[a]), Py_NewRef(v));
    return 0;
}

/* Truth of a borrowed value: 1, 0, -1 on error; a missing value (NULL without error)
   reads as 2, "not known", for the caller to decline. */
static inline int truth(PyObject *v) {
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 2;
    return PyObject_IsTrue(v);
}

/* ``obj`` is exactly of the bound class ``k``. */
#define IS(obj, k) ((obj) != NULL && Py_TYPE(obj) == types[k])

static inline void set_slot(PyObject *obj, Py_ssize_t off, PyObject *v) {
    Py_XSETREF(SLOT(obj, off), Py_NewRef(v));
}

/* Declared in _speedups.h; also the engine's RunSummary counters. */
int count_in(PyObject *d, PyObject *key) {
    PyObject *old = PyDict_GetItemWithError(d, key);
    if (old == NULL && PyErr_Occurred())
        return -1;
    PyObject *n = PyLong_FromLong(1);     /* CPython's cached small int: no allocation */
    if (n != NULL && old != NULL)
        Py_SETREF(n, PyNumber_Add(old, n));
    if (n == NULL)
        return -1;
    int r = PyDict_SetItem(d, key, n);
    Py_DECREF(n);
    return r;
}

int add_to_slot(PyObject *obj, Py_ssize_t off, PyObject *n) {
    PyObject *old = SLOT(obj, off);
    if (old == NULL) {
        PyErr_SetString(PyExc_AttributeError, "kwsniff._speedups: an unset int counter");
        return -1;
    }
    PyObject *by = n != NULL ? Py_NewRef(n) : PyLong_FromLong(1);
    if (by == NULL)
        return -1;
    PyObject *v = PyNumber_Add(old, by);
    Py_DECREF(by);
    if (v == NULL)
        return -1;
    Py_SETREF(SLOT(obj, off), v);
    return 0;
}

/* Whether a Produce request's acks (kwsniff.kafka.plausible.produce_acks on the body at
   ``pos``) is 0; a cut field reads as "not 0" (produce_acks: None). */
static int acks_zero(const unsigned char *p, Py_ssize_t len, long version, Py_ssize_t pos) {
    if (pos < 0)
        return 0;
    if (version >= 9) {
        uint64_t n = 0;
        int shift = 0;
        for (;;) {
            if (pos >= len)
                return 0;
            unsigned char b = p[pos++];
            n |= (uint64_t)(b & 0x7F) << shift;
            if (b < 0x80)
                break;
            shift += 7;
            if (shift > 35)
                return 0;
        }
        if (n > 0) {
            if (n - 1 > (uint64_t)len)
                return 0;
            pos += (Py_ssize_t)(n - 1);
        }
    } else if (version >= 3) {
        if (pos + 2 > len)
            return 0;
        int n = (int16_t)be16(p + pos);
        pos += 2 + (n > 0 ? n : 0);
    }
    if (pos + 2 > len)
        return 0;
    return (int16_t)be16(p + pos) == 0;
}

/* Conversation._place for a frame with nothing missing or skipped. */
static void place(PyObject *msg, FrameObject *f) {
    set_slot(msg, m_off[M_FRAME_FIRST], f->frame_first);
    set_slot(msg, m_off[M_FRAME_LAST], f->frame_last);
    set_slot(msg, m_off[M_TS_FIRST], f->ts_first);
    set_slot(msg, m_off[M_TS_LAST], f->ts_last);
    set_slot(msg, m_off[M_STREAM_OFFSET], f->offset);
}

/* Frame fields the fast paths need set: raw bytes, nothing missing or skipped. */
static inline int plain_frame(FrameObject *f) {
    return f->raw != NULL && PyBytes_CheckExact(f->raw) && is_zero(f->missing)
        && is_zero(f->skipped_before) && f->frame_first != NULL && f->frame_last != NULL
        && f->ts_first != NULL && f->ts_last != NULL && f->offset != NULL;
}

/* The context's options allow deferred bodies (bodies and defer_bodies true): 1, 0, -1. */
static int deferring(PyObject *ctx) {
    if (!IS(ctx, CL_CONTEXT))
        return 0;
    PyObject *opts = SLOT(ctx, cx_off[CX_OPTIONS]);
    if (!IS(opts, CL_OPTIONS))
        return 0;
    int t = truth(SLOT(opts, o_off[O_BODIES]));
    if (t != 1)
        return t < 0 ? -1 : 0;
    t = truth(SLOT(opts, o_off[O_DEFER]));
    return t == 2 ? 0 : t;
}

/* No SASL token or 0.7 pairing under way: fifo empty (and, for requests, sasl_raw
   false); 1, 0, -1. */
static int no_fifo(PyObject *conv, int request) {
    int t = truth(get(conv, A_FIFO));
    if (t != 0)
        return t < 0 ? -1 : 0;
    if (!request)
        return 1;
    t = truth(get(conv, A_SASL_RAW));
    return t < 0 ? -1 : t == 0;
}

/* ----------------------------------------------------------------- requests */

/* A request of another (api key, version) than the conversation's last: what _request
   does then (last_pair, the conversation's and the client's histories, client_key).
   0 or -1. */
static int note_pair(PyObject *conv, PyObject *ctx, PyObject *s, PyObject *history,
                     PyObject *pairs, PyObject *api_key, PyObject *ver, PyObject *cid,
                     PyObject *client_key) {
    PyObject *pair = PyTuple_Pack(2, api_key, ver);
    if (pair == NULL)
        return -1;
    int known = PyDict_Contains(pairs, pair);
    int r = known < 0 || put(conv, A_LAST_PAIR, pair) < 0 ? -1 : 0;
    Py_DECREF(pair);
    if (r < 0)
        return -1;
    PyObject *argv[3] = {history, api_key, ver};
    PyObject *res = PyObject_VectorcallMethod(m_note, argv, 3, NULL);
    if (res == NULL)
        return -1;
    Py_DECREF(res);
    PyObject *ck = client_key;
    Py_INCREF(ck);
    if (ck == Py_None) {
        int t = PyObject_IsTrue(cid);
        if (t < 0) {
            Py_DECREF(ck);
            return -1;
        }
        PyObject *chosen = t ? cid : SLOT(s, s_off[S_CLIENT]);
        if (chosen == NULL) {
            Py_DECREF(ck);
            PyErr_SetString(PyExc_AttributeError, "conv_frames: an unset summary client");
            return -1;
        }
        Py_SETREF(ck, Py_NewRef(chosen));
        if (put(conv, A_CLIENT_KEY, ck) < 0) {
            Py_DECREF(ck);
            return -1;
        }
    }
    if (!known) {
        PyObject *h = PyObject_CallMethodOneArg(ctx, m_history, ck);
        if (h == NULL) {
            Py_DECREF(ck);
            return -1;
        }
        PyObject *hargv[3] = {h, api_key, ver};
        res = PyObject_VectorcallMethod(m_note, hargv, 3, NULL);
        Py_DECREF(h);
        if (res == NULL) {
            Py_DECREF(ck);
            return -1;
        }
        Py_DECREF(res);
    }
    Py_DECREF(ck);
    return 0;
}

/* Conversation._request's paired-to-be path: 1 taken, 0 declined (nothing changed),
   -1 error. */
static int fast_request(PyObject *conv, FrameObject *f, PyObject *d) {
    if (!plain_frame(f))
        return 0;
    int t = no_fifo(conv, 1);
    if (t != 1)
        return t;
    PyObject *ctx = get(conv, A_CTX);
    if ((t = deferring(ctx)) != 1)
        return t;
    PyObject *raw = f->raw;
    PyObject *argv[2] = {raw, plans_req};
    PyObject *msg = defer_request(NULL, argv, 2);
    if (msg == NULL) {              /* (the Python path sees it again, and reports it) */
        PyErr_Clear();
        return 0;
    }
    if (!IS(msg, CL_MESSAGE) || SLOT(msg, m_off[M_BODY]) != Py_None) {
        Py_DECREF(msg);
        return 0;
    }
    int ret = 0;
    PyObject *key = NULL, *pending_item = NULL;
    PyObject *rf = PyObject_CallOneArg(request_fields, raw);
    if (rf == NULL)
        goto error;
    int plausible = rf != Py_None;
    Py_DECREF(rf);
    if (!plausible)
        goto done;
    PyObject *api_key = SLOT(msg, m_off[M_API_KEY]), *ver = SLOT(msg, m_off[M_API_VERSION]);
    PyObject *corr = SLOT(msg, m_off[M_CORR]);
    if (api_key == NULL || ver == NULL || corr == NULL || !PyLong_CheckExact(api_key)
            || !PyLong_CheckExact(ver) || !PyLong_CheckExact(corr))
        goto done;
    long k = PyLong_AsLong(api_key), v = PyLong_AsLong(ver);
    if (k == 17 && v == 0)          /* SaslHandshake v0 (never deferred) */
        goto done;
    PyObject *s = get(conv, A_SUMMARY), *conn = get(conv, A_CONN);
    PyObject *last_pair = get(conv, A_LAST_PAIR), *history = get(conv, A_HISTORY);
    PyObject *pending = get(conv, A_PENDING), *last_cid = get(conv, A_LAST_CLIENT_ID);
    PyObject *corr_hi = get(conv, A_CORR_HI);
    if (PyErr_Occurred())
        goto error;
    if (!IS(s, CL_SUMMARY) || conn == NULL || !IS(history, CL_HISTORY) || last_cid == NULL
            || corr_hi == NULL || pending == NULL || !PyDict_CheckExact(pending))
        goto done;
    /* the conversation's last (api key, version) again (counted in the history), or
       another pair (noted by the history's methods) */
    if (last_pair == NULL)
        goto done;
    PyObject *pairs = SLOT(history, h_off[H_PAIRS]);
    if (pairs == NULL || !PyDict_Check(pairs))
        goto done;
    int same_pair = PyTuple_CheckExact(last_pair) && PyTuple_GET_SIZE(last_pair) == 2
        && PyLong_CheckExact(PyTuple_GET_ITEM(last_pair, 0))
        && PyLong_CheckExact(PyTuple_GET_ITEM(last_pair, 1))
        && PyLong_AsLong(PyTuple_GET_ITEM(last_pair, 0)) == k
        && PyLong_AsLong(PyTuple_GET_ITEM(last_pair, 1)) == v;
    if (PyErr_Occurred())
        goto error;
    PyObject *client_key = get(conv, A_CLIENT_KEY);
    if (client_key == NULL)
        goto check_err;
    if (same_pair && (t = PyDict_Contains(pairs, last_pair)) != 1)
        goto check;
    if ((t = truth(get(conv, A_ORPHANS))) != 0)
        goto check;
    if ((t = PyDict_Contains(pending, corr)) != 0)
        goto check;
    PyObject *reorder = SLOT(ctx, cx_off[CX_REORDER]);
    if (reorder == NULL)
        goto done;
    PyObject *limit_o = PyObject_GetAttr(reorder, s_limit);
    if (limit_o == NULL)
        goto error;
    long limit = PyLong_CheckExact(limit_o) ? PyLong_AsLong(limit_o) : -1;
    Py_DECREF(limit_o);
    if (limit < 0 || PyDict_GET_SIZE(pending) + 1 > limit) {
        PyErr_Clear();
        goto done;
    }
    PyObject *kind = c_kafka;
    if (k == 0) {
        PyObject *bo = SLOT(msg, m_off[M_BODY_OFFSET]);
        Py_ssize_t start = bo != NULL && PyLong_CheckExact(bo) ? PyLong_AsSsize_t(bo) : -1;
        if (start <= 0) {
            PyErr_Clear();
            goto done;
        }
        if (acks_zero((const unsigned char *)PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw),
                      v, start))
            kind = c_acks0;
    }
    PyObject *index = PyObject_GetAttr(conn, s_index);
    if (index == NULL)
        goto error;
    key = PyTuple_Pack(4, f->frame_first, index, d, f->offset);
    Py_DECREF(index);
    if (key == NULL)
        goto error;
    pending_item = types[CL_PENDING]->tp_alloc(types[CL_PENDING], 0);
    if (pending_item == NULL)
        goto error;
    /* ---- every check passed: the changes _request makes, in its order ---- */
    place(msg, f);
    if (count_in(SLOT(s, s_off[S_REQUESTS]), api_key) < 0)
        goto error;
    PyObject *versions = SLOT(s, s_off[S_VERSIONS]);
    PyObject *used = PyDict_GetItemWithError(versions, api_key);
    if (used == NULL) {
        if (PyErr_Occurred())
            goto error;
        PyObject *l = PyList_New(1);
        if (l == NULL)
            goto error;
        PyList_SET_ITEM(l, 0, Py_NewRef(ver));
        t = PyDict_SetItem(versions, api_key, l);
        Py_DECREF(l);
        if (t < 0)
            goto error;
    } else {
        t = PySequence_Contains(used, ver);
        if (t < 0 || (t == 0 && PyList_Append(used, ver) < 0))
            goto error;
    }
    PyObject *cid = SLOT(msg, m_off[M_CLIENT_ID]);
    t = PyObject_RichCompareBool(cid, last_cid, Py_NE);
    if (t < 0)
        goto error;
    if (t) {
        if (put(conv, A_LAST_CLIENT_ID, cid) < 0)
            goto error;
        PyObject *r = PyObject_CallMethodOneArg(s, m_note_client_id, cid);
        if (r == NULL)
            goto error;
        Py_DECREF(r);
    }
    if (same_pair) {
        PyObject *n = PyObject_GetItem(pairs, last_pair);
        if (n == NULL)
            goto error;
        Py_SETREF(n, PyNumber_Add(n, one));
        if (n == NULL)
            goto error;
        t = PyObject_SetItem(pairs, last_pair, n);
        Py_DECREF(n);
        if (t < 0)
            goto error;
    } else if (note_pair(conv, ctx, s, history, pairs, api_key, ver, cid, client_key) < 0) {
        goto error;
    }
    if (put(conv, A_LAST_REQ_CORR, corr) < 0)
        goto error;
    t = corr_hi == Py_None ? 1 : PyObject_RichCompareBool(corr, corr_hi, Py_GT);
    if (t < 0 || (t && put(conv, A_CORR_HI, corr) < 0))
        goto error;
    PyObject *vals[P_N] = {key, msg, corr, Py_False, NULL, conv, kind, Py_False};
    PyObject *zero = PyLong_FromLong(0);
    if (zero == NULL)
        goto error;
    vals[P_OVERTAKEN] = zero;
    for (int i = 0; i < P_N; i++)
        SLOT(pending_item, p_off[i]) = Py_NewRef(vals[i]);
    Py_DECREF(zero);
    if (PyDict_SetItem(pending, corr, pending_item) < 0)
        goto error;
    ret = 1;
    goto done;
check_err:
    if (PyErr_Occurred())
        goto error;
    goto done;
check:
    if (t < 0)
        goto error;
    goto done;
error:
    ret = -1;
done:
    Py_XDECREF(pending_item);
    Py_XDECREF(key);
    Py_DECREF(msg);
    return ret;
}

/* ---------------------------------------------------------------- responses */

/* client or broker of an exchange: the summary's, else tuple(conn.<end>) (new ref). */
static PyObject *end_of(PyObject *s, int slot, PyObject *conn, PyObject *name) {
    PyObject *v = SLOT(s, s_off[slot]);
    int t = truth(v);
    if (t < 0)
        return NULL;
    if (t == 1)
        return Py_NewRef(v);
    PyObject *e = PyObject_GetAttr(conn, name);
    if (e == NULL)
        return NULL;
    Py_SETREF(e, PySequence_Tuple(e));
    return e;
}

/* Conversation._response's paired path: 1 taken, 0 declined (nothing changed), -1. */
static int fast_response(PyObject *conv, FrameObject *f) {
    if (!plain_frame(f))
        return 0;
    PyObject *raw = f->raw;
    if (PyBytes_GET_SIZE(raw) < 4)
        return 0;
    int t = no_fifo(conv, 0);
    if (t != 1)
        return t;
    PyObject *pending = get(conv, A_PENDING);
    if (pending == NULL || !PyDict_CheckExact(pending))
        return PyErr_Occurred() ? -1 : 0;
    const unsigned char *head = (const unsigned char *)PyBytes_AS_STRING(raw);
    PyObject *corr = PyLong_FromLong((int32_t)rd32(head, 1));
    if (corr == NULL)
        return -1;
    int ret = 0;
    PyObject *msg = NULL, *p = PyDict_GetItemWithError(pending, corr);
    PyObject *ex = NULL, *client = NULL, *broker = NULL, *problems = NULL, *index0 = NULL;
    if (p == NULL) {
        if (PyErr_Occurred())
            goto error;
        goto done;
    }
    Py_INCREF(p);
    if (!IS(p, CL_PENDING))
        goto done;
    if ((t = truth(SLOT(p, p_off[P_UNORDERED]))) != 0)
        goto check;
    PyObject *kind = SLOT(p, p_off[P_KIND]);
    if (kind == NULL || (t = PyObject_RichCompareBool(kind, c_kafka, Py_EQ)) != 1)
        goto check;
    PyObject *req = SLOT(p, p_off[P_MSG]), *pkey = SLOT(p, p_off[P_KEY]);
    if (!IS(req, CL_MESSAGE) || pkey == NULL)
        goto done;
    PyObject *api_key = SLOT(req, m_off[M_API_KEY]), *ver = SLOT(req, m_off[M_API_VERSION]);
    if (api_key == NULL || ver == NULL || !PyLong_CheckExact(api_key) || !PyLong_CheckExact(ver))
        goto done;
    PyObject *ctx = get(conv, A_CTX);
    if ((t = deferring(ctx)) != 1)
        goto check;
    PyObject *s = get(conv, A_SUMMARY), *conn = get(conv, A_CONN);
    if (PyErr_Occurred())
        goto error;
    if (!IS(s, CL_SUMMARY) || conn == NULL)
        goto done;
    PyObject *reorder = SLOT(ctx, cx_off[CX_REORDER]);
    if (reorder == NULL)
        goto done;
    /* _overtake would change nothing: the oldest other waiting request is not older */
    Py_ssize_t pos = 0;
    PyObject *k, *q;
    while (PyDict_Next(pending, &pos, &k, &q)) {
        if (q == p)
            continue;
        if (!IS(q, CL_PENDING) || SLOT(q, p_off[P_KEY]) == NULL)
            goto done;
        if ((t = PyObject_RichCompareBool(SLOT(q, p_off[P_KEY]), pkey, Py_GE)) != 1)
            goto check;
        break;
    }
    PyObject *argv[4] = {raw, api_key, ver, plans_resp};
    msg = defer_response(NULL, argv, 4);
    if (msg == NULL) {
        PyErr_Clear();
        goto done;
    }
    if (!IS(msg, CL_MESSAGE) || SLOT(msg, m_off[M_BODY]) != Py_None)
        goto done;
    client = end_of(s, S_CLIENT, conn, s_a);
    broker = end_of(s, S_BROKER, conn, s_b);
    index0 = PyLong_FromLong(0);
    problems = PyList_New(0);
    if (client == NULL || broker == NULL || index0 == NULL || problems == NULL)
        goto error;
    PyObject *stream = PyObject_GetAttr(conn, s_index);
    if (stream == NULL)
        goto error;
    ex = types[CL_EXCHANGE]->tp_alloc(types[CL_EXCHANGE], 0);
    if (ex == NULL) {
        Py_DECREF(stream);
        goto error;
    }
    /* ---- every check passed: the changes _response makes, in its order ---- */
    PyObject *vals[X_N] = {index0, stream, client, broker, c_paired, req, msg, c_kafka,
                           problems};
    for (int i = 0; i < X_N; i++)
        SLOT(ex, x_off[i]) = Py_NewRef(vals[i]);
    Py_DECREF(stream);
    if (put(conv, A_LAST_RESP_CORR, corr) < 0
            || PyDict_DelItem(pending, corr) < 0)
        goto error;
    set_slot(p, p_off[P_DONE], Py_True);
    place(msg, f);
    if (count_in(SLOT(s, s_off[S_STATUSES]), c_paired) < 0)
        goto error;
    PyObject *add_args[3] = {reorder, pkey, ex};
    PyObject *r = PyObject_VectorcallMethod(m_add, add_args,
                                            3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r == NULL)
        goto error;
    Py_DECREF(r);
    ret = 1;
    goto done;
check:
    if (t < 0)
        goto error;
    goto done;
error:
    ret = -1;
done:
    Py_XDECREF(ex);
    Py_XDECREF(client);
    Py_XDECREF(broker);
    Py_XDECREF(problems);
    Py_XDECREF(index0);
    Py_XDECREF(msg);
    Py_XDECREF(p);
    Py_DECREF(corr);
    return ret;
}

/* ------------------------------------------------------------------- frames */

const char conv_taken_doc[] =
    "conv_taken() -> (requests, responses, data): frames conv_frames took itself, data "
    "conv_data's framer path took (for tests)";

PyObject *conv_taken(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return Py_BuildValue("(KKK)", taken[0], taken[1], taken[2]);
}

const char conv_frames_doc[] =
    "conv_frames(conv, d, frames): Conversation._frames(d, frames) (see the module comment)";

/* obj.name(*args) for at most 7 arguments */
static PyObject *call_method(PyObject *obj, PyObject *name, PyObject *const *args,
                             Py_ssize_t n) {
    PyObject *argv[8] = {obj};
    if (n > 7) {
        PyErr_SetString(PyExc_SystemError, "call_method: too many arguments");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        argv[i + 1] = args[i];
    return PyObject_VectorcallMethod(name, argv, (size_t)(n + 1), NULL);
}

PyObject *conv_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "conv_frames(conv, d, frames)");
        return NULL;
    }
    PyObject *conv = args[0], *d = args[1], *frames = args[2];
    if (types[CL_CONV] == NULL || Py_TYPE(conv) != types[CL_CONV] || !PyList_CheckExact(frames)
            || !PyLong_CheckExact(d) || !methods_bound())
        return call_method(conv, m_frames, args + 1, 2);
    long dv = PyLong_AsLong(d);
    if (dv != 0 && dv != 1) {
        PyErr_Clear();
        return call_method(conv, m_frames, args + 1, 2);
    }
    PyObject *out = NULL, *client = NULL, *s = NULL;
    PyObject *client_dir = get(conv, A_CLIENT_DIR), *state = get(conv, A_STATE);
    s = get(conv, A_SUMMARY);
    if (client_dir == NULL || state == NULL || s == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "conv_frames: a conversation attribute is unset");
        s = NULL;                   /* (borrowed: not released below) */
        goto finish;
    }
    Py_INCREF(s);
    int is_client = PyObject_RichCompareBool(d, client_dir, Py_EQ);
    int legacy = PyObject_RichCompareBool(state, c_kafka07, Py_EQ);
    if (is_client < 0 || legacy < 0)
        goto finish;
    client = PyBool_FromLong(is_client);
    int counted = IS(s, CL_SUMMARY);
    Py_ssize_t counter = s_off[is_client ? S_FROM_CLIENT : S_FROM_BROKER];
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(frames); i++) {
        PyObject *f = Py_NewRef(PyList_GET_ITEM(frames, i));
        int r = 0;
        /* n = len(f.raw) + 4 */
        Py_ssize_t n;
        if (PyObject_TypeCheck(f, &FrameType) && ((FrameObject *)f)->raw != NULL) {
            n = PyObject_Size(((FrameObject *)f)->raw);
        } else {
            PyObject *raw = PyObject_GetAttrString(f, "raw");
            n = raw == NULL ? -1 : PyObject_Size(raw);
            Py_XDECREF(raw);
        }
        PyObject *size = n < 0 ? NULL : PyLong_FromSsize_t(n + 4);
        if (size == NULL)
            r = -1;
        else if (counted)
            r = add_to_slot(s, counter, size);
        else {
            PyObject *name = PyUnicode_FromString(is_client ? "bytes_from_client"
                                                            : "bytes_from_broker");
            PyObject *old = name == NULL ? NULL : PyObject_GetAttr(s, name);
            PyObject *sum = old == NULL ? NULL : PyNumber_Add(old, size);
            r = sum == NULL ? -1 : PyObject_SetAttr(s, name, sum);
            Py_XDECREF(name);
            Py_XDECREF(old);
            Py_XDECREF(sum);
        }
        Py_XDECREF(size);
        if (r == 0 && !legacy && PyObject_TypeCheck(f, &FrameType)) {
            r = is_client ? fast_request(conv, (FrameObject *)f, d)
                          : fast_response(conv, (FrameObject *)f);
            if (r == 1)
                taken[is_client ? 0 : 1]++;
        }
        if (r == 0) {
            PyObject *res;
            if (legacy) {
                PyObject *a[3] = {client, f, d};
                res = call_method(conv, m_legacy, a, 3);
            } else {
                PyObject *a[2] = {f, d};
                res = call_method(conv, is_client ? m_request : m_response, a, 2);
            }
            r = res == NULL ? -1 : 1;
            Py_XDECREF(res);
        }
        Py_DECREF(f);
        if (r < 0)
            goto finish;
    }
    /* _framer_problems(d) when the framer has some */
    PyObject *framers = get(conv, A_FRAMERS);
    PyObject *fr = framers != NULL && PyTuple_CheckExact(framers) && PyTuple_GET_SIZE(framers) == 2
        ? PyTuple_GET_ITEM(framers, dv) : NULL;
    if (PyErr_Occurred())
        goto finish;
    int some = 1;
    if (IS(fr, CL_FRAMER)) {
        PyObject *problems = SLOT(fr, fr_off[FR_PROBLEMS]);
        some = problems == NULL || !PyList_CheckExact(problems) || PyList_GET_SIZE(problems) > 0;
    }
    if (some) {
        PyObject *res = call_method(conv, m_framer_problems, &d, 1);
        if (res == NULL)
            goto finish;
        Py_DECREF(res);
    }
    out = Py_NewRef(Py_None);
finish:
    Py_XDECREF(client);
    Py_XDECREF(s);
    return out;
}

/* ----------------------------------------------------------------- release */

const char conv_refresh_doc[] =
    "conv_refresh(conv): Conversation._refresh() (reports open_key() to the reorder buffer)";

/* Framer.open_key() as (capture frame, stream offset) in frame and offset (borrowed, or
   new in *owned), 1; 0 for None; 2 when it needs the Python method; -1 on error. */
static int framer_open(PyObject *fr, PyObject **frame, PyObject **offset, PyObject **owned) {
    *owned = NULL;
    if (!IS(fr, CL_FRAMER))
        return 2;
    PyObject *fill = SLOT(fr, fr_off[FR_FILL_FRAME]);
    if (fill == NULL)
        return 2;
    if (fill != Py_None) {
        if (!PyObject_TypeCheck(fill, &FrameType) || ((FrameObject *)fill)->frame_first == NULL
                || ((FrameObject *)fill)->offset == NULL)
            return 2;
        *frame = ((FrameObject *)fill)->frame_first;
        *offset = ((FrameObject *)fill)->offset;
        return 1;
    }
    PyObject *held = SLOT(fr, fr_off[FR_HELD]);
    if (held == NULL || !PyList_CheckExact(held))
        return 2;
    if (PyList_GET_SIZE(held) > 0) {
        PyObject *h = PyList_GET_ITEM(held, 0);
        if (!PyObject_TypeCheck(h, &FrameType) || ((FrameObject *)h)->frame_first == NULL
                || ((FrameObject *)h)->offset == NULL)
            return 2;
        *frame = ((FrameObject *)h)->frame_first;
        *offset = ((FrameObject *)h)->offset;
        return 1;
    }
    PyObject *pos = SLOT(fr, fr_off[FR_POS]), *buf = SLOT(fr, fr_off[FR_BUF]);
    PyObject *segs = SLOT(fr, fr_off[FR_SEGS]), *base = SLOT(fr, fr_off[FR_BASE]);
    if (pos == NULL || buf == NULL || segs == NULL || base == NULL || !PyLong_CheckExact(pos)
            || !PyByteArray_CheckExact(buf) || !PyLong_CheckExact(base))
        return 2;
    Py_ssize_t p = PyLong_AsSsize_t(pos);
    if (p == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 2;
    }
    if (p >= PyByteArray_GET_SIZE(buf))
        return 0;
    Py_ssize_t nsegs = PyObject_Size(segs);
    if (nsegs < 0)
        return -1;
    if (nsegs == 0)
        return 0;
    /* off = base + pos; the capture frame of the segment holding it (_locate) */
    PyObject *off = PyNumber_Add(base, pos);
    if (off == NULL)
        return -1;
    PyObject *it = PyObject_GetIter(segs), *seg, *found = NULL, *last = NULL;
    if (it == NULL) {
        Py_DECREF(off);
        return -1;
    }
    int r = 1;
    while ((seg = PyIter_Next(it)) != NULL) {
        if (!PyList_CheckExact(seg) || PyList_GET_SIZE(seg) != 4) {
            Py_DECREF(seg);
            r = 2;
            break;
        }
        Py_XSETREF(last, seg);
        int gt = PyObject_RichCompareBool(PyList_GET_ITEM(seg, 1), off, Py_GT);
        if (gt < 0) {
            r = -1;
            break;
        }
        if (gt) {
            found = seg;
            break;
        }
    }
    Py_DECREF(it);
    if (r == 1 && PyErr_Occurred())
        r = -1;
    if (r == 1) {
        PyObject *seg_used = found != NULL ? found : last;
        *frame = PyList_GET_ITEM(seg_used, 2);
        *offset = off;
        *owned = off;
        off = NULL;
    }
    Py_XDECREF(last);
    Py_XDECREF(off);
    return r;
}

PyObject *conv_refresh(PyObject *self, PyObject *conv) {
    (void)self;
    if (types[CL_CONV] == NULL || Py_TYPE(conv) != types[CL_CONV] || !methods_bound())
        return PyObject_CallMethodNoArgs(conv, m_refresh);
    PyObject *out = NULL, *best = NULL, *index = NULL;
    int t = truth(get(conv, A_UNORDERED_PARTIAL));
    if (t == 0)
        t = truth(get(conv, A_FIFO));
    if (t == 0)
        t = truth(get(conv, A_ORPHANS));
    if (t != 0)
        goto python;
    PyObject *state = get(conv, A_STATE), *pending = get(conv, A_PENDING);
    PyObject *framers = get(conv, A_FRAMERS), *conn = get(conv, A_CONN);
    PyObject *ctx = get(conv, A_CTX);
    if (PyErr_Occurred())
        goto finish;
    if (state == NULL || pending == NULL || !PyDict_CheckExact(pending) || framers == NULL
            || !PyTuple_CheckExact(framers) || PyTuple_GET_SIZE(framers) != 2 || conn == NULL
            || !IS(ctx, CL_CONTEXT) || SLOT(ctx, cx_off[CX_REORDER]) == NULL)
        goto python;
    if ((t = PyObject_RichCompareBool(state, c_kafka_state, Py_EQ)) != 1)
        goto check;
    /* the oldest request that holds back the order */
    Py_ssize_t pos = 0;
    PyObject *k, *p;
    while (PyDict_Next(pending, &pos, &k, &p)) {
        if (!IS(p, CL_PENDING) || SLOT(p, p_off[P_KEY]) == NULL)
            goto python;
        if ((t = truth(SLOT(p, p_off[P_UNORDERED]))) != 0) {
            if (t == 1)
                continue;
            goto check;
        }
        best = Py_NewRef(SLOT(p, p_off[P_KEY]));
        break;
    }
    /* the framers' partial frames */
    for (int d = 0; d < 2; d++) {
        PyObject *frame, *offset, *owned;
        int r = framer_open(PyTuple_GET_ITEM(framers, d), &frame, &offset, &owned);
        if (r == 2)
            goto python;
        if (r < 0)
            goto finish;
        if (r == 0)
            continue;
        if (index == NULL && (index = PyObject_GetAttr(conn, s_index)) == NULL) {
            Py_XDECREF(owned);
            goto finish;
        }
        PyObject *dk = PyLong_FromLong(d);
        PyObject *key = dk == NULL ? NULL : PyTuple_Pack(4, frame, index, dk, offset);
        Py_XDECREF(dk);
        Py_XDECREF(owned);
        if (key == NULL)
            goto finish;
        int lt = best == NULL ? 1 : PyObject_RichCompareBool(key, best, Py_LT);
        if (lt < 0) {
            Py_DECREF(key);
            goto finish;
        }
        if (lt)
            Py_XSETREF(best, key);
        else
            Py_DECREF(key);
    }
    PyObject *argv[3] = {SLOT(ctx, cx_off[CX_REORDER]), conv, best != NULL ? best : Py_None};
    out = PyObject_VectorcallMethod(m_set_open, argv, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    goto finish;
check:
    if (t < 0)
        goto finish;
python:
    PyErr_Clear();
    out = PyObject_CallMethodNoArgs(conv, m_refresh);
finish:
    Py_XDECREF(best);
    Py_XDECREF(index);
    return out;
}

/* -------------------------------------------------------------------- data */

const char conv_data_doc[] =
    "conv_data(conv, d, offset, data, frame, ts): Conversation.data(d, offset, data, frame, "
    "ts) (see the module comment)";

/* obj.slot = a new int (stolen); 0, or -1 on error */
static int set_int_slot(PyObject *obj, Py_ssize_t off, long long v) {
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL)
        return -1;
    Py_XSETREF(SLOT(obj, off), o);
    return 0;
}

static int append_seg(PyObject *segs, long long start, long long end, PyObject *frame,
                      PyObject *ts) {
    PyObject *a = PyLong_FromLongLong(start), *b = PyLong_FromLongLong(end);
    PyObject *seg = a && b ? PyList_New(4) : NULL;
    if (seg == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return -1;
    }
    PyList_SET_ITEM(seg, 0, a);
    PyList_SET_ITEM(seg, 1, b);
    PyList_SET_ITEM(seg, 2, Py_NewRef(frame));
    PyList_SET_ITEM(seg, 3, Py_NewRef(ts));
    PyObject *argv[2] = {segs, seg};
    PyObject *r = PyObject_VectorcallMethod(m_append, argv, 2, NULL);
    Py_DECREF(seg);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Framer.data's in-order paths: the bytes only extend the partial frame (QUIET), or the
   framer is SYNCED with nothing buffered outside probation and the frames are cut
   straight out of ``data`` (Framer._fast) without a loss of synchronisation. *out: a
   new reference (QUIET or the list of frames); 1 done, 0 declined (nothing changed),
   -1 error. */
static int framer_fast(PyObject *fr, PyObject *offset_o, PyObject *data, PyObject *frame,
                       PyObject *ts, PyObject **out) {
    if (!IS(fr, CL_FRAMER) || !PyBytes_CheckExact(data))
        return 0;
    /* extend: the next bytes, ending before the partial frame does */
    int t = framer_extend(fr, offset_o, data, frame, ts);
    if (t == 1)
        *out = Py_NewRef(quiet);
    if (t != 0)
        return t == 2 ? 0 : t;
    long long offset, last_offset, max_frame, pos, cut;
    PyObject *buf = SLOT(fr, fr_off[FR_BUF]), *segs = SLOT(fr, fr_off[FR_SEGS]);
    if (small_int(offset_o, &offset) < 0 || offset < 0 || offset > (1LL << 60)
            || small_int(SLOT(fr, fr_off[FR_LAST_OFFSET]), &last_offset) < 0
            || buf == NULL || !PyByteArray_CheckExact(buf) || segs == NULL)
        return 0;
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    long long end = offset + n;
    if (n == 0 || offset != last_offset)
        return 0;
    PyObject *state = SLOT(fr, fr_off[FR_STATE]), *probation = SLOT(fr, fr_off[FR_PROBATION]);
    PyObject *skip = SLOT(fr, fr_off[FR_PENDING_SKIP]);
    if (state == NULL || probation == NULL || skip == NULL
            || small_int(SLOT(fr, fr_off[FR_POS]), &pos) < 0
            || small_int(SLOT(fr, fr_off[FR_MAX_FRAME]), &max_frame) < 0)
        return 0;
    t = PyObject_RichCompareBool(state, synced, Py_EQ);
    if (t != 1 || pos != PyByteArray_GET_SIZE(buf))
        return t < 0 ? -1 : 0;
    if ((t = PyObject_IsTrue(probation)) != 0)
        return t < 0 ? -1 : 0;
    PyObject *argv[7] = {frame_class, data, offset_o, frame, ts, SLOT(fr, fr_off[FR_MAX_FRAME]),
                         skip};
    PyObject *res = cut_frames(NULL, argv, 7);
    if (res == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (res == Py_None || !PyTuple_CheckExact(res) || PyTuple_GET_SIZE(res) != 2
            || !PyList_CheckExact(PyTuple_GET_ITEM(res, 0))
            || small_int(PyTuple_GET_ITEM(res, 1), &cut) < 0 || cut < 0 || cut > n) {
        Py_DECREF(res);
        return 0;
    }
    PyObject *frames = PyTuple_GET_ITEM(res, 0);
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(data);
    long long size = 0;
    if (n - cut >= 4) {
        size = (int32_t)rd32(p + cut, 1);
        if (size < 0 || size > max_frame) {      /* lost synchronisation: Python */
            Py_DECREF(res);
            return 0;
        }
    }
    /* ---- the changes data() and _fast() make ---- */
    Py_INCREF(frames);
    Py_DECREF(res);
    Py_ssize_t count = PyList_GET_SIZE(frames);
    PyObject *cut_n = PyLong_FromSsize_t(count);
    PyObject *total = cut_n ? PyNumber_Add(SLOT(fr, fr_off[FR_FRAMES_CUT]), cut_n) : NULL;
    Py_XDECREF(cut_n);
    if (total == NULL || set_int_slot(fr, fr_off[FR_LAST_OFFSET], end) < 0
            || set_int_slot(fr, fr_off[FR_WANT_END], 0) < 0
            || (count > 0 && set_int_slot(fr, fr_off[FR_PENDING_SKIP], 0) < 0))
        goto fail;
    Py_XSETREF(SLOT(fr, fr_off[FR_FRAMES_CUT]), total);
    total = NULL;
    if (cut < n) {
        PyObject *rest = PyByteArray_FromStringAndSize((const char *)p + cut, n - cut);
        if (rest == NULL)
            goto fail;
        Py_XSETREF(SLOT(fr, fr_off[FR_BUF]), rest);
        if (set_int_slot(fr, fr_off[FR_BASE], offset + cut) < 0
                || set_int_slot(fr, fr_off[FR_POS], 0) < 0
                || append_seg(segs, offset, end, frame, ts) < 0)
            goto fail;
        if (n - cut >= 4 && set_int_slot(fr, fr_off[FR_WANT_END], offset + cut + 4 + size) < 0)
            goto fail;
    } else if (set_int_slot(fr, fr_off[FR_BASE], end) < 0) {
        goto fail;
    }
    *out = frames;
    return 1;
fail:
    Py_XDECREF(total);
    Py_DECREF(frames);
    return -1;
}

PyObject *conv_data(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "conv_data(conv, d, offset, data, frame, ts)");
        return NULL;
    }
    PyObject *conv = args[0], *d = args[1];
    if (types[CL_CONV] == NULL || Py_TYPE(conv) != types[CL_CONV] || !PyLong_CheckExact(d)
            || !methods_bound())
        return call_method(conv, m_data, args + 1, 5);
    long dv = PyLong_AsLong(d);
    if (dv != 0 && dv != 1) {
        PyErr_Clear();
        return call_method(conv, m_data, args + 1, 5);
    }
    PyObject *state = get(conv, A_STATE), *framers = get(conv, A_FRAMERS);
    int kafka = state == NULL ? 0 : PyObject_RichCompareBool(state, c_kafka_state, Py_EQ);
    if (kafka < 0) {
        return NULL;
    }
    if (!kafka || framers == NULL || !PyTuple_CheckExact(framers)
            || PyTuple_GET_SIZE(framers) != 2) {
        PyErr_Clear();
        return call_method(conv, m_data, args + 1, 5);
    }
    PyObject *fr = Py_NewRef(PyTuple_GET_ITEM(framers, dv));
    PyObject *frames = NULL;
    int r = framer_fast(fr, args[2], args[3], args[4], args[5], &frames);
    if (r == 0)
        frames = call_method(fr, m_data, args + 2, 4);
    else if (r == 1)
        taken[2]++;
    Py_DECREF(fr);
    if (r < 0 || frames == NULL)
        return NULL;
    /* a partial frame grew: nothing to pair or release */
    if (frames == quiet) {
        Py_DECREF(frames);
        Py_RETURN_NONE;
    }
    int some = PyObject_IsTrue(frames);
    PyObject *res = NULL;
    if (some > 0) {
        PyObject *argv[3] = {conv, d, frames};
        res = conv_frames(NULL, argv, 3);
        if (res == NULL)
            some = -1;
        Py_XDECREF(res);
    }
    Py_DECREF(frames);
    if (some < 0)
        return NULL;
    return conv_refresh(NULL, conv);
}
