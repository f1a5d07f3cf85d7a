/* Byte-level helpers shared by the kafka-layer C kernels (kwsniff.kafka._frames,
   kwsniff.kafka._records, kwsniff.kafka.protocol._fields). Header-only: every kernel
   gets its own static copy. Bytes in, numbers out; nothing here knows Kafka's wording. */
#ifndef KWSNIFF_KAFKA_BYTES_H
#define KWSNIFF_KAFKA_BYTES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* big-endian integers */
static inline unsigned be16(const unsigned char *p) { return ((unsigned)p[0] << 8) | p[1]; }

static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t be64(const unsigned char *p) {
    return ((uint64_t)be32(p) << 32) | be32(p + 4);
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

/* ---- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) ---------------------------- */

/* ``(a, b, c)`` as a tuple of ints: a new reference, NULL with an error set (cheaper
   than Py_BuildValue, which parses its format string on every call). */
static inline PyObject *int_triple(long long a, long long b, long long c) {
    PyObject *x = PyLong_FromLongLong(a), *y = PyLong_FromLongLong(b);
    PyObject *z = PyLong_FromLongLong(c);
    PyObject *t = (x != NULL && y != NULL && z != NULL) ? PyTuple_Pack(3, x, y, z) : NULL;
    Py_XDECREF(x);
    Py_XDECREF(y);
    Py_XDECREF(z);
    return t;
}

static uint32_t crc_table[8][256];
static int crc_use_hw = 0;

/* slicing by 8: any CPU */
static inline uint32_t crc_soft(uint32_t crc, const unsigned char *p, size_t n) {
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

/* Fill the tables and pick the CPU's instructions when it has them (call once, at the
   kernel's import). */
static inline void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
#ifdef HAVE_CRC_HW
    __builtin_cpu_init();
    crc_use_hw = __builtin_cpu_supports("sse4.2") != 0;
#endif
}

/* CRC-32C of p[0:n] (initial value and final xor included). */
static inline uint32_t crc32c_of(const unsigned char *p, size_t n) {
#ifdef HAVE_CRC_HW
    if (crc_use_hw)
        return crc_hw(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
#endif
    return crc_soft(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

/* A record set p[0:n] that is a whole number of complete magic-2 batches, each with a
   length that holds the 61-byte header, a record count >= 0 and a matching CRC-32C:
   1 with the number of batches and the sum of their record counts; 0 for anything else. */
static inline int v2_clean_stats(const unsigned char *p, Py_ssize_t n, Py_ssize_t *batches_out,
                          long long *records_out) {
    Py_ssize_t pos = 0, batches = 0;
    long long records = 0;
    while (pos < n) {
        Py_ssize_t avail = n - pos;
        if (avail < 61 || p[pos + 16] != 2)
            return 0;
        int32_t length = (int32_t)be32(p + pos + 8);
        if (length < 61 - 12 || (Py_ssize_t)length + 12 > avail)
            return 0;
        Py_ssize_t size = (Py_ssize_t)length + 12;
        int32_t count = (int32_t)be32(p + pos + 57);
        if (count < 0 || crc32c_of(p + pos + 21, (size_t)(size - 21)) != be32(p + pos + 17))
            return 0;
        records += count;
        batches++;
        pos += size;
    }
    *batches_out = batches;
    *records_out = records;
    return 1;
}

#endif
