"""The copies the primary holds, read from the primary itself (served in the routes snapshot by
:class:`waggle.routes.copies.CopiesService`).

One round (:meth:`CopyRegistry.read`, every ``copies-refresh-seconds``):

- the primary's databases are listed; a database seen for the first time is looked at once (its
  ``waggle.sync.source`` parameter marks a database the sync writes into), and the unmarked ones again every
  ``RECHECK`` rounds;
- every table of a marked database is read (``get_table_objects_by_name``, in chunks), and those carrying the
  sync's bookkeeping become :class:`~waggle.copies.catalog.Copy` values, their freshness from the coverage
  records in ``waggle_sys`` (:mod:`waggle.synced.coverage`).

Every replica reads for itself, so a copy made anywhere is served everywhere within a round, with no reload.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import gevent.pool

from waggle.common.logging import get_logger
from waggle.config.model import MetastoreConfig
from waggle.copies.catalog import Copies, Copy, copy_of
from waggle.copies.serve import Served
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.synced import coverage
from waggle.synced import objects as o
from waggle.upstream.client import Identity, UpstreamError

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool

log = get_logger("waggle.copies")
#: the system database the sync keeps its records in (waggle.sync.system.SYS_DB)
SYS_DB = "waggle_sys"
#: unmarked databases are looked at again every this many rounds (a database the sync started writing into)
RECHECK = 10
#: tables read per get_table_objects_by_name; databases read at once
CHUNK = 100
AT_ONCE = 8


class CopyRegistry:
    """What one replica knows of the primary's databases: which of them the sync writes into."""

    def __init__(self) -> None:
        #: primary database (lower-case) -> whether the sync writes into it
        self.marked: dict[str, bool] = {}
        self.rounds = 0

    def read(self, primary: UpstreamPool, members: Mapping[str, MetastoreConfig]) -> Copies:
        """Every copy the primary holds of these members' tables (raises :class:`UpstreamError`)."""
        names = [str(n).lower() for n in primary.invoke(None, "get_all_databases", T.get_all_databases_args(),
                                                        T.get_all_databases_result).success or ()]
        recheck = self.rounds % RECHECK == 0
        self.rounds += 1
        self.marked = {n: v for n, v in self.marked.items() if n in names}
        look = [n for n in names if n not in self.marked or (recheck and not self.marked[n])]
        group = gevent.pool.Pool(AT_ONCE)
        for name, params in zip(look, group.imap(lambda n: _parameters(primary, n), look), strict=True):
            if params is not None:
                self.marked[name] = o.SOURCE in params
        coverages = coverage.read(_parameters(primary, SYS_DB)) if SYS_DB in self.marked else []
        marked = [n for n, v in self.marked.items() if v]
        found: list[Copy] = []
        for tables in group.imap(lambda db: _copies_in(primary, db, coverages, members), marked):
            found += tables
        return Copies.of(found)


def _parameters(primary: UpstreamPool, name: str) -> dict[str, str] | None:
    """A database's parameters; None when it is gone or the primary could not say."""
    try:
        result = primary.exchange(None, "get_database", T.get_database_args(name=name), T.get_database_result)
    except UpstreamError as exc:
        log.info("copies.lookup_failed", database=name, error=str(exc))
        return None
    database = getattr(result, "success", None)
    return dict(database.parameters or {}) if database is not None else None


def _copies_in(primary: UpstreamPool, db: str, coverages: list[coverage.Coverage],
               members: Mapping[str, MetastoreConfig]) -> list[Copy]:
    names = primary.invoke(None, "get_all_tables", T.get_all_tables_args(db_name=db),
                           T.get_all_tables_result).success or []
    out: list[Copy] = []
    for start in range(0, len(names), CHUNK):
        tables = primary.invoke(None, "get_table_objects_by_name",
                                T.get_table_objects_by_name_args(dbname=db, tbl_names=names[start:start + CHUNK]),
                                T.get_table_objects_by_name_result).success or []
        for table in tables:
            found = copy_of(db, table, coverages, members)
            if found is not None:
                out.append(found)
    return out


def held_partitions(primary: UpstreamPool, identity: Identity | None, served: Served) -> list[str] | None:
    """The partitions a copy holds, by name (asked as the caller: the primary checks who asks); None when the
    primary cannot say (a prefer read is then the member's alone)."""
    try:
        result = primary.invoke(identity, "get_partition_names", T.get_partition_names_args(
            db_name=served.copy_db, tbl_name=served.copy_table, max_parts=-1), T.get_partition_names_result)
    except UpstreamError as exc:
        log.info("copies.names_failed", metastore=primary.name, table=served.describe(), error=exc.detail)
        return None
    return [str(n) for n in result.success or ()]
