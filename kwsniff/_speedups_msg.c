/* Messages with deferred bodies, made in C (kwsniff._speedups).

msg_setup(message_type, fields) binds kwsniff.kafka.model.KafkaMessage: ``fields`` is a
tuple of (slot name, default, factory) in the dataclass's field order, where factory is
0 (the default object itself), 1 (a new dict) or 2 (a new list); every slot of the
class must be listed.

defer_request(raw, plans) and defer_response(raw, api_key, api_version, plans) make the
KafkaMessage that kwsniff.kafka.protocol.decode_request / decode_response make with
``defer`` true, for a message whose (api key, version) is in ``plans`` (a dict
{api_key << 16 | version: (header version, body decoder)} that kwsniff.kafka.decoding
fills with the plans of bodies the Python decoder deferred): the header decoded into a
new dict with the generated decoder's keys in its order, the body left in
``deferred = (body decoder, kind, version, body offset)``. They return None, for the
Python decoder to run, for anything else: an unknown (key, version), a frame too short
for its header, a client id longer than the frame, a negative length other than -1,
tagged header fields, a raw that is not bytes, or msg_setup not called. */

#include "_speedups.h"

#include <structmember.h>
#include <string.h>

#define MSG_MAX_SLOTS 32

static PyTypeObject *msg_type;
static Py_ssize_t msg_nslots;
static Py_ssize_t msg_off[MSG_MAX_SLOTS];
static PyObject *msg_default[MSG_MAX_SLOTS];
static int msg_factory[MSG_MAX_SLOTS];
/* the offsets of the slots set here */
static Py_ssize_t off_kind, off_raw, off_api_key, off_api_version, off_corr, off_client_id,
    off_header, off_header_version, off_body_offset, off_deferred;
static PyObject *s_request, *s_response, *k_api_key, *k_api_version, *k_corr, *k_client_id;


static Py_ssize_t find_offset(PyObject *names, const char *name) {
    for (Py_ssize_t i = 0; i < msg_nslots; i++)
        if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(names, i), name) == 0)
            return msg_off[i];
    return -1;
}

PyObject *msg_setup(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *type, *fields;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &type, &PyTuple_Type, &fields))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    Py_ssize_t declared = slot_count(type);
    if (declared < 0)
        return NULL;
    if (n > MSG_MAX_SLOTS || n != declared) {
        PyErr_SetString(PyExc_TypeError, "msg_setup: the fields must be every slot");
        return NULL;
    }
    PyObject *names = PyTuple_New(n);
    if (names == NULL)
        return NULL;
    Py_ssize_t offs[MSG_MAX_SLOTS];
    int facts[MSG_MAX_SLOTS];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *f = PyTuple_GET_ITEM(fields, i);
        long factory;
        if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 3
                || (factory = PyLong_AsLong(PyTuple_GET_ITEM(f, 2))) < 0 || factory > 2) {
            PyErr_Clear();
            Py_DECREF(names);
            PyErr_SetString(PyExc_TypeError, "msg_setup: fields are (name, default, factory)");
            return NULL;
        }
        PyObject *name = PyTuple_GET_ITEM(f, 0);
        PyObject *descr = PyObject_GetAttr(type, name);
        if (descr == NULL) {
            Py_DECREF(names);
            return NULL;
        }
        int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type)
                 && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
        if (ok)
            offs[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
        Py_DECREF(descr);
        if (!ok) {
            Py_DECREF(names);
            PyErr_SetString(PyExc_TypeError, "msg_setup: a field is not an object slot");
            return NULL;
        }
        facts[i] = (int)factory;
        Py_INCREF(name);
        PyTuple_SET_ITEM(names, i, name);
    }
    for (Py_ssize_t i = 0; i < msg_nslots; i++)
        Py_CLEAR(msg_default[i]);
    msg_nslots = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        msg_off[i] = offs[i];
        msg_factory[i] = facts[i];
        msg_default[i] = PyTuple_GET_ITEM(PyTuple_GET_ITEM(fields, i), 1);
        Py_INCREF(msg_default[i]);
    }
    off_kind = find_offset(names, "kind");
    off_raw = find_offset(names, "raw");
    off_api_key = find_offset(names, "api_key");
    off_api_version = find_offset(names, "api_version");
    off_corr = find_offset(names, "correlation_id");
    off_client_id = find_offset(names, "client_id");
    off_header = find_offset(names, "header");
    off_header_version = find_offset(names, "header_version");
    off_body_offset = find_offset(names, "body_offset");
    off_deferred = find_offset(names, "deferred");
    Py_DECREF(names);
    if (off_kind < 0 || off_raw < 0 || off_api_key < 0 || off_api_version < 0 || off_corr < 0
            || off_client_id < 0 || off_header < 0 || off_header_version < 0
            || off_body_offset < 0 || off_deferred < 0) {
        msg_nslots = 0;
        PyErr_SetString(PyExc_TypeError, "msg_setup: a message slot is missing");
        return NULL;
    }
    if ((s_request == NULL && (s_request = PyUnicode_InternFromString("request")) == NULL)
            || (s_response == NULL && (s_response = PyUnicode_InternFromString("response")) == NULL)
            || (k_api_key == NULL && (k_api_key = PyUnicode_InternFromString("RequestApiKey")) == NULL)
            || (k_api_version == NULL
                && (k_api_version = PyUnicode_InternFromString("RequestApiVersion")) == NULL)
            || (k_corr == NULL && (k_corr = PyUnicode_InternFromString("CorrelationId")) == NULL)
            || (k_client_id == NULL && (k_client_id = PyUnicode_InternFromString("ClientId")) == NULL))
        return NULL;
    Py_INCREF(type);
    Py_XSETREF(msg_type, (PyTypeObject *)type);
    Py_RETURN_NONE;
}

