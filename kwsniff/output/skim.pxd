# Augmenting declarations for skim.py (Cython pure-Python mode): the summary lane as an
# extension type (object-typed attributes, as in the uncompiled module). skim.py stays
# the one source.

cdef class SummaryLane:
    cdef public object annotate_ctx, names, tried, taken
