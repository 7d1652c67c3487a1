"""Client call sequences, derived from each client's public source, as pure data.

A :class:`Sequence` is a list of :class:`Step` s. A step names one HMS method and builds its arguments from a
:class:`Names` (the database as one side of a comparison spells it) and the Thrift types of the client's release,
so the same sequence runs against a metastore directly and through waggle (primary, prefixed member, link).
Arguments may use the replies of earlier steps (``r["label"]``), as a client does (alter what it just read).

``CLIENTS`` maps each client to its sequences; every sequence carries the class and method of the client it was
derived from (``source``), for the tests' docstrings and for the generated "sequences covered" documentation.
No client code is copied: each step is the call that the cited method makes, written from the method's behaviour.

The seeded database every sequence starts from (tests/clients/conftest.py, ``seed_database``) holds ``plain``
(unpartitioned text table, two rows, column statistics) and ``parts`` (partitioned by ``ds``, three partitions,
partition column statistics).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any

TEXT_INPUT = "org.apache.hadoop.mapred.TextInputFormat"
TEXT_OUTPUT = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
LAZY_SIMPLE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
SEEDED_PARTITIONS = ("2024-01-01", "2024-01-02", "2024-01-03")
INSERT_ONLY_TABLES = 2  # ClientCapability.INSERT_ONLY_TABLES
HIVE4_CAPABILITIES = ["HIVEFULLACIDREAD", "HIVEFULLACIDWRITE", "HIVEMANAGEDINSERTWRITE", "EXTWRITE", "EXTREAD"]


@dataclass(frozen=True)
class Names:
    """How one side of a comparison names things: ``db`` is the database as sent (``an_x`` through waggle for
    member database ``x``); ``catalog`` makes :attr:`qdb` the Hive 3+ form ``@hive#db``."""

    db: str
    catalog: bool = False
    user: str = "trino"

    @property
    def qdb(self) -> str:
        return f"@hive#{self.db}" if self.catalog else self.db

    @property
    def all_dbs(self) -> str:
        return "@hive#" if self.catalog else "*"


Args = Callable[[Names, Any, dict[str, Any]], Any]


@dataclass(frozen=True)
class Step:
    """One call (or, with ``many``, one call per argument tuple the builder returns, in order or from
    ``threads`` threads, each on a connection of its own as Trino's statistics writer does).

    * ``fallback``: Trino's ``alternativeCall``: when the call fails with an error that ``fallback_on`` accepts
      (``"unknown_method"``: only TApplicationException UNKNOWN_METHOD; ``"not_nosuch"``: anything but
      NoSuchObjectException), the alternative ``(method, args)`` is sent instead.
    * ``project``: what of the reply is compared (a listing of every database is cut to this test's own).
    * ``equivalent``: for the *direct* side when the metastore's release lacks ``method``: the older call the
      newer one stands for and a function turning its reply into the newer reply (the comparison then checks
      that waggle's bridge answers as the older call does directly).
    * ``write``: the step changes metadata (refused through a read-only link).
    * ``keep``: what later steps see of the reply, as the client unwraps it (``GetTableResult.table``).
    """

    label: str
    method: str
    args: Args
    write: bool = False
    many: bool = False
    threads: int = 1
    fallback: tuple[str, Args] | None = None
    fallback_on: str = "unknown_method"
    project: Callable[[Any, Names], Any] | None = None
    equivalent: tuple[str, Args, Callable[[Any, Any], Any]] | None = None
    check: Callable[[Any, Names, dict[str, Any]], None] | None = None
    keep: Callable[[Any], Any] | None = None  # what later steps see of the reply (a GetTableResult's table)


@dataclass(frozen=True)
class Sequence:
    """What a client sends for one statement or operation. ``release``: whose generated Thrift code sends it
    (``2.3`` hmsclient, ``3.1`` hive-metastore-client, ``4.x`` waggle's IDL); ``per_operation``: a new connection
    for every step (Trino) rather than one for the whole sequence (Hive's and Spark's session client)."""

    client: str
    name: str
    source: str
    release: str
    steps: tuple[Step, ...]
    per_operation: bool = False
    set_ugi: bool = False
    catalog: bool = False
    drops_database: bool = False
    notes: str = ""

    @property
    def writes(self) -> bool:
        return any(s.write for s in self.steps)


# -- argument helpers (pure) --------------------------------------------------------------------------------------
def sd(t: Any, cols: Seq[tuple[str, str]], location: str | None = None) -> Any:
    return t.StorageDescriptor(
        cols=[t.FieldSchema(name=n, type=ty, comment=None) for n, ty in cols], location=location,
        inputFormat=TEXT_INPUT, outputFormat=TEXT_OUTPUT, compressed=False, numBuckets=-1,
        serdeInfo=t.SerDeInfo(name=None, serializationLib=LAZY_SIMPLE, parameters={"serialization.format": ","}),
        bucketCols=[], sortCols=[], parameters={}, storedAsSubDirectories=False)


