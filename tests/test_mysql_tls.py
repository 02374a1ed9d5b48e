"""TLS to the source (``canal.instance.master.sslMode`` and its keystores): the settings, and a
destination streaming from a MariaDB whose replication account requires TLS, every connection of
it (replication and control) encrypted; DISABLED is plain TCP on every one of them."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from conf_support import one_destination_conf
from pycanal.config import ConfigError
from pycanal.deployer.controller import Deployer
from pycanal.meta import ClientIdentity
from pycanal.mysql import AuthError, ReplicaConnection, TLSError
from pycanal.mysql.tls import TLSConfigError, TlsSettings
from pycanal.parse.parser import MysqlEventParser
from pycanal.protocol import EntryProtocol_pb2 as pb
from pycanal.testing import PrivateMariaDB
from tls_support import Certs, client_store, make_certs, trust_store

PREFIX = "canal.instance.master."
_PASSWORD = {"canal.instance.dbPassword": "pw"}  # the accounts' (tls_db)


# ------------------------------------------------------------------------------ settings (no server)
@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_modes_give_the_checks_canal_names(certs: Certs, tmp_path: Path) -> None:
    assert TlsSettings().context is None and TlsSettings("disabled").context is None
    store = f"file:{trust_store(certs, tmp_path / 'ca.p12', 'pw')}"
    for mode, verify, hostname in (
        ("PREFERRED", ssl.CERT_NONE, False),
        ("REQUIRED", ssl.CERT_NONE, False),
        ("VERIFY_CA", ssl.CERT_REQUIRED, False),
        ("VERIFY_IDENTITY", ssl.CERT_REQUIRED, True),
    ):
        ctx = TlsSettings(mode, trust_store_url=store, trust_store_password="pw").context
        assert ctx is not None and (ctx.verify_mode, ctx.check_hostname) == (verify, hostname), mode
        assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    ctx = TlsSettings("VERIFY_CA", trust_store_url=store, trust_store_password="pw").context
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "pycanal test CA"),),)]
    ctx = TlsSettings("REQUIRED", tls_versions="TLSv1.3").context
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    # A PEM trust store, typed by its name; the context is built once and shared.
    settings = TlsSettings("VERIFY_CA", trust_store_url=str(certs.ca))
    assert len(settings.context.get_ca_certs()) == 1 and settings.context is settings.context


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "ON"}, "sslMode 'ON': not one of DISABLED, PREFERRED"),
        ({"tls_versions": "TLSv1.2,SSLv3"}, "tlsVersions 'TLSv1.2,SSLv3': SSLv3 is not one of"),
        ({"mode": "VERIFY_CA", "trust_store_url": "/etc/canal/truststore", "trust_store_type": "jks"},
         "trustCertificateKeyStoreType 'JKS': pycanal reads PKCS12 or PEM keystores "
         "(convert it: keytool -importkeystore -deststoretype PKCS12)"),
        ({"mode": "VERIFY_CA", "trust_store_url": "/nowhere/ca.p12"}, "trustCertificateKeyStoreUrl '/nowhere/ca.p12': No such file"),
        ({"mode": "VERIFY_CA", "trust_store_url": "http://x/ca.p12"}, "only file: URLs and paths are read (not http:)"),
        ({"trust_store_url": "{p12}", "trust_store_password": "wrong", "mode": "VERIFY_CA"}, "not a PKCS12 keystore or a wrong password"),
        ({"client_store_url": "{ca}"}, "clientCertificateKeyStoreUrl '{ca}': no usable certificate and private key"),
        ({"client_store_url": "{p12}", "client_store_password": "pw"}, "the keystore holds no private key"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_one_line_naming_its_key(
    certs: Certs, tmp_path: Path, kwargs: dict, message: str
) -> None:
    p12 = str(trust_store(certs, tmp_path / "ca.p12", "pw"))
    kwargs = {k: v.format(p12=p12, ca=certs.ca) for k, v in kwargs.items()}
    kwargs.setdefault("mode", "REQUIRED")
    with pytest.raises(TLSConfigError) as info:
        _ = TlsSettings(**kwargs, prefix=PREFIX).context
    text = str(info.value)
    assert text.startswith(PREFIX) and message.format(ca=certs.ca) in text and "\n" not in text


# ------------------------------------------------------------------------------ against MariaDB
@pytest.fixture(scope="module")
def tls_db(certs: Certs) -> Iterator[PrivateMariaDB]:
    """A MariaDB with TLS and accounts that require it (``tlsrepl``) or a client certificate
    signed by the CA (``x509repl``), with what a destination needs."""
    with PrivateMariaDB(server_id=61, extra_args=certs.server_args()) as db:
        with db.root_connection() as root, root.cursor() as cur:
            for user, require in (("tlsrepl", "SSL"), ("x509repl", "X509")):
                cur.execute(f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw' REQUIRE {require}")
                cur.execute(
                    f"GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'127.0.0.1'"
                )
        db.execute("CREATE TABLE pycanal.tls_t (id INT PRIMARY KEY, v VARCHAR(20))")
        yield db


def _rows(deployer: Deployer, expected: int) -> list[int]:
    server, client = deployer.server, ClientIdentity("d", 1001, "")
    server.subscribe(client)
    got: list[int] = []
    for _ in range(300):
        msg = server.get_without_ack(client, 100, timeout=0.1)
        for e in msg.parsed_entries() if msg.id != -1 else []:
            if e.entryType == pb.ROWDATA and e.header.eventType == pb.INSERT:
                rows = pb.RowChange.FromString(e.storeValue).rowDatas
                got += [int(c.value) for r in rows for c in r.afterColumns if c.name == "id"]
        if msg.id != -1:
            server.ack(client, msg.id)
        if len(got) >= expected:
            break
    return got


@pytest.mark.mariadb
@pytest.mark.parametrize(
    ("user", "keys"),
    [
        ("tlsrepl", {"sslMode": "REQUIRED"}),
        ("tlsrepl", {"sslMode": "VERIFY_CA", "trustCertificateKeyStoreUrl": "file:{trust}",
                     "trustCertificateKeyStorePassword": "pw"}),
        ("tlsrepl", {"sslMode": "VERIFY_IDENTITY", "trustCertificateKeyStoreUrl": "{ca}", "tlsVersions": "TLSv1.3"}),
        ("x509repl", {"sslMode": "VERIFY_CA", "trustCertificateKeyStoreUrl": "{ca}",
                      "clientCertificateKeyStoreUrl": "file:{client}", "clientCertificateKeyStorePassword": "pw",
                      "clientCertificateKeyStoreType": "PKCS12"}),
    ],
)  # fmt: skip
def test_a_destination_streams_over_tls(
    tls_db: PrivateMariaDB, certs: Certs, tmp_path: Path, user: str, keys: dict
) -> None:
    files = {"trust": trust_store(certs, tmp_path / "ca.p12", "pw"), "ca": certs.ca,
             "client": client_store(certs, tmp_path / "client.p12", "pw")}  # fmt: skip
    instance = {PREFIX + k: v.format(**files) for k, v in keys.items()}
    root = one_destination_conf(tmp_path / "conf", tls_db, user, "tls_t", **_PASSWORD, **instance)
    # The account refuses any connection without TLS (a client certificate for x509repl): the
    # start-position search, the schema history and the dump all connect with these settings.
    with Deployer(root) as deployer:
        first = tls_db.query("SELECT COALESCE(MAX(id), 0) FROM pycanal.tls_t")[0][0]
        ids = list(range(first + 1, first + 4))
        for i in ids:
            tls_db.execute("INSERT INTO pycanal.tls_t VALUES (%s, 'x')", (i,))
        assert _rows(deployer, 3) == ids


@pytest.mark.mariadb
def test_disabled_is_plain_tcp_on_every_connection(tls_db: PrivateMariaDB) -> None:
    """Canal's default: no TLS even where the server offers it (PyMySQL >= 2.2 alone would try it)."""
    parser = MysqlEventParser(
        "d", (tls_db.host, tls_db.port), tls_db.repl_user, tls_db.repl_password, sink=list
    )
    with parser._control(parser.master_address) as conn, conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        assert cur.fetchone()[1] == ""
    with parser._replica(parser.master_address, server_id=None).connect() as repl:
        assert not repl.tls
        with repl.control_connection() as conn, conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            assert cur.fetchone()[1] == ""
    # REQUIRED: both encrypted.
    parser = MysqlEventParser("d", (tls_db.host, tls_db.port), "tlsrepl", "pw", sink=list,
                              master_tls=TlsSettings("REQUIRED"))  # fmt: skip
    with parser._control(parser.master_address) as conn, conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        assert cur.fetchone()[1]
    with parser._replica(parser.master_address, server_id=None).connect() as repl:
        assert repl.tls


