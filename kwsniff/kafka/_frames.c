/* kwsniff.kafka._frames: the byte-level kernel of kwsniff/kafka/framing.py and
kwsniff/kafka/plausible.py.

  frame_bodies(data, max_frame) -> (bodies, pos)
      The bodies (bytes, without the 4-byte size prefix) of the complete size-prefixed
      frames at the start of data, one after the other, and the index where the scan
      stopped: the end of data, a partial frame, or a size below 0 or above max_frame.
      Frame i starts at pos_i = sum of (4 + len(body)) of the bodies before it.
  header_fields(buf, pos, end, size, max_versions) -> (api_key, api_version, corr) or None
      plausible._header_fields_py (a request header of a size-byte frame at buf[pos],
      looking below end); NotImplemented where the reference must decide: a client id
      that is not printable ASCII, a buffer shorter than end, max_versions not a tuple
      of ints.
  request_fields(max_versions, raw): header_fields(raw, 0, len(raw), len(raw), ...).
*/
#include "_bytes.h"

static PyObject *frame_bodies(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    long long max_frame;
    if (nargs != 2 || small_int(args[1], &max_frame) < 0) {
        PyErr_SetString(PyExc_TypeError, "frame_bodies(data, max_frame: int)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *out = PyList_New(0);
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, pos = 0;
    while (out != NULL && n - pos >= 4) {
        int32_t size = (int32_t)be32(d + pos);
        if (size < 0 || size > max_frame || size > n - pos - 4)
            break;
        PyObject *body = PyBytes_FromStringAndSize((const char *)d + pos + 4, size);
        if (body == NULL || PyList_Append(out, body) < 0)
            Py_CLEAR(out);
        Py_XDECREF(body);
        pos += 4 + (Py_ssize_t)size;
    }
    PyBuffer_Release(&view);
    return out == NULL ? NULL : Py_BuildValue("(Nn)", out, pos);
}

/* whole: pos 0, end and size the buffer's length (errors raise instead of declining) */
static PyObject *hf_check(PyObject *buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t size,
                          PyObject *mv, int whole) {
    if (!whole && (end - pos < 10 || size < 10))
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0) {
        if (whole)
            return NULL;
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *out = Py_None;
    if (whole)
        end = size = view.len;
    if (end - pos < 10)
        goto done;
    if (pos < 0 || end > view.len) {
        out = Py_NotImplemented;
        goto done;
    }
    const unsigned char *q = (const unsigned char *)view.buf + pos;
    int api_key = (int16_t)be16(q), version = (int16_t)be16(q + 2);
    int32_t corr = (int32_t)be32(q + 4);
    int cid_len = (int16_t)be16(q + 8);
    if (api_key < 0 || api_key >= PyTuple_GET_SIZE(mv))
        goto done;
    long long hi;
    if (small_int(PyTuple_GET_ITEM(mv, api_key), &hi) < 0) {
        out = Py_NotImplemented;
        goto done;
    }
    if (version < 0 || version > hi || corr < 0)
        goto done;
    if (!(api_key == 7 && version == 0)) {          /* ControlledShutdown v0: no client id */
        if (cid_len < -1 || cid_len > size - 10
                || (cid_len > 0 && end - pos < 10 + (Py_ssize_t)cid_len))
            goto done;
        for (int i = 0; i < cid_len; i++)
            if (q[10 + i] < 0x20 || q[10 + i] > 0x7e) {
                out = Py_NotImplemented;
                goto done;
            }
    }
    PyBuffer_Release(&view);
    return int_triple(api_key, version, (long)corr);
done:
    PyBuffer_Release(&view);
    return Py_NewRef(out);
}

static PyObject *header_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5 || !PyTuple_CheckExact(args[4]))
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    Py_ssize_t size = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    return hf_check(args[0], pos, end, size, args[4], 0);
}

static PyObject *request_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyTuple_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "request_fields(max_versions: tuple, raw)");
        return NULL;
    }
    return hf_check(args[1], 0, -1, -1, args[0], 1);
}

static PyMethodDef methods[] = {
    {"frame_bodies", (PyCFunction)(void (*)(void))frame_bodies, METH_FASTCALL,
     "frame_bodies(data, max_frame) -> (bodies, pos): the complete size-prefixed frames "
     "at the start of data (see the module's doc)."},
    {"header_fields", (PyCFunction)(void (*)(void))header_fields, METH_FASTCALL,
     "header_fields(buf, pos, end, size, max_versions) -> (api_key, api_version, corr), "
     "None, or NotImplemented (the Python reference decides)."},
    {"request_fields", (PyCFunction)(void (*)(void))request_fields, METH_FASTCALL,
     "request_fields(max_versions, raw) -> header_fields(raw, 0, len(raw), len(raw), "
     "max_versions)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_frames", NULL, -1, methods};

PyMODINIT_FUNC PyInit__frames(void) { return PyModule_Create(&module); }
