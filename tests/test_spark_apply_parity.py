"""``apply_changes`` reads row images with pyarrow's JSON reader (``read_images``) and parses them
one by one with ``json.loads`` wherever the reader could read them otherwise. Both paths run here
over every column type with extreme values and NULLs, key changes, zero dates and malformed or
non-canonical images: the current-state tables (or the errors) must be the same, value for value,
and canonical images must take the reader's path.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from pycanal.binlog.rows import JsonText
from pycanal.parse.canonical import json_value
from pycanal.spark import merge_source
from pycanal.spark.apply import ChangeApplier
from pycanal.spark.delta.tablestate import read_rows
from pycanal.spark.merge_source import MergeSource
from pycanal.spark.rows import ChangeRow, RowPosition, to_record_batch
from pycanal.spark.schema import model_from_ddl
from pycanal.spark.types import InexactRead, _has_line_feed

# column: (SQL type, values in turn; every 5th row is all NULL but its keys)
POOLS: dict[str, tuple[str, list[Any]]] = {
    "ti": ("TINYINT", [-128, 127, 0]),
    "tiu": ("TINYINT UNSIGNED", [0, 255]),
    "si": ("SMALLINT", [-32768, 32767]),
    "siu": ("SMALLINT UNSIGNED", [65535, 0]),
    "mi": ("MEDIUMINT", [-8388608, 8388607]),
    "miu": ("MEDIUMINT UNSIGNED", [16777215, 0]),
    "i": ("INT", [-2147483648, 2147483647]),
    "iu": ("INT UNSIGNED", [4294967295, 0]),
    "bi": ("BIGINT", [-(2**63), 2**63 - 1]),
    "biu": ("BIGINT UNSIGNED", [2**64 - 1, 0, 2**63]),
    "dec12": ("DECIMAL(12,2)", [Decimal("-9999999999.99"), Decimal("0.00"), Decimal("1.50")]),
    "dec38": ("DECIMAL(38,10)", [Decimal("9" * 28 + "." + "9" * 10), Decimal("-0.0000000001")]),
    "dec65": ("DECIMAL(65,30)", [Decimal("-" + "9" * 35 + "." + "9" * 30), Decimal("0." + "0" * 29 + "1")]),
    "fl": (
        "FLOAT",
        [3.4028234663852886e38, 1.401298464324817e-45, -0.0, 0.10000000149011612, 16777216.0, -1.0],
    ),
    "dbl": ("DOUBLE", [1.7976931348623157e308, 5e-324, -0.0, 0.0, 1e308, 1e16, 2.0**53, 0.1, -1.5]),
    "b1": ("BIT(1)", [0, 1]),
    "b17": ("BIT(17)", [131071, 0]),
    "b64": ("BIT(64)", [2**64 - 1, 0]),
    "yr": ("YEAR", [1901, 2155, 0]),
    "dt": ("DATE", ["1000-01-01", "9999-12-31"]),
    "dtm": ("DATETIME(6)", ["1000-01-01 00:00:00.000000", "9999-12-31 23:59:59.999999"]),
    "ts": ("TIMESTAMP(3) NULL", ["1970-01-01 00:00:01.000", "2038-01-19 03:14:07.999"]),
    "tm": ("TIME(6)", ["-838:59:59.000000", "838:59:59.000000", "00:00:00.000000"]),
    "ch": ("CHAR(10)", ["", "é", "😀"]),
    "vc": ("VARCHAR(100)", ['" \\ / \x01 \t \n \u2028 \x7f', "😀𝄞" * 3, "null", '":null,"vc":1']),
    "tx": ("TEXT", ["x" * 70_000, ""]),
    "en": ("ENUM('a','b','c')", ["a", "c", ""]),
    "st": ("SET('x','y','z')", [[], ["x", "y", "z"], ["y"]]),
    "js": ("JSON", ['{"a": [1, 2.5, null]}', '"text"', "null"]),  # MariaDB's JSON: its text
    "bn": ("BINARY(4)", [b"\x00" * 4, b"\xff\xfe\x00a"]),
    "vb": ("VARBINARY(10)", [b"", b"\x00"]),
    "bl": ("BLOB", [bytes(range(256)) * 300]),
    "geo": ("GEOMETRY", [bytes.fromhex("000000000101000000000000000000f03f0000000000000040")]),
    "ip": ("INET6", [bytes(16)]),
    "u": ("UUID", [bytes(range(16))]),
}
# Key columns (derived from id, never NULL): the key of the table is one of them with id.
KEYS: dict[str, tuple[str, Any]] = {
    "k_str": ("VARCHAR(20)", lambda i: f"ключ-{i}😀"),
    "k_bin": ("VARBINARY(8)", lambda i: i.to_bytes(3, "big")),
    "k_dec": ("DECIMAL(20,5)", lambda i: Decimal(i) / 8),
    "k_dtm": ("DATETIME(6)", lambda i: f"{dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i, microseconds=i):%Y-%m-%d %H:%M:%S.%f}"),
    "k_u": ("BIGINT UNSIGNED", lambda i: 2**64 - 1 - i),
    "k_fl": ("DOUBLE", lambda i: i / 4 if i % 2 else -i / 4),  # the row-by-row path (-0.0 == 0.0 there)
}  # fmt: skip


def ddl(primary_key: str) -> str:
    cols = ["id INT NOT NULL"] + [f"`{k}` {t} NOT NULL" for k, (t, _) in KEYS.items()]
    cols += [f"`{c}` {t}" for c, (t, _) in POOLS.items()]
    return f"CREATE TABLE db.t ({', '.join(cols)}, PRIMARY KEY ({primary_key}))"


def image(values: dict[str, Any]) -> str:
    return (
        "{"
        + ",".join(json.dumps(k, ensure_ascii=False) + ":" + json_value(v) for k, v in values.items())
        + "}"
    )


def values(i: int, shift: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"id": i, **{k: f(i) for k, (_, f) in KEYS.items()}}
    for n, (c, (_, pool)) in enumerate(POOLS.items()):
        out[c] = None if (i + shift) % 5 == 0 else pool[(i + shift + n) % len(pool)]
    return out


class Rows:
    """Change rows at increasing positions."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.offset = 100

    def row(
        self, op: str, before: str | dict | None, after: str | dict | None, pk: str | None = None
    ) -> ChangeRow:
        self.offset += 10
        texts = [image(v) if isinstance(v, dict) else v for v in (before, after)]
        if pk is None:
            key_image = after if op != "DELETE" else before
            assert isinstance(key_image, dict)
            pk = image({k: key_image[k] for k in self.keys})
        ts = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
        return ChangeRow(
            op, "db", "t", pk, *texts, RowPosition("mysql-bin.000001", self.offset, 0, None), ts, None, None
        )

    def insert(self, v: dict | str, pk: str | None = None) -> ChangeRow:
        return self.row("INSERT", None, v, pk)

    def update(self, old: dict, new: dict) -> ChangeRow:
        return self.row("UPDATE", old, new)

    def delete(self, old: dict) -> ChangeRow:
        return self.row("DELETE", old, None)


