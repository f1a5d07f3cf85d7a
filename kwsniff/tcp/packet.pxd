# Augmenting declarations for kwsniff/tcp/packet.py (Cython pure-Python mode): the parser
# as an extension type with typed attributes, its per-packet helpers called through the
# vtable, and C-sized locals for header offsets. The .py stays the one source of the
# behaviour (offsets and lengths here are bounded by the packet's length).

cimport cython


cdef class PacketParser:
    cdef public object problems
    cdef public object defragment
    cdef public object fragments
    cdef public object non_tcp
    cdef public object malformed
    cdef public dict unsupported_linktypes

    @cython.locals(n=Py_ssize_t)
    cpdef object parse(self, object frame, object ts, object linktype, object data,
                       object orig_len)

    @cython.locals(n=Py_ssize_t, ip=Py_ssize_t)
    cpdef object _ethertype(self, object frame, object ts, object data, Py_ssize_t pos,
                            object orig_len, Py_ssize_t ip)

    @cython.locals(n=Py_ssize_t, hl=Py_ssize_t)
    cpdef object _ipv4(self, object frame, object ts, object data, Py_ssize_t ip,
                       object orig_len)

    @cython.locals(have=Py_ssize_t, hl=Py_ssize_t, start=Py_ssize_t)
    cpdef object _tcp(self, object frame, object data, Py_ssize_t pos, Py_ssize_t end,
                      object missing, object src, object dst, object reassembled)
