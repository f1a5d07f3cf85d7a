cimport cython
# Augmenting declarations for conversation.py: the conversation as the last link of its
# chain of extension types (attributes: conv_release.pxd); its per-frame methods are
# called through the vtable and read the frame's fields as C struct fields.
from kwsniff.kafka.conv_resync cimport ResyncChecks
from kwsniff.kafka.framing cimport Frame, Framer
from kwsniff.kafka.model cimport KafkaMessage, Exchange
from kwsniff.kafka.decoding cimport (decode_request, decode_response, header_request,
                                      header_response)

@cython.locals(v=cython.longlong)
cdef long long _int32(bytes raw)

cdef class Conversation(ResyncChecks):
    @cython.locals(framer=Framer)
    cpdef data(self, d, offset, data, frame, ts)
    @cython.locals(f=Frame)
    cpdef _frames(self, d, list frames)
    cpdef _framer_problems(self, d)
    cpdef tuple _key(self, Frame f, d)
    cpdef Exchange _exchange(self, status, KafkaMessage req, KafkaMessage resp, protocol=*,
                             problems=*)
    cpdef _emit(self, key, Exchange ex)
    cpdef _problem(self, text, run=*)
    cpdef _remember(self, corr, key, ver)
    @cython.locals(msg=KafkaMessage)
    cpdef _request(self, Frame f, d)
    cpdef _count_request(self)
    @cython.locals(msg=KafkaMessage, req=KafkaMessage)
    cpdef _response(self, Frame f, d)
    cpdef KafkaMessage _decode_response(self, raw, api_key, ver, Frame f)
    cpdef _after_response(self, KafkaMessage msg, KafkaMessage req)
    cpdef _overtake(self, key)
    cpdef _unanswered(self, p, why)
    cpdef _too_many_bytes(self, Py_ssize_t limit)