def new_table(t: Any, n: Names, name: str, parts: Seq[tuple[str, str]] = (), owner: str = "trino",
              params: dict[str, str] | None = None) -> Any:
    table = t.Table(tableName=name, dbName=n.db, owner=owner, createTime=0, lastAccessTime=0, retention=0,
                    sd=sd(t, [("id", "int"), ("name", "string")]),
                    partitionKeys=[t.FieldSchema(name=k, type=ty, comment=None) for k, ty in parts],
                    parameters=dict(params or {}), tableType="MANAGED_TABLE")
    if n.catalog and "catName" in _fields(t.Table):
        table.catName = "hive"
    return table


def new_partition(t: Any, n: Names, table: str, value: str, params: dict[str, str] | None = None) -> Any:
    part = t.Partition(values=[value], dbName=n.db, tableName=table, createTime=0, lastAccessTime=0,
                       sd=sd(t, [("id", "int"), ("name", "string")]), parameters=dict(params or {}))
    if n.catalog and "catName" in _fields(t.Partition):
        part.catName = "hive"
    return part


def long_stats(t: Any, n: Names, table: str, part: str | None = None, high: int = 2) -> Any:
    desc = t.ColumnStatisticsDesc(isTblLevel=part is None, dbName=n.db, tableName=table, partName=part,
                                  lastAnalyzed=1_700_000_000)
    if n.catalog and "catName" in _fields(t.ColumnStatisticsDesc):
        desc.catName = "hive"
    data = t.ColumnStatisticsData(longStats=t.LongColumnStatsData(lowValue=1, highValue=high, numNulls=0, numDVs=2))
    stats = t.ColumnStatistics(statsDesc=desc, statsObj=[t.ColumnStatisticsObj(colName="id", colType="int",
                                                                               statsData=data)])
    if "engine" in _fields(t.ColumnStatistics):
        stats.engine = "hive"
    return stats


def _fields(cls: Any) -> set[str]:
    return {s[2] for s in cls.thrift_spec if s}


def altered(table: Any, **params: str) -> Any:
    """The table just read, with a new column and parameters (what an ALTER or a stats update sends)."""
    import copy

    new = copy.deepcopy(table)
    new.parameters = {**(new.parameters or {}), **params}
    return new


def added_column(t: Any, table: Any) -> Any:
    new = altered(table)
    new.sd.cols = [*new.sd.cols, t.FieldSchema(name="extra", type="string", comment="added")]
    return new


def ctx(t: Any, **props: str) -> Any:
    return t.EnvironmentContext(properties=dict(props))


def discarded(_reply: Any, _n: Names) -> None:
    """The client ignores the reply (Trino's alter calls return nothing to their caller)."""
    return None


def own_db(reply: Any, n: Names) -> Any:
    """A listing of every database, cut to this test's own."""
    return sorted(x for x in reply if x.lower() == n.db.lower())


def by_name(reply: Any, _n: Names) -> Any:
    return sorted(reply, key=lambda m: getattr(m, "tableName", "") or "")


def count_is(expected: int) -> Callable[[Any, Names, dict[str, Any]], None]:
    def check(reply: Any, _n: Names, _r: dict[str, Any]) -> None:
        assert reply == expected, f"add_partitions returned {reply}, not {expected} (Trino fails the query)"
    return check


def table_of(reply: Any) -> Any:
    """The table in a get_table_req reply (or a get_table reply, after Trino's fallback)."""
    return getattr(reply, "table", reply)


def _capabilities(t: Any) -> Any:
    return t.ClientCapabilities(values=[INSERT_ONLY_TABLES])


# -- Trino (trinodb/trino, plugin/trino-hive, io.trino.plugin.hive.metastore.thrift) -----------------------------
def _trino_get_table(label: str, table: str) -> Step:
    """ThriftHiveMetastoreClient#getTable: alternativeCall(get_table_req with ClientCapabilities
    [INSERT_ONLY_TABLES], get_table), the second only after an error other than NoSuchObjectException."""
    return Step(label, "get_table_req",
                lambda n, t, r: (t.GetTableRequest(dbName=n.db, tblName=table, capabilities=_capabilities(t)),),
                fallback=("get_table", lambda n, t, r: (n.db, table)), fallback_on="not_nosuch", keep=table_of)


TRINO_PARTITIONS = [f"2025-01-{i:02d}" for i in range(1, 23)]  # 22: two add_partitions batches (20 + 2)

