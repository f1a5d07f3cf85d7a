/*
 * summary_line: kwsniff.output.summary.SummaryFormatter.format in C, for its usual case.
 *
 * Contract: ``summary_line(formatter, exchange, facts)`` returns exactly the line that
 * ``formatter.format(exchange, facts)`` returns when the formatter is plain (its
 * palette not enabled) with relative times (``"r"``), or None, for the method to make
 * it, wherever it is not sure to: no start time yet, an exchange without a request,
 * a route, client id or API label the formatter has not made (and remembered) yet,
 * error codes in the response, no digest text in the facts (the digest then needs
 * Python), text that is not printable, problems to flag, a value of an unexpected
 * type or a time that is not finite. It reads the facts in the method's order
 * (``response_side``, then ``digest_text``, then ``record_problems``), so properties
 * run as they would. It raises only what those properties raise, or memory errors.
 */
#include "_speedups.h"

#include <math.h>

enum {
    A_REQUEST, A_RESPONSE, A_INDEX, A_CLIENT, A_BROKER, A_PROTOCOL, A_PROBLEMS, A_TS_LAST,
    A_API_KEY, A_API_VERSION, A_CORR, A_CLIENT_ID, A_START_TS, A_ROUTES, A_CLIENTS, A_APIS,
    A_RESPONSE_SIDE, A_ERRORS, A_DIGEST_TEXT, A_RECORD_PROBLEMS, A_N
};
static const char *a_names[A_N] = {
    "request", "response", "index", "client", "broker", "protocol", "problems", "ts_last",
    "api_key", "api_version", "correlation_id", "client_id", "start_ts", "_routes",
    "_clients", "_apis", "response_side", "errors", "digest_text", "record_problems",
};
static PyObject *attr[A_N];

#define UNSURE 1        /* helpers: 0 done, UNSURE (return None), -1 error */

static int ready(void) {
    for (int i = 0; i < A_N; i++)
        if (attr[i] == NULL && (attr[i] = PyUnicode_InternFromString(a_names[i])) == NULL)
            return -1;
    return 0;
}

/* getattr into *out (a new reference); -1 on error */
static int get(PyObject *obj, int a, PyObject **out) {
    *out = PyObject_GetAttr(obj, attr[a]);
    return *out == NULL ? -1 : 0;
}

static int put_ascii(_PyUnicodeWriter *w, const char *s) {
    return _PyUnicodeWriter_WriteASCIIString(w, s, (Py_ssize_t)strlen(s));
}

/* a float formatted like f"{x:.{prec}f}" right-aligned in ``width`` (0: none), then
   ``suffix`` */
static int put_fixed(_PyUnicodeWriter *w, double x, int prec, int width, const char *suffix) {
    char exact[48];
    char *text = exact;
    if (put_fixed_exact(exact, x, prec) < 0
            && (text = PyOS_double_to_string(x, 'f', prec, 0, NULL)) == NULL)
        return -1;
    int r = 0;
    for (int pad = width - (int)strlen(text); r == 0 && pad > 0; pad--)
        r = _PyUnicodeWriter_WriteChar(w, ' ');
    if (r == 0)
        r = put_ascii(w, text);
    if (text != exact)
        PyMem_Free(text);
    if (r == 0 && suffix != NULL)
        r = put_ascii(w, suffix);
    return r;
}

/* a cached text of one of the formatter's dicts, borrowed; NULL: not there (or an
   error, then set) */
static PyObject *cached(PyObject *cache, PyObject *key) {
    if (!PyDict_CheckExact(cache))
        return NULL;
    PyObject *text = PyDict_GetItemWithError(cache, key);
    return text != NULL && PyUnicode_CheckExact(text) ? text : NULL;
}

/* whether every character of ``s`` is printable (str.isprintable) */
static int printable(PyObject *s) {
    if (PyUnicode_IS_ASCII(s)) {
        const unsigned char *a = PyUnicode_1BYTE_DATA(s);
        Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        for (Py_ssize_t i = 0; i < n; i++)
            if (a[i] < 0x20 || a[i] == 0x7f)
                return 0;
        return 1;
    }
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch >= 0x20 && ch < 0x7f)
            continue;
        if (!Py_UNICODE_ISPRINTABLE(ch))
            return 0;
    }
    return 1;
}

/* len() of a list attribute; -1 with an error, -2 when it is not a list */
static Py_ssize_t list_len(PyObject *obj) {
    PyObject *v;
    if (get(obj, A_PROBLEMS, &v) < 0)
        return -1;
    Py_ssize_t n = PyList_CheckExact(v) ? PyList_GET_SIZE(v) : -2;
    Py_DECREF(v);
    return n;
}

/* The line into ``w``; 0, UNSURE or -1. ``o`` holds new references (released by the
   caller), in the order they are read. */
