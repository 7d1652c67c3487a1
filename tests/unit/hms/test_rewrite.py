"""Name rewriting driven by the method table's field registry, over real generated structs."""

from __future__ import annotations

from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore import ttypes
from waggle.hms.methods import STRUCT_DB_FIELDS
from waggle.hms.rewrite import Rewriter

REWRITER = Rewriter(STRUCT_DB_FIELDS)


def add_prefix(db: str) -> str:
    return "fed_" + db


def partition(i: int, db: str = "web") -> ttypes.Partition:
    sd = ttypes.StorageDescriptor(cols=[ttypes.FieldSchema("c", "int", None)], location=f"/w/p={i}",
                                  serdeInfo=ttypes.SerDeInfo(parameters={"a": "b"}))
    return ttypes.Partition(values=[str(i)], dbName=db, tableName="t", sd=sd, parameters={})


def test_nested_fields_waggle_dance_misses_are_rewritten():
    spec = ttypes.PartitionSpec(
        dbName="web", tableName="t",
        partitionList=ttypes.PartitionListComposingSpec(partitions=[partition(1), partition(2)]))
    table = ttypes.Table(dbName="web", tableName="t",
                         colStats=ttypes.ColumnStatistics(statsDesc=ttypes.ColumnStatisticsDesc(
                             isTblLevel=True, dbName="web", tableName="t")))
    ids = ttypes.TableValidWriteIds(fullTableName="web.t", writeIdHighWaterMark=1, invalidWriteIds=[],
                                    abortedBits=b"")
    locks = ttypes.ShowLocksResponse(locks=[ttypes.ShowLocksResponseElement(dbname="web", lockid=1)])
    event = ttypes.NotificationEvent(eventId=1, eventTime=1, eventType="X", dbName="web", message="{}")
    for obj in (spec, table, ids, locks, event):
        REWRITER.rewrite(obj, add_prefix)
    assert spec.dbName == "fed_web"
    assert [p.dbName for p in spec.partitionList.partitions] == ["fed_web", "fed_web"]
    assert table.dbName == "fed_web" and table.colStats.statsDesc.dbName == "fed_web"
    assert ids.fullTableName == "fed_web.t"
    assert locks.locks[0].dbname == "fed_web"
    assert event.dbName == "fed_web"


def test_results_and_requests_alike():
    result = T.get_table_objects_by_name_req_result(success=ttypes.GetTablesResult(
        tables=[ttypes.Table(dbName="web", tableName="a"), ttypes.Table(dbName="web", tableName="b")]))
    REWRITER.rewrite(result, add_prefix)
    assert [t.dbName for t in result.success.tables] == ["fed_web", "fed_web"]
    args = T.get_valid_write_ids_args(rqst=ttypes.GetValidWriteIdsRequest(fullTableNames=["web.a", "ads.b"]))
    assert REWRITER.names_in(args) == ["web", "ads"]


def test_hive_object_name_only_for_database_objects():
    db_ref = ttypes.HiveObjectRef(objectType=ttypes.HiveObjectType.DATABASE, dbName=None, objectName="web")
    table_ref = ttypes.HiveObjectRef(objectType=ttypes.HiveObjectType.TABLE, dbName="web", objectName="visits")
    REWRITER.rewrite(db_ref, add_prefix)
    REWRITER.rewrite(table_ref, add_prefix)
    assert db_ref.objectName == "fed_web"
    assert (table_ref.dbName, table_ref.objectName) == ("fed_web", "visits")


def test_subtrees_without_names_are_not_walked():
    assert not REWRITER.touches(ttypes.StorageDescriptor)
    assert REWRITER.touches(ttypes.Partition)
    assert not REWRITER.touches(T.get_all_tables_result)  # a list of table names: no database inside


def test_rewriting_3000_partitions_renames_each_once_and_walks_no_storage_descriptor():
    """Cheap by construction: one rename a partition, and nothing walked below the fields that hold a database's
    name (a partition's storage descriptor, columns and parameters hold none). Its speed is the benchmarks'."""
    result = T.get_partitions_result(success=[partition(i) for i in range(3000)])
    renamed: list[str] = []

    def counted(db: str) -> str:
        renamed.append(db)
        return add_prefix(db)

    REWRITER.rewrite(result, counted)
    assert all(p.dbName == "fed_web" for p in result.success)
    assert len(renamed) == 3000
    assert "StorageDescriptor" not in STRUCT_DB_FIELDS and "FieldSchema" not in STRUCT_DB_FIELDS


def test_plain_fields_read_and_set_directly_as_a_walk_would():
    """Every method's arguments whose names are a few plain fields: reading them directly gives what a walk
    collects, and setting them directly what a walk sets."""
    import copy

    from waggle.hms.methods import METHODS, NameForm
    from waggle.hms.rewrite import CALL_NAMES
    from waggle.hms.service import METHOD_IO

    rewriter = CALL_NAMES
    values = {NameForm.NAME: "Sales", NameForm.QUALIFIED: "sales.orders", NameForm.PATTERN: "sal*"}
    checked = 0
    for name, spec in METHODS.items():
        io = METHOD_IO.get(name)
        if io is None or not spec.db_args or any(f.is_list or f.form not in values for f in spec.db_args):
            continue
        for unqualified in (False, True):
            args = io.args()
            for f in spec.db_args:
                setattr(args, f.attr, "orders" if unqualified and f.form is NameForm.QUALIFIED else values[f.form])
            plan = rewriter.plan(type(args))
            assert plan is not None
            walked: list[str] = []
            by_walk = copy.deepcopy(args)
            rewriter._apply(by_walk, plan, lambda n, out=walked: (out.append(n), "x_" + n)[1], False)
            assert rewriter.names_in(args) == walked, name
            rewriter.rewrite(args, lambda n: "x_" + n)
            assert args == by_walk, name
        checked += 1
    assert checked > 50
