"""Notification events renamed to the names clients see (waggle.events.messages). Pure: messages are built as Hive
writes them, their Thrift objects serialized with Thrift's JSON protocol from waggle's generated classes."""

from __future__ import annotations

import base64
import copy
import gzip
import json
from typing import Any, TypeVar

import pytest
from thrift.protocol.TJSONProtocol import TJSONProtocol
from thrift.transport.TTransport import TMemoryBuffer

from waggle.events.messages import message_db_names, renamed
from waggle.hms.gen.hive_metastore.ttypes import (
    ColumnStatistics,
    ColumnStatisticsDesc,
    Database,
    FieldSchema,
    Function,
    NotificationEvent,
    Partition,
    SQLForeignKey,
    SQLPrimaryKey,
    StorageDescriptor,
    Table,
)

T = TypeVar("T")
NAMES = {"sales": "emea_sales", "archive": "emea_archive", "tmp": None}
GZIP = "gzip(json-2.0)"


def db_name(name: str) -> str | None:
    assert name == name.lower(), f"db_name was given {name!r}"
    return NAMES.get(name, name)


# -- building messages as Hive writes them -------------------------------------------------------------------------
def tjson(obj: Any) -> str:
    """A Thrift object in Thrift's JSON encoding, as Hive's MessageBuilder writes it."""
    buf = TMemoryBuffer()
    obj.write(TJSONProtocol(buf))
    text: str = buf.getvalue().decode("utf-8")
    return text


def untjson(text: str, cls: type[T]) -> T:
    obj = cls()
    obj.read(TJSONProtocol(TMemoryBuffer(text.encode("utf-8"))))  # type: ignore[attr-defined]
    return obj


def table(db: str = "sales", name: str = "orders", **fields: Any) -> Table:
    sd = StorageDescriptor(cols=[FieldSchema("id", "bigint", None)], location=f"hdfs://nn/warehouse/{db}.db/{name}")
    fields = {"tableType": "EXTERNAL_TABLE", **fields}
    return Table(tableName=name, dbName=db, owner="etl", sd=sd, partitionKeys=[FieldSchema("day", "string", None)],
                 parameters={"EXTERNAL": "TRUE"}, catName="hive", **fields)


def partition(day: str, db: str = "sales") -> Partition:
    return Partition(values=[day], dbName=db, tableName="orders", parameters={"numFiles": "1"}, catName="hive",
                     sd=StorageDescriptor(location=f"hdfs://nn/warehouse/{db}.db/orders/day={day}"))


def json02(**fields: Any) -> str:
    return json.dumps({"server": "thrift://h:9083", "servicePrincipal": "", **fields, "timestamp": 1700000000},
                      separators=(",", ":"))


def gzip20(**fields: Any) -> str:
    return base64.b64encode(gzip.compress(json02(**fields).encode(), mtime=0)).decode("ascii")


def event(kind: str, message: str, db: str | None = "sales", tbl: str | None = "orders",
          fmt: str | None = "json-0.2") -> NotificationEvent:
    return NotificationEvent(eventId=7, eventTime=1700000000, eventType=kind, dbName=db, tableName=tbl,
                             message=message, messageFormat=fmt, catName="hive")


def body(e: NotificationEvent) -> dict[str, Any]:
    text = e.message
    if e.messageFormat == GZIP:
        text = gzip.decompress(base64.b64decode(text)).decode("utf-8")
    result: dict[str, Any] = json.loads(text)
    return result


def out(e: NotificationEvent) -> NotificationEvent:
    r = renamed(e, db_name)
    assert r is not None
    return r


# -- the event and its top-level names -----------------------------------------------------------------------------
def test_create_table_renames_the_event_and_its_table_object() -> None:
    e = event("CREATE_TABLE", json02(db="sales", table="orders", tableType="EXTERNAL_TABLE",
                                     tableObjJson=tjson(table()), files=[]))
    r = out(e)
    assert (r.dbName, r.tableName, r.catName, r.eventId, r.eventType) == ("emea_sales", "orders", "hive", 7,
                                                                          "CREATE_TABLE")
    msg = body(r)
    assert (msg["db"], msg["table"], msg["server"]) == ("emea_sales", "orders", "thrift://h:9083")
    t = untjson(msg["tableObjJson"], Table)
    assert (t.dbName, t.tableName, t.catName) == ("emea_sales", "orders", "hive")
    assert t.sd.location == "hdfs://nn/warehouse/sales.db/orders"  # only names change
    assert message_db_names(r.message, r.messageFormat) == ["emea_sales"]