TRINO = [
    Sequence("trino", "show_schemas_and_tables",
             "ThriftHiveMetastore#getAllDatabases (get_all_databases); ThriftHiveMetastore#getDatabase; "
             "ThriftHiveMetastore#getTables (Trino 444+: ThriftHiveMetastoreClient#getTableMeta, "
             "get_table_meta(db, \"*\", []))", "4.x",
             (Step("schemas", "get_all_databases", lambda n, t, r: (), project=own_db),
              Step("schema", "get_database", lambda n, t, r: (n.db,)),
              Step("tables", "get_table_meta", lambda n, t, r: (n.db, "*", []), project=by_name)),
             per_operation=True, set_ugi=True),
    Sequence("trino", "select_partitioned",
             "ThriftHiveMetastoreClient#getTable; ThriftHiveMetastore#getPartitionNamesByFilter "
             "(ThriftHiveMetastoreClient#getPartitionNames: get_partition_names(db, t, -1)); "
             "ThriftHiveMetastore#getPartitionsByNames (get_partitions_by_names); "
             "ThriftHiveMetastoreClient#getTableColumnStatistics (get_table_statistics_req); "
             "ThriftHiveMetastoreClient#getPartitionColumnStatistics (get_partitions_statistics_req)", "4.x",
             (_trino_get_table("table", "parts"),
              Step("names", "get_partition_names", lambda n, t, r: (n.db, "parts", -1)),
              Step("partitions", "get_partitions_by_names", lambda n, t, r: (n.db, "parts", r["names"])),
              Step("table_stats", "get_table_statistics_req",
                   lambda n, t, r: (t.TableStatsRequest(dbName=n.db, tblName="parts", colNames=["id", "name"]),)),
              Step("part_stats", "get_partitions_statistics_req",
                   lambda n, t, r: (t.PartitionsStatsRequest(dbName=n.db, tblName="parts", colNames=["id", "name"],
                                                             partNames=r["names"]),))),
             per_operation=True, set_ugi=True),
    Sequence("trino", "ctas_partitioned",
             "ThriftHiveMetastore#createTable (create_table); ThriftHiveMetastore#addPartitions "
             "(PARTITION_COMMIT_BATCH_SIZE = 20 per add_partitions call, the returned count checked); "
             "ThriftHiveMetastore#updatePartitionStatistics from ThriftHiveWriteStatisticsExecutor "
             "(write-statistics-threads = 20; update_partition_column_statistics)", "4.x",
             (Step("schema", "get_database", lambda n, t, r: (n.db,)),
              _trino_get_table("absent", "ctas_t"),
              Step("create", "create_table",
                   lambda n, t, r: (new_table(t, n, "ctas_t", parts=[("ds", "string")],
                                              params={"trino_query_id": "q1", "trino_version": "470"}),),
                   write=True),
              Step("batch1", "add_partitions",
                   lambda n, t, r: ([new_partition(t, n, "ctas_t", v, {"numRows": "1", "trino_query_id": "q1"})
                                     for v in TRINO_PARTITIONS[:20]],), write=True, check=count_is(20)),
              Step("batch2", "add_partitions",
                   lambda n, t, r: ([new_partition(t, n, "ctas_t", v, {"numRows": "1", "trino_query_id": "q1"})
                                     for v in TRINO_PARTITIONS[20:]],), write=True, check=count_is(2)),
              Step("stats", "update_partition_column_statistics",
                   lambda n, t, r: [(long_stats(t, n, "ctas_t", f"ds={v}"),) for v in TRINO_PARTITIONS],
                   write=True, many=True, threads=20),
              Step("names", "get_partition_names", lambda n, t, r: (n.db, "ctas_t", -1)),
              Step("read_back", "get_partitions_by_names", lambda n, t, r: (n.db, "ctas_t", r["names"])),
              Step("read_stats", "get_partitions_statistics_req",
                   lambda n, t, r: (t.PartitionsStatsRequest(dbName=n.db, tblName="ctas_t", colNames=["id"],
                                                             partNames=r["names"]),))),
             per_operation=True, set_ugi=True),
    Sequence("trino", "insert_existing_partition",
             "ThriftHiveMetastore#getPartitionsByNames; ThriftHiveMetastore#getPartitionStatistics; "
             "ThriftHiveMetastore#alterPartition (alter_partition); "
             "ThriftHiveMetastore#updatePartitionStatistics (update_partition_column_statistics)", "4.x",
             (_trino_get_table("table", "parts"),
              Step("partitions", "get_partitions_by_names", lambda n, t, r: (n.db, "parts", ["ds=2024-01-01"])),
              Step("stats", "get_partitions_statistics_req",
                   lambda n, t, r: (t.PartitionsStatsRequest(dbName=n.db, tblName="parts", colNames=["id"],
                                                             partNames=["ds=2024-01-01"]),)),
              Step("alter", "alter_partition",
                   lambda n, t, r: (n.db, "parts", altered(r["partitions"][0], numRows="7", trino_query_id="q2")),
                   write=True),
              Step("col_stats", "update_partition_column_statistics",
                   lambda n, t, r: (long_stats(t, n, "parts", "ds=2024-01-01", high=9),), write=True),
              Step("read_back", "get_partitions_by_names", lambda n, t, r: (n.db, "parts", ["ds=2024-01-01"]))),
             per_operation=True, set_ugi=True),
    Sequence("trino", "insert_unpartitioned",
             "ThriftHiveMetastore#updateTableStatistics: alter_table_with_environment_context with "
             "{DO_NOT_UPDATE_STATS: true}, then update_table_column_statistics", "4.x",
             (_trino_get_table("table", "plain"),
              Step("stats", "get_table_statistics_req",
                   lambda n, t, r: (t.TableStatsRequest(dbName=n.db, tblName="plain", colNames=["id"]),)),
              Step("alter", "alter_table_with_environment_context",
                   lambda n, t, r: (n.db, "plain", altered(r["table"], numRows="3"),
                                    ctx(t, DO_NOT_UPDATE_STATS="true")), write=True),
              Step("col_stats", "update_table_column_statistics",
                   lambda n, t, r: (long_stats(t, n, "plain", high=3),), write=True),
              _trino_get_table("read_back", "plain")),
             per_operation=True, set_ugi=True),
    Sequence("trino", "alter_table",
             "ThriftHiveMetastore#alterTable (alter_table_with_environment_context); "
             "ThriftHiveMetastoreClient#alterTransactionalTable (alter_table_req, then "
             "alter_table_with_environment_context only on UNKNOWN_METHOD); "
             "ThriftHiveMetastoreClient#alterPartitions (alter_partitions_req, then "
             "alter_partitions_with_environment_context only on UNKNOWN_METHOD)", "4.x",
             (_trino_get_table("table", "plain"),
              Step("comment", "alter_table_with_environment_context",
                   lambda n, t, r: (n.db, "plain", altered(r["table"], comment="from trino"),
                                    ctx(t, DO_NOT_UPDATE_STATS="true")), write=True),
              Step("req", "alter_table_req",
                   lambda n, t, r: (t.AlterTableRequest(dbName=n.db, tableName="plain",
                                                        table=added_column(t, r["table"]),
                                                        environmentContext=ctx(t, DO_NOT_UPDATE_STATS="true")),),
                   write=True, project=discarded,
                   fallback=("alter_table_with_environment_context",
                             lambda n, t, r: (n.db, "plain", added_column(t, r["table"]),
                                              ctx(t, DO_NOT_UPDATE_STATS="true")))),
              Step("partitions", "get_partitions_by_names", lambda n, t, r: (n.db, "parts", ["ds=2024-01-02"])),
              Step("parts_req", "alter_partitions_req",
                   lambda n, t, r: (t.AlterPartitionsRequest(dbName=n.db, tableName="parts",
                                                             partitions=[altered(r["partitions"][0], k="v")]),),
                   write=True, project=discarded,
                   fallback=("alter_partitions_with_environment_context",
                             lambda n, t, r: (n.db, "parts", [altered(r["partitions"][0], k="v")], ctx(t)))),
              _trino_get_table("read_back", "plain"),
              Step("parts_back", "get_partitions_by_names", lambda n, t, r: (n.db, "parts", ["ds=2024-01-02"]))),
             per_operation=True, set_ugi=True),
    Sequence("trino", "drop_table",
             "ThriftHiveMetastore#dropTable: get_table, then drop_table(db, t, deleteData)", "4.x",
             (_trino_get_table("table", "plain"),
              Step("drop", "drop_table", lambda n, t, r: (n.db, "plain", True), write=True),
              _trino_get_table("gone", "plain")),
             per_operation=True, set_ugi=True),
    Sequence("trino", "drop_schema_cascade",
             "ThriftHiveMetastore#dropDatabase after HiveMetadata#dropSchema(cascade) dropped each table "
             "(get_all_tables, drop_table each, drop_database(db, deleteData, false))", "4.x",
             (Step("tables", "get_all_tables", lambda n, t, r: (n.db,), project=lambda x, n: sorted(x)),
              Step("drops", "drop_table", lambda n, t, r: [(n.db, name, True) for name in sorted(r["tables"])],
                   write=True, many=True),
              Step("drop", "drop_database", lambda n, t, r: (n.db, True, False), write=True),
              Step("gone", "get_database", lambda n, t, r: (n.db,))),
             per_operation=True, set_ugi=True, drops_database=True),
    Sequence("trino", "acid_read_on_hive2",
             "SemiTransactionalHiveMetastore#beginQuery for a transactional table: ThriftHiveMetastore#"
             "openTransaction (open_txns), ThriftHiveMetastore#getValidWriteIds (ThriftHiveMetastoreClient#"
             "getValidWriteIds: get_open_txns, then get_valid_write_ids; any TException becomes \"Failed to open "
             "transaction. Transactional tables support requires Hive metastore version at least 3.0\"), "
             "ThriftHiveMetastore#abortTransaction (abort_txn)", "4.x",
             (Step("open", "open_txns",
                   lambda n, t, r: (t.OpenTxnRequest(num_txns=1, user="trino", hostname="trino-coordinator",
                                                     agentInfo="trino-query-1"),),
                   project=lambda x, n: len(x.txn_ids)),
              Step("open_txns", "get_open_txns", lambda n, t, r: (), project=lambda x, n: "answered"),
              Step("write_ids", "get_valid_write_ids",
                   lambda n, t, r: (t.GetValidWriteIdsRequest(fullTableNames=[f"{n.db}.plain"],
                                                              validTxnList=f"{r['open'].txn_ids[0]}:"),)),
              Step("abort", "abort_txn", lambda n, t, r: (t.AbortTxnRequest(txnid=r["open"].txn_ids[0]),))),
             per_operation=True, set_ugi=True,
             notes="Hive 2.3 has no get_valid_write_ids: the client gets Hive 2.3's own UNKNOWN_METHOD, a TException, "
                   "which Trino turns into its 'requires Hive metastore version at least 3.0' error"),
]


