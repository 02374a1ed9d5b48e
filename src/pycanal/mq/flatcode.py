"""A flat message's JSON written straight from its entry by code compiled per row layout.

:func:`pycanal.mq.flat.flat_message` and ``FlatMessage.to_json`` are the model: a dict per row,
one per image, the message's dicts, then the encoder. On ``bench/mq.py``'s sysbench backlog those
two took 9 us of the MQ worker's CPU a message (5.2 + 4.0, measured in the server), and the worker
shares its process's GIL with the parser thread, which made that process the flat server's limit.
:class:`FlatEncoder` writes the same bytes as one text: per layout of a RowChange's rows (the
operation, each image's column names, the data image's ``mysqlType`` and ``isKey``) it compiles
straight-line Python that reads each column's ``isNull`` and ``value`` (and ``updated`` for an
UPDATE's ``old``) and joins literal pieces around them; ``mysqlType`` and ``pkNames`` are literals
of the layout, ``sqlType`` is read from the last row (Canal's map keeps each name's last value).

As ``EntryRows`` (``pycanal.spark.entry_rows``), the compiled code checks the layout on the first
row and only the column count of later rows: every row of a RowChange carries the event's columns
in table order, named and typed by the event's table metadata. Strings are escaped by the stdlib's
encoder, which writes fastjson2's bytes as orjson does (``tests/test_mq_flat.py``). Rows whose
layout changes inside a RowChange return None, and the caller builds that message the model's way;
``tests/test_mq_flatcode.py`` compares the two on random entries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from json.encoder import encode_basestring as _jstr  # = json.dumps(str, ensure_ascii=False)
from typing import Any

from pycanal.protocol import EntryProtocol_pb2 as pb

from .flat import event_type, event_type_name

__all__ = ["FlatEncoder"]

_ROWS = {pb.INSERT: "INSERT", pb.UPDATE: "UPDATE", pb.DELETE: "DELETE"}
# (name, mysqlType, isKey) of each column of the data image; the before image's names (UPDATE)
_Layout = tuple[tuple[str, str, bool], ...]
# rows(rowDatas, mid, sql, tail) -> the message's text, or None where the layout is not its own
_Rows = Callable[[Sequence[Any], str, str, str], "str | None"]


class FlatEncoder:
    """``flat_message(entry, change, batch_id, ts).to_json()``, faster. Its caches are bounded and
    may be shared by threads (a race only compiles a layout twice)."""

    def __init__(self) -> None:
        self._code: dict[tuple[int, _Layout, tuple[str, ...]], _Rows] = {}
        self._last: dict[tuple[int, str, str], _Rows] = {}

    def encode(self, entry: pb.Entry, change: pb.RowChange, batch_id: int, ts: int) -> bytes | None:
        """The message's bytes, or None where the model's way must build it."""
        h = entry.header
        event = event_type(change)
        tail = ',"table":' + _jstr(h.tableName) + ',"ts":' + str(ts)
        mid = (
            ',"database":' + _jstr(h.schemaName) + ',"es":' + str(h.executeTime) + ',"gtid":'
            + _jstr(h.gtid) + ',"id":' + str(batch_id)
        )  # fmt: skip
        sql = _jstr(change.sql)
        datas = change.rowDatas
        if change.isDdl or event not in _ROWS or not datas:
            text = (
                '{"data":null' + mid + ',"isDdl":' + ("true" if change.isDdl else "false")
                + ',"mysqlType":null,"old":null,"pkNames":null,"sql":' + sql + ',"sqlType":null'
                + tail + ',"type":"' + event_type_name(event) + '"}'
            )  # fmt: skip
        else:
            last = (event, h.schemaName, h.tableName)
            rows = self._last.get(last)
            text = None if rows is None else rows(datas, mid, sql, tail)
            if text is None:
                rows = self._rows(event, datas[0])
                if len(self._last) >= 256:
                    self._last.clear()
                self._last[last] = rows
                text = rows(datas, mid, sql, tail)
                if text is None:
                    return None  # a later row laid out otherwise
        return text.encode("utf-8")  # protobuf strings are valid UTF-8: no lone surrogate here

    def _rows(self, event: int, rd: Any) -> _Rows:
        data = rd.beforeColumns if event == pb.DELETE else rd.afterColumns
        key = (
            event,
            tuple((c.name, c.mysqlType, c.isKey) for c in data),
            tuple(c.name for c in rd.beforeColumns) if event == pb.UPDATE else (),
        )
        rows = self._code.get(key)
        if rows is None:
            if len(self._code) >= 256:
                self._code.clear()
            rows = self._code[key] = _compile(*key)
        return rows


def _literal(names: Sequence[str], values: Sequence[str]) -> str:
    """A JSON object's text from names and value texts."""
    return "{" + ",".join(_jstr(n) + ":" + v for n, v in zip(names, values, strict=True)) + "}"


