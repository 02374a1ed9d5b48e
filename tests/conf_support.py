"""A conf dir of one destination ``d`` reading a private MariaDB from its current position."""

from __future__ import annotations

from pathlib import Path

from pycanal.testing import PrivateMariaDB


def one_destination_conf(root: Path, db: PrivateMariaDB, user: str, table: str, **instance: str) -> Path:
    """``root`` with canal.properties and ``d/instance.properties``: ``db`` read as ``user`` from
    its binlog's current end, the filter on ``pycanal.<table>``, plus ``instance`` keys."""
    file, pos = db.current_binlog()
    (root / "d").mkdir(parents=True)
    (root / "canal.properties").write_text(
        f"canal.destinations = d\ncanal.conf.dir = .\ncanal.file.data.dir = {root}/data\ncanal.auto.scan = false\n"
    )
    props = {
        "canal.instance.master.address": f"{db.host}:{db.port}",
        "canal.instance.master.journal.name": file,
        "canal.instance.master.position": str(pos),
        "canal.instance.dbUsername": user,
        "canal.instance.filter.regex": f"pycanal\\\\.{table}",
        **instance,
    }
    (root / "d" / "instance.properties").write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    return root