def test_the_event_name_is_given_lower_case_and_the_table_kept() -> None:
    r = out(event("DROP_TABLE", json02(db="Sales", table="Orders"), db="SALES", tbl="Orders"))
    assert (r.dbName, r.tableName) == ("emea_sales", "Orders")
    assert body(r)["db"] == "emea_sales"


def test_a_hidden_database_hides_the_event() -> None:
    assert renamed(event("CREATE_TABLE", json02(db="tmp", table="x", tableObjJson=tjson(table("tmp"))),
                         db="tmp"), db_name) is None
    assert renamed(event("DROP_DATABASE", json02(db="TMP"), db="TMP", tbl=None), db_name) is None


def test_the_input_event_is_not_changed() -> None:
    e = event("ALTER_TABLE", json02(db="sales", table="orders", tableObjBeforeJson=tjson(table()),
                                    tableObjAfterJson=tjson(table())))
    before = copy.deepcopy(e)
    r = out(e)
    assert e == before
    assert r is not e and r != e


def test_a_view_keeps_its_text() -> None:
    sql = "SELECT `orders`.`id` FROM `sales`.`orders`"
    view = table(name="v", viewOriginalText="select id from sales.orders", viewExpandedText=sql,
                 tableType="VIRTUAL_VIEW")
    r = out(event("CREATE_TABLE", json02(db="sales", table="v", tableObjJson=tjson(view)), tbl="v"))
    t = untjson(body(r)["tableObjJson"], Table)
    assert (t.dbName, t.viewOriginalText, t.viewExpandedText) == ("emea_sales", "select id from sales.orders", sql)


# -- the objects inside --------------------------------------------------------------------------------------------
def test_alter_table_renames_both_tables_of_a_move() -> None:
    e = event("ALTER_TABLE", json02(db="sales", table="orders", tableType="EXTERNAL_TABLE",
                                    tableObjBeforeJson=tjson(table("sales", "orders")),
                                    tableObjAfterJson=tjson(table("archive", "orders_2023")),
                                    isTruncateOp="false", writeId=0))
    msg = body(out(e))
    before, after = untjson(msg["tableObjBeforeJson"], Table), untjson(msg["tableObjAfterJson"], Table)
    assert (before.dbName, before.tableName) == ("emea_sales", "orders")
    assert (after.dbName, after.tableName) == ("emea_archive", "orders_2023")
    assert (msg["db"], msg["table"], msg["isTruncateOp"]) == ("emea_sales", "orders", "false")
    assert message_db_names(out(e).message, "json-0.2") == ["emea_sales", "emea_archive"]


def test_add_partition_renames_every_partition() -> None:
    e = event("ADD_PARTITION", json02(db="sales", table="orders", tableObjJson=tjson(table()),
                                      partitions=[{"day": "2024-01-01"}, {"day": "2024-01-02"}],
                                      partitionListJson=[tjson(partition("2024-01-01")),
                                                         tjson(partition("2024-01-02"))],
                                      partitionFiles=[]))
    msg = body(out(e))
    parts = [untjson(p, Partition) for p in msg["partitionListJson"]]
    assert [(p.dbName, p.values) for p in parts] == [("emea_sales", ["2024-01-01"]), ("emea_sales", ["2024-01-02"])]
    assert untjson(msg["tableObjJson"], Table).dbName == "emea_sales"
    assert msg["partitions"] == [{"day": "2024-01-01"}, {"day": "2024-01-02"}]


def test_insert_renames_its_table_and_partition() -> None:
    e = event("INSERT", json02(db="sales", table="orders", tableObjJson=tjson(table()),
                               ptnObjJson=tjson(partition("2024-01-01")), replace="false",
                               files=["hdfs://nn/x/000000_0###"]))
    msg = body(out(e))
    assert untjson(msg["tableObjJson"], Table).dbName == "emea_sales"
    assert untjson(msg["ptnObjJson"], Partition).dbName == "emea_sales"
    assert msg["files"] == ["hdfs://nn/x/000000_0###"]


