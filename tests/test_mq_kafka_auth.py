"""``canal.serverMode = kafka`` against a secured broker: SASL_PLAINTEXT with KRaft's
StandardAuthorizer (``PrivateKafka(secured=True)``), configured with the Java client's keys as Canal's
docs give them (``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``).

* The fixture: no login, or a wrong one, is refused; a user reads and writes only what an ACL grants,
  with PLAIN and both SCRAM mechanisms.
* A user granted WRITE (and DESCRIBE) on the topic: each topic holds exactly the records built from the
  store batches, for PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (a password with quotes, a ``;`` and a
  backslash, through canal.properties' escapes and JAAS quoting); with ``canal.mq.transaction``, the
  ACLs on the transactional id and READ on the topic too.
* A wrong password: one line per (backed-off) try naming the destination, the broker and
  ``kafka.sasl.*``, nothing acked, the password in no line.
* A user without WRITE: one line naming the destination, the topic and the missing ACL, nothing acked;
  once WRITE is granted every row change arrives, none twice.
* An untranslatable ``kafka.sasl.jaas.config`` stops the start with one line naming it.
* ``pycanal pipeline --kafka --kafka-config``: Spark's Kafka source reads a secured topic into the lake.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from mq_kafka_support import (
    PYCANAL,
    Server,
    Workload,
    every_row_once,
    flat_rows,
    recorded_run,
    refused_start,
    wait_for,
    write_conf,
)
from mq_support import sample
from pycanal.deployer.mq import kafka_config
from pycanal.mq import MQDestination, MQOptions, build_records
from pycanal.mq.consumer import decode_record
from pycanal.mq.producer import KafkaSender, TransactionalKafkaSender
from pycanal.testing import PrivateMariaDB
from pycanal.testing.kafka import SASL_MECHANISMS, PrivateKafka, jaas_quote

pytestmark = pytest.mark.mariadb

# Every character JAAS quoting and canal.properties escaping must carry through.
ODD_PASSWORD = 'c4n"al; p\\w=rd'
MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@pytest.fixture(scope="module")
def secured() -> Iterator[PrivateKafka]:
    """One secured broker for this module; each test has users of its own, so ACLs do not mix."""
    users = {"canal": ODD_PASSWORD, "txn": "", "denied": "", "late": "", "wrong": "", "reader": ""}
    with PrivateKafka(secured=True, users=users) as broker:
        yield broker


def _suffix() -> str:
    return uuid.uuid4().hex[:8]


def canal_sasl(user: str, password: str, mechanism: str = "PLAIN") -> dict[str, str]:
    """Canal's three keys for ``user``, as canal.properties text values (backslashes escaped)."""
    jaas = f"{MODULES[mechanism]} required username={jaas_quote(user)} password={jaas_quote(password)};"
    return {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.jaas.config": jaas.replace("\\", "\\\\"),
    }


def _produce(config: dict[str, object], topic: str) -> object:
    """The delivery error of one record (None: delivered)."""
    errors: list[object] = []
    producer = Producer({**config, "message.timeout.ms": 10000})
    producer.produce(topic, b"x", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(15)
    return errors[0] if errors else "not delivered"


def _cursor_saved(conf: Path) -> bool:
    meta = conf / "data" / "shop" / "meta.dat"
    return meta.exists() and '"cursor"' in meta.read_text()


# ---------------------------------------------------------------------------------- the fixture
def test_secured_broker_wants_a_login_and_an_acl(secured: PrivateKafka) -> None:
    topic = f"auth-fixture-{_suffix()}"
    secured.create_topic(topic)
    for config in (
        {"bootstrap.servers": secured.bootstrap_servers},  # PLAINTEXT on a SASL listener
        {**secured.user_config("denied"), "sasl.password": "not-it"},
    ):
        with pytest.raises(KafkaException):
            AdminClient(config).list_topics(timeout=3)
    for mechanism in SASL_MECHANISMS:
        err = _produce(secured.user_config("denied", mechanism), topic)
        assert err is not None and err.code() == 29, err  # TOPIC_AUTHORIZATION_FAILED
    secured.grant("denied", "WRITE", topic=topic)
    assert [_produce(secured.user_config("denied", m), topic) for m in SASL_MECHANISMS] == [None] * 3
    assert [r.value for r in secured.records(topic)] == [b"x"] * 3  # the fixture reads as admin
    secured.revoke("denied", "WRITE", topic=topic)
    assert _produce(secured.user_config("denied"), topic) is not None


# ---------------------------------------------------------------------------------- delivery
@pytest.mark.parametrize("mechanism", SASL_MECHANISMS)
def test_granted_user_topics_hold_exactly_the_built_records(
    mechanism: str, mariadb: PrivateMariaDB, secured: PrivateKafka, tmp_path: Path
) -> None:
    sfx = _suffix()
    topic = f"auth-{sfx}"
    work = Workload(mariadb, sfx, seed=31)
    start = mariadb.current_binlog()
    work.create()
    secured.create_topic(topic, 3)
    secured.grant("canal", "WRITE", "DESCRIBE", topic=topic)
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=secured.bootstrap_servers,
        tables=work.regex,
        canal=canal_sasl("canal", ODD_PASSWORD, mechanism),
        instance={
            "canal.mq.topic": topic,
            "canal.mq.partitionsNum": 3,
            "canal.mq.partitionHash": "pycanal\\\\..*:$pk$",
        },
    )
    built, cfg = recorded_run(conf, work, lambda cfg: KafkaSender(kafka_config(cfg)), build_records)
    assert kafka_config(cfg)["sasl.password"] == ODD_PASSWORD
    want: dict[int, list[bytes | None]] = {}
    for *_, records in built:
        for r in records:
            assert r.topic == topic
            want.setdefault(r.partition, []).append(r.value)
    got: dict[int, list[bytes | None]] = {}
    for rec in secured.records(topic):
        got.setdefault(rec.partition, []).append(rec.value)
    assert got == want and len(got) == 3
    rows, _ = flat_rows(secured.records(topic))
    assert len(rows) == sum(work.rows.values()) == len({r.key for r in rows})


