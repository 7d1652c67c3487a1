"""Which answers are listings, and how each is filtered for its caller."""

from __future__ import annotations

from waggle.config.grants_model import GrantRule
from waggle.config.kinds import Effect, Privilege
from waggle.grants.listings import Shape, filtered, shape_of
from waggle.grants.policy import Policy
from waggle.grants.rules import RuleSource
from waggle.grants.verdict import Caller
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore.ttypes import GetTablesResult, Table, TableMeta
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO

POLICY = Policy([RuleSource([
    GrantRule("read s", users=("a",), databases=("s",), privileges=frozenset({Privilege.SELECT})),
    GrantRule("no x", users=("*",), databases=("s",), tables=("x*",), privileges=frozenset(Privilege),
              effect=Effect.DENY),
])])
A = Caller("a")


def shape(method: str) -> Shape | None:
    return shape_of(METHODS[method], METHOD_IO[method].result)


def test_listings_are_known_from_the_table_and_the_idl() -> None:
    assert shape("get_all_databases") is Shape.DATABASE_NAMES
    assert shape("get_databases") is Shape.DATABASE_NAMES
    assert shape("get_all_tables") is Shape.TABLE_NAMES and shape("get_tables") is Shape.TABLE_NAMES
    assert shape("get_table_meta") is Shape.TABLES and shape("get_table_objects_by_name") is Shape.TABLES
    assert shape("get_table_objects_by_name_req") is Shape.HELD_TABLES
    for method in ("get_table", "get_partitions", "get_partition_names", "set_ugi", "drop_table"):
        assert shape(method) is None, method


def test_each_listing_keeps_what_the_caller_sees() -> None:
    names = T.get_all_databases_result(success=["s", "t", "@hive#s"])
    assert filtered(names, Shape.DATABASE_NAMES, T.get_all_databases_args(), POLICY, A) == 1
    assert names.success == ["s", "@hive#s"]
    tables = T.get_all_tables_result(success=["a", "x1", "B"])
    assert filtered(tables, Shape.TABLE_NAMES, T.get_all_tables_args(db_name="S"), POLICY, A) == 1
    assert tables.success == ["a", "B"]
    metas = T.get_table_meta_result(success=[TableMeta("s", "a", "T"), TableMeta("s", "x", "T"),
                                             TableMeta("t", "a", "T")])
    assert filtered(metas, Shape.TABLES, None, POLICY, A) == 2 and [m.tableName for m in metas.success] == ["a"]
    held = T.get_table_objects_by_name_req_result(success=GetTablesResult(tables=[Table(dbName="s", tableName="x"),
                                                                                 Table(dbName="s", tableName="y")]))
    assert filtered(held, Shape.HELD_TABLES, None, POLICY, A) == 1 and held.success.tables[0].tableName == "y"
    failed = T.get_all_tables_result()
    assert filtered(failed, Shape.TABLE_NAMES, T.get_all_tables_args(db_name="s"), POLICY, A) == 0
