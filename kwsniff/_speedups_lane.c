/*
 * lane_digest: the summary lane's digest of a Produce or Fetch exchange, in C.
 *
 * Contract: ``lane_digest(api_key, request_body, response_body)`` returns exactly
 * ``digest.compose(ex, left, right)`` of the built-in digests of kwsniff.output.digest
 * (``_produce_req``/``_produce_resp``, ``_fetch_req``/``_fetch_resp``) for the skimmed
 * bodies that kwsniff.output.skim hands them (dicts from ``skim_fields``, record sets as
 * ``(batches, records, bytes)`` tuples), when the exchange has a response. It returns
 * None, for those Python functions to run, wherever it is not sure to give the same
 * text: another API, a body that is not the usual shape (a value of an unexpected
 * type, a topic named only by id, a topic named twice or more than MAX_TOPICS topics,
 * forgotten topics, a transactional id), or any non-zero error code (those lines are
 * rare; the Python code words them). It raises only on memory errors.
 * ``lane_setup(max_topics, arrow)`` passes digest.MAX_TOPICS and digest.ARROW.
 */
#include "_speedups.h"

enum {
    K_TOPIC_DATA, K_PARTITION_DATA, K_RECORDS, K_TXN, K_ACKS, K_RESPONSES,
    K_PARTITION_RESPONSES, K_ERROR_CODE, K_BASE_OFFSET, K_THROTTLE, K_TOPICS, K_PARTITIONS,
    K_FETCH_OFFSET, K_SESSION_ID, K_SESSION_EPOCH, K_FORGOTTEN, K_MAX_WAIT, K_HIGH_WATERMARK,
    K_NAME, K_TOPIC, K_TOPIC_NAME, K_TOPIC_NAME_ANN,
    K_PARTITION_INDEX, K_PARTITION, K_INDEX, K_PARTITION_ID, K_COUNT
};
static const char *key_names[K_COUNT] = {
    "TopicData", "PartitionData", "Records", "TransactionalId", "Acks", "Responses",
    "PartitionResponses", "ErrorCode", "BaseOffset", "ThrottleTimeMs", "Topics", "Partitions",
    "FetchOffset", "SessionId", "SessionEpoch", "ForgottenTopicsData", "MaxWaitMs",
    "HighWatermark", "Name", "Topic", "TopicName", "_topic_name",
    "PartitionIndex", "Partition", "Index", "PartitionId",
};
static PyObject *keys[K_COUNT];
static Py_ssize_t max_topics = -1;       /* unset until lane_setup */
static PyObject *arrow, *arrow_start;    /* " → ", "→ " */

/* Partition numbers of one topic (ranges() sorts and de-duplicates them) */
#define MAX_PARTS 256
/* Totals of record sets (bytes, records, batches) stay far below this */
#define MAX_TOTAL (1LL << 52)

#define DECLINE 1       /* return values of the helpers: 0 fine, DECLINE, -1 error */

static PyObject *get(PyObject *d, int k) {
    return PyDict_GetItemWithError(d, keys[k]);     /* borrowed; NULL: absent (no error) */
}

/* The writers below append to a _PyUnicodeWriter; 0, or -1 with an error. */
static int put_ascii(_PyUnicodeWriter *w, const char *s) {
    return _PyUnicodeWriter_WriteASCIIString(w, s, (Py_ssize_t)strlen(s));
}

static int put_ll(_PyUnicodeWriter *w, long long v) {
    char buf[32];
    int n = put_decimal(buf, v, 0);
    return _PyUnicodeWriter_WriteASCIIString(w, buf, n);
}

/* human_bytes(n) */
static int put_bytes(_PyUnicodeWriter *w, long long n) {
    if (n < 1024) {
        char buf[40];
        int len = put_decimal(buf, n, 0);
        buf[len++] = ' ';
        buf[len++] = 'B';
        return _PyUnicodeWriter_WriteASCIIString(w, buf, len);
    }
    static const char *units[4] = {"KiB", "MiB", "GiB", "TiB"};
    double value = (double)n;
    for (int i = 0; i < 4; i++) {
        value /= 1024.0;
        if (value < 1024 || i == 3) {
            char exact[48];
            char *text = exact;
            if (put_fixed_exact(exact, value, 1) < 0
                    && (text = PyOS_double_to_string(value, 'f', 1, 0, NULL)) == NULL)
                return -1;
            int r = put_ascii(w, text);
            if (text != exact)
                PyMem_Free(text);
            if (r < 0 || _PyUnicodeWriter_WriteChar(w, ' ') < 0)
                return -1;
            return put_ascii(w, units[i]);
        }
    }
    return 0;   /* (not reached) */
}

