# Cython's types for wire.py (pure-Python mode: the .py stays the source; scripts/build_ext.py).
# The converters write every entry's fields with these: declared here, a twin that cimports them
# (rawentry.pxd) calls them as C functions, not through a Python call each.
cpdef bytes encode_varint(object n)
cpdef bytes field_bytes(object tag, object data)
cpdef bytes field_string(object tag, object text)
cpdef bytes field_int(object tag, object n)
cpdef bytes pair(object key, object value)
