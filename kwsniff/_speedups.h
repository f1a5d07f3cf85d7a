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

/* A Python int (exactly) that fits in a long long: its value in *out, 0; else (NULL,
   another type, too big) -1, no error set. */
static inline int small_int(PyObject *v, long long *out) {
    if (v == NULL || !PyLong_CheckExact(v))
        return -1;
    int overflow;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    return 0;
}

/* ``v`` in decimal into ``out`` (at least 24 bytes, NUL-terminated), right-aligned in
   ``width`` (0: none), as "%*lld" writes it; returns the length. */
static inline int put_decimal(char *out, long long v, int width) {
    char digits[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        digits[n++] = '-';
    int len = 0;
    for (int pad = width - n; pad > 0; pad--)
        out[len++] = ' ';
    while (n > 0)
        out[len++] = digits[--n];
    out[len] = '\0';
    return len;
}

/* ``x`` as Python formats f"{x:.{prec}f}" (correctly rounded, ties to even, the sign of
   a negative zero kept) into ``out`` (at least 48 bytes, NUL-terminated), for
   0 <= prec <= 9; returns the length, or -1 (nothing written) where the caller must
   use PyOS_double_to_string: not finite, |x| >= 2**53, or more than 19 digits. The
   value is m / 2**shift exactly (m < 2**53): m * 10**prec (< 2**83) is divided by
   2**shift in 128-bit arithmetic and rounded on the exact remainder. */
int put_fixed_exact(char *out, double x, int prec);
PyObject *format_fixed(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char format_fixed_doc[];

/* An object slot at a byte offset (found by bind_classes). */
#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

/* _speedups_tcp.c: one class to bind: the object given, the slots read, where their
   offsets and the class are kept. bind_classes binds ``count`` of them: the offset of
   every named slot (a member descriptor of an object slot) is found first; only when
   all are found are the offsets and classes kept, so a failed call leaves the previous
   binding whole. 0, or -1 with TypeError. */
typedef struct {
    PyObject *given;
    const char **names;
    int n;
    Py_ssize_t *offsets;
    PyTypeObject **keep;
} Binding;

#define MAX_BOUND_SLOTS 24
#define MAX_BOUND_CLASSES 10
int bind_classes(const Binding *b, int count, const char *who);

/* _speedups.c: kwsniff.kafka.framing.Frame's storage (FrameBase) */
typedef struct {
    PyObject_HEAD
    PyObject *raw, *offset, *frame_first, *frame_last, *ts_first, *ts_last, *missing,
             *skipped_before, *discarded;
} FrameObject;
extern PyTypeObject FrameType;
/* Framer._fast's loop: (frames, pos) or None (see its doc) */
PyObject *cut_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

/* _speedups_decode.c: schema-driven field decoding (kwsniff/kafka/protocol/cprogram.py) */
PyObject *decode_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char decode_fields_doc[];
int decode_fields_init(void);
PyObject *skim_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char skim_fields_doc[];

/* _speedups_lane.c: the summary lane's Produce/Fetch digest */
PyObject *lane_setup(PyObject *self, PyObject *args);
extern const char lane_setup_doc[];
PyObject *lane_digest(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char lane_digest_doc[];

/* _speedups_line.c: SummaryFormatter.format for plain lines with relative times */
PyObject *summary_line(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char summary_line_doc[];

/* _speedups_pipe.c: the pipeline's shipping of an exchange */
PyObject *pipe_setup(PyObject *self, PyObject *args);
extern const char pipe_setup_doc[];
PyObject *pipe_ship(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char pipe_ship_doc[];
PyObject *pipe_take(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char pipe_take_doc[];

/* _speedups.c: (batches, records) of a record set of complete magic-2 batches with
   matching CRC-32Cs (what v2_set_stats returns); 0 for anything else */
int v2_clean_stats(const unsigned char *p, Py_ssize_t n, Py_ssize_t *batches,
                   long long *records);

/* _speedups_msg.c: messages with deferred bodies (kwsniff.kafka.decoding) */
PyObject *msg_setup(PyObject *self, PyObject *args);
PyObject *defer_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *defer_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char defer_request_doc[], defer_response_doc[];

/* _speedups_conv.c: the paired path of a conversation (kwsniff.kafka.conversation) */
/* the number of names in a class's __slots__, or -1 with an error */
Py_ssize_t slot_count(PyObject *cls);
/* d[key] = d.get(key, 0) + 1; 0 or -1 */
int count_in(PyObject *d, PyObject *key);
/* the int slot at ``off`` of obj += n (NULL: 1); 0 or -1 */
int add_to_slot(PyObject *obj, Py_ssize_t off, PyObject *n);
PyObject *conv_setup(PyObject *self, PyObject *args);
PyObject *conv_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *conv_taken(PyObject *self, PyObject *unused);
PyObject *conv_refresh(PyObject *self, PyObject *conv);
PyObject *conv_data(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char conv_setup_doc[], conv_frames_doc[], conv_taken_doc[], conv_refresh_doc[],
    conv_data_doc[];

/* _speedups_engine.c: the engine's handling of stream bytes (kwsniff.engine) */
PyObject *engine_setup(PyObject *self, PyObject *args);
PyObject *engine_data(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char engine_setup_doc[], engine_data_doc[];

/* _speedups_tcp.c: the in-order fast path of kwsniff.tcp.reassembly */
PyObject *tcp_setup(PyObject *self, PyObject *args);
PyObject *tcp_feed(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char tcp_feed_doc[];
PyObject *sink_setup(PyObject *self, PyObject *args);
/* Framer.extend(offset, data, frame, ts) for bytes ``data`` (the class bound by
   sink_setup): 1 taken, 0 not an extension of the partial frame, 2 unsure (another
   type, a number out of range), -1 error; nothing changed unless 1. */
int framer_extend(PyObject *framer, PyObject *offset_o, PyObject *data, PyObject *frame,
                  PyObject *ts);
extern PyTypeObject FrameSinkType;

/* _speedups_order.c: the reorder buffer (kwsniff.kafka.ordering.PyReorderer's copy) */
extern PyTypeObject ReorderType;
int reorder_init_module(void);
int reorder_busy(PyObject *reorder);     /* dirty and exchanges waiting */

#endif
