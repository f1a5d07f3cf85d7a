/* The engine's handling of stream bytes, in C (kwsniff._speedups).

engine_setup(engine_type, event_type, summary_type, context_type, constants) binds this
file to kwsniff.engine: ``event_type`` is kwsniff.tcp.StreamData, ``summary_type``
RunSummary, ``context_type`` the conversations' Context and ``constants`` (KAFKA,
KAFKA07, SWEEP_INTERVAL).

engine_data(engine, event) does what Engine._feed does with a StreamData event: the
conversation of the event's connection takes the bytes (conv_data, the accelerator's
Conversation.data), a conversation that settled as not Kafka is retired
(Engine._settled), the run clock and first/last timestamps move, an expired-request
sweep runs when due (Engine._sweep) and the exchanges that became releasable are
returned (Engine._release: the reorder buffer's drain and RunSummary.count, here when
both are the ones bound); else an empty list. An engine or event that is not exactly
of the bound classes goes to Engine._feed. */

#include "_speedups.h"

#include <structmember.h>

enum { EV_CONN, EV_DIRECTION, EV_OFFSET, EV_DATA, EV_FRAME, EV_TS, EV_N };
enum { RS_FIRST_TS, RS_LAST_TS, RS_EXCHANGES, RS_TOTAL, RS_REQUESTS, RS_RESPONSES,
       RS_INFERRED, RS_N };
enum { CT_NOW, CT_REORDER, CT_N };

static const char *event_slots[EV_N] = {"conn", "direction", "offset", "data", "frame", "ts"};
static const char *run_slots[RS_N] = {"first_ts", "last_ts", "exchanges", "exchanges_total",
                                      "requests", "responses", "inferred_responses"};
static const char *ctx_slots[CT_N] = {"now", "reorder"};

static PyTypeObject *engine_type, *event_type, *run_type, *ctx_type;
static Py_ssize_t ev_off[EV_N], rs_off[RS_N], ct_off[CT_N];

/* the engine's instance attributes read or written here */
enum { E_CONVS, E_CTX, E_SUMMARY, E_NEXT_SWEEP, E_N };
static const char *e_names[E_N] = {"convs", "ctx", "summary", "_next_sweep"};
static PyObject *e_attr[E_N];
static PyObject *s_state, *s_index, *m_feed, *m_settled, *m_sweep, *m_release;
static PyObject *c_kafka, *c_kafka07, *sweep_interval, *bound_feed, *bound_release,
                *bound_count;
static PyObject *m_count, *m_drain, *s_status, *s_request, *s_response, *s_inferred;
static unsigned int feed_version;

const char engine_setup_doc[] =
    "engine_setup(engine_type, event_type, summary_type, context_type, constants): bind "
    "engine_data to kwsniff.engine (see the module comment)";

