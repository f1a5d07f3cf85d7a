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
 *  pcapng_epbs   runs of Enhanced Packet Blocks (kwsniff.capture.pcapng.PcapngWalker.walk)
 *  eth_ipv4_tcp  the Ethernet/IPv4/TCP fast path of kwsniff.tcp.packet.PacketParser.parse
 *  v2_set_stats  batch and record counts of a clean magic-2 record set (Records.record_count
 *                etc. without Batch objects; None for anything else)
 *  crc32c        CRC-32C of record batches (kwsniff.kafka.records.crc32c_py; SSE4.2
 *                instructions where the CPU has them)
 *  payload_view  the -V text of a record key/value/header seen as hex, plain ASCII text or
 *                JSON already in json.dumps's compact form
 *                (kwsniff.output.tree._builtin_text; None for anything else)
 *  plain_lines   the lines of an uncoloured -V tree (kwsniff.output.tree._plain_lines)
 *  utf8_lines    those lines joined and encoded in one copy (kwsniff.output.tree.plain_utf8)
 *  header_fields the request-header plausibility check (kwsniff.kafka.plausible._header_fields;
 *                request_fields: the same on a whole frame, .request_fields)
 *  FrameBase     the storage and constructor of kwsniff.kafka.framing.Frame (PyFrameBase
 *                there is its twin); cut_frames: Framer._fast's loop
 *  NodeBase      the storage and constructor of kwsniff.output.tree.TreeNode (the Python
 *                class PyNodeBase there is its twin)
 *  tree_batch    kwsniff.output.tree._Builder.batch/.record for magic-2 batches when no
 *                payload decoder is registered (other batches and odd records: Python)
 *  tree_fields   kwsniff.output.tree._Builder.fields without byte spans (strings, ints,
 *                structs and arrays of structs here; other values through the builder's
 *                Python methods). The one allowed difference: a body nested thousands of
 *                levels deep meets Python's recursion limit a few levels later than in
 *                Python (both then show "body nested too deeply to show").
 *  v2_records    the records of a magic-2 batch (kwsniff.kafka.records._parse_v2_records;
 *                returns None, for the Python code to run, on input whose exact result
 *                needs Python's unbounded integers or slicing past the end)
 *  tcp_feed      the in-order fast path of kwsniff.tcp.reassembly.TcpReassembler.feed
 *                (in _speedups_tcp.c, bound to its classes by tcp_setup)
 *  FrameSink     kwsniff.engine.Engine._sink's closure (_speedups_tcp.c, sink_setup)
 *  Reorder       the reorder buffer, kwsniff.kafka.ordering.PyReorderer (_speedups_order.c)
 *  defer_request, defer_response  the messages kwsniff.kafka.decoding makes with a deferred
 *                body, for (api key, version)s deferred before (_speedups_msg.c)
 *  skim_fields   decode_fields for summary lines: record sets as (batches, records, size)
 *                of clean magic-2 sets (v2_set_stats), no Records objects, and the
 *                non-zero *ErrorCode values collected (kwsniff.output.skim)
 *  lane_digest   the summary lane's Produce/Fetch digest text from those skimmed bodies
 *                (kwsniff.output.digest's built-in digests; in _speedups_lane.c)
 *  summary_line  kwsniff.output.summary.SummaryFormatter.format for plain lines with
 *                relative times (None where the method must make the line;
 *                _speedups_line.c)
 *  pipe_ship     the decode -j 2 pipeline's shipping of an exchange
 *  pipe_take     ... and the render worker's exchange of a shipped record
 *                (kwsniff.commands.parallel_pipe; _speedups_pipe.c)
 *  decode_fields the generated message decoders (kwsniff.kafka.protocol.codegen) run from
 *                a program of the same schema rows (kwsniff.kafka.protocol.cprogram);
 *                in _speedups_decode.c. None, for the Python decoder to run, wherever
 *                that would raise or report a problem.
 *
 * The module imports nothing from kwsniff and holds no state but the classes (and their
 * slot offsets) that tcp_setup binds.
 */
#include "_speedups.h"
#include <structmember.h>
#include <stdarg.h>

/* Bump when a function's signature or meaning changes; kwsniff.accel ignores a module
 * built from another version (a stale build never silently changes behaviour). */
#define SPEEDUPS_VERSION 22

/* pcap_batch statuses */
#define ST_END 0      /* fewer bytes left than a whole record: the walk stops here */
#define ST_MORE 1     /* the batch is full or pos passed mark: call again */
#define ST_CORRUPT 2  /* a record claims more than max_record bytes: the walk stops */


/* A tuple of n new references (stolen); NULL (all released) if any is NULL. Cheaper
 * than Py_BuildValue, which parses its format on every call. */
static PyObject *tuple_steal(Py_ssize_t n, ...) {
    PyObject *items[8];
    va_list ap;
    va_start(ap, n);
    int bad = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        items[i] = va_arg(ap, PyObject *);
        bad |= items[i] == NULL;
    }
    va_end(ap);
    PyObject *out = bad ? NULL : PyTuple_New(n);
    if (out == NULL) {
        for (Py_ssize_t i = 0; i < n; i++)
            Py_XDECREF(items[i]);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(out, i, items[i]);
    return out;
}

/* The empty packet list of a batch walk, or NULL with the view released and an error
 * set (ValueError "NAME: bad arguments" when bad, else out of memory). */
static PyObject *batch_start(Py_buffer *view, int bad, const char *name) {
    if (bad) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: bad arguments", name);
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL)
        PyBuffer_Release(view);
    return out;
}

/* Append item (a new reference, NULL after a failed build) to a batch's packet list:
 * 0, or -1 with the list and the view released and the error set. */
static int batch_append(PyObject *out, PyObject *item, Py_buffer *view) {
    if (item == NULL || PyList_Append(out, item) < 0) {
        Py_XDECREF(item);
        Py_DECREF(out);
        PyBuffer_Release(view);
        return -1;
    }
    Py_DECREF(item);
    return 0;
}

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
    PyObject *out = batch_start(&view, pos < 0 || end > view.len || hdrlen < 16
                                       || units <= 0 || max_items <= 0, "pcap_batch");
    if (out == NULL)
        return NULL;
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
        if (batch_append(out, tuple_steal(5, PyLong_FromLongLong(frame), PyFloat_FromDouble(ts),
                                          Py_NewRef(linktype),
                                          PyBytes_FromStringAndSize((const char *)buf + start,
                                                                    (Py_ssize_t)incl),
                                          PyLong_FromUnsignedLong(orig)),
                         &view) < 0)
            return NULL;
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
"Walk the run of well-formed Enhanced Packet Blocks at buf[pos:end] as\n"
"PcapngWalker.walk does, for the section's interfaces ifaces (a list of\n"
"(linktype, units, tsoffset, snaplen) tuples), and return their packet tuples.\n"
"Status 1: the batch is full or pos passed mark; status 0: the block at pos is\n"
"anything else (another block type, an incomplete or inconsistent block, an\n"
"undefined interface), which the caller walks itself.");

#define TWO53 9007199254740992.0

/* ((hi << 32) | lo) / units + tsoffset, computed as Python computes it */
static PyObject *epb_ts(uint64_t ticks, PyObject *units, PyObject *offset) {
    double du = PyLong_AsDouble(units);
    if (du == -1.0 && PyErr_Occurred())
        return NULL;
    double doff = PyLong_AsDouble(offset);
    if (doff == -1.0 && PyErr_Occurred())
        return NULL;
    if (ticks <= ((uint64_t)1 << 53) && du > 0 && du <= TWO53)
        /* both exactly representable: one IEEE division is Python's correctly rounded
         * int / int; float + int converts the int with PyLong_AsDouble, as here */
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
    PyObject *out = batch_start(&view, pos < 0 || end > view.len || max_items <= 0,
                                "pcapng_epbs");
    if (out == NULL)
        return NULL;
    const unsigned char *buf = (const unsigned char *)view.buf;
    int status = ST_END;
    Py_ssize_t count = 0;
    while (end - pos >= 12) {
        const unsigned char *b = buf + pos;
        uint32_t btype = rd32(b, big), blen = rd32(b + 4, big);
        if (btype != 6 || blen < 32 || (blen & 3) || blen > max_block
                || (Py_ssize_t)blen > end - pos)
            break;
        uint32_t ifid = rd32(b + 8, big), hi = rd32(b + 12, big), lo = rd32(b + 16, big);
        uint32_t cap = rd32(b + 20, big), orig = rd32(b + 24, big);
        if (cap > blen - 32 || rd32(b + blen - 4, big) != blen
                || (Py_ssize_t)ifid >= PyList_GET_SIZE(ifaces))
            break;
        PyObject *iface = PyList_GET_ITEM(ifaces, ifid);
        if (!PyTuple_Check(iface) || PyTuple_GET_SIZE(iface) < 3)
            break;
        PyObject *ts = epb_ts(((uint64_t)hi << 32) | lo, PyTuple_GET_ITEM(iface, 1),
                              PyTuple_GET_ITEM(iface, 2));
        if (ts == NULL) {
            batch_append(out, NULL, &view);     /* releases out and the view */
            return NULL;
        }
        frame += 1;
        if (batch_append(out, tuple_steal(5, PyLong_FromLongLong(frame), ts,
                                          Py_NewRef(PyTuple_GET_ITEM(iface, 0)),
                                          PyBytes_FromStringAndSize((const char *)b + 28,
                                                                    (Py_ssize_t)cap),
                                          PyLong_FromUnsignedLong(orig)),
                         &view) < 0)
            return NULL;
        pos += blen;
        if (++count >= max_items || pos > mark) {
            status = ST_MORE;
            break;
        }
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(NnLi)", out, pos, frame, status);
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
            res = tuple_steal(6, PyBytes_FromStringAndSize((const char *)d + 26, 12),
                              PyLong_FromUnsignedLong(seq), PyLong_FromUnsignedLong(ack),
                              PyLong_FromUnsignedLong(offflags & 0xFF),
                              PyBytes_FromStringAndSize((const char *)d + start, stop - start),
                              PyLong_FromLong(0));
        }
    }
    PyBuffer_Release(&view);
    if (res == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return res;
}

/* ---- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) ---------------------------- */

static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* slicing by 8: any CPU */
static uint32_t crc_soft(uint32_t crc, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
        n--;
    }
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                             | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16
                      | (uint32_t)p[7] << 24;
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF]
              ^ crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24]
              ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF]
              ^ crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#include <stdio.h>
#include <string.h>
#define HAVE_CRC_HW 1
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

static int crc_use_hw = 0;

PyDoc_STRVAR(crc32c_doc,
"crc32c(data) -> int\n\n"
"CRC-32C (Castagnoli) of a bytes-like object, as the crc32c package computes it.");

static PyObject *crc32c_fn(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = (const unsigned char *)view.buf;
    size_t n = (size_t)view.len;
    uint32_t crc = 0xFFFFFFFFu;
    if (n >= 65536) {
        Py_BEGIN_ALLOW_THREADS
#ifdef HAVE_CRC_HW
        crc = crc_use_hw ? crc_hw(crc, p, n) : crc_soft(crc, p, n);
#else
        crc = crc_soft(crc, p, n);
#endif
        Py_END_ALLOW_THREADS
    } else {
#ifdef HAVE_CRC_HW
        crc = crc_use_hw ? crc_hw(crc, p, n) : crc_soft(crc, p, n);
#else
        crc = crc_soft(crc, p, n);
#endif
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc ^ 0xFFFFFFFFu);
}

PyDoc_STRVAR(crc32c_software_doc,
"crc32c_software(data) -> int\n\n"
"crc32c without the CPU's CRC instructions (to test both implementations).");

static PyObject *crc32c_software(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc = crc_soft(0xFFFFFFFFu, (const unsigned char *)view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc ^ 0xFFFFFFFFu);
}

static uint32_t crc32c_of(const unsigned char *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
#ifdef HAVE_CRC_HW
    crc = crc_use_hw ? crc_hw(crc, p, n) : crc_soft(crc, p, n);
#else
    crc = crc_soft(crc, p, n);
#endif
    return crc ^ 0xFFFFFFFFu;
}

PyDoc_STRVAR(v2_set_stats_doc,
"v2_set_stats(data) -> (batches, records) or None\n\n"
"For a record set (bytes) that is a whole number of complete magic-2 batches, each\n"
"with a length that holds the 61-byte header, a record count >= 0 and a CRC-32C that\n"
"matches: the number of batches and the sum of their record counts, what\n"
"kwsniff.kafka.records.Records gives from its batches (and no header or CRC problem).\n"
"None for anything else (the Python scan then runs).");

int v2_clean_stats(const unsigned char *p, Py_ssize_t n, Py_ssize_t *batches_out,
                   long long *records_out) {
    Py_ssize_t pos = 0, batches = 0;
    long long records = 0;
    while (pos < n) {
        Py_ssize_t avail = n - pos;
        if (avail < 61 || p[pos + 16] != 2)
            return 0;
        int32_t length = (int32_t)rd32(p + pos + 8, 1);
        if (length < 61 - 12 || (Py_ssize_t)length + 12 > avail)
            return 0;
        Py_ssize_t size = (Py_ssize_t)length + 12;
        int32_t count = (int32_t)rd32(p + pos + 57, 1);
        if (count < 0 || crc32c_of(p + pos + 21, (size_t)(size - 21)) != rd32(p + pos + 17, 1))
            return 0;
        records += count;
        batches++;
        pos += size;
    }
    *batches_out = batches;
    *records_out = records;
    return 1;
}