def _compile(event: int, layout: _Layout, before: tuple[str, ...]) -> _Rows:
    """The code of one layout: see the module's docstring."""
    update, delete = event == pb.UPDATE, event == pb.DELETE
    field = "beforeColumns" if delete else "afterColumns"
    n = len(layout)
    names = [name for name, _, _ in layout]
    ns: dict[str, Any] = {"join": "".join, "jstr": _jstr}
    body = [f"cs = rd.{field}", f"if len(cs) != {n}:", "    return None"]
    if n:
        body.append(f"{', '.join(f'c{i}' for i in range(n))}, = cs")
        same = " and ".join(
            f"c{i}.name == {name!r} and c{i}.mysqlType == {mysql_type!r} and {'' if key else 'not '}c{i}.isKey"
            for i, (name, mysql_type, key) in enumerate(layout)
        )
        body += [f"if first and not ({same}):", "    return None"]
        items: list[str] = []
        for i, name in enumerate(names):
            items += [
                repr(("{" if i == 0 else ",") + _jstr(name) + ":"),
                f"'null' if c{i}.isNull else jstr(c{i}.value)",
            ]
        body.append(f"add(join(({', '.join(items)}, '}}')))")
    if update:
        body += ["bs = rd.beforeColumns", f"if len(bs) != {len(before)}:", "    return None"]
        if before:
            body.append(f"{', '.join(f'b{j}' for j in range(len(before)))}, = bs")
            checks = " and ".join(f"b{j}.name == {name!r}" for j, name in enumerate(before))
            body += [f"if first and not ({checks}):", "    return None"]
        body += [f"u{i} = u{i} or c{i}.updated" for i in range(n)]
        body.append("o = []")
        for j, name in enumerate(before):
            if name in names:  # only the data image's names are ever flagged updated
                value = f"'null' if b{j}.isNull else jstr(b{j}.value)"
                body += [f"if u{names.index(name)}:", f"    o.append({_jstr(name) + ':'!r} + ({value}))"]
        body.append("old_('{' + ','.join(o) + '}')")
    # The literal runs between the variable parts, named for the key each one ends on or holds.
    ns["MT"] = ',"isDdl":false,"mysqlType":' + (
        _literal(names, [_jstr(t) for _, t, _ in layout]) if n else "null"
    )
    keys = [name for name, _, key in layout if key]
    ns["PK"] = ',"pkNames":' + ("[" + ",".join(_jstr(k) for k in keys) + "]" if keys else "null") + ',"sql":'
    ns["TYPE"] = ',"type":"' + _ROWS[event] + '"}'
    ns.update(DATA='{"data":', OLD=',"old":', SQLTYPE=',"sqlType":')
    old = "'[' + ','.join(old) + ']'" if update else "'null'"
    types = "'null'"
    if n:  # the last row's, by name in the layout's order
        pieces = [
            f"{('{' if i == 0 else ',') + _jstr(name) + ':'!r}, str(t{i}.sqlType)"
            for i, name in enumerate(names)
        ]
        types = f"join(({', '.join(pieces)}, '}}'))"
    lines = [
        "def rows(datas, mid, sql, tail):",
        "    out = []",
        "    add = out.append",
        *(["    old = []", "    old_ = old.append"] if update else []),
        *([f"    u{i} = False" for i in range(n)] if update else []),
        "    first = True",
        "    for rd in datas:",
        *("        " + line for line in body),
        "        first = False",
        *([f"    {', '.join(f't{i}' for i in range(n))}, = rd.{field}"] if n else []),
        f"    return join((DATA, '[' + ','.join(out) + ']' if out else 'null', mid, MT, OLD, {old}, PK, sql,",
        f"                 SQLTYPE, {types}, tail, TYPE))",
    ]
    exec(compile("\n".join(lines) + "\n", f"<flat {_ROWS[event]} {n} cols>", "exec"), ns)
    return ns["rows"]
