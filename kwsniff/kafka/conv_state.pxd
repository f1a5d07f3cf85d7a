# Augmenting declarations for conv_state.py (Cython pure-Python mode): the options, the
# run's context and a waiting request become extension types (object-typed attributes:
# the values and their types are exactly those of the uncompiled module; ``topic_ids``
# may be replaced by another implementation; ``reorder`` is a Reorderer or a subclass,
# e.g. the live engine's), so the conversation, which cimports them, reads them as C
# struct fields.
from kwsniff.kafka.model cimport KafkaMessage
from kwsniff.kafka.ordering cimport Reorderer

cdef class Options:
    cdef public object ports, auto_detect, max_frame, window, detect_budget, timeout
    cdef public object overtake_limit, orphan_delay, orphan_requests, bodies
    cdef public object recent_limit, show_secrets, acks0_grace, defer_bodies


cdef class Context:
    cdef public Options options
    # (the reorder buffer: its methods are C calls from the conversation)
    cdef public Reorderer reorder
    cdef public object topic_ids, histories, learned, stats, now
    cdef public object annotate_ctx, unordered, on_learn, on_other
    cdef public dict version_ranges


cdef class Pending:
    cdef public KafkaMessage msg
    cdef public object key, corr, done, overtaken, conv, kind, unordered