/* An exact int that fits: its value; DECLINE for anything else (absent included). */
static int int_of(PyObject *v, long long *out) {
    return small_int(v, out) < 0 ? DECLINE : 0;
}

/* facts.topic_label of a struct named by a string; NULL (no error) when it is not. */
static PyObject *label_of(PyObject *t) {
    for (int k = K_NAME; k <= K_TOPIC_NAME_ANN; k++) {
        PyObject *v = get(t, k);
        if (v != NULL && PyUnicode_CheckExact(v))
            return v;
        if (v == NULL && PyErr_Occurred())
            return NULL;
    }
    return NULL;
}

/* digest._partition_of: 0 with *out, DECLINE when it would be None. */
static int partition_of(PyObject *p, long long *out) {
    static const int order[4] = {K_PARTITION_INDEX, K_PARTITION, K_INDEX, K_PARTITION_ID};
    for (int i = 0; i < 4; i++) {
        PyObject *v = get(p, order[i]);
        if (v != NULL && PyLong_CheckExact(v))
            return int_of(v, out);
        if (v == NULL && PyErr_Occurred())
            return -1;
    }
    return DECLINE;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* digest.ranges of n partition numbers (sorted here) */
static int put_ranges(_PyUnicodeWriter *w, long long *nums, Py_ssize_t n) {
    if (n == 1)
        return put_ll(w, nums[0]);
    qsort(nums, (size_t)n, sizeof nums[0], cmp_ll);
    Py_ssize_t u = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (u == 0 || nums[i] != nums[u - 1])
            nums[u++] = nums[i];
    for (Py_ssize_t i = 0; i < u;) {
        Py_ssize_t j = i;
        while (j + 1 < u && nums[j + 1] == nums[j] + 1)
            j++;
        if (i > 0 && _PyUnicodeWriter_WriteChar(w, ',') < 0)
            return -1;
        if (put_ll(w, nums[i]) < 0)
            return -1;
        if (j > i) {
            if (put_ascii(w, j == i + 1 ? "," : "..") < 0 || put_ll(w, nums[j]) < 0)
                return -1;
        }
        i = j + 1;
    }
    return 0;
}

/* The record set of a partition struct (digest.records_stats of the lane's tuple). */
typedef struct { long long batches, records, bytes; } Stats;

static int add_records(PyObject *p, Stats *st) {
    PyObject *rec = get(p, K_RECORDS);
    if (rec == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (rec == Py_None)
        return 0;
    if (!PyTuple_CheckExact(rec) || PyTuple_GET_SIZE(rec) != 3)
        return DECLINE;
    long long v[3];
    for (int i = 0; i < 3; i++)
        if (int_of(PyTuple_GET_ITEM(rec, i), &v[i]) || v[i] < 0 || v[i] > MAX_TOTAL)
            return DECLINE;
    st->batches += v[0];
    st->records += v[1];
    st->bytes += v[2];
    if (st->batches > MAX_TOTAL || st->records > MAX_TOTAL || st->bytes > MAX_TOTAL)
        return DECLINE;
    return 0;
}

/* digest.topic_partitions(digest._pairs(body, topics_key, parts_key, ...)) for the usual
   shape (dicts, string names, each named once, at most max_topics); *n_parts counts the
   partition structs, *first the first one (borrowed), ``st`` sums their record sets
   when given. */
static int put_topics(_PyUnicodeWriter *w, PyObject *body, int topics_key, int parts_key,
                      Py_ssize_t *n_parts, PyObject **first, Stats *st) {
    PyObject *topics = get(body, topics_key);
    if (topics == NULL)
        return PyErr_Occurred() ? -1 : DECLINE;
    if (!PyList_CheckExact(topics))
        return DECLINE;
    Py_ssize_t nt = PyList_GET_SIZE(topics);
    if (nt > max_topics)
        return DECLINE;
    PyObject *names[16];
    if (nt > 16)
        return DECLINE;
    long long nums[MAX_PARTS];
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *t = PyList_GET_ITEM(topics, i);
        if (!PyDict_CheckExact(t))
            return DECLINE;
        PyObject *name = label_of(t);
        if (name == NULL)
            return PyErr_Occurred() ? -1 : DECLINE;
        for (Py_ssize_t j = 0; j < i; j++) {
            int eq = PyUnicode_Compare(names[j], name);
            if (eq == -1 && PyErr_Occurred())
                return -1;
            if (eq == 0)
                return DECLINE;         /* a topic named twice: the merging path */
        }
        names[i] = name;
        Py_ssize_t n = 0;
        PyObject *parts = get(t, parts_key);
        if (parts == NULL && PyErr_Occurred())
            return -1;
        if (parts != NULL) {
            if (!PyList_CheckExact(parts))
                return DECLINE;
            n = PyList_GET_SIZE(parts);
            if (n > MAX_PARTS)
                return DECLINE;
            for (Py_ssize_t k = 0; k < n; k++) {
                PyObject *p = PyList_GET_ITEM(parts, k);
                if (!PyDict_CheckExact(p))
                    return DECLINE;
                int r = partition_of(p, &nums[k]);
                if (r)
                    return r;
                if (*n_parts == 0)
                    *first = p;
                (*n_parts)++;
                if (st != NULL && (r = add_records(p, st)) != 0)
                    return r;
            }
        }
        if (i > 0 && _PyUnicodeWriter_WriteChar(w, ' ') < 0)
            return -1;
        if (_PyUnicodeWriter_WriteStr(w, name) < 0)
            return -1;
        if (n > 0) {
            if (_PyUnicodeWriter_WriteChar(w, '[') < 0 || put_ranges(w, nums, n) < 0
                    || _PyUnicodeWriter_WriteChar(w, ']') < 0)
                return -1;
        }
    }
    return 0;
}

/* ``"N thing"`` / ``"N things"`` */
static int put_count(_PyUnicodeWriter *w, long long n, const char *one, const char *many) {
    if (put_ll(w, n) < 0 || _PyUnicodeWriter_WriteChar(w, ' ') < 0)
        return -1;
    return put_ascii(w, n == 1 ? one : many);
}

/* _produce_req */
static int produce_req(_PyUnicodeWriter *w, PyObject *b) {
    PyObject *txn = get(b, K_TXN);
    if (txn == NULL && PyErr_Occurred())
        return -1;
    if (txn != NULL && txn != Py_None)
        return DECLINE;
    long long acks;
    if (int_of(get(b, K_ACKS), &acks))
        return PyErr_Occurred() ? -1 : DECLINE;
    Stats st = {0, 0, 0};
    Py_ssize_t n_parts = 0;
    PyObject *first = NULL;
    Py_ssize_t start = w->pos;
    int r = put_topics(w, b, K_TOPIC_DATA, K_PARTITION_DATA, &n_parts, &first, &st);
    if (r)
        return r;
    if (w->pos > start && _PyUnicodeWriter_WriteChar(w, ' ') < 0)
        return -1;
    if (st.batches && (put_count(w, st.batches, "batch", "batches") < 0
                       || _PyUnicodeWriter_WriteChar(w, ' ') < 0))
        return -1;
    if (put_count(w, st.records, "record", "records") < 0
            || _PyUnicodeWriter_WriteChar(w, ' ') < 0 || put_bytes(w, st.bytes) < 0
            || put_ascii(w, " acks=") < 0 || put_ll(w, acks) < 0)
        return -1;
    return 0;
}

/* A partition struct's ErrorCode: 0 when it is 0; DECLINE when absent, odd or non-zero. */
static int all_ok(PyObject *p, long long *code) {
    PyObject *c = get(p, K_ERROR_CODE);
    if (c == NULL)
        return PyErr_Occurred() ? -1 : DECLINE;
    if (int_of(c, code) || *code != 0)
        return DECLINE;
    return 0;
}

/* _produce_resp */
static int produce_resp(_PyUnicodeWriter *w, PyObject *b) {
    PyObject *topics = get(b, K_RESPONSES);
    if (topics == NULL || !PyList_CheckExact(topics))
        return PyErr_Occurred() ? -1 : DECLINE;
    Py_ssize_t n = 0;
    PyObject *only = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(topics); i++) {
        PyObject *t = PyList_GET_ITEM(topics, i);
        if (!PyDict_CheckExact(t))
            return DECLINE;
        PyObject *parts = get(t, K_PARTITION_RESPONSES);
        if (parts == NULL || !PyList_CheckExact(parts))
            return PyErr_Occurred() ? -1 : DECLINE;
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(parts); k++) {
            PyObject *p = PyList_GET_ITEM(parts, k);
            long long code;
            if (!PyDict_CheckExact(p))
                return DECLINE;
            int r = all_ok(p, &code);
            if (r)
                return r;
            only = p;
            n++;
        }
    }
    if (n == 0) {
        if (put_ascii(w, "no partitions") < 0)
            return -1;
    } else if (put_ll(w, n) < 0 || put_ascii(w, " ok") < 0) {
        return -1;
    }
    if (n == 1) {
        PyObject *off = get(only, K_BASE_OFFSET);
        if (off == NULL && PyErr_Occurred())
            return -1;
        if (off != NULL && PyLong_CheckExact(off)) {
            long long v;
            if (int_of(off, &v))
                return DECLINE;
            if (put_ascii(w, ", offset ") < 0 || put_ll(w, v) < 0)
                return -1;
        }
    }
    PyObject *th = get(b, K_THROTTLE);
    if (th == NULL && PyErr_Occurred())
        return -1;
    if (th != NULL && PyLong_CheckExact(th)) {
        long long v;
        if (int_of(th, &v))
            return DECLINE;
        if (v > 0 && (put_ascii(w, ", throttled ") < 0 || put_ll(w, v) < 0
                      || put_ascii(w, " ms") < 0))
            return -1;
    }
    return 0;
}

