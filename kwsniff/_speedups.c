/*
 * kwsniff._speedups: the optional compiled accelerator of the per-packet path.
 *
 * Contract: every function here returns exactly what its pure-Python counterpart
 * returns for the same input (the same objects, the same values, the same float
 * arithmetic), so output never depends on whether this module was built.
 * kwsniff.accel decides whether it is used (KWSNIFF_PURE=1 turns it off); the tests
 * compare both paths on the sample captures and on random and mutated inputs.
 *
 *  pcap_batch    pcap record walking   (kwsniff.capture.pcap.PcapWalker.walk)
 *  eth_ipv4_tcp  the Ethernet/IPv4/TCP fast path of kwsniff.tcp.packet.PacketParser.parse
 *
 * The module imports nothing from kwsniff and holds no state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Bump when a function's signature or meaning changes; kwsniff.accel ignores a module
 * built from another version (a stale build never silently changes behaviour). */
#define SPEEDUPS_VERSION 1

/* pcap_batch statuses */
#define ST_END 0      /* fewer bytes left than a whole record: the walk stops here */
#define ST_MORE 1     /* the batch is full or pos passed mark: call again */
#define ST_CORRUPT 2  /* a record claims more than max_record bytes: the walk stops */

static inline uint32_t rd32(const unsigned char *p, int big) {
    if (big)
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | p[0];
}

static inline unsigned be16(const unsigned char *p) { return ((unsigned)p[0] << 8) | p[1]; }

PyDoc_STRVAR(pcap_batch_doc,
"pcap_batch(buf, pos, end, mark, big_endian, hdrlen, units, linktype, frame, max_record,\n"
"           max_items) -> (packets, pos, frame, status, incl)\n\n"
"Walk the pcap records in buf[pos:end] as PcapWalker.walk does and return up to\n"
"max_items packet tuples (frame, ts, linktype, data, orig_len); data is a bytes copy.\n"
"The walk also stops once pos is beyond mark (status 1, as when the batch is full),\n"
"at a record that is not wholly in the buffer (status 0), or at a record whose\n"
"captured length exceeds max_record (status 2; incl is that length, else -1).\n"
"hdrlen is the record header size (16, or 24 for the modified format); units is\n"
"the number of timestamp fractions per second.");

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
    if (pos < 0 || end > view.len || hdrlen < 16 || units <= 0 || max_items <= 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "pcap_batch: bad arguments");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    const double dunits = (double)units;
    int status = ST_END;
    long long bad = -1;
    Py_ssize_t count = 0;
    while (end - pos >= hdrlen) {
        const unsigned char *h = buf + pos;
        uint32_t sec = rd32(h, big), frac = rd32(h + 4, big);
        uint32_t incl = rd32(h + 8, big), orig = rd32(h + 12, big);
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
        /* the same two IEEE operations as sec + frac / units in Python */
        double ts = (double)sec + (double)frac / dunits;
        PyObject *item = Py_BuildValue("(LdOy#I)", frame, ts, linktype,
                                       (const char *)buf + start, (Py_ssize_t)incl, orig);
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(out);
            PyBuffer_Release(&view);
            return NULL;
        }
        Py_DECREF(item);
        pos = stop;
        if (++count >= max_items || pos > mark) {
            status = ST_MORE;
            break;
        }
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(NnLiL)", out, pos, frame, status, bad);
}

PyDoc_STRVAR(eth_ipv4_tcp_doc,
"eth_ipv4_tcp(data) -> (key, seq, ack, flags, payload, 0) or None\n\n"
"The segment of an Ethernet frame carrying an unfragmented IPv4 packet without\n"
"options with TCP in it (PacketParser.parse's fast path for link type 1); None for\n"
"anything else, which the caller hands to the full parser.");

static PyObject *eth_ipv4_tcp(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    PyObject *res = NULL;
    if (n >= 48 && be16(d + 12) == 0x0800 && d[14] == 0x45 && d[23] == 6
            && !(be16(d + 20) & 0x3FFF)) {
        unsigned offflags = be16(d + 46);
        Py_ssize_t start = 34 + ((offflags >> 12) << 2);
        Py_ssize_t stop = 14 + (Py_ssize_t)be16(d + 16);
        if (stop <= n && 54 <= start && start <= stop) {
            unsigned long seq = ((unsigned long)d[38] << 24) | ((unsigned long)d[39] << 16)
                                | ((unsigned long)d[40] << 8) | d[41];
            unsigned long ack = ((unsigned long)d[42] << 24) | ((unsigned long)d[43] << 16)
                                | ((unsigned long)d[44] << 8) | d[45];
            res = Py_BuildValue("(y#kkIy#i)", (const char *)d + 26, (Py_ssize_t)12, seq, ack,
                                offflags & 0xFF, (const char *)d + start, stop - start, 0);
        }
    }
    PyBuffer_Release(&view);
    if (res == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return res;
}

static PyMethodDef methods[] = {
    {"pcap_batch", pcap_batch, METH_VARARGS, pcap_batch_doc},
    {"eth_ipv4_tcp", eth_ipv4_tcp, METH_O, eth_ipv4_tcp_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kwsniff._speedups",
    "Optional compiled accelerator of kwsniff's per-packet path (see kwsniff.accel).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "VERSION", SPEEDUPS_VERSION) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