# -- Hive 3.1 (apache/hive branch-3.1: standalone-metastore HiveMetaStoreClient, ql Hive) ------------------------
def _h31_get_table(label: str, table: str) -> Step:
    """HiveMetaStoreClient#getTable(catName, dbName, tableName) (3.1): get_table_req with catName and
    ClientCapabilities [INSERT_ONLY_TABLES]."""
    return Step(label, "get_table_req",
                lambda n, t, r: (t.GetTableRequest(dbName=n.db, tblName=table, capabilities=_capabilities(t),
                                                   catName="hive"),), keep=table_of)


def _h3_show(release: str) -> Step:
    return Step("databases", "get_databases", lambda n, t, r: ("@hive#",), project=own_db)


HIVE31 = [
    Sequence("hive-3.1", "show_databases_and_tables",
             "DDLTask#showDatabases -> Hive#getAllDatabases -> HiveMetaStoreClient#getAllDatabases(catName) "
             "(get_databases(\"@hive#\")); DDLTask#showTablesOrViews -> Hive#getTablesByType(db, null, null) -> "
             "HiveMetaStoreClient#getAllTables(catName, db) (get_all_tables(\"@hive#db\"))", "3.1",
             (_h3_show("3.1"),
              Step("tables", "get_all_tables", lambda n, t, r: (n.qdb,), project=lambda x, n: sorted(x))),
             catalog=True),
    Sequence("hive-3.1", "describe",
             "DDLTask#describeTable -> Hive#getTable -> HiveMetaStoreClient#getTable(catName, db, t)", "3.1",
             (_h31_get_table("table", "parts"),), catalog=True),
    Sequence("hive-3.1", "select_partitioned",
             "PartitionPruner#getAllPartitions -> Hive#getAllPartitionsOf -> HiveMetaStoreClient#listPartitions "
             "(get_partitions(\"@hive#db\", t, -1)); StatsUtils via Hive#getAggrColStatsFor -> "
             "HiveMetaStoreClient#getAggrColStatsFor (get_aggr_stats_for)", "3.1",
             (_h31_get_table("table", "parts"),
              Step("partitions", "get_partitions", lambda n, t, r: (n.qdb, "parts", -1)),
              Step("aggr", "get_aggr_stats_for",
                   lambda n, t, r: (t.PartitionsStatsRequest(dbName=n.db, tblName="parts", colNames=["id"],
                                                             partNames=[f"ds={v}" for v in SEEDED_PARTITIONS],
                                                             catName="hive"),))),
             catalog=True),
    Sequence("hive-3.1", "ctas",
             "SemanticAnalyzer (Hive#getDatabase, Hive#getTable: get_database, get_table_req); DDLTask#createTable "
             "-> Hive#createTable -> HiveMetaStoreClient#createTable(tbl, envContext) "
             "(create_table_with_environment_context); BasicStatsTask -> Hive#alterTable -> "
             "HiveMetaStoreClient#alter_table_with_environmentContext (STATS_GENERATED=TASK)", "3.1",
             (Step("db", "get_database", lambda n, t, r: (n.qdb,)),
              _h31_get_table("absent", "ctas_t"),
              Step("create", "create_table_with_environment_context",
                   lambda n, t, r: (new_table(t, n, "ctas_t", owner="hive"), None), write=True),
              _h31_get_table("created", "ctas_t"),
              Step("stats", "alter_table_with_environment_context",
                   lambda n, t, r: (n.qdb, "ctas_t", altered(r["created"], numRows="2", numFiles="1"),
                                    ctx(t, STATS_GENERATED="TASK")), write=True),
              _h31_get_table("read_back", "ctas_t")),
             catalog=True),
    Sequence("hive-3.1", "insert_partitioned",
             "Hive#loadPartition: Hive#getPartition -> HiveMetaStoreClient#getPartitionWithAuthInfo "
             "(get_partition_with_auth); HiveMetaStoreClient#add_partition "
             "(add_partition_with_environment_context); Hive#alterPartitions -> "
             "HiveMetaStoreClient#alter_partitions (alter_partitions_with_environment_context)", "3.1",
             (_h31_get_table("table", "parts"),
              Step("absent", "get_partition_with_auth",
                   lambda n, t, r: (n.qdb, "parts", ["2024-02-01"], "hive", ["hive"])),
              Step("add", "add_partition_with_environment_context",
                   lambda n, t, r: (new_partition(t, n, "parts", "2024-02-01"), None), write=True),
              Step("added", "get_partition_with_auth",
                   lambda n, t, r: (n.qdb, "parts", ["2024-02-01"], "hive", ["hive"])),
              Step("stats", "alter_partitions_with_environment_context",
                   lambda n, t, r: (n.qdb, "parts", [altered(r["added"], numRows="4")],
                                    ctx(t, STATS_GENERATED="TASK")), write=True),
              Step("read_back", "get_partition_with_auth",
                   lambda n, t, r: (n.qdb, "parts", ["2024-02-01"], "hive", ["hive"]))),
             catalog=True),
    Sequence("hive-3.1", "alter_table",
             "DDLTask#alterTable -> Hive#alterTable -> HiveMetaStoreClient#alter_table_with_environmentContext",
             "3.1",
             (_h31_get_table("table", "plain"),
              Step("alter", "alter_table_with_environment_context",
                   lambda n, t, r: (n.qdb, "plain", added_column(t, r["table"]), None), write=True),
              _h31_get_table("read_back", "plain")),
             catalog=True),
    Sequence("hive-3.1", "drop_table",
             "DDLTask#dropTable -> Hive#dropTable -> HiveMetaStoreClient#dropTable(catName, db, t, deleteData, "
             "ignoreUnknownTab, envContext): get_table_req, drop_table_with_environment_context", "3.1",
             (_h31_get_table("table", "plain"),
              Step("drop", "drop_table_with_environment_context", lambda n, t, r: (n.qdb, "plain", True, None),
                   write=True),
              _h31_get_table("gone", "plain")),
             catalog=True),
    Sequence("hive-3.1", "drop_database_cascade",
             "HiveMetaStoreClient#dropDatabase(catName, db, deleteData, ignoreUnknownDb, cascade) (3.1): "
             "get_database, get_tables_by_type(MATERIALIZED_VIEW) first, get_all_tables, dropTable for each "
             "(get_table_req, drop_table_with_environment_context), drop_database", "3.1",
             (Step("db", "get_database", lambda n, t, r: (n.qdb,)),
              Step("views", "get_tables_by_type", lambda n, t, r: (n.qdb, ".*", "MATERIALIZED_VIEW")),
              Step("tables", "get_all_tables", lambda n, t, r: (n.qdb,), project=lambda x, n: sorted(x)),
              Step("each", "get_table_req",
                   lambda n, t, r: [(t.GetTableRequest(dbName=n.db, tblName=x, capabilities=_capabilities(t),
                                                       catName="hive"),) for x in sorted(r["tables"])], many=True),
              Step("drops", "drop_table_with_environment_context",
                   lambda n, t, r: [(n.qdb, x, True, None) for x in sorted(r["tables"])], write=True, many=True),
              Step("drop", "drop_database", lambda n, t, r: (n.qdb, True, True), write=True),
              Step("gone", "get_database", lambda n, t, r: (n.qdb,))),
             catalog=True, drops_database=True),
    Sequence("hive-3.1", "analyze",
             "ColumnStatsSemanticAnalyzer / ColStatsProcessor#persistColumnStats -> Hive#setPartitionColumnStatistics "
             "-> HiveMetaStoreClient#setPartitionColumnStatistics (set_aggr_stats_for); BasicStatsTask -> "
             "Hive#alterTable (alter_table_with_environment_context); DESCRIBE FORMATTED col -> "
             "Hive#getTableColumnStatistics (get_table_statistics_req)", "3.1",
             (_h31_get_table("table", "plain"),
              Step("basic", "alter_table_with_environment_context",
                   lambda n, t, r: (n.qdb, "plain", altered(r["table"], numRows="2", COLUMN_STATS_ACCURATE="x"),
                                    ctx(t, STATS_GENERATED="TASK")), write=True),
              Step("columns", "set_aggr_stats_for",
                   lambda n, t, r: (t.SetPartitionsStatsRequest(colStats=[long_stats(t, n, "plain", high=5)]),),
                   write=True),
              Step("read", "get_table_statistics_req",
                   lambda n, t, r: (t.TableStatsRequest(dbName=n.db, tblName="plain", colNames=["id"],
                                                        catName="hive"),))),
             catalog=True),
]


