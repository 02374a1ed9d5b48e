"""Mutated and truncated real binlogs must fail only with BinlogError: no other exception, no hang."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from binlog_fixtures import FIXTURES_DIR
from pycanal.binlog import BinlogError
from pycanal.binlog.decoder import EventDecoder
from pycanal.binlog.events import RowsEvent, TransactionPayloadEvent
from pycanal.binlog.reader import iter_events
from pycanal.parse.canonical import Recorder, to_json_line

FIXTURES = FIXTURES_DIR
# Small files covering rows v1/v2, every metadata flavour, JSON, payloads, MariaDB and GTIDs.
SAMPLE = [
    "rust_mysql_common/mysql-enum-string-set.000001",
    "rust_mysql_common/json.binlog.000001",
    "rust_mysql_common/json-opaque.binlog",
    "rust_mysql_common/transaction_compression.000001",
    "rust_mysql_common/mariadb-bin.000001",
    "rust_mysql_common/vector.binlog",
    "rust_mysql_common/binlog_transaction_with_GTID_TAG.000001",
    "rust_mysql_common/binlog-invisible-columns.000001",
    "go-mysql/tcb-eval002c-bin.003320",
    "mysql-binlog-connector-rust/mysql-bin.000057",
    "binlog-parser/mysql-bin.07",
    "canal/mysql-bin.000001",
]


def _decode_all(data: bytes, verify: bool) -> None:
    """Decode everything a consumer would touch, including lazily decoded rows."""
    decoder = EventDecoder("fuzz", "fuzz", verify_checksum=verify)
    events = []
    for event in iter_events(data, "fuzz", decoder=decoder):
        inner = event.events if isinstance(event, TransactionPayloadEvent) else [event]
        for e in inner:
            if isinstance(e, RowsEvent):
                e.rows  # noqa: B018 - forces the lazy decode
        events.append(event)
    for rec in Recorder().records(events):
        to_json_line(rec)


def _check(data: bytes, verify: bool) -> None:
    started = time.monotonic()
    try:
        _decode_all(data, verify)
    except BinlogError as exc:
        assert "fuzz" in str(exc)
    assert time.monotonic() - started < 5, "decoding one mutated file took over 5 s"


@pytest.mark.parametrize("name", SAMPLE)
def test_truncations_and_byte_flips(name: str) -> None:
    data = (FIXTURES / name).read_bytes()
    rng = random.Random(name)
    cuts = sorted({rng.randrange(4, len(data)) for _ in range(40)})
    for cut in cuts:
        _check(data[:cut], verify=True)
    for _ in range(150):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(4, len(data))] = rng.randrange(256)
        # Without CRC verification the corrupt bytes reach every body decoder.
        _check(bytes(mutated), verify=False)
        _check(bytes(mutated), verify=True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(SAMPLE),
    edits=st.lists(st.tuples(st.integers(min_value=4), st.integers(0, 255)), min_size=1, max_size=6),
    cut=st.integers(min_value=0),
)
def test_hypothesis_mutations(name: str, edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray((FIXTURES / name).read_bytes())
    for where, value in edits:
        data[where % len(data)] = value
    if cut:
        data = data[: max(4, cut % len(data))]
    _check(bytes(data), verify=False)
