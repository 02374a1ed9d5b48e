"""Binlog decoding: pure functions over bytes for files and the replication stream."""

from .decoder import EventDecoder
from .errors import BinlogError, TableIdNotFoundError
from .reader import read_events
from .rows import MISSING, JsonText

__all__ = ["BinlogError", "TableIdNotFoundError", "EventDecoder", "JsonText", "MISSING", "read_events"]
