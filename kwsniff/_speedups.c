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
 *  crc32c        CRC-32C of record batches (kwsniff.kafka.records.crc32c_py; SSE4.2
 *                instructions where the CPU has them)
 *  payload_view  the -V text of a record key/value/header seen as hex or plain ASCII text
 *                (kwsniff.output.tree._builtin_text; None for anything else)
 *  plain_lines   the lines of an uncoloured -V tree (kwsniff.output.tree._plain_lines)
 *  v2_records    the records of a magic-2 batch (kwsniff.kafka.records._parse_v2_records;
 *                returns None, for the Python code to run, on input whose exact result
 *                needs Python's unbounded integers or slicing past the end)
 *
 * The module imports nothing from kwsniff and holds no state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Bump when a function's signature or meaning changes; kwsniff.accel ignores a module
 * built from another version (a stale build never silently changes behaviour). */
#define SPEEDUPS_VERSION 6

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
        if (batch_append(out, Py_BuildValue("(LdOy#I)", frame, ts, linktype,
                                            (const char *)buf + start, (Py_ssize_t)incl, orig),
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
        if (batch_append(out, Py_BuildValue("(LNOy#I)", frame, ts, PyTuple_GET_ITEM(iface, 0),
                                            (const char *)b + 28, (Py_ssize_t)cap, orig),
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
            res = Py_BuildValue("(y#kkIy#i)", (const char *)d + 26, (Py_ssize_t)12, seq, ack,
                                offflags & 0xFF, (const char *)d + start, stop - start, 0);
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

PyDoc_STRVAR(payload_view_doc,
"payload_view(data, limit) -> str or None\n\n"
"kwsniff.output.tree._builtin_text(data, limit) for non-empty bytes data shown as hex\n"
"(it has a control byte) or as plain text (printable ASCII without quote or backslash,\n"
"not starting like JSON); None for anything else (the Python code decides).");

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
    int control = 0, plain = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (pv_control(c)) {
            control = 1;
            break;
        }
        if (c < 0x20 || c > 0x7E || c == '"' || c == '\\')
            plain = 0;
    }
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
        Py_INCREF(node);
        PyObject *label = PyObject_GetAttr(node, s_label);
        PyObject *value = label ? PyObject_GetAttr(node, s_value) : NULL;
        PyObject *children = value ? PyObject_GetAttr(node, s_children) : NULL;
        Py_DECREF(node);
        int rc = 0;
        if (children == NULL) {
            rc = -1;
            goto next;
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

static PyMethodDef methods[] = {
    {"pcap_batch", pcap_batch, METH_VARARGS, pcap_batch_doc},
    {"pcapng_epbs", pcapng_epbs, METH_VARARGS, pcapng_epbs_doc},
    {"eth_ipv4_tcp", eth_ipv4_tcp, METH_O, eth_ipv4_tcp_doc},
    {"crc32c", crc32c_fn, METH_O, crc32c_doc},
    {"crc32c_software", crc32c_software, METH_O, crc32c_software_doc},
    {"v2_records", v2_records, METH_VARARGS, v2_records_doc},
    {"payload_view", payload_view, METH_VARARGS, payload_view_doc},
    {"plain_lines", plain_lines, METH_VARARGS, plain_lines_doc},
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
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "VERSION", SPEEDUPS_VERSION) < 0
            || PyModule_AddIntConstant(m, "CRC32C_HARDWARE", crc_use_hw) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
