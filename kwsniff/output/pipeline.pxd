# Augmenting declarations for pipeline.py (Cython pure-Python mode): the selection as an
# extension type, its per-exchange loop reading its counters as C struct fields
# (object-typed, as in the uncompiled module). pipeline.py stays the one source.

cdef class Selection:
    cdef public object filter, lean, lane, count, names, seen, shown, problems
