/*
 * kwsniff.capture._pcap: the byte-level kernel of the capture file walkers.
 *
 * Contract: each function cuts packet tuples (frame, ts, linktype, data, orig_len) out of
 * a buffer exactly as its Python reference does (the same values, the same float
 * arithmetic; data is a bytes copy) and returns them in a list with where it stopped.
 * Every decision about what a stop means (an error message, a truncation problem,
 * releasing pages, other block types) stays with the caller, in Python:
 *
 *  pcap_batch   records of a classic pcap file
 *               (reference: kwsniff.capture.pcap.PcapWalker._walk_py)
 *  pcapng_epbs  a run of well-formed Enhanced Packet Blocks of a pcapng section
 *               (reference: the EPB branch of kwsniff.capture.pcapng.PcapngWalker.walk)
 *
 * The module holds no state and imports nothing; kwsniff._compiled.kernel decides whether
 * it is used (tests/capture/test_pcap_kernel.py compares it with the references).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* statuses */
#define ST_END 0      /* the next record/block is incomplete or not ours: the walk stops */
#define ST_MORE 1     /* the batch is full or pos passed mark: call again */
#define ST_CORRUPT 2  /* a pcap record claims more than max_record bytes */

static inline uint32_t u32_at(const unsigned char *p, int big) {
    if (big)
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | p[0];
}

/* (frame, ts, linktype, data, orig) from new references (ts, linktype, data: stolen);
 * NULL with all of them released when one is NULL or the tuple cannot be made. */
static PyObject *packet_tuple(long long frame, PyObject *ts, PyObject *linktype,
                              const unsigned char *data, Py_ssize_t len, uint32_t orig) {
    PyObject *items[5] = {PyLong_FromLongLong(frame), ts, linktype,
                          PyBytes_FromStringAndSize((const char *)data, len),
                          PyLong_FromUnsignedLong(orig)};
    PyObject *out = NULL;
    int bad = 0;
    for (int i = 0; i < 5; i++)
        bad |= items[i] == NULL;
    if (!bad)
        out = PyTuple_New(5);
    if (out == NULL) {
        for (int i = 0; i < 5; i++)
            Py_XDECREF(items[i]);
        return NULL;
    }
    for (int i = 0; i < 5; i++)
        PyTuple_SET_ITEM(out, i, items[i]);
    return out;
}

/* Append a new reference (NULL: failed already) to list; 0, or -1 with an error set. */
static int append_new(PyObject *list, PyObject *item) {
    if (item == NULL)
        return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

PyDoc_STRVAR(pcap_batch_doc,
"pcap_batch(buf, pos, end, mark, big_endian, hdrlen, units, linktype, frame, max_record,\n"
"           max_items) -> (packets, pos, frame, status, incl)\n\n"
"Cut the pcap records of buf[pos:end] as PcapWalker._walk_py does: up to max_items\n"
"packet tuples (frame, ts, linktype, data, orig_len), frame counting on from frame,\n"
"ts = sec + frac / units. Stops once pos is beyond mark or the list is full\n"
"(status 1), at a record not wholly in buf[:end] (status 0), or at a record whose\n"
"captured length exceeds max_record (status 2; incl is that length, else -1).\n"
"hdrlen is the record header size (16, or 24 for the modified format).");

/* The empty result list of a walk whose arguments passed their checks (``ok``); on bad
   arguments ValueError "<name>: bad arguments". NULL (``view`` released) on failure. */
static PyObject *batch_start(Py_buffer *view, int ok, const char *name) {
    if (!ok) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: bad arguments", name);
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL)
        PyBuffer_Release(view);
    return out;
}

