# Cython's types for worker.py (pure-Python mode: the .py stays the source; scripts/build_ext.py).
# The reading process hands every event to feed() and builds every record in _answer(): typed,
# their state is a struct and their calls within the class are C calls; the conversion process
# reads each record's fields from the store's Event struct, the reading one makes it by a C call
# (both cimported).
from pycanal.store.event cimport Event, record

cdef class ConvertWorker:
    cdef public object chunk_events, chunk_bytes, answer_timeout, sent_at, chunks_sent, warn
    cdef public object skipped_table_errors, capacity, pid
    cdef object _records, _filter, _filter_sent, _gtid_state, _jobs, _results, _known
    cdef object _inflight, _error, _exitcode
    cdef list _datas, _positions, _metas, _owns, _out
    cdef Py_ssize_t _bytes, _numbers, _held

    cpdef bint feed(self, object data, object pos, object event) except -1
    cpdef bint put(self, object data, object pos) except -1
    cpdef void flush(self) except *
    cpdef list take(self)
    cpdef void _answer(self) except *

cpdef Event _record(tuple r)
cpdef tuple _fields(Event r)
