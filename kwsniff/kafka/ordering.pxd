# Cython declarations augmenting ordering.py (pure-Python mode): the reorder buffer as
# an extension type with typed attributes. ordering.py stays the one source.
cimport cython

cdef class Reorderer:
    cdef public list ready
    cdef public list marks
    cdef public dict current
    cdef public dict versions
    cdef public dict forcers
    cdef public Py_ssize_t limit
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
