"""The decoder's one error type: every bad input says what is wrong and where."""

from __future__ import annotations


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
        """
        if self.source is not None:
            return self
        message = self.message
        if self.offset is not None:
            message = f"{message} (at byte {self.offset} of the event body)"
        return BinlogError(message, source, offset)
