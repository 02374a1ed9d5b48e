"""``EntryRows``: change rows from Canal ``Entry`` messages or their bytes (``format("canal")``).

Canal ships values as text, which is read back through each column's ``mysqlType`` and
``sqlType``: binary types arrive as ISO-8859-1 text; ENUM as an index, SET as a bit mask, or
either as labels; TIMESTAMP in the server's zone. Reading the protobuf ``Column`` messages costs
most: per layout of a RowChange's rows (op and each image's column names, ``mysqlType`` and
``isKey``: the compiled code checks them on its first row, later rows only their column count,
see ``EntryRows._reader``) it compiles straight-line Python that reads each column's ``isNull`` and
``value`` (and ``sqlType`` where the converter needs it) and joins the JSON texts once per row,
the primary key picked at compile time.
"""

from __future__ import annotations

import base64
import calendar
import json
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from functools import lru_cache
from json.encoder import encode_basestring as _jstr  # = json.dumps(str, ensure_ascii=False)
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from pycanal.mq.split import row_prop
from pycanal.parse.ddl import is_ddl
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta.types import parse_labels
from pycanal.protocol import EntryProtocol_pb2 as pb

from .rows import Builder, RowsError, RowSource, Run

__all__ = ["EntryRows", "entry_row_count", "header_gtid"]


# java.sql.Types of values Canal ships as ISO-8859-1 text of the bytes.
_BINARY_SQL_TYPES = frozenset({-2, -3, -4, 2004})
_SQL_INTEGER, _SQL_BIT = 4, -7
_INT_NAMES = frozenset(
    {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bit", "bool", "boolean"}
)
_TEXT_TEMPORAL = frozenset({"date", "datetime", "time"})
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "binary", "varbinary",
                         "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point", "linestring",
                         "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection",
                         "vector", "inet4", "inet6", "uuid"})  # fmt: skip


_Text = Callable[[str], str]  # value text -> canonical JSON


class _Conv(NamedTuple):
    """A column's value converter, and the ones for sqlTypes whose text means something else
    (bytes in ISO-8859-1, an ENUM index, a SET bitmask): ``by_sql_type.get(sqlType, fn)``."""

    fn: _Text
    by_sql_type: dict[int, _Text] | None = None


def _base64(text: str) -> str:
    return '{"base64": "' + base64.b64encode(text.encode("latin-1")).decode("ascii") + '"}'


_TEXT_OR_BYTES = _Conv(_jstr, dict.fromkeys(_BINARY_SQL_TYPES, _base64))


def _enum_conv(labels: list[str] | None) -> _Conv:
    names = None if labels is None else ("", *labels)

    def by_index(text: str) -> str:
        index = int(text)
        if names is None:
            return str(index)
        return _jstr(names[index])

    return _Conv(_jstr, {_SQL_INTEGER: by_index})


def _set_conv(labels: list[str] | None) -> _Conv:
    def by_mask(text: str) -> str:
        mask = int(text)
        if labels is None:
            return str(mask)
        if mask >> len(labels):
            raise ValueError(f"SET value {mask} has bits beyond its {len(labels)} labels")
        return json.dumps([m for bit, m in enumerate(labels) if mask >> bit & 1], ensure_ascii=False)

    def by_labels(text: str) -> str:
        return json.dumps(text.split(",") if text else [], ensure_ascii=False)

    return _Conv(by_labels, {_SQL_BIT: by_mask})


def _timestamp_conv(zone: tzinfo | None) -> _Conv:
    if zone is None:
        return _Conv(_jstr)

    @lru_cache(maxsize=4096)
    def to_utc(local: str) -> str:
        if local.startswith("0000-00-00"):
            return local
        naive = datetime.strptime(local, "%Y-%m-%d %H:%M:%S")
        t = calendar.timegm(naive.replace(tzinfo=zone).utctimetuple())
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")

    return _Conv(lambda text: _jstr(to_utc(text[:19]) + text[19:]))


# Decimal(text) formats back to exactly this text (no exponent, sign, leading zero or other
# digits to normalise); Canal's and pycanal's DECIMAL texts (BigDecimal.toPlainString) are so.
_PLAIN_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?").fullmatch