@pytest.mark.mariadb
def test_the_snapshots_source_connections_are_plain_tcp(tls_db: PrivateMariaDB) -> None:
    """The snapshot's PyMySQL connections (its planner's, its executors'), as its connectorx and
    binlog-window reads: no TLS where the server offers it (PyMySQL >= 2.2 alone would try it)."""
    from pycanal.snapshot.reader import connect

    with (
        connect(tls_db.host, tls_db.port, tls_db.repl_user, tls_db.repl_password) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        assert cur.fetchone()[1] == ""


@pytest.mark.mariadb
def test_preferred_uses_tls_where_offered(tls_db: PrivateMariaDB, mariadb: PrivateMariaDB) -> None:
    ctx = TlsSettings("PREFERRED").context
    for db, encrypted in ((tls_db, True), (mariadb, False)):
        with ReplicaConnection(
            db.host, db.port, db.repl_user, db.repl_password, ssl=ctx, tls_preferred=True
        ) as conn:
            assert conn.tls is encrypted
    # REQUIRED against a server without TLS: refused, naming why.
    with pytest.raises(AuthError, match="does not offer it"):
        ReplicaConnection(
            mariadb.host, mariadb.port, mariadb.repl_user, mariadb.repl_password, ssl=ctx
        ).connect()


@pytest.mark.mariadb
def test_a_ca_that_did_not_sign_the_server_fails_and_a_bad_store_stops_the_deploy(
    tls_db: PrivateMariaDB, tmp_path: Path
) -> None:
    other = make_certs(tmp_path / "other", name="another CA")
    ctx = TlsSettings("VERIFY_CA", trust_store_url=str(other.ca)).context
    with pytest.raises(TLSError, match="(?i)certificate"):
        ReplicaConnection(tls_db.host, tls_db.port, "tlsrepl", "pw", ssl=ctx).connect()
    jks = {
        PREFIX + "sslMode": "VERIFY_CA",
        PREFIX + "trustCertificateKeyStoreUrl": "file:/etc/canal/truststore.jks",
    }
    root = one_destination_conf(tmp_path / "conf", tls_db, "tlsrepl", "tls_t", **_PASSWORD, **jks)
    with pytest.raises(ConfigError) as info, Deployer(root):
        pass
    assert str(info.value) == (
        f"{root}/d/instance.properties: {PREFIX}trustCertificateKeyStoreUrl 'file:/etc/canal/truststore.jks' (no "
        "type: Canal's default JKS): pycanal reads PKCS12 or PEM keystores (convert it: keytool -importkeystore "
        "-deststoretype PKCS12)"
    )


@pytest.mark.mariadb
def test_a_snapshot_chunk_reads_over_tls_on_every_connection(tls_db: PrivateMariaDB, certs: Certs) -> None:
    """``sourceSslMode``: a chunk's PyMySQL connection, connectorx's read and the binlog window's
    replica all use TLS; an account that requires it reads the chunk and its window in REQUIRED
    and VERIFY_CA (the test CA), and cannot connect in the default DISABLED."""
    from pycanal.snapshot import describe
    from pycanal.snapshot.chunks import Chunk
    from pycanal.snapshot.reader import Source
    from pycanal.snapshot.window import changed_keys, read_chunk_window

    tls_db.execute("CREATE TABLE pycanal.tls_snap (id INT PRIMARY KEY, v VARCHAR(20))")
    tls_db.execute("INSERT INTO pycanal.tls_snap VALUES " + ", ".join(f"({i}, 'v{i}')" for i in range(50)))
    for mode, ca in (("REQUIRED", ""), ("VERIFY_CA", str(certs.ca))):
        source = Source(tls_db.host, tls_db.port, "tlsrepl", "pw", mode, ca)
        with source.connect() as conn:
            table = describe(conn, "pycanal", "tls_snap")
            read = read_chunk_window(conn, source, table, Chunk("pycanal", "tls_snap", None, None), 5400)
        assert read.num_rows == 50, mode
        low = tls_db.current_binlog()  # the window's replica: only where the binlog moved
        tls_db.execute("UPDATE pycanal.tls_snap SET v = %s WHERE id = 7", (mode,))
        assert changed_keys(source, 5401, table, low, tls_db.current_binlog()) == {(7,)}, mode
    with pytest.raises(Exception, match="Access denied"):
        Source(tls_db.host, tls_db.port, "tlsrepl", "pw").connect()


def test_the_snapshot_tls_options_are_checked(tmp_path: Path) -> None:
    from pycanal.spark.canal_options import OptionError, snapshot_options

    base = {"snapshot": "initial", "source": "127.0.0.1:3306", "filter": "db\\..*"}
    assert snapshot_options(base).source.tls.mode == "DISABLED"
    assert snapshot_options(base | {"sourcesslmode": "verify_ca"}).ssl_mode == "VERIFY_CA"
    with pytest.raises(OptionError, match="option sourceSslMode 'SOMETIMES': must be one of DISABLED"):
        snapshot_options(base | {"sourcesslmode": "SOMETIMES"})
    with pytest.raises(OptionError, match="option sourceSslCa .*: is not a file"):
        snapshot_options(base | {"sourcesslca": str(tmp_path / "none.pem")})


@pytest.mark.mariadb
def test_closing_a_tls_dump_from_another_thread_wakes_its_reader(tls_db: PrivateMariaDB) -> None:
    """``close()`` from another thread (a parser's stop) ends a reader blocked on a TLS dump at
    once. It closed the socket under the reader, whose next poll() could land on the same file
    descriptor reused by the dump's kill connection: 2 stops in 5 waited ~24 s (the read timeout)."""
    import threading
    import time

    for trial in range(10):
        conn = ReplicaConnection(tls_db.host, tls_db.port, "tlsrepl", "pw", server_id=7700 + trial,
                                 ssl=True, read_timeout=25)  # fmt: skip
        conn.connect()
        conn.dump(*tls_db.current_binlog())
        reader = threading.Thread(target=lambda c=conn: [None for _ in c.frames()])
        reader.start()
        time.sleep(0.2 + 0.03 * trial)
        began = time.monotonic()
        conn.close()
        reader.join(10)
        assert not reader.is_alive() and time.monotonic() - began < 5, f"trial {trial}"
