"""Errors waggle writes itself reach a client where its own Hive release declares them (waggle/hms/layouts.py,
waggle/hms/declared.py), and the connection's calls say which release that is (waggle/hms/client_release.py).

Each client release is decoded with its own generated code: hmsclient (Hive 2), hive-metastore-client (Hive 3.1,
``thrift_files``) and waggle's IDL (4.x), through the client's ``recv_<method>``, exactly as it reads a reply.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport.TTransport import TMemoryBuffer

from tests.support.declared import deriver
from waggle.call import finish
from waggle.call.values import Call, Kind, Outcome, Refusal, Session
from waggle.config.model import Limits, WireFormat
from waggle.hms.client_release import FRESH, ClientRelease, learn
from waggle.hms.declared import DECLARED, RELEASES
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.layouts import Layout, agreed_fields
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header, Wire

CLIENTS = {"2.3": "hmsclient.genthrift.hive_metastore",
           "3.1": "thrift_files.libraries.thrift_hive_metastore_client",
           "4.x": "waggle.hms.gen.hive_metastore"}
LAYOUT_OF = {"2.3": Layout.HIVE_2, "3.1": Layout.CURRENT, "4.x": Layout.CURRENT}
WIRE = Wire(None, WireFormat(), Limits(1 << 20, 1 << 16, 1000))  # type: ignore[arg-type]
DOWN = "metastore 'gone' is unavailable (down since 12:00:00, retried every 30 s)"


def client_sees(release: str, method: str, raw: bytes) -> Any:
    """What ``release``'s generated client makes of a reply: its return value, or the exception it raises."""
    service = importlib.import_module(f"{CLIENTS[release]}.ThriftHiveMetastore")
    client = service.Client(TBinaryProtocol(TMemoryBuffer(raw)))
    try:
        return getattr(client, f"recv_{method}")()
    except Exception as exc:  # what the client raises is the answer
        return exc


def meta_exception(release: str) -> type:
    return importlib.import_module(f"{CLIENTS[release]}.ttypes").MetaException  # type: ignore[no-any-return]


def _call(method: str, args: Any, session: Session) -> Call:
    return Call(Header(method, TMessageType.CALL, 7), METHODS[method], METHOD_IO[method], args, b"", session,
                WireFormat())


# -- the facts ----------------------------------------------------------------------------------------------------
def test_the_table_agrees_with_hive_31s_generated_code_and_waggles_idl() -> None:
    """The 3.1 and 4.x columns, re-derived without Java (the 2.3 column needs the jar: tests/integration/
    test_declared_errors_live.py re-derives the whole table)."""
    d = deriver()
    hive_31, ours = d.hive_31(), d.waggle_idl()
    assert RELEASES == ("2.3", "3.1", "4.x")
    for method in sorted(set(hive_31) & set(ours)):
        if hive_31[method] != ours[method]:
            assert DECLARED.get(method, {}).get("3.1") == hive_31[method], method
    for method, layouts in DECLARED.items():
        assert layouts["4.x"] == ours[method], method
        assert layouts.get("3.1") == hive_31.get(method), method
        assert any(layout != layouts["4.x"] for layout in layouts.values()), f"{method} differs nowhere"


def test_get_partition_names_and_get_partitions_by_names_are_in_the_table() -> None:
    """Hive 2.3 declares get_partition_names as ``throws (1: MetaException o2)``, 3.1 and 4 as ``(1:
    NoSuchObjectException o1, 2: MetaException o2)``; get_partitions_by_names gains ``3: InvalidObjectException``
    in 4.x; get_table_objects_by_name declares nothing in 3.1."""
    assert DECLARED["get_partition_names"]["2.3"] == ((1, "MetaException"),)
    assert DECLARED["get_partition_names"]["3.1"] == ((1, "NoSuchObjectException"), (2, "MetaException"))
    assert DECLARED["get_partitions_by_names"]["4.x"][-1] == (3, "InvalidObjectException")
    assert DECLARED["get_table_objects_by_name"]["3.1"] == ()
    assert agreed_fields("get_partition_names", Layout.HIVE_2) == {"MetaException": 1}
    assert agreed_fields("get_partition_names", Layout.CURRENT) is None  # waggle's IDL is what 3.1+ reads
    assert agreed_fields("get_partitions_by_names", Layout.CURRENT) == {"MetaException": 1,
                                                                         "NoSuchObjectException": 2}
    assert agreed_fields("get_table", Layout.HIVE_2) is None