/* A new message with every slot at its default. */
static PyObject *new_message(void) {
    PyObject *m = msg_type->tp_alloc(msg_type, 0);
    if (m == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < msg_nslots; i++) {
        PyObject *v;
        if (msg_factory[i] == 1)
            v = PyDict_New();
        else if (msg_factory[i] == 2)
            v = PyList_New(0);
        else {
            v = msg_default[i];
            Py_INCREF(v);
        }
        if (v == NULL) {
            Py_DECREF(m);
            return NULL;
        }
        SLOT(m, msg_off[i]) = v;
    }
    return m;
}

/* Replace a slot's value (a new reference, stolen; NULL: an error is set). */
static int set_slot(PyObject *m, Py_ssize_t off, PyObject *v) {
    if (v == NULL)
        return -1;
    Py_XSETREF(SLOT(m, off), v);
    return 0;
}

/* (header version, body decoder) of ``plans`` for key/version, borrowed; NULL if none. */
static PyObject *plan_of(PyObject *plans, int key, int version) {
    PyObject *k = PyLong_FromLong(((long)(key & 0xFFFF) << 16) | (version & 0xFFFF));
    if (k == NULL)
        return NULL;
    PyObject *plan = PyDict_GetItemWithError(plans, k);
    Py_DECREF(k);
    if (plan == NULL || !PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) != 2
            || !PyLong_CheckExact(PyTuple_GET_ITEM(plan, 0)))
        return NULL;
    return plan;
}

/* The message's deferred body: (decoder, kind, version, pos). */
static int set_deferred(PyObject *m, PyObject *fn, PyObject *kind, int version,
                        Py_ssize_t pos) {
    PyObject *v = PyLong_FromLong(version), *p = PyLong_FromSsize_t(pos);
    if (v == NULL || p == NULL) {
        Py_XDECREF(v);
        Py_XDECREF(p);
        return -1;
    }
    Py_INCREF(fn);
    Py_INCREF(kind);
    PyObject *t = PyTuple_Pack(4, fn, kind, v, p);
    Py_DECREF(fn);
    Py_DECREF(kind);
    Py_DECREF(v);
    if (t == NULL) {
        Py_DECREF(p);
        return -1;
    }
    if (set_slot(m, off_body_offset, p) < 0) {
        Py_DECREF(t);
        return -1;
    }
    return set_slot(m, off_deferred, t);
}

const char defer_request_doc[] =
    "defer_request(raw, plans) -> KafkaMessage or None: decode_request(raw, defer=True) "
    "for a request whose body is deferred (see the module comment)";

