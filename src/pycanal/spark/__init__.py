"""The Spark pipeline: change rows from binlog files or a Canal stream, applied exactly once to a
change-log table and current-state Delta tables (see docs/spark.md).

Modules: ``rows`` (the change-row model), ``binlog_source`` (``format("binlog")``),
``canal_source`` (``format("canal")``), ``types`` (MySQL to Arrow/Spark types), ``apply``
(``apply_changes`` for ``foreachBatch``, over ``changelog`` and ``current``). PySpark is only
needed by the sources; ``rows`` and ``apply`` work on Arrow data.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register pycanal's data sources (``binlog``, ``canal``) with a SparkSession."""
    from .binlog_source import BinlogDataSource
    from .canal_source import CanalDataSource

    spark.dataSource.register(BinlogDataSource)
    spark.dataSource.register(CanalDataSource)
