"""canal-python 0.4 from PyPI, unmodified, against pycanal's TCP server.

canal-python's generated protobuf code needs protobuf <= 3.20, so it runs in its own venv
(``.venv-canal-python``, made by scripts/setup.sh) as a subprocess. What it sends, and what this
test covers: an auth with an empty password, a CLIENTROLLBACK(0) before SUBSCRIPTION (the
destination's instance not started yet, then started), GETs with timeout -1 / unit -1,
CLIENTACK without an answer, and a rollback of one batch.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from canal_python import instance_from_here, run_script
from pycanal.meta import ClientIdentity
from pycanal.server import CanalServerWithEmbedded
from pycanal.server.tcp import CanalTcpServer
from pycanal.testing import PrivateMariaDB

ROWS = 20

# Runs inside .venv-canal-python; prints one JSON line with what it saw.
CLIENT = r"""
import json, sys, time
from canal.client import Client
from canal.protocol import EntryProtocol_pb2 as pb

port, destination, client_id, table_filter, user, rows = sys.argv[1:7]
rows = int(rows)

def row_ids(message):
    out = []
    for entry in message["entries"]:
        if entry.entryType != pb.EntryType.ROWDATA:
            continue
        change = pb.RowChange()
        change.MergeFromString(entry.storeValue)
        for row in change.rowDatas:
            out += [int(c.value) for c in row.afterColumns if c.name == "id"]
    return out

def first_batch(get):
    deadline = time.time() + 30
    while True:
        message = get(6)  # a few transactions per batch
        if message["id"] or time.time() > deadline:
            return message
        time.sleep(0.05)

client = Client()
client.connect(host="127.0.0.1", port=int(port))
client.check_valid(username=user.encode(), password=b"")
client.subscribe(client_id=client_id.encode(), destination=destination.encode(), filter=table_filter.encode())
out = {}
if rows:
    first = first_batch(client.get_without_ack)
    out["first_id"], out["first"] = first["id"], row_ids(first)
    client.rollback(first["id"])  # no answer; the same rows come again
    again = first_batch(client.get_without_ack)
    out["again_id"], out["again"] = again["id"], row_ids(again)
    client.ack(again["id"])
    seen = list(out["again"])
    deadline = time.time() + 30
    while len(seen) < rows and time.time() < deadline:
        seen += row_ids(client.get(6))  # get = get_without_ack + ack
    out["all"] = seen
else:
    out["get_id"] = client.get(100)["id"]
client.disconnect()
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def servers(
    mariadb: PrivateMariaDB,
) -> Iterator[tuple[CanalServerWithEmbedded, CanalTcpServer, CanalTcpServer]]:
    mariadb.execute("CREATE TABLE pycanal.cp_compat (id INT PRIMARY KEY, v VARCHAR(20))")
    embedded = CanalServerWithEmbedded()
    embedded.add_instance(instance_from_here(mariadb, "cp_compat"), lazy=True)
    tcp = CanalTcpServer(embedded).start()
    tcp_user = CanalTcpServer(embedded, user="canal").start()  # canal.user without canal.passwd
    conn = mariadb.root_connection("pycanal")
    with conn.cursor() as cur:
        for i in range(0, ROWS, 4):
            cur.executemany("INSERT INTO cp_compat VALUES (%s, %s)", [(j, f"v{j}") for j in range(i, i + 4)])
            conn.commit()
    conn.close()
    try:
        yield embedded, tcp, tcp_user
    finally:
        tcp.stop()
        tcp_user.stop()
        embedded.stop()


def run_canal_python(port: int, client_id: int, user: str, rows: int) -> dict:
    proc, result = run_script(
        CLIENT, str(port), "cp_compat", str(client_id), r"pycanal\.cp_compat", user, str(rows), timeout=90
    )
    lines = proc.stdout.splitlines()
    assert "Auth succed" in lines and "Subscribe succed" in lines, proc.stdout  # canal-python's words
    return result


def test_canal_python_consumes_acks_and_rolls_back(servers) -> None:
    embedded, tcp, _ = servers
    assert not embedded.is_start("cp_compat")  # its rollback-before-subscribe hits a lazy instance
    result = run_canal_python(tcp.port, 1001, "", ROWS)
    assert 0 < len(result["first"]) < ROWS and result["again"] == result["first"]
    assert result["again_id"] != result["first_id"]  # rolled back: handed out again as a new batch
    assert result["all"] == list(range(ROWS))
    # its acks get no answer: wait until the server handled the last one
    client = ClientIdentity("cp_compat", 1001)
    end = time.monotonic() + 10
    while embedded.list_batch_ids(client):
        assert time.monotonic() < end, embedded.list_batch_ids(client)
        time.sleep(0.05)


def test_canal_python_with_canal_user_on_a_started_instance(servers) -> None:
    embedded, _, tcp_user = servers
    if not embedded.is_start("cp_compat"):
        embedded.start("cp_compat")
    # another client id: its rollback before subscribing is ignored, as in Canal; then one get
    result = run_canal_python(tcp_user.port, 1002, "canal", 0)
    assert isinstance(result["get_id"], int)
    assert ClientIdentity("cp_compat", 1002) in embedded.list_all_subscribe("cp_compat")
