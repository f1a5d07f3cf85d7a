# Augmenting declarations for conv_release.py (Cython pure-Python mode). The parts of a
# conversation form one chain of bases, ReleaseControl <- InOrderPairing <-
# OrphanHandling <- ResyncChecks <- Conversation, so that compiled they are extension
# types sharing one C struct: every attribute of a conversation is declared here, at
# the root of the chain, and the methods of every part read and write them as struct
# fields. The .py files stay the one source of the behaviour.

cimport cython
from kwsniff.kafka.conv_state cimport Context
from kwsniff.kafka.framing cimport Framer


cdef class ReleaseControl:
    cdef public Context ctx
    cdef public object conn, state, client_dir, client_by
    cdef public bint kafka_port
    cdef public tuple framers
    cdef public dict pending
    cdef public object fifo, orphans, recent, history
    cdef public bint sasl_raw
    cdef public dict sasl_wait
    cdef public object sasl_client_id
    cdef public Py_ssize_t requests_since_orphan
    cdef public object corr_hi, last_req_corr, last_resp_corr, broker_ranges, client_key
    cdef public bint unordered_partial
    cdef public object loss_seen, last_client_id, last_pair
    cdef public Py_ssize_t undecided_chunks, next_decide
    # (frame bytes of the requests in pending)
    cdef public Py_ssize_t waiting_bytes
    cdef public object summary

    # (the framers' open_key are C calls)
    @cython.locals(f0=Framer, f1=Framer)
    cpdef object open_key(self)
    @cython.locals(f0=Framer, f1=Framer)
    cpdef _refresh(self)
