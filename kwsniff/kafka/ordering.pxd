# Cython declarations augmenting ordering.py (pure-Python mode): the reorder buffer as
# an extension type with typed attributes. ordering.py stays the one source.
cimport cython
from kwsniff.kafka.model cimport Exchange, KafkaMessage

@cython.locals(n=Py_ssize_t, msg=KafkaMessage)
cpdef Py_ssize_t frame_bytes(Exchange exchange)

@cython.locals(i=Py_ssize_t, x=cython.longlong, y=cython.longlong)
cdef bint _less(tuple a, tuple b)
@cython.locals(i=Py_ssize_t, x=cython.longlong, y=cython.longlong)
cdef bint _at_or_after(tuple item, tuple key)
@cython.locals(parent_pos=Py_ssize_t, parent=tuple)
cdef _sift_up(list heap, Py_ssize_t pos, tuple item)
cdef _push(list heap, tuple item)
@cython.locals(last=tuple, top=tuple, n=Py_ssize_t, pos=Py_ssize_t, child=Py_ssize_t,
               right=Py_ssize_t)
cdef tuple _pop(list heap)

cdef class Reorderer:
    cdef public list ready
    cdef public list marks
    cdef public dict current
    cdef public dict versions
    cdef public dict forcers
    cdef public Py_ssize_t limit
    cdef public Py_ssize_t byte_limit
    cdef public Py_ssize_t held
    cdef public long long next_index
    cdef public object last_key
    cdef public long long _seq
    cdef public long long out_of_order
    cdef public long long forced
    cdef public bint dirty

    cpdef add(self, key, exchange)
    cpdef register(self, owner, force)
    cpdef set_open(self, owner, key)
    cpdef forget(self, owner)
    cdef _rebuild(self)
    @cython.locals(marks=list, versions=dict, current=dict, mark=tuple)
    cdef tuple _watermark(self)
    @cython.locals(out=list, ready=list, item=tuple)
    cpdef list drain(self, bint final=*)
