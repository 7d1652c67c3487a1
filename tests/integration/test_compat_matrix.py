"""The compatibility matrix of docs/compatibility.md, cell by cell, on real parts where they exist.

Clients: Hive 2.3 (hmsclient), Hive 3.1 (hive-metastore-client) and Hive 4 (waggle's own IDL) generated code.
Upstreams: the real Hive 2.3 metastore (waggle's primary), and stub Hive 3.1 / 4.0.1 metastores wrapping real
2.3 ones (``tests/support/hive_stubs.py``), federated with prefixes ``v31_`` and ``v4_``. Every cell of
:func:`waggle.docs.compat_page.matrix` is one case of :func:`test_cell`; a cell with no recipe fails.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.clients import hive2_client, release_client
from tests.support.compat import CompatFederation
from waggle.docs.compat_page import matrix

CELLS = [(row.key, cell) for row in matrix() for cell in row.cells]


@dataclass
class Ctx:
    c: Any  # the client of the cell's Hive release
    T: Any  # that release's ttypes
    client: str
    upstream: str
    db: str  # the database as clients see it through waggle
    member_db: str  # the same database in its metastore
    stub: Any  # the stub metastore, or None for the real Hive 2.3
    fed: CompatFederation

    def q(self, db: str | None = None) -> str:
        """A string database argument the way this client's release writes it."""
        name = db or self.db
        return name if self.client == "2.3" else f"@hive#{name}"

    def filled(self, catalog: str | None) -> None:
        """Replies from the Hive 2.3 metastore carry the catalog the Hive 3+ client named."""
        if self.upstream == "2.3":
            assert catalog == "hive"


def _get_databases_all(x: Ctx) -> None:
    names = x.c.get_databases("@hive#")
    assert x.db in names
    assert "v31_compat31" in names and "v4_compat4" in names and "compat23" in names


def _get_table_meta_pattern(x: Ctx) -> None:
    metas = x.c.get_table_meta(f"@hive#{x.db[:-1]}*", "*", None)
    assert sorted(m.tableName for m in metas if m.dbName == x.db) == ["keyed", "parts", "plain"]
    assert {m.dbName for m in metas} == {x.db}
    for m in metas:
        x.filled(m.catName)


def _get_database_qualified(x: Ctx) -> None:
    db = x.c.get_database(f"@hive#{x.db}")
    assert db.name == x.db
    x.filled(db.catalogName)


def _get_table_req_catname(x: Ctx) -> None:
    table = x.c.get_table_req(x.T.GetTableRequest(dbName=x.db, tblName="parts", catName="hive")).table
    assert (table.dbName, table.tableName) == (x.db, "parts")
    x.filled(table.catName)


def _get_database_req(x: Ctx) -> None:
    assert x.c.get_database_req(x.T.GetDatabaseRequest(name=x.db, catalogName="hive")).name == x.db
    with pytest.raises(x.T.NoSuchObjectException):
        x.c.get_database_req(x.T.GetDatabaseRequest(name=x.db + "_missing", catalogName="hive"))


def _get_table_objects_by_name_req(x: Ctx) -> None:
    tables = x.c.get_table_objects_by_name_req(
        x.T.GetTablesRequest(dbName=x.db, tablesPattern="pa*|pl*", catName="hive")).tables
    assert sorted(t.tableName for t in tables) == ["parts", "plain"]
    assert {t.dbName for t in tables} == {x.db}


DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def _get_partitions_req(x: Ctx) -> None:
    parts = x.c.get_partitions_req(x.T.PartitionsRequest(dbName=x.db, tblName="parts", catName="hive")).partitions
    assert sorted(p.values[0] for p in parts) == DAYS
    assert {p.dbName for p in parts} == {x.db}


def _get_partitions_by_names_req(x: Ctx) -> None:
    result = x.c.get_partitions_by_names_req(x.T.GetPartitionsByNamesRequest(
        db_name=x.q(), tbl_name="parts", names=["ds=2024-01-02", "ds=2024-01-03"]))
    assert sorted(p.values[0] for p in result.partitions) == DAYS[1:]
    assert {p.dbName for p in result.partitions} == {x.db}


def _get_partition_names_req(x: Ctx) -> None:
    names = x.c.get_partition_names_req(x.T.PartitionsByExprRequest(
        dbName=x.db, tblName="parts", expr=b"", catName="hive"))
    assert sorted(names) == [f"ds={d}" for d in DAYS]


def _get_partitions_ps_with_auth_req(x: Ctx) -> None:
    result = x.c.get_partitions_ps_with_auth_req(x.T.GetPartitionsPsWithAuthRequest(
        dbName=x.db, tblName="parts", partVals=["2024-01-02"], userName="alice", groupNames=["analysts"],
        catName="hive"))
    assert [p.values for p in result.partitions] == [["2024-01-02"]]
    by_name = x.c.get_partitions_ps_with_auth_req(x.T.GetPartitionsPsWithAuthRequest(
        dbName=x.db, tblName="parts", partNames=["ds=2024-01-03"], catName="hive"))
    assert [p.values for p in by_name.partitions] == [["2024-01-03"]]


