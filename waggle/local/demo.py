"""``waggle demo``: two real local metastores with sample data, and waggle in front of them."""

from __future__ import annotations

import shutil
import signal
import sys
import tempfile
from pathlib import Path

import gevent

from waggle.common.logging import configure, get_logger
from waggle.config.loader import load
from waggle.local.client import hms_client
from waggle.local.metastore import LocalMetastore, start_metastores
from waggle.local.seed import ensure_database, ensure_partitioned_table, ensure_table

SAMPLE_ROWS = ["1,alice", "2,bob", "3,carol"]


def seed_primary(store: LocalMetastore) -> None:
    wh = store.warehouse
    with hms_client("127.0.0.1", store.port) as c:
        ensure_database(c, "sales", f"file://{wh}/sales.db")
        ensure_table(c, "sales", "customers", f"file://{wh}/sales.db/customers",
                     [("id", "int"), ("name", "string")], rows=SAMPLE_ROWS)
        ensure_partitioned_table(c, "sales", "orders", f"file://{wh}/sales.db/orders", partitions=3)


def seed_federated(store: LocalMetastore) -> None:
    wh = store.warehouse
    with hms_client("127.0.0.1", store.port) as c:
        ensure_database(c, "web", f"file://{wh}/web.db")
        ensure_table(c, "web", "visits", f"file://{wh}/web.db/visits",
                     [("customer_id", "int"), ("page", "string")], rows=["1,/home", "2,/cart", "1,/cart"])
        ensure_partitioned_table(c, "web", "clicks", f"file://{wh}/web.db/clicks", partitions=24, data=True)


def write_configs(workdir: Path, port: int, primary: LocalMetastore, federated: LocalMetastore,
                  http_port: int = 18000, rest_port: int = 18181) -> tuple[Path, Path]:
    server = workdir / "waggle-server.yml"
    federation = workdir / "waggle-federation.yml"
    server.write_text(f"port: {port}\ndatabase-resolution: PREFIXED\nnotification-log: federated\n"
                      f"endpoint:\n  port: {http_port}\niceberg-rest:\n  port: {rest_port}\n")
    federation.write_text(
        "primary-meta-store:\n"
        "  name: primary\n"
        f"  remote-meta-store-uris: {primary.uri}\n"
        "  access-control-type: READ_AND_WRITE_AND_CREATE\n"
        "  cache: events\n"
        "federated-meta-stores:\n"
        "- name: analytics\n"
        f"  remote-meta-store-uris: {federated.uri}\n"
        "  database-prefix: analytics_\n"
        "  cache: events\n"
    )
    return server, federation


def iceberg_example(uri: str, warehouse: Path) -> str:
    """The pyiceberg snippet the demo prints (its test runs it as printed)."""
    return f"""\
  import pyarrow as pa
  from pyiceberg.catalog import load_catalog
  catalog = load_catalog("waggle", type="hive", uri="{uri}", warehouse="file://{warehouse}")
  catalog.create_namespace_if_not_exists("lake")
  events = catalog.create_table_if_not_exists(
      "lake.events", schema=pa.schema([("id", pa.int64()), ("kind", pa.string())]))
  events.append(pa.table({{"id": [1, 2], "kind": ["click", "view"]}},
                         schema=pa.schema([("id", pa.int64()), ("kind", pa.string())])))
  print(events.scan().to_arrow().to_pylist())
"""


def rest_example(rest_uri: str) -> str:
    """The pyiceberg snippet of the Iceberg REST port the demo prints (its test runs it as printed)."""
    return f"""\
  from pyiceberg.catalog import load_catalog
  rest = load_catalog("waggle-rest", type="rest", uri="{rest_uri}")
  print(rest.list_namespaces())
  print(rest.load_table("lake.events").scan().to_arrow().num_rows)
"""


