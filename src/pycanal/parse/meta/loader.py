"""Load the schema model from a live server's ``information_schema`` (PyMySQL connection).

One query per catalogue table (SCHEMATA, TABLES, COLUMNS, STATISTICS for the primary keys,
CHARACTER_SETS, COLLATIONS), whatever the number of tables; views and the virtual schemas
(``information_schema``, ``performance_schema``) are left out, and ``accepts(schema, table)``
(the instance filter) limits the tables kept and the schemas whose columns are read. Databases
are always all loaded: their default charsets decide the columns of tables created later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .model import Column, Database, SchemaModel, Table
from .types import Charsets, parse_labels

__all__ = ["load_schema", "load_server", "load_table"]

_SKIP_SCHEMAS = ("information_schema", "performance_schema")


def _rows(conn: Any, sql: str, args: Any = None) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in cur.fetchall()]


def _text(v: Any) -> Any:
    return v.decode("utf-8") if isinstance(v, bytes | bytearray) else v


def load_server(conn: Any) -> SchemaModel:
    """An empty model with the server's flavor, charsets, collations and defaults."""
    version, cs, coll, lctn = (
        _text(v)
        for v in _rows(
            conn, "SELECT VERSION(), @@character_set_server, @@collation_server, @@lower_case_table_names"
        )[0]
    )
    flavor = "mariadb" if "mariadb" in str(version).lower() else "mysql"
    charsets = Charsets.builtin()
    for name, default, maxlen in _rows(
        conn, "SELECT CHARACTER_SET_NAME, DEFAULT_COLLATE_NAME, MAXLEN FROM information_schema.CHARACTER_SETS"
    ):
        charsets.default_collation[_text(name)] = _text(default)
        charsets.maxlen[_text(name)] = int(maxlen)
    for name, cs_name, cid in _rows(
        conn, "SELECT COLLATION_NAME, CHARACTER_SET_NAME, ID FROM information_schema.COLLATIONS"
    ):
        charsets.collation_charset[_text(name)] = _text(cs_name)
        if cid is not None:
            charsets.collation_id[_text(name)] = int(cid)
    try:
        # MariaDB 10.10+: the uca1400 collations' ids are only listed here.
        for name, cs_name, cid in _rows(
            conn,
            "SELECT FULL_COLLATION_NAME, CHARACTER_SET_NAME, ID "
            "FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY",
        ):
            charsets.collation_charset.setdefault(_text(name), _text(cs_name))
            if cid is not None:
                charsets.collation_id.setdefault(_text(name), int(cid))
    except Exception:  # older servers and MySQL have no such columns
        pass
    return SchemaModel(
        flavor=flavor,
        charsets=charsets,
        server_charset=str(cs),
        server_collation=str(coll),
        lower_case_table_names=int(lctn or 0),
    )


def _column(row: tuple) -> Column:
    name, column_type, data_type, is_nullable, default, cs, coll = (_text(v) for v in row)
    column_type = str(column_type)
    data_type = str(data_type).lower()
    return Column(
        name=name,
        column_type=column_type,
        data_type=data_type,
        nullable=is_nullable == "YES",
        unsigned=" unsigned" in column_type,
        charset=cs,
        collation=coll,
        default=default,
        labels=parse_labels(column_type) if data_type in ("enum", "set") else None,
    )


_COLUMNS_SQL = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, DATA_TYPE, IS_NULLABLE, COLUMN_DEFAULT, "
    "CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS"
)
_PK_SQL = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, SUB_PART FROM information_schema.STATISTICS "
    "WHERE INDEX_NAME = 'PRIMARY'"
)
_TABLES_SQL = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_COLLATION FROM information_schema.TABLES "
    "WHERE TABLE_TYPE NOT IN ('VIEW', 'SYSTEM VIEW')"
)


def _fill(
    model: SchemaModel,
    tables: list[tuple],
    columns: list[tuple],
    pks: list[tuple],
    accepts: Callable[[str, str], bool],
) -> list[Table]:
    by_key: dict[tuple[str, str], Table] = {}
    for schema, name, coll in tables:
        schema, name, coll = _text(schema), _text(name), _text(coll)
        if schema in _SKIP_SCHEMAS or not accepts(schema, name):
            continue
        if coll is None:
            cs, coll = model.server_charset, model.server_collation
        else:
            cs = model.charsets.charset_of(coll)
        by_key[(schema, name)] = Table(schema, name, [], cs, coll, [])
    for row in columns:
        t = by_key.get((_text(row[0]), _text(row[1])))
        if t is not None:
            t.columns.append(_column(row[2:]))
    for schema, name, column, sub_part in pks:
        t = by_key.get((_text(schema), _text(name)))
        if t is not None:
            t.primary_key.append((_text(column), int(sub_part or 0)))
    return list(by_key.values())


def load_schema(conn: Any, accepts: Callable[[str, str], bool] | None = None) -> SchemaModel:
    """The whole model (databases, and the tables ``accepts`` keeps) from ``information_schema``."""
    ok = accepts or (lambda s, t: True)
    model = load_server(conn)
    for name, cs, coll in _rows(
        conn,
        "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA",
    ):
        name = _text(name)
        if name not in _SKIP_SCHEMAS:
            model.put_database(Database(name, _text(cs), _text(coll)))
    skip = "TABLE_SCHEMA NOT IN ('information_schema', 'performance_schema')"
    tables = _rows(conn, f"{_TABLES_SQL} AND {skip}")
    # Columns and keys of the schemas that hold a table the filter keeps, not of every schema:
    # COLUMNS of a whole server opens every table and view (the sys schema's hundred views: 15 of a
    # 25 ms load on an idle MariaDB 10.11 with one 4-table schema to keep; 0.8 ms for that schema).
    schemas = sorted(
        {_text(s) for s, n, _ in tables if _text(s) not in _SKIP_SCHEMAS and ok(_text(s), _text(n))}
    )
    if not schemas:
        return model
    where = f"TABLE_SCHEMA IN ({', '.join(['%s'] * len(schemas))})"
    columns = _rows(
        conn, f"{_COLUMNS_SQL} WHERE {where} ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION", schemas
    )
    pks = _rows(conn, f"{_PK_SQL} AND {where} ORDER BY TABLE_SCHEMA, TABLE_NAME, SEQ_IN_INDEX", schemas)
    for t in _fill(model, tables, columns, pks, ok):
        model.put_table(t)
    return model


def load_table(conn: Any, model: SchemaModel, schema: str, name: str) -> Table | None:
    """One table as the server has it now (None if it does not exist); the model is not changed."""
    args = (schema, name)
    tables = _rows(conn, f"{_TABLES_SQL} AND TABLE_SCHEMA = %s AND TABLE_NAME = %s", args)
    columns = _rows(
        conn, f"{_COLUMNS_SQL} WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", args
    )
    pks = _rows(conn, f"{_PK_SQL} AND TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY SEQ_IN_INDEX", args)
    found = _fill(model, tables, columns, pks, lambda s, t: True)
    return found[0] if found else None
