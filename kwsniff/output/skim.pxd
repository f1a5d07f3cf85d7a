# Augmenting declarations for skim.py (Cython pure-Python mode): the summary lane as an
# extension type (object-typed attributes, as in the uncompiled module), its per-exchange
# methods called through the vtable and reading the exchange's messages as C struct
# fields. skim.py stays the one source.
cimport cython
from kwsniff.kafka.model cimport Exchange, KafkaMessage

cdef class SkimFacts:
    cdef public object exchange, names, digest_text, response_side
    cdef public Py_ssize_t record_problems

cdef class SummaryLane:
    cdef public object annotate_ctx, names, tried, taken

    @cython.locals(req=KafkaMessage)
    cpdef facts(self, Exchange ex)
    @cython.locals(resp=KafkaMessage, facts=SkimFacts)
    cpdef _skim(self, Exchange ex, KafkaMessage req)

cpdef _body(KafkaMessage msg, errors)