def test_database_events_rename_the_database_object() -> None:
    db = Database(name="sales", locationUri="hdfs://nn/warehouse/sales.db", parameters={}, catalogName="hive")
    r = out(event("CREATE_DATABASE", json02(cat="hive", db="sales", dbJson=tjson(db)), tbl=None))
    got = untjson(body(r)["dbJson"], Database)
    assert (got.name, got.locationUri, got.catalogName) == ("emea_sales", "hdfs://nn/warehouse/sales.db", "hive")
    r = out(event("ALTER_DATABASE", json02(db="sales", dbObjBeforeJson=tjson(db), dbObjAfterJson=tjson(db)),
                  tbl=None))
    assert [untjson(body(r)[k], Database).name for k in ("dbObjBeforeJson", "dbObjAfterJson")] == ["emea_sales"] * 2


def test_create_function_renames_the_function_object() -> None:
    fn = Function(functionName="mask", dbName="sales", className="com.example.Mask", ownerName="etl",
                  ownerType=1, createTime=1, functionType=1, resourceUris=[], catName="hive")
    r = out(event("CREATE_FUNCTION", json02(db="sales", functionObjJson=tjson(fn)), tbl=None))
    got = untjson(body(r)["functionObjJson"], Function)
    assert (got.dbName, got.functionName, got.className) == ("emea_sales", "mask", "com.example.Mask")


def test_column_statistics_rename_their_description() -> None:
    stats = ColumnStatistics(statsDesc=ColumnStatisticsDesc(isTblLevel=True, dbName="sales", tableName="orders"),
                             statsObj=[], engine="hive")
    e = event("UPDATE_TABLE_COLUMN_STAT", json02(database="sales", colStatsJson=tjson(stats),
                                                 tableObjJson=tjson(table()), writeId=0, parameters={}))
    msg = body(out(e))
    assert msg["database"] == "emea_sales"
    assert untjson(msg["colStatsJson"], ColumnStatistics).statsDesc.dbName == "emea_sales"


def test_constraints_rename_their_tables_databases() -> None:
    fk = SQLForeignKey(pktable_db="archive", pktable_name="customers", pkcolumn_name="id", fktable_db="sales",
                       fktable_name="orders", fkcolumn_name="customer", key_seq=1)
    pk = SQLPrimaryKey(table_db="sales", table_name="orders", column_name="id", key_seq=1)
    r = out(event("ADD_FOREIGNKEY", json02(foreignKeyListJson=[tjson(fk)], primaryKeyListJson=[tjson(pk)]),
                  db=None, tbl=None))
    got = untjson(body(r)["foreignKeyListJson"][0], SQLForeignKey)
    assert (got.pktable_db, got.fktable_db) == ("emea_archive", "emea_sales")
    assert untjson(body(r)["primaryKeyListJson"][0], SQLPrimaryKey).table_db == "emea_sales"


# -- transactions' messages ----------------------------------------------------------------------------------------
def test_commit_txn_renames_its_databases_list_and_objects() -> None:
    e = event("COMMIT_TXN", json02(txnid=12, writeIds=[3, 4], databases=["sales", "archive"],
                                   tables=["orders", "old"], partitions=[None, None],
                                   tableObjs=[tjson(table()), tjson(table("archive", "old"))],
                                   partitionObjs=[None, None], files=["f1", "f2"]), db=None, tbl=None)
    r = out(e)
    assert (r.dbName, r.tableName) == (None, None)
    msg = body(r)
    assert msg["databases"] == ["emea_sales", "emea_archive"]
    assert [untjson(t, Table).dbName for t in msg["tableObjs"]] == ["emea_sales", "emea_archive"]
    assert (msg["tables"], msg["partitionObjs"], msg["writeIds"]) == (["orders", "old"], [None, None], [3, 4])