static int make_line(_PyUnicodeWriter *w, PyObject *fmt, PyObject *ex, PyObject *facts,
                     PyObject **o) {
    enum { REQ, RESP, INDEX, START, TS, CLIENT, BROKER, KEY, ROUTES, CLIENT_ID, CLIENTS,
           PROTOCOL, API_KEY, API_VERSION, APIS, CORR, RESP_TS, SIDE, ERRORS, TEXT, RECP };
    if (get(ex, A_REQUEST, &o[REQ]) < 0 || get(ex, A_RESPONSE, &o[RESP]) < 0)
        return -1;
    PyObject *req = o[REQ], *resp = o[RESP];
    if (req == Py_None)
        return UNSURE;
    if (get(ex, A_INDEX, &o[INDEX]) < 0 || get(fmt, A_START_TS, &o[START]) < 0
            || get(req, A_TS_LAST, &o[TS]) < 0)
        return -1;
    long long index;
    if (small_int(o[INDEX], &index) < 0 || !PyFloat_CheckExact(o[START])
            || !PyFloat_CheckExact(o[TS]))
        return UNSURE;
    double when = PyFloat_AS_DOUBLE(o[TS]) - PyFloat_AS_DOUBLE(o[START]);
    if (!isfinite(when))
        return UNSURE;
    /* the route, client id and API label the formatter made before */
    if (get(ex, A_CLIENT, &o[CLIENT]) < 0 || get(ex, A_BROKER, &o[BROKER]) < 0
            || (o[KEY] = PyTuple_Pack(2, o[CLIENT], o[BROKER])) == NULL
            || get(fmt, A_ROUTES, &o[ROUTES]) < 0)
        return -1;
    PyObject *route = cached(o[ROUTES], o[KEY]);
    if (route == NULL)
        return PyErr_Occurred() ? -1 : UNSURE;
    if (get(req, A_CLIENT_ID, &o[CLIENT_ID]) < 0 || get(fmt, A_CLIENTS, &o[CLIENTS]) < 0)
        return -1;
    PyObject *client = cached(o[CLIENTS], o[CLIENT_ID]);
    if (client == NULL)
        return PyErr_Occurred() ? -1 : UNSURE;
    if (get(ex, A_PROTOCOL, &o[PROTOCOL]) < 0 || get(req, A_API_KEY, &o[API_KEY]) < 0
            || get(req, A_API_VERSION, &o[API_VERSION]) < 0 || get(fmt, A_APIS, &o[APIS]) < 0)
        return -1;
    Py_SETREF(o[KEY], PyTuple_Pack(3, o[PROTOCOL], o[API_KEY], o[API_VERSION]));
    if (o[KEY] == NULL)
        return -1;
    PyObject *api = cached(o[APIS], o[KEY]);
    if (api == NULL)
        return PyErr_Occurred() ? -1 : UNSURE;
    if (get(req, A_CORR, &o[CORR]) < 0)
        return -1;
    long long corr = 0;
    if (o[CORR] != Py_None && small_int(o[CORR], &corr) < 0)
        return UNSURE;
    double ms = 0.0;
    if (resp != Py_None) {
        if (get(resp, A_TS_LAST, &o[RESP_TS]) < 0)
            return -1;
        if (!PyFloat_CheckExact(o[RESP_TS]))
            return UNSURE;
        ms = (PyFloat_AS_DOUBLE(o[RESP_TS]) - PyFloat_AS_DOUBLE(o[TS])) * 1000.0;
        if (!isfinite(ms))
            return UNSURE;
    }
    /* the facts, in the method's order */
    if (get(facts, A_RESPONSE_SIDE, &o[SIDE]) < 0 || get(o[SIDE], A_ERRORS, &o[ERRORS]) < 0)
        return -1;
    int errors = PyObject_IsTrue(o[ERRORS]);
    if (errors != 0)
        return errors < 0 ? -1 : UNSURE;
    if (get(facts, A_DIGEST_TEXT, &o[TEXT]) < 0)
        return -1;
    PyObject *text = o[TEXT];
    if (!PyUnicode_CheckExact(text) || !printable(text))
        return UNSURE;
    Py_ssize_t problems = list_len(ex);
    if (problems == -1)
        return -1;
    if (problems != 0)
        return UNSURE;
    problems = list_len(req);
    if (problems == 0 && resp != Py_None)
        problems = list_len(resp);
    if (problems == -1)
        return -1;
    if (problems != 0)
        return UNSURE;
    if (get(facts, A_RECORD_PROBLEMS, &o[RECP]) < 0)
        return -1;
    long long recp;
    if (small_int(o[RECP], &recp) < 0 || recp != 0)
        return UNSURE;

    /* f"{index:5d}", f"{when:>10.6f}", route, client, api, #corr, latency, digest */
    char buf[48];
    int n = put_decimal(buf, index, 5);
    buf[n++] = ' ';
    if (_PyUnicodeWriter_WriteASCIIString(w, buf, n) < 0 || put_fixed(w, when, 6, 10, " ") < 0
            || _PyUnicodeWriter_WriteStr(w, route) < 0 || _PyUnicodeWriter_WriteChar(w, ' ') < 0
            || _PyUnicodeWriter_WriteStr(w, client) < 0 || _PyUnicodeWriter_WriteChar(w, ' ') < 0
            || _PyUnicodeWriter_WriteStr(w, api) < 0)
        return -1;
    if (o[CORR] == Py_None) {
        strcpy(buf, " #- ");
        n = 4;
    } else {
        buf[0] = ' ';
        buf[1] = '#';
        n = 2 + put_decimal(buf + 2, corr, 0);
        buf[n++] = ' ';
    }
    if (_PyUnicodeWriter_WriteASCIIString(w, buf, n) < 0)
        return -1;
    int r;
    if (resp == Py_None)                    /* format_latency */
        r = put_ascii(w, "-");
    else if (ms < 10)
        r = put_fixed(w, ms, 2, 0, " ms");
    else if (ms < 1000)
        r = put_fixed(w, ms, 1, 0, " ms");
    else
        r = put_fixed(w, ms / 1000, 2, 0, " s");
    if (r < 0)
        return -1;
    if (PyUnicode_GET_LENGTH(text) > 0
            && (_PyUnicodeWriter_WriteChar(w, ' ') < 0 || _PyUnicodeWriter_WriteStr(w, text) < 0))
        return -1;
    return 0;
}