def contents(target: Path) -> dict[str, Any]:
    """Every current-state table: its schema and rows (repr: -0.0, NaN, Decimal exponents count)."""
    out = {}
    for log in sorted((target / "current").glob("*/*/_delta_log")):
        t = read_rows(DeltaTable(str(log.parent)))
        rows = sorted(repr(r) for r in t.to_pylist())
        out[str(log.parent.relative_to(target))] = (str(t.schema), rows)
    return out


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The tables whose rows took the row-by-row path (the reader's path is tried for any number
    of rows, not only from ``SMALL`` on)."""
    monkeypatch.setattr(merge_source, "SMALL", 0)
    parsed: list[str] = []
    parse = MergeSource.parse

    def spying(self: MergeSource, database: str, table: str, *args: Any, **kwargs: Any) -> pa.Table:
        parsed.append(f"{database}.{table}")
        return parse(self, database, table, *args, **kwargs)

    monkeypatch.setattr(MergeSource, "parse", spying)
    yield parsed


def outcome(target: Path, batches: list[Any], *, parse_only: bool, **options: Any) -> Any:
    """The tables after applying the batches (``parse_only``: without the reader), or the error."""

    def refuse(*args: Any, **kwargs: Any) -> pa.Table:
        raise InexactRead("the row-by-row path only")

    real = MergeSource.read
    if parse_only:
        MergeSource.read = refuse  # type: ignore[method-assign]
    try:
        applier = ChangeApplier(target, **options)
        for batch_id, rows in enumerate(batches):  # change rows or an Arrow table of them
            table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([to_record_batch(rows)])
            applier(table, batch_id)
    except Exception as exc:  # compared between the two paths
        return f"{type(exc).__name__}: {exc}"
    finally:
        MergeSource.read = real  # type: ignore[method-assign]
    return contents(target)


def both(tmp_path: Path, batches: list[Any], **options: Any) -> Any:
    read = outcome(tmp_path / "read", batches, parse_only=False, **options)
    parsed = outcome(tmp_path / "parsed", batches, parse_only=True, **options)
    assert read == parsed
    return read


def history(r: Rows, n: int = 30) -> list[list[ChangeRow]]:
    """Inserts, then updates (of the key too), deletes and inserts again, several per key."""
    batch0 = [r.insert(values(i)) for i in range(1, n + 1)]
    moved = {**values(2, 1), "id": 1002, **{k: f(1002) for k, (_, f) in KEYS.items()}}
    back = {**values(6, 3), "id": 1006, **{k: f(1006) for k, (_, f) in KEYS.items()}}
    batch1 = [
        r.update(values(1), values(1, 1)),
        r.update(values(1, 1), values(1, 2)),  # the last change of key 1 wins
        r.update(values(2), moved),  # a key change: 2 is deleted, 1002 inserted
        r.delete(values(3)),
        r.insert(values(3, 4)),  # deleted, then back
        r.delete(values(5)),
        r.update(values(4), {**values(5, 2), "id": 5, **{k: f(5) for k, (_, f) in KEYS.items()}}),  # onto 5
        r.update(values(6), back),
        r.update(back, values(6, 3)),  # there and back: 1006 deleted, 6 there
        r.delete({**values(999), "id": 999, **{k: f(999) for k, (_, f) in KEYS.items()}}),  # never there
        r.insert(values(40)),
        r.delete(values(40)),
    ]
    return [batch0, batch1]


@pytest.mark.parametrize("key", ["id", "k_str", "k_bin", "k_dec", "k_dtm", "k_u", "k_fl"])
def test_every_type_both_ways(key: str, tmp_path: Path, spy: list[str]) -> None:
    keys = ["id"] if key == "id" else [key, "id"] if key in ("k_str", "k_bin") else [key]
    r = Rows(keys)
    got = both(tmp_path, history(r), schema_ddl=ddl(", ".join(f"`{k}`" for k in keys)))
    ((_, rows),) = got.values()
    assert len(rows) == 29
    # One MERGE per batch; DOUBLE keys compare as parsed values only.
    assert spy == (["db.t"] * 4 if key == "k_fl" else ["db.t"] * 2)


def test_zero_dates(tmp_path: Path, spy: list[str]) -> None:
    r = Rows(["id"])
    zero = {
        **values(1),
        "dt": "0000-00-00",
        "dtm": "2024-00-10 00:00:00.000000",
        "ts": "0000-00-00 00:00:00.000",
    }
    batches = [[r.insert(values(2)), r.insert(zero), r.insert({**values(3), "dt": "2024-01-00"})]]
    got = both(tmp_path / "null", batches, schema_ddl=ddl("id"), zero_dates="null")
    ((_, rows),) = got.values()
    assert sum("'dt': None" in row for row in rows) == 2
    assert spy == ["db.t"]  # the reader's path took them (the row-by-row run is the other)
    error = both(tmp_path / "error", batches, schema_ddl=ddl("id"))
    assert error == (
        "ApplyError: db.t (at mysql-bin.000001:120): column `dt` (date) holds the zero date '0000-00-00', "
        "which Arrow/Spark cannot hold (apply with zero_dates='null' to store NULL instead)"
    )


def test_mysql_json_documents(tmp_path: Path, spy: list[str]) -> None:
    """MySQL's JSON values are embedded documents of any shape: re-serialised, row by row."""
    docs = ['{"a": [1, 2.5, null], "é": {"b": "😀"}}', "[]", '"text"', "12.50", "null", "true"]
    r = Rows(["id"])
    rows = [r.insert({"id": i, "js": JsonText(doc)}) for i, doc in enumerate(docs)]
    rows.append(r.insert({"id": 99, "js": None}))
    model = model_from_ddl("CREATE TABLE db.t (id INT PRIMARY KEY, js JSON)", flavor="mysql")
    got = both(tmp_path, [rows], schema=model)
    ((_, table),) = got.values()
    assert '{\'id\': 0, \'js\': \'{"a": [1, 2.5, null], "é": {"b": "😀"}}\'}' in table
    assert spy == ["db.t", "db.t"]