# -- encoding -----------------------------------------------------------------------------------------------------
#: hmsclient was generated from an IDL older than 2.3.10, which declares nothing for get_table_objects_by_name;
#: Spark's 2.3.10 classes do (the table's 2.3 column, read from the jar)
_HMSCLIENT_OLDER = {("get_table_objects_by_name", "2.3")}
CASES = [(m, r) for m in DECLARED for r in CLIENTS if r in DECLARED[m] and (m, r) not in _HMSCLIENT_OLDER]


@pytest.mark.parametrize(("method", "release"), CASES, ids=[f"{m}-{r}" for m, r in CASES])
def test_a_client_reads_waggles_error_as_its_release_declares_it(method: str, release: str) -> None:
    raw = finish.failure(Header(method, TMessageType.CALL, 3), METHOD_IO[method], DOWN, WIRE,
                         outcome=Outcome.MEMBER_DOWN, metastore="gone", layout=LAYOUT_OF[release]).raw
    assert raw is not None
    seen = client_sees(release, method, raw)
    # never "unknown result", never another class: a MetaException, or, where the layout's releases agree on no
    # field for it, an application error; both carry waggle's message
    assert isinstance(seen, (meta_exception(release), TApplicationException)), seen
    assert seen.message == DOWN
    agreed = agreed_fields(method, LAYOUT_OF[release])
    if (agreed if agreed is not None else {c: f for f, c in DECLARED[method]["4.x"]}).get("MetaException"):
        assert isinstance(seen, meta_exception(release)), seen
    else:  # get_table_objects_by_name: Hive 3.1 declares nothing, so no field reaches every 3.1+ client
        assert (method, release) in {("get_table_objects_by_name", "3.1"), ("get_table_objects_by_name", "4.x")}


def test_without_the_layout_a_hive_2_client_reads_unknown_result_and_a_newer_one_a_missing_table() -> None:
    """Why the layouts exist: waggle's IDL field 2 is nothing to Hive 2.3, and its field 1 is
    NoSuchObjectException to Hive 3.1+ (Trino then stops retrying)."""
    io = METHOD_IO["get_partition_names"]
    ours = finish.failure(Header("get_partition_names", TMessageType.CALL, 3), io, DOWN, WIRE,
                          outcome=Outcome.MEMBER_DOWN, metastore="gone").raw
    assert ours is not None
    seen = client_sees("2.3", "get_partition_names", ours)
    assert isinstance(seen, TApplicationException) and "unknown result" in seen.message
    hive_2 = finish.failure(Header("get_partition_names", TMessageType.CALL, 3), io, DOWN, WIRE,
                            outcome=Outcome.MEMBER_DOWN, metastore="gone", layout=Layout.HIVE_2).raw
    assert hive_2 is not None
    seen = client_sees("3.1", "get_partition_names", hive_2)
    assert type(seen).__name__ == "NoSuchObjectException"


def test_a_refusal_and_a_down_member_use_the_layout_the_session_learned() -> None:
    session = Session()
    session.release = learn(session.release, METHODS["get_table"], H.get_table_args(dbname="gone_db", tbl_name="t"))
    args = H.get_partition_names_args(db_name="gone_db", tbl_name="t", max_parts=-1)
    session.release = learn(session.release, METHODS["get_partition_names"], args)
    call = _call("get_partition_names", args, session)
    for answer in (finish.down(Refusal(Kind.DOWN, call, "gone", DOWN), WIRE),
                   finish.refusal(Refusal(Kind.REFUSE, call, "gone", "refused: read-only"), WIRE),
                   finish.refused(call, "refused: read-only", WIRE, "gone")):
        assert answer.raw is not None
        seen = client_sees("2.3", "get_partition_names", answer.raw)
        assert isinstance(seen, meta_exception("2.3")), seen
    fresh = _call("get_partition_names", args, Session(release=learn(FRESH, METHODS["get_partition_names"], args)))
    raw = finish.down(Refusal(Kind.DOWN, fresh, "gone", DOWN), WIRE).raw
    assert raw is not None
    assert isinstance(client_sees("3.1", "get_partition_names", raw), meta_exception("3.1"))
    assert isinstance(client_sees("4.x", "get_partition_names", raw), T.MetaException)