/* An optional int field: *present 1 with its value in *out when it is an exact int, 0
   when it is absent or another type; DECLINE for an int too big for a long long. */
static int opt_int(PyObject *b, int k, long long *out, int *present) {
    PyObject *v = get(b, k);
    *present = 0;
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyLong_CheckExact(v))
        return 0;
    if (int_of(v, out))
        return DECLINE;
    *present = 1;
    return 0;
}

/* _fetch_req */
static int fetch_req(_PyUnicodeWriter *w, PyObject *b) {
    PyObject *forgotten = get(b, K_FORGOTTEN);
    if (forgotten == NULL && PyErr_Occurred())
        return -1;
    if (forgotten != NULL && (!PyList_CheckExact(forgotten) || PyList_GET_SIZE(forgotten)))
        return DECLINE;
    Py_ssize_t n_parts = 0;
    PyObject *first = NULL;
    Py_ssize_t start = w->pos;
    int r = put_topics(w, b, K_TOPICS, K_PARTITIONS, &n_parts, &first, NULL);
    if (r)
        return r;
    if (w->pos == start && put_ascii(w, "no partitions") < 0)
        return -1;
    if (n_parts == 1) {
        long long off;
        if (int_of(get(first, K_FETCH_OFFSET), &off))
            return PyErr_Occurred() ? -1 : DECLINE;
        if (put_ascii(w, " offset ") < 0 || put_ll(w, off) < 0)
            return -1;
    } else if (n_parts > 1) {
        if (_PyUnicodeWriter_WriteChar(w, ' ') < 0
                || put_count(w, n_parts, "partitions", "partitions") < 0)
            return -1;
    }
    long long sid, epoch, wait;
    int has_sid, has_wait;
    if ((r = opt_int(b, K_SESSION_ID, &sid, &has_sid)) != 0)
        return r;
    if (has_sid && sid > 0) {
        if (int_of(get(b, K_SESSION_EPOCH), &epoch))
            return PyErr_Occurred() ? -1 : DECLINE;
        if (put_ascii(w, " session ") < 0 || put_ll(w, sid) < 0
                || _PyUnicodeWriter_WriteChar(w, '/') < 0 || put_ll(w, epoch) < 0)
            return -1;
    }
    if ((r = opt_int(b, K_MAX_WAIT, &wait, &has_wait)) != 0)
        return r;
    if (has_wait && (put_ascii(w, " wait ") < 0 || put_ll(w, wait) < 0
                     || put_ascii(w, " ms") < 0))
        return -1;
    return 0;
}

