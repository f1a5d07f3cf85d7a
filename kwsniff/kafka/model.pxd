# Augmenting declarations for model.py (Cython pure-Python mode): the two units every
# layer above kafka/ passes around become extension types. Fields stay object-typed (the
# values and their types are exactly those of the uncompiled module); a module that
# cimports these classes and types its locals with them reads the fields as C struct
# fields, and the constructors are compiled.

cdef class KafkaMessage:
    cdef public object kind, raw, api_key, api_version, correlation_id, client_id
    cdef public object header, header_version, body, body_offset, body_end
    cdef public list problems
    cdef public object inferred, frame_first, frame_last, ts_first, ts_last
    cdef public object stream_offset, missing, deferred

    cpdef list state(self)

cdef class Exchange:
    cdef public object index, stream, client, broker, status
    cdef public KafkaMessage request, response
    cdef public object protocol
    cdef public list problems
    cdef public object tls

    cpdef KafkaMessage _first(self)
