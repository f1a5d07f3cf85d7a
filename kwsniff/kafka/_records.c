/* kwsniff.kafka._records: the byte-level kernel of kwsniff/kafka/records.py.

Contract: each function returns exactly what its Python reference in records.py returns
for the same input, or None where it declines (the reference then runs). No wording:
every input that makes the reference report a problem is declined.

  crc32c(data)          CRC-32C (records.crc32c_py); SSE4.2 where the CPU has it
  crc32c_software(data) the same without the CPU's instructions (to test both)
  v2_set_stats(data)    (batches, records) of a clean magic-2 record set, else None
  v2_records(...)       records._parse_v2_records for a bytes buffer without problems
  CRC32C_HARDWARE       1 when crc32c uses the CPU's instructions
*/
#include "_bytes.h"

static uint32_t crc_of_buffer(PyObject *arg, int soft, int *err) {
    Py_buffer view;
    *err = 0;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        *err = 1;
        return 0;
    }
    const unsigned char *p = (const unsigned char *)view.buf;
    size_t n = (size_t)view.len;
    uint32_t crc;
    if (soft) {
        crc = crc_soft(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
    } else if (n >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        crc = crc32c_of(p, n);
        Py_END_ALLOW_THREADS
    } else {
        crc = crc32c_of(p, n);
    }
    PyBuffer_Release(&view);
    return crc;
}

static PyObject *crc32c_fn(PyObject *self, PyObject *arg) {
    int err;
    uint32_t crc = crc_of_buffer(arg, 0, &err);
    return err ? NULL : PyLong_FromUnsignedLong(crc);
}

static PyObject *crc32c_software(PyObject *self, PyObject *arg) {
    int err;
    uint32_t crc = crc_of_buffer(arg, 1, &err);
    return err ? NULL : PyLong_FromUnsignedLong(crc);
}

static PyObject *v2_set_stats(PyObject *self, PyObject *arg) {
    Py_ssize_t batches;
    long long records;
    if (!PyBytes_CheckExact(arg)
            || !v2_clean_stats((const unsigned char *)PyBytes_AS_STRING(arg),
                               PyBytes_GET_SIZE(arg), &batches, &records))
        Py_RETURN_NONE;
    return Py_BuildValue("(nL)", batches, records);
}

/* Kafka's zigzag varint at *pos: 0, or -1 where the reference must decide (the buffer
   ends first, more than 10 bytes, a value beyond 64 bits). */
static inline int zz_varint(const unsigned char *p, Py_ssize_t len, Py_ssize_t *pos,
                            int64_t *out) {
    uint64_t result = 0;
    Py_ssize_t q = *pos;
    for (int shift = 0;; shift += 7) {
        if (q >= len)
            return -1;
        unsigned b = p[q++];
        if (shift == 63 && b > 1)
            return -1;
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
    }
    *pos = q;
    *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
    return 0;
}

/* A varint length, then that many bytes (None for a negative length): 0, -1 to
   decline, -2 with an exception set. */
static int zz_bytes(const unsigned char *p, Py_ssize_t len, Py_ssize_t *pos, PyObject **out) {
    int64_t n;
    if (zz_varint(p, len, pos, &n) < 0)
        return -1;
    if (n < 0) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
    if (n > len - *pos)
        return -1;
    *out = PyBytes_FromStringAndSize((const char *)p + *pos, (Py_ssize_t)n);
    if (*out == NULL)
        return -2;
    *pos += (Py_ssize_t)n;
    return 0;
}

/* One record's fields from p[*pos:rec_end] into vals (key, value, headers, and the
   deltas): 0, -1 to decline, -2 with an exception set. */