/* _fetch_resp */
static int fetch_resp(_PyUnicodeWriter *w, PyObject *b) {
    long long top;
    int has_top, r;
    if ((r = opt_int(b, K_ERROR_CODE, &top, &has_top)) != 0)
        return r;
    if (has_top && top != 0)
        return DECLINE;
    PyObject *topics = get(b, K_RESPONSES);
    if (topics == NULL || !PyList_CheckExact(topics))
        return PyErr_Occurred() ? -1 : DECLINE;
    Stats st = {0, 0, 0};
    Py_ssize_t parts_n = 0, nonempty = 0;
    PyObject *hw = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(topics); i++) {
        PyObject *t = PyList_GET_ITEM(topics, i);
        if (!PyDict_CheckExact(t))
            return DECLINE;
        PyObject *parts = get(t, K_PARTITIONS);
        if (parts == NULL || !PyList_CheckExact(parts))
            return PyErr_Occurred() ? -1 : DECLINE;
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(parts); k++) {
            PyObject *p = PyList_GET_ITEM(parts, k);
            long long code;
            if (!PyDict_CheckExact(p))
                return DECLINE;
            if ((r = all_ok(p, &code)) != 0)
                return r;
            long long before = st.records;
            if ((r = add_records(p, &st)) != 0)
                return r;
            parts_n++;
            if (st.records != before)
                nonempty++;
            hw = get(p, K_HIGH_WATERMARK);
            if (hw == NULL && PyErr_Occurred())
                return -1;
        }
    }
    if (put_count(w, st.records, "record", "records") < 0)
        return -1;
    if (st.bytes && (_PyUnicodeWriter_WriteChar(w, ' ') < 0 || put_bytes(w, st.bytes) < 0))
        return -1;
    if (parts_n == 1) {
        if (hw != NULL && hw != Py_None) {
            long long v;
            if (int_of(hw, &v))
                return DECLINE;
            if (put_ascii(w, ", hw ") < 0 || put_ll(w, v) < 0)
                return -1;
        }
    } else if (parts_n > 1) {
        if (put_ascii(w, ", from ") < 0 || put_ll(w, nonempty) < 0
                || _PyUnicodeWriter_WriteChar(w, '/') < 0 || put_ll(w, parts_n) < 0
                || put_ascii(w, " partitions") < 0)
            return -1;
    }
    return 0;
}