static PyObject *v2_set_stats(PyObject *self, PyObject *arg) {
    (void)self;
    if (!PyBytes_CheckExact(arg))
        Py_RETURN_NONE;
    Py_ssize_t batches;
    long long records;
    if (!v2_clean_stats((const unsigned char *)PyBytes_AS_STRING(arg), PyBytes_GET_SIZE(arg),
                        &batches, &records))
        Py_RETURN_NONE;
    return Py_BuildValue("(nL)", batches, records);
}

/* ---------------------------------------------------------------- v2 records */

#define VR_OK 0
#define VR_INDEX 1      /* the buffer ends first: Python's IndexError */
#define VR_MALFORMED 2  /* a varint longer than 10 bytes */
#define VR_PYTHON 3     /* a value beyond 64 bits: only Python's ints give the result */
#define VR_ERROR 4      /* a Python exception is set (out of memory) */

/* Kafka's zigzag varint at *pos, as records.uvarint and the zigzag step compute it. */
static inline int vr_varint(const unsigned char *p, Py_ssize_t len, Py_ssize_t *pos,
                            int64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t q = *pos;
    for (;;) {
        if (q >= len)
            return VR_INDEX;
        unsigned b = p[q++];
        if (shift == 63) {
            if (b >= 0x80)
                return VR_MALFORMED;
            if ((b & 0x7F) > 1)
                return VR_PYTHON;
        }
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
    }
    *pos = q;
    *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
    return VR_OK;
}

/* A varint length at *pos, then that many bytes as a bytes object, or None for a negative
 * length (a record's key, value, header value); VR_PYTHON when the bytes pass the end
 * of buf (Python's slice would be cut short). */
static int vr_bytes(const unsigned char *p, Py_ssize_t len, Py_ssize_t *pos, PyObject **out) {
    int64_t n;
    int st = vr_varint(p, len, pos, &n);
    if (st != VR_OK)
        return st;
    if (n < 0) {
        *out = Py_NewRef(Py_None);
        return VR_OK;
    }
    if (n > len - *pos)
        return VR_PYTHON;
    *out = PyBytes_FromStringAndSize((const char *)p + *pos, (Py_ssize_t)n);
    if (*out == NULL)
        return VR_ERROR;
    *pos += (Py_ssize_t)n;
    return VR_OK;
}

PyDoc_STRVAR(v2_records_doc,
"v2_records(buf, pos, end, count, base_offset, base_ts, ts_fixed, in_place, record)\n"
"    -> (records, problems, pos, ran_out) or None\n\n"
"_parse_v2_records of kwsniff.kafka.records for a bytes buf: up to count records from\n"
"buf[pos:end], each made by calling record(offset, timestamp, key, value, headers,\n"
"attributes, size, start). ts_fixed is the LogAppendTime timestamp or None. Returns None\n"
"where the exact result needs the Python code: a value beyond 64 bits, or a key,\n"
"value or header longer than what is left of buf.");

static PyObject *v2_records(PyObject *self, PyObject *args) {
    PyObject *buf, *ts_fixed, *record_type;
    Py_ssize_t pos, end, count;
    long long base_offset, base_ts;
    int in_place;
    if (!PyArg_ParseTuple(args, "OnnnLLOpO", &buf, &pos, &end, &count, &base_offset,
                          &base_ts, &ts_fixed, &in_place, &record_type))
        return NULL;
    if (!PyBytes_CheckExact(buf) || pos < 0)
        Py_RETURN_NONE;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(buf);
    Py_ssize_t len = PyBytes_GET_SIZE(buf);
    PyObject *records = PyList_New(0), *problems = PyList_New(0);
    PyObject *rec = NULL, *headers = NULL, *key = NULL, *value = NULL;
    PyObject *mal = NULL;   /* the text of a _Malformed record */
    if (records == NULL || problems == NULL)
        goto error;
    int ran_out = 0;
    Py_ssize_t rec_start = pos;
    Py_ssize_t i = 0;
    while (i < count && pos < end) {
        int64_t length, ts_delta, off_delta, n, nh;
        int st;
        rec_start = pos;
        if ((st = vr_varint(p, len, &pos, &length)) != VR_OK)
            goto stop;
        int64_t rec_end;
        if (__builtin_add_overflow((int64_t)pos, length, &rec_end))
            goto python;
        if (rec_end > end) {
            ran_out = 1;
            pos = rec_start;
            break;
        }
        if (length < 1) {
            PyObject *t = PyUnicode_FromFormat("record %zd at byte %zd: invalid length %lld",
                                               i, rec_start, (long long)length);
            if (t == NULL || PyList_Append(problems, t) < 0) {
                Py_XDECREF(t);
                goto error;
            }
            Py_DECREF(t);
            break;
        }
        if (pos >= len) {
            st = VR_INDEX;
            goto stop;
        }
        long attributes = p[pos++];
        if ((st = vr_varint(p, len, &pos, &ts_delta)) != VR_OK
                || (st = vr_varint(p, len, &pos, &off_delta)) != VR_OK
                || (st = vr_bytes(p, len, &pos, &key)) != VR_OK
                || (st = vr_bytes(p, len, &pos, &value)) != VR_OK
                || (st = vr_varint(p, len, &pos, &nh)) != VR_OK)
            goto stop;
        headers = PyList_New(0);
        if (headers == NULL)
            goto error;
        if (nh < 0) {
            mal = PyUnicode_FromFormat("negative header count %lld", (long long)nh);
            goto malformed;
        }
        for (int64_t h = 0; h < nh; h++) {
            if (pos >= rec_end) {
                mal = PyUnicode_FromFormat("%lld headers declared, the record ends first",
                                           (long long)nh);
                goto malformed;
            }
            if ((st = vr_varint(p, len, &pos, &n)) != VR_OK)
                goto stop;
            if (n < 0) {
                mal = PyUnicode_FromFormat("header key length %lld", (long long)n);
                goto malformed;
            }
            if (n > len - pos)
                goto python;
            PyObject *hk = PyUnicode_DecodeUTF8((const char *)p + pos, (Py_ssize_t)n, "replace");
            if (hk == NULL)
                goto error;
            pos += (Py_ssize_t)n;
            PyObject *hv = NULL;
            if ((st = vr_bytes(p, len, &pos, &hv)) != VR_OK) {
                Py_DECREF(hk);
                goto stop;
            }
            PyObject *pair = PyTuple_Pack(2, hk, hv);
            Py_DECREF(hk);
            Py_DECREF(hv);
            if (pair == NULL || PyList_Append(headers, pair) < 0) {
                Py_XDECREF(pair);
                goto error;
            }
            Py_DECREF(pair);
        }
        int64_t offset, ts;
        if (__builtin_add_overflow((int64_t)base_offset, off_delta, &offset))
            goto python;
        PyObject *ts_obj;
        if (ts_fixed == Py_None) {
            if (__builtin_add_overflow((int64_t)base_ts, ts_delta, &ts))
                goto python;
            ts_obj = PyLong_FromLongLong(ts);
        } else {
            ts_obj = Py_NewRef(ts_fixed);
        }
        PyObject *off_obj = PyLong_FromLongLong(offset);
        PyObject *attr_obj = PyLong_FromLong(attributes);
        PyObject *size_obj = PyLong_FromSsize_t((Py_ssize_t)(rec_end - rec_start));
        PyObject *start_obj = PyLong_FromSsize_t(in_place ? rec_start : -1);
        if (ts_obj && off_obj && attr_obj && size_obj && start_obj) {
            PyObject *argv[8] = {off_obj, ts_obj, key, value, headers, attr_obj, size_obj,
                                 start_obj};
            rec = PyObject_Vectorcall(record_type, argv, 8, NULL);
        }
        Py_XDECREF(ts_obj);
        Py_XDECREF(off_obj);
        Py_XDECREF(attr_obj);
        Py_XDECREF(size_obj);
        Py_XDECREF(start_obj);
        Py_CLEAR(key);
        Py_CLEAR(value);
        Py_CLEAR(headers);
        if (rec == NULL)
            goto error;
        if (pos != rec_end) {
            PyObject *r = PyObject_CallMethod(rec, "_problem", "N", PyUnicode_FromFormat(
                "fields take %zd bytes, the record length says %lld", pos - rec_start,
                (long long)(rec_end - rec_start)));
            if (r == NULL)
                goto error;
            Py_DECREF(r);
            PyObject *t = PyUnicode_FromFormat(
                "record %zd (offset %lld): fields do not match its length", i,
                (long long)offset);
            if (t == NULL || PyList_Append(problems, t) < 0) {
                Py_XDECREF(t);
                goto error;
            }
            Py_DECREF(t);
            pos = (Py_ssize_t)rec_end;
        }
        if (PyList_Append(records, rec) < 0)
            goto error;
        Py_CLEAR(rec);
        i++;
        continue;
    stop:
        Py_CLEAR(key);
        Py_CLEAR(value);
        Py_CLEAR(headers);
        if (st == VR_PYTHON)
            goto python;
        if (st == VR_ERROR)
            goto error;
        if (st == VR_INDEX) {
            ran_out = 1;
            pos = rec_start;
            break;
        }
        mal = PyUnicode_FromString("varint longer than 10 bytes");   /* VR_MALFORMED */
    malformed:
        /* as Python's ``except _Malformed``: a problem, and the walk stops here */
        Py_CLEAR(key);
        Py_CLEAR(value);
        Py_CLEAR(headers);
        if (mal == NULL)
            goto error;
        {
            PyObject *m = PyUnicode_FromFormat("record %zd at byte %zd: malformed (%U)",
                                               i, rec_start, mal);
            Py_CLEAR(mal);
            if (m == NULL || PyList_Append(problems, m) < 0) {
                Py_XDECREF(m);
                goto error;
            }
            Py_DECREF(m);
        }
        break;
    }
    return Py_BuildValue("(NNnO)", records, problems, pos, ran_out ? Py_True : Py_False);
python:
    Py_XDECREF(records);
    Py_XDECREF(problems);
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_RETURN_NONE;
error:
    Py_XDECREF(records);
    Py_XDECREF(problems);
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_XDECREF(rec);
    return NULL;
}

/* ---------------------------------------------------------------- payload view */

/* as_text's control bytes: 0x00-0x08, 0x0B, 0x0C, 0x0E-0x1F, 0x7F */
static inline int pv_control(unsigned char c) {
    return (c < 0x20 && c != 0x09 && c != 0x0A && c != 0x0D) || c == 0x7F;
}

/* Canonical compact JSON: printable ASCII without whitespace or backslashes, integers
 * in their shortest form, no duplicate keys, nested at most PJ_MAX_DEPTH levels, at most
 * PJ_MAX_KEYS keys per object: exactly the text json.dumps(json.loads(text),
 * ensure_ascii=False, separators=(",", ":")) gives back. */
#define PJ_MAX_DEPTH 64
#define PJ_MAX_KEYS 32
#define PJ_MAX_DIGITS 1000

/* a string at p[*i] ('"' ... '"', no backslash): 1 and *i after it, or 0 */
static int pj_string(const unsigned char *p, Py_ssize_t n, Py_ssize_t *i) {
    Py_ssize_t k = *i + 1;
    while (k < n && p[k] != '"') {
        if (p[k] == '\\')
            return 0;
        k++;
    }
    if (k >= n)
        return 0;
    *i = k + 1;
    return 1;
}

static int pj_value(const unsigned char *p, Py_ssize_t n, Py_ssize_t *i, int depth) {
    if (*i >= n)
        return 0;
    unsigned char c = p[*i];
    if (c == '"')
        return pj_string(p, n, i);
    if (c == '{' || c == '[') {
        if (depth >= PJ_MAX_DEPTH)
            return 0;
        unsigned char close = c == '{' ? '}' : ']';
        Py_ssize_t keys[PJ_MAX_KEYS][2];
        int nkeys = 0;
        (*i)++;
        if (*i < n && p[*i] == close) {
            (*i)++;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                Py_ssize_t k0 = *i;
                if (*i >= n || p[*i] != '"' || !pj_string(p, n, i) || nkeys == PJ_MAX_KEYS)
                    return 0;
                Py_ssize_t klen = *i - k0;
                for (int j = 0; j < nkeys; j++)      /* a duplicate key: json.loads merges */
                    if (keys[j][1] == klen && memcmp(p + keys[j][0], p + k0, (size_t)klen) == 0)
                        return 0;
                keys[nkeys][0] = k0;
                keys[nkeys][1] = klen;
                nkeys++;
                if (*i >= n || p[*i] != ':')
                    return 0;
                (*i)++;
            }
            if (!pj_value(p, n, i, depth + 1) || *i >= n)
                return 0;
            if (p[*i] == close) {
                (*i)++;
                return 1;
            }
            if (p[*i] != ',')
                return 0;
            (*i)++;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        Py_ssize_t k = *i + (c == '-');
        Py_ssize_t d0 = k;
        while (k < n && p[k] >= '0' && p[k] <= '9')
            k++;
        Py_ssize_t digits = k - d0;
        if (digits == 0 || digits > PJ_MAX_DIGITS || (digits > 1 && p[d0] == '0')
                || (c == '-' && digits == 1 && p[d0] == '0'))      /* -0 prints as 0 */
            return 0;
        if (k < n && (p[k] == '.' || p[k] == 'e' || p[k] == 'E'))
            return 0;                                /* floats: repr decides */
        *i = k;
        return 1;
    }
    static const char *lits[3] = {"true", "false", "null"};
    for (int j = 0; j < 3; j++) {
        size_t len = strlen(lits[j]);
        if ((size_t)(n - *i) >= len && memcmp(p + *i, lits[j], len) == 0) {
            *i += (Py_ssize_t)len;
            return 1;
        }
    }
    return 0;
}