PyObject *engine_setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *et, *vt, *st, *ct, *consts;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!", &PyType_Type, &et, &PyType_Type, &vt,
                          &PyType_Type, &st, &PyType_Type, &ct, &PyTuple_Type, &consts))
        return NULL;
    if (PyTuple_GET_SIZE(consts) != 3 || !PyUnicode_CheckExact(PyTuple_GET_ITEM(consts, 0))
            || !PyUnicode_CheckExact(PyTuple_GET_ITEM(consts, 1))
            || !PyFloat_CheckExact(PyTuple_GET_ITEM(consts, 2))) {
        PyErr_SetString(PyExc_TypeError, "engine_setup: constants are (KAFKA, KAFKA07, "
                                         "SWEEP_INTERVAL)");
        return NULL;
    }
    static const struct { PyObject **where; const char *text; } names[] = {
        {&s_state, "state"}, {&s_index, "index"}, {&m_feed, "_feed"},
        {&m_settled, "_settled"}, {&m_sweep, "_sweep"}, {&m_release, "_release"},
        {&m_count, "count"}, {&m_drain, "drain"}, {&s_status, "status"},
        {&s_request, "request"}, {&s_response, "response"}, {&s_inferred, "inferred"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*names[i].where == NULL
                && (*names[i].where = PyUnicode_InternFromString(names[i].text)) == NULL)
            return NULL;
    for (int i = 0; i < E_N; i++) {
        if (e_attr[i] == NULL && (e_attr[i] = PyUnicode_InternFromString(e_names[i])) == NULL)
            return NULL;
        PyObject *d = _PyType_Lookup((PyTypeObject *)et, e_attr[i]);
        if (d != NULL && Py_TYPE(d)->tp_descr_set != NULL) {
            PyErr_Format(PyExc_TypeError, "engine_setup: %s is a descriptor", e_names[i]);
            return NULL;
        }
    }
    if (((PyTypeObject *)et)->tp_dictoffset == 0) {
        PyErr_SetString(PyExc_TypeError, "engine_setup: the engine has no instance dict");
        return NULL;
    }
    PyObject *feed = _PyType_Lookup((PyTypeObject *)et, m_feed);
    if (feed == NULL) {
        PyErr_SetString(PyExc_TypeError, "engine_setup: the engine has no _feed");
        return NULL;
    }
    PyObject *release = _PyType_Lookup((PyTypeObject *)et, m_release);
    PyObject *count = _PyType_Lookup((PyTypeObject *)st, m_count);
    if (release == NULL || count == NULL) {
        PyErr_SetString(PyExc_TypeError, "engine_setup: no Engine._release or RunSummary.count");
        return NULL;
    }
    PyTypeObject *keep_engine = NULL;
    const Binding b[4] = {
        {et, NULL, 0, NULL, &keep_engine},
        {vt, event_slots, EV_N, ev_off, &event_type},
        {st, run_slots, RS_N, rs_off, &run_type},
        {ct, ctx_slots, CT_N, ct_off, &ctx_type},
    };
    if (bind_classes(b, 4, "engine_setup") < 0)
        return NULL;
    Py_XSETREF(engine_type, keep_engine);
    Py_XSETREF(bound_feed, Py_NewRef(feed));
    Py_XSETREF(bound_release, Py_NewRef(release));
    Py_XSETREF(bound_count, Py_NewRef(count));
    feed_version = 0;
    Py_XSETREF(c_kafka, Py_NewRef(PyTuple_GET_ITEM(consts, 0)));
    Py_XSETREF(c_kafka07, Py_NewRef(PyTuple_GET_ITEM(consts, 1)));
    Py_XSETREF(sweep_interval, Py_NewRef(PyTuple_GET_ITEM(consts, 2)));
    Py_RETURN_NONE;
}

/* a borrowed attribute of the engine's dict; NULL when unset (an error is set then) */
static PyObject *eget(PyObject *dict, int a) {
    PyObject *v = PyDict_GetItemWithError(dict, e_attr[a]);
    if (v == NULL && !PyErr_Occurred())
        PyErr_Format(PyExc_AttributeError, "engine_data: the engine has no %s", e_names[a]);
    return v;
}

/* slot = value when value > slot (or the slot is None and ``if_none``); 0 or -1 */
static int raise_slot(PyObject *obj, Py_ssize_t off, PyObject *value, int if_none) {
    PyObject *cur = SLOT(obj, off);
    int t;
    if (cur == NULL)
        t = 1;
    else if (cur == Py_None)
        t = if_none;
    else if ((t = PyObject_RichCompareBool(value, cur, Py_GT)) < 0)
        return -1;
    if (t)
        Py_XSETREF(SLOT(obj, off), Py_NewRef(value));
    return 0;
}

