# Augmenting declarations for decoder.py (Cython pure-Python mode): the per-message steps
# (plan, header, deferral, body) are C calls within the module that read the message and
# its plan as C struct fields (object-typed, as in the uncompiled module). decoder.py
# stays the one source.
cimport cython
from kwsniff.kafka.model cimport KafkaMessage

cdef class _Plan:
    cdef public object header_version, header_name, header_fn, body_fn, missing, vendor

@cython.locals(by_version=dict, plan=_Plan)
cpdef _Plan _plan(kind, api_key, version)
cpdef _header(KafkaMessage msg, _Plan plan)
cpdef _body(KafkaMessage msg, fn, missing, kind, version, pos, vendor=*)
cpdef bint _defer(KafkaMessage msg, _Plan plan, kind, version, pos)
@cython.locals(msg=KafkaMessage, plan=_Plan)
cpdef KafkaMessage decode_request(raw, defer=*)
@cython.locals(msg=KafkaMessage, plan=_Plan)
cpdef KafkaMessage decode_response(raw, api_key, api_version, defer=*)
@cython.locals(plan=_Plan)
cpdef bint misfit(raw, api_key, api_version)
