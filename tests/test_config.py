"""pycanal.config: properties syntax, schema defaults, precedence, errors, auto-scan, shipped conf/."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from pycanal.config import (
    KEYS,
    CanalConfig,
    ConfigError,
    ConfigScanner,
    PropertiesSyntaxError,
    ScanEvent,
    env_name,
    parse_properties,
)

REPO_CONF = Path(__file__).resolve().parent.parent / "conf"


def make_conf(tmp_path: Path, canal: str = "", **instances: str) -> Path:
    (tmp_path / "canal.properties").write_text(canal)
    for dest, text in instances.items():
        (tmp_path / dest).mkdir(exist_ok=True)
        (tmp_path / dest / "instance.properties").write_text(text)
    return tmp_path


# ---------------------------------------------------------------------- properties syntax
def test_properties_separators_comments_blanks() -> None:
    text = "# comment\n   ! also comment\n\na=1\nb : 2\nc   3\nd\te\nf=\ng\n  h = spaced value  \n"
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "e",
        "f": "",
        "g": "",
        "h": "spaced value  ",
    }


def test_properties_continuations() -> None:
    text = "list = one, \\\n     two, \\\n\tthree\nnext=x\nodd = a\\\\\nnot=continued\n"
    assert parse_properties(text) == {
        "list": "one, two, three",
        "next": "x",
        "odd": "a\\",
        "not": "continued",
    }


def test_properties_comment_is_not_continued() -> None:
    assert parse_properties("# c \\\nk=v\n") == {"k": "v"}


def test_properties_escapes_and_unicode() -> None:
    text = "k\\ e\\=y\\:z = v\\=1\\:2\\t\\n\\\\ \\#x\nu=\\u00e9\\u4E2D\\ud83d\\ude00\nregex = .*\\\\..*\n"
    out = parse_properties(text)
    assert out["k e=y:z"] == "v=1:2\t\n\\ #x"
    assert out["u"] == "é中😀"
    assert out["regex"] == ".*\\..*"


def test_properties_crlf_last_wins_and_bad_unicode() -> None:
    assert parse_properties("a=1\r\nb=2\ra=3") == {"a": "3", "b": "2"}
    with pytest.raises(PropertiesSyntaxError, match="uxxxx"):
        parse_properties("a=\\u12G4", "x.properties")


# ---------------------------------------------------------------------- defaults and precedence
def test_defaults(tmp_path: Path) -> None:
    conf = make_conf(tmp_path, "canal.destinations = example\n", example="")
    c = CanalConfig.load(conf, environ={})
    assert c["canal.port"] == 11111
    assert c["canal.metrics.pull.port"] == 11112
    assert c["canal.admin.port"] == 11110
    assert c["canal.auto.scan"] is True
    assert c["canal.auto.scan.interval"] == 5
    assert c["canal.file.flush.period"] == 1000
    assert c["canal.zkServers"] is None
    assert c["canal.file.data.dir"] == str(tmp_path.resolve())
    i = c.instance("example")
    assert i["canal.instance.memory.buffer.size"] == 16384
    assert i["canal.instance.memory.buffer.memunit"] == 1024
    assert i["canal.instance.memory.batch.mode"] == "MEMSIZE"
    assert i["canal.instance.memory.rawEntry"] is True
    assert i["canal.instance.transaction.size"] == 1024
    assert i["canal.instance.fallbackIntervalInSeconds"] == 60
    assert i["canal.instance.detecting.sql"] == "select 1"
    assert i["canal.instance.filter.regex"] == ".*\\..*"
    assert i["canal.instance.get.ddl.isolation"] is False
    assert i["canal.instance.master.address"] == ("127.0.0.1", 3306)
    assert i["canal.instance.master.position"] is None
    assert i["canal.instance.standby.address"] is None
    assert i["canal.instance.gtidon"] is False
    assert i["canal.instance.mysql.slaveId"] == 0
    assert i["canal.instance.tsdb.enable"] is True
    assert i["canal.instance.tsdb.dir"] == str(tmp_path.resolve() / "example")
    assert i.source("canal.instance.transaction.size") == "default"
    assert set(i.as_dict()) == set(KEYS)


def test_precedence_chain(tmp_path: Path) -> None:
    key = "canal.instance.transaction.size"
    conf = make_conf(tmp_path, f"canal.destinations=example\n{key}=2\n", example=f"{key}=4\n")
    env: dict[str, str] = {}

    def value(**kw: object) -> tuple[int, str]:
        i = CanalConfig.load(conf, environ=env, **kw).instance("example")  # type: ignore[arg-type]
        return i[key], i.source(key)

    assert value() == (4, str(conf.resolve() / "example" / "instance.properties"))
    (conf / "example" / "instance.properties").write_text("")
    assert value() == (2, str(conf.resolve() / "canal.properties"))
    env[env_name(key)] = "8"
    assert value() == (8, "environment variable CANAL_INSTANCE_TRANSACTION_SIZE")
    env[key] = "16"  # the exact name (docker -e) beats the upper-case form
    assert value() == (16, f"environment variable {key}")
    assert value(overrides={key: "32"}) == (32, "override")


def test_placeholders(tmp_path: Path) -> None:
    conf = make_conf(
        tmp_path,
        "canal.destinations=example\nmy.host=10.0.0.1\ncanal.file.data.dir=${canal.conf.dir}/data\n",
        example="canal.instance.master.address=${my.host}:${my.port:3307}\n"
        "canal.instance.detecting.sql=select '${canal.instance.destination}'\n",
    )
    c = CanalConfig.load(conf, environ={"my.port": "3399"})
    assert c["canal.file.data.dir"] == str(tmp_path.resolve() / "data")
    i = c.instance("example")
    assert i["canal.instance.master.address"] == ("10.0.0.1", 3399)
    assert i["canal.instance.detecting.sql"] == "select 'example'"


def test_placeholder_errors(tmp_path: Path) -> None:
    conf = make_conf(tmp_path, "canal.destinations=a\n", a="canal.instance.dbUsername=${nope}\n")
    with pytest.raises(
        ConfigError, match=r"instance\.properties: canal\.instance\.dbUsername: cannot resolve"
    ):
        CanalConfig.load(conf, environ={}).instance("a")
    conf = make_conf(tmp_path, "canal.destinations=a\nx=${y}\ny=${x}\ncanal.instance.dbUsername=${x}\n", a="")
    with pytest.raises(ConfigError, match="cycle"):
        CanalConfig.load(conf, environ={}).instance("a")


# ---------------------------------------------------------------------- MQ mode keys
def test_mq_defaults(tmp_path: Path) -> None:
    # Canal 1.1.8: deployer/src/main/resources/canal.properties:29,127-135 and MQProperties'
    # field defaults; the destination's keys unset ("" through Canal's placeholder configurer)
    # but canal.mq.partition (example/instance.properties:66, and "0" in the producers).
    conf = make_conf(tmp_path, "canal.destinations = example\n", example="")
    c = CanalConfig.load(conf, environ={})
    assert c["canal.serverMode"] == "tcp"
    assert c["canal.mq.flatMessage"] is True
    assert c["canal.mq.canalBatchSize"] == 50
    assert c["canal.mq.canalGetTimeout"] == 100
    assert c["canal.mq.database.hash"] is True
    assert c["canal.mq.send.thread.size"] == 30
    assert c["canal.mq.build.thread.size"] == 8
    assert c["canal.mq.accessChannel"] == "local"
    assert c["canal.mq.servers"] is None
    i = c.instance("example")
    assert i["canal.mq.topic"] is None
    assert i["canal.mq.partition"] == 0
    assert i["canal.mq.partitionsNum"] is None
    assert i["canal.mq.partitionHash"] is None
    assert i["canal.mq.dynamicTopic"] is None
    assert i["canal.mq.dynamicTopicPartitionNum"] is None


def test_mq_values(tmp_path: Path) -> None:
    conf = make_conf(
        tmp_path,
        "canal.destinations = example\ncanal.serverMode = rabbitMQ\ncanal.mq.flatMessage = false\n",
        example="canal.mq.topic = t\ncanal.mq.partitionsNum = 6\ncanal.mq.partitionHash = db\\\\..*:$pk$  \n",
    )
    c = CanalConfig.load(conf, environ={})
    assert (c["canal.serverMode"], c["canal.mq.flatMessage"]) == ("rabbitMQ", False)
    i = c.instance("example")
    assert (i["canal.mq.topic"], i["canal.mq.partitionsNum"]) == ("t", 6)
    assert i["canal.mq.partitionHash"] == "db\\..*:$pk$"  # properties unescaped, outer blanks trimmed


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("canal.mq.partitionsNum", "0", "> 0"),
        ("canal.mq.partition", "-1", ">= 0"),
        ("canal.mq.partition", "x", "integer"),
    ],
)
def test_bad_mq_instance_value(tmp_path: Path, key: str, value: str, reason: str) -> None:
    conf = make_conf(tmp_path, "canal.destinations=example\n", example=f"{key}={value}\n")
    with pytest.raises(ConfigError, match=reason) as err:
        CanalConfig.load(conf, environ={}).instance("example")
    assert err.value.key == key


def test_misspelt_mq_key_warns_broker_keys_pass(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    conf = make_conf(
        tmp_path,
        "canal.destinations=example\nkafka.acks=all\nkafka.sasl.mechanism=PLAIN\nrabbitmq.host=h\n"
        "canal.mq.servers=h:9092\ncanal.mq.flatMesage=true\n",
        example="canal.mq.partitonHash=a.b:id\ncanal.mq.topic=t\n",
    )
    with caplog.at_level(logging.WARNING, logger="pycanal.config"):
        CanalConfig.load(conf, environ={}).instance("example")
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(messages) == 2
    assert any("'canal.mq.flatMesage'" in m for m in messages)
    assert any("'canal.mq.partitonHash'" in m for m in messages)


# ---------------------------------------------------------------------- warnings and errors
def test_unknown_key_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    conf = make_conf(
        tmp_path,
        "canal.destinations=example\ncanal.prot=1\nkafka.acks=all\ncanal.mq.topic=t\ncanal.instance.example.lazy=true\n",
        example="canal.instance.master.adress=1.2.3.4:3306\n",
    )
    with caplog.at_level(logging.WARNING, logger="pycanal.config"):
        CanalConfig.load(conf, environ={}).instance("example")
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'canal.prot'" in m and "canal.properties" in m for m in messages)
    assert any("'canal.instance.master.adress'" in m and "instance.properties" in m for m in messages)
    assert len(messages) == 2  # passthrough keys (MQ, per-destination) do not warn


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("canal.instance.memory.buffer.size", "abc", "not an integer"),
        ("canal.instance.memory.buffer.size", "1000", "power of 2"),
        ("canal.instance.master.address", "localhost", "host:port"),
        ("canal.instance.master.address", "h:99999", "port"),
        ("canal.instance.standby.address", "h:x", "host:port"),
        ("canal.instance.gtidon", "yes", "boolean"),
        ("canal.instance.memory.batch.mode", "BYTES", "MEMSIZE"),
        ("canal.instance.transaction.size", "0", "> 0"),
        ("canal.instance.master.position", "4a", "integer"),
    ],
)
def test_bad_instance_value_names_key_and_file(tmp_path: Path, key: str, value: str, reason: str) -> None:
    conf = make_conf(tmp_path, "canal.destinations=example\n", example=f"{key}={value}\n")
    c = CanalConfig.load(conf, environ={})
    with pytest.raises(ConfigError, match=reason) as err:
        c.instance("example")
    assert err.value.key == key
    assert str(err.value).startswith(str(conf.resolve() / "example" / "instance.properties"))
    assert key in str(err.value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("canal.port=eleven", "canal.port"),
        ("canal.port=70000", "canal.port"),
        ("canal.auto.scan.interval=-1", "canal.auto.scan.interval"),
        ("canal.serverMode=http", "canal.serverMode"),
        ("canal.user=canal\n", "canal.passwd"),
        ("canal.user=canal\ncanal.passwd=canal\n", "canal.passwd"),
    ],
)
def test_bad_server_value(tmp_path: Path, text: str, key: str) -> None:
    conf = make_conf(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        CanalConfig.load(conf, environ={})
    assert err.value.key == key
    assert "canal.properties" in str(err.value)


def test_bad_value_from_environment_names_variable(tmp_path: Path) -> None:
    conf = make_conf(tmp_path, "")
    with pytest.raises(ConfigError, match="environment variable CANAL_PORT: canal.port='x'"):
        CanalConfig.load(conf, environ={"CANAL_PORT": "x"})


def test_transaction_buffer_larger_than_store(tmp_path: Path) -> None:
    conf = make_conf(
        tmp_path,
        "canal.instance.memory.buffer.size=256\n",
        example="canal.instance.transaction.size=1024\n",
    )
    with pytest.raises(ConfigError, match="larger than canal.instance.memory.buffer.size"):
        CanalConfig.load(conf, environ={}).instance("example")


def test_missing_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="canal.properties"):
        CanalConfig.load(tmp_path)
    conf = make_conf(tmp_path, "")
    with pytest.raises(ConfigError, match="no such destination"):
        CanalConfig.load(conf, environ={}).instance("missing")


# ---------------------------------------------------------------------- scanner
def test_scanner_add_remove_reload(tmp_path: Path) -> None:
    make_conf(tmp_path, "", example="a=1\n")
    (tmp_path / "spring").mkdir()  # no instance.properties: not a destination
    seen: list[ScanEvent] = []
    s = ConfigScanner(tmp_path, 1, seen.append)
    assert s.destinations == ["example"]
    assert s.scan() == []
    (tmp_path / "second").mkdir()
    assert s.scan() == []  # not yet a destination
    (tmp_path / "second" / "instance.properties").write_text("x=1\n")
    assert s.scan() == [ScanEvent("add", "second")]
    path = tmp_path / "example" / "instance.properties"
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touch: same content
    assert s.scan() == []
    path.write_text("a=2\n")
    assert s.scan() == [ScanEvent("reload", "example")]
    (tmp_path / "second" / "instance.properties").unlink()
    assert s.scan() == [ScanEvent("remove", "second")]
    assert seen == [ScanEvent("add", "second"), ScanEvent("reload", "example"), ScanEvent("remove", "second")]
    fresh = ConfigScanner(tmp_path, 1, initial=False)
    assert fresh.scan() == [ScanEvent("add", "example")]


def test_scanner_thread(tmp_path: Path) -> None:
    make_conf(tmp_path, "")
    seen: list[ScanEvent] = []
    with ConfigScanner(tmp_path, 0.05, seen.append):
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "instance.properties").write_text("")
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            time.sleep(0.02)
    assert seen == [ScanEvent("add", "d")]


# ---------------------------------------------------------------------- shipped conf/
def test_shipped_conf_loads_without_warnings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        c = CanalConfig.load(REPO_CONF, environ={})
        instances = c.instances()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert c.destinations == ["example"]
    i = instances["example"]
    assert i["canal.instance.master.address"] == ("127.0.0.1", 3306)
    assert i["canal.instance.filter.regex"] == ".*\\..*"
    assert i["canal.instance.filter.black.regex"] == "mysql\\.slave_.*"
    # conf/ keeps the run state out of itself: canal.file.data.dir = ../var/canal
    assert c["canal.file.data.dir"] == str((REPO_CONF / ".." / "var" / "canal").resolve())


def test_shipped_conf_address_from_environment() -> None:
    c = CanalConfig.load(REPO_CONF, environ={"CANAL_INSTANCE_MASTER_ADDRESS": "127.0.0.1:40123"})
    assert c.instance("example")["canal.instance.master.address"] == ("127.0.0.1", 40123)
