# Cython's types for rawentry.py (pure-Python mode: the .py stays the source; scripts/build_ext.py).
# The reading process writes every transaction's frame entries (BEGIN, END) here: typed, the
# converter's state is a struct and its calls within the class are C calls, as are its calls of
# the wire format's writers and of the store's record (cimported: pycanal.compiled loads this twin
# only with theirs, built from the same sources).
from pycanal.protocol.wire cimport encode_varint, field_bytes, field_int, field_string, pair
from pycanal.store.event cimport Event, record

cdef class RawEntryConverter:
    cdef public object rules, gtid, filter_query_dml, fused, fused_events, rows_converted, _code_key
    cdef object _file
    cdef bytes _file_head, _gtid_props, _gtid_field

    cpdef list records(self, object event, object gtidlog=*)
    cpdef bint track_gtid(self, object e) except -1
    cpdef list _records(self, object e, object pos, object size, object gtidlog)
    cpdef list _gtid(self, object e, object pos, object size, object gtidlog)
    cpdef object _record(self, object e, object pos, object size, object entry_type, object names,
                         object event_type, object value)
    cpdef object _query_text(self, object e, object pos, object size, object sql, object table)
    cpdef object _rows_record(self, object e, object pos, object size)
    cpdef bytes _header(self, object e, object pos, object size, object names, object event_type,
                        object count)

cpdef bytes _entry(object header, object entry_type, object value)
cpdef bytes _stamp(object server_id, object timestamp)
