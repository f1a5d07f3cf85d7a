# Augmenting declarations for decoding.py (Cython pure-Python mode): the header-only
# parsers make their KafkaMessage through its compiled constructor and set its fields as
# C struct fields. decoding.py stays the one source.
cimport cython
from kwsniff.kafka.model cimport KafkaMessage

@cython.locals(msg=KafkaMessage)
cpdef KafkaMessage header_request(raw)
@cython.locals(msg=KafkaMessage)
cpdef KafkaMessage header_response(raw, api_key, api_version)
@cython.locals(by_version=dict)
cpdef bint deferrable(api_key, kind, version)
# the engine's per-message entry points, called by the conversation (which cimports them)
# as C functions, calling the schema decoder's as C functions in turn
from kwsniff.kafka.protocol.decoder cimport decode_request as _decode_request
from kwsniff.kafka.protocol.decoder cimport decode_response as _decode_response
cpdef KafkaMessage decode_request(raw, bodies=*, defer=*)
cpdef KafkaMessage decode_response(raw, api_key, api_version, bodies=*, defer=*)