/* RunSummary.count(ex) for an exchange; 0 or -1 */
static int count_exchange(PyObject *summary, PyObject *ex) {
    PyObject *counts = SLOT(summary, rs_off[RS_EXCHANGES]);
    PyObject *status = PyObject_GetAttr(ex, s_status);
    if (status == NULL)
        return -1;
    int rc = -1;
    PyObject *req = NULL, *resp = NULL, *inferred = NULL;
    if (counts == NULL || !PyDict_CheckExact(counts)) {
        PyErr_SetString(PyExc_TypeError, "engine_data: the summary's exchanges is not a dict");
        goto done;
    }
    if (count_in(counts, status) < 0 || add_to_slot(summary, rs_off[RS_TOTAL], NULL) < 0)
        goto done;
    if ((req = PyObject_GetAttr(ex, s_request)) == NULL)
        goto done;
    if (req != Py_None && add_to_slot(summary, rs_off[RS_REQUESTS], NULL) < 0)
        goto done;
    if ((resp = PyObject_GetAttr(ex, s_response)) == NULL)
        goto done;
    if (resp != Py_None) {
        if (add_to_slot(summary, rs_off[RS_RESPONSES], NULL) < 0
                || (inferred = PyObject_GetAttr(resp, s_inferred)) == NULL)
            goto done;
        int yes = PyObject_IsTrue(inferred);
        if (yes < 0 || (yes && add_to_slot(summary, rs_off[RS_INFERRED], NULL) < 0))
            goto done;
    }
    rc = 0;
done:
    Py_DECREF(status);
    Py_XDECREF(req);
    Py_XDECREF(resp);
    Py_XDECREF(inferred);
    return rc;
}

/* Engine._release(False): the C reorder buffer's drain, each exchange counted by
   RunSummary.count; through the method when either is not the one bound. */
static PyObject *release(PyObject *engine, PyObject *reorder, PyObject *summary) {
    if (!Py_IS_TYPE(reorder, &ReorderType)
            || _PyType_Lookup(engine_type, m_release) != bound_release
            || _PyType_Lookup(run_type, m_count) != bound_count) {
        PyObject *argv[2] = {engine, Py_False};
        return PyObject_VectorcallMethod(m_release, argv, 2, NULL);
    }
    PyObject *argv[2] = {reorder, Py_False};
    PyObject *out = PyObject_VectorcallMethod(m_drain, argv, 2, NULL);
    if (out == NULL)
        return NULL;
    if (!PyList_CheckExact(out)) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_TypeError, "engine_data: drain did not give a list");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(out); i++)
        if (count_exchange(summary, PyList_GET_ITEM(out, i)) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    return out;
}

const char engine_data_doc[] =
    "engine_data(engine, event) -> list of exchanges: Engine._feed(event) for a StreamData "
    "event (see the module comment)";

