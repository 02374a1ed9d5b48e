"""The Spring files a Canal instance is built from (``SpringCanalInstanceGenerator``):
``spring/base-instance.xml`` and ``spring/<meta>-instance.xml``, written from Canal's bean classes and
documented keys, each bean property a ``${key:default}`` placeholder resolved from the properties files."""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

PKG = "com.alibaba.otter.canal"


def beans_head(by_name: bool = True) -> str:
    """A Spring beans file's opening up to its first bean."""
    # Canal's instance files also wire beans by name (the parser's eventSink, for one); the TSDB's
    # must not (Spring's "environment" bean would land in MyBatis' Configuration).
    autowire = ' default-autowire="byName"' if by_name else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<beans xmlns="http://www.springframework.org/schema/beans"\n'
        '       xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"\n'
        '       xsi:schemaLocation="http://www.springframework.org/schema/beans '
        f'http://www.springframework.org/schema/beans/spring-beans.xsd"{autowire}>\n'
    )


def prop(name: str, key: str, default: str = "") -> str:
    """A bean property from a Canal key, with Canal's documented default."""
    return f'    <property name="{name}" value={quoteattr("${" + key + ":" + default + "}")}/>\n'


def bean(bean_id: str | None, cls: str, body: str = "", extra: str = "", indent: str = "  ") -> str:
    """A ``<bean>`` of class ``cls`` with ``body`` (its properties) and ``extra`` attributes."""
    ident = f' id="{bean_id}"' if bean_id else ""
    if not body:
        return f'{indent}<bean{ident} class="{cls}"{extra}/>\n'
    return f'{indent}<bean{ident} class="{cls}"{extra}>\n{body}{indent}</bean>\n'


def placeholder() -> str:
    """Resolves ``${key:default}``: system properties first, then canal.properties, then the
    destination's instance.properties."""
    return bean(
        None,
        f"{PKG}.instance.spring.support.PropertyPlaceholderConfigurer",
        '    <property name="ignoreResourceNotFound" value="true"/>\n'
        '    <property name="systemPropertiesModeName" value="SYSTEM_PROPERTIES_MODE_OVERRIDE"/>\n'
        '    <property name="locationNames">\n'
        "      <list>\n"
        "        <value>classpath:canal.properties</value>\n"
        "        <value>classpath:${canal.instance.destination:}/instance.properties</value>\n"
        "      </list>\n"
        "    </property>\n",
        ' lazy-init="false"',
    )


# The parser's properties: (bean property, Canal key, Canal's default).
_PARSER_PROPERTIES = (
    ("destination", "canal.instance.destination", ""),
    ("slaveId", "canal.instance.mysql.slaveId", "0"),
    ("detectingEnable", "canal.instance.detecting.enable", "false"),
    ("detectingSQL", "canal.instance.detecting.sql", "select 1"),
    ("detectingIntervalInSeconds", "canal.instance.detecting.interval.time", "5"),
    ("fieldFilter", "canal.instance.filter.field", ""),
    ("fieldBlackFilter", "canal.instance.filter.black.field", ""),
    ("transactionSize", "canal.instance.transaction.size", "1024"),
    ("receiveBufferSize", "canal.instance.network.receiveBufferSize", "16384"),
    ("sendBufferSize", "canal.instance.network.sendBufferSize", "16384"),
    ("defaultConnectionTimeoutInSeconds", "canal.instance.network.soTimeout", "30"),
    ("connectionCharset", "canal.instance.connectionCharset", "UTF-8"),
    ("fallbackIntervalInSeconds", "canal.instance.fallbackIntervalInSeconds", "60"),
    ("filterQueryDml", "canal.instance.filter.query.dml", "false"),
    ("filterQueryDcl", "canal.instance.filter.query.dcl", "false"),
    ("filterQueryDdl", "canal.instance.filter.query.ddl", "false"),
    ("useDruidDdlFilter", "canal.instance.filter.druid.ddl", "true"),
    ("filterDmlInsert", "canal.instance.filter.dml.insert", "false"),
    ("filterDmlUpdate", "canal.instance.filter.dml.update", "false"),
    ("filterDmlDelete", "canal.instance.filter.dml.delete", "false"),
    ("filterRows", "canal.instance.filter.rows", "false"),
    ("filterTableError", "canal.instance.filter.table.error", "false"),
    ("supportBinlogFormats", "canal.instance.binlog.format", "ROW,STATEMENT,MIXED"),
    ("supportBinlogImages", "canal.instance.binlog.image", "FULL,MINIMAL,NOBLOB"),
    ("enableTsdb", "canal.instance.tsdb.enable", "true"),
    ("tsdbSpringXml", "canal.instance.tsdb.spring.xml", ""),
    ("tsdbJdbcUrl", "canal.instance.tsdb.url", ""),
    ("tsdbJdbcUserName", "canal.instance.tsdb.dbUsername", ""),
    ("tsdbJdbcPassword", "canal.instance.tsdb.dbPassword", ""),
    ("tsdbSnapshotInterval", "canal.instance.tsdb.snapshot.interval", "24"),
    ("tsdbSnapshotExpire", "canal.instance.tsdb.snapshot.expire", "360"),
    ("isGTIDMode", "canal.instance.gtidon", "false"),
    ("parallel", "canal.instance.parser.parallel", "true"),
    ("parallelThreadSize", "canal.instance.parser.parallelThreadSize", ""),
    ("parallelBufferSize", "canal.instance.parser.parallelBufferSize", "256"),
    ("autoResetLatestPosMode", "canal.auto.reset.latest.pos.mode", "false"),
    ("multiStreamEnable", "canal.instance.multi.stream.on", "false"),
)


