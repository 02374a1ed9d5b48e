"""The decoder's one error type: every bad input says what is wrong and where."""

from __future__ import annotations

import copy


class BinlogError(Exception):
    """Bad or unsupported binlog input.

    ``source`` names the file (or stream), ``offset`` the byte offset of the event (or field)
    that could not be decoded. ``str()`` gives the one-line message the CLI prints.
    """

    def __init__(self, message: str, source: str | None = None, offset: int | None = None):
        self.message = message
        self.source = source
        self.offset = offset
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = []
        if self.source is not None:
            where.append(str(self.source))
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{': '.join([', '.join(where), self.message]) if where else self.message}"

    def at(self, source: str | None, offset: int | None) -> BinlogError:
        """Locate an error raised inside an event body at the event's ``source``/``offset``.

        An offset the inner code recorded is relative to the body, so it moves into the message.
        The copy keeps the error's class and attributes.
        """
        if self.source is not None:
            return self
        located = copy.copy(self)
        if self.offset is not None:
            located.message = f"{self.message} (at byte {self.offset} of the event body)"
        located.source, located.offset = source, offset
        located.args = (str(located),)
        return located


class TableIdNotFoundError(BinlogError):
    """A rows event names a table id whose TABLE_MAP was not seen: the start position lies inside
    a statement or transaction (Canal's ``TableIdNotFoundException``); a parser rewinds to the
    transaction's begin."""

    def __init__(self, table_id: int, source: str | None = None, offset: int | None = None):
        self.table_id = table_id
        super().__init__(
            f"rows event for table id {table_id} has no TABLE_MAP before it (start inside a transaction?)",
            source,
            offset,
        )