static PyObject *pcap_batch(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end, mark, hdrlen, max_items;
    int big;
    long long units, frame;
    unsigned long long max_record;
    PyObject *linktype;
    if (!PyArg_ParseTuple(args, "y*nnnpnLOLKn", &view, &pos, &end, &mark, &big, &hdrlen,
                          &units, &linktype, &frame, &max_record, &max_items))
        return NULL;
    PyObject *out = batch_start(&view, pos >= 0 && end <= view.len && hdrlen >= 16
                                && units > 0 && max_items > 0, "pcap_batch");
    if (out == NULL)
        return NULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    const double dunits = (double)units;
    int status = ST_END;
    long long bad = -1;
    Py_ssize_t count = 0;
    while (end - pos >= hdrlen) {
        const unsigned char *h = buf + pos;
        uint32_t sec = u32_at(h, big), frac = u32_at(h + 4, big);
        uint32_t incl = u32_at(h + 8, big), orig = u32_at(h + 12, big);
        if ((unsigned long long)incl > max_record) {
            status = ST_CORRUPT;
            bad = incl;
            break;
        }
        Py_ssize_t start = pos + hdrlen;
        Py_ssize_t stop = start + (Py_ssize_t)incl;
        if (stop > end)
            break;
        frame += 1;
        /* Python's sec + frac / units: int / int is correctly rounded, and so is this one
         * IEEE division of two exactly representable values (both < 2**53); the sum then
         * converts sec exactly, as float + int does */
        double ts = (double)sec + (double)frac / dunits;
        if (append_new(out, packet_tuple(frame, PyFloat_FromDouble(ts), Py_NewRef(linktype),
                                         buf + start, (Py_ssize_t)incl, orig)) < 0) {
            Py_DECREF(out);
            PyBuffer_Release(&view);
            return NULL;
        }
        pos = stop;
        if (++count >= max_items || pos > mark) {
            status = ST_MORE;
            break;
        }
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(NnLiL)", out, pos, frame, status, bad);
}

PyDoc_STRVAR(pcapng_epbs_doc,
"pcapng_epbs(buf, pos, end, mark, big_endian, ifaces, frame, max_block, max_items)\n"
"    -> (packets, pos, frame, status)\n\n"
"Cut the run of well-formed Enhanced Packet Blocks at buf[pos:end] as\n"
"PcapngWalker.walk does, for the section's interfaces ifaces (a list of\n"
"(linktype, units, tsoffset, snaplen) tuples): ts = ticks / units + tsoffset.\n"
"Status 1: the list is full (max_items) or pos passed mark; status 0: the block at\n"
"pos is anything else (another block type, an incomplete or inconsistent block, a\n"
"length over max_block, an undefined interface), which the caller walks itself.");

#define TWO53 9007199254740992.0

/* ticks / units + offset (units and offset Python ints), computed as Python does */
static PyObject *epb_ts(uint64_t ticks, PyObject *units, PyObject *offset) {
    double du = PyLong_AsDouble(units);
    if (du == -1.0 && PyErr_Occurred())
        return NULL;
    double doff = PyLong_AsDouble(offset);
    if (doff == -1.0 && PyErr_Occurred())
        return NULL;
    if (ticks <= ((uint64_t)1 << 53) && du > 0 && du <= TWO53)
        /* both exact as doubles: one IEEE division is Python's correctly rounded int / int,
         * and float + int converts the int as PyLong_AsDouble does */
        return PyFloat_FromDouble((double)ticks / du + doff);
    PyObject *num = PyLong_FromUnsignedLongLong(ticks);
    if (num == NULL)
        return NULL;
    PyObject *q = PyNumber_TrueDivide(num, units);
    Py_DECREF(num);
    if (q == NULL)
        return NULL;
    PyObject *ts = PyNumber_Add(q, offset);
    Py_DECREF(q);
    return ts;
}

static PyObject *pcapng_epbs(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end, mark, max_items;
    int big;
    long long frame;
    unsigned long long max_block;
    PyObject *ifaces;
    if (!PyArg_ParseTuple(args, "y*nnnpO!LKn", &view, &pos, &end, &mark, &big, &PyList_Type,
                          &ifaces, &frame, &max_block, &max_items))
        return NULL;
    PyObject *out = batch_start(&view, pos >= 0 && end <= view.len && max_items > 0,
                                "pcapng_epbs");
    if (out == NULL)
        return NULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    int status = ST_END;
    Py_ssize_t count = 0;
    while (end - pos >= 12) {
        const unsigned char *b = buf + pos;
        uint32_t btype = u32_at(b, big), blen = u32_at(b + 4, big);
        if (btype != 6 || blen < 32 || (blen & 3) || blen > max_block
                || (Py_ssize_t)blen > end - pos)
            break;
        uint32_t ifid = u32_at(b + 8, big), hi = u32_at(b + 12, big), lo = u32_at(b + 16, big);
        uint32_t cap = u32_at(b + 20, big), orig = u32_at(b + 24, big);
        if (cap > blen - 32 || u32_at(b + blen - 4, big) != blen
                || (Py_ssize_t)ifid >= PyList_GET_SIZE(ifaces))
            break;
        PyObject *iface = PyList_GET_ITEM(ifaces, ifid);
        if (!PyTuple_Check(iface) || PyTuple_GET_SIZE(iface) < 3)
            break;
        PyObject *ts = epb_ts(((uint64_t)hi << 32) | lo, PyTuple_GET_ITEM(iface, 1),
                              PyTuple_GET_ITEM(iface, 2));
        if (ts == NULL)
            goto fail;
        frame += 1;
        if (append_new(out, packet_tuple(frame, ts, Py_NewRef(PyTuple_GET_ITEM(iface, 0)),
                                         b + 28, (Py_ssize_t)cap, orig)) < 0)
            goto fail;
        pos += blen;
        if (++count >= max_items || pos > mark) {
            status = ST_MORE;
            break;
        }
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(NnLi)", out, pos, frame, status);
fail:
    Py_DECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"pcap_batch", pcap_batch, METH_VARARGS, pcap_batch_doc},
    {"pcapng_epbs", pcapng_epbs, METH_VARARGS, pcapng_epbs_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kwsniff.capture._pcap",
    "Byte-level kernel of kwsniff's pcap and pcapng walkers (see the C file's contract).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__pcap(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "STATUS_END", ST_END) < 0
            || PyModule_AddIntConstant(m, "STATUS_MORE", ST_MORE) < 0
            || PyModule_AddIntConstant(m, "STATUS_CORRUPT", ST_CORRUPT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
