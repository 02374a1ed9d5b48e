"""pycanal.storage: one LakePath on a local disk and on a real S3 server (S3Proxy), same answers."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pycanal.storage import LakePath, StorageError, lake_path
from pycanal.testing.s3 import PrivateS3


@pytest.fixture(scope="module")
def s3() -> Iterator[PrivateS3]:
    with PrivateS3() as server:
        server.create_bucket("lake")
        yield server


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> LakePath:
    if request.param == "local":
        return lake_path(tmp_path / "lake")
    s3: PrivateS3 = request.getfixturevalue("s3")
    return lake_path(f"s3://lake/{request.node.name.replace('[', '-').rstrip(']')}", s3.storage_options())


def test_create_once_read_replace_list_delete(root: LakePath) -> None:
    root.mkdir()
    log = root / "_delta_log"
    log.mkdir()
    first = log / "00000000000000000000.json"
    assert not first.exists()
    assert first.put_if_absent(b"one")
    assert not first.put_if_absent(b"two")  # the first writer's bytes stay
    assert first.read_bytes() == b"one" and first.is_file() and first.exists()
    pointer = log / "_last_checkpoint"
    pointer.write_text('{"version": 0}')
    pointer.write_text('{"version": 10}')  # replaced whole
    assert pointer.read_text() == '{"version": 10}'
    assert [pointer.read_range(*r) for r in ((1, 7), (12, 10), (15, 4), (40, 2))] == [
        b'"versio', b"10}", b"", b"",  # a range running past the end: the bytes there are
    ]  # fmt: skip
    (root / "a" / "b.parquet").parent.mkdir()
    (root / "a" / "b.parquet").write_bytes(b"x")
    assert sorted(root.listdir()) == ["_delta_log", "a"]
    assert sorted(log.listdir()) == ["00000000000000000000.json", "_last_checkpoint"]
    assert root.exists() and (root / "a").exists() and not (root / "a").is_file()
    assert (root / "missing").listdir() == []
    first.unlink()
    first.unlink()  # already gone: fine
    assert not first.exists()
    for read in (first.read_bytes, lambda: first.read_range(0, 3)):
        with pytest.raises(FileNotFoundError):
            read()
    assert (log / "_last_checkpoint").relative_to(root) == "_delta_log/_last_checkpoint"


def test_concurrent_creates_have_one_winner(root: LakePath) -> None:
    root.mkdir()
    target = root / "00000000000000000007.json"
    wins: list[int] = []
    start = threading.Barrier(8)

    def writer(i: int) -> None:
        start.wait()
        if target.put_if_absent(f"writer {i}".encode()):
            wins.append(i)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert target.read_text() == f"writer {wins[0]}"
    assert [n for n in root.listdir() if n.endswith(".tmp")] == []  # no temporaries left behind


def test_parquet_through_streams(root: LakePath) -> None:
    root.mkdir()
    table = pa.table({"id": list(range(1000)), "v": [str(i) for i in range(1000)]})
    part = root / "part-0.parquet"
    with part.output_stream() as out:
        pq.write_table(table, out)
    assert pq.ParquetFile(part.input_file()).read().equals(table)
    with pytest.raises(RuntimeError), (root / "torn.parquet").output_stream() as out:
        out.write(b"PAR1")
        raise RuntimeError("the writer died")
    assert not (root / "torn.parquet").exists()  # nothing half-written under the name


def test_the_environment_of_the_moment_is_used(s3: PrivateS3, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lake without options takes the AWS_* environment as it is at the request: another store's
    settings set in the same process (the next test's server) are not answered by the last one's
    client."""
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    lake_path("s3://lake/env/x").write_bytes(b"first")
    with PrivateS3() as other:
        other.create_bucket("lake")
        for key, value in other.env().items():
            monkeypatch.setenv(key, value)
        assert not lake_path("s3://lake/env/x").exists()
        lake_path("s3://lake/env/x").write_bytes(b"second")
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    assert lake_path("s3://lake/env/x").read_bytes() == b"first"


def test_uris_and_pickling(s3: PrivateS3, tmp_path: Path) -> None:
    remote = lake_path("s3://lake/shop/", s3.storage_options())
    table = remote / "current" / "db" / "t"
    assert table.uri == "s3://lake/shop/current/db/t"
    assert table.spark_uri == "s3a://lake/shop/current/db/t"
    assert table.storage_options == s3.storage_options()
    assert pickle.loads(pickle.dumps(table)) == table
    assert lake_path("s3a://lake/shop") == lake_path("s3://lake/shop").parent / "shop"
    local = lake_path(f"file://{tmp_path}") / "x"
    assert local.uri == str(tmp_path / "x") == local.spark_uri and local.local == tmp_path / "x"
    assert local.storage_options == {}
    with pytest.raises(ValueError, match="not a local path"):
        _ = remote.local


@pytest.mark.parametrize(
    "uri, error",
    [
        ("s3:///prefix", "no bucket"),
        ("gs://bucket/x", r"local path, file:// or s3://"),
        ("s3://key:topsecret@bucket/x", "credentials go in AWS_"),
    ],
)
def test_bad_uris(uri: str, error: str) -> None:
    with pytest.raises(ValueError, match=error) as caught:
        lake_path(uri)
    assert "topsecret" not in str(caught.value)


def test_store_failures_name_the_uri_and_hide_the_secret(s3: PrivateS3) -> None:
    good = s3.storage_options()
    wrong_key = {**good, "AWS_SECRET_ACCESS_KEY": "not-the-secret-" + "z" * 20}
    with pytest.raises(StorageError) as caught:
        (lake_path("s3://lake/p", wrong_key) / "f").write_bytes(b"x")
    assert "s3://lake/p/f" in str(caught.value) and wrong_key["AWS_SECRET_ACCESS_KEY"] not in str(
        caught.value
    )
    with pytest.raises(StorageError, match="s3://no-such-bucket/p/f"):
        (lake_path("s3://no-such-bucket/p", good) / "f").put_if_absent(b"x")
    down = {**good, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    with pytest.raises(StorageError, match="s3://lake/p/f"):
        (lake_path("s3://lake/p", down) / "f").read_bytes()


def test_move_a_directory(root: LakePath) -> None:
    src, dest = root / "current" / "db" / "t", root / "_pycanal" / "retired" / "db" / "t" / "00001"
    for name in ("_delta_log/00000000000000000000.json", "part-1.parquet", "part-2.parquet"):
        (src / name).parent.mkdir()
        (src / name).write_text(name)
    src.move_to(dest)
    assert not src.exists() and src.moving_to() is None
    assert sorted(dest.listdir()) == ["_delta_log", "part-1.parquet", "part-2.parquet"]
    assert (
        dest / "_delta_log" / "00000000000000000000.json"
    ).read_text() == "_delta_log/00000000000000000000.json"


def test_an_s3_move_cut_short_is_finished_by_the_next(s3: PrivateS3) -> None:
    root = lake_path("s3://lake/cut-short", s3.storage_options())
    src, dest = root / "a", root / "b"
    for name in ("x", "y", "z"):
        (src / name).write_text(name)
    # As a move killed while deleting: the marker, every copy, one source deleted.
    (src / "_pycanal_moving_to").write_text(dest.key)
    for name in ("x", "y", "z"):
        (dest / name).write_text(name)
    (src / "x").unlink()
    assert src.exists() and src.moving_to() == dest
    src.move_to(dest)
    assert not src.exists() and sorted(dest.listdir()) == ["x", "y", "z"]