def run_demo(port: int = 48869, workdir: str | None = None, http_port: int = 18000, keep: bool = False,
             rest_port: int = 18181) -> int:
    """The demo on Thrift ``port``, HTTP ``http_port`` and Iceberg REST ``rest_port``. Its files (the metastores'
    data, the configuration files, what a sync writes) live in ``workdir``, which is kept; without one, in a
    temporary directory that Ctrl-C removes unless ``keep``."""
    configure("info", "console")
    log = get_logger("waggle.demo")
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="waggle-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    log.info("demo.starting_metastores", workdir=str(root))
    primary, federated = start_metastores([root / "primary", root / "analytics"])
    try:
        seed_primary(primary)
        seed_federated(federated)
        server_file, federation_file = write_configs(root, port, primary, federated, http_port, rest_port)
        config = load(str(server_file), str(federation_file))
        from waggle.app import start

        server = start(config)
        uri = f"thrift://127.0.0.1:{server.address[1]}"
        rest_uri = f"http://127.0.0.1:{rest_port}"
        bin_dir = Path(sys.executable).parent  # the clone's .venv: waggle, pyspark and pyiceberg live there
        print(f"""
waggle is serving the HMS API on {uri}
  primary metastore   {primary.uri}  (databases: default, sales)
  federated metastore {federated.uri}  (databases: default, web; read-only)
  routing             PREFIXED: the federated databases appear as analytics_default, analytics_web
  config files        {server_file}
                      {federation_file}
  HTTP endpoint       http://127.0.0.1:{http_port}/healthz, /metrics
  Iceberg REST        {rest_uri}  (the same federation; open: the demo has no Kerberos and no REST clients)
  files               {root}  ({"kept after Ctrl-C" if workdir or keep else "removed on Ctrl-C; --keep keeps them"})

Point any Hive/Spark client at it:   hive.metastore.uris={uri}

From another shell: waggle, pyspark and pyiceberg are installed in this clone's environment, so
  source {bin_dir}/activate
puts `waggle` on the PATH, and `python` (that is, {bin_dir}/python) runs the snippets below.

  from pyspark.sql import SparkSession
  spark = (SparkSession.builder.master("local[1]")
           .config("spark.sql.catalogImplementation", "hive")
           .config("spark.hadoop.hive.metastore.uris", "{uri}")
           .enableHiveSupport().getOrCreate())
  spark.sql("SHOW DATABASES").show()
  spark.sql("SELECT * FROM sales.customers").show()
  spark.sql("SELECT c.name, v.page FROM sales.customers c "
            "JOIN analytics_web.visits v ON v.customer_id = c.id").show()

Iceberg tables, with pyiceberg (commits take their lock at the metastore that owns the table):

{iceberg_example(uri, root / "iceberg")}
  or from Spark with Apache Iceberg's runtime jar, as a catalog named lake:
    spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions
    spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog
    spark.sql.catalog.lake.type=hive
    spark.sql.catalog.lake.uri={uri}

The same tables through the Iceberg REST port (any REST client: pyiceberg, Spark, Trino):

{rest_example(rest_uri)}
  or from Spark: spark.sql.catalog.rest=org.apache.iceberg.spark.SparkCatalog,
    spark.sql.catalog.rest.type=rest, spark.sql.catalog.rest.uri={rest_uri}

Bring federated tables into the primary (metadata only, then with a copy of the data):

  waggle sync --federation-config {federation_file} --source analytics \\
              --tables 'web.*' --target-database web_mirror
  waggle sync --federation-config {federation_file} --source analytics \\
              --tables web.clicks --target-database web_copy --mode copy

Ctrl-C stops waggle and both metastores.
""", flush=True)
        stop = gevent.event.Event()
        gevent.signal_handler(signal.SIGINT, stop.set)
        gevent.signal_handler(signal.SIGTERM, stop.set)
        stop.wait()
        server.stop(5)
    finally:
        primary.stop()
        federated.stop()
        if not workdir and not keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"The demo's files are kept in {root}", flush=True)
    return 0