def _get_partition_req(x: Ctx) -> None:
    part = x.c.get_partition_req(x.T.GetPartitionRequest(
        dbName=x.db, tblName="parts", partVals=["2024-01-03"], catName="hive")).partition
    assert (part.dbName, part.values) == (x.db, ["2024-01-03"])


def _alter_table_req(x: Ctx) -> None:
    table = x.c.get_table_req(x.T.GetTableRequest(dbName=x.db, tblName="plain")).table
    marker = uuid.uuid4().hex
    table.parameters["waggle.compat"] = marker
    x.c.alter_table_req(x.T.AlterTableRequest(dbName=x.db, tableName="plain", table=table, catName="hive"))
    assert x.c.get_table_req(x.T.GetTableRequest(dbName=x.db, tblName="plain")).table \
        .parameters["waggle.compat"] == marker


def _alter_partitions_req(x: Ctx) -> None:
    part = x.c.get_partition_req(x.T.GetPartitionRequest(
        dbName=x.db, tblName="parts", partVals=["2024-01-02"], catName="hive")).partition
    marker = uuid.uuid4().hex
    part.parameters["waggle.compat"] = marker
    x.c.alter_partitions_req(x.T.AlterPartitionsRequest(dbName=x.db, tableName="parts", partitions=[part],
                                                        catName="hive"))
    assert x.c.get_partition_req(x.T.GetPartitionRequest(
        dbName=x.db, tblName="parts", partVals=["2024-01-02"], catName="hive")).partition \
        .parameters["waggle.compat"] == marker


def _create_table_req(x: Ctx) -> None:
    table = x.c.get_table_req(x.T.GetTableRequest(dbName=x.db, tblName="plain")).table
    name = f"made_{uuid.uuid4().hex[:8]}"
    table.tableName = name
    table.sd.location = None
    table.parameters = {"EXTERNAL": "TRUE"}
    x.c.create_table_req(x.T.CreateTableRequest(table=table))
    made = x.c.get_table_req(x.T.GetTableRequest(dbName=x.db, tblName=name)).table
    assert (made.dbName, made.tableName) == (x.db, name)


def _drop_database_req(x: Ctx) -> None:
    scratch = f"gone_{uuid.uuid4().hex[:8]}"
    store = x.fed.metastores[x.upstream]
    with hive2_client(store.port) as direct:
        from hmsclient.genthrift.hive_metastore import ttypes as h2

        direct.create_database(h2.Database(name=scratch, locationUri=f"file://{store.warehouse}/{scratch}.db",
                                           parameters={}))
    shown = x.db[: len(x.db) - len(x.member_db)] + scratch  # the member's prefix, if any
    x.c.drop_database_req(x.T.DropDatabaseRequest(name=shown, catalogName="hive", ignoreUnknownDb=False,
                                                  deleteData=True, cascade=True))
    with hive2_client(store.port) as direct:
        assert scratch not in direct.get_all_databases()
    x.c.drop_database_req(x.T.DropDatabaseRequest(name=shown, catalogName="hive", ignoreUnknownDb=True,
                                                  deleteData=True, cascade=True))  # already gone: no error
    # without ignoreUnknownDb the metastore's own answer comes back (Hive 2.3 says it with a MetaException)
    with pytest.raises((x.T.NoSuchObjectException, x.T.MetaException)):
        x.c.drop_database_req(x.T.DropDatabaseRequest(name=shown, catalogName="hive", ignoreUnknownDb=False,
                                                      deleteData=True, cascade=True))


def _truncate_table_req(x: Ctx) -> None:
    request = x.T.TruncateTableRequest(dbName=x.q(), tableName="plain", partNames=None)
    if x.upstream == "2.3":
        with pytest.raises(x.T.MetaException) as info:
            x.c.truncate_table_req(request)
        assert "neither truncate_table_req nor truncate_table" in info.value.message
        return
    x.c.truncate_table_req(request)
    sent = x.stub.received("truncate_table" if x.upstream == "3.1" else "truncate_table_req")[-1].args
    request_struct = getattr(sent, "req", sent)
    # Hive 3.1 takes the catalog out of truncate_table's string; Hive 4 reads it inside the request
    expected = x.member_db if x.upstream == "3.1" else x.q(x.member_db)
    assert (request_struct.dbName, request_struct.tableName) == (expected, "plain")


def _get_all_table_constraints(x: Ctx) -> None:
    everything = x.c.get_all_table_constraints(x.T.AllTableConstraintsRequest(
        dbName=x.db, tblName="keyed", catName="hive")).allTableConstraints
    assert [(k.table_db, k.table_name, k.column_name) for k in everything.primaryKeys] == [(x.db, "keyed", "id")]
    assert everything.foreignKeys == [] and everything.uniqueConstraints == []
    assert everything.notNullConstraints == [] and everything.checkConstraints == []


def _get_fields_req(x: Ctx) -> None:
    fields = x.c.get_fields_req(x.T.GetFieldsRequest(dbName=x.db, tblName="plain", catName="hive")).fields
    assert [f.name for f in fields] == ["id", "name"]


