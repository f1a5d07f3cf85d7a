# Augmenting declarations for kwsniff/tcp/stream.py (Cython pure-Python mode): the
# event stream as an extension type, so the per-packet loop keeps its packet count in
# a C field. The .py stays the one source of the behaviour.

cimport cython


cdef class TcpEventStream:
    cdef public object options
    cdef public object problems
    cdef public object parser
    cdef public object reassembler
    cdef public Py_ssize_t packets
    cdef public object _packets
    cdef public object _iterator