/* whether p[0:n] (printable ASCII) is canonical compact JSON (an object or array) */
static int pj_canonical(const unsigned char *p, Py_ssize_t n) {
    if (n == 0 || (p[0] != '{' && p[0] != '['))
        return 0;
    Py_ssize_t i = 0;
    return pj_value(p, n, &i, 0) && i == n;
}

PyDoc_STRVAR(payload_view_doc,
"payload_view(data, limit) -> str or None\n\n"
"kwsniff.output.tree._builtin_text(data, limit) for non-empty bytes data shown as hex\n"
"(it has a control byte), as plain text (printable ASCII without quote or backslash,\n"
"not starting like JSON) or as JSON that is already in the compact form json.dumps\n"
"gives (printable ASCII, no whitespace, no backslash, integers only, no duplicate keys,\n"
"shown as it is); None for anything else (the Python code decides).");

static PyObject *payload_view(PyObject *self, PyObject *args) {
    PyObject *data, *limit_obj;
    if (!PyArg_ParseTuple(args, "OO", &data, &limit_obj))
        return NULL;
    if (!PyBytes_CheckExact(data))
        Py_RETURN_NONE;
    Py_ssize_t limit = -1;          /* -1: None */
    if (limit_obj != Py_None) {
        limit = PyLong_AsSsize_t(limit_obj);
        if (limit == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (limit < 0)
            Py_RETURN_NONE;
    }
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    if (n == 0)
        Py_RETURN_NONE;
    int control = 0, plain = 1, ascii = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (pv_control(c)) {
            control = 1;
            break;
        }
        if (c < 0x20 || c > 0x7E)
            plain = ascii = 0;
        else if (c == '"' || c == '\\')
            plain = 0;
    }
    int json = !control && ascii && pj_canonical(p, n);
    /* the text before the " (N bytes)" suffix, built in buf (ASCII), then maybe "…" */
    Py_ssize_t cap;     /* the text, "..." and 48 bytes for "…" and the size suffix */
    char *buf;
    Py_ssize_t len = 0;
    int ellipsis = 0;
    if (control) {
        /* hex_string(data, limit // 2 + 1), cut at limit with "...", then "hex " */
        Py_ssize_t nbytes = n, dots = 0;
        if (limit >= 0 && n > limit / 2 + 1) {
            nbytes = limit / 2 + 1;
            dots = 1;
        }
        Py_ssize_t shown = 2 * nbytes + 3 * dots;
        int cut = limit >= 0 && shown > limit;
        Py_ssize_t keep = cut ? limit : shown;
        cap = 4 + keep + 3 + 48;
        buf = PyMem_Malloc((size_t)cap);
        if (buf == NULL)
            return PyErr_NoMemory();
        static const char digits[] = "0123456789abcdef";
        memcpy(buf, "hex ", 4);
        len = 4;
        for (Py_ssize_t i = 0; i < keep; i++) {
            Py_ssize_t k = i / 2;
            buf[len++] = k < nbytes ? digits[(i & 1) ? (p[k] & 0xF) : (p[k] >> 4)] : '.';
        }
        if (cut) {
            memcpy(buf + len, "...", 3);
            len += 3;
        }
    } else if (json) {
        /* json.dumps(json.loads(text)) is the text itself */
        cap = n + 48;
        buf = PyMem_Malloc((size_t)cap);
        if (buf == NULL)
            return PyErr_NoMemory();
        memcpy(buf, p, (size_t)n);
        len = n;
    } else if (plain) {
        Py_ssize_t q = 0;
        while (q < n && p[q] == ' ')
            q++;
        if (q < n && (p[q] == '{' || p[q] == '['))
            Py_RETURN_NONE;         /* JSON-like: json.loads decides */
        /* text cut at limit with "...", then quoted */
        int cut = limit >= 0 && n > limit;
        Py_ssize_t keep = cut ? limit : n;
        cap = 1 + keep + 3 + 1 + 48;
        buf = PyMem_Malloc((size_t)cap);
        if (buf == NULL)
            return PyErr_NoMemory();
        buf[len++] = '"';
        memcpy(buf + len, p, (size_t)keep);
        len += keep;
        if (cut) {
            memcpy(buf + len, "...", 3);
            len += 3;
        }
        buf[len++] = '"';
    } else {
        Py_RETURN_NONE;
    }
    if (limit > 0 && len > limit) {    /* _builtin_text: "if limit and len(text) > limit" */
        len = limit;
        ellipsis = 1;
    }
    if (ellipsis) {                     /* "…" in UTF-8 */
        memcpy(buf + len, "\xe2\x80\xa6", 3);
        len += 3;
    }
    len += snprintf(buf + len, 40, " (%zd bytes)", n);
    PyObject *res = PyUnicode_DecodeUTF8(buf, len, NULL);
    PyMem_Free(buf);
    return res;
}

/* ---------------------------------------------------------------- tree nodes */

/* The nine attributes of a -V tree node, in the constructor's positional order. */
typedef struct {
    PyObject_HEAD
    PyObject *label, *value, *children, *start, *length, *message, *about, *path, *style;
} NodeObject;

#define NODE_FIELDS 9
static const char *node_names[NODE_FIELDS] = {
    "label", "value", "children", "start", "length", "message", "about", "path", "style"};
static PyObject *node_keys[NODE_FIELDS];          /* interned node_names */
static PyObject *empty_str, *empty_tuple;

static inline PyObject **node_slot(NodeObject *n, int i) {
    return &n->label + i;
}

static int node_traverse(NodeObject *self, visitproc visit, void *arg) {
    for (int i = 0; i < NODE_FIELDS; i++)
        Py_VISIT(*node_slot(self, i));
    return 0;           /* (a heap subclass's type is visited by CPython's subtype_traverse) */
}

static int node_clear(NodeObject *self) {
    for (int i = 0; i < NODE_FIELDS; i++)
        Py_CLEAR(*node_slot(self, i));
    return 0;
}

/* (a heap subclass's type reference is dropped by CPython's subtype_dealloc) */
static void node_dealloc(NodeObject *self) {
    PyObject_GC_UnTrack(self);
    node_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The arguments of a constructor of at most `count` parameters named `names` (interned
 * as `keys`), positional or by keyword, into given[] (borrowed; NULL: not given).
 * 0, or -1 with a TypeError naming `what`. */
static int init_args(PyObject *args, PyObject *kwds, int count, const char **names,
                     PyObject **keys, const char *what, PyObject **given) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n > count) {
        PyErr_Format(PyExc_TypeError, "%s takes at most %d arguments (%zd given)", what,
                     count, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        given[i] = PyTuple_GET_ITEM(args, i);
    if (kwds == NULL || !PyDict_GET_SIZE(kwds))
        return 0;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(kwds, &pos, &k, &v)) {
        int i = 0;
        for (; i < count; i++)
            if (k == keys[i])
                break;
        if (i == count && PyUnicode_Check(k))
            for (i = 0; i < count; i++)
                if (PyUnicode_Compare(k, keys[i]) == 0)
                    break;
        if (i == count) {
            PyErr_Format(PyExc_TypeError, "%s got an unexpected keyword argument '%S'", what, k);
            return -1;
        }
        if (given[i] != NULL && i < n) {
            PyErr_Format(PyExc_TypeError, "%s got multiple values for argument '%s'", what,
                         names[i]);
            return -1;
        }
        given[i] = v;
    }
    return 0;
}

/* NodeBase(label, value="", children=<new list>, start=None, length=None, message=None,
 * about=None, path=(), style=None): the dataclass constructor's arguments */
static int node_init(NodeObject *self, PyObject *args, PyObject *kwds) {
    PyObject *given[NODE_FIELDS] = {NULL};
    if (init_args(args, kwds, NODE_FIELDS, node_names, node_keys, "TreeNode", given) < 0)
        return -1;
    if (given[0] == NULL) {
        PyErr_SetString(PyExc_TypeError, "TreeNode missing 1 required positional argument: "
                                         "'label'");
        return -1;
    }
    for (int i = 0; i < NODE_FIELDS; i++) {
        PyObject *v = given[i];
        if (v != NULL)
            Py_INCREF(v);
        else if (i == 1)
            v = Py_NewRef(empty_str);
        else if (i == 2) {
            v = PyList_New(0);
            if (v == NULL)
                return -1;
        } else if (i == 7)
            v = Py_NewRef(empty_tuple);
        else
            v = Py_NewRef(Py_None);
        Py_XSETREF(*node_slot(self, i), v);
    }
    return 0;
}