SMALL = (
    "CREATE TABLE db.t (id INT PRIMARY KEY, n INT, f FLOAT, d DOUBLE, dec DECIMAL(5,2), s VARCHAR(10), "
    "e ENUM('a','b'), st SET('x','y'), b VARBINARY(4), dt DATETIME)"
)
TEXTS = {"id": "1", "n": "2", "f": "1.5", "d": "-0.0", "dec": '"1.50"', "s": '"é"', "e": '"a"', "st": '["x"]',
         "b": '{"base64": "AA=="}', "dt": '"2024-01-02 03:04:05"'}  # fmt: skip


def variant(**changes: str | None) -> str:
    """An image of SMALL with some columns' texts replaced (None: left out)."""
    texts = {**TEXTS, **changes}
    return "{" + ",".join(f'"{k}":{v}' for k, v in texts.items() if v is not None) + "}"


CANONICAL = variant()
NULLS = variant(**{k: "null" for k in TEXTS if k != "id"})


# after image text, and whether the reader's path takes it
IMAGES = {
    "canonical": (CANONICAL, True),
    "nulls": (NULLS, True),
    "spaces, other order": (
        "{ " + ",\r\t".join(f'"{k}" : {v}' for k, v in reversed(TEXTS.items())) + " }",
        True,
    ),
    "escapes": (
        variant(s='"\\u00e9\\ud83d\\ude00\\\\u"', st='["\\u0078"]').replace('"id"', '"\\u0069d"'),
        True,
    ),
    "escaped name, null value": (variant(n="null", b="null").replace('"n"', '"\\u006e"'), False),
    "column left out": (variant(n=None), False),
    "null column left out": (variant(n=None, s="null"), False),
    "extra column": (variant(x="1"), False),
    "column twice": (CANONICAL[:-1] + ',"n":3}', False),
    "int literals in floats": (variant(f="16777215", d="-1"), True),
    "int literal at FLOAT's limit": (variant(f="16777216"), False),
    "int literal beyond FLOAT": (variant(f="16777217"), False),
    "int literal beyond DOUBLE": (variant(d="9007199254740993"), False),
    "-0 literal": (variant(d="-0"), False),
    "NaN, Infinity": (variant(f="NaN", d="-Infinity"), True),
    "Infinity": (variant(d="Infinity"), True),
    "Inf": (variant(d="Inf"), False),
    "-NaN": (variant(f="-NaN"), False),
    "1e400": (variant(d="1e400"), False),
    "big exponents": (variant(f="1E+38", d="-2.5e-308"), True),
    "float for INT": (variant(n="1.0"), False),
    "true for INT": (variant(n="true"), False),
    "text for INT": (variant(n='"2"'), False),
    "INT overflow": (variant(n="2147483648"), False),
    "number for text": (variant(s="5"), False),
    "lone surrogate": (variant(s='"\\ud800"'), False),
    "ENUM index": (variant(e="2"), False),
    "SET text": (variant(st='"x,y"'), False),
    "SET bits": (variant(st="3"), False),
    "SET of a number": (variant(st="[1]"), False),
    "binary with more": (variant(b='{"base64": "AA==", "x": 1}'), False),
    "binary without base64": (variant(b="{}"), False),
    "binary base64 null": (variant(b='{"base64": null}'), False),
    "binary as text": (variant(b='"AA=="'), False),
    "bad base64": (variant(b='{"base64": "A"}'), False),
    "number for DECIMAL": (variant(dec="1.5"), False),
    "DECIMAL too wide": (variant(dec='"1234.5"'), False),
    "bad datetime": (variant(dt='"yesterday"'), False),
    "zero datetime": (variant(dt='"0000-00-00 00:00:00"'), False),
    "leading space": (" " + CANONICAL, False),
    "trailing space": (CANONICAL + " ", False),
    "BOM": ("\ufeff" + CANONICAL, False),
    "newline inside": (CANONICAL.replace(",", ",\n", 1), False),
    "newline after": (CANONICAL + "\n", False),
    "two objects": (CANONICAL + CANONICAL, False),
    "object then null": (CANONICAL + " null", False),
    "null": ("null", False),
    "array": ("[1]", False),
    "empty": ("", False),
    "not JSON": ("{id:1}", False),
}


