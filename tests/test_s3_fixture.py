"""The private S3 server (pycanal.testing.s3) and the object-store semantics the lake will rely on,
against the real server: conditional puts (one winner of a race), listing after a write, multipart
uploads; and the lake's readers and writers on it: boto3, pyarrow, delta-rs, Spark through s3a."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from botocore.exceptions import ClientError
from deltalake import DeltaTable, write_deltalake
from pyarrow import fs as pafs

from pycanal.testing.s3 import S3PROXY_VERSION, PrivateS3, S3StartError, s3proxy_jar

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def s3() -> Iterator[PrivateS3]:
    with PrivateS3() as server:
        yield server


@pytest.fixture
def bucket(s3: PrivateS3, request: pytest.FixtureRequest) -> str:
    """A new bucket named after the test."""
    name = request.node.name.replace("_", "-")[:55].strip("-")
    s3.create_bucket(name)
    return name


def _status(exc: ClientError) -> tuple[int, str]:
    return exc.response["ResponseMetadata"]["HTTPStatusCode"], exc.response["Error"]["Code"]


class _Recorder:
    """A loopback HTTP relay in front of the server that notes each request's method, path and
    headers: what a client library really sends (requests and answers pass unchanged, so the
    signatures, made for the relay's Host, still verify: S3Proxy checks them against the Host
    header it receives)."""

    def __init__(self, upstream: PrivateS3) -> None:
        self.requests: list[tuple[str, str, dict[str, str], int]] = []
        recorder = self

        class Relay(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                body = self.rfile.read(int(headers.get("content-length", 0)))
                conn = http.client.HTTPConnection(upstream.host, upstream.port, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=dict(self.headers.items()))
                    answer = conn.getresponse()
                    data = answer.read()
                finally:
                    conn.close()
                recorder.requests.append((self.command, self.path, headers, answer.status))
                self.send_response_only(answer.status, answer.reason)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                # A HEAD's answer has no body but the object's length.
                self.send_header(
                    "Content-Length",
                    answer.getheader("Content-Length", "0") if self.command == "HEAD" else str(len(data)),
                )
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _relay

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
        self.endpoint_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def commit_puts(self) -> list[tuple[str, str | None, int]]:
        """Each PUT of a Delta commit file: its name, its ``If-None-Match``, the answer's status;
        a copy (a "rename") is an assertion error."""
        puts = []
        for method, path, headers, status in self.requests:
            if "/_delta_log/" in path and path.endswith(".json") and method in ("PUT", "POST"):
                assert "x-amz-copy-source" not in headers, f"{path} was copied, not put"
                puts.append((path.rsplit("/", 1)[1], headers.get("if-none-match"), status))
        return puts


# --------------------------------------------------------------------------- the fixture
def test_a_missing_jar_is_one_line_naming_where_and_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYCANAL_S3PROXY_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"is not at .*run scripts/setup\.sh"):
        s3proxy_jar()


def test_setup_sh_fetches_the_version_the_fixture_runs() -> None:
    """setup.sh reads S3PROXY_VERSION out of the module: a renamed constant would leave it empty."""
    line = next(
        x for x in (REPO_ROOT / "scripts" / "setup.sh").read_text().splitlines() if "S3PROXY_VERSION=" in x
    )
    pattern = line.split("sed -n '", 1)[1].split("'", 1)[0]
    out = subprocess.run(
        ["sed", "-n", pattern, "src/pycanal/testing/s3.py"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    assert out.stdout.strip() == S3PROXY_VERSION


def test_restart_keeps_port_and_objects_and_stop_removes_the_directory() -> None:
    with PrivateS3() as server:
        server.create_bucket("kept")
        client = server.client()
        client.put_object(Bucket="kept", Key="a/b", Body=b"before")
        port, root = server.port, server.root_dir
        server.restart(kill=True)
        assert server.port == port
        assert client.get_object(Bucket="kept", Key="a/b")["Body"].read() == b"before"
    assert not server.running
    assert root is not None and not root.exists()


def test_wrong_keys_are_refused(s3: PrivateS3, bucket: str) -> None:
    """The server checks signatures: the generated keys are what lets a client in."""
    import boto3
    from botocore.config import Config

    other = boto3.client(
        "s3",
        endpoint_url=s3.endpoint_url,
        aws_access_key_id=s3.access_key,
        aws_secret_access_key="not-" + s3.secret_key,
        region_name=s3.region,
        config=Config(s3={"addressing_style": "path"}),
    )
    with pytest.raises(ClientError) as err:
        other.list_objects_v2(Bucket=bucket)
    assert _status(err.value)[0] == 403


def test_env_is_enough_for_a_child_process(s3: PrivateS3, bucket: str) -> None:
    """The standard AWS variables alone point boto3 in another process at the server."""
    s3.client().put_object(Bucket=bucket, Key="from-parent", Body=b"x")
    code = (
        "import boto3, sys; "
        "print([o['Key'] for o in boto3.client('s3').list_objects_v2(Bucket=sys.argv[1])['Contents']])"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | s3.env()
    out = subprocess.run(
        [sys.executable, "-c", code, bucket], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['from-parent']"


def test_two_servers_are_apart(s3: PrivateS3) -> None:
    """A second server beside the first has its own port, keys and buckets."""
    with PrivateS3() as second:
        assert second.port != s3.port and second.secret_key != s3.secret_key
        second.create_bucket("second")
        assert [b["Name"] for b in second.client().list_buckets()["Buckets"]] == ["second"]


def test_start_error_names_the_server() -> None:
    server = PrivateS3(properties={"jclouds.provider": "no-such-store"}, startup_timeout=30)
    with pytest.raises(S3StartError, match="S3Proxy"):
        server.start()


# --------------------------------------------------------------------------- S3 semantics
def test_if_none_match_refuses_an_existing_key(s3: PrivateS3, bucket: str) -> None:
    client = s3.client()
    client.put_object(Bucket=bucket, Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as err:
        client.put_object(Bucket=bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert _status(err.value) == (412, "PreconditionFailed")
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"first"


def _race(client: Any, bucket: str, key: str, writers: int) -> list[int]:
    """``writers`` threads released together, each putting its own body at ``key`` with
    ``If-None-Match: *``: the HTTP status each got."""
    gate = threading.Barrier(writers)
    outcome = [0] * writers

    def put(i: int) -> None:
        gate.wait()
        try:
            client.put_object(Bucket=bucket, Key=key, Body=f"writer {i}".encode() * 4096, IfNoneMatch="*")
            outcome[i] = 200
        except ClientError as exc:
            outcome[i] = _status(exc)[0]

    threads = [threading.Thread(target=put, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return outcome


def test_concurrent_conditional_puts_have_exactly_one_winner(s3: PrivateS3, bucket: str) -> None:
    """N writers released together on one key, round after round: one 200, N-1 412, and the
    object is the winner's (a check-then-write server lets several win)."""
    writers = 12
    client = s3.client(max_pool_connections=writers, retries={"max_attempts": 1})
    for r in range(8):
        outcome = _race(client, bucket, f"race/{r}", writers)
        assert Counter(outcome) == {200: 1, 412: writers - 1}, f"round {r}: {outcome}"
        body = client.get_object(Bucket=bucket, Key=f"race/{r}")["Body"].read()
        assert body == f"writer {outcome.index(200)}".encode() * 4096