def test_transactional_user_with_its_acls_delivers_once(
    mariadb: PrivateMariaDB, secured: PrivateKafka, tmp_path: Path
) -> None:
    """``canal.mq.transaction``: WRITE and DESCRIBE on the topic and on the transactional id
    ``pycanal-<destination>``, and READ on the topic (the marks are read back at start)."""
    sfx = _suffix()
    topic = f"auth-tx-{sfx}"
    work = Workload(mariadb, sfx, seed=37)
    start = mariadb.current_binlog()
    work.create()
    secured.create_topic(topic, 2)
    prefix = f"tx{sfx}"
    secured.grant("txn", "WRITE", "DESCRIBE", "READ", topic=topic)
    secured.grant("txn", "WRITE", "DESCRIBE", transactional_id=f"{prefix}-shop")
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=secured.bootstrap_servers,
        tables=work.regex,
        canal={
            **canal_sasl("txn", secured.passwords["txn"], "SCRAM-SHA-256"),
            "canal.mq.transaction": "true",
            "kafka.transactional.id": prefix,
        },
        instance={
            "canal.mq.topic": topic,
            "canal.mq.partitionsNum": 2,
            "canal.mq.partitionHash": ".*\\\\..*",
        },
    )
    built, _ = recorded_run(
        conf, work, lambda cfg: TransactionalKafkaSender(kafka_config(cfg), "shop"), build_records
    )
    want = sorted((r.partition, r.value) for *_, records in built for r in records)
    got = sorted((rec.partition, rec.value) for rec in secured.records(topic, committed=True))
    assert got == want
    assert len(flat_rows(secured.records(topic, committed=True))[0]) == sum(work.rows.values())


# ---------------------------------------------------------------------------------- failures
def test_wrong_password_is_one_line_per_try_and_nothing_acked(
    mariadb: PrivateMariaDB, secured: PrivateKafka, tmp_path: Path, servers: list[Server]
) -> None:
    sfx = _suffix()
    topic = f"auth-badpw-{sfx}"
    secured.create_topic(topic)
    secured.grant("wrong", "WRITE", "DESCRIBE", topic=topic)  # only the password is wrong
    work = Workload(mariadb, sfx, seed=41)
    start = mariadb.current_binlog()
    work.create()
    bad = f"Not-{secured.passwords['wrong']}"
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=secured.bootstrap_servers,
        tables=work.regex,
        canal=canal_sasl("wrong", bad, "SCRAM-SHA-512"),
        instance={"canal.mq.topic": topic},
    )
    server = Server(conf, tmp_path / "server.log").start()
    servers.append(server)
    work.round(0)
    wait_for("the send failure", lambda: "event=mq-send-failed" in server.text(), timeout=60)
    t0 = time.monotonic()
    time.sleep(12)  # tries at about 0, 1.5, 3.5, 6.5 and 11.5 s: backed off, not a loop
    failed = [ln for ln in server.text().splitlines() if "event=mq-send-failed" in ln]
    line = failed[0]
    assert "destination=shop" in line and f"topic={topic}" in line, line
    assert f"Kafka at {secured.bootstrap_servers}: authentication failed for user 'wrong'" in line, line
    assert "SCRAM-SHA-512" in line and "kafka.sasl.jaas.config" in line, line
    assert 2 <= len(failed) <= 7, failed
    others = [ln for ln in server.text().splitlines() if " ERROR " in ln or " CRITICAL " in ln]
    assert others == failed  # librdkafka's own line at each reconnect is not repeated at ERROR
    elapsed = time.monotonic() - t0
    assert not _cursor_saved(conf)  # nothing acked
    assert server.stop() == 0
    assert elapsed < 30
    text = server.text()
    assert bad not in text and "Traceback" not in text
    assert secured.records(topic) == []


