"""A transaction of several tables of one member (``POST /v1/{prefix}/transactions/commit``).

Iceberg's Hive catalog commits one table at a time; a transaction here takes every table's metastore lock (in
name order, so two transactions cannot deadlock), checks every requirement against the current metadata, writes
every new metadata file, then swaps the pointers one by one and unlocks. Until the first swap nothing has
changed: a failed requirement is a 409 that leaves every table as it was. A metastore has no write spanning
tables, so a swap that fails after another succeeded leaves the transaction partly applied; the answer says so
(500 ``CommitStateUnknownException``, naming the tables that were committed and those that were not).
"""

from __future__ import annotations

from typing import Any

from hive_metastore.ttypes import EnvironmentContext, LockState, UnlockRequest
from pyiceberg.catalog.hive import (
    DO_NOT_UPDATE_STATS,
    DO_NOT_UPDATE_STATS_DEFAULT,
    HIVE2_COMPATIBLE,
    HIVE2_COMPATIBLE_DEFAULT,
    _construct_hive_storage_descriptor,
    _construct_parameters,
)
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import CommitTableRequest
from pyiceberg.utils.properties import property_as_bool

from waggle.rest.catalog import FederatedCatalog
from waggle.rest.errors import RestError

Ident = tuple[str, str]


def commit_together(catalog: FederatedCatalog, commits: list[tuple[Ident, CommitTableRequest]]) -> None:
    """Commit each table's changes, all or (past the first pointer swap, said) some."""
    idents = [ident for ident, _ in commits]
    if len(set(idents)) != len(idents):
        raise RestError(400, "BadRequestException", "a table appears twice in one transaction")
    with catalog.client() as client:
        locks: list[int] = []
        try:
            for db, table in sorted(idents):
                lock = client.lock(catalog._create_lock_request(db, table))
                locks.append(lock.lockid)
                if lock.state == LockState.WAITING:
                    catalog._wait_for_lock(db, table, lock.lockid, client)
                elif lock.state != LockState.ACQUIRED:
                    raise CommitFailedException(f"Failed to acquire lock for {db}.{table}, state: {lock.state}")
            staged = []
            for (db, table), commit in commits:
                hive = catalog._get_hive_table(client, db, table)
                current = catalog._convert_hive_into_iceberg(hive)
                staged.append((hive, current, catalog._update_and_stage_table(
                    current, (db, table), commit.requirements, commit.updates)))
            for _, _, new in staged:
                catalog._write_metadata(new.metadata, new.io, new.metadata_location)
            _swap(catalog, client, staged)
        finally:
            for lockid in locks:
                try:
                    client.unlock(UnlockRequest(lockid=lockid))
                except Exception:
                    pass


def _swap(catalog: FederatedCatalog, client: Any, staged: list[tuple[Any, Any, Any]]) -> None:
    hive2 = property_as_bool(catalog.properties, HIVE2_COMPATIBLE, HIVE2_COMPATIBLE_DEFAULT)
    done: list[str] = []
    for hive, current, new in staged:
        name = f"{hive.dbName}.{hive.tableName}"
        parameters = dict(hive.parameters or {})
        for key in current.properties.keys() - new.properties.keys():
            parameters.pop(key, None)
        parameters.update(_construct_parameters(metadata_location=new.metadata_location,
                                                previous_metadata_location=current.metadata_location,
                                                metadata_properties=new.properties))
        hive.parameters = parameters
        hive.sd = _construct_hive_storage_descriptor(new.schema(), new.location(), hive2)
        try:
            client.alter_table_with_environment_context(
                dbname=hive.dbName, tbl_name=hive.tableName, new_tbl=hive,
                environment_context=EnvironmentContext(properties={DO_NOT_UPDATE_STATS: DO_NOT_UPDATE_STATS_DEFAULT}))
        except Exception as exc:
            if not done:
                raise
            rest = [f"{h.dbName}.{h.tableName}" for h, _, _ in staged[len(done):]]
            raise RestError(500, "CommitStateUnknownException",
                            f"the transaction is partly applied: {', '.join(done)} committed; {name} failed "
                            f"({exc}); {', '.join(rest)} not committed") from exc
        done.append(name)

