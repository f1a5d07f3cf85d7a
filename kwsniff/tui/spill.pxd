# Augmenting declarations for spill.py (Cython pure-Python mode): making an exchange's
# lean record (every exchange of a TUI run, in the engine process of a two-process run)
# reads the messages' fields as C struct fields. spill.py stays the one source.
cimport cython

from kwsniff.kafka.model cimport Exchange, KafkaMessage

cpdef bint _strippable(KafkaMessage msg)
@cython.locals(state=list)
cpdef object _lean_message(KafkaMessage msg, bint strip)
cpdef tuple lean(Exchange ex, bint strip=*)
@cython.locals(req=KafkaMessage, resp=KafkaMessage)
cpdef tuple pack(Exchange ex, bint strip=*)
