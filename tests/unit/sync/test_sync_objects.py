"""The sync's pure parts: fingerprints, the target's objects, ownership, partition names, the sync file."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from waggle.hms.gen.hive_metastore.ttypes import FieldSchema, Partition, SerDeInfo, StorageDescriptor, Table
from waggle.hms.names import partition_name
from waggle.sync.runner import SyncConfigError, load_sync_file
from waggle.synced import objects as o


def table(**changes: object) -> Table:
    sd = StorageDescriptor(cols=[FieldSchema("id", "int")], location="hdfs://remote/wh/sales.db/orders",
                           serdeInfo=SerDeInfo(parameters={"path": "hdfs://remote/wh/sales.db/orders"}))
    t = Table(tableName="orders", dbName="sales", owner="etl", sd=sd, partitionKeys=[FieldSchema("day", "string")],
              parameters={"transient_lastDdlTime": "1", "numRows": "5", "spark.sql.sources.provider": "parquet"},
              tableType="MANAGED_TABLE", createTime=1)
    for k, v in changes.items():
        setattr(t, k, v)
    return t


TARGET = o.Target("analytics", "sales", "orders", "local_sales", "orders", o.MIRROR)


def test_fingerprints_ignore_volatile_parameters_and_times() -> None:
    base = o.table_fingerprint(table())
    volatile = table(createTime=99, lastAccessTime=5, dbName="x",
                     parameters={"transient_lastDdlTime": "2", "numRows": "7", "COLUMN_STATS_ACCURATE": "{}",
                                 "spark.sql.sources.provider": "parquet", "waggle.sync.synced-at": "now"})
    assert o.table_fingerprint(volatile) == base
    assert o.table_fingerprint(table(owner="someone")) != base
    changed = table()
    changed.sd.location = "hdfs://remote/elsewhere"
    assert o.table_fingerprint(changed) != base
    p = Partition(values=["1"], sd=StorageDescriptor(location="x"), parameters={"numFiles": "3"})
    q = copy.deepcopy(p)
    q.parameters = {"numFiles": "4", "transient_lastDdlTime": "9"}
    assert o.partition_fingerprint(p) == o.partition_fingerprint(q)
    q.parameters["note"] = "x"
    assert o.partition_fingerprint(p) != o.partition_fingerprint(q)
    assert o.combined([("a", "1"), ("b", "2")]) == o.combined([("b", "2"), ("a", "1")])


def test_a_mirror_is_external_and_points_at_the_source_data() -> None:
    source = table(parameters={"external.table.purge": "true"})
    t = o.target_table(source, TARGET, "NOW", {})
    assert (t.dbName, t.tableName, t.tableType) == ("local_sales", "orders", "EXTERNAL_TABLE")
    assert t.parameters["EXTERNAL"] == "TRUE" and "external.table.purge" not in t.parameters
    assert t.sd.location == "hdfs://remote/wh/sales.db/orders"
    assert t.parameters[o.SOURCE] == "analytics" and t.parameters[o.SOURCE_OBJECT] == "sales.orders"
    assert t.parameters[o.FINGERPRINT] == o.table_fingerprint(source) and t.parameters[o.MODE] == "mirror"


def test_a_copy_moves_the_location_and_the_spark_path_property() -> None:
    target = o.Target("analytics", "sales", "orders", "local_sales", "orders", o.COPY, "file:/wh/local_sales.db/orders")
    t = o.target_table(table(), target, "NOW", {})
    assert t.sd.location == "file:/wh/local_sales.db/orders"
    assert t.sd.serdeInfo.parameters["path"] == "file:/wh/local_sales.db/orders"
    p = Partition(values=["2024-01-01"], sd=StorageDescriptor(location="hdfs://remote/x/day=2024-01-01"))
    tp = o.target_partition(p, target, "day=2024-01-01", "NOW", files="abc")
    assert tp.sd.location == "file:/wh/local_sales.db/orders/day=2024-01-01"
    assert tp.parameters[o.FILES] == "abc" and tp.parameters[o.SOURCE_OBJECT] == "sales.orders/day=2024-01-01"


def test_views_have_their_database_references_translated() -> None:
    view = Table(tableName="v", dbName="sales", tableType="VIRTUAL_VIEW", parameters={},
                 viewOriginalText="SELECT * FROM sales.orders JOIN other.x ON 1=1",
                 viewExpandedText="SELECT `orders`.`id` FROM `sales`.`orders`")
    t = o.target_table(view, o.Target("analytics", "sales", "v", "local_sales", "v", o.MIRROR), "NOW",
                       {"sales": "local_sales"})
    assert t.tableType == "VIRTUAL_VIEW"
    assert t.viewOriginalText == "SELECT * FROM local_sales.orders JOIN other.x ON 1=1"
    assert t.viewExpandedText == "SELECT `orders`.`id` FROM `local_sales`.`orders`"


def test_ownership() -> None:
    foreign = table(parameters={})
    assert "was not created by waggle sync" in (o.ownership_problem(foreign, TARGET) or "")
    other = table(parameters={o.SOURCE: "ops", o.SOURCE_OBJECT: "sales.orders"})
    assert "was synced from ops:sales.orders" in (o.ownership_problem(other, TARGET) or "")
    own = table(parameters={o.SOURCE: "analytics", o.SOURCE_OBJECT: "sales.orders"})
    assert o.ownership_problem(own, TARGET) is None


@pytest.mark.parametrize("values", [["2024-01-01"], ["a/b", "x=y"], ["50%", "it's: #1?"], ["plain", "0"]])
def test_partition_names_round_trip_as_hive_escapes_them(values: list[str]) -> None:
    name = partition_name(["k1", "k2"][:len(values)], values)
    assert o.partition_values(name) == values
    assert name.count("/") == len(values) - 1  # a "/" in a value is escaped: only the separators remain


def test_sync_file_problems_name_file_key_and_value(tmp_path: Path) -> None:
    f = tmp_path / "sync.yml"
    f.write_text("federation-config: fed.yml\nsource: analytics\nincremental: maybe\njobs:\n"
                 "- tables: sales.orders, nodot\n  mode: clone\n  colour: red\n- tables: 'x.(unclosed'\n")
    with pytest.raises(SyncConfigError) as err:
        load_sync_file(str(f))
    text = str(err.value)
    assert f"{f}: key 'jobs[0].tables': invalid value 'nodot': expected DB.TABLE" in text
    assert f"{f}: key 'jobs[0].mode': invalid value 'clone': expected mirror or copy" in text
    assert f"{f}: unknown key 'jobs[0].colour'" in text
    assert f"{f}: key 'jobs[1].tables': invalid value 'x.(unclosed'" in text
    assert f"{f}: key 'incremental': invalid value 'maybe'" in text


def test_sync_file(tmp_path: Path) -> None:
    f = tmp_path / "sync.yml"
    f.write_text("federation-config: fed.yml\nsource: analytics\npropagate-deletes: true\njobs:\n"
                 "- tables: [sales.orders, 'sales.order_.*']\n  mode: copy\n  target-database: s\n"
                 "  location-root: s3a://bucket/copies\n  partition-filter: \"day >= '2024'\"\n"
                 "- tables: web.visits\n  source: ops\n  propagate-deletes: false\n")
    sync = load_sync_file(str(f))
    assert sync.federation_config == str(tmp_path / "fed.yml")
    a, b = sync.specs
    assert (a.source, a.patterns, a.mode, a.target_database, a.location_root, a.partition_filter,
            a.propagate_deletes) == ("analytics", ("sales.orders", "sales.order_.*"), "copy", "s",
                                     "s3a://bucket/copies", "day >= '2024'", True)
    assert (b.source, b.mode, b.propagate_deletes) == ("ops", "mirror", False)
