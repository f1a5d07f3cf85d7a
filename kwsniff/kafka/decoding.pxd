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
