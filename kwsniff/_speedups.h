/* Declarations shared by the C files of kwsniff._speedups (one extension module). */
#ifndef KWSNIFF_SPEEDUPS_H
#define KWSNIFF_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Integers of a byte buffer: 32 bits in either byte order, big-endian 16 and 64 bits. */
static inline uint32_t rd32(const unsigned char *p, int big) {
    if (big)
        return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | p[0];
}

static inline unsigned be16(const unsigned char *p) { return ((unsigned)p[0] << 8) | p[1]; }

static inline uint64_t be64(const unsigned char *p) {
    return ((uint64_t)rd32(p, 1) << 32) | rd32(p + 4, 1);
}

/* _speedups_decode.c: schema-driven field decoding (kwsniff/kafka/protocol/cprogram.py) */
PyObject *decode_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char decode_fields_doc[];
int decode_fields_init(void);
PyObject *skim_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char skim_fields_doc[];

/* _speedups.c: (batches, records) of a record set of complete magic-2 batches with
   matching CRC-32Cs (what v2_set_stats returns); 0 for anything else */
int v2_clean_stats(const unsigned char *p, Py_ssize_t n, Py_ssize_t *batches,
                   long long *records);

/* _speedups_msg.c: messages with deferred bodies (kwsniff.kafka.decoding) */
PyObject *msg_setup(PyObject *self, PyObject *args);
PyObject *defer_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *defer_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char defer_request_doc[], defer_response_doc[];

/* _speedups_tcp.c: the in-order fast path of kwsniff.tcp.reassembly */
PyObject *tcp_setup(PyObject *self, PyObject *args);
PyObject *tcp_feed(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char tcp_feed_doc[];
PyObject *sink_setup(PyObject *self, PyObject *args);
extern PyTypeObject FrameSinkType;

/* _speedups_order.c: the reorder buffer (kwsniff.kafka.ordering.PyReorderer's copy) */
extern PyTypeObject ReorderType;
int reorder_init_module(void);
int reorder_busy(PyObject *reorder);     /* dirty and exchanges waiting */

#endif
