# Augmenting declarations for kwsniff/tcp/reassembly.py (Cython pure-Python mode): the
# reassembler and its per-flow state become extension types with typed attributes, so
# the per-segment path (feed and the helpers it calls) reads and writes C struct fields
# and calls methods through the vtable. The .py stays the one source of the behaviour.

cimport cython


cdef class _Direction:
    cdef public object base
    cdef public object next
    cdef public list pending
    cdef public object buffered
    cdef public object fin
    cdef public object isn
    cdef public object ack
    cdef public object top

    cpdef object unwrap(self, object seq)


cdef class _Flow:
    cdef public object conn
    cdef public tuple dirs
    cdef public bint closed
    cdef public tuple keys


cdef class TcpReassembler:
    cdef public object problems
    cdef public object max_buffer
    cdef public object max_total_buffer
    cdef public object max_connections
    cdef public bint gap_on_ack
    cdef public dict _table
    cdef public dict _flows
    cdef public object _next_index
    cdef public object _buffered
    cdef public object forgotten
    cdef public object connections
    cdef public object retransmissions
    cdef public object keepalives
    cdef public object out_of_order
    cdef public object overlap_conflicts
    cdef public object gaps
    cdef public object gap_bytes

    @cython.locals(flow=_Flow, d=int, ds=_Direction, peer=_Direction, n=Py_ssize_t,
                   flags=int)
    cpdef object feed(self, object frame, object ts, tuple seg)

    @cython.locals(d0=_Direction, d1=_Direction)
    cpdef _close_if_finished(self, _Flow flow, object frame, object ts, list events)

    @cython.locals(flow=_Flow, d=int, ds=_Direction, peer=_Direction, flags=int)
    cpdef list _feed_slow(self, object frame, object ts, tuple seg, object entry)

    @cython.locals(ds=_Direction, n=Py_ssize_t)
    cpdef _data(self, _Flow flow, int d, object off, object payload, object missing,
                object frame, object ts, list events)

    @cython.locals(ds=_Direction)
    cpdef _buffer(self, _Flow flow, int d, object start, object end, object data,
                  object frame, object ts)

    @cython.locals(ds=_Direction, i=Py_ssize_t)
    cpdef _insert(self, _Flow flow, int d, object start, object end, object data,
                  object frame, object ts)

    @cython.locals(ds=_Direction, k=Py_ssize_t, count=Py_ssize_t)
    cpdef _drain(self, _Flow flow, int d, list events)

    @cython.locals(ds=_Direction)
    cpdef _gap(self, _Flow flow, int d, object length, object frame, object ts,
               object reason, list events)

    @cython.locals(ds=_Direction)
    cpdef _skip_to(self, _Flow flow, int d, object offset, object frame, object ts,
                   object reason, list events)

    @cython.locals(ds=_Direction)
    cpdef _unseen(self, _Flow flow, int d)

    @cython.locals(ds=_Direction)
    cpdef _acked(self, _Flow flow, int d, object frame, object ts, list events)

    # (typed: Cython 3.3 miscompiles ``for key in flow.keys`` on an untyped ``flow``,
    # taking the attribute for dict.keys())
    cpdef _forget(self, _Flow flow)
