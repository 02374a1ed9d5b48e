"""Parsing: DDL classification, table filters and the schema history (``pycanal.parse.meta``)."""

from .ddl import DdlParseError, DdlResult, DdlType, parse_ddl
from .filter import RegexFilter, TableFilter

__all__ = ["DdlParseError", "DdlResult", "DdlType", "RegexFilter", "TableFilter", "parse_ddl"]