static PyMemberDef node_members[] = {
    {"label", T_OBJECT, offsetof(NodeObject, label), 0, NULL},
    {"value", T_OBJECT, offsetof(NodeObject, value), 0, NULL},
    {"children", T_OBJECT, offsetof(NodeObject, children), 0, NULL},
    {"start", T_OBJECT, offsetof(NodeObject, start), 0, NULL},
    {"length", T_OBJECT, offsetof(NodeObject, length), 0, NULL},
    {"message", T_OBJECT, offsetof(NodeObject, message), 0, NULL},
    {"about", T_OBJECT, offsetof(NodeObject, about), 0, NULL},
    {"path", T_OBJECT, offsetof(NodeObject, path), 0, NULL},
    {"style", T_OBJECT, offsetof(NodeObject, style), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject NodeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kwsniff._speedups.NodeBase",
    .tp_doc = PyDoc_STR("The storage and constructor of kwsniff.output.tree.TreeNode: "
                        "label, value, children, start, length, message, about, path, "
                        "style (defaults as the dataclass had them)."),
    .tp_basicsize = sizeof(NodeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)node_init,
    .tp_dealloc = (destructor)node_dealloc,
    .tp_traverse = (traverseproc)node_traverse,
    .tp_clear = (inquiry)node_clear,
    .tp_members = node_members,
};

/* ---------------------------------------------------------------- Kafka frames */

/* kwsniff.kafka.framing.Frame's storage: raw, offset, frame_first, frame_last, ts_first,
 * ts_last, missing, skipped_before, discarded. Not GC-tracked: a frame holds bytes and
 * numbers only (the framer's contract), so it cannot be part of a cycle. The struct,
 * FrameObject, is declared in _speedups.h. */
#define FRAME_FIELDS 9
#define FRAME_ARGS 8            /* the constructor's parameters (discarded starts at 0) */
static const char *frame_names[FRAME_FIELDS] = {
    "raw", "offset", "frame_first", "frame_last", "ts_first", "ts_last", "missing",
    "skipped_before", "discarded"};
static PyObject *frame_keys[FRAME_FIELDS];
static PyObject *zero_int;

static inline PyObject **frame_slot(FrameObject *f, int i) {
    return &f->raw + i;
}

/* (a heap subclass's type reference is dropped by CPython's subtype_dealloc) */
static void frame_dealloc(FrameObject *self) {
    for (int i = 0; i < FRAME_FIELDS; i++)
        Py_CLEAR(*frame_slot(self, i));
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* FrameBase(raw, offset, frame_first, frame_last, ts_first, ts_last, missing=0,
 * skipped_before=0) */
static int frame_init(FrameObject *self, PyObject *args, PyObject *kwds) {
    PyObject *given[FRAME_ARGS] = {NULL};
    if (init_args(args, kwds, FRAME_ARGS, frame_names, frame_keys, "Frame", given) < 0)
        return -1;
    for (int i = 0; i < 6; i++)
        if (given[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "Frame missing required argument: '%s'",
                         frame_names[i]);
            return -1;
        }
    for (int i = 0; i < FRAME_FIELDS; i++) {
        PyObject *v = i < FRAME_ARGS && given[i] != NULL ? given[i] : zero_int;
        Py_XSETREF(*frame_slot(self, i), Py_NewRef(v));
    }
    return 0;
}

static PyMemberDef frame_members[] = {
    {"raw", T_OBJECT, offsetof(FrameObject, raw), 0, NULL},
    {"offset", T_OBJECT, offsetof(FrameObject, offset), 0, NULL},
    {"frame_first", T_OBJECT, offsetof(FrameObject, frame_first), 0, NULL},
    {"frame_last", T_OBJECT, offsetof(FrameObject, frame_last), 0, NULL},
    {"ts_first", T_OBJECT, offsetof(FrameObject, ts_first), 0, NULL},
    {"ts_last", T_OBJECT, offsetof(FrameObject, ts_last), 0, NULL},
    {"missing", T_OBJECT, offsetof(FrameObject, missing), 0, NULL},
    {"skipped_before", T_OBJECT, offsetof(FrameObject, skipped_before), 0, NULL},
    {"discarded", T_OBJECT, offsetof(FrameObject, discarded), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject FrameType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kwsniff._speedups.FrameBase",
    .tp_doc = PyDoc_STR("The storage and constructor of kwsniff.kafka.framing.Frame: raw, "
                        "offset, frame_first, frame_last, ts_first, ts_last, missing=0, "
                        "skipped_before=0 (discarded starts at 0)."),
    .tp_basicsize = sizeof(FrameObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)frame_init,
    .tp_dealloc = (destructor)frame_dealloc,
    .tp_members = frame_members,
};

PyDoc_STRVAR(cut_frames_doc,
"cut_frames(frame_type, data, offset, frame, ts, max_frame, skip) -> (frames, pos) or None\n\n"
"kwsniff.kafka.framing.Framer._fast's loop: the complete size-prefixed frames at the\n"
"start of data, as frame_type objects (a subclass of FrameBase) made as\n"
"frame_type(bytes(data[pos + 4:end]), offset + pos, frame, frame, ts, ts, 0, skip) with\n"
"skip for the first frame and 0 after; pos is where the loop stopped (a partial frame\n"
"or an implausible size). None (the caller runs the Python loop) for a type that is not\n"
"a FrameBase subclass or offsets past 2**62.");

PyObject *cut_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7 || !PyType_Check(args[0])
            || !PyType_IsSubtype((PyTypeObject *)args[0], &FrameType))
        Py_RETURN_NONE;
    PyTypeObject *tp = (PyTypeObject *)args[0];
    if (tp->tp_basicsize != FrameType.tp_basicsize)
        Py_RETURN_NONE;                      /* a subclass with storage of its own */
    int overflow = 0;
    long long offset = PyLong_Check(args[2]) ? PyLong_AsLongLongAndOverflow(args[2], &overflow)
                                             : -1;
    long long max_frame = PyLong_Check(args[5])
        ? PyLong_AsLongLongAndOverflow(args[5], &overflow) : -1;
    if (PyErr_Occurred())
        return NULL;
    if (overflow || offset < 0 || offset > (1LL << 62) || max_frame < 0)
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *frame = args[3], *ts = args[4], *skip = args[6];
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len, pos = 0;
    while (n - pos >= 4) {
        const unsigned char *q = d + pos;
        int32_t size = (int32_t)(((uint32_t)q[0] << 24) | ((uint32_t)q[1] << 16)
                                 | ((uint32_t)q[2] << 8) | (uint32_t)q[3]);
        if (size < 0 || size > max_frame)
            break;
        Py_ssize_t end = pos + 4 + (Py_ssize_t)size;
        if (end > n)
            break;
        PyObject *raw = PyBytes_FromStringAndSize((const char *)q + 4, size);
        PyObject *off = raw ? PyLong_FromLongLong(offset + pos) : NULL;
        FrameObject *f = off ? (FrameObject *)tp->tp_alloc(tp, 0) : NULL;
        if (f == NULL) {
            Py_XDECREF(raw);
            Py_XDECREF(off);
            goto fail;
        }
        f->raw = raw;
        f->offset = off;
        f->frame_first = Py_NewRef(frame);
        f->frame_last = Py_NewRef(frame);
        f->ts_first = Py_NewRef(ts);
        f->ts_last = Py_NewRef(ts);
        f->missing = Py_NewRef(zero_int);
        f->skipped_before = Py_NewRef(skip);
        f->discarded = Py_NewRef(zero_int);
        skip = zero_int;
        int r = PyList_Append(out, (PyObject *)f);
        Py_DECREF(f);
        if (r < 0)
            goto fail;
        pos = end;
    }
    PyBuffer_Release(&view);
    return tuple_steal(2, out, PyLong_FromSsize_t(pos));
fail:
    Py_DECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

/* ---------------------------------------------------------------- tree fields */

/* What tree_fields works with: the builder, its message kind and schema key, and the
 * Python objects of kwsniff.output.tree it mirrors (see tree_fields_doc). */
typedef struct {
    PyObject *b, *kind, *schema, *known_all, *enum_label, *quote, *api_label;
    PyTypeObject *node_tp;
} TreeEnv;

#define TF_MAX_DEPTH 100        /* deeper structs are left to the Python builder */
/* Structs whose field path (without indexes) is longer than this are left to the Python
 * builder too, which shows them as a problem: kwsniff.output.tree.MAX_TREE_NESTING (the
 * module exports it as TREE_MAX_NESTING and a test compares them). */
#define TF_MAX_NAMES 64

static PyObject *s_children;                /* (the plain tree lines section sets it) */
static int pl_printable(PyObject *s);

static PyObject *s_known, *s_learn, *s_value_m, *s_unknown_tags, *s_fields_py;
static PyObject *s_topic_name, *s_problem, *s_warn;
static PyObject *s_null, *s_true, *s_false, *s_empty_list, *s_no_error;

/* an exact int equal to 0 */
static int tf_long_is_zero(PyObject *v) {
    int overflow = 0;
    return PyLong_AsLongLongAndOverflow(v, &overflow) == 0 && !overflow && !PyErr_Occurred();
}
static PyObject *hint_str_keys[8], *hint_int_keys[6], *s_api_key;

/* TreeNode(label, value, children, start, length, message, about, path, style) of type tp
 * without running a constructor; children NULL: a new list (all references borrowed) */
static PyObject *node_new(PyTypeObject *tp, PyObject *label, PyObject *value,
                          PyObject *children, PyObject *start, PyObject *length,
                          PyObject *message, PyObject *about, PyObject *path, PyObject *style) {
    PyObject *kids = children ? Py_NewRef(children) : PyList_New(0);
    if (kids == NULL)
        return NULL;
    NodeObject *n = (NodeObject *)tp->tp_alloc(tp, 0);
    if (n == NULL) {
        Py_DECREF(kids);
        return NULL;
    }
    n->label = Py_NewRef(label);
    n->value = Py_NewRef(value);
    n->children = kids;
    n->start = Py_NewRef(start);
    n->length = Py_NewRef(length);
    n->message = Py_NewRef(message);
    n->about = Py_NewRef(about);
    n->path = Py_NewRef(path);
    n->style = Py_NewRef(style);
    return (PyObject *)n;
}

/* a new node of env->node_tp: TreeNode(label, value, [], None, None, message, about,
 * path, style) (all references borrowed) */
static PyObject *tf_node(TreeEnv *env, PyObject *label, PyObject *value, PyObject *message,
                         PyObject *about, PyObject *path, PyObject *style) {
    return node_new(env->node_tp, label, value, NULL, Py_None, Py_None, message, about, path,
                    style);
}

/* parent.children (a new reference) */
static PyObject *tf_children(PyObject *parent) {
    if (PyObject_TypeCheck(parent, &NodeType) && ((NodeObject *)parent)->children != NULL)
        return Py_NewRef(((NodeObject *)parent)->children);
    return PyObject_GetAttr(parent, s_children);
}

/* parent.add(node): node appended to parent.children; the reference to node is stolen */
static int tf_add(PyObject *parent, PyObject *node) {
    if (node == NULL)
        return -1;
    PyObject *children = tf_children(parent);
    int rc = -1;
    if (children != NULL && PyList_Check(children))
        rc = PyList_Append(children, node);
    else if (children != NULL) {
        PyObject *r = PyObject_CallMethod(children, "append", "O", node);
        rc = r == NULL ? -1 : 0;
        Py_XDECREF(r);
    }
    Py_XDECREF(children);
    Py_DECREF(node);
    return rc;
}

/* _quote(text) of tree.py: '"text"' for plain printable text, else quote(text) (the
 * Python function) */
static PyObject *quote_text(PyObject *quote, PyObject *text) {
    if (PyUnicode_CheckExact(text) && pl_printable(text)
            && PyUnicode_FindChar(text, '"', 0, PyUnicode_GET_LENGTH(text), 1) == -1
            && PyUnicode_FindChar(text, '\\', 0, PyUnicode_GET_LENGTH(text), 1) == -1)
        return PyUnicode_FromFormat("\"%U\"", text);
    return PyObject_CallOneArg(quote, text);
}

/* (first, *head, last), first and last left out when NULL (a new tuple; head a tuple) */
static PyObject *tf_extend(PyObject *first, PyObject *head, PyObject *last) {
    Py_ssize_t n = PyTuple_GET_SIZE(head), off = first ? 1 : 0;
    PyObject *t = PyTuple_New(n + off + (last ? 1 : 0));
    if (t == NULL)
        return NULL;
    if (first)
        PyTuple_SET_ITEM(t, 0, Py_NewRef(first));
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i + off, Py_NewRef(PyTuple_GET_ITEM(head, i)));
    if (last)
        PyTuple_SET_ITEM(t, n + off, Py_NewRef(last));
    return t;
}

/* _item_hint(item) of tree.py */
static PyObject *tf_item_hint(TreeEnv *env, PyObject *item) {
    for (int i = 0; i < 8; i++) {
        PyObject *v = PyDict_GetItemWithError(item, hint_str_keys[i]);
        if (v == NULL && PyErr_Occurred())
            return NULL;
        if (v != NULL && PyUnicode_Check(v) && PyUnicode_GET_LENGTH(v))
            return quote_text(env->quote, v);
    }
    for (int i = 0; i < 6; i++) {
        PyObject *v = PyDict_GetItemWithError(item, hint_int_keys[i]);
        if (v == NULL && PyErr_Occurred())
            return NULL;
        if (v != NULL && PyLong_CheckExact(v)) {
            if (hint_int_keys[i] == s_api_key)
                return PyObject_CallOneArg(env->api_label, v);
            return PyUnicode_FromFormat("%U %S", hint_int_keys[i], v);
        }
    }
    return Py_NewRef(empty_str);
}

static int tf_fields(TreeEnv *env, PyObject *parent, PyObject *obj, PyObject *section,
                     PyObject *path, PyObject *sinfo, PyObject *names, int depth);

/* b.<method>(*args) with a None result: 0, or -1 on error */
static int tf_call(TreeEnv *env, PyObject *method, PyObject *const *args, size_t n) {
    PyObject *all[12];
    all[0] = env->b;
    for (size_t i = 0; i < n; i++)
        all[i + 1] = args[i];
    PyObject *r = PyObject_VectorcallMethod(method, all, (n + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            NULL);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

static int tf_is(PyObject *s, const char *ascii) {
    return PyUnicode_CompareWithASCIIString(s, ascii) == 0;
}

/* the fields of a list of dicts (the struct branch of _Builder.array): a count node and
 * one node per item with its fields */
static int tf_items(TreeEnv *env, PyObject *parent, PyObject *key, PyObject *list,
                    PyObject *section, PyObject *kpath, PyObject *about, PyObject *sinfo,
                    PyObject *knames, int depth) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *count = PyUnicode_FromFormat("%zd item%s", n, n != 1 ? "s" : "");
    PyObject *npath = count ? tf_extend(section, kpath, NULL) : NULL;
    PyObject *node = npath ? tf_node(env, key, count, env->kind, about, npath, Py_None) : NULL;
    Py_XDECREF(count);
    Py_XDECREF(npath);
    if (node == NULL)
        return -1;
    Py_INCREF(node);
    if (tf_add(parent, node) < 0) {
        Py_DECREF(node);
        return -1;
    }
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(list); i++) {
        PyObject *item = Py_NewRef(PyList_GET_ITEM(list, i));
        PyObject *index = PyLong_FromSsize_t(i);
        PyObject *ipath = index ? tf_extend(NULL, kpath, index) : NULL;
        PyObject *cpath = ipath ? tf_extend(section, ipath, NULL) : NULL;
        PyObject *label = cpath ? PyUnicode_FromFormat("%U[%zd]", key, i) : NULL;
        PyObject *hint = label ? tf_item_hint(env, item) : NULL;
        PyObject *child = hint ? tf_node(env, label, hint, env->kind, Py_None, cpath, Py_None)
                               : NULL;
        if (child == NULL)
            rc = -1;
        else {
            Py_INCREF(child);
            rc = tf_add(node, child);
            if (rc == 0)
                rc = tf_fields(env, child, item, section, ipath, sinfo, knames, depth + 1);
            Py_DECREF(child);
        }
        Py_DECREF(item);
        Py_XDECREF(index);
        Py_XDECREF(ipath);
        Py_XDECREF(cpath);
        Py_XDECREF(label);
        Py_XDECREF(hint);
    }
    Py_DECREF(node);
    return rc;
}

/* one field of a struct (the loop body of _Builder.fields): 0 done, -1 error */
static int tf_field(TreeEnv *env, PyObject *parent, PyObject *obj, PyObject *key,
                    PyObject *value, PyObject *known, PyObject *section, PyObject *path,
                    PyObject *sinfo, PyObject *names, int meta, int depth) {
    if (PyUnicode_GET_LENGTH(key) && PyUnicode_READ_CHAR(key, 0) == '_') {
        if (tf_is(key, "_unknown_tags")) {
            PyObject *args[4] = {parent, value, section, path};
            return tf_call(env, s_unknown_tags, args, 4);
        }
        if (tf_is(key, "_problems") && PyList_Check(value)) {
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
                PyObject *text = PyObject_Str(PyList_GET_ITEM(value, i));
                if (text == NULL)
                    return -1;
                PyObject *node = tf_node(env, s_problem, text, Py_None, Py_None, empty_tuple,
                                         s_warn);
                Py_DECREF(text);
                if (tf_add(parent, node) < 0)
                    return -1;
            }
        }
        return 0;
    }
    PyObject *ae = PyDict_GetItemWithError(known, key);
    if (ae != NULL)
        Py_INCREF(ae);
    else if (PyErr_Occurred())
        return -1;
    else {
        PyObject *all[6] = {env->b, known, key, section, names, sinfo};
        ae = PyObject_VectorcallMethod(s_learn, all, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (ae == NULL)
            return -1;
    }
    if (!PyTuple_CheckExact(ae) || PyTuple_GET_SIZE(ae) != 3) {
        Py_DECREF(ae);
        PyErr_SetString(PyExc_TypeError, "tree field metadata is not (about, enum, error)");
        return -1;
    }
    PyObject *about = PyTuple_GET_ITEM(ae, 0), *enm = PyTuple_GET_ITEM(ae, 1);
    int is_error = PyObject_IsTrue(PyTuple_GET_ITEM(ae, 2));
    int rc = 0;
    PyObject *text = NULL, *npath = NULL, *kpath = NULL, *knames = NULL;
    if (is_error < 0) {
        rc = -1;
        goto done;
    }
    if (!meta && PyUnicode_CheckExact(value)) {         /* a string field */
        text = quote_text(env->quote, value);
        if (text != NULL && tf_is(key, "TopicId")) {
            PyObject *name = PyDict_GetItemWithError(obj, s_topic_name);
            if (name != NULL && PyUnicode_Check(name))
                Py_SETREF(text, PyUnicode_FromFormat("%U (%S)", text, name));
            else if (name == NULL && PyErr_Occurred())
                Py_CLEAR(text);
        }
    } else if (!meta && (value == Py_None || PyBool_Check(value)
                         || (PyList_CheckExact(value) && PyList_GET_SIZE(value) == 0)
                         || (PyLong_CheckExact(value) && is_error && tf_long_is_zero(value)))
               && !tf_is(key, "TopicId")) {
        /* what _Builder.value shows of null, a bool, an empty list, error code 0 */
        text = Py_NewRef(value == Py_None ? s_null : value == Py_True ? s_true
                         : value == Py_False ? s_false : PyList_Check(value) ? s_empty_list
                         : s_no_error);
    } else if (!meta && PyLong_CheckExact(value) && !is_error) {    /* an int field */
        PyObject *label = Py_NewRef(Py_None);
        if (enm != Py_None) {
            PyObject *args[2] = {enm, value};
            Py_SETREF(label, PyObject_Vectorcall(env->enum_label, args, 2, NULL));
        }
        int truth = label ? PyObject_IsTrue(label) : -1;
        text = truth < 0 ? NULL : truth ? PyUnicode_FromFormat("%S (%S)", value, label)
                                        : PyObject_Str(value);
        Py_XDECREF(label);
    } else {
        kpath = tf_extend(NULL, path, key);
        knames = kpath ? tf_extend(NULL, names, key) : NULL;
        if (knames == NULL) {
            rc = -1;
            goto done;
        }
        int items = 0;
        int within = depth < TF_MAX_DEPTH && PyTuple_GET_SIZE(knames) <= TF_MAX_NAMES;
        if (PyList_CheckExact(value) && PyList_GET_SIZE(value) && within) {
            items = 1;
            for (Py_ssize_t i = 0; items && i < PyList_GET_SIZE(value); i++)
                items = PyDict_CheckExact(PyList_GET_ITEM(value, i));
        }
        if (PyDict_CheckExact(value) && within) {                      /* a struct */
            npath = tf_extend(section, kpath, NULL);
            PyObject *node = npath ? tf_node(env, key, empty_str, env->kind, about, npath,
                                             Py_None) : NULL;
            if (node == NULL) {
                rc = -1;
                goto done;
            }
            Py_INCREF(node);
            rc = tf_add(parent, node);
            if (rc == 0 && Py_EnterRecursiveCall(" while building a tree") == 0) {
                rc = tf_fields(env, node, value, section, kpath, sinfo, knames, depth + 1);
                Py_LeaveRecursiveCall();
            } else
                rc = -1;
            Py_DECREF(node);
        } else if (items) {                                 /* an array of structs */
            if (Py_EnterRecursiveCall(" while building a tree") == 0) {
                rc = tf_items(env, parent, key, value, section, kpath, about, sinfo, knames,
                              depth);
                Py_LeaveRecursiveCall();
            } else
                rc = -1;
        } else {                                            /* the Python builder */
            PyObject *args[11] = {parent, key, value, section, kpath, about, enm, obj, sinfo,
                                  knames, meta ? Py_True : Py_False};
            rc = tf_call(env, s_value_m, args, 11);
        }
        goto done;
    }
    if (text == NULL) {
        rc = -1;
        goto done;
    }
    npath = tf_extend(section, path, key);
    rc = npath ? tf_add(parent, tf_node(env, key, text, env->kind, about, npath, Py_None)) : -1;
done:
    Py_XDECREF(text);
    Py_XDECREF(npath);
    Py_XDECREF(kpath);
    Py_XDECREF(knames);
    Py_DECREF(ae);
    return rc;
}

/* _Builder.fields without byte spans: 0 done, -1 error */
static int tf_fields(TreeEnv *env, PyObject *parent, PyObject *obj, PyObject *section,
                     PyObject *path, PyObject *sinfo, PyObject *names, int depth) {
    int python = depth > TF_MAX_DEPTH || !PyDict_CheckExact(obj) || !PyTuple_CheckExact(path)
        || !PyTuple_CheckExact(names);
    int meta = 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (!python && PyDict_Next(obj, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key))
            python = 1;           /* Python decides what happens (a TypeError) */
        else if (!meta && PyUnicode_GET_LENGTH(key) && PyUnicode_READ_CHAR(key, 0) == '_'
                 && !tf_is(key, "_unknown_tags") && !tf_is(key, "_problems"))
            meta = 1;
    }
    if (python) {
        PyObject *args[6] = {parent, obj, section, path, sinfo, names};
        return tf_call(env, s_fields_py, args, 6);
    }
    /* known = b._known(section, names, sinfo), its _KNOWN entry looked up here */
    PyObject *ck = PyTuple_Pack(4, env->schema, section, names, sinfo);
    if (ck == NULL)
        return -1;
    PyObject *known = PyDict_GetItemWithError(env->known_all, ck);
    Py_DECREF(ck);
    if (known != NULL)
        Py_INCREF(known);
    else if (PyErr_Occurred())
        return -1;
    else {
        PyObject *all[4] = {env->b, section, names, sinfo};
        known = PyObject_VectorcallMethod(s_known, all, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                          NULL);
        if (known == NULL)
            return -1;
    }
    if (!PyDict_Check(known)) {
        Py_DECREF(known);
        PyErr_SetString(PyExc_TypeError, "tree field metadata table is not a dict");
        return -1;
    }
    Py_ssize_t size = PyDict_GET_SIZE(obj);
    int rc = 0;
    pos = 0;
    while (rc == 0 && PyDict_Next(obj, &pos, &key, &value)) {
        Py_INCREF(key);
        Py_INCREF(value);
        rc = tf_field(env, parent, obj, key, value, known, section, path, sinfo, names, meta,
                      depth);
        Py_DECREF(key);
        Py_DECREF(value);
        if (rc == 0 && PyDict_GET_SIZE(obj) != size) {
            PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
            rc = -1;
        }
    }
    Py_DECREF(known);
    return rc;
}