const char summary_line_doc[] =
    "summary_line(formatter, exchange, facts) -> str or None: SummaryFormatter.format for "
    "plain lines with relative times (see _speedups_line.c)";

PyObject *summary_line(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "summary_line(formatter, exchange, facts)");
        return NULL;
    }
    if (ready() < 0)
        return NULL;
    PyObject *o[24] = {NULL};
    _PyUnicodeWriter w;
    _PyUnicodeWriter_Init(&w);
    w.overallocate = 1;
    int r = make_line(&w, args[0], args[1], args[2], o);
    for (int i = 0; i < 24; i++)
        Py_XDECREF(o[i]);
    if (r != 0) {
        _PyUnicodeWriter_Dealloc(&w);
        if (r < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    return _PyUnicodeWriter_Finish(&w);
}

int put_fixed_exact(char *out, double x, int prec) {
    static const uint64_t p10[10] = {1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL,
                                     1000000ULL, 10000000ULL, 100000000ULL, 1000000000ULL};
    if (!isfinite(x) || prec < 0 || prec > 9)
        return -1;
    int neg = signbit(x) != 0;
    double ax = fabs(x);
    if (ax >= 9007199254740992.0)           /* 2**53 */
        return -1;
    uint64_t q = 0;
    if (ax != 0.0) {
        int e;
        double f = frexp(ax, &e);           /* ax = f * 2**e, 0.5 <= f < 1 */
        uint64_t m = (uint64_t)ldexp(f, 53);    /* exact: ax = m / 2**(53 - e) */
        int shift = 53 - e;                 /* >= 0, as ax < 2**53 */
        unsigned __int128 n = (unsigned __int128)m * p10[prec];
        if (shift < 128) {
            unsigned __int128 whole = n >> shift;
            unsigned __int128 rem = shift ? n & ((((unsigned __int128)1) << shift) - 1) : 0;
            unsigned __int128 half = shift ? ((unsigned __int128)1) << (shift - 1) : 1;
            if (shift && (rem > half || (rem == half && (whole & 1))))
                whole++;
            if (whole > (unsigned __int128)9999999999999999999ULL)
                return -1;
            q = (uint64_t)whole;
        }   /* (else n / 2**shift < 2**-44: it rounds to 0) */
    }
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + q % 10);
        q /= 10;
    } while (q != 0);
    while (n <= prec)               /* at least one digit before the point */
        digits[n++] = '0';
    int len = 0;
    if (neg)
        out[len++] = '-';
    while (n > prec)
        out[len++] = digits[--n];
    if (prec > 0) {
        out[len++] = '.';
        while (n > 0)
            out[len++] = digits[--n];
    }
    out[len] = '\0';
    return len;
}

const char format_fixed_doc[] =
    "format_fixed(x, prec) -> str: f'{x:.{prec}f}' as the C lines make it (for tests)";

PyObject *format_fixed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyFloat_Check(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "format_fixed(x: float, prec: int)");
        return NULL;
    }
    long prec = PyLong_AsLong(args[1]);
    if (prec < 0 || prec > 9) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "format_fixed: prec from 0 to 9");
        return NULL;
    }
    char out[48];
    if (put_fixed_exact(out, PyFloat_AS_DOUBLE(args[0]), (int)prec) < 0)
        Py_RETURN_NONE;
    return PyUnicode_FromString(out);
}
