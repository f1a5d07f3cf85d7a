# Cython declarations augmenting digest.py (pure-Python mode): the helpers the built-in
# digests call on every summary line become C calls within the module. digest.py stays
# the one source.
cimport cython

cpdef str human_bytes(n)
cpdef str short(text, int limit=*)
@cython.locals(nums=list, out=list, i=Py_ssize_t, j=Py_ssize_t)
cpdef str ranges(numbers)
@cython.locals(shown=list, merged=dict)
cpdef str topic_partitions(pairs)
cpdef list _list(body, key)
cpdef list _dicts(body, key)
cpdef _partition_of(p)
@cython.locals(out=list, nums=list)
cpdef list _pairs(body, topics_key, parts_key, facts, structs=*)
cpdef str error_summary(codes, str ok_word=*)
cpdef _top_error(body)
cpdef tuple records_stats(records)
cpdef bint records_exact(records)
@cython.locals(parts=list)
cpdef str _records_phrase(batches, count, size, exact=*)
