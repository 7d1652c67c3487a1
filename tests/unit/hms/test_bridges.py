"""The pure parts of version bridging: versions, catalog names, results, partition names, and the bridges run
against a scripted upstream."""

from __future__ import annotations

from typing import Any

import pytest
from thrift.Thrift import TMessageType

from tests.support.clients import encode_call
from waggle.config.hive_values import parse_version
from waggle.config.loader import ConfigError, load
from waggle.hms.bridges import (
    BRIDGES,
    MethodMissing,
    bridges_call,
    carry,
    missing_in,
    strip_catalog,
)
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.names import partition_name
from waggle.hms.service import METHOD_IO


class Scripted:
    """An upstream that answers from a dict and records what it was asked."""

    def __init__(self, answers: dict[str, Any], catalogs: bool | None = False, missing: tuple[str, ...] = ()):
        self.answers = answers
        self.catalogs = catalogs
        self.missing = missing
        self.asked: list[tuple[str, Any]] = []

    def call(self, method: str, args: Any) -> Any:
        self.asked.append((method, args))
        if method in self.missing:
            raise MethodMissing(method)
        result = METHOD_IO[method].result()
        answer = self.answers.get(method)
        if isinstance(answer, Exception):
            for entry in type(result).thrift_spec:
                if entry and entry[0] > 0 and isinstance(answer, entry[3][0]):
                    setattr(result, entry[2], answer)
        elif hasattr(result, "success"):
            result.success = answer
        return result


def test_versions() -> None:
    assert parse_version("2.3.10") == (2, 3, 10)
    assert parse_version(" 4 ") == (4, 0, 0)  # "4" is every 4.x: not below (4, 0)
    assert parse_version("3") == (3, 0, 0) and parse_version("2.3") == (2, 3, 0)
    assert parse_version(None) is None and parse_version("") is None
    with pytest.raises(ValueError, match=r"4\.0\.1"):
        parse_version("hive-4")
    with pytest.raises(ValueError, match=r"older than 2\.3"):
        parse_version("2.1")
    assert missing_in(None) == frozenset()
    assert "get_database_req" in missing_in((2, 3, 10)) and "get_table" not in missing_in((2, 3, 10))
    assert "get_table_objects_by_name_req" not in missing_in((2, 3, 0))
    assert missing_in((4, 0, 1)) == {"get_table", "get_table_objects_by_name"}
    assert missing_in(parse_version("4")) == frozenset()


def test_bad_hive_version_names_file_key_and_value(tmp_path: Any) -> None:
    fed = tmp_path / "fed.yml"
    fed.write_text("primary-meta-store:\n  name: p\n  remote-meta-store-uris: thrift://h:1\n  hive-version: four\n")
    with pytest.raises(ConfigError) as info:
        load(None, str(fed))
    assert "fed.yml" in str(info.value) and "hive-version" in str(info.value) and "'four'" in str(info.value)


def test_strip_catalog() -> None:
    assert strip_catalog("@hive#sales") == "sales"
    assert strip_catalog("@HIVE#sales") == "sales"
    assert strip_catalog("@hive#") == "*"
    assert strip_catalog("@hive#!") == ""
    assert strip_catalog("@spark#sales") == "@spark#sales"  # no such catalog on Hive 2: it says so itself
    assert strip_catalog("sales") == "sales"


def test_partition_names_escape_like_hive() -> None:
    assert partition_name(["ds", "hr"], ["2024-01-01", "07"]) == "ds=2024-01-01/hr=07"
    assert partition_name(["p"], ["a/b:c=d%"]) == "p=a%2Fb%3Ac%3Dd%25"
    with pytest.raises(ValueError):
        partition_name(["a", "b"], ["1"])


