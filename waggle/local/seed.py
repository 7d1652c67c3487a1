"""Sample tables for the demo, the tests and the benchmarks, written through the plain Thrift API."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from waggle.hms.gen.hive_metastore import ttypes

TEXT_INPUT = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUTPUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
LAZY_SIMPLE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"


def text_sd(location: str, cols: list[tuple[str, str]]) -> ttypes.StorageDescriptor:
    return ttypes.StorageDescriptor(
        cols=[ttypes.FieldSchema(name=n, type=t, comment=None) for n, t in cols],
        location=location,
        inputFormat=TEXT_INPUT,
        outputFormat=TEXT_OUTPUT,
        compressed=False,
        numBuckets=-1,
        serdeInfo=ttypes.SerDeInfo(name=None, serializationLib=LAZY_SIMPLE,
                                   parameters={"field.delim": ",", "serialization.format": ","}),
        bucketCols=[],
        sortCols=[],
        parameters={},
        storedAsSubDirectories=False,
    )


def ensure_database(client: Any, name: str, location: str) -> None:
    try:
        client.create_database(ttypes.Database(name=name, locationUri=location, parameters={}))
    except ttypes.AlreadyExistsException:
        pass


def ensure_table(client: Any, db: str, table: str, location: str, cols: list[tuple[str, str]],
                 partition_keys: list[tuple[str, str]] | None = None, rows: list[str] | None = None) -> None:
    """Create an external text table (with a data file of ``rows`` when unpartitioned), unless it exists."""
    if rows is not None:
        path = Path(urlsplit(location).path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "data.csv").write_text("".join(r + "\n" for r in rows))
    tbl = ttypes.Table(
        tableName=table, dbName=db, owner="waggle", createTime=0, lastAccessTime=0, retention=0,
        sd=text_sd(location, cols),
        partitionKeys=[ttypes.FieldSchema(name=n, type=t, comment=None) for n, t in partition_keys or []],
        parameters={"EXTERNAL": "TRUE"}, tableType="EXTERNAL_TABLE",
    )
    try:
        client.create_table(tbl)
    except ttypes.AlreadyExistsException:
        pass


def ensure_partitioned_table(client: Any, db: str, table: str, location: str, partitions: int,
                             batch: int = 1000, data: bool = False) -> None:
    """An external text table partitioned by ``part`` with ``partitions`` partitions (added in batches); with
    ``data``, partition ``p000042`` holds one file with the row ``42,name42``."""
    cols = [("id", "int"), ("name", "string")]
    ensure_table(client, db, table, location, cols, [("part", "string")] if partitions else None)
    if not partitions:
        return
    have = set(client.get_partition_names(db, table, -1))
    wanted = [f"p{i:06d}" for i in range(partitions) if f"part=p{i:06d}" not in have]
    root = Path(urlsplit(location).path)
    for start in range(0, len(wanted), batch):
        parts = []
        for value in wanted[start:start + batch]:
            (root / f"part={value}").mkdir(parents=True, exist_ok=True)
            if data:
                (root / f"part={value}" / "data.csv").write_text(f"{int(value[1:])},name{int(value[1:])}\n")
            parts.append(ttypes.Partition(
                values=[value], dbName=db, tableName=table, createTime=0, lastAccessTime=0,
                sd=text_sd(f"{location}/part={value}", cols), parameters={},
            ))
        client.add_partitions(parts)


def ensure_view(client: Any, db: str, view: str, cols: list[tuple[str, str]], original: str, expanded: str) -> None:
    """A Hive-style view: the metastore stores its SQL; readers expand it."""
    tbl = ttypes.Table(
        tableName=view, dbName=db, owner="waggle", createTime=0, lastAccessTime=0, retention=0,
        sd=text_sd("", cols), partitionKeys=[], parameters={},
        viewOriginalText=original, viewExpandedText=expanded, tableType="VIRTUAL_VIEW",
    )
    tbl.sd.location = None
    try:
        client.create_table(tbl)
    except ttypes.AlreadyExistsException:
        pass


def seed_federation(analytics: Any, ops: Any) -> dict[str, Any]:
    """The federated side of the demo and the tests, written straight into two metastores.

    analytics: sales (orders with rows, orders_view over it, partitioned events), web (visits, page_home,
    internal), secret; ops: telemetry (events), scratch (empty), sales.
    """
    from waggle.local.client import hms_client

    def wh(store: Any, path: str) -> str:
        return f"file://{store.warehouse}/{path}"

    with hms_client("127.0.0.1", analytics.port, timeout=120) as c:
        for db in ("sales", "web", "secret"):
            ensure_database(c, db, wh(analytics, f"{db}.db"))
        ensure_table(c, "sales", "orders", wh(analytics, "sales.db/orders"), [("id", "int"), ("customer", "string")],
                     rows=["1,alice", "2,bob", "3,alice"])
        ensure_view(c, "sales", "orders_view", [("id", "int"), ("customer", "string")],
                    "SELECT * FROM sales.orders WHERE id > 1",
                    "SELECT `orders`.`id`, `orders`.`customer` FROM `sales`.`orders` WHERE `orders`.`id` > 1")
        ensure_partitioned_table(c, "sales", "daily", wh(analytics, "sales.db/daily"), partitions=5)
        for table in ("visits", "page_home", "internal"):
            ensure_table(c, "web", table, wh(analytics, f"web.db/{table}"), [("id", "int"), ("name", "string")])
        ensure_table(c, "secret", "keys", wh(analytics, "secret.db/keys"), [("id", "int"), ("name", "string")])
    with hms_client("127.0.0.1", ops.port, timeout=120) as c:
        for db in ("telemetry", "scratch", "sales"):
            ensure_database(c, db, wh(ops, f"{db}.db"))
        ensure_table(c, "telemetry", "events", wh(ops, "telemetry.db/events"), [("id", "int"), ("name", "string")],
                     rows=["1,boot"])
        ensure_table(c, "sales", "refunds", wh(ops, "sales.db/refunds"), [("id", "int"), ("name", "string")])
    return {"customers": ["alice", "bob"]}
