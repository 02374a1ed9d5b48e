# Cython's types for logevent.py (pure-Python mode: the .py stays the source; scripts/build_ext.py).
# Every event of a stream goes through records() in the conversion process (and the transaction
# frame's in the reading one): typed, its state is a struct and its calls of its own filters and
# of the entry converter (cimported) are C calls.
from pycanal.parse.rawentry cimport RawEntryConverter

cdef class LogEventConvert:
    cdef public RawEntryConverter converter
    cdef public object table_filter, filters, fields, warn, skipped_table_errors
    cdef object _verdicts, _verdicts_of, _annotations_pass

    cpdef list records(self, object event)
    cpdef bint _keep_rows(self, object e) except -1