def test_carry_moves_exceptions_by_class() -> None:
    old = H.get_database_result(o1=T.NoSuchObjectException(message="gone"))
    new = carry(old, "get_database_req", lambda db: db)
    assert new.o1.message == "gone" and new.success is None
    # an exception the new method does not declare becomes its MetaException, saying what it was
    old = H.get_table_objects_by_name_result(o3=T.UnknownDBException(message="no db"))
    new = carry(old, "get_table")
    assert new.o1.message == "UnknownDBException: no db"


def test_get_database_req_goes_down_with_the_catalog_only_where_understood() -> None:
    args = H.get_database_req_args(request=T.GetDatabaseRequest(name="sales", catalogName="hive"))
    hive2 = Scripted({"get_database": T.Database(name="sales")}, catalogs=False)
    assert BRIDGES["get_database_req"].answer(args, hive2).success.name == "sales"
    assert hive2.asked[0][1].name == "sales"
    hive3 = Scripted({"get_database": T.Database(name="sales")}, catalogs=True)
    BRIDGES["get_database_req"].answer(args, hive3)
    assert hive3.asked[0][1].name == "@hive#sales"


def test_tables_pattern_is_expanded_with_get_tables() -> None:
    req = T.GetTablesRequest(dbName="sales", tablesPattern="ord*", catName="hive")
    args = H.get_table_objects_by_name_req_args(req=req)
    assert bridges_call("get_table_objects_by_name_req", args, set(), None)
    assert bridges_call("get_table_objects_by_name_req", args, set(), (3, 1, 3))
    assert not bridges_call("get_table_objects_by_name_req", args, set(), (4, 0, 1))
    by_names = H.get_table_objects_by_name_req_args(req=T.GetTablesRequest(dbName="sales", tblNames=["orders"]))
    assert not bridges_call("get_table_objects_by_name_req", by_names, {"get_table_objects_by_name_req"}, None)
    up = Scripted({"get_tables": ["orders", "order_items"],
                   "get_table_objects_by_name_req": T.GetTablesResult(tables=[T.Table(tableName="orders")])})
    assert BRIDGES["get_table_objects_by_name_req"].answer(args, up).success.tables[0].tableName == "orders"
    sent = up.asked[1][1].req
    assert (sent.tblNames, sent.tablesPattern) == (["orders", "order_items"], None)
    assert req.tablesPattern == "ord*"  # the client's request is not changed


def test_get_table_goes_up_to_get_table_req() -> None:
    up = Scripted({"get_table_req": T.GetTableResult(table=T.Table(tableName="t", dbName="d"))})
    result = BRIDGES["get_table"].answer(H.get_table_args(dbname="@hive#d", tbl_name="t"), up)
    assert result.success.tableName == "t"
    req = up.asked[0][1].req
    assert (req.dbName, req.tblName, req.catName) == ("d", "t", "hive")


def test_truncate_on_hive2_is_a_clear_meta_exception() -> None:
    args = H.truncate_table_req_args(req=T.TruncateTableRequest(dbName="d", tableName="t"))
    result = BRIDGES["truncate_table_req"].answer(args, Scripted({}, missing=("truncate_table",)))
    assert "neither truncate_table_req nor truncate_table" in result.o1.message


def test_create_table_req_refuses_hive3_constraints_on_hive2() -> None:
    table = T.Table(tableName="t", dbName="d")
    args = H.create_table_req_args(request=T.CreateTableRequest(
        table=table, notNullConstraints=[T.SQLNotNullConstraint(column_name="id")]))
    for catalogs in (False, None):  # Hive 2, or not known to be Hive 3+: never dropped without a word
        up = Scripted({}, catalogs=catalogs)
        result = BRIDGES["create_table_req"].answer(args, up)
        assert "cannot store" in result.o3.message and up.asked == []
    plain = H.create_table_req_args(request=T.CreateTableRequest(table=table))
    up = Scripted({})
    BRIDGES["create_table_req"].answer(plain, up)
    assert [m for m, _ in up.asked] == ["create_table_with_environment_context"]