PyObject *defer_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || msg_type == NULL || !PyBytes_CheckExact(args[0])
            || !PyDict_CheckExact(args[1]))
        Py_RETURN_NONE;
    PyObject *raw = args[0];
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(raw);
    Py_ssize_t len = PyBytes_GET_SIZE(raw);
    if (len < 10)
        Py_RETURN_NONE;
    int key = (int16_t)be16(p), version = (int16_t)be16(p + 2);
    int32_t corr = (int32_t)rd32(p + 4, 1);
    PyObject *plan = plan_of(args[1], key, version);
    if (plan == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    long hv = PyLong_AsLong(PyTuple_GET_ITEM(plan, 0));
    if (hv != 1 && hv != 2)
        Py_RETURN_NONE;
    int n = (int16_t)be16(p + 8);
    Py_ssize_t pos = 10;
    if (n < -1 || (n >= 0 && n > len - pos))
        Py_RETURN_NONE;
    if (n > 0)
        pos += n;
    if (hv == 2) {                    /* tagged fields: none, or the Python decoder */
        if (pos >= len || p[pos] != 0)
            Py_RETURN_NONE;
        pos += 1;
    }
    PyObject *client = n == -1 ? Py_NewRef(Py_None)
                               : PyUnicode_DecodeUTF8((const char *)p + 10, n, "replace");
    if (client == NULL)
        return NULL;
    PyObject *m = new_message();
    if (m == NULL) {
        Py_DECREF(client);
        return NULL;
    }
    PyObject *header = SLOT(m, off_header);
    PyObject *k = PyLong_FromLong(key), *v = PyLong_FromLong(version);
    PyObject *c = PyLong_FromLong(corr);
    int bad = k == NULL || v == NULL || c == NULL
        || PyDict_SetItem(header, k_api_key, k) < 0
        || PyDict_SetItem(header, k_api_version, v) < 0
        || PyDict_SetItem(header, k_corr, c) < 0
        || PyDict_SetItem(header, k_client_id, client) < 0;
    if (!bad) {
        Py_INCREF(s_request);
        Py_INCREF(raw);
        Py_INCREF(PyTuple_GET_ITEM(plan, 0));
        bad = set_slot(m, off_kind, s_request) < 0 || set_slot(m, off_raw, raw) < 0
            || set_slot(m, off_api_key, k) < 0 || set_slot(m, off_api_version, v) < 0
            || set_slot(m, off_corr, c) < 0 || set_slot(m, off_client_id, client) < 0
            || set_slot(m, off_header_version, PyTuple_GET_ITEM(plan, 0)) < 0;
        k = v = c = client = NULL;    /* stolen by set_slot */
        if (!bad)
            bad = set_deferred(m, PyTuple_GET_ITEM(plan, 1), s_request, version, pos) < 0;
    }
    Py_XDECREF(k);
    Py_XDECREF(v);
    Py_XDECREF(c);
    Py_XDECREF(client);
    if (bad) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

const char defer_response_doc[] =
    "defer_response(raw, api_key, api_version, plans) -> KafkaMessage or None: "
    "decode_response(raw, api_key, api_version, defer=True) for a response whose body "
    "is deferred (see the module comment)";

PyObject *defer_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4 || msg_type == NULL || !PyBytes_CheckExact(args[0])
            || !PyLong_CheckExact(args[1]) || !PyLong_CheckExact(args[2])
            || !PyDict_CheckExact(args[3]))
        Py_RETURN_NONE;
    PyObject *raw = args[0];
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(raw);
    Py_ssize_t len = PyBytes_GET_SIZE(raw);
    long key = PyLong_AsLong(args[1]), version = PyLong_AsLong(args[2]);
    if ((key == -1 || version == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (len < 4 || key < 0 || key > 0x7FFF || version < 0 || version > 0x7FFF)
        Py_RETURN_NONE;
    PyObject *plan = plan_of(args[3], (int)key, (int)version);
    if (plan == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    long hv = PyLong_AsLong(PyTuple_GET_ITEM(plan, 0));
    Py_ssize_t pos = 4;
    if (hv == 1) {
        if (pos >= len || p[pos] != 0)
            Py_RETURN_NONE;
        pos += 1;
    } else if (hv != 0) {
        Py_RETURN_NONE;
    }
    PyObject *m = new_message();
    if (m == NULL)
        return NULL;
    PyObject *c = PyLong_FromLong((int32_t)rd32(p, 1));
    int bad = c == NULL || PyDict_SetItem(SLOT(m, off_header), k_corr, c) < 0;
    if (!bad) {
        Py_INCREF(s_response);
        Py_INCREF(raw);
        Py_INCREF(args[1]);
        Py_INCREF(args[2]);
        Py_INCREF(PyTuple_GET_ITEM(plan, 0));
        bad = set_slot(m, off_kind, s_response) < 0 || set_slot(m, off_raw, raw) < 0
            || set_slot(m, off_api_key, args[1]) < 0 || set_slot(m, off_api_version, args[2]) < 0
            || set_slot(m, off_corr, c) < 0
            || set_slot(m, off_header_version, PyTuple_GET_ITEM(plan, 0)) < 0;
        c = NULL;
        if (!bad)
            bad = set_deferred(m, PyTuple_GET_ITEM(plan, 1), s_response, (int)version, pos) < 0;
    }
    Py_XDECREF(c);
    if (bad) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
