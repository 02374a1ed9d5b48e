# Cython's types for event.py (pure-Python mode: the .py stays the source; scripts/build_ext.py).
# The parser builds several records a transaction (record()): typed, a record's fields are
# stored into a struct instead of through a slot descriptor each.
cimport cython

cdef class Event:
    cdef public object identity, journal_name, position, server_id, execute_time, gtid
    cdef public object entry_type, event_type, is_ddl, size, rows, event_length, raw, _entry

@cython.locals(self=Event)
cpdef Event record(object raw, object journal_name, object position, object event_length,
                   object execute_time, object server_id, object gtid, object entry_type,
                   object event_type, object rows=*)
