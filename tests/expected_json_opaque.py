"""Expected JSON text of the 8 JSON values in json-opaque.binlog, in insert order.

The binlog is /work/shared/fixtures/binlog/rust_mysql_common/json-opaque.binlog (MySQL 9.0.1:
table ``foo.test`` with one JSON column, 8 single-row WRITE_ROWS events). The values come from
blackbeam/rust_mysql_common, ``src/binlog/mod.rs``, the binlog round-trip test, branch
``file_path.file_name().unwrap() == "json-opaque.binlog"`` (``extract_cmp!`` for the rows events
at i == 10, 12, ..., 24).

That test compares serde_json values, in which DECIMAL opaques appear as JSON strings
(``{"d": "123.456"}``, ``{"e": "9.00"}``). Here every value is written the way MySQL prints it
(``SELECT json_col``): a DECIMAL is a bare number that keeps its scale, so ``123.456`` and
``9.00``. The rest is the same text with MySQL's ", " and ": " separators.
"""

EXPECTED = [
    '{"a": "base64:type15:VQ=="}',
    '{"b": "2012-03-18"}',
    '{"c": "2012-03-18 11:30:45.000000"}',
    '{"c": "87:31:46.654321"}',
    '{"d": 123.456}',
    '{"e": 9.00}',
    '{"e": [0, 1, true, false]}',
    '{"e": null}',
]
