"""Collation id -> Python codec table (pycanal.binlog.charsets)."""

from __future__ import annotations

import codecs

import pytest

from pycanal.binlog.charsets import (
    CHARSET_CODECS,
    COLLATIONS,
    charset_for_collation,
    codec_for_collation,
    collation_name,
    decode_text,
)
from pycanal.testing import PrivateMariaDB


@pytest.mark.parametrize(
    ("collation_id", "codec"),
    [
        (33, "utf-8"),  # utf8mb3_general_ci
        (83, "utf-8"),  # utf8mb3_bin
        (45, "utf-8"),  # utf8mb4_general_ci
        (46, "utf-8"),  # utf8mb4_bin
        (224, "utf-8"),  # utf8mb4_unicode_ci
        (255, "utf-8"),  # MySQL 8 utf8mb4_0900_ai_ci
        (309, "utf-8"),  # MySQL 8 utf8mb4_0900_bin
        (323, "utf-8"),  # MySQL 8 utf8mb4_mn_cyrl_0900_as_cs
        (76, "utf-8"),  # MySQL 8 utf8mb3_tolower_ci
        (2048, "utf-8"),  # MariaDB utf8mb3_uca1400_ai_ci
        (63, None),  # binary
        (11, "ascii"),
        (35, "utf-16-be"),  # ucs2
        (54, "utf-16-be"),  # utf16
        (56, "utf-16-le"),  # utf16le
        (60, "utf-32-be"),  # utf32
        (28, "gbk"),
        (24, "gb2312"),
        (248, "gb18030"),  # MySQL 8 only
        (95, "cp932"),
        (19, "cp949"),  # euckr: MySQL accepts the whole UHC range
        (51, "cp1251"),
        (9, "iso8859_2"),  # latin2
    ],
)
def test_codec_for_collation(collation_id: int, codec: str | None) -> None:
    assert codec_for_collation(collation_id) == codec


@pytest.mark.parametrize("collation_id", [5, 8, 15, 31, 47, 48, 49, 94, 1032, 1071])
def test_latin1_family(collation_id: int) -> None:
    assert charset_for_collation(collation_id) == "latin1"
    codec = codec_for_collation(collation_id)
    assert codec == "pycanal_latin1"
    assert codecs.lookup(codec).name == "pycanal_latin1"


def test_latin1_is_cp1252_with_c1_holes_filled() -> None:
    every_byte = bytes(range(256))
    text = every_byte.decode("pycanal_latin1")
    assert len(text) == 256
    assert text.encode("pycanal_latin1") == every_byte
    assert b"\x80\x8a\x9f".decode("pycanal_latin1") == "\u20ac\u0160\u0178"  # as cp1252
    for b in (0x81, 0x8D, 0x8F, 0x90, 0x9D):  # undefined in cp1252
        assert bytes([b]).decode("pycanal_latin1") == chr(b)
    assert b"caf\xe9".decode("pycanal_latin1") == "café"


def test_unknown_ids_raise_key_error() -> None:
    for bad in (0, 17, 100, 254, 999_999):
        with pytest.raises(KeyError):
            codec_for_collation(bad)


def test_names() -> None:
    assert collation_name(8) == "latin1_swedish_ci"
    assert collation_name(255) == "utf8mb4_0900_ai_ci"
    assert collation_name(45) == "utf8mb4_general_ci"
    assert charset_for_collation(33) == "utf8mb3"
    assert charset_for_collation(248) == "gb18030"


def test_every_collation_has_a_codec() -> None:
    assert len(COLLATIONS) > 1000
    for cid, (charset, _name) in COLLATIONS.items():
        assert charset in CHARSET_CODECS, (cid, charset)
        codec = codec_for_collation(cid)
        if codec is None:
            assert charset == "binary"
        else:
            codecs.lookup(codec)  # registered or built in


def test_charsets_without_python_codec_decode() -> None:
    assert b"\xb2\xb3".decode(CHARSET_CODECS["armscii8"]) == "\u0531\u0561"  # Armenian Ayb
    assert b"\xc0".decode(CHARSET_CODECS["geostd8"]) == "\u10d0"  # Georgian an
    assert b"\x40\x5b".decode(CHARSET_CODECS["swe7"]) == "ÉÄ"
    assert b"\x80".decode(CHARSET_CODECS["keybcs2"]) == "Č"
    assert b"\xd7".decode(CHARSET_CODECS["dec8"]) == "Œ"


