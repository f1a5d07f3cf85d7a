/*
 * pipe_ship: the pipeline's shipping of one exchange (kwsniff.commands.parallel_pipe), in C.
 *
 * Contract: after ``pipe_setup(exchange_type, message_type, paired, kafka, keys)``
 * (the classes' slots, model.PAIRED, "kafka" and decoding.DEFERRABLE_APIS as a
 * frozenset), ``pipe_ship(buf, exchange)`` does what ``shippable(exchange)`` followed by
 * ``_Link.exchange``'s record does for an exchange whose stream the render worker knows:
 * when the exchange is shippable it appends the record (``_X_RECORD`` then the two
 * frames) to the bytearray ``buf`` and returns True; else it returns False and changes
 * nothing. An exchange or message that is not exactly of the bound classes, or a value
 * of another type than the record needs, gives None (the Python code then decides).
 *
 * ``pipe_take(buf, start, end, request_plans, response_plans, ends)`` is the render
 * worker's side: the exchange of the ``_X`` record whose payload is ``buf[start:end]``,
 * made as ``render_work`` makes it (decode_request and decode_response of the frames,
 * deferred, through defer_request and defer_response with the decoder's plans; the
 * timestamps set; ``Exchange(index, stream, client, broker, PAIRED, request, response)``
 * with ``ends[stream] == (client, broker)``), or None wherever that code must decide
 * (a plan not learnt yet, a message that is not deferred or has problems, a stream
 * without endpoints, a short record, any error), having changed nothing. pipe_setup
 * checks that the exchange class has no slot besides the nine this file sets.
 */
#include "_speedups.h"

#include <string.h>

enum { X_INDEX, X_STREAM, X_STATUS, X_REQUEST, X_RESPONSE, X_PROTOCOL, X_PROBLEMS, X_CLIENT,
       X_BROKER, X_N };
enum { M_RAW, M_API_KEY, M_API_VERSION, M_PROBLEMS, M_INFERRED, M_TS_LAST, M_MISSING,
       M_DEFERRED, M_N };
static const char *x_slots[X_N] = {"index", "stream", "status", "request", "response",
                                   "protocol", "problems", "client", "broker"};
static const char *m_slots[M_N] = {"raw", "api_key", "api_version", "problems", "inferred",
                                   "ts_last", "missing", "deferred"};
static PyTypeObject *x_type, *m_type;
static Py_ssize_t x_off[X_N], m_off[M_N];
static PyObject *paired, *kafka, *keys;

const char pipe_setup_doc[] =
    "pipe_setup(exchange_type, message_type, paired, kafka, keys): bind pipe_ship";

PyObject *pipe_setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *xt, *mt, *p, *k, *ks;
    if (!PyArg_ParseTuple(args, "OOUUO!", &xt, &mt, &p, &k, &PyFrozenSet_Type, &ks))
        return NULL;
    const Binding b[2] = {{xt, x_slots, X_N, x_off, &x_type},
                          {mt, m_slots, M_N, m_off, &m_type}};
    Py_ssize_t nslots = slot_count(xt);
    if (nslots < 0)
        return NULL;
    if (nslots != X_N) {
        PyErr_SetString(PyExc_TypeError, "pipe_setup: the exchange class has other slots");
        return NULL;
    }
    if (bind_classes(b, 2, "pipe_setup") < 0)
        return NULL;
    Py_XSETREF(paired, Py_NewRef(p));
    Py_XSETREF(kafka, Py_NewRef(k));
    Py_XSETREF(keys, Py_NewRef(ks));
    Py_RETURN_NONE;
}

/* the record: kind, payload size, index, stream, two timestamps, request size (the
   layout of parallel_pipe._X_RECORD: "<cIQQddI") */
#define HEAD_SIZE (1 + 4 + 8 + 8 + 8 + 8 + 4)
#define FIXED_SIZE (HEAD_SIZE - 5)

static int is_empty_list(PyObject *v) {
    return v != NULL && PyList_CheckExact(v) && PyList_GET_SIZE(v) == 0;
}