static int one_record(const unsigned char *p, Py_ssize_t len, Py_ssize_t *pos,
                      Py_ssize_t rec_end, int64_t *ts_delta, int64_t *off_delta,
                      PyObject **key, PyObject **value, PyObject **headers) {
    int64_t nh, n;
    int st;
    if (zz_varint(p, len, pos, ts_delta) < 0 || zz_varint(p, len, pos, off_delta) < 0)
        return -1;
    if ((st = zz_bytes(p, len, pos, key)) < 0 || (st = zz_bytes(p, len, pos, value)) < 0)
        return st;
    if (zz_varint(p, len, pos, &nh) < 0 || nh < 0)
        return -1;
    if ((*headers = PyList_New(0)) == NULL)
        return -2;
    for (int64_t h = 0; h < nh; h++) {
        if (*pos >= rec_end || zz_varint(p, len, pos, &n) < 0 || n < 0 || n > len - *pos)
            return -1;
        PyObject *hk = PyUnicode_DecodeUTF8((const char *)p + *pos, (Py_ssize_t)n, "replace");
        if (hk == NULL)
            return -2;
        *pos += (Py_ssize_t)n;
        PyObject *hv = NULL;
        if ((st = zz_bytes(p, len, pos, &hv)) < 0) {
            Py_DECREF(hk);
            return st;
        }
        PyObject *pair = PyTuple_Pack(2, hk, hv);
        Py_DECREF(hk);
        Py_DECREF(hv);
        if (pair == NULL || PyList_Append(*headers, pair) < 0) {
            Py_XDECREF(pair);
            return -2;
        }
        Py_DECREF(pair);
    }
    return *pos == rec_end ? 0 : -1;
}

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
    PyObject *records = PyList_New(0);
    if (records == NULL)
        return NULL;
    int ran_out = 0, st = 0;
    for (Py_ssize_t i = 0; i < count && pos < end; i++) {
        Py_ssize_t rec_start = pos;
        int64_t length, ts_delta, off_delta, offset, ts = 0;
        PyObject *key = NULL, *value = NULL, *headers = NULL, *rec = NULL;
        if (zz_varint(p, len, &pos, &length) < 0) {
            st = -1;
            goto done_record;
        }
        if (length > (int64_t)end - pos) {       /* the record runs past end */
            ran_out = 1;
            pos = rec_start;
            break;
        }
        if (length < 1 || pos >= len) {
            st = -1;
            goto done_record;
        }
        Py_ssize_t rec_end = pos + (Py_ssize_t)length;
        long attributes = p[pos++];
        st = one_record(p, len, &pos, rec_end, &ts_delta, &off_delta, &key, &value, &headers);
        if (st < 0)
            goto done_record;
        if (__builtin_add_overflow((int64_t)base_offset, off_delta, &offset)
                || (ts_fixed == Py_None
                    && __builtin_add_overflow((int64_t)base_ts, ts_delta, &ts))) {
            st = -1;
            goto done_record;
        }
        PyObject *argv[8] = {
            PyLong_FromLongLong(offset),
            ts_fixed == Py_None ? PyLong_FromLongLong(ts) : Py_NewRef(ts_fixed),
            key, value, headers, PyLong_FromLong(attributes),
            PyLong_FromSsize_t(rec_end - rec_start),
            PyLong_FromSsize_t(in_place ? rec_start : -1)};
        if (argv[0] && argv[1] && argv[5] && argv[6] && argv[7])
            rec = PyObject_Vectorcall(record_type, argv, 8, NULL);
        for (int k = 0; k < 8; k++)
            if (k < 2 || k > 4)
                Py_XDECREF(argv[k]);
        if (rec == NULL || PyList_Append(records, rec) < 0)
            st = -2;
    done_record:
        Py_XDECREF(key);
        Py_XDECREF(value);
        Py_XDECREF(headers);
        Py_XDECREF(rec);
        if (st < 0)
            break;
    }
    if (st == -1) {
        Py_DECREF(records);
        Py_RETURN_NONE;
    }
    if (st == -2) {
        Py_DECREF(records);
        return NULL;
    }
    return Py_BuildValue("(N[]nO)", records, pos, ran_out ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"crc32c", crc32c_fn, METH_O, "crc32c(data) -> int: CRC-32C of a bytes-like object."},
    {"crc32c_software", crc32c_software, METH_O,
     "crc32c_software(data) -> int: crc32c without the CPU's CRC instructions."},
    {"v2_set_stats", v2_set_stats, METH_O,
     "v2_set_stats(data) -> (batches, records) or None: for bytes that are a whole number "
     "of complete magic-2 batches (length holding the 61-byte header, record count >= 0, "
     "matching CRC-32C), the batch count and the sum of the record counts; else None."},
    {"v2_records", v2_records, METH_VARARGS,
     "v2_records(buf, pos, end, count, base_offset, base_ts, ts_fixed, in_place, record)\n"
     "    -> (records, [], pos, ran_out) or None\n\n"
     "records._parse_v2_records for a bytes buf: up to count records from buf[pos:end],\n"
     "each made by record(offset, timestamp, key, value, headers, attributes, size,\n"
     "start); ts_fixed is the LogAppendTime timestamp or None. None wherever the\n"
     "reference would report a problem or needs Python's integers or slices."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records", NULL, -1, methods};

PyMODINIT_FUNC PyInit__records(void) {
    crc_init();
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "CRC32C_HARDWARE", crc_use_hw) < 0)
        Py_CLEAR(m);
    return m;
}
