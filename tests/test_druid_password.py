"""``canal.instance.enableDruid``: a dbPassword encrypted by Druid's own ``ConfigTools`` (the jar
Canal ships, run here) is decrypted with ``pwdPublicKey``, and a destination logs in with it."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from conf_support import one_destination_conf
from mq_support import canal_lib
from pycanal.common.druid import DruidPasswordError, decrypt_password
from pycanal.config import ConfigError
from pycanal.deployer.controller import Deployer
from pycanal.meta import ClientIdentity
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing import PrivateMariaDB
from pycanal.testing._process import find_java

PASSWORD = "s3cret, ü too"


def druid_encrypt(password: str) -> tuple[str, str]:
    """(public key, encrypted password) from ``java com.alibaba.druid.filter.config.ConfigTools``."""
    jar = next(canal_lib().glob("druid-*.jar"))
    out = subprocess.run(
        [find_java(), "-Dfile.encoding=UTF-8", "-cp", str(jar), "com.alibaba.druid.filter.config.ConfigTools", password],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return fields["publicKey"], fields["password"]


@pytest.fixture(scope="module")
def encrypted() -> tuple[str, str]:
    return druid_encrypt(PASSWORD)


def test_druids_own_encryption_decrypts(encrypted: tuple[str, str]) -> None:
    key, cipher = encrypted
    assert decrypt_password(key, cipher) == PASSWORD
    other_key, _ = druid_encrypt("another")
    for args, message in (
        # another key: a block past its modulus, or one that does not unpad (which, by chance)
        ((other_key, cipher), "was not made with this public key|not a 512-bit RSA block"),
        (("", cipher), "no public key"),
        (("bm90IGEga2V5", cipher), "not a Base64 X.509 RSA public key"),
        ((key, "***"), "not Base64"),
        ((key, base64.b64encode(b"\x01" * 64).decode()), "was not made with this public key"),
        ((key, "AAAA"), "not a 512-bit RSA block"),
    ):
        with pytest.raises(DruidPasswordError, match=message):
            decrypt_password(*args)


@pytest.fixture(scope="module")
def db() -> Iterator[PrivateMariaDB]:
    with PrivateMariaDB(server_id=62) as server:
        with server.root_connection() as root, root.cursor() as cur:
            cur.execute("CREATE USER 'druidrepl'@'127.0.0.1' IDENTIFIED BY %s", (PASSWORD,))
            cur.execute(
                "GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'druidrepl'@'127.0.0.1'"
            )
        server.execute("CREATE TABLE pycanal.druid_t (id INT PRIMARY KEY)")
        yield server


@pytest.mark.mariadb
def test_a_destination_logs_in_with_the_decrypted_password(
    db: PrivateMariaDB, encrypted: tuple[str, str], tmp_path: Path
) -> None:
    key, cipher = encrypted
    conf = {
        "canal.instance.enableDruid": "true",
        "canal.instance.pwdPublicKey": key,
        "canal.instance.dbPassword": cipher,
    }
    with Deployer(one_destination_conf(tmp_path / "conf", db, "druidrepl", "druid_t", **conf)) as deployer:
        server, client = deployer.server, ClientIdentity("d", 1001, "")
        server.subscribe(client)
        db.execute("INSERT INTO pycanal.druid_t VALUES (1), (2)")
        got: list[str] = []
        for _ in range(300):
            msg = server.get_without_ack(client, 100, timeout=0.1)
            if msg.id == -1:
                continue
            for e in msg.parsed_entries():
                if e.entryType == pb.ROWDATA and e.header.eventType == pb.INSERT:
                    change = pb.RowChange.FromString(e.storeValue)
                    got += [c.value for r in change.rowDatas for c in r.afterColumns]
            server.ack(client, msg.id)
            if len(got) == 2:
                break
        assert got == ["1", "2"]


@pytest.mark.mariadb
def test_a_key_that_does_not_fit_stops_the_deploy_naming_the_key(
    db: PrivateMariaDB, encrypted: tuple[str, str], tmp_path: Path
) -> None:
    key, cipher = encrypted
    for n, (conf, message) in enumerate([
        ({"canal.instance.dbPassword": cipher}, "canal.instance.enableDruid = true but no canal.instance.pwdPublicKey to decrypt canal.instance.dbPassword with"),
        ({"canal.instance.pwdPublicKey": key, "canal.instance.dbPassword": "canal"}, "canal.instance.dbPassword with canal.instance.pwdPublicKey (enableDruid = true): the encrypted password is not Base64"),
    ]):  # fmt: skip
        root = one_destination_conf(
            tmp_path / str(n), db, "druidrepl", "druid_t", **{"canal.instance.enableDruid": "true", **conf}
        )
        with pytest.raises(ConfigError) as info, Deployer(root):
            pass
        assert str(info.value) == f"{root}/d/instance.properties: {message}"