def test_user_without_write_is_one_line_then_everything_once_granted(
    mariadb: PrivateMariaDB, secured: PrivateKafka, tmp_path: Path, servers: list[Server]
) -> None:
    sfx = _suffix()
    topic = f"auth-late-{sfx}"
    secured.create_topic(topic)
    secured.grant("late", "DESCRIBE", topic=topic)  # may see the topic, not write to it
    work = Workload(mariadb, sfx, seed=43)
    start = mariadb.current_binlog()
    work.create()
    conf = write_conf(
        tmp_path / "conf",
        mariadb,
        start,
        bootstrap=secured.bootstrap_servers,
        tables=work.regex,
        canal={**canal_sasl("late", secured.passwords["late"]), "canal.file.flush.period": 200},
        instance={"canal.mq.topic": topic},
    )
    server = Server(conf, tmp_path / "server.log").start()
    servers.append(server)
    work.round(0)
    wait_for("the send failure", lambda: "event=mq-send-failed" in server.text(), timeout=60)
    line = next(ln for ln in server.text().splitlines() if "event=mq-send-failed" in ln)
    assert "destination=shop" in line and f"topic={topic}" in line, line
    assert "user 'late' is not authorized: it needs WRITE and DESCRIBE on the topic" in line, line
    time.sleep(1)  # two flush periods
    assert not _cursor_saved(conf)  # nothing acked
    assert server.proc is not None and server.proc.poll() is None  # still running, retrying
    secured.grant("late", "WRITE", topic=topic)
    work.round(1)
    expected = sum(work.rows.values())
    every_row_once(lambda: secured.records(topic), expected)
    assert "event=mq-send-recovered" in server.text()
    assert 1 <= server.text().count("event=mq-send-failed") <= 12
    assert server.stop() == 0
    assert _cursor_saved(conf)