static void put_le(unsigned char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

const char pipe_ship_doc[] =
    "pipe_ship(buf, exchange) -> True (record appended), False (not shippable) or None "
    "(see _speedups_pipe.c)";

PyObject *pipe_ship(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyByteArray_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "pipe_ship(buf: bytearray, exchange)");
        return NULL;
    }
    PyObject *buf = args[0], *ex = args[1];
    if (x_type == NULL || Py_TYPE(ex) != x_type)
        Py_RETURN_NONE;
    PyObject *req = SLOT(ex, x_off[X_REQUEST]), *resp = SLOT(ex, x_off[X_RESPONSE]);
    if (req == NULL || resp == NULL)
        Py_RETURN_NONE;
    if (req == Py_None || resp == Py_None)
        Py_RETURN_FALSE;
    if (Py_TYPE(req) != m_type || Py_TYPE(resp) != m_type)
        Py_RETURN_NONE;
    PyObject *r[M_N], *s[M_N];
    for (int i = 0; i < M_N; i++) {
        r[i] = SLOT(req, m_off[i]);
        s[i] = SLOT(resp, m_off[i]);
        if (r[i] == NULL || s[i] == NULL)
            Py_RETURN_NONE;
    }
    /* shippable(): deferred bodies, paired kafka, no problems, a deferrable API,
       the same key and version, nothing missing, no inferred response */
    PyObject *status = SLOT(ex, x_off[X_STATUS]), *protocol = SLOT(ex, x_off[X_PROTOCOL]);
    PyObject *problems = SLOT(ex, x_off[X_PROBLEMS]);
    if (status == NULL || protocol == NULL || problems == NULL)
        Py_RETURN_NONE;
    if (r[M_DEFERRED] == Py_None || s[M_DEFERRED] == Py_None)
        Py_RETURN_FALSE;
    if (!PyUnicode_CheckExact(status) || !PyUnicode_CheckExact(protocol)
            || !PyList_CheckExact(problems) || !PyList_CheckExact(r[M_PROBLEMS])
            || !PyList_CheckExact(s[M_PROBLEMS]))
        Py_RETURN_NONE;
    if (PyUnicode_Compare(status, paired) != 0 || PyUnicode_Compare(protocol, kafka) != 0
            || !is_empty_list(problems) || !is_empty_list(r[M_PROBLEMS])
            || !is_empty_list(s[M_PROBLEMS]) || s[M_INFERRED] != Py_None) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_FALSE;
    }
    int member = PySet_Contains(keys, r[M_API_KEY]);
    if (member < 0)
        return NULL;
    if (!member)
        Py_RETURN_FALSE;
    for (int i = M_API_KEY; i <= M_API_VERSION; i++) {
        int same = PyObject_RichCompareBool(r[i], s[i], Py_EQ);
        if (same < 0)
            return NULL;
        if (!same)
            Py_RETURN_FALSE;
    }
    long long missing_r, missing_s, index, stream;
    if (small_int(r[M_MISSING], &missing_r) < 0 || small_int(s[M_MISSING], &missing_s) < 0)
        Py_RETURN_NONE;
    if (missing_r != 0 || missing_s != 0)
        Py_RETURN_FALSE;
    /* the record */
    PyObject *a = r[M_RAW], *b = s[M_RAW];
    if (!PyBytes_CheckExact(a) || !PyBytes_CheckExact(b) || !PyFloat_CheckExact(r[M_TS_LAST])
            || !PyFloat_CheckExact(s[M_TS_LAST])
            || small_int(SLOT(ex, x_off[X_INDEX]), &index) < 0 || index < 0
            || small_int(SLOT(ex, x_off[X_STREAM]), &stream) < 0 || stream < 0)
        Py_RETURN_NONE;
    Py_ssize_t na = PyBytes_GET_SIZE(a), nb = PyBytes_GET_SIZE(b);
    if (na > 0x7FFFFFFF || nb > 0x7FFFFFFF - FIXED_SIZE - na)
        Py_RETURN_NONE;
    Py_ssize_t at = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, at + HEAD_SIZE + na + nb) < 0)
        return NULL;
    unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(buf) + at;
    double ta = PyFloat_AS_DOUBLE(r[M_TS_LAST]), tb = PyFloat_AS_DOUBLE(s[M_TS_LAST]);
    uint64_t ua, ub;
    memcpy(&ua, &ta, 8);
    memcpy(&ub, &tb, 8);
    p[0] = 'X';
    put_le(p + 1, (uint64_t)(FIXED_SIZE + na + nb), 4);
    put_le(p + 5, (uint64_t)index, 8);
    put_le(p + 13, (uint64_t)stream, 8);
    put_le(p + 21, ua, 8);
    put_le(p + 29, ub, 8);
    put_le(p + 37, (uint64_t)na, 4);
    memcpy(p + HEAD_SIZE, PyBytes_AS_STRING(a), (size_t)na);
    memcpy(p + HEAD_SIZE + na, PyBytes_AS_STRING(b), (size_t)nb);
    Py_RETURN_TRUE;
}

