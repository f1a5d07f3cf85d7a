# Augmenting declarations for kwsniff/tcp/events.py (Cython pure-Python mode): the TCP
# events become extension types (object-typed attributes: the values and their types
# are exactly those of the uncompiled module), so the engine, which cimports them, reads
# their fields as C struct fields. No C code reads their slots.

cdef class ConnectionOpened:
    cdef public object conn


cdef class StreamData:
    cdef public object conn, direction, offset, data, frame, ts


cdef class StreamGap:
    cdef public object conn, direction, offset, length, frame, ts, reason


cdef class ConnectionClosed:
    cdef public object conn, reason
