# Cython augmenting declarations for framing.py (pure-Python mode): Frame becomes an
# extension type with the same attributes (object-typed: the values and their types are
# exactly those of the uncompiled module), and _whole_frame and _frames_at C functions
# that make frames without the constructor's argument parsing.

cdef class Frame:
    cdef public object raw, offset, frame_first, frame_last, ts_first, ts_last
    cdef public object missing, skipped_before, discarded

cimport cython

@cython.locals(f=Frame)
cdef Frame _whole_frame(object raw, object offset, object frame, object ts,
                        object skipped_before)

cdef list _frames_at(list bodies, object offset, object frame, object ts, object skip)

# The framer of one TCP direction: an extension type, so that its methods read and write
# its state as C struct fields (object-typed, as in the uncompiled module; C integers for
# the positions and counters measured no faster, the offsets arriving as Python ints).
cdef class Framer:
    cdef public object buf, pos, base, segs, state, check, max_frame, window, scan
    cdef public object skipped_bytes, gap_bytes, gaps, _pending_skip, problems
    cdef public object _fill_end, _fill_frame, last_offset, frames_cut, resyncs
    cdef public object first_offset, probation, held, held_start, seq_offset, _look
    cdef public object want_end, guard

    # the per-segment path: C calls through the vtable (a subclass may still override)
    cpdef data(self, offset, data, frame, ts)
    cpdef extend(self, offset, data, frame, ts)
    cpdef _fast(self, offset, data, frame, ts)
    # (asked by the conversation after every change, for the reorder buffer)
    cpdef object open_key(self)
