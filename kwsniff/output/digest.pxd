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
cpdef str error_summary(codes, str ok_word=*)
cpdef _top_error(body)
cpdef tuple records_stats(records)
cpdef bint records_exact(records)
@cython.locals(parts=list)
cpdef str _records_phrase(batches, count, size, exact=*)
@cython.locals(v=object)
cpdef _partition_of(dict p)
@cython.locals(out=list, nums=list, t=dict)
cpdef list _pairs(dict body, topics_key, parts_key, facts, list structs=*)
# the digests of the APIs of most exchanges (Produce, Fetch): bodies are dicts (typed
# arguments: a non-dict body raises TypeError, which request_digest/response_digest
# answer with the generic digest as they do for any digest that fails)
@cython.locals(partitions=list, pairs=list, p=dict)
cpdef str _produce_req(dict b, v, f)
@cython.locals(results=list, codes=list, parts=list)
cpdef str _produce_resp(dict b, v, f, req)
@cython.locals(all_parts=list, pairs=list, parts=list)
cpdef str _fetch_req(dict b, v, f)
@cython.locals(t=dict, p=dict, parts_n=Py_ssize_t, nonempty=Py_ssize_t, errors=list,
               out=str)
cpdef str _fetch_resp(dict b, v, f, req)
