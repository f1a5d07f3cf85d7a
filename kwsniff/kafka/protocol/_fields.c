/* kwsniff.kafka.protocol._fields: the schema-program field decoder, the kernel of
kwsniff/kafka/protocol/cprogram.py (decoders of codegen.py) and kwsniff/output/skim.py.

decode_fields(buf, pos, out, program) runs a program made by build_program in
cprogram.py (its docstring describes the tuples) over the bytes ``buf`` from ``pos``. It
fills the empty dict ``out`` as the generated Python decoder of the same schema rows
does (same keys, same order, same values) and returns the offset after the last byte
decoded. Wherever the Python decoder would raise or report a problem, and wherever this
code cannot be sure of giving the same result, it returns None with ``out`` empty again:
the caller then runs the Python decoder. Programs are trusted (only build_program makes
them). skim_fields is the same walk for summary lines (see its doc). */

#include "_bytes.h"



enum { OP_FIXED, OP_STRING, OP_BYTES, OP_RECORDS, OP_UUID, OP_STRUCT, OP_ARRAY };

#define DF_MAX_DEPTH 64
#define DF_MAX_EMPTY_ELEMENTS (1 << 16)   /* MAX_EMPTY_ELEMENTS in layout.py */

typedef struct {
    const unsigned char *p;
    Py_ssize_t len;
    int skim;              /* skim_fields: record sets as stats tuples */
    PyObject *errors;      /* skim_fields: a list for non-zero *ErrorCode values, or NULL */
} Src;

static PyObject *s_unknown_tags_key;
static PyObject *s_error_suffix;

/* Every function below returns -1 (or NULL) to decline; a Python exception may then be
   set, and decode_fields clears it: the Python decoder meets the same input again. */

static inline Py_ssize_t df_code_size(char code) {
    switch (code) {
    case 'b': case '?': return 1;
    case 'h': case 'H': return 2;
    case 'i': case 'I': return 4;
    default: return 8;           /* q, d */
    }
}

/* One big-endian value of struct code ``code`` (as struct.unpack_from(">" + code)). */
static PyObject *df_fixed(char code, const unsigned char *q) {
    switch (code) {
    case 'b': return PyLong_FromLong((signed char)q[0]);
    case '?': return PyBool_FromLong(q[0] != 0);
    case 'h': return PyLong_FromLong((int16_t)be16(q));
    case 'H': return PyLong_FromLong((long)be16(q));
    case 'i': return PyLong_FromLong((int32_t)be32(q));
    case 'I': return PyLong_FromUnsignedLong(be32(q));
    case 'q': return PyLong_FromLongLong((int64_t)be64(q));
    case 'd': {
        uint64_t u = be64(q);
        double d;
        memcpy(&d, &u, sizeof d);
        return PyFloat_FromDouble(d);
    }
    default:
        PyErr_SetString(PyExc_ValueError, "decode_fields: unknown fixed code");
        return NULL;
    }
}

/* Unsigned varint of at most 5 bytes (the Python decoder's uvarint). */
static int df_uvarint(const Src *s, Py_ssize_t *pos, int64_t *out) {
    uint64_t r = 0;
    int shift = 0;
    Py_ssize_t i = *pos;
    for (;;) {
        if (i >= s->len)
            return -1;
        unsigned b = s->p[i++];
        r |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (shift > 28)
            return -1;
    }
    *pos = i;
    *out = (int64_t)r;
    return 0;
}

/* A length or element count: compact uvarint - 1, else int32 (``wide``) or int16. */
static int df_length(const Src *s, Py_ssize_t *pos, int compact, int wide, int64_t *n) {
    if (compact) {
        if (df_uvarint(s, pos, n) < 0)
            return -1;
        *n -= 1;
        return 0;
    }
    Py_ssize_t i = *pos;
    if (wide) {
        if (s->len - i < 4)
            return -1;
        *n = (int32_t)be32(s->p + i);
        *pos = i + 4;
    } else {
        if (s->len - i < 2)
            return -1;
        *n = (int16_t)be16(s->p + i);
        *pos = i + 2;
    }
    return 0;
}

static int df_struct(const Src *s, Py_ssize_t *pos, PyObject *prog, PyObject *d, int depth);

/* A new dict sized for the keys of struct program ``prog`` (a FIXED op sets one key per
   name, any other op one): no resize while its fields go in (tagged fields may still
   grow it). */
