"""Table schemas for the Spark side: a ``SchemaModel`` from CREATE TABLE statements or from a
schema history store, and an in-memory ``SchemaHistory`` that follows DDL from a given model on."""

from __future__ import annotations

from pathlib import Path

from pycanal.parse.ddl import DdlParseError, parse_statement, tokenize
from pycanal.parse.filter import TableFilter
from pycanal.parse.meta import Position, SchemaApplyError, SchemaHistory, SchemaModel

__all__ = ["history_from", "model_at", "model_from_ddl", "split_statements"]


def split_statements(sql: str) -> list[str]:
    """``sql`` cut at its top-level semicolons (not those in strings, identifiers or comments)."""
    out, start = [], 0
    for tok in tokenize(sql):
        if tok.kind == "punct" and tok.value == ";":
            out.append(sql[start : tok.start])
            start = tok.end
    out.append(sql[start:])
    return [s.strip() for s in out if s.strip()]


def model_from_ddl(sql: str, flavor: str = "mariadb") -> SchemaModel:
    """The schema model that CREATE TABLE (and ``USE db``, CREATE DATABASE, ALTER ...) statements
    separated by semicolons describe. A statement the model cannot follow is an error naming it."""
    model = SchemaModel(flavor=flavor)
    current: str | None = None
    for stmt in split_statements(sql):
        words = stmt.split(None, 1)
        if words[0].upper() == "USE" and len(words) == 2:
            current = words[1].strip().strip("`")
            continue
        try:
            model.apply(parse_statement(stmt), current)
        except (DdlParseError, SchemaApplyError) as exc:
            raise ValueError(f"cannot use the schema statement {stmt[:200]!r}: {exc}") from None
    return model


def model_at(history_path: str | Path, file: str, offset: int) -> SchemaModel:
    """The model a schema history store (``SchemaHistory``'s SQLite file) has in force at a position."""
    if not Path(history_path).is_file():
        raise FileNotFoundError(f"schema history store {history_path} does not exist")
    history = SchemaHistory(history_path)
    try:
        return history.schema_at(Position(file, offset))
    finally:
        history.close()


def history_from(
    model: SchemaModel | dict, file: str, offset: int, accepts: TableFilter | None
) -> SchemaHistory:
    """An in-memory schema history whose model at ``(file, offset)`` is ``model`` (or its JSON);
    ``apply_event`` then follows the DDL after it and ``table_meta`` completes TABLE_MAPs."""
    history = SchemaHistory(None, filter=accepts)
    data = model.to_json() if isinstance(model, SchemaModel) else model
    history.store.add_snapshot(file, offset, data, "given schema")
    history.start(Position(file, offset))
    return history
