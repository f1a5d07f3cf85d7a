# Augmenting declarations for records.py (Cython pure-Python mode): the record set, its
# batches and records become extension types with the same attributes (object-typed:
# the values and their types are exactly those of the uncompiled module). Their own
# methods read them as C struct fields, and a module that cimports these classes and
# types its locals with them (tree.pxd) does too. records.py stays the one source.
cimport cython

cdef class Record:
    cdef public object offset, timestamp, key, value, headers, attributes, size, start
    cdef public object control, key_decoded, value_decoded, crc, crc_ok, problems

cdef class Batch:
    cdef public object _set, kind, start, length, size, available, truncated, magic
    cdef public object base_offset, partition_leader_epoch, crc, attributes
    cdef public object last_offset_delta, base_timestamp, max_timestamp, producer_id
    cdef public object producer_epoch, base_sequence, declared_count, _problems
    cdef public object _records, _crc_ok, compressed_size, decompressed_size, framing

cdef class _SetState:
    cdef public object data, topic, max_decompressed, decompressed

cdef class Records:
    cdef public object data, format, base_position, partition, _state, _batches
    cdef public object _problems, _clean

    # (the -V tree asks it of every record set: the batches' fields as C struct fields)
    @cython.locals(b=Batch, bs=list)
    cpdef str summary(self)