PyObject *engine_data(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "engine_data(engine, event)");
        return NULL;
    }
    PyObject *engine = args[0], *ev = args[1];
    int bound = engine_type != NULL && Py_TYPE(engine) == engine_type;
    if (bound && !(feed_version != 0 && (engine_type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)
                   && engine_type->tp_version_tag == feed_version)) {
        /* Engine._feed as bound (no patch since), kept for the class's version tag */
        bound = _PyType_Lookup(engine_type, m_feed) == bound_feed;
        feed_version = bound && (engine_type->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG)
            ? engine_type->tp_version_tag : 0;
    }
    if (!bound || Py_TYPE(ev) != event_type) {
        PyObject *argv[2] = {engine, ev};
        return PyObject_VectorcallMethod(m_feed, argv, 2, NULL);
    }
    PyObject *vals[EV_N];
    for (int i = 0; i < EV_N; i++) {
        vals[i] = SLOT(ev, ev_off[i]);
        if (vals[i] == NULL) {
            PyErr_SetString(PyExc_AttributeError, "engine_data: an unset event slot");
            return NULL;
        }
    }
    PyObject *dict = PyObject_GenericGetDict(engine, NULL);
    if (dict == NULL)
        return NULL;
    PyObject *out = NULL, *conv = NULL;
    PyObject *convs = eget(dict, E_CONVS);
    if (convs == NULL)
        goto finish;
    PyObject *index = PyObject_GetAttr(vals[EV_CONN], s_index);
    if (index == NULL)
        goto finish;
    conv = convs != NULL && PyDict_CheckExact(convs) ? PyDict_GetItemWithError(convs, index)
                                                       : NULL;
    Py_DECREF(index);
    if (conv == NULL) {
        if (PyErr_Occurred())
            goto finish;
        if (!PyDict_CheckExact(convs)) {
            PyErr_SetString(PyExc_TypeError, "engine_data: convs is not a dict");
            goto finish;
        }
        out = PyList_New(0);
        goto finish;
    }
    Py_INCREF(conv);
    /* the conversation takes the bytes */
    PyObject *cargs[6] = {conv, vals[EV_DIRECTION], vals[EV_OFFSET], vals[EV_DATA],
                          vals[EV_FRAME], vals[EV_TS]};
    PyObject *r = conv_data(NULL, cargs, 6);
    if (r == NULL)
        goto finish;
    Py_DECREF(r);
    PyObject *ts = vals[EV_TS];
    /* a conversation that is not Kafka (any more) is retired */
    PyObject *state = PyObject_GetAttr(conv, s_state);
    if (state == NULL)
        goto finish;
    int kafka = PyObject_RichCompareBool(state, c_kafka, Py_EQ);
    if (kafka == 0)
        kafka = PyObject_RichCompareBool(state, c_kafka07, Py_EQ);
    Py_DECREF(state);
    if (kafka < 0)
        goto finish;
    if (!kafka) {
        PyObject *argv[2] = {engine, conv};
        r = PyObject_VectorcallMethod(m_settled, argv, 2, NULL);
        if (r == NULL)
            goto finish;
        Py_DECREF(r);
    }
    /* the run clock, first and last timestamps, the sweep */
    PyObject *ctx = eget(dict, E_CTX), *summary = eget(dict, E_SUMMARY);
    if (ctx == NULL || summary == NULL)
        goto finish;
    if (Py_TYPE(ctx) != ctx_type || Py_TYPE(summary) != run_type) {
        PyErr_SetString(PyExc_TypeError, "engine_data: unexpected context or summary");
        goto finish;
    }
    if (raise_slot(ctx, ct_off[CT_NOW], ts, 0) < 0)
        goto finish;
    PyObject *first = SLOT(summary, rs_off[RS_FIRST_TS]);
    if (first == NULL || first == Py_None) {
        Py_XSETREF(SLOT(summary, rs_off[RS_FIRST_TS]), Py_NewRef(ts));
        PyObject *nxt = PyNumber_Add(ts, sweep_interval);
        if (nxt == NULL)
            goto finish;
        int bad = PyDict_SetItem(dict, e_attr[E_NEXT_SWEEP], nxt);
        Py_DECREF(nxt);
        if (bad < 0)
            goto finish;
    }
    if (raise_slot(summary, rs_off[RS_LAST_TS], ts, 1) < 0)
        goto finish;
    PyObject *nxt = eget(dict, E_NEXT_SWEEP);
    if (nxt == NULL)
        goto finish;
    if (nxt != Py_None) {
        int due = PyObject_RichCompareBool(ts, nxt, Py_GE);
        if (due < 0)
            goto finish;
        if (due) {
            PyObject *argv[2] = {engine, ts};
            r = PyObject_VectorcallMethod(m_sweep, argv, 2, NULL);
            if (r == NULL)
                goto finish;
            Py_DECREF(r);
        }
    }
    /* what became releasable */
    PyObject *reorder = SLOT(ctx, ct_off[CT_REORDER]);
    if (reorder == NULL) {
        PyErr_SetString(PyExc_AttributeError, "engine_data: the context has no reorder");
        goto finish;
    }
    int busy;
    if (Py_IS_TYPE(reorder, &ReorderType)) {
        busy = reorder_busy(reorder);
    } else {
        PyObject *dirty = PyObject_GetAttrString(reorder, "dirty");
        busy = dirty == NULL ? -1 : PyObject_IsTrue(dirty);
        Py_XDECREF(dirty);
        if (busy > 0) {
            PyObject *ready = PyObject_GetAttrString(reorder, "ready");
            busy = ready == NULL ? -1 : PyObject_IsTrue(ready);
            Py_XDECREF(ready);
        }
    }
    if (busy < 0)
        goto finish;
    if (busy) {
        out = release(engine, reorder, summary);
    } else {
        out = PyList_New(0);
    }
finish:
    Py_XDECREF(conv);
    Py_DECREF(dict);
    return out;
}