def base_instance_xml() -> str:
    """Properties (canal.properties, then the destination's instance.properties, system properties
    first), the host:port editor, and the abstract parser every instance's parser derives from."""
    editors = bean("socketAddressEditor", f"{PKG}.instance.spring.support.SocketAddressEditor") + bean(
        None,
        "org.springframework.beans.factory.config.CustomEditorConfigurer",
        '    <property name="propertyEditorRegistrars"><list><ref bean="socketAddressEditor"/></list></property>\n',
    )
    # Canal's parser class: a MySQL parser that could also fetch an Aliyun RDS's archived binlogs.
    parser = bean(
        "baseEventParser",
        f"{PKG}.parse.inbound.mysql.rds.RdsBinlogEventParserProxy",
        prop("accesskey", "canal.aliyun.accesskey")
        + prop("secretkey", "canal.aliyun.secretkey")
        + prop("instanceId", "canal.instance.rds.instanceId"),
        ' abstract="true"',
    )
    return beans_head() + placeholder() + editors + parser + "</beans>\n"


def _auth_info(prefix: str) -> str:
    return bean(
        None,
        f"{PKG}.parse.support.AuthenticationInfo",
        prop("address", f"canal.instance.{prefix}.address")
        + prop("username", "canal.instance.dbUsername", "retl")
        + prop("password", "canal.instance.dbPassword", "retl")
        + prop("enableDruid", "canal.instance.enableDruid", "false")
        + prop("defaultDatabaseName", "canal.instance.defaultDatabaseName"),
        ' init-method="initPwd"',
        indent="      ",
    )


def _position(prefix: str) -> str:
    return bean(
        None,
        f"{PKG}.protocol.position.EntryPosition",
        prop("journalName", f"canal.instance.{prefix}.journal.name")
        + prop("position", f"canal.instance.{prefix}.position")
        + prop("timestamp", f"canal.instance.{prefix}.timestamp")
        + prop("gtid", f"canal.instance.{prefix}.gtid"),
        indent="      ",
    )