const char lane_setup_doc[] =
    "lane_setup(max_topics, arrow): digest.MAX_TOPICS and digest.ARROW for lane_digest";

PyObject *lane_setup(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    PyObject *arr;
    if (!PyArg_ParseTuple(args, "nU", &n, &arr))
        return NULL;
    for (int i = 0; i < K_COUNT; i++)
        if (keys[i] == NULL && (keys[i] = PyUnicode_InternFromString(key_names[i])) == NULL)
            return NULL;
    PyObject *text = PyUnicode_FromFormat(" %U ", arr);
    PyObject *start = PyUnicode_FromFormat("%U ", arr);
    if (text == NULL || start == NULL) {
        Py_XDECREF(text);
        Py_XDECREF(start);
        return NULL;
    }
    Py_XSETREF(arrow, text);
    Py_XSETREF(arrow_start, start);
    max_topics = n;
    Py_RETURN_NONE;
}

const char lane_digest_doc[] =
    "lane_digest(api_key, request_body, response_body) -> str or None: the summary "
    "lane's Produce/Fetch digest (see _speedups_lane.c)";

PyObject *lane_digest(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "lane_digest(api_key, request_body, response_body)");
        return NULL;
    }
    long long key;
    if (max_topics < 0 || int_of(args[0], &key) || (key != 0 && key != 1)
            || !PyDict_CheckExact(args[1]) || !PyDict_CheckExact(args[2]))
        Py_RETURN_NONE;
    _PyUnicodeWriter w;
    _PyUnicodeWriter_Init(&w);
    w.overallocate = 1;
    int r = key == 0 ? produce_req(&w, args[1]) : fetch_req(&w, args[1]);
    if (r == 0) {
        /* compose(): "left → right", or "→ right" when left is empty */
        r = _PyUnicodeWriter_WriteStr(&w, w.pos == 0 ? arrow_start : arrow) < 0 ? -1 : 0;
        if (r == 0)
            r = key == 0 ? produce_resp(&w, args[2]) : fetch_resp(&w, args[2]);
    }
    if (r != 0) {
        _PyUnicodeWriter_Dealloc(&w);
        if (r < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    return _PyUnicodeWriter_Finish(&w);
}