def _get_schema_req(x: Ctx) -> None:
    fields = x.c.get_schema_req(x.T.GetSchemaRequest(dbName=x.db, tblName="parts", catName="hive")).fields
    assert [f.name for f in fields] == ["id", "ds"]


def _get_table(x: Ctx) -> None:
    table = x.c.get_table(x.q(), "plain")
    assert (table.dbName, table.tableName) == (x.db, "plain")
    with pytest.raises(x.T.NoSuchObjectException):
        x.c.get_table(x.q(), "missing")


def _get_table_objects_by_name(x: Ctx) -> None:
    tables = x.c.get_table_objects_by_name(x.q(), ["plain", "parts", "missing"])
    assert sorted((t.dbName, t.tableName) for t in tables) == [(x.db, "parts"), (x.db, "plain")]


def _fire_listener_event(x: Ctx) -> None:
    """The files of an INSERT event reach the metastore's log (the real 2.3 one, under a stub too)."""
    import json

    from hmsclient.genthrift.hive_metastore.ttypes import NotificationEventRequest

    store = x.fed.metastores[x.upstream]
    with hive2_client(store.port) as direct:
        after = direct.get_current_notificationEventId().eventId
    files = [f"file:/tmp/fired/{uuid.uuid4().hex}/part-0"]
    request = x.T.FireEventRequest(successful=True, dbName=x.db, tableName="plain", data=x.T.FireEventRequestData(
        insertData=x.T.InsertEventRequestData(filesAdded=files)))
    if x.client != "2.3":
        request.catName = "hive"
    x.c.fire_listener_event(request)
    if x.stub is not None:  # what the newer metastore reads
        assert x.stub.received("fire_listener_event")[-1].args.rqst.data.insertData.filesAdded == files
    with hive2_client(store.port) as direct:
        events = direct.get_next_notification(NotificationEventRequest(lastEvent=after, maxEvents=100)).events
    assert [json.loads(e.message)["files"] for e in events or () if e.eventType == "INSERT" and
            (e.dbName, e.tableName) == (x.member_db, "plain")] == [files]


RECIPES: dict[str, Callable[[Ctx], None]] = {
    "get_databases_all": _get_databases_all,
    "get_table_meta_pattern": _get_table_meta_pattern,
    "get_database_qualified": _get_database_qualified,
    "get_table_req_catname": _get_table_req_catname,
    "get_database_req": _get_database_req,
    "get_table_objects_by_name_req": _get_table_objects_by_name_req,
    "get_partitions_req": _get_partitions_req,
    "get_partitions_by_names_req": _get_partitions_by_names_req,
    "get_partition_names_req": _get_partition_names_req,
    "get_partitions_ps_with_auth_req": _get_partitions_ps_with_auth_req,
    "get_partition_req": _get_partition_req,
    "alter_table_req": _alter_table_req,
    "alter_partitions_req": _alter_partitions_req,
    "create_table_req": _create_table_req,
    "drop_database_req": _drop_database_req,
    "truncate_table_req": _truncate_table_req,
    "get_all_table_constraints": _get_all_table_constraints,
    "get_fields_req": _get_fields_req,
    "get_schema_req": _get_schema_req,
    "get_table": _get_table,
    "get_table_objects_by_name": _get_table_objects_by_name,
    "fire_listener_event": _fire_listener_event,
}


def test_every_row_has_a_recipe() -> None:
    assert {row.key for row in matrix()} == set(RECIPES)


@pytest.mark.parametrize(("row", "cell"), CELLS, ids=[cell.test_id(row) for row, cell in CELLS])
def test_cell(compat: CompatFederation, row: str, cell: Any) -> None:
    db, member_db = compat.databases[cell.upstream]
    stub = compat.stubs.get(cell.upstream)
    sent_as = CATALOG_CALLS.get(row, row)
    before = len(stub.received(sent_as)) if stub is not None else 0
    with release_client(cell.client, compat.waggle.port) as (client, types):
        RECIPES[row](Ctx(client, types, cell.client, cell.upstream, db, member_db, stub, compat))
        # the connection is still in step after whatever was bridged
        assert client.get_database("default").name == "default"
    if stub is None:
        return
    sent = stub.received(sent_as)[before:]
    if row == "get_table_req_catname":
        # a metastore with catalogs gets the request's catalog
        assert sent and all(c.args.req.catName == "hive" for c in sent), sent
    elif row in CATALOG_CALLS:
        # a metastore with catalogs gets the names as the client wrote them
        assert sent and all(b"@hive#" in c.raw for c in sent), sent
    elif cell.outcome == "relayed":
        assert sent, f"waggle did not offer {row} to the Hive {cell.upstream} stub"
    elif cell.outcome.startswith("via ") and row != "get_table_objects_by_name_req":
        assert not [c for c in sent if not c.refused], f"{row} reached the stub although it is bridged"


#: the catalog rows, and the call each sends
CATALOG_CALLS = {"get_databases_all": "get_databases", "get_table_meta_pattern": "get_table_meta",
                 "get_database_qualified": "get_database", "get_table_req_catname": "get_table_req"}
