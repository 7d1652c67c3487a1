"""Spark 3.5's call sequences, recorded from a live run, replayed as client sequences.

Recorded 2026-11-26 with pyspark 3.5.9 (its built-in Hive 2.3.9 client, ``spark.sql.catalogImplementation=hive``)
pointed at waggle over a real Hive 2.3.10 metastore: each statement below ran alone in one Spark session, and the
calls waggle logged for it (``call`` lines, method and database), with the table each one named (the metastore's
audit log), are ``RECORDED``. Spark's path to the metastore is ``HiveExternalCatalog`` -> ``HiveClientImpl`` ->
Hive 2.3's ``Hive`` / ``HiveMetaStoreClient``; each statement's entry names the methods that send its calls.

Replayed with hmsclient (Hive 2.3's generated Python code), the arguments of each call are what the cited Spark and
Hive methods send; a table Spark writes is built as ``HiveClientImpl#toHiveTable`` describes it (a Spark-written
text table). ``tests/clients/test_spark_recording.py`` checks that a live Spark still sends these methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.clients.sequences import Names, Sequence, Step

SPARK_VERSION = "3.5.9"
USER, GROUPS = "spark", ["spark"]

#: statement (DB = the test's database) -> (the Spark / Hive methods that send its calls, [(method, table)])
RECORDED: dict[str, tuple[str, list[tuple[str, str | None]]]] = {
    "SHOW DATABASES": (
        "HiveClientImpl (connection: set_ugi); HiveExternalCatalog#databaseExists(default); "
        "HiveClientImpl#listDatabases -> Hive#getDatabasesByPattern (get_databases)",
        [("set_ugi", None), ("get_database", "default"), ("get_databases", None)]),
    "SHOW TABLES IN DB": (
        "SessionCatalog#listTables -> HiveExternalCatalog#databaseExists (get_database) -> "
        "HiveClientImpl#listTables -> Hive#getTablesByPattern (get_tables)",
        [("get_database", "global_temp"), ("get_database", None), ("get_database", None), ("get_tables", None)]),
    "DESCRIBE TABLE DB.parts": (
        "SessionCatalog#getTableMetadata -> HiveExternalCatalog#getTable -> HiveClientImpl#getTableOption -> "
        "Hive#getTable (get_table), twice per lookup, for the analyzer and for DescribeTableCommand",
        [("get_database", None), ("get_table", "parts"), ("get_table", "parts"),
         ("get_database", None), ("get_table", "parts"), ("get_table", "parts")]),
    "SELECT * FROM DB.parts": (
        "HiveMetastoreCatalog / HiveTableScanExec -> HiveExternalCatalog#listPartitions -> "
        "HiveClientImpl#getPartitions -> Hive#getPartitions -> HiveMetaStoreClient#listPartitionsWithAuthInfo "
        "(get_partitions_ps_with_auth); the client closed and reopened (shutdown, set_ugi) on the reading thread",
        [("get_database", None), ("get_table", "parts"), ("get_table", "parts"), ("shutdown", None),
         ("set_ugi", None), ("set_ugi", None), ("get_database", None), ("get_table", "parts"),
         ("get_table", "parts"), ("get_table", "parts"), ("get_partitions_ps_with_auth", "parts")]),
    "CREATE TABLE DB.ctas_t STORED AS TEXTFILE AS SELECT 1 AS id, 'a' AS name": (
        "CreateHiveTableAsSelectCommand -> HiveExternalCatalog#createTable -> HiveClientImpl#createTable -> "
        "Hive#createTable (create_table_with_environment_context); InsertIntoHiveTable then "
        "HiveExternalCatalog#alterTableStats -> HiveClientImpl#alterTable (alter_table_with_environment_context)",
        [("get_table", "ctas_t"), ("get_database", None), ("get_table", "ctas_t"), ("get_database", None),
         ("get_database", None), ("get_database", None), ("get_table", "ctas_t"), ("get_database", None),
         ("create_table_with_environment_context", "ctas_t"), ("get_database", None), ("get_table", "ctas_t"),
         ("get_table", "ctas_t"), ("get_table", "ctas_t"), ("get_table", "ctas_t"),
         ("alter_table_with_environment_context", "ctas_t"), ("get_database", None), ("get_table", "ctas_t"),
         ("get_table", "ctas_t")]),
    "INSERT INTO DB.parts PARTITION (ds='2024-02-01') VALUES (5, 'e')": (
        "InsertIntoHiveTable -> HiveExternalCatalog#loadPartition -> HiveClientImpl#loadPartition -> "
        "Hive#loadPartition: Hive#getPartition (get_partition_with_auth), HiveMetaStoreClient#add_partition "
        "(add_partition_with_environment_context)",
        [("get_database", None), ("get_table", "parts"), ("get_table", "parts"), ("get_table", "parts"),
         ("get_partition_with_auth", "parts"), ("get_table", "parts"), ("get_table", "parts"),
         ("get_table", "parts"), ("get_table", "parts"), ("get_partition_with_auth", "parts"),
         ("add_partition_with_environment_context", "parts"), ("get_database", None), ("get_table", "parts"),
         ("get_table", "parts")]),
    "ALTER TABLE DB.plain ADD COLUMNS (extra STRING)": (
        "AlterTableAddColumnsCommand -> HiveExternalCatalog#alterTableDataSchema -> HiveClientImpl#alterTable "
        "-> Shim#alterTable -> Hive#alterTable (alter_table_with_environment_context)",
        [*[("get_database", None), ("get_table", "plain"), ("get_table", "plain")] * 4,
         ("get_table", "plain"), ("get_table", "plain"), ("get_table", "plain"),
         ("alter_table_with_environment_context", "plain")]),
    "ANALYZE TABLE DB.plain COMPUTE STATISTICS FOR COLUMNS id": (
        "AnalyzeColumnCommand -> HiveExternalCatalog#alterTableStats (column statistics kept as table "
        "properties spark.sql.statistics.*) -> HiveClientImpl#alterTable (alter_table_with_environment_context)",
        [*[("get_database", None), ("get_table", "plain"), ("get_table", "plain")] * 4,
         ("get_table", "plain"), ("alter_table_with_environment_context", "plain")]),
    "DROP TABLE DB.plain": (
        "DropTableCommand -> HiveExternalCatalog#dropTable -> HiveClientImpl#dropTable -> Hive#dropTable -> "
        "HiveMetaStoreClient#dropTable (get_table, drop_table_with_environment_context)",
        [*[("get_database", None), ("get_table", "plain"), ("get_table", "plain")] * 2,
         ("get_database", None), ("get_table", "plain"), ("get_database", None), ("get_table", "plain"),
         ("drop_table_with_environment_context", "plain")]),
    "DROP DATABASE DB CASCADE": (
        "DropNamespace -> HiveExternalCatalog#dropDatabase -> HiveClientImpl#dropDatabase -> Hive#dropDatabase "
        "-> HiveMetaStoreClient#dropDatabase(cascade) (2.3: get_all_tables, then dropTable for each: get_table, "
        "drop_table_with_environment_context; then drop_database)",
        [*[("get_database", None)] * 6, ("get_tables", None), ("get_database", None), ("get_all_tables", None),
         ("get_table", "parts"), ("drop_table_with_environment_context", "parts"),
         ("get_table", "plain"), ("drop_table_with_environment_context", "plain"), ("drop_database", None)]),
}

_NAMES = {"SHOW DATABASES": "show_databases", "SHOW TABLES IN DB": "show_tables",
          "DESCRIBE TABLE DB.parts": "describe", "SELECT * FROM DB.parts": "select_partitioned",
          "CREATE TABLE DB.ctas_t STORED AS TEXTFILE AS SELECT 1 AS id, 'a' AS name": "ctas",
          "INSERT INTO DB.parts PARTITION (ds='2024-02-01') VALUES (5, 'e')": "insert_partitioned",
          "ALTER TABLE DB.plain ADD COLUMNS (extra STRING)": "alter_table",
          "ANALYZE TABLE DB.plain COMPUTE STATISTICS FOR COLUMNS id": "analyze",
          "DROP TABLE DB.plain": "drop_table", "DROP DATABASE DB CASCADE": "drop_database_cascade"}
WRITES = frozenset({"create_table_with_environment_context", "alter_table_with_environment_context",
                    "add_partition_with_environment_context", "drop_table_with_environment_context",
                    "drop_database"})


def _latest_table(r: dict[str, Any]) -> Any:
    return r[max(k for k in r if k.endswith(":get_table"))]


def spark_table(t: Any, n: Names) -> Any:
    """A text table as HiveClientImpl#toHiveTable writes one for CTAS (Spark's own properties included)."""
    from tests.clients.sequences import new_table

    return new_table(t, n, "ctas_t", owner=USER, params={
        "spark.sql.create.version": SPARK_VERSION,
        "spark.sql.sources.schema": '{"type":"struct","fields":[{"name":"id","type":"integer","nullable":false,'
                                    '"metadata":{}},{"name":"name","type":"string","nullable":false,"metadata":{}}]}'})