PyDoc_STRVAR(tree_fields_doc,
"tree_fields(builder, parent, obj, section, path, struct_info, names, env) -> None\n\n"
"kwsniff.output.tree._Builder.fields for a builder without byte spans: the nodes of the\n"
"fields of obj appended to parent. env is (TreeNode, _KNOWN, enum_label, _quote,\n"
"api_label). Strings, ints, null, bools, empty lists, error code 0, structs and arrays\n"
"of structs are made here (a TopicId that is not a string excepted); every other\n"
"value goes to builder.value(), _unknown_tags to builder.unknown_tags(), unknown field\n"
"metadata to builder._learn(), a dict that is not plain (or deeper than 100 levels) to\n"
"builder._fields_py().");

static PyObject *tree_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8 || !PyTuple_CheckExact(args[7]) || PyTuple_GET_SIZE(args[7]) != 5) {
        PyErr_SetString(PyExc_TypeError, "tree_fields(builder, parent, obj, section, path, "
                                         "struct_info, names, env)");
        return NULL;
    }
    PyObject *envt = args[7];
    TreeEnv env;
    env.b = args[0];
    env.node_tp = (PyTypeObject *)PyTuple_GET_ITEM(envt, 0);
    env.known_all = PyTuple_GET_ITEM(envt, 1);
    env.enum_label = PyTuple_GET_ITEM(envt, 2);
    env.quote = PyTuple_GET_ITEM(envt, 3);
    env.api_label = PyTuple_GET_ITEM(envt, 4);
    if (!PyType_Check((PyObject *)env.node_tp)
            || !PyType_IsSubtype(env.node_tp, &NodeType)
            || env.node_tp->tp_basicsize != NodeType.tp_basicsize
            || !PyDict_CheckExact(env.known_all)) {
        PyErr_SetString(PyExc_TypeError, "tree_fields: env is not (a NodeBase subclass "
                                         "without fields, a dict, ...)");
        return NULL;
    }
    env.kind = PyObject_GetAttrString(env.b, "kind");
    env.schema = env.kind ? PyObject_GetAttrString(env.b, "_schema") : NULL;
    int rc = env.schema == NULL ? -1 :
        tf_fields(&env, args[1], args[2], args[3], args[4], args[5], args[6], 0);
    Py_XDECREF(env.kind);
    Py_XDECREF(env.schema);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- tree batches */

/* interned names: attributes of Batch/Record, labels and fixed texts of their nodes */
enum {
    TB_KIND, TB_START, TB_LENGTH, TB_AVAILABLE, TB_TRUNCATED, TB_MAGIC, TB_BASE_OFFSET,
    TB_PLE, TB_CRC, TB_ATTRIBUTES, TB_LOD, TB_BASE_TS, TB_MAX_TS, TB_PRODUCER_ID,
    TB_PRODUCER_EPOCH, TB_BASE_SEQUENCE, TB_DECLARED, TB_CRC_OK, TB_RECORDS, TB_CSIZE,
    TB_DSIZE, TB_FRAMING, TB_PROBLEMS, TB_OFFSET, TB_TIMESTAMP, TB_KEY, TB_VALUE,
    TB_HEADERS, TB_SIZE, TB_CONTROL, TB_KEY_DECODED, TB_VALUE_DECODED, TB_RECORD_M,
    L_BASE_OFFSET, L_BATCH_LENGTH, L_PLE, L_MAGIC, L_CRC, L_ATTRIBUTES, L_LOD, L_BASE_TS,
    L_MAX_TS, L_PRODUCER_ID, L_PRODUCER_EPOCH, L_BASE_SEQUENCE, L_RECORD_COUNT,
    L_COMPRESSED, L_OFFSET, L_TIMESTAMP, L_KEY, L_VALUE, L_HEADERS, T_V2, T_NULL, T_ERROR,
    T_RECORDS, T_SEP, TB_NAMES
};
static const char *tb_texts[TB_NAMES] = {
    "kind", "start", "length", "available", "truncated", "magic", "base_offset",
    "partition_leader_epoch", "crc", "attributes", "last_offset_delta", "base_timestamp",
    "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "declared_count",
    "crc_ok", "records", "compressed_size", "decompressed_size", "framing", "problems",
    "offset", "timestamp", "key", "value", "headers", "size", "control", "key_decoded",
    "value_decoded", "record",
    "BaseOffset", "BatchLength", "PartitionLeaderEpoch", "Magic", "CRC", "Attributes",
    "LastOffsetDelta", "BaseTimestamp", "MaxTimestamp", "ProducerId", "ProducerEpoch",
    "BaseSequence", "RecordCount", "Compressed", "Offset", "Timestamp", "Key", "Value",
    "Headers", "v2", "null", "error", "records", ", "};
static PyObject *tb[TB_NAMES];

/* What tree_batch works with (see tree_batch_doc); references borrowed. */
typedef struct {
    PyObject *b, *records, *base, *kind, *limit;
    PyObject *format_ms, *view, *quote, *codec_names, *codec_name;
    PyTypeObject *node_tp;
} BatchEnv;

/* kids.append(TreeNode(label, text)) with message/style (kids: a node's children list);
 * text is stolen (NULL: error) */
static int tb_add(BatchEnv *env, PyObject *kids, PyObject *label, PyObject *text,
                  PyObject *message, PyObject *style) {
    if (text == NULL)
        return -1;
    PyObject *node = node_new(env->node_tp, label, text, NULL, Py_None, Py_None, message,
                              Py_None, empty_tuple, style);
    Py_DECREF(text);
    if (node == NULL)
        return -1;
    int rc = PyList_Append(kids, node);
    Py_DECREF(node);
    return rc;
}

/* "null" for None, else str(v) (a new reference) */
static PyObject *tb_text(PyObject *v) {
    return v == Py_None ? Py_NewRef(tb[T_NULL]) : PyObject_Str(v);
}

/* _format_ms(v) of tree.py for a timestamp row ("null" for None) */
static PyObject *tb_ms(BatchEnv *env, PyObject *v) {
    return v == Py_None ? Py_NewRef(tb[T_NULL]) : PyObject_CallOneArg(env->format_ms, v);
}

/* Batch.codec_name for attributes (None: codec 0) */
static PyObject *tb_codec(BatchEnv *env, PyObject *attributes) {
    long codec = attributes == Py_None ? 0 : PyLong_AsLong(attributes) & 0x07;
    PyObject *key = PyLong_FromLong(codec);
    if (key == NULL)
        return NULL;
    PyObject *name = PyDict_GetItemWithError(env->codec_names, key);
    if (name != NULL)
        Py_INCREF(name);
    else if (!PyErr_Occurred())
        name = PyObject_CallOneArg(env->codec_name, key);
    Py_DECREF(key);
    return name;
}