def test_if_match_replaces_only_the_version_read(s3: PrivateS3, bucket: str) -> None:
    client = s3.client()
    etag = client.put_object(Bucket=bucket, Key="k", Body=b"v1")["ETag"]
    client.put_object(Bucket=bucket, Key="k", Body=b"v2", IfMatch=etag)
    with pytest.raises(ClientError) as err:
        client.put_object(Bucket=bucket, Key="k", Body=b"v3", IfMatch=etag)  # v1's etag: stale
    assert _status(err.value)[0] == 412
    assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v2"


def test_a_listing_returns_every_write_before_it(s3: PrivateS3, bucket: str) -> None:
    client = s3.client()
    written: list[str] = []
    for i in range(40):
        key = f"log/{i:020d}.json"
        client.put_object(Bucket=bucket, Key=key, Body=b"{}")
        written.append(key)
        listed = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="log/").get("Contents", [])]
        assert listed == written
    client.delete_object(Bucket=bucket, Key=written[0])
    listed = [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix="log/")["Contents"]]
    assert listed == written[1:]


def test_multipart_upload_over_5_mib_and_its_conditional_complete(s3: PrivateS3, bucket: str) -> None:
    client = s3.client()
    parts = [os.urandom(5 * 1024 * 1024), os.urandom(1024 * 1024 + 7)]  # all but the last >= 5 MiB

    def upload(key: str, **complete: str) -> None:
        upload_id = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
        done = []
        for n, data in enumerate(parts, 1):
            etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=n, Body=data)
            done.append({"PartNumber": n, "ETag": etag["ETag"]})
        client.complete_multipart_upload(
            Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": done}, **complete
        )

    upload("big", IfNoneMatch="*")
    got = client.get_object(Bucket=bucket, Key="big")
    assert got["ContentLength"] == sum(map(len, parts))
    assert got["Body"].read() == b"".join(parts)
    assert got["ETag"].strip('"').endswith("-2")  # S3's multipart etag: digest of digests, part count
    with pytest.raises(ClientError) as err:
        upload("big", IfNoneMatch="*")
    assert _status(err.value)[0] == 412


