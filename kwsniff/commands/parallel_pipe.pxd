# Augmenting declarations for parallel_pipe.py (Cython pure-Python mode): the engine
# worker's per-exchange step (is it shippable, ship it) reads the exchange and its
# messages as C struct fields and its link as an extension type. parallel_pipe.py stays
# the one source.
cimport cython
from kwsniff.kafka.model cimport Exchange, KafkaMessage
# (the render worker decodes each shipped exchange's frames again: C calls)
from kwsniff.kafka.decoding cimport decode_request, decode_response

@cython.locals(req=KafkaMessage, resp=KafkaMessage)
cpdef bint shippable(Exchange ex)

cdef class _Link:
    cdef public object sink
    cdef public bytearray buf
    cdef public Py_ssize_t batch
    cdef public object record
    cdef public object flush
    cdef public set streams

    cpdef bint ship(self, Exchange ex)
    @cython.locals(req=KafkaMessage, resp=KafkaMessage, buf=bytearray)
    cpdef exchange(self, Exchange ex)

@cython.locals(req=KafkaMessage, resp=KafkaMessage, at=Py_ssize_t, n=Py_ssize_t)
cpdef Exchange take_record(bytearray buf, Py_ssize_t start, Py_ssize_t end, dict ends)
