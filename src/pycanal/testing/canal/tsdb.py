"""Canal's table-meta history (TSDB) for an instance: ``spring/tsdb/h2-tsdb.xml`` (an embedded H2
database per destination through Canal's MyBatis DAOs) and the DAOs' mappers in ``spring/tsdb/sql-map/``."""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape

from .spring import PKG, bean, beans_head, placeholder, prop

_TSDB = f"{PKG}.parse.inbound.mysql.tsdb"


def tsdb_xml() -> str:
    """The table-meta history (``DatabaseTableMeta``) in H2 through Canal's MyBatis DAOs; the DAOs
    create their tables from the DDL inside canal.parse's jar."""
    datasource = bean(
        "dataSource",
        "com.alibaba.druid.pool.DruidDataSource",
        '    <property name="driverClassName" value="org.h2.Driver"/>\n'
        + prop("url", "canal.instance.tsdb.url")
        + prop("username", "canal.instance.tsdb.dbUsername")
        + prop("password", "canal.instance.tsdb.dbPassword")
        + '    <property name="initialSize" value="0"/>\n'
        '    <property name="maxActive" value="4"/>\n'
        '    <property name="maxWait" value="10000"/>\n'
        '    <property name="validationQuery" value="SELECT 1"/>\n',
        ' destroy-method="close"',
    )
    factory = bean(
        "sqlSessionFactory",
        "org.mybatis.spring.SqlSessionFactoryBean",
        '    <property name="dataSource" ref="dataSource"/>\n'
        '    <property name="mapperLocations" value="classpath:spring/tsdb/sql-map/*.xml"/>\n'
        '    <property name="configuration">\n'
        '      <bean class="org.apache.ibatis.session.Configuration">'
        '<property name="mapUnderscoreToCamelCase" value="true"/></bean>\n'
        "    </property>\n",
    )
    daos = "".join(
        bean(name, f"{_TSDB}.dao.{cls}", '    <property name="sqlSessionFactory" ref="sqlSessionFactory"/>\n')
        for name, cls in (("metaHistoryDAO", "MetaHistoryDAO"), ("metaSnapshotDAO", "MetaSnapshotDAO"))
    )
    meta = bean(
        "tableMetaTSDB",
        f"{_TSDB}.DatabaseTableMeta",
        '    <property name="metaHistoryDAO" ref="metaHistoryDAO"/>\n'
        '    <property name="metaSnapshotDAO" ref="metaSnapshotDAO"/>\n',
        ' destroy-method="destory"',
    )
    return beans_head(by_name=False) + placeholder() + meta + datasource + factory + daos + "</beans>\n"


_MAPPER_HEAD = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<!DOCTYPE mapper PUBLIC "-//mybatis.org//DTD Mapper 3.0//EN" "http://mybatis.org/dtd/mybatis-3-mapper.dtd">\n'
)


def _mapper(namespace: str, statements: Sequence[tuple[str, str, str, str]]) -> str:
    body = "".join(
        f'  <{kind} id="{sid}"{attrs}>\n    {escape(sql)}\n  </{kind}>\n'
        for kind, sid, attrs, sql in statements
    )
    return f'{_MAPPER_HEAD}<mapper namespace="{namespace}">\n{body}</mapper>\n'


def tsdb_mappers() -> dict[str, str]:
    """The statements of Canal's ``MetaHistoryMapper`` / ``MetaSnapshotMapper`` interfaces: DDL history
    rows between the snapshot and a binlog time, and the latest snapshot before a time (row 0 is the
    one being built)."""
    dao = f"{_TSDB}.dao"
    pos_cols = "destination, binlog_file, binlog_offest, binlog_master_id, binlog_timestamp"
    pos_vals = "#{destination}, #{binlogFile}, #{binlogOffest}, #{binlogMasterId}, #{binlogTimestamp}"
    history = _mapper(
        f"{dao}.MetaHistoryMapper",
        [
            (
                "select",
                "findByTimestamp",
                f' parameterType="map" resultType="{dao}.MetaHistoryDO"',
                "SELECT * FROM meta_history WHERE destination = #{destination}"
                " AND binlog_timestamp >= #{snapshotTimestamp} AND binlog_timestamp <= #{timestamp}"
                " ORDER BY binlog_timestamp, id",
            ),
            (
                "insert",
                "insert",
                f' parameterType="{dao}.MetaHistoryDO"',
                f"INSERT INTO meta_history (gmt_create, gmt_modified, {pos_cols},"
                " use_schema, sql_schema, sql_table, sql_text, sql_type, extra)"
                f" VALUES (CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, {pos_vals},"
                " #{useSchema}, #{sqlSchema}, #{sqlTable}, #{sqlText}, #{sqlType}, #{extra})",
            ),
            (
                "delete",
                "deleteByName",
                ' parameterType="map"',
                "DELETE FROM meta_history WHERE destination = #{destination}",
            ),
            (
                "delete",
                "deleteByTimestamp",
                ' parameterType="map"',
                "DELETE FROM meta_history WHERE destination = #{destination} AND binlog_timestamp < #{timestamp}",
            ),
        ],
    )
    snapshot = _mapper(
        f"{dao}.MetaSnapshotMapper",
        [
            (
                "select",
                "findByTimestamp",
                f' parameterType="map" resultType="{dao}.MetaSnapshotDO"',
                "SELECT * FROM meta_snapshot WHERE destination = #{destination} AND binlog_timestamp < #{timestamp}"
                " ORDER BY binlog_timestamp DESC, id DESC LIMIT 1",
            ),
            (
                "insert",
                "insert",
                f' parameterType="{dao}.MetaSnapshotDO"',
                f"INSERT INTO meta_snapshot (gmt_create, gmt_modified, {pos_cols}, data, extra)"
                f" VALUES (CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, {pos_vals}, #{{data}}, #{{extra}})",
            ),
            (
                "update",
                "update",
                f' parameterType="{dao}.MetaSnapshotDO"',
                "UPDATE meta_snapshot SET gmt_modified = CURRENT_TIMESTAMP, binlog_file = #{binlogFile},"
                " binlog_offest = #{binlogOffest}, binlog_master_id = #{binlogMasterId},"
                " binlog_timestamp = #{binlogTimestamp}, data = #{data}, extra = #{extra}"
                " WHERE destination = #{destination} AND binlog_timestamp = 0",
            ),
            (
                "delete",
                "deleteByName",
                ' parameterType="map"',
                "DELETE FROM meta_snapshot WHERE destination = #{destination}",
            ),
            (
                "delete",
                "deleteByTimestamp",
                ' parameterType="map"',
                "DELETE FROM meta_snapshot WHERE destination = #{destination}"
                " AND binlog_timestamp < #{timestamp} AND binlog_timestamp > 0",
            ),
        ],
    )
    return {"history.xml": history, "snapshot.xml": snapshot}
