"""``waggle_sys``: the database the sync keeps in the primary for its own records (policies' checkpoints and
leases, ``replication_metrics``), as Hive keeps ``repl.last.id`` in the replicated database and
``sys.replication_metrics`` in ``sys``."""

from __future__ import annotations

from waggle.hms.gen.hive_metastore.ttypes import AlreadyExistsException, Database
from waggle.sync.hms import Metastore

SYS_DB = "waggle_sys"


def ensure_database(target: Metastore) -> str:
    """Create ``waggle_sys`` in the target unless it exists; its location."""
    location = target.database_location(SYS_DB)
    if location is None:
        try:
            target.create_database(Database(name=SYS_DB, description="waggle sync's records: policies' "
                                            "checkpoints and replication_metrics", parameters={}))
        except AlreadyExistsException:
            pass  # another process made it meanwhile
        location = target.database_location(SYS_DB) or ""
    return location
