# Augmenting declarations for pipeline.py (Cython pure-Python mode): the selection as an
# extension type, its per-exchange step (select) reading its counters and the exchange's
# messages as C struct fields (object-typed, as in the uncompiled module). pipeline.py
# stays the one source.
cimport cython
from kwsniff.kafka.model cimport Exchange, KafkaMessage
from kwsniff.output.skim cimport SummaryLane

cdef class Selection:
    cdef public object filter, lean, count, names, seen, shown, problems
    # (None or the lane: its facts() is a C call)
    cdef public SummaryLane lane
    # (None or the annotate context completing deferred bodies without a lane)
    cdef public object deferred

    @cython.locals(req=KafkaMessage, resp=KafkaMessage)
    cpdef select(self, Exchange ex, matches)
