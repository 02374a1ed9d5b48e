"""Canal's properties files: ``canal.properties`` (the server, and every instance's defaults) and one
``<destination>/instance.properties`` per destination, in Java ``Properties`` syntax, starting from
Canal's documented defaults."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path


def prop_value(value: object) -> str:
    """A Python value as Canal reads it: ``true``/``false``, "" for None."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _escape_prop(text: str, key: bool = False) -> str:
    """Java ``Properties.load`` syntax (ISO-8859-1, backslash escapes)."""
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch in "=: #!" and (key or (i == 0 and ch in " #!")):
            out.append("\\" + ch)
        elif ord(ch) > 0xFF:
            out.extend(f"\\u{unit:04x}" for unit in _utf16_units(ch))
        else:
            out.append(ch)
    return "".join(out)


def _utf16_units(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def write_properties(path: Path, props: Mapping[str, object], header: str) -> None:
    """``props`` in a properties file, in their order, under a ``# header`` comment."""
    lines = [f"# {header}"]
    lines += [f"{_escape_prop(k, key=True)} = {_escape_prop(prop_value(v))}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n", encoding="latin-1")


def instance_key(key: str) -> str:
    """The full key of a destination's override: ``filter.regex`` is ``canal.instance.filter.regex``."""
    return (
        key
        if key.startswith(("canal.", "kafka.", "rocketmq.", "rabbitmq.", "pulsarmq."))
        else f"canal.instance.{key}"
    )


def instance_properties(
    destination: str,
    *,
    source: str,
    username: str,
    password: str,
    slave_id: int,
    tsdb_url: str | None,
    overrides: Iterable[Mapping[str, object]],
) -> dict[str, object]:
    """A destination's ``instance.properties``: the source and account, a start at the binlog's end, the
    TSDB's H2 database (``tsdb_url``; None: no TSDB), then ``overrides`` in order (short keys allowed)."""
    props: dict[str, object] = {
        "canal.instance.master.address": source,
        "canal.instance.dbUsername": username,
        "canal.instance.dbPassword": password,
        "canal.instance.connectionCharset": "UTF-8",
        "canal.instance.mysql.slaveId": slave_id,
        "canal.instance.gtidon": False,
        "canal.instance.master.journal.name": "",
        "canal.instance.master.position": "",
        "canal.instance.master.timestamp": "",
        "canal.instance.master.gtid": "",
        "canal.instance.tsdb.enable": tsdb_url is not None,
        "canal.instance.filter.regex": r".*\..*",
        "canal.instance.filter.black.regex": r"mysql\.slave_.*",
        "canal.mq.topic": destination,
        "canal.mq.partition": 0,
    }
    if tsdb_url is not None:
        props["canal.instance.tsdb.url"] = tsdb_url
    for source_props in overrides:
        props.update({instance_key(k): v for k, v in source_props.items()})
    return props


def canal_properties(
    *,
    host: str,
    port: int,
    data_dir: Path,
    destinations: Sequence[str],
    tsdb: bool,
    meta: str,
    user: str | None,
    passwd: str | None,
    overrides: Mapping[str, object],
) -> dict[str, object]:
    """``canal.properties``: Canal's documented server and instance defaults, then ours (the port, the
    destinations, the TSDB and meta files, a client account), then ``overrides``."""
    from pycanal.server.wire import password_hash

    props: dict[str, object] = {
        "canal.ip": host,
        "canal.port": port,
        "canal.metrics.pull.port": 0,  # canal.prometheus is not on Maven Central for 1.1.7
        "canal.zkServers": "",
        "canal.withoutNetty": False,
        "canal.serverMode": "tcp",
        "canal.file.data.dir": data_dir,
        "canal.file.flush.period": 1000,
        "canal.instance.memory.buffer.size": 16384,
        "canal.instance.memory.buffer.memunit": 1024,
        "canal.instance.memory.batch.mode": "MEMSIZE",
        "canal.instance.memory.rawEntry": True,
        "canal.instance.detecting.enable": False,
        "canal.instance.detecting.sql": "select 1",
        "canal.instance.detecting.interval.time": 3,
        "canal.instance.detecting.retry.threshold": 3,
        "canal.instance.detecting.heartbeatHaEnable": False,
        "canal.instance.transaction.size": 1024,
        "canal.instance.fallbackIntervalInSeconds": 60,
        "canal.instance.network.receiveBufferSize": 16384,
        "canal.instance.network.sendBufferSize": 16384,
        "canal.instance.network.soTimeout": 30,
        "canal.instance.filter.druid.ddl": True,
        "canal.instance.filter.query.dcl": False,
        "canal.instance.filter.query.dml": False,
        "canal.instance.filter.query.ddl": False,
        "canal.instance.filter.table.error": False,
        "canal.instance.filter.rows": False,
        "canal.instance.filter.transaction.entry": False,
        "canal.instance.filter.dml.insert": False,
        "canal.instance.filter.dml.update": False,
        "canal.instance.filter.dml.delete": False,
        "canal.instance.binlog.format": "ROW,STATEMENT,MIXED",
        "canal.instance.binlog.image": "FULL,MINIMAL,NOBLOB",
        "canal.instance.get.ddl.isolation": False,
        "canal.instance.parser.parallel": True,
        "canal.instance.parser.parallelBufferSize": 256,
        "canal.instance.tsdb.spring.xml": "classpath:spring/tsdb/h2-tsdb.xml" if tsdb else "",
        "canal.instance.tsdb.dbUsername": "canal",
        "canal.instance.tsdb.dbPassword": "canal",
        "canal.instance.tsdb.snapshot.interval": 24,
        "canal.instance.tsdb.snapshot.expire": 360,
        "canal.destinations": ",".join(destinations),
        "canal.auto.scan": False,
        "canal.auto.reset.latest.pos.mode": False,
        "canal.instance.global.mode": "spring",
        "canal.instance.global.lazy": False,
        "canal.instance.global.spring.xml": f"classpath:spring/{meta}-instance.xml",
        "canal.mq.flatMessage": True,
        "canal.mq.canalBatchSize": 50,
        "canal.mq.canalGetTimeout": 100,
        "canal.mq.accessChannel": "local",
        "canal.mq.database.hash": True,
        "canal.mq.send.thread.size": 30,
        "canal.mq.build.thread.size": 8,
    }
    if user:
        props["canal.user"] = user
        props["canal.passwd"] = password_hash(passwd) if passwd else ""
    props.update(overrides)
    return props