/* an int in [0, max] (1), anything else (0) */
static int tb_uint(PyObject *v, unsigned long long max) {
    if (!PyLong_CheckExact(v))
        return 0;
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    return !overflow && x >= 0 && (unsigned long long)x <= max;
}

/* whether the C code makes this record's nodes: no control data, no decoded key/value,
 * headers a list of (key, value) tuples, crc None or 32 bits (1 yes, 0 no, -1 error) */
static int tb_record_plain(PyObject *r) {
    static const int none[3] = {TB_CONTROL, TB_KEY_DECODED, TB_VALUE_DECODED};
    for (int i = 0; i < 3; i++) {
        PyObject *v = PyObject_GetAttr(r, tb[none[i]]);
        if (v == NULL)
            return -1;
        Py_DECREF(v);
        if (v != Py_None)
            return 0;
    }
    PyObject *h = PyObject_GetAttr(r, tb[TB_HEADERS]);
    if (h == NULL)
        return -1;
    int ok = h == Py_None || PyList_CheckExact(h);
    if (ok && h != Py_None)
        for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(h); i++) {
            PyObject *e = PyList_GET_ITEM(h, i);
            ok = PyTuple_CheckExact(e) && PyTuple_GET_SIZE(e) == 2;
        }
    Py_DECREF(h);
    if (!ok)
        return 0;
    PyObject *crc = PyObject_GetAttr(r, tb[TB_CRC]);
    if (crc == NULL)
        return -1;
    ok = crc == Py_None || tb_uint(crc, 0xFFFFFFFFULL);
    Py_DECREF(crc);
    return ok;
}

/* Problem nodes of the texts in seq appended to kids (None: none) */
static int tb_problems(BatchEnv *env, PyObject *kids, PyObject *seq) {
    if (seq == Py_None)
        return 0;
    PyObject *fast = PySequence_Fast(seq, "problems are not a sequence");
    if (fast == NULL)
        return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(fast); i++)
        rc = tb_add(env, kids, s_problem, PyObject_Str(PySequence_Fast_GET_ITEM(fast, i)),
                    Py_None, s_warn);
    Py_DECREF(fast);
    return rc;
}

/* _view(data, value_chars) of tree.py */
static PyObject *tb_view(BatchEnv *env, PyObject *data) {
    PyObject *args[2] = {data, env->limit};
    return PyObject_Vectorcall(env->view, args, 2, NULL);
}

/* _Builder.record for a record tb_record_plain accepted: 0 done, -1 error */
static int tb_record(BatchEnv *env, PyObject *parent, Py_ssize_t index, PyObject *r) {
    PyObject *offset = NULL, *kids = NULL, *node = NULL, *start = NULL, *length = NULL;
    PyObject *v = NULL, *label = NULL, *text = NULL, *hkids = NULL, *ok = NULL;
    int rc = -1;
    if ((offset = PyObject_GetAttr(r, tb[TB_OFFSET])) == NULL
            || (kids = PyList_New(0)) == NULL
            || tb_add(env, kids, tb[L_OFFSET], PyObject_Str(offset), Py_None, Py_None) < 0)
        goto done;
    start = Py_NewRef(Py_None);
    length = Py_NewRef(Py_None);
    if (env->base != Py_None) {          /* in place: base is not None and r.start >= 0 */
        PyObject *rs = PyObject_GetAttr(r, tb[TB_START]);
        PyObject *zero = rs ? PyLong_FromLong(0) : NULL;
        int in_place = zero ? PyObject_RichCompareBool(rs, zero, Py_GE) : -1;
        Py_XDECREF(zero);
        if (in_place > 0) {
            Py_SETREF(start, PyNumber_Add(env->base, rs));
            Py_SETREF(length, start ? PyObject_GetAttr(r, tb[TB_SIZE]) : NULL);
        }
        Py_XDECREF(rs);
        if (in_place < 0 || length == NULL)
            goto done;
    }
    label = PyUnicode_FromFormat("Record %zd", index);
    text = label ? PyUnicode_FromFormat("offset %S", offset) : NULL;
    node = text ? node_new(env->node_tp, label, text, kids, start, length, env->kind, Py_None,
                           empty_tuple, Py_None) : NULL;
    if (node == NULL)
        goto done;
    Py_INCREF(node);
    if (tf_add(parent, node) < 0)
        goto done;
    /* kids is the node's children list: appending to it is node.add */
    if ((v = PyObject_GetAttr(r, tb[TB_TIMESTAMP])) == NULL)
        goto done;
    if (v != Py_None
            && tb_add(env, kids, tb[L_TIMESTAMP], PyObject_CallOneArg(env->format_ms, v),
                      Py_None, Py_None) < 0)
        goto done;
    for (int i = 0; i < 2; i++) {
        Py_SETREF(v, PyObject_GetAttr(r, tb[i ? TB_VALUE : TB_KEY]));
        if (v == NULL || tb_add(env, kids, tb[i ? L_VALUE : L_KEY], tb_view(env, v),
                                Py_None, Py_None) < 0)
            goto done;
    }
    Py_SETREF(v, PyObject_GetAttr(r, tb[TB_HEADERS]));
    if (v == NULL)
        goto done;
    if (v != Py_None && PyList_CheckExact(v) && PyList_GET_SIZE(v)) {
        if ((hkids = PyList_New(0)) == NULL)
            goto done;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            PyObject *pair = Py_NewRef(PyList_GET_ITEM(v, i));   /* (checked: a 2-tuple) */
            PyObject *hk = quote_text(env->quote, PyTuple_GET_ITEM(pair, 0));
            int hr = hk ? tb_add(env, hkids, hk, tb_view(env, PyTuple_GET_ITEM(pair, 1)),
                                 Py_None, Py_None) : -1;
            Py_XDECREF(hk);
            Py_DECREF(pair);
            if (hr < 0)
                goto done;
        }
        Py_SETREF(text, PyUnicode_FromFormat("%zd", PyList_GET_SIZE(v)));
        if (text == NULL)
            goto done;
        PyObject *h = node_new(env->node_tp, tb[L_HEADERS], text, hkids, Py_None, Py_None,
                               Py_None, Py_None, empty_tuple, Py_None);
        int hr = h ? PyList_Append(kids, h) : -1;
        Py_XDECREF(h);
        if (hr < 0)
            goto done;
    }
    Py_SETREF(v, PyObject_GetAttr(r, tb[TB_CRC]));
    if (v == NULL)
        goto done;
    if (v != Py_None) {
        if ((ok = PyObject_GetAttr(r, tb[TB_CRC_OK])) == NULL)
            goto done;
        int good = PyObject_IsTrue(ok);
        if (good < 0)
            goto done;
        char buf[40];
        snprintf(buf, sizeof buf, "0x%08llx%s", (unsigned long long)PyLong_AsLongLong(v),
                 good ? " (ok)" : " (MISMATCH)");
        if (tb_add(env, kids, tb[L_CRC], PyUnicode_FromString(buf), Py_None,
                   good ? Py_None : tb[T_ERROR]) < 0)
            goto done;
    }
    Py_SETREF(v, PyObject_GetAttr(r, tb[TB_PROBLEMS]));
    if (v == NULL)
        goto done;
    int some = PyObject_IsTrue(v);            /* r.problems or () */
    if (some < 0 || (some && tb_problems(env, kids, v) < 0))
        goto done;
    rc = 0;
done:
    Py_XDECREF(offset);
    Py_XDECREF(kids);
    Py_XDECREF(node);
    Py_XDECREF(start);
    Py_XDECREF(length);
    Py_XDECREF(v);
    Py_XDECREF(label);
    Py_XDECREF(text);
    Py_XDECREF(hkids);
    Py_XDECREF(ok);
    return rc;
}

/* the attributes node's text: 0x%04x (compression ..., <timestamp type>, ...) */
static PyObject *tb_attributes(PyObject *attributes, PyObject *magic,
                               PyObject *codec) {
    long a = PyLong_AsLong(attributes);
    int magic0 = 0;
    if (PyLong_Check(magic)) {
        PyObject *zero = PyLong_FromLong(0);
        magic0 = zero ? PyObject_RichCompareBool(magic, zero, Py_EQ) : -1;
        Py_XDECREF(zero);
        if (magic0 < 0)
            return NULL;
    }
    char head[16];
    snprintf(head, sizeof head, "0x%04lx (", a);
    return PyUnicode_FromFormat("%scompression %U%s%s%s)", head, codec,
                                magic0 ? "" : (a >> 3) & 1 ? ", LogAppendTime" : ", CreateTime",
                                a & 0x10 ? ", transactional" : "", a & 0x20 ? ", control" : "");
}

/* _Builder.batch for a magic-2 batch: 0 done, -1 error */
static int tb_batch(BatchEnv *env, PyObject *parent, PyObject *index, PyObject *b,
                    PyObject *path, PyObject **v) {
    enum { BO, LOD, CNT, MAG, TRN, ST, AV, LEN, PLE, ATT, CRC, NV };
    static const int names[NV] = {TB_BASE_OFFSET, TB_LOD, TB_DECLARED, TB_MAGIC,
                                  TB_TRUNCATED, TB_START, TB_AVAILABLE, TB_LENGTH, TB_PLE,
                                  TB_ATTRIBUTES, TB_CRC};
    for (int i = 0; i < NV; i++)
        if ((v[i] = PyObject_GetAttr(b, tb[names[i]])) == NULL)
            return -1;
    PyObject *attrs = v[ATT];
    long a = attrs == Py_None ? 0 : PyLong_AsLong(attrs);
    int rc = -1, truncated = PyObject_IsTrue(v[TRN]);
    PyObject *last = NULL, *desc = NULL, *text = NULL, *label = NULL, *npath = NULL;
    PyObject *start = NULL, *length = NULL, *node = NULL, *codec = NULL, *ok = NULL;
    PyObject *recs = NULL, *more = NULL, *one = NULL, *kids = NULL;
    if (truncated < 0)
        goto done;
    /* the batch line: offsets, record count, magic, codec, flags */
    if (v[BO] == Py_None || v[LOD] == Py_None)
        last = Py_NewRef(Py_None);
    else if ((last = PyNumber_Add(v[BO], v[LOD])) == NULL)
        goto done;
    int range = last != Py_None ? PyObject_RichCompareBool(last, v[BO], Py_NE) : 0;
    if (range < 0 || (one = PyLong_FromLong(1)) == NULL)
        goto done;
    int single = v[CNT] == Py_None ? 0 : PyObject_RichCompareBool(v[CNT], one, Py_EQ);
    if (single < 0)
        goto done;
    desc = range ? PyUnicode_FromFormat("offsets %S-%S", v[BO], last)
                 : PyUnicode_FromFormat("offset %S", v[BO]);
    if (desc == NULL)
        goto done;
    text = v[CNT] == Py_None ? PyUnicode_FromString("?") : PyObject_Str(v[CNT]);
    if (text == NULL || (codec = tb_codec(env, attrs)) == NULL)
        goto done;
    Py_SETREF(desc, PyUnicode_FromFormat("%U, %U record%s, magic %S%s%U%s%s%s", desc, text,
                                         single ? "" : "s", v[MAG],
                                         attrs != Py_None ? ", " : "",
                                         attrs != Py_None ? codec : empty_str,
                                         attrs != Py_None && (a & 0x10) ? ", transactional" : "",
                                         attrs != Py_None && (a & 0x20) ? ", control" : "",
                                         truncated ? ", truncated" : ""));
    label = desc ? PyUnicode_FromFormat("Batch %S", index) : NULL;
    npath = label ? tf_extend(tb[T_RECORDS], path, index) : NULL;
    if (npath == NULL)
        goto done;
    if (env->base == Py_None) {
        start = Py_NewRef(Py_None);
        length = Py_NewRef(Py_None);
    } else if ((start = PyNumber_Add(env->base, v[ST])) == NULL)
        goto done;
    else
        length = Py_NewRef(v[AV]);
    node = node_new(env->node_tp, label, desc, NULL, start, length, env->kind, Py_None, npath,
                    Py_None);
    if (node == NULL)
        goto done;
    Py_INCREF(node);
    if (tf_add(parent, node) < 0)
        goto done;
    kids = Py_NewRef(((NodeObject *)node)->children);
    /* the CRC (verified now) */
    if ((ok = PyObject_GetAttr(b, tb[TB_CRC_OK])) == NULL)
        goto done;
    int good = PyObject_IsTrue(ok);
    if (good < 0)
        goto done;
    PyObject *crc_text;
    if (v[CRC] == Py_None)
        crc_text = Py_NewRef(tb[T_NULL]);
    else {
        char buf[64];
        snprintf(buf, sizeof buf, "0x%08llx%s", (unsigned long long)PyLong_AsLongLong(v[CRC]),
                 good ? " (ok)" : ok == Py_False ? " (MISMATCH)" : " (not checked: truncated)");
        crc_text = PyUnicode_FromString(buf);
    }
    if (tb_add(env, kids, tb[L_CRC], crc_text, env->kind,
               ok == Py_False ? tb[T_ERROR] : Py_None) < 0)
        goto done;
    const int rows[4][2] = {{L_BASE_OFFSET, BO}, {L_BATCH_LENGTH, LEN}, {L_PLE, PLE},
                            {L_MAGIC, MAG}};
    for (int i = 0; i < 4; i++)
        if (tb_add(env, kids, tb[rows[i][0]], tb_text(v[rows[i][1]]), env->kind, Py_None) < 0)
            goto done;
    if (attrs != Py_None
            && tb_add(env, kids, tb[L_ATTRIBUTES], tb_attributes(attrs, v[MAG], codec),
                      env->kind, Py_None) < 0)
        goto done;
    /* the rest of the v2 header (timestamps formatted) */
    static const int more_names[5] = {TB_BASE_TS, TB_MAX_TS, TB_PRODUCER_ID,
                                      TB_PRODUCER_EPOCH, TB_BASE_SEQUENCE};
    static const int more_labels[5] = {L_BASE_TS, L_MAX_TS, L_PRODUCER_ID, L_PRODUCER_EPOCH,
                                       L_BASE_SEQUENCE};
    if (tb_add(env, kids, tb[L_LOD], tb_text(v[LOD]), env->kind, Py_None) < 0)
        goto done;
    for (int i = 0; i < 5; i++) {
        Py_XSETREF(more, PyObject_GetAttr(b, tb[more_names[i]]));
        if (more == NULL || tb_add(env, kids, tb[more_labels[i]],
                                   i < 2 ? tb_ms(env, more) : tb_text(more), env->kind,
                                   Py_None) < 0)
            goto done;
    }
    if (tb_add(env, kids, tb[L_RECORD_COUNT], tb_text(v[CNT]), env->kind, Py_None) < 0)
        goto done;
    /* the records (decoded, decompressed now) */
    if ((recs = PyObject_GetAttr(b, tb[TB_RECORDS])) == NULL)
        goto done;
    Py_XSETREF(more, PyObject_GetAttr(b, tb[TB_CSIZE]));
    if (more == NULL)
        goto done;
    if (more != Py_None) {
        PyObject *ds = PyObject_GetAttr(b, tb[TB_DSIZE]);
        PyObject *fr = ds ? PyObject_GetAttr(b, tb[TB_FRAMING]) : NULL;
        int named = fr ? PyObject_IsTrue(fr) : -1;
        PyObject *how = named < 0 ? NULL : named ? Py_NewRef(fr) : Py_NewRef(codec);
        PyObject *t = how ? PyUnicode_FromFormat("%S bytes -> %S bytes (%S)", more, ds, how)
                          : NULL;
        Py_XDECREF(ds);
        Py_XDECREF(fr);
        Py_XDECREF(how);
        if (tb_add(env, kids, tb[L_COMPRESSED], t, Py_None, Py_None) < 0)
            goto done;
    }
    PyObject *fast = PySequence_Fast(recs, "batch records are not a sequence");
    if (fast == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); i++) {
        PyObject *r = Py_NewRef(PySequence_Fast_GET_ITEM(fast, i));
        int plain = tb_record_plain(r), rr;
        if (plain > 0)
            rr = tb_record(env, node, i, r);
        else if (plain == 0) {
            PyObject *ri = PyLong_FromSsize_t(i);
            PyObject *all[6] = {env->b, node, ri, r, env->records, env->base};
            PyObject *res = ri ? PyObject_VectorcallMethod(
                tb[TB_RECORD_M], all, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL) : NULL;
            rr = res == NULL ? -1 : 0;
            Py_XDECREF(res);
            Py_XDECREF(ri);
        } else
            rr = -1;
        Py_DECREF(r);
        if (rr < 0) {
            Py_DECREF(fast);
            goto done;
        }
    }
    Py_DECREF(fast);
    Py_XSETREF(more, PyObject_GetAttr(b, tb[TB_PROBLEMS]));
    if (more == NULL || tb_problems(env, kids, more) < 0)
        goto done;
    rc = 0;