static PyObject *df_new_dict(PyObject *prog) {
    PyObject *ops = PyTuple_GET_ITEM(prog, 0);
    Py_ssize_t nops = PyTuple_GET_SIZE(ops), keys = 0;
    for (Py_ssize_t i = 0; i < nops; i++) {
        PyObject *op = PyTuple_GET_ITEM(ops, i);
        keys += PyLong_AsLong(PyTuple_GET_ITEM(op, 0)) == OP_FIXED
            ? PyTuple_GET_SIZE(PyTuple_GET_ITEM(op, 1)) : 1;
    }
    return _PyDict_NewPresized(keys);
}

/* The value of one op (an array's element op included): a new reference. */
static PyObject *df_value(const Src *s, Py_ssize_t *pos, PyObject *op, int depth) {
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(op, 0));
    switch (kind) {
    case OP_FIXED: {          /* an array element: (FIXED, None, code, size) */
        const char *code = PyBytes_AS_STRING(PyTuple_GET_ITEM(op, 2));
        Py_ssize_t size = df_code_size(code[0]);
        if (s->len - *pos < size)
            return NULL;
        PyObject *v = df_fixed(code[0], s->p + *pos);
        *pos += size;
        return v;
    }
    case OP_STRING:
    case OP_BYTES:
    case OP_RECORDS: {
        int64_t n;
        if (df_length(s, pos, PyTuple_GET_ITEM(op, 2) == Py_True, kind != OP_STRING, &n) < 0)
            return NULL;
        if (n < 0) {
            if (n != -1 || PyTuple_GET_ITEM(op, 3) != Py_True)
                return NULL;     /* Python: an error, or a problem (null, not nullable) */
            Py_RETURN_NONE;
        }
        if (n > s->len - *pos)
            return NULL;
        const char *q = (const char *)s->p + *pos;
        PyObject *v;
        if (kind == OP_RECORDS && s->skim) {
            Py_ssize_t batches;
            long long records;
            if (!v2_clean_stats((const unsigned char *)q, (Py_ssize_t)n, &batches, &records))
                return NULL;     /* not a clean magic-2 set: the full decoding decides */
            *pos += (Py_ssize_t)n;
            return int_triple(batches, records, n);     /* (batches, records, bytes) */
        }
        if (kind == OP_STRING) {
            v = PyUnicode_DecodeUTF8(q, (Py_ssize_t)n, "replace");
        } else {
            v = PyBytes_FromStringAndSize(q, (Py_ssize_t)n);
            if (v != NULL && kind == OP_RECORDS) {
                PyObject *r = PyObject_CallOneArg(PyTuple_GET_ITEM(op, 4), v);
                Py_DECREF(v);
                v = r;
            }
        }
        *pos += (Py_ssize_t)n;
        return v;
    }
    case OP_UUID: {
        static const char hex[] = "0123456789abcdef";
        if (s->len - *pos < 16)
            return NULL;
        const unsigned char *q = s->p + *pos;
        char text[36];
        int j = 0;
        for (int i = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10)
                text[j++] = '-';
            text[j++] = hex[q[i] >> 4];
            text[j++] = hex[q[i] & 15];
        }
        *pos += 16;
        return PyUnicode_FromStringAndSize(text, 36);
    }
    case OP_STRUCT: {
        if (PyTuple_GET_ITEM(op, 2) == Py_True) {     /* nullable: a marker byte first */
            if (*pos >= s->len)
                return NULL;
            unsigned marker = s->p[*pos];
            *pos += 1;
            if (marker > 127)
                Py_RETURN_NONE;
        }
        PyObject *d = df_new_dict(PyTuple_GET_ITEM(op, 3));
        if (d == NULL)
            return NULL;
        if (df_struct(s, pos, PyTuple_GET_ITEM(op, 3), d, depth + 1) < 0) {
            Py_DECREF(d);
            return NULL;
        }
        return d;
    }
    case OP_ARRAY: {
        int64_t n;
        if (df_length(s, pos, PyTuple_GET_ITEM(op, 2) == Py_True, 1, &n) < 0)
            return NULL;
        if (n < 0) {
            if (n != -1 || PyTuple_GET_ITEM(op, 3) != Py_True)
                return NULL;
            Py_RETURN_NONE;
        }
        Py_ssize_t min_elem = PyLong_AsSsize_t(PyTuple_GET_ITEM(op, 4));
        if (min_elem > 0 ? n * min_elem > s->len - *pos : n > DF_MAX_EMPTY_ELEMENTS)
            return NULL;
        PyObject *elem = PyTuple_GET_ITEM(op, 5);
        PyObject *list = PyList_New((Py_ssize_t)n);
        if (list == NULL)
            return NULL;
        for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
            PyObject *v = df_value(s, pos, elem, depth + 1);
            if (v == NULL) {
                Py_DECREF(list);
                return NULL;
            }
            PyList_SET_ITEM(list, i, v);
        }
        return list;
    }
    default:
        PyErr_SetString(PyExc_ValueError, "decode_fields: unknown op");
        return NULL;
    }
}

