# Augmenting declarations for facts_walk.py (Cython pure-Python mode): the plan walker
# runs compiled (one call per struct of every body whose facts are read), reading the
# plan's tuples and the body's dicts with C calls. facts_walk.py stays the one source.
cimport cython
from kwsniff.kafka.records cimport Records

# what a field of a walk plan holds (C constants here; the .py assigns them)
cdef int _ARRAY, _STRUCT, _INT, _RECORDS, _OTHER

@cython.locals(topic_keys=tuple, field=tuple, kind=int, sub=tuple, role=object)
cdef _walk(col, dict d, tuple plan, topic, partition)

cdef class _PlanWalker:
    cdef public tuple plan
