# Cython's types for splits.py (pure-Python mode: the .py stays the source; scripts/build_ext.py).
cimport cython

cdef int _OTHER, _ROWS, _TABLE_MAP, _CONTEXT, _GTID, _QUERY, _END, _PAYLOAD, _FDE, _ENCRYPTION
cdef int _HEADER_LEN, _MARIADB_GTID, _QUERY_EVENT, _STMT_END_F, _MARIADB_FL_STANDALONE
cdef int _Q_STATEMENT, _Q_BEGIN, _Q_END

@cython.locals(
    n=Py_ssize_t, pos=Py_ssize_t, size=Py_ssize_t, top=Py_ssize_t, ctx=Py_ssize_t, start=Py_ssize_t,
    typ=int, kind=int, off=int, q=int,
    buf="const unsigned char[:]", kinds="const unsigned char[:]", types="const unsigned char[:]",
    flags_at="const unsigned char[:]",
    seen_gtid=bint, in_txn=bint, began=bint, clean=bint, stmt_done=bint,
)
cpdef tuple scan(data)