/* Decode one field op into ``d`` (a FIXED op sets each field of its run). */
static int df_field(const Src *s, Py_ssize_t *pos, PyObject *op, PyObject *d, int depth) {
    if (PyLong_AsLong(PyTuple_GET_ITEM(op, 0)) == OP_FIXED) {
        PyObject *names = PyTuple_GET_ITEM(op, 1);
        const char *codes = PyBytes_AS_STRING(PyTuple_GET_ITEM(op, 2));
        Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(op, 3));
        if (s->len - *pos < size)
            return -1;
        const unsigned char *q = s->p + *pos;
        Py_ssize_t count = PyTuple_GET_SIZE(names);
        for (Py_ssize_t j = 0; j < count; j++) {
            PyObject *v = df_fixed(codes[j], q);
            if (v == NULL)
                return -1;
            q += df_code_size(codes[j]);
            if (s->errors != NULL && codes[j] != '?' && codes[j] != 'd') {
                int nonzero = PyObject_IsTrue(v);
                int named = nonzero > 0 ? PyUnicode_Tailmatch(PyTuple_GET_ITEM(names, j),
                                                              s_error_suffix, 0,
                                                              PY_SSIZE_T_MAX, 1) : 0;
                if (nonzero < 0 || named < 0 || (named && PyList_Append(s->errors, v) < 0)) {
                    Py_DECREF(v);
                    return -1;
                }
            }
            int rc = PyDict_SetItem(d, PyTuple_GET_ITEM(names, j), v);
            Py_DECREF(v);
            if (rc < 0)
                return -1;
        }
        *pos += size;
        return 0;
    }
    PyObject *v = df_value(s, pos, op, depth);
    if (v == NULL)
        return -1;
    int rc = PyDict_SetItem(d, PyTuple_GET_ITEM(op, 1), v);
    Py_DECREF(v);
    return rc;
}

/* A flexible struct's tagged fields: known tags decode into ``d`` and must use exactly
   their bytes; unknown ones go to d["_unknown_tags"] as (tag, bytes). */