def test_all_table_constraints_on_hive2_has_only_keys() -> None:
    up = Scripted({"get_primary_keys": T.PrimaryKeysResponse(primaryKeys=[T.SQLPrimaryKey(column_name="id")]),
                   "get_foreign_keys": T.ForeignKeysResponse(foreignKeys=[])},
                  missing=("get_unique_constraints", "get_not_null_constraints", "get_default_constraints",
                           "get_check_constraints"))
    args = H.get_all_table_constraints_args(request=T.AllTableConstraintsRequest(dbName="d", tblName="t",
                                                                                 catName="hive"))
    everything = BRIDGES["get_all_table_constraints"].answer(args, up).success.allTableConstraints
    assert [k.column_name for k in everything.primaryKeys] == ["id"]
    assert everything.checkConstraints == [] and everything.uniqueConstraints == []
    fk_request = up.asked[1][1].request
    assert (fk_request.foreign_db_name, fk_request.foreign_tbl_name) == ("d", "t")


def _encoded(name: str, result: Any) -> bytes:
    return encode_call(name, result, seqid=9, mtype=TMessageType.REPLY)


def _decoded(raw: bytes, cls: type) -> tuple[str, int, Any]:
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.transport.TTransport import TMemoryBuffer

    proto = TBinaryProtocol(TMemoryBuffer(raw))
    name, _, seqid = proto.readMessageBegin()
    result = cls()
    result.read(proto)
    return name, seqid, result


def test_wrapped_replies_are_reframed_byte_for_byte() -> None:
    from waggle.upstream.compat import wrap_reply

    parts = [T.Partition(values=[f"2024-01-0{i}"], dbName="d", tableName="t", parameters={"k": "v"})
             for i in range(1, 4)]
    raw = _encoded("get_partitions", H.get_partitions_result(success=parts))
    wrapped = wrap_reply(raw, "get_partitions", "get_partitions_req", 1)
    assert wrapped is not None
    name, seqid, result = _decoded(wrapped, H.get_partitions_req_result)
    assert (name, seqid) == ("get_partitions_req", 9)
    assert result.success == T.PartitionsResponse(partitions=parts)
    empty = wrap_reply(_encoded("get_fields", H.get_fields_result(success=[])), "get_fields", "get_fields_req", 1)
    assert empty is not None and _decoded(empty, H.get_fields_req_result)[2].success.fields == []
    # an exception, another method's reply, an application error: not re-framed
    failed = _encoded("get_partitions", H.get_partitions_result(o1=T.NoSuchObjectException(message="x")))
    assert wrap_reply(failed, "get_partitions", "get_partitions_req", 1) is None
    assert wrap_reply(raw, "get_partitions_by_names", "get_partitions_by_names_req", 1) is None
    assert wrap_reply(raw[:12], "get_partitions", "get_partitions_req", 1) is None


def test_partition_names_by_expression_refuse_a_superset() -> None:
    table = T.GetTableResult(table=T.Table(partitionKeys=[T.FieldSchema(name="ds", type="string")]))
    args = H.get_partition_names_req_args(req=T.PartitionsByExprRequest(dbName="d", tblName="t", expr=b"x"))
    exact = Scripted({"get_table_req": table, "get_partitions_by_expr": T.PartitionsByExprResult(
        partitions=[T.Partition(values=["a/b"])], hasUnknownPartitions=False)})
    assert BRIDGES["get_partition_names_req"].answer(args, exact).success == ["ds=a%2Fb"]
    unsure = Scripted({"get_table_req": table, "get_partitions_by_expr": T.PartitionsByExprResult(
        partitions=[T.Partition(values=["a"])], hasUnknownPartitions=True)})
    assert "hasUnknownPartitions" in BRIDGES["get_partition_names_req"].answer(args, unsure).o1.message