def _decimal(text: str) -> str:
    if _PLAIN_DECIMAL(text):
        return '"' + text + '"'
    return f'"{Decimal(text):f}"'


def _int(text: str) -> str:
    if text.isascii() and text.isdigit() and (text[0] != "0" or len(text) == 1):
        return text  # already what str(int(text)) gives
    return str(int(text))


def _column_conv(mysql_type: str, zone: tzinfo | None) -> _Conv:
    """The converter of one Canal ``mysqlType`` (``int(11) unsigned``, ``enum('a','b')``, ...)."""
    low = mysql_type.strip().lower()
    base = low.split("(", 1)[0].split(None, 1)[0] if low else ""
    if base in _INT_NAMES or base == "year":
        return _Conv(_int)
    if base in ("decimal", "numeric", "dec", "fixed"):
        return _Conv(_decimal)
    if base in ("float", "double", "real"):
        return _Conv(lambda text: repr(float(text)))
    if base in _TEXT_TEMPORAL:
        return _Conv(_jstr)
    if base == "timestamp":
        return _timestamp_conv(zone)
    if base == "enum":
        return _enum_conv(parse_labels(mysql_type) if "(" in low else None)
    if base == "set":
        return _set_conv(parse_labels(mysql_type) if "(" in low else None)
    if base == "json":
        return _Conv(str)
    if base in _TEXT_TYPES:
        return _TEXT_OR_BYTES
    raise ValueError(f"unknown mysqlType {mysql_type!r}")


def _zone(timezone: str | tzinfo | None) -> tzinfo | None:
    if timezone is None or (isinstance(timezone, str) and timezone.upper() in ("UTC", "Z", "+00:00")):
        return None
    return ZoneInfo(timezone) if isinstance(timezone, str) else timezone


# Errors a value conversion raises: reported as RowsError with the column and the position.
_VALUE_ERRORS = (ValueError, IndexError, UnicodeEncodeError)
_ROW_OPS = {pb.INSERT: "INSERT", pb.UPDATE: "UPDATE", pb.DELETE: "DELETE"}
# (name, mysqlType, isKey) of each column of one row image
_Layout = tuple[tuple[str, str, bool], ...]
# read(rowDatas, pks, befores, afters): appends the JSON texts of each row while its images have
# the layout the code was compiled for; returns at the first row that has another column count.
_Reader = Callable[[Iterable[Any], list, list, list], None]


def _layout(columns: Iterable[Any]) -> _Layout:
    return tuple((c.name, c.mysqlType, c.isKey) for c in columns)


def _joined(parts: list[tuple[str, str]]) -> str:
    """Code joining '{', each (literal, variable) pair, ',' between pairs, and '}'."""
    if not parts:
        return repr("{}")
    items = []
    for i, (literal, var) in enumerate(parts):
        items += [repr(("{" if i == 0 else ",") + literal), var]
    return f"join(({', '.join(items)}, '}}'))"


def header_gtid(header: pb.Header, gtid: str | None) -> str | None:
    """The GTID a ROWDATA entry's header names (``curtGtid``: a row's transaction), else ``gtid``."""
    for prop in header.props:
        if prop.key == "curtGtid":
            gtid = prop.value or None
    return gtid


def entry_row_count(entry: pb.Entry, accepts: TableFilter | None) -> int:
    """How many row indexes ``EntryRows`` gives ``entry`` at its position (rows of a table the
    filter takes): what a stream cut inside a position passes on as ``resume``."""
    if entry.entryType != pb.ROWDATA:
        return 0
    change = pb.RowChange.FromString(entry.storeValue)
    h = entry.header
    if change.eventType not in _ROW_OPS or (
        accepts is not None and not accepts.accepts(h.schemaName, h.tableName)
    ):
        return 0
    return len(change.rowDatas)


