"""The Kafka producer's configuration from a Canal conf dir (no broker): Canal's ``kafka.*`` keys and
their <= 1.1.4 names, the librdkafka spellings, the MQ options and a destination's routing keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from pycanal.config import CanalConfig, ConfigError
from pycanal.deployer.mq import kafka_config, mq_destination, mq_filter_transaction_entry, mq_options
from pycanal.mq import MQDestination
from pycanal.mq.kafka_config import ProducerConfigError, jaas_login, producer_config
from pycanal.mq.producer import KafkaSender


def _conf(tmp_path: Path, server: str, instance: str = "canal.mq.topic = t\n") -> CanalConfig:
    (tmp_path / "shop").mkdir()
    (tmp_path / "canal.properties").write_text(
        "canal.serverMode = kafka\ncanal.destinations = shop\ncanal.conf.dir = .\n" + server
    )
    (tmp_path / "shop" / "instance.properties").write_text(instance)
    return CanalConfig.load(tmp_path, environ={})


def test_canal_defaults_and_librdkafka_names(tmp_path: Path) -> None:
    config = kafka_config(_conf(tmp_path, ""))
    assert config == {
        "bootstrap.servers": "127.0.0.1:9092",
        "acks": "all",
        "compression.type": "none",
        "batch.size": "16384",
        "linger.ms": "1",
        "message.max.bytes": "1048576",  # max.request.size
        "queue.buffering.max.kbytes": "32768",  # buffer.memory, in KiB
        "max.in.flight.requests.per.connection": "1",
        "retries": "0",
        "message.timeout.ms": "120000",  # the Java client's delivery.timeout.ms default
    }


def test_kafka_keys_legacy_names_and_the_forced_in_flight(tmp_path: Path) -> None:
    cfg = _conf(
        tmp_path,
        "kafka.bootstrap.servers = a:1\n"
        "canal.mq.servers = b:2\n"  # a <= 1.1.4 name wins over its kafka.* key, as in Canal
        "kafka.linger.ms = 20\n"
        "kafka.max.in.flight.requests.per.connection = 5\n"
        "kafka.delivery.timeout.ms = 3000\n"
        "kafka.value.serializer = org.apache.kafka.common.serialization.ByteArraySerializer\n"
        "kafka.client.id = canal\n",  # a librdkafka key of the same name passes as written
    )
    config = kafka_config(cfg)
    assert config["bootstrap.servers"] == "b:2"
    assert config["linger.ms"] == "20"
    assert config["max.in.flight.requests.per.connection"] == "1"
    assert config["message.timeout.ms"] == "3000"
    assert config["client.id"] == "canal"
    assert "value.serializer" not in config
    KafkaSender(config).close(0)  # librdkafka takes every key


def test_environment_overrides_a_shipped_key(tmp_path: Path) -> None:
    (tmp_path / "shop").mkdir()
    (tmp_path / "canal.properties").write_text("canal.destinations = shop\ncanal.conf.dir = .\n")
    (tmp_path / "shop" / "instance.properties").write_text("")
    cfg = CanalConfig.load(tmp_path, environ={"KAFKA_BOOTSTRAP_SERVERS": "env:9"})
    assert kafka_config(cfg)["bootstrap.servers"] == "env:9"


@pytest.mark.parametrize(
    ("properties", "needle"),
    [
        ({"no.such.key": "1"}, "kafka.no.such.key"),
        ({"max.request.size": "big"}, "kafka.max.request.size"),
        ({"kerberos.enable": "true"}, "kafka.kerberos.enable"),
    ],
)
def test_bad_producer_settings_name_the_key(properties: dict[str, str], needle: str) -> None:
    with pytest.raises(ProducerConfigError, match=needle.replace(".", r"\.")):
        KafkaSender(producer_config(properties))


def test_mq_options_and_the_transaction_filter(tmp_path: Path) -> None:
    cfg = _conf(tmp_path, "canal.mq.flatMessage = false\ncanal.mq.database.hash = false\n")
    options = mq_options(cfg)
    assert (options.flat_message, options.database_hash, options.filter_transaction_entry) == (
        False,
        False,
        True,
    )
    assert mq_filter_transaction_entry(cfg) is True


def test_partition_order_is_pycanals_and_off_by_default(tmp_path: Path) -> None:
    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    assert mq_options(_conf(tmp_path / "off", "")).partition_order is False
    assert mq_options(_conf(tmp_path / "on", "canal.mq.partitionOrder = true\n")).partition_order is True


def test_transaction_filter_off_when_canal_properties_says_so(tmp_path: Path) -> None:
    cfg = _conf(tmp_path, "canal.instance.filter.transaction.entry = false\n")
    assert mq_options(cfg).filter_transaction_entry is False


def test_destination_routing_keys(tmp_path: Path) -> None:
    cfg = _conf(
        tmp_path,
        "",
        "canal.mq.topic = t\ncanal.mq.partitionsNum = 3\ncanal.mq.partitionHash = db\\\\..*:$pk$\n"
        "canal.mq.dynamicTopic = x:db\\\\.a\ncanal.mq.dynamicTopicPartitionNum = x:6\n",
    )
    assert mq_destination(cfg.instance("shop")) == MQDestination(
        topic="t",
        partition=0,
        partitions_num=3,
        partition_hash="db\\..*:$pk$",
        dynamic_topic="x:db\\.a",
        dynamic_topic_partition_num="x:6",
    )


@pytest.mark.parametrize(
    ("instance", "key"),
    [
        ("canal.mq.topic = t\ncanal.mq.partitionHash = db\\\\.(:$pk$\n", "canal.mq.partitionHash"),
        ("canal.mq.dynamicTopic = db\\\\.(\n", "canal.mq.dynamicTopic"),
        ("", "canal.mq.topic"),
    ],
    ids=["partition-hash", "dynamic-topic", "no-topic"],
)
def test_bad_routing_names_destination_and_key(tmp_path: Path, instance: str, key: str) -> None:
    cfg = _conf(tmp_path, "", instance)
    with pytest.raises(ConfigError, match=rf"destination shop: .*{key.replace('.', '[.]')}"):
        mq_destination(cfg.instance("shop"))


# ---------------------------------------------------------------------------------- SASL
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}


def test_canal_docs_sasl_keys_become_librdkafka_credentials(tmp_path: Path) -> None:
    """The three keys as Canal's docs put them in canal.properties (a backslash-escaped quote of the
    properties format included): librdkafka gets the user and the password, no JAAS."""
    cfg = _conf(
        tmp_path,
        "kafka.bootstrap.servers = b:9093\n"
        "kafka.security.protocol = SASL_PLAINTEXT\n"
        "kafka.sasl.mechanism = SCRAM-SHA-512\n"
        f'kafka.sasl.jaas.config = {SCRAM} required username="canal" password="p\\\\"w ;d";\n',
    )
    config = kafka_config(cfg)
    assert {
        k: config[k] for k in ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password")
    } == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "canal",
        "sasl.password": 'p"w ;d',
    }
    assert "sasl.jaas.config" not in config
    KafkaSender(config).close(0)  # librdkafka takes them


@pytest.mark.parametrize(
    ("mechanism", "jaas", "user", "password"),
    [
        ("PLAIN", f'{PLAIN} required username="u" password="p";', "u", "p"),
        ("PLAIN", f'{PLAIN} required password="p" username="u" ;', "u", "p"),  # any order
        ("PLAIN", f'  {PLAIN}\n\tREQUIRED\n  username="u"\n  password="p";  ', "u", "p"),
        ("PLAIN", f"{PLAIN} required username=u-1.x_$ password=S3cr3t;", "u-1.x_$", "S3cr3t"),  # plain words
        ("PLAIN", f"{PLAIN} required username='u' password='p\"q';", "u", 'p"q'),  # Java's tokenizer takes '
        ("PLAIN", f'{PLAIN} required username="u" password="a\\"b\\\\c;d=e f";', "u", 'a"b\\c;d=e f'),
        ("PLAIN", f'{PLAIN} required username="u" password="tab\\there\\101";', "u", "tab\there\x41"),
        ("PLAIN", f'{PLAIN} required username="u" password="";', "u", ""),
        ("PLAIN", f'{PLAIN} required username="x" username="u" password="p";', "u", "p"),  # last wins
        (
            "PLAIN",
            f'{PLAIN} /* the canal user */ required // its login\n username="u" password="p";',
            "u",
            "p",
        ),
        ("PLAIN", f'{PLAIN} optional username="ü" password="密码";', "ü", "密码"),
        ("SCRAM-SHA-256", f'{SCRAM} required username="u" password="p";', "u", "p"),
        ("SCRAM-SHA-512", f'{SCRAM} required username="u" password="p";', "u", "p"),
    ],
    ids=[
        "plain",
        "any-order",
        "whitespace-and-flag-case",
        "unquoted-words",
        "single-quotes",
        "escapes-and-separators-in-quotes",
        "tab-and-octal-escapes",
        "empty-password",
        "last-wins",
        "comments",
        "non-ascii",
        "scram-256",
        "scram-512",
    ],
)
def test_jaas_line_translated(mechanism: str, jaas: str, user: str, password: str) -> None:
    config = producer_config({**SASL, "sasl.mechanism": mechanism, "sasl.jaas.config": jaas})
    assert (config["sasl.username"], config["sasl.password"]) == (user, password)
    assert config["sasl.mechanism"] == mechanism and "sasl.jaas.config" not in config


SECRET = "Hunter2-secret"


@pytest.mark.parametrize(
    ("properties", "needle"),
    [
        ({"sasl.jaas.config": f'{SCRAM} required username="u" password="{SECRET}";'}, "it takes " + PLAIN),
        (
            {"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": f'{PLAIN} required password="{SECRET}";'},
            SCRAM,
        ),
        (
            {"sasl.mechanism": "", "sasl.jaas.config": f'{PLAIN} required password="{SECRET}";'},
            "GSSAPI (the default)",
        ),
        ({"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": f"{PLAIN} required;"}, "OAUTHBEARER"),
        ({"sasl.jaas.config": f'{PLAIN} required username="u" password="{SECRET}"'}, "must end with ';'"),
        ({"sasl.jaas.config": f'{PLAIN} required username="u" password="{SECRET};'}, "not closed"),
        (
            {"sasl.jaas.config": f'{PLAIN} required username="u" password="{SECRET}"; {PLAIN} required;'},
            "more than one",
        ),
        (
            {"sasl.jaas.config": f'{PLAIN} required username="u" password="{SECRET}" tokenauth="true";'},
            "'tokenauth'",
        ),
        ({"sasl.jaas.config": f'{PLAIN} required username="u";'}, 'no password="..."'),
        ({"sasl.jaas.config": f'{PLAIN} username="u" password="{SECRET}";'}, "not a login flag"),
        (
            {"sasl.jaas.config": f"{PLAIN} required username=u password={SECRET} more;"},
            "after option 'password'",
        ),
        ({"sasl.jaas.config": f"{PLAIN} required username=u password=a@{SECRET};"}, "unexpected character"),
        ({"sasl.jaas.config": f"{PLAIN} required username=u password=;"}, "'password' has no value"),
        ({"sasl.jaas.config": f'"{SECRET}" required;'}, "expected '<LoginModule class>"),
        ({"sasl.jaas.config": "  "}, "is empty"),
        (
            {
                "sasl.jaas.config": f'{PLAIN} required username="u" password="{SECRET}";',
                "sasl.password": SECRET,
            },
            "kafka.sasl.password are both set",
        ),
    ],
    ids=[
        "module-of-another-mechanism",
        "plain-module-for-scram",
        "gssapi-default",
        "oauthbearer",
        "no-terminator",
        "unclosed-quote",
        "two-modules",
        "untranslatable-option",
        "no-password",
        "no-flag",
        "unquoted-space",
        "unquoted-symbol",
        "no-value",
        "quoted-module",
        "empty",
        "credentials-twice",
    ],
)
def test_untranslatable_jaas_line_is_one_line_naming_the_key(properties: dict[str, str], needle: str) -> None:
    with pytest.raises(ProducerConfigError) as caught:
        producer_config({**SASL, **properties})
    message = str(caught.value)
    assert message.startswith("kafka.sasl.jaas.config") and needle in message, message
    assert "\n" not in message and SECRET not in message  # the password is never shown


def test_jaas_line_ignored_without_a_sasl_protocol() -> None:
    """As the Java client: no SASL, no login module (even an unreadable line)."""
    config = producer_config({"sasl.mechanism": "PLAIN", "sasl.jaas.config": "not even JAAS"})
    assert "sasl.jaas.config" not in config and "sasl.username" not in config


def test_jaas_login_parts() -> None:
    assert jaas_login(f'{PLAIN} Sufficient a="1" b=two;') == (PLAIN, "Sufficient", {"a": "1", "b": "two"})
    with pytest.raises(ProducerConfigError, match=r"^--kafka-config sasl\.jaas\.config: "):
        jaas_login(f"{PLAIN} required", "--kafka-config sasl.jaas.config")
