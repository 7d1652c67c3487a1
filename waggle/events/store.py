"""The journal's home in the primary: views of its ``waggle_sys`` database (views have no files, and their
parameters hold text), through the primary's pool as waggle itself.

- ``waggle_sys.merged_log``: the merger's lease (parameter ``lease``);
- ``waggle_sys.merged_log_<first id>``: one block of rounds each (:class:`waggle.events.journal.Block`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from waggle.events.journal import BLOCK_PREFIX, Block, block_first, block_name
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore.ttypes import Database, FieldSchema, SerDeInfo, StorageDescriptor, Table

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool

__all__ = ["ROOT", "SYS_DB", "JournalError", "JournalStore"]

#: the database waggle keeps its records in (as the sync does: waggle.sync.system)
SYS_DB = "waggle_sys"
#: the view whose parameters hold the merger's lease
ROOT = "merged_log"


def _view(name: str, parameters: dict[str, str]) -> Table:
    sd = StorageDescriptor(cols=[FieldSchema("merged_id", "bigint", "")], serdeInfo=SerDeInfo(parameters={}),
                           parameters={})
    return Table(tableName=name, dbName=SYS_DB, owner="waggle", tableType="VIRTUAL_VIEW",
                 viewOriginalText="select 1", viewExpandedText="select 1", sd=sd, partitionKeys=[],
                 parameters={"comment": "waggle's merged notification log (notification-log: federated)",
                             **parameters})


class JournalError(Exception):
    """The primary refused a read or a write of the journal; the message says which."""


class JournalStore:
    """Reads and writes the journal's views in the primary."""

    def __init__(self, primary: Callable[[], UpstreamPool]) -> None:
        self._primary = primary

    def _call(self, method: str, result: type, **args: Any) -> Any:
        """A call whose declared exception is returned (as the result's), not raised."""
        return self._primary().exchange(None, method, getattr(T, f"{method}_args")(**args), result)

    def _table(self, name: str) -> Table | None:
        result = self._call("get_table", T.get_table_result, dbname=SYS_DB, tbl_name=name)
        if result.o2 is not None:
            return None
        if result.o1 is not None:
            raise JournalError(f"cannot read {SYS_DB}.{name}: {result.o1.message}")
        return result.success  # type: ignore[no-any-return]

    def ensure(self) -> None:
        """Make the database and the root view unless they exist."""
        found = self._call("get_database", T.get_database_result, name=SYS_DB)
        if found.success is None:
            made = self._call("create_database", T.create_database_result,
                              database=Database(name=SYS_DB, description="waggle's records", parameters={}))
            if made.o2 is not None or made.o3 is not None:
                raise JournalError(f"cannot create {SYS_DB}: {(made.o2 or made.o3).message}")
        if self._table(ROOT) is None:
            made = self._call("create_table", T.create_table_result, tbl=_view(ROOT, {}))
            if made.o2 is not None or made.o3 is not None or made.o4 is not None:
                raise JournalError(f"cannot create {SYS_DB}.{ROOT}: {(made.o2 or made.o3 or made.o4).message}")

    # -- the lease ---------------------------------------------------------------------------------------------
    def lease(self) -> str | None:
        table = self._table(ROOT)
        return None if table is None else (table.parameters or {}).get("lease")

    def set_lease(self, value: str | None) -> None:
        table = self._table(ROOT)
        if table is None:
            raise JournalError(f"{SYS_DB}.{ROOT} is gone")
        params = dict(table.parameters or {})
        if value is None:
            params.pop("lease", None)
        else:
            params["lease"] = value
        table.parameters = params
        self._alter(ROOT, table)

    def _alter(self, name: str, table: Table) -> None:
        self._primary().invoke(None, "alter_table", T.alter_table_args(dbname=SYS_DB, tbl_name=name, new_tbl=table),
                               T.alter_table_result)

    # -- blocks ------------------------------------------------------------------------------------------------
    def firsts(self) -> list[int]:
        """The first ids of the blocks there are, ascending."""
        result = self._primary().invoke(None, "get_tables", T.get_tables_args(db_name=SYS_DB,
                                                                              pattern=BLOCK_PREFIX + "*"),
                                        T.get_tables_result)
        return sorted(f for f in (block_first(n) for n in result.success or ()) if f is not None)

    def read(self, first: int) -> Block | None:
        table = self._table(block_name(first))
        return None if table is None else Block.parse(first, table.parameters or {})

    def write(self, block: Block, new: bool) -> None:
        """Write a block whole: a new one is created (failing if another merger made it meanwhile)."""
        if new:
            made = self._call("create_table", T.create_table_result, tbl=_view(block.name, block.parameters()))
            found = made.o1 or made.o2 or made.o3 or made.o4
            if found is not None:
                raise JournalError(f"cannot create {SYS_DB}.{block.name}: {type(found).__name__}: {found.message}")
            return
        self._alter(block.name, _view(block.name, block.parameters()))

    def drop(self, first: int) -> None:
        name = block_name(first)
        self._primary().invoke(None, "drop_table", T.drop_table_args(dbname=SYS_DB, name=name, deleteData=False),
                               T.drop_table_result)

