"""A seeded, reproducible random workload over every MariaDB 10.11 column type.

Used by the differential tests (``test_differential_mariadb.py``) and reusable elsewhere
(benchmarks, fuzzing the replication client): the same seed always produces the same SQL.

* :data:`ALL_TYPES` is one table with every column type MariaDB 10.11 has (GEOMETRY holding
  each geometry kind, plus a POINT column; type aliases such as NUMERIC or REAL left out), each with
  a pool of extreme / special values (min/max of every integer width, 65-digit DECIMALs,
  negative and >24h TIMEs at every fractional precision, zero dates, 0x00 bytes, emoji, a
  value over 64 KB, the invalid-ENUM '' value, ...) and a random generator.
* :data:`COMPRESSED` is a second table with MariaDB ``COMPRESSED`` columns.
* :func:`generate` turns a table spec and a seed into :class:`Statement` objects: single and
  multi-row INSERTs (some listing only a few columns), UPDATEs of a few columns (to NULL
  too), primary-key changes (single rows and whole ranges), DELETEs, explicit transactions,
  a rolled-back transaction, and finally one row per pool entry so that every extreme value
  is in the final table state (inserted, then updated to it).
* :func:`run` executes the statements on a PyMySQL connection, switching the session
  ``sql_mode`` to '' only for the statements that need it (zero dates, invalid ENUM value).

Every column except the primary key ``id`` (INT, the first column) is nullable with no explicit
default, i.e. DEFAULT NULL: an INSERT that omits a column stores NULL there, which is what
a replay of a MINIMAL row image must assume for the columns an INSERT does not log.

The workload does not keep an expected table state: the source of truth is ``SELECT``.
"""

from __future__ import annotations

import json
import random
import string
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pymysql.converters import escape_string

__all__ = [
    "ALL_TYPES",
    "COMPRESSED",
    "Column",
    "Expr",
    "Lax",
    "Statement",
    "TableSpec",
    "generate",
    "render",
    "run",
]


# --------------------------------------------------------------------------- SQL values
@dataclass(frozen=True)
class Expr:
    """A value given as an SQL expression (``REPEAT(...)``, ``ST_GeomFromText(...)``)."""

    sql: str


@dataclass(frozen=True)
class Lax:
    """A value the server accepts only without strict mode / NO_ZERO_DATE (sql_mode='')."""

    value: Any


def render(v: Any) -> str:
    """One value as an SQL literal (the connection charset is utf8mb4)."""
    if isinstance(v, Lax):
        return render(v.value)
    if v is None:
        return "NULL"
    if isinstance(v, Expr):
        return v.sql
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, bytes):
        return f"X'{v.hex()}'"
    if isinstance(v, str):
        return "'" + escape_string(v) + "'"
    raise TypeError(f"cannot render {v!r}")


def is_lax(v: Any) -> bool:
    return isinstance(v, Lax)


# --------------------------------------------------------------------------- columns
@dataclass(frozen=True)
class Column:
    """One column: name, SQL type, a kind for converters, its special values and a generator.

    ``kind`` is one of: int, decimal, float, double, bit, year, date, time, datetime, timestamp,
    char, varchar, text, binary, varbinary, blob, enum, set, json, geometry, inet6, uuid.
    ``charset`` is the server charset of character columns ('binary' for binary ones).
    ``fsp`` is the fractional-seconds precision of temporal columns, ``labels`` the ENUM/SET
    members, ``bits`` the width of BIT and integer columns, ``unsigned`` their signedness.
    """

    name: str
    sql: str
    kind: str
    pool: tuple[Any, ...]
    rand: Callable[[random.Random], Any]
    charset: str | None = None
    fsp: int = 0
    labels: tuple[str, ...] = ()
    bits: int = 0
    unsigned: bool = False
    precision: int = 0
    scale: int = 0
    compressed: bool = False


@dataclass(frozen=True)
class TableSpec:
    name: str
    columns: tuple[Column, ...]
    options: str = "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"

    @property
    def value_columns(self) -> tuple[Column, ...]:
        return self.columns

    def create_sql(self, schema: str) -> str:
        cols = ",\n  ".join(f"`{c.name}` {c.sql}" for c in self.columns)
        return f"CREATE TABLE `{schema}`.`{self.name}` (\n  `id` INT NOT NULL PRIMARY KEY,\n  {cols}\n) {self.options}"

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


