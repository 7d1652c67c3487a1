"""Reads from copies (issue 26): a member ``lake`` seeded with a partitioned Hive table and an Iceberg table, its
federation entry, and Spark SQL steps run through waggle in a subprocess (:mod:`tests.support.spark_steps`: each
step's rows, or its error)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.spark_steps import run as run_steps

#: the member's names (the client's under PREFIXED: lake_sales.orders, lake_ice.t2)
SALES, ORDERS, NOCOPY, LATER = "sales", "orders", "nocopy", "later"
ICE, T2 = "ice", "t2"
#: partition -> the rows of its one data file
ORDER_ROWS = {"2024-01-01": ["1,ann", "2,bob"], "2024-01-02": ["3,cid", "4,dan"]}
NEW_PARTITION = "2024-01-03"  # added at the source after the copy
NEW_ROWS = ["5,eve"]
ICE_IDS = list(range(20))


def write_rows(location: str, rows: list[str]) -> None:
    from urllib.parse import urlsplit

    path = Path(urlsplit(location).path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "data.csv").write_text("".join(r + "\n" for r in rows))


def order_partition(location: str, dt: str) -> Any:
    """The ``ttypes.Partition`` ``dt`` of ``sales.orders`` at ``<location>/dt=<dt>`` (rows written by the caller)."""
    from waggle.hms.gen.hive_metastore import ttypes
    from waggle.local.seed import text_sd

    return ttypes.Partition(values=[dt], dbName=SALES, tableName=ORDERS, createTime=0, lastAccessTime=0,
                            sd=text_sd(f"{location}/dt={dt}", [("id", "int"), ("name", "string")]), parameters={})


def seed_lake(lake: Any) -> None:
    """``sales.orders`` (text, partitioned by ``dt``, a file per partition), ``sales.nocopy`` (unpartitioned, with
    rows), ``sales.later`` (partitioned, no partition yet: its copy needs no Spark), and the Iceberg table ``ice.t2``
    (pyiceberg, partitioned by ``day``, two appends)."""
    from waggle.local.client import hms_client
    from waggle.local.seed import ensure_database, ensure_table

    sales = f"file://{lake.warehouse}/{SALES}.db"
    with hms_client("127.0.0.1", lake.port) as c:
        ensure_database(c, SALES, sales)
        ensure_database(c, ICE, f"file://{lake.warehouse}/{ICE}.db")
        ensure_table(c, SALES, ORDERS, f"{sales}/{ORDERS}", [("id", "int"), ("name", "string")],
                     [("dt", "string")])
        for dt, rows in ORDER_ROWS.items():
            write_rows(f"{sales}/{ORDERS}/dt={dt}", rows)
        c.add_partitions([order_partition(f"{sales}/{ORDERS}", dt) for dt in ORDER_ROWS])
        ensure_table(c, SALES, NOCOPY, f"{sales}/{NOCOPY}", [("id", "int")], rows=["1"])
        ensure_table(c, SALES, LATER, f"{sales}/{LATER}", [("id", "int")], [("dt", "string")])  # no partition
    seed_iceberg(lake)


def iceberg_catalog(uri: str, warehouse: Path | str, name: str = "cat") -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog(name, type="hive", uri=uri, warehouse=f"file://{warehouse}")


def seed_iceberg(lake: Any) -> None:
    import pyarrow as pa
    from pyiceberg.transforms import IdentityTransform

    cat = iceberg_catalog(lake.uri, lake.warehouse)
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    table = cat.create_table(f"{ICE}.{T2}", schema=schema)
    with table.update_spec() as spec:
        spec.add_field("day", IdentityTransform(), "day")
    table = cat.load_table(f"{ICE}.{T2}")
    for start in (0, 10):
        ids = range(start, start + 10)
        table.append(pa.table({"id": pa.array(ids, pa.int64()),
                               "day": pa.array([f"2026-11-{1 + i % 3:02d}" for i in ids], pa.string())}))


def lake_member(uri: str, **keys: Any) -> str:
    """The federation entry of ``lake`` (prefix ``lake_``, ``sales`` and ``ice`` writable), with these more keys
    (``read_from_copies="prefer"`` is ``read-from-copies: prefer``)."""
    text = (f"- name: lake\n  remote-meta-store-uris: {uri}\n  database-prefix: lake_\n"
            "  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n"
            "  writable-database-white-list: [sales, ice]\n")
    return text + "".join(f"  {key.replace('_', '-')}: {value}\n" for key, value in keys.items())


def spark_steps(uri: str, warehouse: Path, steps: list[tuple[str, str]], timeout: float = 600) -> dict[str, Any]:
    """Run ``steps`` (name, SQL) in one fresh local Spark session whose Hive catalog is the metastore at ``uri``."""
    return run_steps({"uri": uri, "warehouse": str(warehouse), "steps": steps}, timeout=timeout)


def rows(result: dict[str, Any], step: str) -> list[list[str]]:
    """A step's rows, or a failure showing its error."""
    assert "rows" in result[step], f"step {step!r} failed: {result[step].get('error')}"
    return list(result[step]["rows"])