done:
    Py_XDECREF(last);
    Py_XDECREF(desc);
    Py_XDECREF(text);
    Py_XDECREF(label);
    Py_XDECREF(npath);
    Py_XDECREF(start);
    Py_XDECREF(length);
    Py_XDECREF(node);
    Py_XDECREF(codec);
    Py_XDECREF(ok);
    Py_XDECREF(recs);
    Py_XDECREF(more);
    Py_XDECREF(one);
    Py_XDECREF(kids);
    return rc;
}

PyDoc_STRVAR(tree_batch_doc,
"tree_batch(builder, parent, index, batch, records, base, path, kind, value_chars, env)\n"
"-> None or NotImplemented\n\n"
"kwsniff.output.tree._Builder.batch (and .record) when no payload decoder is\n"
"registered: the node of a magic-2 batch, its header rows and its records, appended to\n"
"parent. env is (TreeNode, _format_ms, _view, _quote, CODEC_NAMES, codec_name). A record\n"
"with control data, a decoded key/value, headers that are not a list of pairs or an odd\n"
"CRC goes to builder.record(). NotImplemented (nothing done: the Python code runs) for\n"
"another batch kind, attributes or a CRC out of range, a base or index that is not an\n"
"int, a path that is not a tuple.");

static PyObject *tree_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 10 || !PyTuple_CheckExact(args[9]) || PyTuple_GET_SIZE(args[9]) != 6) {
        PyErr_SetString(PyExc_TypeError, "tree_batch(builder, parent, index, batch, records, "
                                         "base, path, kind, value_chars, env)");
        return NULL;
    }
    PyObject *envt = args[9];
    BatchEnv env;
    env.b = args[0];
    env.records = args[4];
    env.base = args[5];
    env.kind = args[7];
    env.limit = args[8];
    env.node_tp = (PyTypeObject *)PyTuple_GET_ITEM(envt, 0);
    env.format_ms = PyTuple_GET_ITEM(envt, 1);
    env.view = PyTuple_GET_ITEM(envt, 2);
    env.quote = PyTuple_GET_ITEM(envt, 3);
    env.codec_names = PyTuple_GET_ITEM(envt, 4);
    env.codec_name = PyTuple_GET_ITEM(envt, 5);
    if (!PyType_Check((PyObject *)env.node_tp)
            || !PyType_IsSubtype(env.node_tp, &NodeType)
            || env.node_tp->tp_basicsize != NodeType.tp_basicsize
            || !PyDict_CheckExact(env.codec_names)) {
        PyErr_SetString(PyExc_TypeError, "tree_batch: env is not (a NodeBase subclass "
                                         "without fields, ..., a dict, ...)");
        return NULL;
    }
    PyObject *index = args[2], *b = args[3], *path = args[6];
    if (!PyLong_CheckExact(index) || !PyTuple_CheckExact(path)
            || (env.base != Py_None && !PyLong_CheckExact(env.base)))
        Py_RETURN_NOTIMPLEMENTED;
    /* the batch kind and the fields printed with C formats, checked before anything */
    PyObject *kind = PyObject_GetAttr(b, tb[TB_KIND]);
    if (kind == NULL)
        return NULL;
    int v2 = PyUnicode_CheckExact(kind) && PyUnicode_Compare(kind, tb[T_V2]) == 0;
    Py_DECREF(kind);
    if (v2) {
        PyObject *a = PyObject_GetAttr(b, tb[TB_ATTRIBUTES]);
        PyObject *c = a ? PyObject_GetAttr(b, tb[TB_CRC]) : NULL;
        if (c == NULL) {
            Py_XDECREF(a);
            return NULL;
        }
        v2 = (a == Py_None || tb_uint(a, 0x7FFF)) && (c == Py_None || tb_uint(c, 0xFFFFFFFFULL));
        Py_DECREF(a);
        Py_DECREF(c);
    }
    if (!v2)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *v[16] = {NULL};
    int rc = tb_batch(&env, args[1], index, b, path, v);
    for (int i = 0; i < 16; i++)
        Py_XDECREF(v[i]);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- plain tree lines */

static PyObject *s_label, *s_value, *s_children;   /* interned attribute names */

/* str.isprintable() of an exact str: 1 yes, 0 no */
static int pl_printable(PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s)) {
        const unsigned char *p = PyUnicode_1BYTE_DATA(s);
        for (Py_ssize_t i = 0; i < n; i++)
            if (p[i] < 0x20 || p[i] == 0x7F)
                return 0;
        return 1;
    }
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!Py_UNICODE_ISPRINTABLE(PyUnicode_READ(kind, data, i)))
            return 0;
    return 1;
}

/* a + b (+ ": " + c when c is not NULL) */
static PyObject *pl_line(PyObject *a, PyObject *b, PyObject *sep, PyObject *c) {
    Py_ssize_t la = PyUnicode_GET_LENGTH(a), lb = PyUnicode_GET_LENGTH(b);
    Py_ssize_t ls = c ? PyUnicode_GET_LENGTH(sep) : 0, lc = c ? PyUnicode_GET_LENGTH(c) : 0;
    Py_UCS4 maxc = PyUnicode_MAX_CHAR_VALUE(a);
    if (PyUnicode_MAX_CHAR_VALUE(b) > maxc)
        maxc = PyUnicode_MAX_CHAR_VALUE(b);
    if (c && PyUnicode_MAX_CHAR_VALUE(c) > maxc)
        maxc = PyUnicode_MAX_CHAR_VALUE(c);
    PyObject *r = PyUnicode_New(la + lb + ls + lc, maxc);
    if (r == NULL)
        return NULL;
    if (PyUnicode_CopyCharacters(r, 0, a, 0, la) < 0
            || PyUnicode_CopyCharacters(r, la, b, 0, lb) < 0
            || (c && (PyUnicode_CopyCharacters(r, la + lb, sep, 0, ls) < 0
                      || PyUnicode_CopyCharacters(r, la + lb + ls, c, 0, lc) < 0))) {
        Py_DECREF(r);
        return NULL;
    }
    return r;
}

#define PL_FALLBACK 1
#define PL_MAX_DEPTH 400

/* the lines of nodes at depth into out: 0 done, -1 error, PL_FALLBACK for Python */
static int pl_emit(PyObject *nodes, Py_ssize_t depth, PyObject *pads, PyObject *indent,
                   PyObject *sep, PyObject *printable, PyObject *out) {
    if (depth > PL_MAX_DEPTH)
        return PL_FALLBACK;
    while (PyList_GET_SIZE(pads) <= depth) {      /* pads[d] = indent * d */
        PyObject *pad = PySequence_Repeat(indent, PyList_GET_SIZE(pads));
        if (pad == NULL || PyList_Append(pads, pad) < 0) {
            Py_XDECREF(pad);
            return -1;
        }
        Py_DECREF(pad);
    }
    PyObject *pad = PyList_GET_ITEM(pads, depth);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(nodes); i++) {
        PyObject *node = PyList_GET_ITEM(nodes, i);
        PyObject *label, *value, *children;
        int rc = 0;
        if (PyObject_TypeCheck(node, &NodeType)) {    /* its fields, read directly */
            NodeObject *nd = (NodeObject *)node;
            label = nd->label;
            value = nd->value;
            children = nd->children;
            if (label == NULL || value == NULL || children == NULL) {
                PyErr_SetString(PyExc_AttributeError, "tree node without its fields");
                return -1;
            }
            Py_INCREF(label);
            Py_INCREF(value);
            Py_INCREF(children);
        } else {
            Py_INCREF(node);
            label = PyObject_GetAttr(node, s_label);
            value = label ? PyObject_GetAttr(node, s_value) : NULL;
            children = value ? PyObject_GetAttr(node, s_children) : NULL;
            Py_DECREF(node);
            if (children == NULL) {
                Py_XDECREF(label);
                Py_XDECREF(value);
                return -1;
            }
        }
        if (!PyUnicode_CheckExact(label) || !PyUnicode_CheckExact(value)
                || !PyList_CheckExact(children)) {
            rc = PL_FALLBACK;
            goto next;
        }
        if (!pl_printable(label)) {
            Py_SETREF(label, PyObject_CallOneArg(printable, label));
            if (label == NULL || !PyUnicode_Check(label)) {
                rc = label == NULL ? -1 : PL_FALLBACK;
                goto next;
            }
        }
        PyObject *line;
        if (PyUnicode_GET_LENGTH(value)) {
            if (!pl_printable(value)) {
                Py_SETREF(value, PyObject_CallOneArg(printable, value));
                if (value == NULL || !PyUnicode_Check(value)) {
                    rc = value == NULL ? -1 : PL_FALLBACK;
                    goto next;
                }
            }
            line = pl_line(pad, label, sep, value);
        } else {
            line = pl_line(pad, label, sep, NULL);
        }
        if (line == NULL || PyList_Append(out, line) < 0)
            rc = -1;
        Py_XDECREF(line);
        if (rc == 0 && PyList_GET_SIZE(children))
            rc = pl_emit(children, depth + 1, pads, indent, sep, printable, out);
    next:
        Py_XDECREF(label);
        Py_XDECREF(value);
        Py_XDECREF(children);
        if (rc)
            return rc;
    }
    return 0;
}

PyDoc_STRVAR(plain_lines_doc,
"plain_lines(root, indent, printable) -> list[str] or None\n\n"
"kwsniff.output.tree._plain_lines: one line per node, depth-first, indent repeated per\n"
"level, 'label: value' (or the label alone when the value is empty), labels and values\n"
"that are not printable passed through printable(). None (the Python code runs) for\n"
"trees deeper than 400 levels or nodes whose label, value or children are not an\n"
"exact str / str / list.");