def instance_xml(meta: str, standby: bool) -> str:
    """An instance: parser -> sink -> memory store, positions in a file (``file``: Canal's
    ``FileMixedMetaManager``, ``meta.dat``) or in memory (``memory``)."""
    ref = lambda name: f'    <property name="{name}" ref="{name}"/>\n'  # noqa: E731
    instance = bean(
        "instance",
        f"{PKG}.instance.spring.CanalInstanceWithSpring",
        prop("destination", "canal.instance.destination")
        + "".join(
            ref(n)
            for n in ("eventParser", "eventSink", "eventStore", "metaManager", "alarmHandler", "mqConfig")
        ),
    )
    alarm = bean("alarmHandler", f"{PKG}.common.alarm.LogAlarmHandler")
    if meta == "file":
        meta_bean = bean(
            "metaManager",
            f"{PKG}.meta.FileMixedMetaManager",
            prop("dataDir", "canal.file.data.dir", "../conf")
            + prop("period", "canal.file.flush.period", "1000"),
        )
        positions = (
            f'      <bean class="{PKG}.parse.index.FailbackLogPositionManager">\n'
            f'        <constructor-arg><bean class="{PKG}.parse.index.MemoryLogPositionManager"/></constructor-arg>\n'
            f'        <constructor-arg><bean class="{PKG}.parse.index.MetaLogPositionManager">'
            '<constructor-arg ref="metaManager"/></bean></constructor-arg>\n'
            "      </bean>\n"
        )
    else:
        meta_bean = bean("metaManager", f"{PKG}.meta.MemoryMetaManager")
        positions = f'      <bean class="{PKG}.parse.index.MemoryLogPositionManager"/>\n'
    store = bean(
        "eventStore",
        f"{PKG}.store.memory.MemoryEventStoreWithBuffer",
        prop("bufferSize", "canal.instance.memory.buffer.size", "16384")
        + prop("bufferMemUnit", "canal.instance.memory.buffer.memunit", "1024")
        + prop("batchMode", "canal.instance.memory.batch.mode", "MEMSIZE")
        + prop("ddlIsolation", "canal.instance.get.ddl.isolation", "false")
        + prop("raw", "canal.instance.memory.rawEntry", "true"),
    )
    sink = bean(
        "eventSink",
        f"{PKG}.sink.entry.EntryEventSink",
        ref("eventStore")
        + prop("filterTransactionEntry", "canal.instance.filter.transaction.entry", "false"),
    )
    regex = f"{PKG}.filter.aviater.AviaterRegexFilter"
    parser_body = "".join(prop(*p) for p in _PARSER_PROPERTIES)
    parser_body += (
        '    <property name="haController">\n'
        + bean(
            None,
            f"{PKG}.parse.ha.HeartBeatHAController",
            prop("detectingRetryTimes", "canal.instance.detecting.retry.threshold", "3")
            + prop("switchEnable", "canal.instance.detecting.heartbeatHaEnable", "false"),
            indent="      ",
        )
        + "    </property>\n"
        + ref("alarmHandler")
        + ref("eventSink")
        + '    <property name="eventFilter">\n'
        f'      <bean class="{regex}"><constructor-arg index="0" value="${{canal.instance.filter.regex:.*\\..*}}"/></bean>\n'
        "    </property>\n"
        '    <property name="eventBlackFilter">\n'
        f'      <bean class="{regex}"><constructor-arg index="0" value="${{canal.instance.filter.black.regex:}}"/>'
        '<constructor-arg index="1" value="false"/></bean>\n'
        "    </property>\n"
        f'    <property name="logPositionManager">\n{positions}    </property>\n'
        f'    <property name="masterInfo">\n{_auth_info("master")}    </property>\n'
        f'    <property name="masterPosition">\n{_position("master")}    </property>\n'
    )
    if standby:
        parser_body += (
            f'    <property name="standbyInfo">\n{_auth_info("standby")}    </property>\n'
            f'    <property name="standbyPosition">\n{_position("standby")}    </property>\n'
        )
    parser = f'  <bean id="eventParser" parent="baseEventParser">\n{parser_body}  </bean>\n'
    mq = bean(
        "mqConfig",
        f"{PKG}.instance.core.CanalMQConfig",
        prop("topic", "canal.mq.topic")
        + prop("dynamicTopic", "canal.mq.dynamicTopic")
        + prop("partition", "canal.mq.partition")
        + prop("partitionsNum", "canal.mq.partitionsNum")
        + prop("partitionHash", "canal.mq.partitionHash")
        + prop("dynamicTopicPartitionNum", "canal.mq.dynamicTopicPartitionNum")
        + prop("enableDynamicQueuePartition", "canal.mq.enableDynamicQueuePartition"),
    )
    return (
        beans_head()
        + '  <import resource="classpath:spring/base-instance.xml"/>\n'
        + instance
        + alarm
        + meta_bean
        + store
        + sink
        + parser
        + mq
        + "</beans>\n"
    )
