/* Declarations shared by the C files of kwsniff._speedups (one extension module). */
#ifndef KWSNIFF_SPEEDUPS_H
#define KWSNIFF_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* _speedups_decode.c: schema-driven field decoding (kwsniff/kafka/protocol/cprogram.py) */
PyObject *decode_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
extern const char decode_fields_doc[];
int decode_fields_init(void);

#endif
