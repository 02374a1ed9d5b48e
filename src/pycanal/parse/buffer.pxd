# Cython's types for buffer.py (pure-Python mode: the .py stays the source; scripts/build_ext.py).
# Every entry of the stream goes through add(): typed, its calls within the buffer are C calls.
# (No cimport of another module's types: a twin is rebuilt when its own .py or .pxd changes.)
cdef class TransactionBuffer:
    cdef public object size, flush_callback, position_callback, last_position, deferred
    cdef list _entries, _ready
    cdef object _ready_end

    cpdef void add(self, object record) except *
    cpdef void add_all(self, object records) except *
    cpdef void flush(self) except *
    cpdef void commit(self) except *
    cpdef void _put(self, object record) except *