# --------------------------------------------------------------------------- generators
def _int_column(name: str, sql: str, bits: int, unsigned: bool) -> Column:
    lo, hi = (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    pool = tuple(dict.fromkeys((lo, hi, 0, 1, hi - 1, lo + 1, -1 if not unsigned else hi // 2)))

    def rand(r: random.Random) -> int:
        if r.random() < 0.3:  # small values are the common case in real data
            return r.randint(max(lo, -1000), min(hi, 1000))
        return r.randint(lo, hi)

    return Column(name, sql, "int", pool, rand, bits=bits, unsigned=unsigned)


def _decimal_column(name: str, precision: int, scale: int, unsigned: bool = False) -> Column:
    intg = precision - scale
    max_int = "9" * intg or "0"
    max_frac = "9" * scale
    top = Decimal(f"{max_int}.{max_frac}") if scale else Decimal(max_int)
    tiny = Decimal(f"0.{'0' * (scale - 1)}1") if scale else Decimal(1)
    zero = Decimal(f"0.{'0' * scale}") if scale else Decimal(0)
    pool = [top, zero, tiny]
    if not unsigned:
        pool += [top.copy_negate(), tiny.copy_negate()]  # unary minus would round to 28 digits
    if intg >= 10 and not unsigned:
        # digits straddling the 9-digit groups of the binary format
        pool.append(Decimal(f"1{'0' * 9}.{'0' * scale}") if scale else Decimal(10**9))
        pool.append(Decimal(f"-{'9' * 9}.{'9' * scale}") if scale else Decimal(-(10**9 - 1)))
    if intg >= 1 and scale and not unsigned:
        pool.append(Decimal(f"-1.{'0' * (scale - 1)}1"))

    def rand(r: random.Random) -> Decimal:
        ni = r.randint(0, intg)
        ip = "".join(r.choice(string.digits) for _ in range(ni)) or "0"
        fp = "".join(r.choice(string.digits) for _ in range(scale))
        sign = "" if unsigned or r.random() < 0.5 else "-"
        return Decimal(f"{sign}{ip}.{fp}") if scale else Decimal(f"{sign}{ip}")

    return Column(
        name,
        f"DECIMAL({precision},{scale}){' UNSIGNED' if unsigned else ''}",
        "decimal",
        tuple(dict.fromkeys(pool)),
        rand,
        unsigned=unsigned,
        precision=precision,
        scale=scale,
    )


def _rand_float(r: random.Random) -> float:
    k = r.random()
    if k < 0.3:
        return round(r.uniform(-1000, 1000), r.randint(0, 6))
    if k < 0.6:
        return r.choice((-1, 1)) * 10 ** r.uniform(-44, 38.5)
    return r.uniform(-1e7, 1e7)


def _rand_double(r: random.Random) -> float:
    k = r.random()
    if k < 0.3:
        return round(r.uniform(-1e6, 1e6), r.randint(0, 10))
    if k < 0.6:
        return r.choice((-1, 1)) * 10 ** r.uniform(-320, 308)
    # any finite bit pattern
    import struct

    while True:
        d = struct.unpack("<d", r.getrandbits(64).to_bytes(8, "little"))[0]
        if d == d and abs(d) != float("inf"):
            return d


def _frac(r: random.Random, fsp: int) -> str:
    return "." + "".join(r.choice(string.digits) for _ in range(fsp)) if fsp else ""


def _time_column(fsp: int) -> Column:
    f9 = "." + "9" * fsp if fsp else ""
    f0 = "." + "0" * fsp if fsp else ""
    f1 = "." + "0" * (fsp - 1) + "1" if fsp else ""
    f5 = "." + "5" + "0" * (fsp - 1) if fsp else ""
    pool = (
        f"-838:59:59{f0}",
        f"838:59:59{f0}",
        f"-838:59:58{f9}" if fsp else "-838:59:58",
        f"838:59:58{f9}" if fsp else "838:59:58",
        f"00:00:00{f0}",
        f"-00:00:00{f1}" if fsp else "-00:00:01",
        f"-00:00:00{f5}" if fsp else "-00:00:59",
        f"-00:00:01{f9}" if fsp else "-00:01:00",
        f"-01:00:00{f1}" if fsp else "-01:00:00",
        f"-12:34:56{f5}" if fsp else "-12:34:56",
        f"100:00:00{f1}" if fsp else "100:00:00",
        f"23:59:59{f9}" if fsp else "23:59:59",
        f"24:00:00{f0}",
        f"-24:00:00{f1}" if fsp else "-24:00:00",
    )

    def rand(r: random.Random) -> str:
        sign = "-" if r.random() < 0.4 else ""
        h = r.randint(0, 837) if r.random() < 0.5 else r.randint(0, 23)
        return f"{sign}{h:02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}{_frac(r, fsp)}"

    sql = f"TIME({fsp})" if fsp else "TIME"
    return Column(f"tm{fsp}", sql, "time", tuple(dict.fromkeys(pool)), rand, fsp=fsp)


def _rand_date(r: random.Random) -> str:
    y = r.choice((r.randint(1000, 9999), r.randint(1900, 2100)))
    m = r.randint(1, 12)
    d = r.randint(1, 28 if m == 2 and (y % 4 or (y % 100 == 0 and y % 400)) else 29 if m == 2 else 30)
    return f"{y:04d}-{m:02d}-{d:02d}"


def _datetime_column(fsp: int) -> Column:
    f9 = "." + "9" * fsp if fsp else ""
    f0 = "." + "0" * fsp if fsp else ""
    f1 = "." + "0" * (fsp - 1) + "1" if fsp else ""
    pool = (
        f"1000-01-01 00:00:00{f0}",
        f"9999-12-31 23:59:59{f9}",
        f"0001-01-01 00:00:00{f1}",
        f"2024-02-29 12:00:00{f1}",
        Lax(f"0000-00-00 00:00:00{f0}"),
        Lax(f"2021-00-00 10:11:12{f9}"),  # zero-in-date
        Lax(f"2021-06-00 00:00:00{f1}"),
        f"1970-01-01 00:00:00{f0}",
    )

    def rand(r: random.Random) -> str:
        return f"{_rand_date(r)} {r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}{_frac(r, fsp)}"

    sql = f"DATETIME({fsp})" if fsp else "DATETIME"
    return Column(f"dtm{fsp}", sql, "datetime", pool, rand, fsp=fsp)


def _timestamp_column(fsp: int) -> Column:
    import time as _time

    f9 = "." + "9" * fsp if fsp else ""
    f0 = "." + "0" * fsp if fsp else ""
    f1 = "." + "0" * (fsp - 1) + "1" if fsp else ""
    pool = (
        f"1970-01-01 00:00:01{f0}",
        f"2038-01-19 03:14:07{f9}",
        Lax(f"0000-00-00 00:00:00{f0}"),
        f"2000-02-29 23:59:59{f1}",
        f"1999-12-31 23:59:59{f9}",
    )

    def rand(r: random.Random) -> str:
        t = _time.gmtime(r.randint(1, 2**31 - 1))
        return _time.strftime("%Y-%m-%d %H:%M:%S", t) + _frac(r, fsp)

    sql = f"TIMESTAMP({fsp})" if fsp else "TIMESTAMP"
    return Column(f"ts{fsp}", f"{sql} NULL DEFAULT NULL", "timestamp", pool, rand, fsp=fsp)


# Characters per charset: quotes, backslash, NUL, control characters and non-ASCII letters.
_ASCII = string.ascii_letters + string.digits + " '\"\\%_\n\t\r\x00\x1a\x7f,;"
_CHARS = {
    "utf8mb4": _ASCII + "éü€ß漢字中文한국어😀🎉🙈𝄞\u200b\ufeffàç",
    "utf8mb3": _ASCII + "éü€ß漢字中文한국어àç\u200b",
    "latin1": _ASCII + "éü€ßàçÿ\x81\x8d\x8f\x90\x9d¤©®",
    "utf16": _ASCII + "éü€漢字😀🎉𝄞",
    "ucs2": _ASCII + "éü€漢字",
    "gbk": _ASCII + "中文测试汉字简体",
    "sjis": string.ascii_letters + string.digits + " ,日本語テキストかなカナ",
    "cp1251": _ASCII + "Привет мир",
}


def _rand_text(r: random.Random, charset: str, max_chars: int) -> str:
    n = r.choice((0, 1, r.randint(0, max_chars), max_chars, r.randint(0, min(max_chars, 12))))
    n = min(n, max_chars)
    return "".join(r.choice(_CHARS[charset]) for _ in range(n))


def _text_pool(charset: str, max_chars: int) -> tuple[Any, ...]:
    chars = _CHARS[charset]
    non_ascii = "".join(ch for ch in chars if ord(ch) > 127)
    pool = ["", " ", "a ", "\x00", "'\\", non_ascii[:max_chars], (non_ascii * max_chars)[:max_chars]]
    if charset != "sjis":
        pool.append(("x\x00y\n" * max_chars)[:max_chars])
    return tuple(dict.fromkeys(pool))


def _string_column(name: str, base: str, length: int, charset: str, kind: str) -> Column:
    sql = f"{base}({length}) CHARACTER SET {charset}"
    pool = _text_pool(charset, length)
    if kind == "char":
        # CHAR drops trailing spaces: keep values whose padding is visible only in the middle.
        pool = tuple(v for v in pool if v != " ")

    def rand(r: random.Random) -> str:
        return _rand_text(r, charset, length)

    return Column(name, sql, kind, pool, rand, charset=charset)


def _bytes(r: random.Random, n: int) -> bytes:
    return bytes(r.choice((0, 0, 1, 0x20, 0x27, 0x5C, 0x7F, 0x80, 0xFF, r.randint(0, 255))) for _ in range(n))


def _binary_column(name: str, sql: str, kind: str, max_len: int, pool: Sequence[Any]) -> Column:
    def rand(r: random.Random) -> bytes:
        return _bytes(r, r.choice((0, 1, max_len, r.randint(0, max_len))))

    return Column(name, sql, kind, tuple(pool), rand, charset="binary")


def _text_column(name: str, sql: str, charset: str, max_bytes: int, big: Expr | None) -> Column:
    per_char = {"utf8mb4": 4, "latin1": 1}[charset]
    pool: list[Any] = list(_text_pool(charset, 40))
    pool.append(("é" if charset == "latin1" else "😀") * (max_bytes // per_char))  # full length
    if big is not None:
        pool.append(big)

    def rand(r: random.Random) -> str:
        return _rand_text(r, charset, min(max_bytes // per_char, 300))

    return Column(name, f"{sql} CHARACTER SET {charset}", "text", tuple(pool), rand, charset=charset)


def _blob_column(name: str, sql: str, max_bytes: int, big: Expr | None) -> Column:
    pool: list[Any] = [b"", b"\x00", b"\x00\x00\x00", b"\xff" * 3 + b"\x00", bytes(range(256))[:max_bytes]]
    pool.append(bytes([0, 0xFF, 0x5C, 0x27]) * (max_bytes // 4))
    if big is not None:
        pool.append(big)

    def rand(r: random.Random) -> bytes:
        return _bytes(r, r.choice((0, 1, r.randint(0, min(max_bytes, 400)))))

    return Column(name, sql, "blob", tuple(pool), rand, charset="binary")


def _enum_column(name: str, labels: Sequence[str], charset: str) -> Column:
    quoted = ",".join("'" + escape_string(label) + "'" for label in labels)
    pool = (labels[0], labels[-1], Lax(""), *labels[1:4])  # '' = the invalid-value index 0

    def rand(r: random.Random) -> Any:
        return r.choice(labels)

    return Column(
        name,
        f"ENUM({quoted}) CHARACTER SET {charset}",
        "enum",
        tuple(dict.fromkeys(pool)),
        rand,
        charset=charset,
        labels=tuple(labels),
    )


def _set_column(name: str, labels: Sequence[str], charset: str) -> Column:
    quoted = ",".join("'" + escape_string(label) + "'" for label in labels)
    pool = ("", ",".join(labels), labels[0], labels[-1], f"{labels[-1]},{labels[0]}")

    def rand(r: random.Random) -> str:
        chosen = [label for label in labels if r.random() < 0.3]
        r.shuffle(chosen)  # the server sorts members into definition order
        return ",".join(chosen)

    return Column(
        name,
        f"SET({quoted}) CHARACTER SET {charset}",
        "set",
        tuple(dict.fromkeys(pool)),
        rand,
        charset=charset,
        labels=tuple(labels),
    )


def _bit_column(bits: int) -> Column:
    top = (1 << bits) - 1
    pool = tuple(dict.fromkeys((0, top, 1, 1 << (bits - 1), top ^ 1)))
    return Column(f"b{bits}", f"BIT({bits})", "bit", pool, lambda r: r.randint(0, top), bits=bits)


def _rand_json(r: random.Random, depth: int = 0) -> Any:
    k = r.random()
    if depth > 2 or k < 0.4:
        return r.choice(
            (
                None,
                True,
                False,
                r.randint(-(2**63), 2**64 - 1),
                r.random() * 1e10,
                '😀"é\\\n',
                "",
                r.randint(-5, 5),
            )
        )
    if k < 0.7:
        return [_rand_json(r, depth + 1) for _ in range(r.randint(0, 4))]
    return {f"k{i}{'é' if i % 2 else ''}": _rand_json(r, depth + 1) for i in range(r.randint(0, 4))}


def _json_column() -> Column:
    pool = (
        "{}",
        "[]",
        "null",
        '"text with \\" and \\\\ and 😀"',
        '{"a": [1, 2.5, -3e-7, true, false, null], "b": {"c": "é€"}}',
        "18446744073709551615",
        "  [ 1 , 2 ]  ",  # MariaDB keeps the text as written
        Expr("CONCAT('[\"', REPEAT('x', 70000), '\"]')"),
    )
    return Column(
        "js", "JSON", "json", pool, lambda r: json.dumps(_rand_json(r), ensure_ascii=r.random() < 0.3)
    )


_WKT = (
    "POINT(1 2)",
    "POINT(-1.5e300 3.25)",
    "LINESTRING(0 0,1 1,2 0.5)",
    "POLYGON((0 0,10 0,10 10,0 10,0 0),(2 2,3 2,3 3,2 2))",
    "MULTIPOINT(1 1,2 2)",
    "MULTILINESTRING((0 0,1 1),(2 2,3 3))",
    "MULTIPOLYGON(((0 0,1 0,1 1,0 0)))",
    "GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))",
)


def _geometry_column() -> Column:
    pool = tuple(
        Expr(f"ST_GeomFromText('{w}', {srid})")
        for w, srid in zip(_WKT, (0, 4326, 0, 3857, 0, 0, 1, 0), strict=True)
    )

    def rand(r: random.Random) -> Expr:
        return Expr(f"ST_GeomFromText('{r.choice(_WKT)}', {r.choice((0, 4326))})")

    return Column("geo", "GEOMETRY", "geometry", pool, rand)


def _point_column() -> Column:
    pool = (
        Expr("POINT(0, 0)"),
        Expr("POINT(-180, 90)"),
        Expr("ST_PointFromText('POINT(1e-300 -0.5)', 4326)"),
    )

    def rand(r: random.Random) -> Expr:
        return Expr(f"POINT({r.uniform(-1e6, 1e6)!r}, {r.uniform(-1e6, 1e6)!r})")

    return Column("pt", "POINT", "geometry", pool, rand)


def _inet6_column() -> Column:
    pool = (
        "::",  # all-zero value
        "::1",
        "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "::ffff:192.0.2.1",
        "::1.2.3.4",
        "2001:db8::ff00:42:8329",
        "fe80::",  # trailing zero bytes
        "1::",
    )

    def rand(r: random.Random) -> str:
        words = [r.choice((0, 0, r.randint(0, 0xFFFF))) for _ in range(8)]
        return ":".join(f"{w:x}" for w in words)

    return Column("ip", "INET6", "inet6", pool, rand, charset="binary")


def _uuid_column() -> Column:
    pool = (
        "00000000-0000-0000-0000-000000000000",
        "ffffffff-ffff-ffff-ffff-ffffffffffff",
        "6ccd780c-baba-1026-9564-5b8c656024db",  # version 1, RFC variant
        "12345678-1234-4234-8234-123456789a00",  # trailing 0x00
        "6CCD780CBABA40269564000000000000",  # no dashes, upper case, trailing zeros
    )

    def rand(r: random.Random) -> str:
        # RFC 4122 variant with any version, or any variant with version 0-7 (MariaDB rejects
        # versions 8-15 of the NCS variant)
        if r.random() < 0.5:
            return str(uuid.UUID(int=r.getrandbits(128), version=r.randint(1, 5)))
        return str(uuid.UUID(int=r.getrandbits(128) & ~(1 << 79)))

    return Column("uu", "UUID", "uuid", pool, rand, charset="binary")


def _build_all_types() -> TableSpec:
    cols: list[Column] = []
    for name, sql, bits in (
        ("ti", "TINYINT", 8),
        ("si", "SMALLINT", 16),
        ("mi", "MEDIUMINT", 24),
        ("i", "INT", 32),
        ("bi", "BIGINT", 64),
    ):
        cols.append(_int_column(name, sql, bits, False))
        cols.append(_int_column(name + "u", sql + " UNSIGNED", bits, True))
    cols.append(Column("bo", "BOOLEAN", "int", (0, 1, -128, 127), lambda r: r.choice((0, 1)), bits=8))
    for p, s, u in (
        (1, 0, False),
        (5, 2, False),
        (10, 0, False),
        (18, 9, False),
        (19, 10, False),
        (20, 5, False),
        (30, 30, False),
        (65, 0, False),
        (65, 30, False),
        (12, 4, True),
    ):
        cols.append(_decimal_column(f"dec{p}_{s}{'u' if u else ''}", p, s, u))
    cols.append(
        Column(
            "fl",
            "FLOAT",
            "float",
            (
                0.0,
                3.4028234663852886e38,
                -3.4028234663852886e38,
                1.0,
                -1.0,
                0.1,
                1 / 3,
                3.402e38,
                -3.402e38,
                1.17549435e-38,
                1.4e-45,
                -1.4e-45,
                16777217.0,
                1e10,
            ),
            _rand_float,
        )
    )
    cols.append(
        Column(
            "db",
            "DOUBLE",
            "double",
            (
                0.0,
                0.1,
                -0.1,
                1.7976931348623157e308,
                -1.7976931348623157e308,
                2.2250738585072014e-308,
                5e-324,
                -5e-324,
                9007199254740993.0,
                1 / 3,
            ),
            _rand_double,
        )
    )
    cols += [_bit_column(1), _bit_column(8), _bit_column(17), _bit_column(64)]
    cols.append(Column("yr", "YEAR", "year", (0, 1901, 2155, 2000, 1970), lambda r: r.randint(1901, 2155)))
    cols.append(
        Column(
            "dt",
            "DATE",
            "date",
            (
                "1000-01-01",
                "9999-12-31",
                "0001-01-01",
                "2024-02-29",
                Lax("0000-00-00"),
                Lax("2021-00-00"),
                Lax("2021-06-00"),
            ),
            _rand_date,
        )
    )
    cols += [_time_column(fsp) for fsp in range(7)]
    cols += [_datetime_column(fsp) for fsp in range(7)]
    cols += [_timestamp_column(fsp) for fsp in range(7)]
    cols += [
        _string_column("c_u8", "CHAR", 10, "utf8mb4", "char"),
        _string_column("c_u8_long", "CHAR", 200, "utf8mb4", "char"),  # > 255 bytes: 2-byte length
        _string_column("vc_u8", "VARCHAR", 63, "utf8mb4", "varchar"),  # 252 bytes: 1-byte length
        _string_column("vc_u8_2", "VARCHAR", 70, "utf8mb4", "varchar"),  # 280 bytes: 2-byte length
        _string_column("vc_u8mb3", "VARCHAR", 30, "utf8mb3", "varchar"),
        _string_column("c_l1", "CHAR", 10, "latin1", "char"),
        _string_column("vc_l1", "VARCHAR", 255, "latin1", "varchar"),
        _string_column("vc_l1_2", "VARCHAR", 300, "latin1", "varchar"),
        _string_column("vc_u16", "VARCHAR", 20, "utf16", "varchar"),
        _string_column("c_ucs2", "CHAR", 10, "ucs2", "char"),
        _string_column("vc_gbk", "VARCHAR", 20, "gbk", "varchar"),
        _string_column("vc_sjis", "VARCHAR", 20, "sjis", "varchar"),
        _string_column("vc_cp1251", "VARCHAR", 20, "cp1251", "varchar"),
        _binary_column(
            "c_bin",
            "CHAR(10) CHARACTER SET binary",
            "binary",
            10,
            (b"", b"abc", b"a\x00b", b"\x00" * 10, b"\xff" * 10),
        ),
        _binary_column(
            "bn",
            "BINARY(4)",
            "binary",
            4,
            (
                b"\x00\x00\x00\x00",
                b"a\x00b\x00",
                b"\x00abc",
                b"ab",
                b"",
                b"\xff\xff\xff\xff",
                b"\x00\x00\x00\x01",
            ),
        ),
        _binary_column(
            "vb",
            "VARBINARY(300)",
            "varbinary",
            300,
            (b"", b"\x00", b"ab\x00\x00", bytes(range(256)), b"\xff" * 300),
        ),
        _binary_column(
            "vc_bin", "VARCHAR(20) CHARACTER SET binary", "varbinary", 20, (b"", b"\x00 ", b"x" * 20)
        ),
        _text_column("tt", "TINYTEXT", "utf8mb4", 255, None),
        _text_column("tx", "TEXT", "utf8mb4", 65535, Expr("REPEAT('a', 65535)")),
        _text_column("mt", "MEDIUMTEXT", "utf8mb4", 300, Expr("REPEAT('漢字😀a\\0', 7000)")),
        _text_column("lt", "LONGTEXT", "utf8mb4", 300, Expr("REPEAT('é😀', 10000)")),
        _text_column("tx_l1", "TEXT", "latin1", 255, Expr("REPEAT('€é\\0', 20000)")),
        _blob_column("tb", "TINYBLOB", 255, None),
        _blob_column("bl", "BLOB", 65535, Expr("REPEAT(X'00FF', 32767)")),
        _blob_column("mb", "MEDIUMBLOB", 300, Expr("REPEAT(X'00FF5C2700', 20000)")),
        _blob_column("lb", "LONGBLOB", 300, Expr("REPEAT(X'0001', 40000)")),  # 80000 bytes > 64 KB
        _enum_column("en", ("a", "b", "é", "😀", "x y", "It's"), "utf8mb4"),
        _enum_column("en_l1", ("x", "é", "€"), "latin1"),
        _enum_column("en_big", tuple(f"v{i}" for i in range(300)), "utf8mb4"),  # 2-byte ENUM
        _set_column("st", ("a", "b", "c", "é", "😀"), "utf8mb4"),
        _set_column("st_l1", ("p", "ü"), "latin1"),
        _set_column("st_9", tuple(f"m{i}" for i in range(9)), "utf8mb4"),  # 2 bytes
        _set_column("st_20", tuple(f"m{i}" for i in range(20)), "utf8mb4"),  # 3 bytes
        _set_column("st_30", tuple(f"m{i}" for i in range(30)), "utf8mb4"),  # 4 bytes
        _set_column("st_64", tuple(f"m{i}" for i in range(64)), "utf8mb4"),  # 8 bytes
        _json_column(),
        _geometry_column(),
        _point_column(),
        _inet6_column(),
        _uuid_column(),
    ]
    return TableSpec("t_all_types", tuple(cols), "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 ROW_FORMAT=DYNAMIC")


def _build_compressed() -> TableSpec:
    def compressible(r: random.Random, charset: str, n: int) -> str:
        return ("".join(r.choice(_CHARS[charset]) for _ in range(4)) * n)[:n]

    cols = [
        Column(
            "vc_c",
            "VARCHAR(1000) COMPRESSED CHARACTER SET utf8mb4",
            "varchar",
            ("", "short", "😀" * 1000, "ab😀" * 300, "x" * 99, "y" * 100, "z" * 101),
            lambda r: compressible(r, "utf8mb4", r.choice((0, 5, 150, 1000))),
            charset="utf8mb4",
            compressed=True,
        ),
        Column(
            "vc_c_l1",
            "VARCHAR(200) COMPRESSED CHARACTER SET latin1",
            "varchar",
            ("", "é€" * 100, "é" * 150),
            lambda r: compressible(r, "latin1", r.choice((0, 5, 150, 200))),
            charset="latin1",
            compressed=True,
        ),
        Column(
            "vb_c",
            "VARBINARY(500) COMPRESSED",
            "varbinary",
            (b"", b"\x00" * 500, bytes(range(256))),
            lambda r: _bytes(r, r.choice((0, 7, 500))),
            charset="binary",
            compressed=True,
        ),
        Column(
            "bl_c",
            "BLOB COMPRESSED",
            "blob",
            (b"", b"\x00\x01", b"\x00" * 5000, Expr("REPEAT(X'00FF', 30000)"), Expr("RANDOM_BYTES(1024)")),
            lambda r: _bytes(r, r.choice((0, 3, 120, 2000))),
            charset="binary",
            compressed=True,
        ),
        Column(
            "tx_c",
            "TEXT COMPRESSED CHARACTER SET utf8mb4",
            "text",
            ("", "é", "漢字😀" * 2000),
            lambda r: compressible(r, "utf8mb4", r.choice((0, 10, 500))),
            charset="utf8mb4",
            compressed=True,
        ),
        Column(
            "lt_c",
            "LONGTEXT COMPRESSED CHARACTER SET latin1",
            "text",
            ("", "€" * 70000),
            lambda r: compressible(r, "latin1", r.choice((0, 10, 500))),
            charset="latin1",
            compressed=True,
        ),
        _int_column("n", "INT", 32, False),
    ]
    return TableSpec("t_compressed", tuple(cols))


ALL_TYPES = _build_all_types()
COMPRESSED = _build_compressed()


# --------------------------------------------------------------------------- statements
@dataclass(frozen=True)
class Statement:
    sql: str
    lax: bool = False  # run with sql_mode=''


@dataclass
class _State:
    live: list[int] = field(default_factory=list)  # ids present, sorted
    next_id: int = 1000


def _value(col: Column, r: random.Random, null_rate: float) -> Any:
    k = r.random()
    if k < null_rate:
        return None
    if k < null_rate + 0.35:
        return r.choice(col.pool)
    return col.rand(r)


def _insert(
    spec: TableSpec,
    schema: str,
    cols: Sequence[Column],
    rows: Sequence[tuple[int, Sequence[Any]]],
    verb: str = "INSERT",
) -> Statement:
    names = ", ".join(["`id`"] + [f"`{c.name}`" for c in cols])
    values = ", ".join("(" + ", ".join([str(pk)] + [render(v) for v in vals]) + ")" for pk, vals in rows)
    lax = any(is_lax(v) for _, vals in rows for v in vals)
    return Statement(f"{verb} INTO `{schema}`.`{spec.name}` ({names}) VALUES {values}", lax)


def _assignments(cols: Sequence[Column], vals: Sequence[Any]) -> str:
    return ", ".join(f"`{c.name}` = {render(v)}" for c, v in zip(cols, vals, strict=True))


def generate(
    spec: TableSpec, schema: str, seed: int, ops: int = 200, null_rate: float = 0.15
) -> list[Statement]:
    """The workload's statements for ``spec`` in ``schema``; the same arguments give the same SQL."""
    r = random.Random(f"{spec.name}:{seed}")
    st = _State()
    table = f"`{schema}`.`{spec.name}`"
    out: list[Statement] = []
    cols = spec.columns

    def new_id() -> int:
        st.next_id += r.randint(1, 3)
        return st.next_id

    def add(pk: int) -> None:
        st.live.append(pk)
        st.live.sort()

    def pick(n: int = 1) -> list[int]:
        return r.sample(st.live, min(n, len(st.live)))

    def op() -> None:
        k = r.random()
        if k < 0.22 or len(st.live) < 5:  # single-row INSERT, all columns
            pk = new_id()
            out.append(_insert(spec, schema, cols, [(pk, [_value(c, r, null_rate) for c in cols])]))
            add(pk)
        elif k < 0.34:  # multi-row INSERT
            rows = []
            for _ in range(r.randint(2, 5)):
                pk = new_id()
                rows.append((pk, [_value(c, r, null_rate) for c in cols]))
                add(pk)
            out.append(_insert(spec, schema, cols, rows))
        elif k < 0.40:  # INSERT naming only some columns: the others get their DEFAULT (NULL)
            some = sorted(r.sample(range(len(cols)), r.randint(1, 5)))
            chosen = [cols[i] for i in some]
            pk = new_id()
            out.append(_insert(spec, schema, chosen, [(pk, [_value(c, r, 0.1) for c in chosen])]))
            add(pk)
        elif k < 0.62:  # UPDATE a few columns of one row (NULL included)
            (pk,) = pick()
            chosen = r.sample(cols, r.randint(1, 4))
            vals = [_value(c, r, 0.3) for c in chosen]
            out.append(
                Statement(
                    f"UPDATE {table} SET {_assignments(chosen, vals)} WHERE `id` = {pk}",
                    any(map(is_lax, vals)),
                )
            )
        elif k < 0.66:  # UPDATE setting every column to NULL
            (pk,) = pick()
            out.append(
                Statement(f"UPDATE {table} SET {_assignments(cols, [None] * len(cols))} WHERE `id` = {pk}")
            )
        elif k < 0.72:  # UPDATE one column of several rows
            pks = pick(r.randint(2, 4))
            c = r.choice(cols)
            v = _value(c, r, 0.2)
            out.append(
                Statement(
                    f"UPDATE {table} SET {_assignments([c], [v])} WHERE `id` IN ({', '.join(map(str, pks))})",
                    is_lax(v),
                )
            )
        elif k < 0.80:  # primary-key change, maybe with other columns
            (pk,) = pick()
            npk = new_id()
            chosen = r.sample(cols, r.randint(0, 2))
            vals = [_value(c, r, 0.2) for c in chosen]
            sets = ", ".join(["`id` = " + str(npk)] + ([_assignments(chosen, vals)] if chosen else []))
            out.append(Statement(f"UPDATE {table} SET {sets} WHERE `id` = {pk}", any(map(is_lax, vals))))
            st.live.remove(pk)
            add(npk)
        elif k < 0.83:  # primary-key change of a range of rows
            lo = r.choice(st.live)
            moved = [pk for pk in st.live if lo <= pk < lo + 8]
            delta = st.next_id + 100 - lo
            out.append(
                Statement(f"UPDATE {table} SET `id` = `id` + {delta} WHERE `id` >= {lo} AND `id` < {lo + 8}")
            )
            for pk in moved:
                st.live.remove(pk)
                add(pk + delta)
            st.next_id = max(st.live) + 1
        elif k < 0.92:  # DELETE one row
            (pk,) = pick()
            out.append(Statement(f"DELETE FROM {table} WHERE `id` = {pk}"))
            st.live.remove(pk)
        else:  # DELETE several rows
            pks = pick(r.randint(2, 3))
            out.append(Statement(f"DELETE FROM {table} WHERE `id` IN ({', '.join(map(str, pks))})"))
            for pk in pks:
                st.live.remove(pk)

    done = 0
    while done < ops:
        k = r.random()
        if k < 0.08:  # an explicit multi-statement transaction
            out.append(Statement("BEGIN"))
            for _ in range(r.randint(2, 4)):
                op()
                done += 1
            out.append(Statement("COMMIT"))
        elif k < 0.10:  # a rolled-back transaction: nothing of it may reach the binlog
            out.append(Statement("BEGIN"))
            pk = st.next_id + 50_000
            out.append(_insert(spec, schema, cols, [(pk, [_value(c, r, null_rate) for c in cols])]))
            if st.live:
                out.append(Statement(f"DELETE FROM {table} WHERE `id` = {st.live[0]}"))
            out.append(Statement("ROLLBACK"))
        else:
            op()
            done += 1

    # Every pool value ends up in the final state: row j is inserted with pool entry j+1 of each
    # column, then updated (all columns) to pool entry j.
    width = max(len(c.pool) for c in cols)
    base = 1
    for j in range(width):
        vals = [c.pool[(j + 1) % len(c.pool)] for c in cols]
        out.append(_insert(spec, schema, cols, [(base + j, vals)]))
    for j in range(width):
        vals = [c.pool[j % len(c.pool)] for c in cols]
        out.append(
            Statement(
                f"UPDATE {table} SET {_assignments(cols, vals)} WHERE `id` = {base + j}",
                any(map(is_lax, vals)),
            )
        )
    # and one row that is NULL everywhere, inserted in a multi-row INSERT with a pool row
    out.append(
        _insert(
            spec,
            schema,
            cols,
            [(base + width, [None] * len(cols)), (base + width + 1, [c.pool[0] for c in cols])],
        )
    )
    return out


def run(conn: Any, statements: Sequence[Statement], strict_mode: str | None = None) -> None:
    """Execute ``statements`` on a PyMySQL connection (autocommit on, explicit BEGIN/COMMIT kept)."""
    with conn.cursor() as cur:
        if strict_mode is None:
            cur.execute("SELECT @@SESSION.sql_mode")
            strict_mode = cur.fetchone()[0]
        lax = False
        for s in statements:
            if s.lax != lax:
                cur.execute("SET SESSION sql_mode = %s", ("" if s.lax else strict_mode,))
                lax = s.lax
            try:
                cur.execute(s.sql)
            except Exception as exc:
                raise RuntimeError(f"workload statement failed: {exc}\n{s.sql[:2000]}") from exc
        if lax:
            cur.execute("SET SESSION sql_mode = %s", (strict_mode,))


def iter_sql(statements: Sequence[Statement]) -> Iterator[str]:
    """The statements as an SQL script (for reproducing a run by hand)."""
    lax = False
    for s in statements:
        if s.lax != lax:
            yield "SET SESSION sql_mode = ''" if s.lax else "SET SESSION sql_mode = DEFAULT"
            lax = s.lax
        yield s.sql