static uint64_t get_le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* a message of the bound class, deferred, without problems */
static int clean_deferred(PyObject *m) {
    if (m == NULL || Py_TYPE(m) != m_type)
        return 0;
    PyObject *d = SLOT(m, m_off[M_DEFERRED]), *problems = SLOT(m, m_off[M_PROBLEMS]);
    return d != NULL && d != Py_None && is_empty_list(problems);
}

const char pipe_take_doc[] =
    "pipe_take(buf, start, end, request_plans, response_plans, ends) -> Exchange or None "
    "(see _speedups_pipe.c)";

PyObject *pipe_take(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6 || !PyByteArray_CheckExact(args[0]) || !PyDict_CheckExact(args[5])) {
        PyErr_SetString(PyExc_TypeError, "pipe_take(buf: bytearray, start, end, "
                        "request_plans, response_plans, ends: dict)");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]), end = PyLong_AsSsize_t(args[2]);
    if ((start == -1 || end == -1) && PyErr_Occurred())
        return NULL;
    if (x_type == NULL || start < 0 || end > PyByteArray_GET_SIZE(args[0])
            || end - start < FIXED_SIZE)
        Py_RETURN_NONE;
    const unsigned char *p = (const unsigned char *)PyByteArray_AS_STRING(args[0]) + start;
    uint64_t index = get_le(p, 8), stream = get_le(p + 8, 8);
    uint64_t ua = get_le(p + 16, 8), ub = get_le(p + 24, 8);
    Py_ssize_t na = (Py_ssize_t)get_le(p + 32, 4), total = end - start - FIXED_SIZE;
    if (na > total)
        Py_RETURN_NONE;
    double ta, tb;
    memcpy(&ta, &ua, 8);
    memcpy(&tb, &ub, 8);
    PyObject *out = NULL, *a = NULL, *b = NULL, *req = NULL, *resp = NULL, *stream_o = NULL;
    PyObject *ts_a = NULL, *ts_b = NULL, *index_o = NULL, *problems = NULL;
    if ((a = PyBytes_FromStringAndSize((const char *)p + FIXED_SIZE, na)) == NULL
            || (b = PyBytes_FromStringAndSize((const char *)p + FIXED_SIZE + na,
                                              total - na)) == NULL)
        goto done;
    PyObject *ra[2] = {a, args[3]};
    if ((req = defer_request(NULL, ra, 2)) == NULL || !clean_deferred(req))
        goto done;
    PyObject *key = SLOT(req, m_off[M_API_KEY]), *version = SLOT(req, m_off[M_API_VERSION]);
    if (key == NULL || version == NULL)
        goto done;
    PyObject *sa[4] = {b, key, version, args[4]};
    if ((resp = defer_response(NULL, sa, 4)) == NULL || !clean_deferred(resp))
        goto done;
    if ((stream_o = PyLong_FromUnsignedLongLong(stream)) == NULL)
        goto done;
    PyObject *pair = PyDict_GetItemWithError(args[5], stream_o);       /* borrowed */
    if (pair == NULL || !PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2)
        goto done;
    if ((ts_a = PyFloat_FromDouble(ta)) == NULL || (ts_b = PyFloat_FromDouble(tb)) == NULL
            || (index_o = PyLong_FromUnsignedLongLong(index)) == NULL
            || (problems = PyList_New(0)) == NULL)
        goto done;
    PyObject *ex = x_type->tp_alloc(x_type, 0);
    if (ex == NULL)
        goto done;
    Py_XSETREF(SLOT(req, m_off[M_TS_LAST]), Py_NewRef(ts_a));
    Py_XSETREF(SLOT(resp, m_off[M_TS_LAST]), Py_NewRef(ts_b));
    PyObject *vals[X_N] = {index_o, stream_o, paired, req, resp, kafka, problems,
                           PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)};
    for (int i = 0; i < X_N; i++)
        SLOT(ex, x_off[i]) = Py_NewRef(vals[i]);
    out = ex;
done:
    Py_XDECREF(a);
    Py_XDECREF(b);
    Py_XDECREF(req);
    Py_XDECREF(resp);
    Py_XDECREF(stream_o);
    Py_XDECREF(ts_a);
    Py_XDECREF(ts_b);
    Py_XDECREF(index_o);
    Py_XDECREF(problems);
    if (out == NULL) {
        PyErr_Clear();      /* (the Python code then meets it as it would) */
        Py_RETURN_NONE;
    }
    return out;
}