def test_multibyte_fixes() -> None:
    assert b"\x81\x5f".decode(CHARSET_CODECS["sjis"]) == "\\"  # shift_jis says U+FF3C
    assert b"a\xa1\xc0b".decode(CHARSET_CODECS["ujis"]) == "a\\b"
    assert b"\xf5\xa1".decode(CHARSET_CODECS["ujis"]) == "\ue000"  # user-defined area
    assert b"\xad\xa1".decode(CHARSET_CODECS["eucjpms"]) == "①"  # NEC row 13
    assert b"\xf9\xd6".decode(CHARSET_CODECS["big5"]) == "碁"  # ETEN extension
    assert "日本語".encode("shift_jis").decode(CHARSET_CODECS["sjis"]) == "日本語"
    # Invalid input still follows the caller's error handling.
    with pytest.raises(UnicodeDecodeError):
        b"\xff\xff".decode(CHARSET_CODECS["ujis"])
    assert b"x\xff".decode(CHARSET_CODECS["ujis"], "replace") == "x\ufffd"
    assert b"x\xff".decode(CHARSET_CODECS["ujis"], "surrogateescape") == "x\udcff"


def test_decode_text() -> None:
    assert decode_text("żółw".encode(), 45) == "żółw"
    assert decode_text(b"\x00\xff", 63) == b"\x00\xff"
    assert decode_text("żółw".encode("utf-16-be"), 35) == "żółw"
    assert decode_text(b"\xe9", 8) == "é"


# ---------------------------------------------------------------------------- against a server
def _server_chars(db: PrivateMariaDB, charset: str, seqs: list[bytes]) -> list[str | None]:
    out: list[str | None] = []
    expr = f"HEX(CONVERT(CAST(%s AS CHAR CHARACTER SET {charset}) USING utf8mb4))"
    with db.root_connection() as conn, conn.cursor() as cur:
        for i in range(0, len(seqs), 1000):
            chunk = seqs[i : i + 1000]
            cur.execute("SELECT " + ",".join([expr] * len(chunk)), chunk)
            for seq, h in zip(chunk, cur.fetchone(), strict=True):
                ch = bytes.fromhex(h).decode("utf-8") if h is not None else None
                if ch is None or len(ch) != 1 or ch == "\ufffd" or (ch == "?" and seq != b"?"):
                    ch = None
                out.append(ch)
    return out


def _ours(codec: str, seq: bytes) -> str | None:
    try:
        return seq.decode(codec)
    except UnicodeDecodeError:
        return None


def test_table_matches_server_collations(mariadb: PrivateMariaDB) -> None:
    rows = mariadb.query(
        "SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY"
        if mariadb.version_info >= (10, 10, 0)
        else "SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID IS NOT NULL"
    )
    assert rows
    for cid, charset in rows:
        assert charset_for_collation(cid) == charset, cid


# Documented approximations: (charset, byte sequence) where our codec differs from the server.
KNOWN_DIFFERENCES = {("eucjpms", b"\x8f\xa2\xb7")}  # JIS X 0212 tilde: "~" instead of U+FF5E


def test_codecs_match_server_conversion(mariadb: PrivateMariaDB) -> None:
    maxlens = dict(mariadb.query("SELECT CHARACTER_SET_NAME, MAXLEN FROM information_schema.CHARACTER_SETS"))
    checked = 0
    mismatches = []
    for charset, maxlen in sorted(maxlens.items()):
        codec = CHARSET_CODECS[charset]
        if codec is None or charset.startswith("utf") or charset == "ucs2":
            continue
        seqs = [bytes([b]) for b in range(256)]
        if maxlen > 1:
            seqs += [bytes([a, b]) for a in range(0x81, 0xFF) for b in range(0x30, 0xFF)]
        if charset in ("ujis", "eucjpms"):
            seqs += [bytes([0x8F, a, b]) for a in range(0xA1, 0xFF) for b in range(0xA1, 0xFF)]
        for seq, server in zip(seqs, _server_chars(mariadb, charset, seqs), strict=True):
            if server is None or (charset, seq) in KNOWN_DIFFERENCES:
                continue
            checked += 1
            ours = _ours(codec, seq)
            if ours != server:
                mismatches.append((charset, seq.hex(), server, ours))
    assert checked > 100_000
    assert mismatches == []


def test_unicode_charsets_round_trip(mariadb: PrivateMariaDB) -> None:
    text = "Aé€😀"
    for charset in ("utf8mb4", "utf16", "utf16le", "utf32"):
        raw = mariadb.query(f"SELECT CAST(CONVERT(%s USING {charset}) AS BINARY)", (text,))[0][0]
        assert raw.decode(CHARSET_CODECS[charset]) == text, charset
    raw = mariadb.query("SELECT CAST(CONVERT(%s USING ucs2) AS BINARY)", ("Aé€",))[0][0]
    assert raw.decode(CHARSET_CODECS["ucs2"]) == "Aé€"
