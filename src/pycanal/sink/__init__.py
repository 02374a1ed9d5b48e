"""The sink between the parser and the store (Canal's ``sink`` module)."""

from .entry import EntryEventSink, SinkError

__all__ = ["EntryEventSink", "SinkError"]