@pytest.mark.parametrize("name", IMAGES)
def test_images_both_ways(name: str, tmp_path: Path, spy: list[str]) -> None:
    text, by_reader = IMAGES[name]
    r = Rows(["id"])
    rows = [r.insert(variant(id="7"), pk='{"id":7}'), r.insert(text, pk='{"id":1}')]
    both(tmp_path, [rows], schema_ddl=SMALL)
    assert spy == (["db.t"] if by_reader else ["db.t", "db.t"])


# a DELETE's key (pk) or an UPDATE's before image, and whether the reader's path takes it for each
KEY_TEXTS = {
    "canonical": ('{"id":1}', True, True),
    "spaces": ('{ "id" : 1 }', True, True),
    "null": ("null", False, False),
    "null first": ("null", False, False),
    "null value": ('{"id":null}', False, False),
    "text": ('{"id":"1"}', False, False),
    "float": ('{"id":1.0}', False, False),
    "another column": ('{"id":1,"n":3}', False, True),
    "missing": ("{}", False, False),
    "other name": ('{"n":1}', False, False),
}


@pytest.mark.parametrize("name", KEY_TEXTS)
@pytest.mark.parametrize("op", ["DELETE", "UPDATE"])
def test_keys_both_ways(name: str, op: str, tmp_path: Path, spy: list[str]) -> None:
    text, for_delete, for_update = KEY_TEXTS[name]
    by_reader = for_delete if op == "DELETE" else for_update
    r = Rows(["id"])
    rows = [r.insert(CANONICAL, pk='{"id":1}'), r.insert(variant(id="2"), pk='{"id":2}')]
    if op == "DELETE":
        change = r.row("DELETE", CANONICAL, None, pk=text)
    else:  # the key text as the before image: a key change (or not) from it
        change = r.row("UPDATE", text, variant(id="2", n="5"), pk='{"id":2}')
    batch = [change, *rows] if name == "null first" else [*rows, change]
    both(tmp_path, [batch], schema_ddl=SMALL)
    assert spy == (["db.t"] if by_reader else ["db.t", "db.t"])


