"""``waggle_sys``: the database the sync keeps in the primary for its own records (policies' checkpoints and
leases, ``replication_metrics``), as Hive keeps ``repl.last.id`` in the replicated database and
``sys.replication_metrics`` in ``sys``."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from waggle.hms.gen.hive_metastore.ttypes import AlreadyExistsException, Database, NoSuchObjectException
from waggle.sync.hms import Metastore
from waggle.synced import coverage
from waggle.synced import objects as o

SYS_DB = "waggle_sys"
#: one read-modify-write of waggle_sys's parameters at a time in this process
WRITE = threading.Lock()


def ensure_database(target: Metastore) -> str:
    """Create ``waggle_sys`` in the target unless it exists; its location."""
    location = target.database_location(SYS_DB)
    if location is None:
        try:  # the sync's own records: not one of the run's (throttled, counted) writes
            target.client.create_database(Database(name=SYS_DB, description="waggle sync's records: policies' "
                                            "checkpoints and replication_metrics", parameters={}))
        except AlreadyExistsException:
            pass  # another process made it meanwhile
        location = target.database_location(SYS_DB) or ""
    return location


def update_parameters(target: Metastore, values: dict[str, str | None]) -> None:
    """Set (or, for None, remove) parameters of ``waggle_sys``, read again just before they are written."""
    with WRITE:
        db = target.client.get_database(SYS_DB)
        params = dict(db.parameters or {})
        for key, value in values.items():
            if value is None:
                params.pop(key, None)
            else:
                params[key] = value
        db.parameters = params
        target.client.alter_database(SYS_DB, db)


def record_coverage(target: Metastore, name: str, source: str, patterns: Iterable[str], at: float,
                    database: str | None = None, mode: str | None = None) -> None:
    """Say that every copy of ``source``'s tables that ``patterns`` name matched its source at ``at`` (epoch
    seconds): the proxy judges the copies' freshness by it (:mod:`waggle.synced.coverage`)."""
    ensure_database(target)
    update_parameters(target, {coverage.PREFIX + name: coverage.record(source, patterns, at, database, mode)})


def mark_target(target: Metastore, db: str, source: str) -> None:
    """Mark a database the sync writes into (``waggle.sync.source``), so that the proxy looks for copies in it;
    a database made by the sync has the mark already."""
    try:
        database = target.client.get_database(db)
    except NoSuchObjectException:
        return
    params = dict(database.parameters or {})
    if o.SOURCE in params:
        return
    params[o.SOURCE] = source
    database.parameters = params
    target.client.alter_database(db, database)