static PyObject *plain_lines(PyObject *self, PyObject *args) {
    PyObject *root, *indent, *printable;
    if (!PyArg_ParseTuple(args, "OUO", &root, &indent, &printable))
        return NULL;
    PyObject *out = PyList_New(0), *pads = PyList_New(0), *nodes = PyList_New(1);
    PyObject *sep = PyUnicode_FromString(": ");
    int rc = -1;
    if (out && pads && nodes && sep) {
        Py_INCREF(root);
        PyList_SET_ITEM(nodes, 0, root);
        rc = pl_emit(nodes, 0, pads, indent, sep, printable, out);
    }
    Py_XDECREF(pads);
    Py_XDECREF(nodes);
    Py_XDECREF(sep);
    if (rc == 0)
        return out;
    Py_XDECREF(out);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(utf8_lines_doc,
"utf8_lines(lines, tail) -> bytes or None\n\n"
"'\\n'.join(lines).encode('utf-8') + tail for a list of exact str (one copy, no wide\n"
"intermediate string). None (the caller encodes in Python) when an item is not an exact\n"
"str or cannot be encoded strictly (a lone surrogate).");

static PyObject *utf8_lines(PyObject *self, PyObject *args) {
    PyObject *lines;
    Py_buffer tail;
    if (!PyArg_ParseTuple(args, "O!y*", &PyList_Type, &lines, &tail))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(lines), total = tail.len + (n > 1 ? n - 1 : 0);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *line = PyList_GET_ITEM(lines, i);
        Py_ssize_t size;
        if (!PyUnicode_CheckExact(line) || PyUnicode_AsUTF8AndSize(line, &size) == NULL) {
            PyErr_Clear();
            PyBuffer_Release(&tail);
            Py_RETURN_NONE;
        }
        if (size > PY_SSIZE_T_MAX - total) {
            PyBuffer_Release(&tail);
            return PyErr_NoMemory();
        }
        total += size;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        PyBuffer_Release(&tail);
        return NULL;
    }
    char *w = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t size;
        const char *u = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(lines, i), &size);
        if (i)
            *w++ = '\n';
        memcpy(w, u, (size_t)size);
        w += size;
    }
    memcpy(w, tail.buf, (size_t)tail.len);
    PyBuffer_Release(&tail);
    return out;
}

PyDoc_STRVAR(header_fields_doc,
"header_fields(buf, pos, end, size, max_versions) -> (api_key, api_version, corr) or None\n\n"
"kwsniff.kafka.plausible._header_fields: whether a plausible request header (no size\n"
"prefix) of a ``size``-byte frame starts at ``buf[pos]``, looking only below ``end``.\n"
"NotImplemented (the caller runs the Python code) where the buffer is shorter than\n"
"``end`` or the header prefix, or ``max_versions`` is not a tuple of ints.");

/* A client id of printable text: printable ASCII, else strict UTF-8 whose str is
 * printable (str.isprintable). 1, 0, or -1 with an error set. */
static int hf_client_id_ok(const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] > 0x7e)
            goto slow;
    return 1;
slow:;
    PyObject *text = PyUnicode_DecodeUTF8((const char *)p, n, "strict");
    if (text == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    PyObject *ok = PyObject_CallMethod(text, "isprintable", NULL);
    Py_DECREF(text);
    if (ok == NULL)
        return -1;
    int r = PyObject_IsTrue(ok);
    Py_DECREF(ok);
    return r;
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
    PyObject *out = NULL;
    if (whole) {
        end = size = view.len;
        if (end < 10) {
            out = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (pos < 0 || end > view.len) {
        out = Py_NewRef(Py_NotImplemented);
        goto done;
    }
    const unsigned char *q = (const unsigned char *)view.buf + pos;
    int api_key = (int16_t)((q[0] << 8) | q[1]);
    int version = (int16_t)((q[2] << 8) | q[3]);
    int32_t corr = (int32_t)(((uint32_t)q[4] << 24) | ((uint32_t)q[5] << 16)
                             | ((uint32_t)q[6] << 8) | (uint32_t)q[7]);
    int cid_len = (int16_t)((q[8] << 8) | q[9]);
    if (api_key < 0 || api_key >= PyTuple_GET_SIZE(mv)) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *hi_obj = PyTuple_GET_ITEM(mv, api_key);
    long hi = PyLong_CheckExact(hi_obj) ? PyLong_AsLong(hi_obj) : -1;
    if (!PyLong_CheckExact(hi_obj) || (hi == -1 && PyErr_Occurred())) {
        if (whole) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "max_versions must hold ints");
            goto done;
        }
        PyErr_Clear();
        out = Py_NewRef(Py_NotImplemented);
        goto done;
    }
    if (version < 0 || version > hi || corr < 0) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    if (!(api_key == 7 && version == 0)) {
        if (cid_len < -1 || cid_len > size - 10) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        if (cid_len > 0) {
            if (end - pos < 10 + (Py_ssize_t)cid_len) {
                out = Py_NewRef(Py_None);
                goto done;
            }
            int ok = hf_client_id_ok(q + 10, cid_len);
            if (ok < 0)
                goto done;
            if (!ok) {
                out = Py_NewRef(Py_None);
                goto done;
            }
        }
    }
    out = tuple_steal(3, PyLong_FromLong(api_key), PyLong_FromLong(version),
                      PyLong_FromLong(corr));
done:
    PyBuffer_Release(&view);
    return out;
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

PyDoc_STRVAR(request_fields_doc,
"request_fields(max_versions, raw) -> (api_key, api_version, corr) or None\n\n"
"header_fields(raw, 0, len(raw), len(raw), max_versions) "
"(kwsniff.kafka.plausible.request_fields).");

static PyObject *request_fields_c(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyTuple_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "request_fields(max_versions: tuple, raw)");
        return NULL;
    }
    return hf_check(args[1], 0, -1, -1, args[0], 1);
}

static PyMethodDef methods[] = {
    {"pcap_batch", pcap_batch, METH_VARARGS, pcap_batch_doc},
    {"pcapng_epbs", pcapng_epbs, METH_VARARGS, pcapng_epbs_doc},
    {"eth_ipv4_tcp", eth_ipv4_tcp, METH_O, eth_ipv4_tcp_doc},
    {"crc32c", crc32c_fn, METH_O, crc32c_doc},
    {"v2_set_stats", v2_set_stats, METH_O, v2_set_stats_doc},
    {"crc32c_software", crc32c_software, METH_O, crc32c_software_doc},
    {"v2_records", v2_records, METH_VARARGS, v2_records_doc},
    {"payload_view", payload_view, METH_VARARGS, payload_view_doc},
    {"plain_lines", plain_lines, METH_VARARGS, plain_lines_doc},
    {"utf8_lines", utf8_lines, METH_VARARGS, utf8_lines_doc},
    {"header_fields", (PyCFunction)(void (*)(void))header_fields, METH_FASTCALL,
     header_fields_doc},
    {"cut_frames", (PyCFunction)(void (*)(void))cut_frames, METH_FASTCALL, cut_frames_doc},
    {"request_fields", (PyCFunction)(void (*)(void))request_fields_c, METH_FASTCALL,
     request_fields_doc},
    {"tree_fields", (PyCFunction)(void (*)(void))tree_fields, METH_FASTCALL, tree_fields_doc},
    {"tree_batch", (PyCFunction)(void (*)(void))tree_batch, METH_FASTCALL, tree_batch_doc},
    {"decode_fields", (PyCFunction)(void (*)(void))decode_fields, METH_FASTCALL, decode_fields_doc},
    {"skim_fields", (PyCFunction)(void (*)(void))skim_fields, METH_FASTCALL, skim_fields_doc},
    {"lane_setup", lane_setup, METH_VARARGS, lane_setup_doc},
    {"lane_digest", (PyCFunction)(void (*)(void))lane_digest, METH_FASTCALL, lane_digest_doc},
    {"summary_line", (PyCFunction)(void (*)(void))summary_line, METH_FASTCALL,
     summary_line_doc},
    {"pipe_setup", pipe_setup, METH_VARARGS, pipe_setup_doc},
    {"pipe_ship", (PyCFunction)(void (*)(void))pipe_ship, METH_FASTCALL, pipe_ship_doc},
    {"pipe_take", (PyCFunction)(void (*)(void))pipe_take, METH_FASTCALL, pipe_take_doc},
    {"format_fixed", (PyCFunction)(void (*)(void))format_fixed, METH_FASTCALL,
     format_fixed_doc},
    {"msg_setup", msg_setup, METH_VARARGS,
     "msg_setup(message_type, fields): bind defer_request/defer_response to KafkaMessage"},
    {"defer_request", (PyCFunction)(void (*)(void))defer_request, METH_FASTCALL,
     defer_request_doc},
    {"defer_response", (PyCFunction)(void (*)(void))defer_response, METH_FASTCALL,
     defer_response_doc},
    {"tcp_setup", tcp_setup, METH_VARARGS,
     "tcp_setup(flow_type, direction_type, connection_type, control, ack): bind tcp_feed"},
    {"tcp_feed", (PyCFunction)(void (*)(void))tcp_feed, METH_FASTCALL, tcp_feed_doc},
    {"conv_setup", conv_setup, METH_VARARGS, conv_setup_doc},
    {"conv_frames", (PyCFunction)(void (*)(void))conv_frames, METH_FASTCALL, conv_frames_doc},
    {"conv_taken", conv_taken, METH_NOARGS, conv_taken_doc},
    {"conv_refresh", conv_refresh, METH_O, conv_refresh_doc},
    {"conv_data", (PyCFunction)(void (*)(void))conv_data, METH_FASTCALL, conv_data_doc},
    {"engine_setup", engine_setup, METH_VARARGS, engine_setup_doc},
    {"engine_data", (PyCFunction)(void (*)(void))engine_data, METH_FASTCALL, engine_data_doc},
    {"sink_setup", sink_setup, METH_VARARGS,
     "sink_setup(framer_type, reorderer_type, context_type, summary_type): bind FrameSink"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kwsniff._speedups",
    "Optional compiled accelerator of kwsniff's per-packet path (see kwsniff.accel).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    crc_init();
#ifdef HAVE_CRC_HW
    __builtin_cpu_init();
    crc_use_hw = __builtin_cpu_supports("sse4.2") != 0;
#endif
    s_label = PyUnicode_InternFromString("label");
    s_value = PyUnicode_InternFromString("value");
    s_children = PyUnicode_InternFromString("children");
    if (s_label == NULL || s_value == NULL || s_children == NULL)
        return NULL;
    for (int i = 0; i < NODE_FIELDS; i++)
        if ((node_keys[i] = PyUnicode_InternFromString(node_names[i])) == NULL)
            return NULL;
    static const char *hs[8] = {"Name", "Topic", "TopicName", "_topic_name", "GroupId",
                                "MemberId", "Key", "ResourceName"};
    static const char *hi[6] = {"PartitionIndex", "Partition", "Index", "ApiKey", "NodeId",
                                "BrokerId"};
    for (int i = 0; i < 8; i++)
        if ((hint_str_keys[i] = PyUnicode_InternFromString(hs[i])) == NULL)
            return NULL;
    for (int i = 0; i < 6; i++)
        if ((hint_int_keys[i] = PyUnicode_InternFromString(hi[i])) == NULL)
            return NULL;
    s_api_key = hint_int_keys[3];
    s_known = PyUnicode_InternFromString("_known");
    s_learn = PyUnicode_InternFromString("_learn");
    s_value_m = PyUnicode_InternFromString("value");
    s_unknown_tags = PyUnicode_InternFromString("unknown_tags");
    s_fields_py = PyUnicode_InternFromString("_fields_py");
    s_topic_name = PyUnicode_InternFromString("_topic_name");
    s_problem = PyUnicode_InternFromString("Problem");
    s_warn = PyUnicode_InternFromString("warn");
    s_null = PyUnicode_InternFromString("null");
    s_true = PyUnicode_InternFromString("true");
    s_false = PyUnicode_InternFromString("false");
    s_empty_list = PyUnicode_InternFromString("[]");
    s_no_error = PyUnicode_InternFromString("0 (NONE)");
    if (!s_null || !s_true || !s_false || !s_empty_list || !s_no_error)
        return NULL;
    if (!s_known || !s_learn || !s_value_m || !s_unknown_tags || !s_fields_py
            || !s_topic_name || !s_problem || !s_warn)
        return NULL;
    for (int i = 0; i < TB_NAMES; i++)
        if ((tb[i] = PyUnicode_InternFromString(tb_texts[i])) == NULL)
            return NULL;
    if (decode_fields_init() < 0)
        return NULL;
    for (int i = 0; i < FRAME_FIELDS; i++)
        if ((frame_keys[i] = PyUnicode_InternFromString(frame_names[i])) == NULL)
            return NULL;
    zero_int = PyLong_FromLong(0);
    if (zero_int == NULL || PyType_Ready(&FrameType) < 0)
        return NULL;
    empty_str = PyUnicode_FromString("");
    empty_tuple = PyTuple_New(0);
    if (empty_str == NULL || empty_tuple == NULL || PyType_Ready(&NodeType) < 0
            || PyType_Ready(&FrameSinkType) < 0 || reorder_init_module() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "NodeBase", (PyObject *)&NodeType) < 0
            || PyModule_AddObjectRef(m, "FrameSink", (PyObject *)&FrameSinkType) < 0
            || PyModule_AddObjectRef(m, "FrameBase", (PyObject *)&FrameType) < 0
            || PyModule_AddObjectRef(m, "Reorder", (PyObject *)&ReorderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "VERSION", SPEEDUPS_VERSION) < 0
            || PyModule_AddIntConstant(m, "TREE_MAX_NESTING", TF_MAX_NAMES) < 0
            || PyModule_AddIntConstant(m, "CRC32C_HARDWARE", crc_use_hw) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
