"""delta-rs handles on a lake's tables, wherever the lake is: the table's URI and the lake's
storage options (S3 settings not given come from the environment, as for obstore and s3a)."""

from __future__ import annotations

from typing import Any

from deltalake import DeltaTable

from pycanal.storage import LakePath

__all__ = ["delta_table", "is_delta_table", "storage"]


def storage(path: LakePath) -> dict[str, Any]:
    """``table_or_uri`` and ``storage_options`` for delta-rs' functions (``write_deltalake``, ...)."""
    return {"table_or_uri": path.uri, "storage_options": path.storage_options or None}


def delta_table(path: LakePath, version: int | None = None) -> DeltaTable:
    """The Delta table at ``path`` (at ``version``, or its latest)."""
    return DeltaTable(path.uri, version=version, storage_options=path.storage_options or None)


def is_delta_table(path: LakePath) -> bool:
    return DeltaTable.is_deltatable(path.uri, storage_options=path.storage_options or None)
