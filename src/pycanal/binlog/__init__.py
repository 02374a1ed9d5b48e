"""Binlog decoding: pure functions over bytes for files and the replication stream."""

from pycanal._lazy import lazy_names

__all__ = ["BinlogError", "TableIdNotFoundError", "EventDecoder", "JsonText", "MISSING", "read_events"]

# Where each name lives, imported on first use: a module that needs one leaf (the collations of
# ``.charsets``, for ``pycanal.parse.meta.types``, in every Spark Python worker) does not load the
# decoder and its events (75 ms).
__getattr__ = lazy_names(
    __name__,
    {
        "BinlogError": "errors",
        "EventDecoder": "decoder",
        "JsonText": "rows",
        "MISSING": "rows",
        "TableIdNotFoundError": "errors",
        "read_events": "reader",
    },
)