@pytest.mark.parametrize(
    ("canal", "needle"),
    [
        (
            {
                "kafka.sasl.mechanism": "SCRAM-SHA-256",
                "kafka.sasl.jaas.config": f'{MODULES["PLAIN"]} required username="u" password="Pw-9z";',
            },
            "does not go with kafka.sasl.mechanism=SCRAM-SHA-256",
        ),
        (
            {"kafka.sasl.jaas.config": f'{MODULES["PLAIN"]} required username="u" password="Pw-9z"'},
            "must end with ';'",
        ),
    ],
    ids=["module-for-another-mechanism", "no-terminator"],
)
def test_untranslatable_jaas_line_stops_the_start_with_one_line(
    canal: dict[str, str], needle: str, mariadb: PrivateMariaDB, tmp_path: Path
) -> None:
    done = refused_start(
        mariadb,
        tmp_path / "conf",
        {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN", **canal},
    )
    errors = [ln for ln in done.stderr.splitlines() if "kafka.sasl.jaas.config" in ln]
    assert len(errors) == 1 and needle in errors[0], done.stderr
    assert "Pw-9z" not in done.stderr + done.stdout


# ---------------------------------------------------------------------------------- pycanal tail
def _tail(
    secured: PrivateKafka, topic: str, *config: str, limit: int = 1
) -> subprocess.CompletedProcess[str]:
    args = [*PYCANAL, "tail", "--kafka", secured.bootstrap_servers, "--topic", topic, "--limit", str(limit)]
    for item in config:
        args += ["--kafka-config", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def test_tail_kafka_logs_in_with_canal_style_settings(secured: PrivateKafka) -> None:
    topic = f"auth-tail-{_suffix()}"
    secured.create_topic(topic)
    records = build_records(7, sample(), False, MQDestination(topic), MQOptions(flat_message=True), 1)
    producer = Producer(secured.client_config())
    for r in records:
        producer.produce(topic, r.value, partition=r.partition)
    assert producer.flush(15) == 0
    secured.grant("reader", "READ", topic=topic)
    secured.grant("reader", "READ", group="pycanal-tail")
    password = secured.passwords["reader"]
    login = [
        "kafka.security.protocol=SASL_PLAINTEXT",  # the kafka. prefix of canal.properties may stay
        "sasl.mechanism=SCRAM-SHA-256",
        f"sasl.jaas.config={MODULES['SCRAM-SHA-256']} required username=reader password={jaas_quote(password)};",
    ]
    rows = sum(decode_record(topic, 0, 0, r.value).row_count for r in records)
    done = _tail(secured, topic, *login, limit=rows)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == [(r.value or b"").decode() for r in records] + [
        ""
    ]  # no splitlines: U+2028

    wrong = [*login[:2], login[2].replace(jaas_quote(password), '"Wrong-pw-7"')]
    done = _tail(secured, topic, *wrong)
    assert done.returncode == 1 and "Authentication failed" in done.stderr, done.stderr
    assert f"--kafka {secured.bootstrap_servers} --topic {topic}:" in done.stderr.splitlines()[-1]
    assert "Wrong-pw-7" not in done.stderr + done.stdout and "Traceback" not in done.stderr

    done = _tail(
        secured, topic, *login[:2], f'sasl.jaas.config={MODULES["PLAIN"]} required password="Pw-9z";'
    )
    assert done.returncode == 2, done.stderr
    assert "--kafka-config sasl.jaas.config: " in done.stderr and "SCRAM-SHA-256" in done.stderr
    assert "Pw-9z" not in done.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--kafka", "127.0.0.1:9", "--topic", "t", "--kafka-config", "sasl.password"],
            "--kafka-config #1: ",
        ),
        (["--kafka", "127.0.0.1:9", "--topic", "t", "--kafka-config", "=x"], "--kafka-config #1: "),
        (["--address", "127.0.0.1:9", "--destination", "d", "--kafka-config", "a=b"], "only with --kafka"),
    ],
    ids=["no-equals", "no-key", "without-kafka"],
)
def test_tail_kafka_config_errors_are_one_line(args: list[str], needle: str) -> None:
    done = subprocess.run([*PYCANAL, "tail", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and needle in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "sasl.password" not in done.stderr


def test_pipeline_reads_secured_topics_with_kafka_config(
    mariadb: PrivateMariaDB, secured: PrivateKafka, tmp_path: Path, servers: list[Server]
) -> None:
    """``pycanal pipeline --kafka --kafka-config``: Spark's Kafka source logs in with the Java
    client's settings (SCRAM-SHA-512) and the lake gets every row of the secured topic; the
    password is in no line of the job's output."""
    from pycanal.spark.check import compare_table

    sfx = _suffix()
    topic = f"auth-spark-{sfx}"
    secured.create_topic(topic)
    work = Workload(mariadb, sfx, seed=44, names=("a",))
    start = mariadb.current_binlog()
    work.create()
    password = secured.passwords["admin"]
    conf = write_conf(
        tmp_path / "conf", mariadb, start, bootstrap=secured.bootstrap_servers, tables=work.regex,
        canal=canal_sasl("admin", password, "SCRAM-SHA-512"), instance={"canal.mq.topic": topic},
    )  # fmt: skip
    servers.append(Server(conf, tmp_path / "server.log").start())
    work.round(0)
    jaas = (
        f"{MODULES['SCRAM-SHA-512']} required username={jaas_quote('admin')} password={jaas_quote(password)};"
    )
    lake, log = tmp_path / "lake", tmp_path / "job.log"
    with log.open("wb") as out:
        job = subprocess.Popen(
            [*PYCANAL, "pipeline", "--kafka", secured.bootstrap_servers, "--topic", topic, "--lake", str(lake),
             "--trigger", "500 milliseconds", "--master", "local[2]",
             "--kafka-config", "security.protocol=SASL_PLAINTEXT", "--kafka-config", "sasl.mechanism=SCRAM-SHA-512",
             "--kafka-config", f"sasl.jaas.config={jaas}"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:

        def equal() -> bool:
            assert job.poll() is None, log.read_text()[-3000:]
            with mariadb.root_connection("pycanal") as conn:
                try:
                    return compare_table(conn, lake, "pycanal", work.table("a"), "id").equal
                except Exception:  # noqa: BLE001 - no table yet
                    return False

        wait_for("the lake equal to the source", equal, timeout=180)
        assert password not in log.read_text()
    finally:
        os.killpg(job.pid, signal.SIGTERM)
        job.wait(60)
