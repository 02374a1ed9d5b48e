"""Canal's conf directory, the first classpath entry of the JVM: everything in it but ``canal.properties``
(which names the port, so it is written for each launch)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from .launcher import MAIN_CLASS, canal_home
from .properties import write_properties
from .spring import base_instance_xml, instance_xml
from .tsdb import tsdb_mappers, tsdb_xml


def write_conf_dir(
    conf_dir: Path, *, log_dir: Path, log_level: str, instances: Mapping[str, Mapping[str, object]]
) -> None:
    """The Spring files of both meta modes and of the TSDB, ``logback.xml``, the MQ plugins' link and
    ``<destination>/instance.properties`` for each of ``instances`` (destination -> its properties)."""
    spring = conf_dir / "spring"
    (spring / "tsdb" / "sql-map").mkdir(parents=True)
    standby = any("canal.instance.standby.address" in props for props in instances.values())
    (spring / "base-instance.xml").write_text(base_instance_xml())
    (spring / "file-instance.xml").write_text(instance_xml("file", standby))
    (spring / "memory-instance.xml").write_text(instance_xml("memory", standby))
    (spring / "tsdb" / "h2-tsdb.xml").write_text(tsdb_xml())
    for name, text in tsdb_mappers().items():
        (spring / "tsdb" / "sql-map" / name).write_text(text)
    (conf_dir / "logback.xml").write_text(_logback_xml(log_dir, log_level))
    # MQ producers: Canal's ExtensionLoader looks in plugin/ beside the first classpath entry (conf/).
    plugins = canal_home() / "plugin"
    if plugins.is_dir():
        (conf_dir.parent / "plugin").symlink_to(plugins, target_is_directory=True)
    for name, props in instances.items():
        (conf_dir / name).mkdir()
        write_properties(
            conf_dir / name / "instance.properties", props, f"destination {name}, written by PrivateCanal"
        )


def _logback_xml(log_dir: Path, level: str) -> str:
    """One file per destination (MDC ``destination``, set by Canal's threads), ``canal`` for the rest."""
    pattern = "%d{yyyy-MM-dd HH:mm:ss.SSS} [%thread] %-5level %logger{56} - %msg%n"
    return (
        "<configuration>\n"
        '  <appender name="SIFT" class="ch.qos.logback.classic.sift.SiftingAppender">\n'
        "    <discriminator><key>destination</key><defaultValue>canal</defaultValue></discriminator>\n"
        "    <sift>\n"
        '      <appender name="FILE-${destination}" class="ch.qos.logback.core.FileAppender">\n'
        f"        <file>{escape(str(log_dir))}/${{destination}}/${{destination}}.log</file>\n"
        f"        <encoder><pattern>{escape(pattern)}</pattern></encoder>\n"
        "      </appender>\n"
        "    </sift>\n"
        "  </appender>\n"
        f'  <logger name="com.alibaba.otter.canal" level="{level}"/>\n'
        f'  <logger name="{MAIN_CLASS}" level="INFO"/>\n'
        '  <root level="WARN"><appender-ref ref="SIFT"/></root>\n'
        "</configuration>\n"
    )