static int df_tags(const Src *s, Py_ssize_t *pos, PyObject *tagged, PyObject *d, int depth) {
    int64_t n;
    if (df_uvarint(s, pos, &n) < 0)
        return -1;
    if (n == 0)
        return 0;
    if (n * 2 > s->len - *pos)
        return -1;
    for (int64_t k = 0; k < n; k++) {
        int64_t tag, size;
        if (df_uvarint(s, pos, &tag) < 0 || df_uvarint(s, pos, &size) < 0)
            return -1;
        if (size > s->len - *pos)
            return -1;
        Py_ssize_t end = *pos + (Py_ssize_t)size;
        PyObject *key = PyLong_FromLongLong(tag);
        if (key == NULL)
            return -1;
        PyObject *op = PyDict_GetItemWithError(tagged, key);    /* borrowed */
        if (op != NULL) {
            Py_DECREF(key);
            if (df_field(s, pos, op, d, depth) < 0 || *pos != end)
                return -1;
            continue;
        }
        if (PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
        PyObject *list = PyDict_GetItemWithError(d, s_unknown_tags_key);   /* borrowed */
        if (list == NULL) {
            if (PyErr_Occurred() || (list = PyList_New(0)) == NULL) {
                Py_DECREF(key);
                return -1;
            }
            int rc = PyDict_SetItem(d, s_unknown_tags_key, list);
            Py_DECREF(list);
            if (rc < 0) {
                Py_DECREF(key);
                return -1;
            }
        }
        PyObject *data = PyBytes_FromStringAndSize((const char *)s->p + *pos, (Py_ssize_t)size);
        PyObject *pair = data != NULL ? PyTuple_Pack(2, key, data) : NULL;
        Py_DECREF(key);
        Py_XDECREF(data);
        if (pair == NULL)
            return -1;
        int rc = PyList_Append(list, pair);
        Py_DECREF(pair);
        if (rc < 0)
            return -1;
        *pos = end;
    }
    return 0;
}

/* A struct program (ops, flexible, tagged) into ``d``. */
static int df_struct(const Src *s, Py_ssize_t *pos, PyObject *prog, PyObject *d, int depth) {
    if (depth > DF_MAX_DEPTH)
        return -1;
    PyObject *ops = PyTuple_GET_ITEM(prog, 0);
    Py_ssize_t nops = PyTuple_GET_SIZE(ops);
    for (Py_ssize_t i = 0; i < nops; i++)
        if (df_field(s, pos, PyTuple_GET_ITEM(ops, i), d, depth) < 0)
            return -1;
    if (PyTuple_GET_ITEM(prog, 1) == Py_True)
        return df_tags(s, pos, PyTuple_GET_ITEM(prog, 2), d, depth);
    return 0;
}

/* The buffer and start of a decode_fields / skim_fields call: 1 with ``s`` and ``pos``
   set, 0 (no error set) when the call is not for the C decoder (its caller returns
   None). ``skim`` and ``errors`` go into ``s``. */
static int df_start(PyObject *buf, PyObject *pos_o, PyObject *prog, int skim,
                    PyObject *errors, Src *s, Py_ssize_t *pos) {
    if (!PyBytes_CheckExact(buf) || !PyLong_CheckExact(pos_o) || !PyTuple_CheckExact(prog)
            || PyTuple_GET_SIZE(prog) != 3)
        return 0;
    Py_ssize_t p = PyLong_AsSsize_t(pos_o);
    if (p == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    s->p = (const unsigned char *)PyBytes_AS_STRING(buf);
    s->len = PyBytes_GET_SIZE(buf);
    s->skim = skim;
    s->errors = errors;
    if (p < 0 || p > s->len)
        return 0;
    *pos = p;
    return 1;
}

static const char decode_fields_doc[] =
    "decode_fields(buf, pos, out, program) -> end offset, or None (out left empty): "
    "the Python decoder decides";

static PyObject *decode_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "decode_fields(buf, pos, out, program)");
        return NULL;
    }
    PyObject *out = args[2], *prog = args[3];
    Src s;
    Py_ssize_t pos;
    if (!PyDict_CheckExact(out) || PyDict_GET_SIZE(out) != 0
            || !df_start(args[0], args[1], prog, 0, NULL, &s, &pos))
        Py_RETURN_NONE;
    if (df_struct(&s, &pos, prog, out, 0) < 0) {
        PyErr_Clear();
        PyDict_Clear(out);
        Py_RETURN_NONE;
    }
    return PyLong_FromSsize_t(pos);
}

static const char skim_fields_doc[] =
    "skim_fields(buf, pos, program, errors) -> (body, end offset) or None: decode_fields "
    "with every records field given as (batches, records, bytes) of a record set of "
    "complete magic-2 batches whose CRC-32Cs match (None for any other set: the full "
    "decoding decides), and, when errors is a list, the non-zero values of fields named "
    "*ErrorCode appended to it in body order";

static PyObject *skim_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "skim_fields(buf, pos, program, errors)");
        return NULL;
    }
    PyObject *prog = args[2], *errors = args[3];
    Src s;
    Py_ssize_t pos;
    if ((errors != Py_None && !PyList_CheckExact(errors))
            || !df_start(args[0], args[1], prog, 1, errors == Py_None ? NULL : errors, &s, &pos))
        Py_RETURN_NONE;
    Py_ssize_t before = s.errors != NULL ? PyList_GET_SIZE(s.errors) : 0;
    PyObject *out = df_new_dict(prog);
    if (out == NULL)
        return NULL;
    if (df_struct(&s, &pos, prog, out, 0) < 0) {
        PyErr_Clear();
        Py_DECREF(out);
        if (s.errors != NULL)
            PyList_SetSlice(s.errors, before, PyList_GET_SIZE(s.errors), NULL);
        Py_RETURN_NONE;
    }
    PyObject *end = PyLong_FromSsize_t(pos);
    if (end == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, out, end);
    Py_DECREF(out);
    Py_DECREF(end);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_fields", (PyCFunction)(void (*)(void))decode_fields, METH_FASTCALL,
     decode_fields_doc},
    {"skim_fields", (PyCFunction)(void (*)(void))skim_fields, METH_FASTCALL, skim_fields_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fields", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fields(void) {
    crc_init();
    s_unknown_tags_key = PyUnicode_InternFromString("_unknown_tags");
    s_error_suffix = PyUnicode_InternFromString("ErrorCode");
    if (s_unknown_tags_key == NULL || s_error_suffix == NULL)
        return NULL;
    return PyModule_Create(&module);
}
