"""Canal's table filter semantics (AviaterRegexFilter): top-level comma split, full match, case-insensitive."""

from __future__ import annotations

import pytest

from pycanal.parse.ddl import parse_ddl
from pycanal.parse.filter import RegexFilter, TableFilter, split_pattern


@pytest.mark.parametrize(
    ("pattern", "parts"),
    [
        ("a.b,c.d", ["a.b", "c.d"]),
        (r"s1\.t\d{1,3}", [r"s1\.t\d{1,3}"]),
        (r"db\.[a,b]x, other\..*", [r"db\.[a,b]x", r"other\..*"]),
        (r"db\.(t1|t2),x\.y", [r"db\.(t1|t2)", r"x\.y"]),
        (r"db\.t(1,2)?", [r"db\.t(1,2)?"]),  # a comma inside () is not a separator
        (r"a\,b,c", [r"a\,b", "c"]),  # an escaped comma is not one either
        (r"db\.[\],]x,y", [r"db\.[\],]x", "y"]),  # ']' escaped inside a class
        ("", []),
        (" , ,", []),
    ],
)
def test_split_on_top_level_commas(pattern, parts):
    assert split_pattern(pattern) == parts


def test_default_white_list_matches_everything():
    f = RegexFilter(r".*\..*", True)
    assert f.filter("db.t") and f.filter("DB.T1") and f.filter("a.")
    assert not f.filter("nodot")


def test_full_match_only():
    f = RegexFilter(r"test\..*", True)
    assert f.filter("test.t1")
    assert not f.filter("test2.t1")
    assert not f.filter("mytest.t1")  # anchored at the start
    g = RegexFilter(r"test\.t1", True)
    assert not g.filter("test.t10")  # anchored at the end


def test_case_insensitive():
    f = RegexFilter(r"Test\.T1", True)
    assert f.filter("test.t1") and f.filter("TEST.T1") and f.filter("tEsT.t1")


def test_unescaped_dot_is_any_character():
    f = RegexFilter("a.b,c.d", True)
    assert f.filter("a.b") and f.filter("c.d")
    assert f.filter("axb")  # '.' is a regex dot, as in Canal
    assert not f.filter("a.b.c")


def test_commas_inside_quantifiers_and_classes():
    f = RegexFilter(r"s1\.t\d{1,3}", True)
    assert f.filter("s1.t1") and f.filter("s1.t123")
    assert not f.filter("s1.t1234")
    g = RegexFilter(r"db\.[a,b]x", True)
    assert g.filter("db.ax") and g.filter("db.bx") and g.filter("db.,x")
    assert not g.filter("db.cx")


def test_alternation_is_a_full_match_of_either_side():
    # Canal sorts parts longest first so that "foo,foot" matches "foot"; a part with '|' is a
    # full match of one of its alternatives.
    assert RegexFilter("foo,foot", True).filter("foot")
    f = RegexFilter("foo|foot", True)
    assert f.filter("foo") and f.filter("foot")
    assert not f.filter("foox")
    assert not RegexFilter(r"a\.b|c\.d", True).filter("a.bx")


def test_empty_pattern_gives_the_default():
    assert RegexFilter("", True).filter("any.thing")
    assert not RegexFilter("", False).filter("any.thing")
    assert RegexFilter(None, True).filter("x.y")
    assert not RegexFilter("  ", False).filter("x.y")


def test_bad_pattern_is_a_clear_error():
    with pytest.raises(ValueError, match="bad filter pattern"):
        RegexFilter("db\\.(unclosed", True)


def test_white_and_black_lists():
    f = TableFilter(r".*\..*", r"mysql\..*,db\.tmp_.*")
    assert f.accepts("db", "t")
    assert not f.accepts("mysql", "user")
    assert not f.accepts("MySQL", "User")
    assert not f.accepts("db", "tmp_1")
    assert f.accepts("db", "tmp")
    assert TableFilter().accepts("any", "table")  # both empty: everything
    assert not TableFilter(r"only\..*").accepts("other", "t")
    assert not TableFilter("", r".*\..*").accepts("a", "b")


def test_ddl_filtered_by_its_table():
    f = TableFilter(r"keep\..*")
    assert f.accepts_ddl(parse_ddl("ALTER TABLE keep.t ADD c int", None))
    assert not f.accepts_ddl(parse_ddl("ALTER TABLE skip.t ADD c int", None))
    # RENAME passes if either side passes.
    assert f.accepts_ddl(parse_ddl("RENAME TABLE keep.a TO skip.b", None))
    assert f.accepts_ddl(parse_ddl("RENAME TABLE skip.a TO keep.b", None))
    assert f.accepts_ddl(parse_ddl("ALTER TABLE skip.a RENAME TO keep.b", None))
    assert not f.accepts_ddl(parse_ddl("RENAME TABLE skip.a TO skip.b", None))
    # Unqualified names use the session schema.
    assert f.accepts_ddl(parse_ddl("CREATE TABLE t (a int)", "keep"))
    assert not f.accepts_ddl(parse_ddl("CREATE TABLE t (a int)", "skip"))
    # Several tables: delivered when any is of interest.
    assert f.accepts_ddl(parse_ddl("DROP TABLE skip.a, keep.b", None))
    # A RENAME with a black list: dropped only when both names are black (LogEventConvert.processFilter).
    b = TableFilter(r"keep\..*", r"keep\.black.*")
    assert b.accepts_ddl(parse_ddl("RENAME TABLE keep.black1 TO keep.t", None))
    assert b.accepts_ddl(parse_ddl("RENAME TABLE skip.t TO keep.black1", None))
    assert not b.accepts_ddl(parse_ddl("RENAME TABLE keep.black1 TO keep.black2", None))
    # Statements without a table are not table-specific.
    assert f.accepts_ddl(parse_ddl("CREATE DATABASE other", None))
