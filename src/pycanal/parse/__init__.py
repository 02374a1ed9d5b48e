"""Parsing: DDL classification, table filters and the schema history (``pycanal.parse.meta``)."""

from pycanal._lazy import lazy_names

__all__ = ["DdlParseError", "DdlResult", "DdlType", "RegexFilter", "TableFilter", "parse_ddl"]

# Imported on first use: the jsonl CLI's modules (``canonical``, ``rowcode``) are light, and the
# DDL parser (12 ms of a 0.15 s start-up) is needed only once a statement has to be classified.
__getattr__ = lazy_names(
    __name__,
    {"DdlParseError": "ddl", "DdlResult": "ddl", "DdlType": "ddl", "parse_ddl": "ddl"}
    | {"RegexFilter": "filter", "TableFilter": "filter"},
)
