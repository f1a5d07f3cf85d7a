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
 */
#include "_speedups.h"

#include <string.h>

enum { X_INDEX, X_STREAM, X_STATUS, X_REQUEST, X_RESPONSE, X_PROTOCOL, X_PROBLEMS, X_N };
enum { M_RAW, M_API_KEY, M_API_VERSION, M_PROBLEMS, M_INFERRED, M_TS_LAST, M_MISSING,
       M_DEFERRED, M_N };
static const char *x_slots[X_N] = {"index", "stream", "status", "request", "response",
                                   "protocol", "problems"};
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
