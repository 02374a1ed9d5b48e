# Cython's types for decoder.py (pure-Python mode: the .py stays the source; scripts/build_ext.py).
# The reading process checks or decodes every event of a stream here: typed, the decoder's state
# is a struct and its calls within the class are C calls.
cdef class EventDecoder:
    cdef public object source, file, verify_checksum, checksum, codec_for, table_meta, fde, tables
    cdef public object _post_header, _permute, _table_cache, _layouts, _compiled, _rows_heads
    cdef object _rows_of

    cpdef void check(self, object data, object pos) except *
    cpdef object decode(self, object data, object pos)
    cpdef bint _guess_checksum(self, object data) except -1
    cpdef object post_header_len(self, object typ)
    cpdef object _body(self, tuple h, object body)
    cpdef object _table_map(self, tuple h, object body)
    cpdef tuple _rows_head(self, object typ, object body)
    cpdef object _rows(self, tuple h, object body)