# -- Hive 4 (apache/hive master: standalone-metastore metastore-client HiveMetaStoreClient, ql Hive) -------------
def _h4_get_table(label: str, table: str) -> Step:
    """HiveMetaStoreClient#getTable(GetTableRequest) (4.x): catName, processorCapabilities, processorIdentifier,
    engine."""
    return Step(label, "get_table_req",
                lambda n, t, r: (t.GetTableRequest(dbName=n.db, tblName=table, catName="hive",
                                                   processorCapabilities=HIVE4_CAPABILITIES,
                                                   processorIdentifier="hive-4", getColumnStats=False,
                                                   engine="hive"),), keep=table_of)


def _get_database_req(label: str = "db") -> Step:
    return Step(label, "get_database_req",
                lambda n, t, r: (t.GetDatabaseRequest(name=n.db, catalogName="hive",
                                                      processorCapabilities=HIVE4_CAPABILITIES),),
                equivalent=("get_database", lambda n, t, r: (n.qdb,), lambda reply, t: reply))


HIVE4 = [
    Sequence("hive-4", "show_databases_and_tables",
             "Hive#getAllDatabases -> HiveMetaStoreClient#getAllDatabases(catName) (get_databases(\"@hive#\")); "
             "ShowTablesOperation -> Hive#getTablesByType -> HiveMetaStoreClient#getTables(catName, db, \".*\") "
             "(get_tables)", "4.x",
             (_h3_show("4.x"),
              Step("tables", "get_tables", lambda n, t, r: (n.qdb, ".*"), project=lambda x, n: sorted(x))),
             catalog=True),
    Sequence("hive-4", "describe",
             "DescTableOperation -> Hive#getTable -> HiveMetaStoreClient#getTable(GetTableRequest) "
             "(get_table_req with processorCapabilities)", "4.x",
             (_h4_get_table("table", "parts"),), catalog=True),
    Sequence("hive-4", "select_partitioned",
             "HiveMaterializedViewsRegistry / Hive#getAllMaterializedViewObjectsForRewriting "
             "(get_all_materialized_view_objects_for_rewriting, at compile); PartitionPruner -> "
             "Hive#getPartitionNames (get_partition_names) and Hive#getPartitionsByNames -> "
             "HiveMetaStoreClient#getPartitionsByNames(GetPartitionsByNamesRequest) (get_partitions_by_names_req); "
             "Hive#getAggrColStatsFor (get_aggr_stats_for with engine)", "4.x",
             (Step("views", "get_all_materialized_view_objects_for_rewriting", lambda n, t, r: ()),
              _h4_get_table("table", "parts"),
              Step("names", "get_partition_names", lambda n, t, r: (n.qdb, "parts", -1)),
              Step("partitions", "get_partitions_by_names_req",
                   lambda n, t, r: (t.GetPartitionsByNamesRequest(db_name=n.qdb, tbl_name="parts",
                                                                  names=r["names"], get_col_stats=False,
                                                                  processorCapabilities=HIVE4_CAPABILITIES,
                                                                  engine="hive"),),
                   equivalent=("get_partitions_by_names", lambda n, t, r: (n.qdb, "parts", r["names"]),
                               lambda reply, t: t.GetPartitionsByNamesResult(partitions=reply))),
              Step("aggr", "get_aggr_stats_for",
                   lambda n, t, r: (t.PartitionsStatsRequest(dbName=n.db, tblName="parts", colNames=["id"],
                                                             partNames=r["names"], catName="hive",
                                                             engine="hive"),))),
             catalog=True),
    Sequence("hive-4", "ctas",
             "Hive#getDatabase -> HiveMetaStoreClient#getDatabase(catName, db) (get_database_req); Hive#getTable "
             "(get_table_req); CreateTableOperation -> Hive#createTable -> HiveMetaStoreClient#createTable("
             "CreateTableRequest) (create_table_req); BasicStatsTask -> Hive#alterTable -> "
             "HiveMetaStoreClient#alter_table (alter_table_req)", "4.x",
             (_get_database_req(),
              _h4_get_table("absent", "ctas_t"),
              Step("create", "create_table_req",
                   lambda n, t, r: (t.CreateTableRequest(table=new_table(t, n, "ctas_t", owner="hive"),
                                                         processorCapabilities=HIVE4_CAPABILITIES,
                                                         processorIdentifier="hive-4"),), write=True,
                   equivalent=("create_table_with_environment_context",
                               lambda n, t, r: (new_table(t, n, "ctas_t", owner="hive"), None),
                               lambda reply, t: reply)),
              _h4_get_table("created", "ctas_t"),
              Step("stats", "alter_table_req",
                   lambda n, t, r: (t.AlterTableRequest(catName="hive", dbName=n.db, tableName="ctas_t",
                                                        table=altered(r["created"], numRows="2"),
                                                        environmentContext=ctx(t, STATS_GENERATED="TASK")),),
                   write=True,
                   equivalent=("alter_table_with_environment_context",
                               lambda n, t, r: (n.qdb, "ctas_t", altered(r["created"], numRows="2"),
                                                ctx(t, STATS_GENERATED="TASK")),
                               lambda reply, t: t.AlterTableResponse())),
              _h4_get_table("read_back", "ctas_t")),
             catalog=True),
    Sequence("hive-4", "insert_partitioned",
             "Hive#loadPartition: Hive#getPartition -> HiveMetaStoreClient#getPartition(GetPartitionRequest) "
             "(get_partition_req); HiveMetaStoreClient#add_partition (add_partition_with_environment_context); "
             "Hive#alterPartitions -> HiveMetaStoreClient#alter_partitions (alter_partitions_req)", "4.x",
             (_h4_get_table("table", "parts"),
              Step("absent", "get_partition_req",
                   lambda n, t, r: (t.GetPartitionRequest(catName="hive", dbName=n.db, tblName="parts",
                                                          partVals=["2024-02-01"]),),
                   equivalent=("get_partition", lambda n, t, r: (n.qdb, "parts", ["2024-02-01"]),
                               lambda reply, t: t.GetPartitionResponse(partition=reply))),
              Step("add", "add_partition_with_environment_context",
                   lambda n, t, r: (new_partition(t, n, "parts", "2024-02-01"), None), write=True),
              Step("added", "get_partition_req",
                   lambda n, t, r: (t.GetPartitionRequest(catName="hive", dbName=n.db, tblName="parts",
                                                          partVals=["2024-02-01"]),),
                   equivalent=("get_partition", lambda n, t, r: (n.qdb, "parts", ["2024-02-01"]),
                               lambda reply, t: t.GetPartitionResponse(partition=reply))),
              Step("stats", "alter_partitions_req",
                   lambda n, t, r: (t.AlterPartitionsRequest(
                       catName="hive", dbName=n.db, tableName="parts",
                       partitions=[altered(r["added"].partition, numRows="4")],
                       environmentContext=ctx(t, STATS_GENERATED="TASK")),), write=True,
                   equivalent=("alter_partitions_with_environment_context",
                               lambda n, t, r: (n.qdb, "parts", [altered(r["added"].partition, numRows="4")],
                                                ctx(t, STATS_GENERATED="TASK")),
                               lambda reply, t: t.AlterPartitionsResponse())),
              Step("read_back", "get_partition_req",
                   lambda n, t, r: (t.GetPartitionRequest(catName="hive", dbName=n.db, tblName="parts",
                                                          partVals=["2024-02-01"]),),
                   equivalent=("get_partition", lambda n, t, r: (n.qdb, "parts", ["2024-02-01"]),
                               lambda reply, t: t.GetPartitionResponse(partition=reply)))),
             catalog=True),
    Sequence("hive-4", "alter_table",
             "AlterTableAddColumnsOperation -> Hive#alterTable -> HiveMetaStoreClient#alter_table "
             "(alter_table_req)", "4.x",
             (_h4_get_table("table", "plain"),
              Step("alter", "alter_table_req",
                   lambda n, t, r: (t.AlterTableRequest(catName="hive", dbName=n.db, tableName="plain",
                                                        table=added_column(t, r["table"])),), write=True,
                   equivalent=("alter_table_with_environment_context",
                               lambda n, t, r: (n.qdb, "plain", added_column(t, r["table"]), None),
                               lambda reply, t: t.AlterTableResponse())),
              _h4_get_table("read_back", "plain")),
             catalog=True),
    Sequence("hive-4", "drop_table",
             "DropTableOperation -> Hive#dropTable -> HiveMetaStoreClient#dropTable(catName, db, t, deleteData, "
             "ignoreUnknownTab, envContext): get_table_req, drop_table_with_environment_context", "4.x",
             (_h4_get_table("table", "plain"),
              Step("drop", "drop_table_with_environment_context", lambda n, t, r: (n.qdb, "plain", True, None),
                   write=True),
              _h4_get_table("gone", "plain")),
             catalog=True),
    Sequence("hive-4", "drop_database_cascade",
             "HiveMetaStoreClient#dropDatabase(DropDatabaseRequest) (4.x): getDatabase (get_database_req), "
             "getTables(MATERIALIZED_VIEW) (get_tables_by_type), getAllTables (get_all_tables), "
             "dropDatabaseCascadePerDb: getTableObjectsByName (get_table_objects_by_name_req), drop_database_req",
             "4.x",
             (_get_database_req(),
              Step("views", "get_tables_by_type", lambda n, t, r: (n.qdb, ".*", "MATERIALIZED_VIEW")),
              Step("tables", "get_all_tables", lambda n, t, r: (n.qdb,), project=lambda x, n: sorted(x)),
              Step("objects", "get_table_objects_by_name_req",
                   lambda n, t, r: (t.GetTablesRequest(dbName=n.db, tblNames=sorted(r["tables"]), catName="hive",
                                                       processorCapabilities=HIVE4_CAPABILITIES),),
                   project=lambda x, n: sorted(x.tables, key=lambda tb: tb.tableName)),
              Step("drop", "drop_database_req",
                   lambda n, t, r: (t.DropDatabaseRequest(name=n.db, catalogName="hive", ignoreUnknownDb=False,
                                                          deleteData=True, cascade=True),), write=True,
                   equivalent=("drop_database", lambda n, t, r: (n.qdb, True, True), lambda reply, t: reply)),
              _get_database_req("gone")),
             catalog=True, drops_database=True),
    Sequence("hive-4", "analyze",
             "ColStatsProcessor#persistColumnStats -> Hive#setPartitionColumnStatistics -> "
             "HiveMetaStoreClient#setPartitionColumnStatistics (set_aggr_stats_for with engine); BasicStatsTask "
             "-> Hive#alterTable (alter_table_req); Hive#getTableColumnStatistics (get_table_statistics_req)", "4.x",
             (_h4_get_table("table", "plain"),
              Step("basic", "alter_table_req",
                   lambda n, t, r: (t.AlterTableRequest(catName="hive", dbName=n.db, tableName="plain",
                                                        table=altered(r["table"], numRows="2"),
                                                        environmentContext=ctx(t, STATS_GENERATED="TASK")),),
                   write=True,
                   equivalent=("alter_table_with_environment_context",
                               lambda n, t, r: (n.qdb, "plain", altered(r["table"], numRows="2"),
                                                ctx(t, STATS_GENERATED="TASK")),
                               lambda reply, t: t.AlterTableResponse())),
              Step("columns", "set_aggr_stats_for",
                   lambda n, t, r: (t.SetPartitionsStatsRequest(colStats=[long_stats(t, n, "plain", high=5)],
                                                                needMerge=False, engine="hive"),), write=True),
              Step("read", "get_table_statistics_req",
                   lambda n, t, r: (t.TableStatsRequest(dbName=n.db, tblName="plain", colNames=["id"],
                                                        catName="hive", engine="hive"),))),
             catalog=True),
]


def _spark() -> list[Sequence]:
    from tests.clients.spark_recording import spark_sequences

    return spark_sequences()


CLIENTS: dict[str, list[Sequence]] = {"trino": TRINO, "hive-3.1": HIVE31, "hive-4": HIVE4}
CLIENTS["spark-3.5"] = _spark()


def all_sequences() -> list[Sequence]:
    return [s for seqs in CLIENTS.values() for s in seqs]


@dataclass(frozen=True)
class Covered:
    """One line of the generated "sequences covered" documentation."""

    client: str
    name: str
    methods: tuple[str, ...]
    source: str
    extra: dict[str, str] = field(default_factory=dict)


def covered() -> list[Covered]:
    out = []
    for s in all_sequences():
        methods: list[str] = []
        for step in s.steps:
            for m in (step.method, step.fallback[0] if step.fallback else None):
                if m and m not in methods:
                    methods.append(m)
        out.append(Covered(s.client, s.name, tuple(methods), s.source))
    return out
