# Cython declarations augmenting summary.py (pure-Python mode): the helpers every summary
# line calls become C calls within the module, and the formatter is an extension type
# whose caches and settings are struct fields (``format`` stays a Python-visible method:
# a subclass may override it). summary.py stays the one source.
cimport cython
from kwsniff.kafka.model cimport Exchange, KafkaMessage

cpdef str format_time(ts, mode, start)
cpdef str format_latency(ms)

cdef class SummaryFormatter:
    cdef public object palette, time_format, start_ts, align, _learning
    cdef public dict _routes, _apis, _clients
    cdef public list _widths

    cpdef str _route(self, client, broker)
    cpdef str _api(self, msg, protocol, exchange)
    cpdef str _client(self, client_id)
    @cython.locals(index=Py_ssize_t, line=str, problems=Py_ssize_t, req=KafkaMessage,
                   resp=KafkaMessage, first=KafkaMessage)
    cpdef str format(self, Exchange exchange, facts=*)
