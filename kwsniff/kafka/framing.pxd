# Cython augmenting declarations for framing.py (pure-Python mode): Frame becomes an
# extension type with the same attributes (object-typed: the values and their types are
# exactly those of the uncompiled module), and _whole_frame and _frames_at C functions
# that make frames without the constructor's argument parsing.

cdef class Frame:
    cdef public object raw, offset, frame_first, frame_last, ts_first, ts_last
    cdef public object missing, skipped_before, discarded

cdef Frame _whole_frame(object raw, object offset, object frame, object ts,
                        object skipped_before)

cdef list _frames_at(list bodies, object offset, object frame, object ts, object skip)