# -- the learner --------------------------------------------------------------------------------------------------
def _learned(calls: list[tuple[str, Any]]) -> list[Layout]:
    known, layouts = FRESH, []
    for method, args in calls:
        known = learn(known, METHODS.get(method), args)
        layouts.append(known.layout)
    return layouts


def test_spark_hive_2_client_is_hive_2_once_it_named_a_database() -> None:
    """Spark's built-in Hive 2.3.10 client (HiveMetaStoreClient 2.3 via Spark's HiveClientImpl): one connection;
    set_ugi, get_all_functions, get_database, get_table, then get_partition_names (SHOW PARTITIONS)."""
    layouts = _learned([
        ("set_ugi", H.set_ugi_args(user_name="spark", group_names=[])),
        ("get_all_functions", H.get_all_functions_args()),
        ("get_database", H.get_database_args(name="default")),
        ("get_table", H.get_table_args(dbname="gone_db", tbl_name="t")),
        ("get_partition_names", H.get_partition_names_args(db_name="gone_db", tbl_name="t", max_parts=-1)),
    ])
    assert layouts == [Layout.CURRENT, Layout.CURRENT, Layout.CURRENT, Layout.HIVE_2, Layout.HIVE_2]


def test_trinos_connection_per_operation_reads_the_newer_layout() -> None:
    """Trino's ThriftHiveMetastore opens a connection per operation (createMetastoreClient()): set_ugi, then
    get_partition_names as the first call naming a database."""
    assert _learned([
        ("set_ugi", H.set_ugi_args(user_name="trino", group_names=[])),
        ("get_partition_names", H.get_partition_names_args(db_name="gone_db", tbl_name="t", max_parts=-1)),
    ]) == [Layout.CURRENT, Layout.CURRENT]


def test_a_catalog_marks_a_hive_3_client_for_good() -> None:
    """Hive 3.0+ HiveMetaStoreClient: prependCatalogToDbName in old-style calls, catName in requests."""
    assert _learned([
        ("get_table_req", H.get_table_req_args(req=T.GetTableRequest(dbName="gone_db", tblName="t", catName="hive"))),
        ("get_partition_names", H.get_partition_names_args(db_name="gone_db", tbl_name="t", max_parts=-1)),
    ]) == [Layout.CURRENT, Layout.CURRENT]
    assert _learned([
        ("get_database", H.get_database_args(name="default")),
        ("get_partition_names", H.get_partition_names_args(db_name="@hive#gone_db", tbl_name="t", max_parts=-1)),
        ("get_partition_names", H.get_partition_names_args(db_name="gone_db", tbl_name="t", max_parts=-1)),
    ]) == [Layout.CURRENT, Layout.CURRENT, Layout.CURRENT]


def test_calls_that_name_nothing_teach_nothing() -> None:
    known = learn(FRESH, None, None)  # a method waggle's IDL does not have
    assert known is FRESH and known.unread is Layout.CURRENT
    known = learn(known, METHODS["get_all_databases"], H.get_all_databases_args())
    assert known is FRESH
    known = learn(known, METHODS["get_table"], H.get_table_args(dbname="db", tbl_name="t"))
    assert known.layout is Layout.CURRENT and known.unread is Layout.HIVE_2  # a shed call, arguments unread
    assert isinstance(known, ClientRelease) and learn(known, None, None).layout is Layout.HIVE_2


