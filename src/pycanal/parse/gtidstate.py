"""The GTID part of every entry's Header in GTID mode (``canal.instance.gtidon``).

Header ``gtid`` is the executed GTID set, kept up to date from the GTID events; the ``curtGtid``,
``curtGtidSn`` and ``curtGtidLct`` props name the current transaction's GTID (MySQL logs the
sequence number and last committed with it; Canal sets them for MySQL only, pycanal sets
``curtGtid`` for MariaDB too: ``docs/compatibility.md``). Outside GTID mode both stay empty.
"""

from __future__ import annotations

from typing import Any

from pycanal.binlog import events as ev
from pycanal.binlog.constants import EventType as E

__all__ = ["GtidState"]

_ANONYMOUS_GTID, _MARIADB_GTID = int(E.ANONYMOUS_GTID), int(E.MARIADB_GTID)  # read per GTID event


class GtidState:
    """The executed set (``gtid_set``: a ``MysqlGtidSet``/``MariadbGtidSet``, copied; None
    outside GTID mode), its ``text`` and the current GTID's ``props``."""

    def __init__(self, gtid_set: Any = None) -> None:
        self.gtid_set = gtid_set.copy() if gtid_set is not None else None
        self.text = str(self.gtid_set) if self.gtid_set is not None else ""
        self.props: list[tuple[str, str]] = []

    def track(self, e: ev.GtidEvent) -> bool:
        """Take ``e`` into the state; False for an anonymous GTID (it gives no entry)."""
        if e.type == _ANONYMOUS_GTID or e.gtid is None:
            return False
        if self.gtid_set is not None:
            info = e.info
            self.gtid_set.update(e.gtid)
            self.text = str(self.gtid_set)
            props = [("curtGtid", e.gtid)]
            if e.type != _MARIADB_GTID:
                if info.sequence_number is not None:
                    props.append(("curtGtidSn", str(info.sequence_number)))
                if info.last_committed is not None:
                    props.append(("curtGtidLct", str(info.last_committed)))
            self.props = props
        return True

    def track_list(self, e: ev.GtidListEvent) -> None:
        """Take a MariaDB GTID_LIST into the executed set."""
        if self.gtid_set is not None:
            for gtid in e.gtid_set.split(","):
                if gtid:
                    self.gtid_set.update(gtid)
            self.text = str(self.gtid_set)