def _step(i: int, method: str, table: str | None) -> Step:
    # imported here: tests/clients/sequences.py lists these sequences among its own
    from tests.clients.sequences import Step, altered, ctx, new_partition, own_db

    label = f"{i:02d}:{method}"
    write = method in WRITES
    if method == "set_ugi":
        return Step(label, method, lambda n, t, r: (USER, GROUPS))
    if method == "shutdown":
        return Step(label, method, lambda n, t, r: ())
    if method == "get_database" and table is not None:  # the session's own databases, not the test's
        return Step(label, method, lambda n, t, r: (table,), project=lambda x, n: x.name)
    if method == "get_database":
        return Step(label, method, lambda n, t, r: (n.db,))
    if method == "get_databases":
        return Step(label, method, lambda n, t, r: ("*",), project=own_db)
    if method in ("get_tables",):
        return Step(label, method, lambda n, t, r: (n.db, "*"), project=lambda x, n: sorted(x))
    if method == "get_all_tables":
        return Step(label, method, lambda n, t, r: (n.db,), project=lambda x, n: sorted(x))
    if method == "get_table":
        return Step(label, method, lambda n, t, r: (n.db, table))
    if method == "get_partitions_ps_with_auth":
        return Step(label, method, lambda n, t, r: (n.db, table, [], -1, USER, GROUPS))
    if method == "get_partition_with_auth":
        return Step(label, method, lambda n, t, r: (n.db, table, ["2024-02-01"], USER, GROUPS))
    if method == "create_table_with_environment_context":
        return Step(label, method, lambda n, t, r: (spark_table(t, n), None), write=write)
    if method == "add_partition_with_environment_context":
        return Step(label, method, lambda n, t, r: (new_partition(t, n, table or "", "2024-02-01"), None),
                    write=write)
    if method == "alter_table_with_environment_context":
        return Step(label, method, lambda n, t, r: (n.db, table, altered(
            _latest_table(r), **{"spark.sql.statistics.totalSize": "4", "spark.sql.statistics.numRows": "2"}),
            ctx(t, DO_NOT_UPDATE_STATS="true")), write=write)
    if method == "drop_table_with_environment_context":
        return Step(label, method, lambda n, t, r: (n.db, table, True, None), write=write)
    if method == "drop_database":
        return Step(label, method, lambda n, t, r: (n.db, True, True), write=write)
    raise AssertionError(f"no replay for Spark's {method}")


def spark_sequences() -> list[Sequence]:
    from tests.clients.sequences import Sequence

    out = []
    for statement, (source, calls) in RECORDED.items():
        steps = tuple(_step(i, m, tb) for i, (m, tb) in enumerate(calls))
        out.append(Sequence("spark-3.5", _NAMES[statement], f"{source} (statement: {statement})", "2.3", steps,
                            drops_database=statement.startswith("DROP DATABASE"),
                            notes=f"recorded from pyspark {SPARK_VERSION}"))
    return out


def statement(seq: Sequence) -> str:
    return next(s for s, name in _NAMES.items() if name == seq.name)