class FakePool:
    """A pool whose metastore lacks every method in ``lacks`` (answers UNKNOWN_METHOD) and answers others."""

    name = "old"

    def __init__(self, lacks: set[str], answers: dict[str, Any]) -> None:
        from waggle.config.model import HostPort, MetastoreConfig
        from waggle.upstream.capabilities import Capabilities

        self.caps = Capabilities(MetastoreConfig("old", (HostPort("h", 1),), False, ""))
        self.lacks = lacks
        self.answers = answers
        self.sent: list[str] = []

    def exchange(self, identity: Any, method: str, args: Any, result_class: type, seqid: int = 0) -> Any:
        from thrift.Thrift import TApplicationException

        self.sent.append(method)
        if method in self.lacks:
            return TApplicationException(TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{method}'")
        result = result_class()
        result.success = self.answers.get(method)
        return result


def test_a_bridge_never_re_enters_itself_and_missing_methods_are_remembered() -> None:
    from waggle.upstream.compat import Bridged

    pool = FakePool({"get_table_objects_by_name", "get_table_objects_by_name_req", "get_catalogs"}, {})
    args = H.get_table_objects_by_name_args(dbname="d", tbl_names=["t"])
    with pytest.raises(MethodMissing) as info:
        Bridged(pool, None, 0).call("get_table_objects_by_name", args)
    assert info.value.method == "get_table_objects_by_name_req"
    assert pool.sent == ["get_table_objects_by_name", "get_table_objects_by_name_req"]
    with pytest.raises(MethodMissing):  # learned: nothing is sent again
        Bridged(pool, None, 0).call("get_table_objects_by_name", args)
    assert len(pool.sent) == 2


def test_unbridged_methods_a_metastore_lacks_are_asked_once() -> None:
    from waggle.upstream.compat import Bridged

    pool = FakePool({"get_unique_constraints", "get_not_null_constraints", "get_default_constraints",
                     "get_check_constraints", "get_all_table_constraints", "get_catalogs"},
                    {"get_primary_keys": T.PrimaryKeysResponse(primaryKeys=[]),
                     "get_foreign_keys": T.ForeignKeysResponse(foreignKeys=[])})
    args = H.get_all_table_constraints_args(request=T.AllTableConstraintsRequest(dbName="d", tblName="t",
                                                                                 catName="hive"))
    for _ in range(3):
        result = Bridged(pool, None, 0).call("get_all_table_constraints", args)
        assert result.success.allTableConstraints.primaryKeys == []
    assert pool.sent.count("get_unique_constraints") == 1 and pool.sent.count("get_all_table_constraints") == 1
    assert pool.sent.count("get_primary_keys") == 3


def test_alter_partitions_req_goes_down_to_alter_partitions_with_environment_context() -> None:
    """Hive 4's Hive#alterPartitions sends alter_partitions_req; Hive 2.3 and 3.1 have only the older call."""
    parts = [T.Partition(values=["1"], dbName="d", tableName="t", parameters={"k": "v"})]
    context = T.EnvironmentContext(properties={"STATS_GENERATED": "TASK"})
    args = H.alter_partitions_req_args(req=T.AlterPartitionsRequest(
        catName="hive", dbName="d", tableName="t", partitions=parts, environmentContext=context, writeId=7))
    hive2 = Scripted({}, catalogs=False)
    assert BRIDGES["alter_partitions_req"].answer(args, hive2).success == T.AlterPartitionsResponse()
    method, sent = hive2.asked[0]
    assert (method, sent.db_name, sent.tbl_name, sent.new_parts, sent.environment_context) == \
        ("alter_partitions_with_environment_context", "d", "t", parts, context)
    hive3 = Scripted({"alter_partitions_with_environment_context": T.InvalidOperationException(message="no")},
                     catalogs=True)
    failed = BRIDGES["alter_partitions_req"].answer(args, hive3)
    assert hive3.asked[0][1].db_name == "@hive#d" and failed.o1 == T.InvalidOperationException(message="no")
