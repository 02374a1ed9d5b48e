# Cython's types for packets.py's receive buffer (pure-Python mode: the .py stays the source;
# scripts/build_ext.py). Every binlog event of a dump goes through next_body.
cimport cython

cdef class PacketReader:
    cdef bytearray _buf
    cdef object _mv
    cdef Py_ssize_t _start, _end
    cdef public int seq

    @cython.locals(buf=bytearray, start=Py_ssize_t, stop=Py_ssize_t, length=Py_ssize_t)
    cpdef object next_body(self)