@pytest.mark.parametrize(("kind", "key", "value", "expected"), [
    ("ABORT_TXN", "dbsUpdated", ["sales", "other"], ["emea_sales", "other"]),
    ("ALLOC_WRITE_ID", "dbName", "sales", "emea_sales"),
    ("COMMIT_COMPACTION", "dbname", "Sales", "emea_sales"),
    ("ACID_WRITE", "database", "sales", "emea_sales"),
])
def test_other_keys_naming_a_database(kind: str, key: str, value: Any, expected: Any) -> None:
    assert body(out(event(kind, json02(**{key: value}), db=None, tbl=None)))[key] == expected


def test_acid_write_renames_its_partition_object() -> None:
    e = event("ACID_WRITE", json02(txnid=1, writeId=2, database="sales", table="orders", partition="day=x",
                                   tableObjJson=tjson(table()), partitionObjJson=tjson(partition("x")), files=[]))
    assert untjson(body(out(e))["partitionObjJson"], Partition).dbName == "emea_sales"


def test_a_hidden_name_inside_a_message_is_left_as_it_is() -> None:
    msg = body(out(event("COMMIT_TXN", json02(databases=["tmp", "sales"]), db=None, tbl=None)))
    assert msg["databases"] == ["tmp", "emea_sales"]


# -- formats, and what cannot be read ------------------------------------------------------------------------------
def test_gzip_json_2_0_is_renamed_and_written_back_gzipped() -> None:
    e = event("ADD_PARTITION", gzip20(db="sales", table="orders", tableObjJson=tjson(table()),
                                      partitionListJson=[tjson(partition("2024-01-01"))]), fmt=GZIP)
    r = out(e)
    assert r.messageFormat == GZIP and r.message.startswith("H4sI")
    msg = body(r)
    assert msg["db"] == "emea_sales"
    assert untjson(msg["partitionListJson"][0], Partition).dbName == "emea_sales"
    assert out(e).message == r.message  # deterministic
    assert message_db_names(e.message, GZIP) == ["sales"]


def test_a_message_that_cannot_be_read_is_kept() -> None:
    for message, fmt in [("not json", "json-0.2"), ("H4sIAAAA", GZIP), ("[1, 2]", None), ("", "")]:
        r = out(event("CREATE_TABLE", message, fmt=fmt))
        assert (r.dbName, r.message, r.messageFormat) == ("emea_sales", message, fmt)
        assert message_db_names(message, fmt) == []


def test_an_object_that_cannot_be_read_is_kept() -> None:
    r = out(event("CREATE_TABLE", json02(db="sales", table="orders", tableObjJson="{broken")))
    assert body(r) == json.loads(json02(db="emea_sales", table="orders", tableObjJson="{broken"))


def test_unknown_objects_and_unchanged_messages_are_kept_byte_for_byte() -> None:
    unknown = tjson(table())
    r = out(event("SOMETHING_NEW", json02(db="sales", somethingObjJson=unknown)))
    assert body(r)["somethingObjJson"] == unknown
    e = event("CREATE_TABLE", json02(db="other", table="orders", tableObjJson=tjson(table("other"))), db="other")
    assert out(e).message == e.message


def test_an_event_without_a_database_keeps_its_message_when_it_names_none() -> None:
    e = event("OPEN_TXN", json02(txnIds=[1, 2]), db=None, tbl=None, fmt=None)
    r = out(e)
    assert r == e and r is not e
    assert message_db_names(e.message, None) == []


def test_empty_or_odd_values_are_left_alone() -> None:
    e = event("COMMIT_TXN", json02(db="", databases=None, dbsUpdated=[None, 3], tableObjs=7), db="", tbl=None)
    r = out(e)
    assert (r.dbName, r.message) == ("", e.message)


def test_statistics_carried_in_a_table_are_renamed() -> None:
    stats = ColumnStatistics(statsDesc=ColumnStatisticsDesc(isTblLevel=True, dbName="sales", tableName="orders"),
                             statsObj=[])
    r = out(event("CREATE_TABLE", json02(db="sales", table="orders", tableObjJson=tjson(table(colStats=stats)))))
    assert untjson(body(r)["tableObjJson"], Table).colStats.statsDesc.dbName == "emea_sales"
