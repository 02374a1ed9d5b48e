"""The hand-written parser of the table DDL the schema history applies (CREATE/ALTER/DROP/RENAME/
TRUNCATE TABLE, CREATE/DROP INDEX, CREATE/ALTER/DROP DATABASE): :func:`parse_statement`. Anything
it does not understand raises :class:`~pycanal.parse.ddl.lexer.DdlParseError` rather than
guessing; statements on no table are an ``OtherStatement``.
"""

from __future__ import annotations

from .columns import ColumnParser
from .lexer import tokenize
from .statements import (
    AlterAction,
    AlterDatabase,
    AlterTable,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DropDatabase,
    DropIndex,
    DropTables,
    OtherStatement,
    RenameTables,
    Statement,
    TableName,
    TruncateTable,
)

__all__ = ["parse_statement"]

# Keywords that start a non-column element of CREATE TABLE (...) when not backquoted.
_CREATE_ELEMENT_KEYWORDS = frozenset(
    {"CONSTRAINT", "PRIMARY", "KEY", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "PERIOD"}
)


class _Parser(ColumnParser):
    """Statements: table options, then one method per statement and ALTER TABLE clause."""

    def table_option(self, target: CreateTable | AlterAction) -> bool:
        """Consume one table option; charset/collation go to ``target``. False: not an option."""
        start = self.i
        self.accept("DEFAULT")
        w = self.word()
        if w in ("CHARSET", "CHARACTER", "COLLATE"):
            self.i += 1
            if w == "CHARACTER":
                self.expect("SET")
            self.accept_punct("=")
            value = self.name_value()
            if w == "COLLATE":
                target.collate = value
            else:
                target.charset = value
            return True
        if self.i != start:
            self.i = start
            return False
        if w is None:
            return False
        if w in ("DATA", "INDEX") and self.word(1) == "DIRECTORY":
            self.i += 2
        elif w == "WITH" and self.word(1) == "SYSTEM" and self.word(2) == "VERSIONING":
            return False
        elif w in ("ENGINE", "TYPE", "AUTO_INCREMENT", "AVG_ROW_LENGTH", "CHECKSUM", "TABLE_CHECKSUM",
                   "COMMENT", "COMPRESSION", "CONNECTION", "DELAY_KEY_WRITE", "ENCRYPTION", "ENCRYPTED",
                   "ENCRYPTION_KEY_ID", "IETF_QUOTES", "INSERT_METHOD", "KEY_BLOCK_SIZE", "MAX_ROWS",
                   "MIN_ROWS", "PACK_KEYS", "PAGE_CHECKSUM", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL",
                   "PASSWORD", "ROW_FORMAT", "SEQUENCE", "STATS_AUTO_RECALC", "STATS_PERSISTENT",
                   "STATS_SAMPLE_PAGES", "TABLESPACE", "TRANSACTIONAL", "UNION", "STORAGE",
                   "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "AUTOEXTEND_SIZE", "START"):  # fmt: skip
            self.i += 1
            if w == "START":
                self.expect("TRANSACTION")
                return True
        elif self.punct(1) == "=":
            self.i += 1  # an engine-defined option: name = value
        else:
            return False
        self.accept_punct("=")
        if self.punct() == "(":
            self.skip_group()
        else:
            self.advance()
        return True

    # -- statements ----------------------------------------------------------------------
    def statement(self) -> Statement:
        w = self.word()
        if w == "CREATE":
            return self.create()
        if w == "ALTER":
            return self.alter()
        if w == "DROP":
            return self.drop()
        if w == "RENAME":
            self.i += 1
            if self.accept("TABLE") or self.accept("TABLES"):
                return self.rename_tables()
            return OtherStatement("RENAME", self.sql)
        if w == "TRUNCATE":
            self.i += 1
            self.accept("TABLE")
            stmt = TruncateTable(self.table_name())
            self.finish()
            return stmt
        return OtherStatement(w or (self.peek().value if self.peek() else ""), self.sql)

    def finish(self) -> None:
        self.accept_punct(";")
        if not self.at_end:
            raise self.error("unexpected text after the statement")

    def create(self) -> Statement:
        self.expect("CREATE")
        or_replace = self.accept("OR", "REPLACE")
        # DEFINER/ALGORITHM/SQL SECURITY belong to views, triggers and routines.
        if self.word() in ("DEFINER", "ALGORITHM", "SQL", "AGGREGATE"):
            return OtherStatement("CREATE", self.sql)
        temporary = self.accept("TEMPORARY")
        w = self.word()
        if w == "TABLE":
            self.i += 1
            return self.create_table(or_replace, temporary)
        if w in ("UNIQUE", "FULLTEXT", "SPATIAL", "INDEX") or (
            w in ("ONLINE", "OFFLINE") and self.word(1) in ("UNIQUE", "FULLTEXT", "SPATIAL", "INDEX")
        ):
            self.accept("ONLINE") or self.accept("OFFLINE")
            kind = "INDEX"
            if self.word() in ("UNIQUE", "FULLTEXT", "SPATIAL"):
                kind = self.advance().upper
            self.expect("INDEX")
            self.if_not_exists()
            name = self.ident()
            if self.accept("USING"):
                self.advance()
            self.expect("ON")
            table = self.table_name()
            self.skip_clause(frozenset())
            return CreateIndex(table, name, kind)
        if w in ("DATABASE", "SCHEMA"):
            self.i += 1
            stmt = CreateDatabase("", if_not_exists=self.if_not_exists(), or_replace=or_replace)
            stmt.name = self.ident()
            self.database_options(stmt)
            return stmt
        return OtherStatement("CREATE", self.sql)

    def database_options(self, stmt: CreateDatabase | AlterDatabase) -> None:
        while not self.at_end:
            self.accept("DEFAULT")
            w = self.word()
            if w in ("CHARSET", "CHARACTER"):
                self.i += 1
                if w == "CHARACTER":
                    self.expect("SET")
                self.accept_punct("=")
                stmt.charset = self.name_value()
            elif w == "COLLATE":
                self.i += 1
                self.accept_punct("=")
                stmt.collate = self.name_value()
            elif w == "COMMENT":
                self.i += 1
                self.accept_punct("=")
                self.advance()
            elif self.punct() == ";":
                self.i += 1
            else:
                raise self.error("unknown database option")

    def create_table(self, or_replace: bool, temporary: bool) -> CreateTable:
        if_not_exists = self.if_not_exists()
        stmt = CreateTable(
            self.table_name(), if_not_exists=if_not_exists, or_replace=or_replace, temporary=temporary
        )
        if self.accept("LIKE"):
            stmt.like = self.table_name()
            self.finish()
            return stmt
        if self.punct() == "(" and self.word(1) == "LIKE":
            self.i += 2
            stmt.like = self.table_name()
            self.expect_punct(")")
            self.finish()
            return stmt
        if self.punct() == "(" and self.word(1) != "SELECT":
            self.i += 1
            while True:
                self.create_element(stmt)
                if self.accept_punct(","):
                    continue
                self.expect_punct(")")
                break
        while not self.at_end:
            self.accept_punct(",")
            if self.table_option(stmt):
                continue
            w = self.word()
            if w == "PARTITION":
                self.skip_clause(frozenset({";"}))  # partitioning never changes the columns
                break
            if w == "WITH" and self.word(1) == "SYSTEM" and self.word(2) == "VERSIONING":
                stmt.unsupported = "WITH SYSTEM VERSIONING adds hidden row_start/row_end columns"
                self.i += 3
                continue
            if w in ("IGNORE", "REPLACE", "AS", "SELECT") or self.punct() == "(":
                stmt.has_select = True
                break
            if self.punct() == ";":
                self.i += 1
                continue
            raise self.error("unknown table option")
        return stmt

    def create_element(self, stmt: CreateTable) -> None:
        t = self.peek()
        w = t.upper if t is not None and t.kind == "word" else None
        if w == "PERIOD" and self.word(1) != "FOR":
            w = None  # PERIOD is not reserved: a column may be called period
        if w not in _CREATE_ELEMENT_KEYWORDS:
            col = self.column_def(in_alter=False)
            stmt.columns.append(col)
            if col.primary_key:
                stmt.primary_key = [(col.name, 0)]
            if col.system_versioning:
                stmt.unsupported = "WITH SYSTEM VERSIONING adds hidden row_start/row_end columns"
            return
        if w == "CONSTRAINT":
            w = self.constraint()
        if w == "PRIMARY":
            stmt.primary_key = self.primary_key()
        self.skip_clause()

    def constraint(self) -> str | None:
        """At ``CONSTRAINT [IF NOT EXISTS] [symbol]``: the keyword after it."""
        self.i += 1
        self.if_not_exists()
        if self.word() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            self.ident()
        return self.word()

    def primary_key(self) -> list[tuple[str, int]]:
        """At ``PRIMARY KEY [USING type] (key parts)``: its key columns."""
        self.i += 1
        self.expect("KEY")
        if self.accept("USING"):
            self.advance()
        return self.key_columns()

    def alter(self) -> Statement:
        self.expect("ALTER")
        self.accept("ONLINE")
        self.accept("IGNORE")
        if self.word() in ("DATABASE", "SCHEMA"):
            self.i += 1
            name = None
            if self.word() not in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT", "UPGRADE"):
                name = self.ident()
            if self.word() == "UPGRADE":
                return OtherStatement("ALTER", self.sql)
            stmt = AlterDatabase(name)
            self.database_options(stmt)
            return stmt
        if not self.accept("TABLE"):
            return OtherStatement("ALTER", self.sql)
        stmt = AlterTable(TableName(None, ""), if_exists=self.if_exists())
        stmt.table = self.table_name()
        if self.accept("WAIT"):
            self.advance()
        self.accept("NOWAIT")
        while not self.at_end:
            if self.accept_punct(";"):
                continue
            stmt.actions.extend(self.alter_action())
            self.accept_punct(",")
        return stmt

    def alter_action(self) -> list[AlterAction]:
        start = self.i
        result = self._alter_action()
        actions = result if isinstance(result, list) else [result]
        for action in actions:
            action.text = self.text_from(start)
        return actions

    def _alter_action(self) -> AlterAction | list[AlterAction]:  # noqa: C901 - one branch per clause keyword
        w = self.word()
        if w == "ADD":
            self.i += 1
            w2 = self.word()
            if w2 == "CONSTRAINT" or (w2 in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "INDEX", "KEY",
                                             "FULLTEXT", "SPATIAL")):  # fmt: skip
                if w2 == "CONSTRAINT":
                    w2 = self.constraint()
                if w2 == "PRIMARY":
                    cols = self.primary_key()
                    self.skip_clause(frozenset({","}))
                    return AlterAction("ADD_PRIMARY_KEY", key_columns=cols)
                if w2 in ("FOREIGN", "CHECK"):
                    return self.option_clause()
                self.skip_clause(frozenset({","}))
                return AlterAction("ADD_INDEX")
            if w2 == "PARTITION" or (w2 == "PERIOD" and self.word(1) == "FOR"):
                return self.option_clause()
            if w2 == "SYSTEM" and self.word(1) == "VERSIONING":
                self.i += 2
                return AlterAction("UNSUPPORTED", name="ADD SYSTEM VERSIONING adds hidden columns")
            self.accept("COLUMN")
            if_not_exists = self.if_not_exists()
            if self.accept_punct("("):
                # ADD (c1 ..., c2 ...): one ADD_COLUMN each, appended in order.
                actions = []
                while True:
                    actions.append(
                        AlterAction(
                            "ADD_COLUMN", column=self.column_def(in_alter=False), if_not_exists=if_not_exists
                        )
                    )
                    if self.accept_punct(","):
                        continue
                    self.expect_punct(")")
                    return actions
            return AlterAction(
                "ADD_COLUMN", column=self.column_def(in_alter=True), if_not_exists=if_not_exists
            )
        if w == "DROP":
            self.i += 1
            w2 = self.word()
            if w2 == "PRIMARY":
                self.i += 1
                self.expect("KEY")
                return AlterAction("DROP_PRIMARY_KEY")
            if w2 in ("INDEX", "KEY", "CONSTRAINT"):
                self.i += 1
                if_exists = self.if_exists()
                name = self.ident()
                if name.upper() == "PRIMARY":
                    return AlterAction("DROP_PRIMARY_KEY", if_exists=if_exists)
                return AlterAction("DROP_INDEX", name=name, if_exists=if_exists)
            if w2 in ("FOREIGN", "CHECK", "PARTITION") or (w2 == "PERIOD" and self.word(1) == "FOR"):
                return self.option_clause()
            if w2 == "SYSTEM" and self.word(1) == "VERSIONING":
                self.i += 2
                return AlterAction("UNSUPPORTED", name="DROP SYSTEM VERSIONING drops hidden columns")
            self.accept("COLUMN")
            if_exists = self.if_exists()
            name = self.ident()
            self.accept("RESTRICT") or self.accept("CASCADE")
            return AlterAction("DROP_COLUMN", name=name, if_exists=if_exists)
        if w == "MODIFY":
            self.i += 1
            self.accept("COLUMN")
            if_exists = self.if_exists()
            return AlterAction("MODIFY_COLUMN", column=self.column_def(in_alter=True), if_exists=if_exists)
        if w == "CHANGE":
            self.i += 1
            self.accept("COLUMN")
            if_exists = self.if_exists()
            old = self.ident()
            return AlterAction(
                "CHANGE_COLUMN", name=old, column=self.column_def(in_alter=True), if_exists=if_exists
            )
        if w == "RENAME":
            self.i += 1
            if self.accept("COLUMN"):
                if_exists = self.if_exists()
                old = self.ident()
                self.expect("TO")
                return AlterAction("RENAME_COLUMN", name=old, new_name=self.ident(), if_exists=if_exists)
            if self.word() in ("INDEX", "KEY"):
                self.i += 1
                old = self.ident()
                self.expect("TO")
                return AlterAction("RENAME_INDEX", name=old, new_name=self.ident())
            self.accept("TO") or self.accept("AS")
            return AlterAction("RENAME_TABLE", table=self.table_name())
        if w == "ALTER":
            self.i += 1
            if self.word() in ("INDEX", "KEY"):
                return self.option_clause()
            self.accept("COLUMN")
            if_exists = self.if_exists()
            name = self.ident()
            action = AlterAction("ALTER_COLUMN", name=name, if_exists=if_exists)
            if self.accept("SET", "DEFAULT"):
                action.default = self.value_expr()
            elif self.accept("DROP", "DEFAULT"):
                action.drop_default = True
            elif self.accept("SET", "INVISIBLE"):
                action.invisible = True
            elif self.accept("SET", "VISIBLE"):
                action.invisible = False
            else:
                raise self.error("unknown ALTER COLUMN clause")
            return action
        if w == "CONVERT":
            self.i += 1
            if self.accept("TO"):
                if not (self.accept("CHARACTER", "SET") or self.accept("CHARSET")):
                    raise self.error("expected CHARACTER SET")
                action = AlterAction("CONVERT_CHARSET", charset=self.name_value())
                if self.accept("COLLATE"):
                    action.collate = self.name_value()
                return action
            return self.option_clause()  # CONVERT PARTITION / CONVERT TABLE ... TO PARTITION
        if w in ("ALGORITHM", "LOCK"):
            self.i += 1
            self.accept_punct("=")
            self.advance()
            return AlterAction("OPTION")
        if w == "ORDER" and self.word(1) == "BY":
            return self.option_clause()
        if w in ("ENABLE", "DISABLE") and self.word(1) == "KEYS":
            self.i += 2
            return AlterAction("OPTION")
        if w in ("DISCARD", "IMPORT") and self.word(1) == "TABLESPACE":
            self.i += 2
            return AlterAction("OPTION")
        if w == "FORCE":
            self.i += 1
            return AlterAction("OPTION")
        if w in ("WITH", "WITHOUT") and self.word(1) == "VALIDATION":
            self.i += 2
            return AlterAction("OPTION")
        if w == "PARTITION" and self.word(1) == "BY":
            self.skip_clause(frozenset({";"}))
            return AlterAction("OPTION")
        if w in ("REMOVE", "COALESCE", "REORGANIZE", "EXCHANGE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD",
                 "REPAIR", "TRUNCATE", "DISCARD", "IMPORT") and (
            self.word(1) in ("PARTITION", "PARTITIONING")
        ):  # fmt: skip
            return self.option_clause()
        action = AlterAction("TABLE_CHARSET", table_option=True)
        if self.table_option(action):
            if action.charset is None and action.collate is None:
                action.op = "OPTION"
            return action
        raise self.error("unknown ALTER TABLE clause")

    def option_clause(self) -> AlterAction:
        """An ALTER TABLE clause that changes no column (partitions, keys, order, ...), skipped."""
        self.skip_clause(frozenset({","}))
        return AlterAction("OPTION")

    def drop(self) -> Statement:
        self.expect("DROP")
        temporary = self.accept("TEMPORARY")
        if self.accept("TABLE") or self.accept("TABLES"):
            stmt = DropTables([], temporary=temporary, if_exists=self.if_exists())
            while True:
                stmt.tables.append(self.table_name())
                if not self.accept_punct(","):
                    break
            self.accept("RESTRICT") or self.accept("CASCADE")
            self.finish()
            return stmt
        if self.accept("INDEX") or self.accept("ONLINE", "INDEX") or self.accept("OFFLINE", "INDEX"):
            self.if_exists()
            name = self.ident()
            self.expect("ON")
            table = self.table_name()
            self.skip_clause(frozenset())
            return DropIndex(table, name)
        if self.word() in ("DATABASE", "SCHEMA"):
            self.i += 1
            if_exists = self.if_exists()
            stmt2 = DropDatabase(self.ident(), if_exists=if_exists)
            self.finish()
            return stmt2
        return OtherStatement("DROP", self.sql)

    def rename_tables(self) -> RenameTables:
        stmt = RenameTables([], if_exists=self.if_exists())
        while True:
            old = self.table_name()
            if self.accept("WAIT"):
                self.advance()
            self.accept("NOWAIT")
            self.expect("TO")
            stmt.pairs.append((old, self.table_name()))
            if not self.accept_punct(","):
                break
        self.finish()
        return stmt


def parse_statement(sql: str, sql_mode: int = 0) -> Statement:
    """Parse one MySQL/MariaDB statement into a statement object (table DDL in detail).

    ``sql_mode`` is the session's (ANSI_QUOTES, NO_BACKSLASH_ESCAPES, REAL_AS_FLOAT matter)."""
    tokens = tokenize(sql, sql_mode)
    p = _Parser(sql, tokens, sql_mode)
    return p.statement()
