# Augmenting declarations for engine.py (Cython pure-Python mode): the engine becomes an
# extension type with typed attributes, so the per-event path (_feed) reads the events,
# the run's context and the conversation as C struct fields and calls the
# conversation's methods through its vtable. engine.py stays the one source.
cimport cython
from kwsniff.kafka.conv_state cimport Context
from kwsniff.kafka.conversation cimport Conversation
from kwsniff.tcp.events cimport StreamData
from kwsniff.kafka.model cimport Exchange, KafkaMessage
from kwsniff.kafka.ordering cimport Reorderer


cdef class Engine:
    cdef public object options, summary
    cdef public Context ctx
    cdef public dict convs, tls
    cdef public list _tls_unread, _earlier, _other_top
    cdef public dict _tls_done
    cdef public object _other_seq, _forgot
    cdef public set _gone
    cdef public object _source, _secrets_seen
    cdef public object _next_sweep, _tcp
    cdef public dict _other, _late, _counted
    # (OrderedDicts, dropped oldest first: object, not dict, so that Cython does not
    # reach into them with the dict C API)
    cdef public object _parked, _starts, connections, tls_info
    cdef public object _start_bytes
    cdef public bint _finishing

    # (reorder: the run's Reorderer or a subclass, e.g. the live engine's)
    @cython.locals(conv=Conversation, sd=StreamData, reorder=Reorderer)
    cpdef list _feed(self, ev)
    @cython.locals(ex=Exchange, resp=KafkaMessage, requests=Py_ssize_t,
                   responses=Py_ssize_t, inferred=Py_ssize_t, reorder=Reorderer)
    cpdef list _release(self, bint final)
