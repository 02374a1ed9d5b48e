"""The log entries pycanal's writers commit: a copy-on-write write in place of a MERGE, and the
protocol that lets a table's files have deletion vectors.

An entry is created only if its version does not exist yet (``LakePath.put_if_absent``), so a commit
by another writer in between makes it fail instead of being overwritten. A write's entry is an
ordinary remove/add commit carrying the Delta transaction id (``txn``) a MERGE would, so
exactly-once is unchanged and readers (delta-rs, Spark, DuckDB) see what a MERGE commits.
"""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple

from pycanal import __version__
from pycanal.storage import LakePath

from .log import entry_path

__all__ = ["FileAction", "commit", "merge_actions", "vectors_actions"]

_ENGINE = f"pycanal-{__version__}"


class FileAction(NamedTuple):
    """A data file as an ``add`` or ``remove`` names it."""

    path: str
    size: int
    stats: str | None = None  # its statistics (JSON text) as committed; an add's only
    vector: dict[str, Any] | None = None  # its deletion vector's descriptor


def commit(log_dir: LakePath, version: int, actions: list[dict[str, Any]]) -> bool:
    """Create the log entry of ``version`` with ``actions``; False where it exists (another
    writer's). OSError where the store cannot create it (a local filesystem without links)."""
    text = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions)
    return entry_path(log_dir, version).put_if_absent(text.encode())


def merge_actions(
    keys: list[str], app_id: str, read_version: int, txn: int, metadata: dict[str, Any],
    removes: list[FileAction], adds: list[FileAction], metrics: dict[str, int],
) -> list[dict[str, Any]]:  # fmt: skip
    """A write's entry: its ``commitInfo`` (a MERGE on ``keys`` at ``read_version``, its
    ``metrics`` and ``metadata``), the ``txn`` of ``app_id``, the ``removes`` and the ``adds``."""
    now = int(time.time() * 1000)
    info = {
        "timestamp": now,
        "operation": "MERGE",
        "operationParameters": {"mergePredicate": " AND ".join(f"t.{k} = s.{k}" for k in keys)},
        "readVersion": read_version,
        "engineInfo": _ENGINE,
        "clientVersion": _ENGINE,
        "operationMetrics": metrics,
        **{k: str(v) for k, v in metadata.items()},
    }
    actions: list[dict[str, Any]] = [
        {"commitInfo": info},
        {"txn": {"appId": app_id, "version": txn, "lastUpdated": now}},
    ]
    for f in removes:
        actions.append({"remove": {
            "path": f.path, "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True,
            "partitionValues": {}, "size": f.size, **({"deletionVector": f.vector} if f.vector else {}),
        }})  # fmt: skip
    for f in adds:
        actions.append({"add": {
            "path": f.path, "partitionValues": {}, "size": f.size, "modificationTime": now, "dataChange": True,
            **({"stats": f.stats} if f.stats is not None else {}),
            **({"deletionVector": f.vector} if f.vector else {}),
        }})  # fmt: skip
    return actions


def vectors_actions(dt: Any, read_version: int) -> list[dict[str, Any]]:
    """The entry that gives a table (delta-rs' ``dt``, at ``read_version``) deletion vectors:
    reader version 3 and writer version 7 with the feature, writer version 2's features kept
    explicit (as Delta asks of a table moving to version 7), and the table property
    ``delta.enableDeletionVectors`` set, without which Delta Lake for Spark refuses to add vectors
    to the table (a RESTORE of a version with vectors fails: tests/test_spark_delta.py)."""
    protocol, meta = dt.protocol(), dt.metadata()
    readers = set(protocol.reader_features or []) | {"deletionVectors"}
    writers = set(protocol.writer_features or []) | {"deletionVectors"}
    if protocol.min_writer_version < 7:
        writers |= {"appendOnly", "invariants"}
    info = {"timestamp": int(time.time() * 1000), "operation": "SET TBLPROPERTIES", "readVersion": read_version,
            "engineInfo": _ENGINE}  # fmt: skip
    metadata = {
        "id": meta.id,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": dt.schema().to_json(),
        "partitionColumns": list(meta.partition_columns),
        "configuration": {**meta.configuration, "delta.enableDeletionVectors": "true"},
        **({"name": meta.name} if meta.name else {}),
        **({"description": meta.description} if meta.description else {}),
        **({"createdTime": meta.created_time} if meta.created_time is not None else {}),
    }
    return [
        {"commitInfo": info},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": sorted(readers),
                      "writerFeatures": sorted(writers)}},
        {"metaData": metadata},
    ]  # fmt: skip
