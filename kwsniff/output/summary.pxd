# Cython declarations augmenting summary.py (pure-Python mode): the helpers every summary
# line calls become C calls within the module. summary.py stays the one source.

cpdef str format_time(ts, mode, start)
cpdef str format_latency(ms)