def test_update_with_an_odd_before_image(tmp_path: Path, spy: list[str]) -> None:
    """Before images are read whole, as json.loads parses them: Inf anywhere is refused."""
    r = Rows(["id"])
    rows = [
        r.insert(CANONICAL, pk='{"id":1}'),
        r.row("UPDATE", variant(d="Inf"), variant(n="5"), pk='{"id":1}'),
    ]
    assert both(tmp_path, [rows], schema_ddl=SMALL).startswith("JSONDecodeError")
    assert spy == ["db.t", "db.t"]


def test_names_checks_cannot_read(tmp_path: Path, spy: list[str]) -> None:
    """A column named `:[` and a SET holding ":null" could pass for `"<name>":null`: with such
    names, images missing a value go row by row (which refuses them)."""
    model = model_from_ddl("CREATE TABLE db.t (id INT PRIMARY KEY, x SET(':null','b'), `:[` INT)")
    r = Rows(["id"])
    complete = r.insert('{"id":1,"x":[":null"],":[":null}', pk='{"id":1}')
    missing = r.insert('{"id":2,"x":[":null"]}', pk='{"id":2}')
    got = both(tmp_path / "complete", [[complete]], schema=model)
    assert list(got.values())[0][1] == ["{'id': 1, 'x': [':null'], ':[': None}"]
    assert both(tmp_path / "missing", [[missing]], schema=model).startswith(
        "ApplyError: db.t at mysql-bin.000001:120: the after image has 2 of the 3 columns"
    )
    assert spy == ["db.t", "db.t", "db.t", "db.t"]


def test_a_key_the_schema_model_names_otherwise(tmp_path: Path, spy: list[str]) -> None:
    model = model_from_ddl(SMALL)
    t = model.table("db", "t")
    assert t is not None
    t.primary_key = [("ID", 0)]
    r = Rows(["id"])
    got = both(tmp_path, [[r.insert(CANONICAL, pk='{"id":1}')]], schema=model)
    assert got == (
        "ApplyError: db.t at mysql-bin.000001:110: the row has no key column 'ID'; the schema model's key is ['ID']"
    )
    assert spy == ["db.t", "db.t"]