class EntryRows(RowSource["pb.Entry | bytes"]):
    """Change rows from Canal ``Entry`` messages (objects or serialized bytes), in stream order.

    ``timezone`` is the server's TIMESTAMP rendering zone (pycanal's ``timezone``, the JVM zone of
    a Java Canal server) so TIMESTAMP values are brought back to UTC. ``gtid`` and ``resume``
    continue a previous instance's state (a stream batch that starts inside a transaction or a
    TRANSACTION_PAYLOAD event): take them from ``.gtid`` and ``.resume`` of that instance.
    """

    def __init__(
        self,
        *,
        accepts: TableFilter | None = None,
        timezone: str | tzinfo | None = "UTC",
        gtid: str | None = None,
        resume: tuple[str, int, int] | None = None,
    ) -> None:
        self._b = Builder(accepts, gtid, resume)
        self._zone = _zone(timezone)
        self._convs: dict[str, _Conv] = {}
        self._readers: dict[tuple[str, _Layout, _Layout], _Reader] = {}
        self._last: dict[tuple[str, str, str], _Reader] = {}

    @property
    def gtid(self) -> str | None:
        return self._b.gtid

    @property
    def resume(self) -> tuple[str, int, int]:
        return self._b.resume

    def _runs(self, entries: Iterable[pb.Entry | bytes]) -> Iterator[Run]:
        b = self._b
        for entry in entries:
            if isinstance(entry, bytes | bytearray | memoryview):
                entry = pb.Entry.FromString(entry)
            kind = entry.entryType
            if kind == pb.GTIDLOG:
                b.gtid = pb.Pair.FromString(entry.storeValue).value or None
            elif kind == pb.TRANSACTIONEND:
                b.gtid = None
            elif kind == pb.ROWDATA:
                h = entry.header
                props = len(h.props)
                if props:
                    b.gtid = header_gtid(h, b.gtid)
                change = pb.RowChange.FromString(entry.storeValue)
                op = _ROW_OPS.get(change.eventType)
                if op is not None:
                    run = self._run(h, op, change.rowDatas, props)
                    if run is not None:
                        yield run
                elif is_ddl(change.sql):
                    session = change.ddlSchemaName or None
                    b.start_at(h.logfileName, h.logfileOffset)  # a DDL is an event of its own
                    yield from b.ddl_runs(change.sql, session, 0, h.logfileName, h.logfileOffset,
                                          h.executeTime // 1000)  # fmt: skip
                    b.gtid = None

    def _run(self, h: pb.Header, op: str, datas: Any, props: int) -> Run | None:
        b = self._b
        schema, table = h.schemaName, h.tableName
        if not datas or not b.wanted(schema, table):
            return None
        pks: list[str | None] = []
        befores: list[str | None] = []
        afters: list[str | None] = []
        # The reader the table's last RowChange took: it checks its layout on the first row.
        last = (op, schema, table)
        read = self._last.get(last)
        try:
            while len(pks) < len(datas):
                done = len(pks)
                rows = datas[done:] if done else datas
                if read is not None:
                    read(rows, pks, befores, afters)
                    if len(pks) > done:
                        continue
                read = self._reader(op, datas[done])
                if len(self._last) >= 256:
                    self._last.clear()
                self._last[last] = read
                read(rows, pks, befores, afters)
        except _VALUE_ERRORS:
            self._check(op, datas[len(pks)], f"{schema}.{table} at {h.logfileName}:{h.logfileOffset}")
            raise
        file, offset = h.logfileName, h.logfileOffset
        first = row_prop(h) if props else None
        return Run(op, schema, table, pks, befores, afters, file, offset, b.take(file, offset, len(pks), first),
                   b.gtid, h.executeTime // 1000, None, None)  # fmt: skip

    def _conv(self, mysql_type: str) -> _Conv:
        conv = self._convs.get(mysql_type)
        if conv is None:
            conv = self._convs[mysql_type] = _column_conv(mysql_type, self._zone)
        return conv

    def value_text(self, mysql_type: str, sql_type: int | None, text: str | None) -> str:
        """One Canal value (its text, None for NULL) as canonical JSON, read through the column's
        ``mysqlType`` and ``sqlType`` as the compiled readers read it: for the values of Canal's
        flat messages, which carry the same texts and types by column name."""
        if text is None:
            return "null"
        conv = self._conv(mysql_type)
        return (conv.by_sql_type or {}).get(sql_type, conv.fn)(text)  # type: ignore[arg-type]

    def _check(self, op: str, rd: Any, where: str) -> None:
        """Convert one row column by column, in the compiled reader's order: raise the first
        failure as RowsError naming the column."""
        images = ([rd.beforeColumns] if op != "INSERT" else []) + (
            [rd.afterColumns] if op != "DELETE" else []
        )
        for columns in images:
            for c in columns:
                if not c.isNull:
                    try:
                        conv = self._conv(c.mysqlType)
                        (conv.by_sql_type or {}).get(c.sqlType, conv.fn)(c.value)
                    except _VALUE_ERRORS as exc:
                        raise RowsError(f"column {c.name!r} ({c.mysqlType}) of {where}: {exc}") from None

    def _reader(self, op: str, rd: Any) -> _Reader:
        """The compiled reader of rows laid out as ``rd`` (cached per layout).

        A reader checks the layout (names, ``mysqlType``, ``isKey``) on the first row it is given
        and only the column count of the rows after it, returning at the first row that differs:
        Canal (``LogEventConvert.parseOneRow``) and pycanal (``convert._image``) give every row of
        a RowChange the columns of the event's column bitmap, in table order, each named and typed
        by the event's table metadata, so within a RowChange names, ``mysqlType`` and ``isKey``
        repeat (``isNull``, ``value`` and ``sqlType`` do not: they are read per row). ``_run``
        tries the reader the table's last RowChange took first, so the layout is read into a key
        only when it changed: on sysbench's rows that key took as long as reading the values.
        """
        key = (
            op,
            _layout(rd.beforeColumns) if op != "INSERT" else (),
            _layout(rd.afterColumns) if op != "DELETE" else (),
        )
        read = self._readers.get(key)
        if read is None:
            if len(self._readers) >= 256:
                self._readers.clear()
            read = self._readers[key] = self._compile(*key)
        return read

    def _compile(self, op: str, before: _Layout, after: _Layout) -> _Reader:
        ns: dict[str, Any] = {"join": "".join}
        body: list[str] = []
        images: dict[str, str] = {}
        keys: dict[str, str] = {}  # '"name":' -> text variable; the before image's first, as in a dict merge
        for tag, field, layout, used in (
            ("b", "beforeColumns", before, op != "INSERT"),
            ("a", "afterColumns", after, op != "DELETE"),
        ):
            if not used:
                images[tag] = "None"
                continue
            body += [f"cs = rd.{field}", f"if len(cs) != {len(layout)}:", "    return"]
            if layout:
                body.append(f"{', '.join(f'{tag}{i}' for i in range(len(layout)))}, = cs")
                same = " and ".join(
                    f"{tag}{i}.name == {name!r} and {tag}{i}.mysqlType == {mysql_type!r} and "
                    f"{'' if is_key else 'not '}{tag}{i}.isKey"
                    for i, (name, mysql_type, is_key) in enumerate(layout)
                )
                body += [f"if first and not ({same}):", "    return"]
            parts = []
            for i, (name, mysql_type, is_key) in enumerate(layout):
                c, f, t = f"{tag}{i}", f"F{tag}{i}", f"t{tag}{i}"
                try:
                    conv = self._conv(mysql_type)
                except _VALUE_ERRORS as exc:
                    conv = _Conv(_raising(exc))
                ns[f] = conv.fn
                value = f"{f}({c}.value)"
                if conv.by_sql_type:
                    ns[f"G{tag}{i}"] = conv.by_sql_type.get
                    value = f"G{tag}{i}({c}.sqlType, {f})({c}.value)"
                body.append(f"{t} = 'null' if {c}.isNull else {value}")
                literal = _jstr(name) + ":"
                parts.append((literal, t))
                if is_key:
                    keys[literal] = t
            images[tag] = _joined(parts)
        pk = _joined(list(keys.items())) if keys else "None"
        lines = [
            "def read(datas, pks, befores, afters):",
            "    pk_, before_, after_ = pks.append, befores.append, afters.append",
            "    first = True",
            "    for rd in datas:",
            *("        " + line for line in body),
            "        first = False",
            f"        pk_({pk})",
            f"        before_({images['b']})",
            f"        after_({images['a']})",
        ]
        exec(
            compile("\n".join(lines) + "\n", f"<entry rows {op} {len(before)}/{len(after)} cols>", "exec"), ns
        )
        return ns["read"]


def _raising(exc: Exception) -> _Text:
    """The converter of a ``mysqlType`` that has none: its values (not NULL) raise the error."""

    def conv(text: str) -> str:
        raise exc.with_traceback(None)

    return conv
