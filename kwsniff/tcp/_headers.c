/*
 * kwsniff.tcp._headers: the byte-level kernel of the link/IP/TCP header parser.
 *
 * Contract: eth_ipv4_tcp(data) returns exactly what
 * kwsniff.tcp.packet.PacketParser.parse(frame, ts, 1, data, orig_len) returns for an
 * Ethernet frame carrying an unfragmented IPv4 packet without options (IHL 5) with a
 * whole TCP header in it, i.e. the segment tuple (key, seq, ack, flags, payload, 0);
 * for every other frame it returns None and decides nothing: the caller hands the
 * packet to the full parser (which counts, reports and handles the rest). data is any
 * object with the buffer protocol.
 *
 * The module holds no state and imports nothing; kwsniff._compiled.kernel decides whether
 * it is used (tests/tcp/test_headers_kernel.py compares it with the reference).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static inline unsigned be16_at(const unsigned char *p) {
    return ((unsigned)p[0] << 8) | p[1];
}

static inline unsigned long be32_at(const unsigned char *p) {
    return ((unsigned long)p[0] << 24) | ((unsigned long)p[1] << 16)
           | ((unsigned long)p[2] << 8) | p[3];
}

/* Frame offsets: EtherType 12; IPv4 at 14 (version/IHL 14, total length 16, flags and
 * fragment offset 20, protocol 23, addresses 26..33); TCP at 34 (ports 34..37,
 * sequence 38, acknowledgment 42, data offset and flags 46). */
#define MIN_FRAME 48

PyDoc_STRVAR(eth_ipv4_tcp_doc,
"eth_ipv4_tcp(data) -> (key, seq, ack, flags, payload, 0) or None\n\n"
"The TCP segment of an Ethernet frame carrying an unfragmented IPv4 packet without\n"
"options (as PacketParser.parse gives it for link type 1); None for anything else,\n"
"which the caller hands to the full parser. key is the 12 bytes from the IPv4 source\n"
"address on; payload ends where the IPv4 total length says.");

static PyObject *eth_ipv4_tcp(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    PyObject *res = NULL;
    int taken = 0;
    if (n >= MIN_FRAME && be16_at(d + 12) == 0x0800 && d[14] == 0x45 && d[23] == 6
            && !(be16_at(d + 20) & 0x3FFF)) {
        unsigned offflags = be16_at(d + 46);
        Py_ssize_t start = 34 + ((offflags >> 12) << 2);
        Py_ssize_t stop = 14 + (Py_ssize_t)be16_at(d + 16);
        if (stop <= n && 54 <= start && start <= stop) {
            taken = 1;
            PyObject *items[6] = {
                PyBytes_FromStringAndSize((const char *)d + 26, 12),
                PyLong_FromUnsignedLong(be32_at(d + 38)),
                PyLong_FromUnsignedLong(be32_at(d + 42)),
                PyLong_FromLong(offflags & 0xFF),
                PyBytes_FromStringAndSize((const char *)d + start, stop - start),
                PyLong_FromLong(0),
            };
            int bad = 0;
            for (int i = 0; i < 6; i++)
                bad |= items[i] == NULL;
            if (!bad)
                res = PyTuple_New(6);
            if (res == NULL) {
                for (int i = 0; i < 6; i++)
                    Py_XDECREF(items[i]);
            } else {
                for (int i = 0; i < 6; i++)
                    PyTuple_SET_ITEM(res, i, items[i]);
            }
        }
    }
    PyBuffer_Release(&view);
    if (!taken)
        Py_RETURN_NONE;
    return res;             /* NULL with the error set when building it failed */
}

static PyMethodDef methods[] = {
    {"eth_ipv4_tcp", eth_ipv4_tcp, METH_O, eth_ipv4_tcp_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kwsniff.tcp._headers",
    "Byte-level kernel of kwsniff's packet header parser (see the C file's contract).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__headers(void) {
    return PyModule_Create(&module);
}