@pytest.mark.parametrize("key", ["id", "k_bin"])
def test_random_histories_both_ways(key: str, tmp_path: Path, spy: list[str]) -> None:
    """Chains of key changes, deletes and inserts again over a few keys, in several batches."""
    rnd = random.Random(20261122)
    keys = ["id"] if key == "id" else ["k_bin", "id"]
    r = Rows(keys)
    live: dict[int, dict[str, Any]] = {}
    batches: list[list[ChangeRow]] = []
    for _ in range(3):
        batch = []
        for _ in range(300):
            i = rnd.randrange(40)
            v = {**values(i, rnd.randrange(9)), "id": i, **{k: f(i) for k, (_, f) in KEYS.items()}}
            if i not in live:
                batch.append(r.insert(v))
                live[i] = v
            elif rnd.random() < 0.3:
                batch.append(r.delete(live.pop(i)))
            else:
                j = rnd.choice([i, i, rnd.randrange(40)])
                if j != i and j in live:
                    j = i
                new = {**v, "id": j, **{k: f(j) for k, (_, f) in KEYS.items()}}
                batch.append(r.update(live.pop(i), new))
                live[j] = new
        batches.append(batch)
    got = both(tmp_path, batches, schema_ddl=ddl(", ".join(f"`{k}`" for k in keys)))
    ((_, rows),) = got.values()
    assert len(rows) == len(live)
    assert spy == ["db.t"] * 3  # the reader's path took every batch


def test_objects_across_texts(tmp_path: Path, spy: list[str]) -> None:
    """Texts the reader could take for other objects, one text per line: as many rows as texts."""
    r = Rows(["id"])
    texts = [variant(b=None)[:-1] + ',"b":', '{"base64": "AA=="}}', variant(id="3") + variant(id="4")]
    rows = [r.insert(text, pk=f'{{"id":{i}}}') for i, text in enumerate(texts, 1)]
    assert both(tmp_path, [rows], schema_ddl=SMALL).startswith("JSONDecodeError: Expecting value")
    assert spy == ["db.t", "db.t"]


def test_text_that_is_not_utf8(tmp_path: Path, spy: list[str]) -> None:
    r = Rows(["id"])
    table = pa.Table.from_batches([to_record_batch([r.insert(CANONICAL, pk='{"id":1}')])])
    text = CANONICAL.replace("é", "\udcff").encode("utf-8", "surrogateescape")  # a lone 0xff byte
    offsets = pa.array([0, len(text)], pa.int32()).buffers()[1]
    after = pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(text)])
    table = table.set_column(table.schema.get_field_index("after"), "after", after)
    assert both(tmp_path, [table], schema_ddl=SMALL).startswith("UnicodeDecodeError")
    assert spy == ["db.t", "db.t"]


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_line_feed_search_follows_slices_and_chunks(kind: pa.DataType) -> None:
    """``_has_line_feed`` reads the values' bytes through the offsets: a slice sees only its own."""
    a = pa.array(["{a}", "{b\n}", "{c}", "{d}"], kind)
    assert _has_line_feed(a) and _has_line_feed(a.slice(1, 1))
    assert (
        not _has_line_feed(a.slice(0, 1))
        and not _has_line_feed(a.slice(2))
        and not _has_line_feed(a.slice(4))
    )
    assert _has_line_feed(pa.chunked_array([a.slice(0, 1), a.slice(1, 2)]))
    assert not _has_line_feed(pa.chunked_array([a.slice(2), a.slice(0, 1)]))
    assert not _has_line_feed(pa.chunked_array([], kind))


@pytest.mark.parametrize(
    "text",
    [
        '{"id":1,"s":"a\\u00e9\\ud83d\\ude00","n":null,"f":1.5e300,"b":[1,{"x":true}]}',
        '{"id":123456789012345678901234567890}',
        '{"d":NaN,"e":-Infinity}',
        '{"d":Inf}',
        ' {"id":1}',
        '{"id":1} ',
        '{"id":1}\n',
        '{"id":1}{"id":2}',
        '{"id":1',
        "\ufeff{}",
        "",
        "null",
        "[1]",
        None,
    ],
)
def test_images_are_parsed_as_json_loads_parses_them(text: Any) -> None:
    """``_loads`` scans an image with json's C scanner: the value, or the error, json.loads gives."""

    def outcome(parse: Any) -> Any:
        try:
            return "value", parse(text)
        except Exception as exc:  # noqa: BLE001 - the outcome compared
            return type(exc), str(exc)

    assert repr(outcome(merge_source._loads)) == repr(outcome(json.loads))  # repr: NaN != NaN