# --------------------------------------------------------------------------- the lake's libraries
def test_pyarrow_writes_and_reads_parquet(s3: PrivateS3, bucket: str) -> None:
    fs = s3.pyarrow_filesystem()
    table = pa.table({"id": list(range(1000)), "name": [f"row {i}" for i in range(1000)]})
    pq.write_table(table, f"{bucket}/dir/part-0.parquet", filesystem=fs)
    assert [info.path for info in fs.get_file_info(pafs.FileSelector(f"{bucket}/dir"))] == [
        f"{bucket}/dir/part-0.parquet"
    ]
    assert pq.read_table(f"{bucket}/dir/part-0.parquet", filesystem=fs).equals(table)


def test_delta_rs_commits_with_if_none_match(s3: PrivateS3, bucket: str) -> None:
    """delta-rs puts each commit file with ``If-None-Match: *`` (seen on the wire, no copy-and-delete
    "rename"), and another writer's version 1 that appeared since it opened the table is left
    alone: it commits version 2."""
    uri = f"s3://{bucket}/t"
    recorder = _Recorder(s3)
    try:
        options = {**s3.storage_options(), "AWS_ENDPOINT_URL": recorder.endpoint_url}
        write_deltalake(uri, pa.table({"x": [0]}), storage_options=options)
        stale = DeltaTable(uri, storage_options=options)
        other = json.dumps({"commitInfo": {"timestamp": 1, "operation": "OTHER WRITER"}}).encode() + b"\n"
        client = s3.client()
        client.put_object(Bucket=bucket, Key="t/_delta_log/00000000000000000001.json", Body=other)
        write_deltalake(stale, pa.table({"x": [1]}), mode="append")
    finally:
        recorder.close()
    assert recorder.commit_puts() == [
        ("00000000000000000000.json", "*", 200),
        ("00000000000000000002.json", "*", 200),  # it read version 1 before it committed
    ]
    assert (
        client.get_object(Bucket=bucket, Key="t/_delta_log/00000000000000000001.json")["Body"].read() == other
    )
    table = DeltaTable(uri, storage_options=s3.storage_options())
    assert table.version() == 2
    assert sorted(table.to_pyarrow_table()["x"].to_pylist()) == [0, 1]