# -- through the driver (in-memory metastores, no Java) ------------------------------------------------------------
def test_the_driver_learns_each_call_before_it_answers(make: Any) -> None:
    """A member that cannot be reached: a Hive 2 client that fetched the table first reads get_partition_names'
    failure as a MetaException (hmsclient's classes); a connection whose first call it is (Trino's shape) reads it
    at waggle's field 2."""
    from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore as Hive2

    from tests.support.memory_metastore import MemoryMetastore

    primary = MemoryMetastore("primary").add_database("default")
    gone = MemoryMetastore("gone").add_database("db").add_table("db", "t")
    harness = make((primary, {"access-control-type": "READ_AND_WRITE_AND_CREATE"}),
                   [(gone, {"database-prefix": "gone_"})])
    gone.down = True
    hive_2 = harness.client()
    assert "gone" in hive_2.call("get_table", dbname="gone_db", tbl_name="t").o1.message
    args = H.get_partition_names_args(db_name="gone_db", tbl_name="t", max_parts=-1)
    result = hive_2.send("get_partition_names", args, Hive2.get_partition_names_result)
    assert result.o2 is not None and "metastore 'gone'" in result.o2.message, result
    trino = harness.client()
    result = trino.call("get_partition_names", db_name="gone_db", tbl_name="t", max_parts=-1)
    assert result.o1 is None and result.o2 is not None and "metastore 'gone'" in result.o2.message, result


# -- a Hive 2 metastore's own exceptions, for a newer client --------------------------------------------------------
def _hive_2_member(make: Any) -> Any:
    """A Hive 2 member (no catalogs) whose get_partition_names fails with a MetaException at field 1, as Hive
    2.3's HMSHandler.get_partition_names declares it (hmsclient's classes encode the reply)."""
    from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore as Hive2
    from hmsclient.genthrift.hive_metastore import ttypes as T2

    from tests.support.memory_metastore import MemoryMetastore

    primary = MemoryMetastore("primary").add_database("default")
    old = MemoryMetastore("old", missing={"get_partition_names_req"}).add_database("db").add_table("db", "t")
    old.extra["get_partition_names"] = (
        Hive2.get_partition_names_args,
        lambda success: Hive2.get_partition_names_result(o2=T2.MetaException("the JDO query failed")),
        lambda args: None)
    return make((primary, {"access-control-type": "READ_AND_WRITE_AND_CREATE"}),
                [(old, {"database-prefix": "old_"})])


def test_a_hive_2_members_meta_exception_stays_a_meta_exception_for_a_newer_client(make: Any) -> None:
    """Relayed as it is, Hive 2's field 1 would be a NoSuchObjectException to Trino or Hive 3.1+ (a missing table:
    no retry); waggle moves it to field 2, once it knows the member is Hive 2 (its catalogs, asked once)."""
    harness = _hive_2_member(make)
    result = harness.client().call("get_partition_names", db_name="old_db", tbl_name="t", max_parts=-1)
    assert result.o1 is None, result
    assert result.o2 is not None and result.o2.message == "the JDO query failed"
    # a Hive 2 client reads the member's own bytes, relayed
    from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore as Hive2

    hive_2 = harness.client()
    hive_2.ok("get_table", dbname="old_db", tbl_name="t")
    args = H.get_partition_names_args(db_name="old_db", tbl_name="t", max_parts=-1)
    result = hive_2.send("get_partition_names", args, Hive2.get_partition_names_result)
    assert result.o2 is not None and result.o2.message == "the JDO query failed"


def test_a_bridge_reads_a_hive_2_members_exception_as_the_member_declares_it(make: Any) -> None:
    """Hive 4's get_partition_names_req, bridged to get_partition_names on a Hive 2 member."""
    harness = _hive_2_member(make)
    result = harness.client().call("get_partition_names_req", req=T.PartitionsByExprRequest(
        dbName="old_db", tblName="t", expr=b""))
    raised = [getattr(result, a) for a in ("o1", "o2") if getattr(result, a) is not None]
    assert [type(r).__name__ for r in raised] == ["MetaException"], result
    assert raised[0].message.endswith("the JDO query failed")