def test_concurrent_delta_rs_writers_lose_no_commit(s3: PrivateS3, bucket: str) -> None:
    """Writers appending at once: every commit is a conditional put, a refused one (412) is
    retried as a later version, and the table ends with every writer's every commit."""
    uri = f"s3://{bucket}/t"
    recorder = _Recorder(s3)
    options = {**s3.storage_options(), "AWS_ENDPOINT_URL": recorder.endpoint_url}
    write_deltalake(uri, pa.table({"writer": [0], "n": [0]}), storage_options=options)
    writers, commits = 3, 6
    errors: list[BaseException] = []

    def append(writer: int) -> None:
        try:
            for n in range(commits):
                rows = pa.table({"writer": [writer], "n": [n]})
                write_deltalake(uri, rows, mode="append", storage_options=options)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(w,)) for w in range(1, writers + 1)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    finally:
        recorder.close()
    assert errors == []
    puts = recorder.commit_puts()
    assert {condition for _name, condition, _status in puts} == {"*"}
    assert {status for _name, _condition, status in puts} <= {200, 412}
    won = sorted(name for name, _condition, status in puts if status == 200)
    assert won == [f"{v:020d}.json" for v in range(writers * commits + 1)]
    table = DeltaTable(uri, storage_options=s3.storage_options())
    assert table.version() == writers * commits
    rows = table.to_pyarrow_table().to_pylist()
    assert sorted((r["writer"], r["n"]) for r in rows) == [(0, 0)] + [
        (w, n) for w in range(1, writers + 1) for n in range(commits)
    ]


# Spark runs in a child process: its JVM's jars are fixed when the JVM starts, and another module
# may already have started this process's JVM without s3a.
_SPARK_CHILD = """
import json, sys, tempfile
from pycanal.spark.session import s3a_options, spark_session
args = json.loads(sys.argv[1])
conf = {**s3a_options(), **args["spark"]}
spark = spark_session(tempfile.mkdtemp(prefix="pycanal-s3a-"), "pycanal-s3a-test", "local[2]", conf=conf)
table = spark.read.format("delta").load(args["read"])
rows = sorted(tuple(r) for r in table.collect())
spark.createDataFrame([(9, "spark")], "x long, who string").write.format("delta").mode("append").save(args["read"])
spark.stop()
print("ROWS " + json.dumps(rows))
"""


def test_spark_reads_and_appends_a_delta_rs_table_through_s3a(s3: PrivateS3, bucket: str) -> None:
    """Spark's Delta reads delta-rs's table through s3a and appends to it, and delta-rs reads that
    back. Spark's commit is a plain PUT, seen on the wire: Delta 4.4's only S3 LogStore
    (S3SingleDriverLogStore) excludes other writers only within its own driver JVM, although
    s3a could send ``If-None-Match`` (``fs.option.create.conditional.overwrite``)."""
    uri = f"s3://{bucket}/t"
    options = s3.storage_options()
    write_deltalake(uri, pa.table({"x": [1, 2], "who": ["delta-rs", "delta-rs"]}), storage_options=options)
    recorder = _Recorder(s3)
    spark = {**s3.spark_options(), "spark.hadoop.fs.s3a.endpoint": recorder.endpoint_url}
    try:
        out = subprocess.run(
            [sys.executable, "-c", _SPARK_CHILD, json.dumps({"spark": spark, "read": f"s3a://{bucket}/t"})],
            capture_output=True,
            text=True,
            timeout=480,
        )
    finally:
        recorder.close()
    rows = [line for line in out.stdout.splitlines() if line.startswith("ROWS ")]
    assert out.returncode == 0 and rows, out.stderr[-4000:]
    assert json.loads(rows[0][5:]) == [[1, "delta-rs"], [2, "delta-rs"]]
    assert recorder.commit_puts() == [("00000000000000000001.json", None, 200)]
    table = DeltaTable(uri, storage_options=options)
    assert table.version() == 1
    assert sorted(table.to_pyarrow_table()["x"].to_pylist()) == [1, 2, 9]
