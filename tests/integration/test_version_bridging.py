"""Version bridging beyond the matrix: learning once per pool, the hive-version hint, methods and fields that
waggle's IDL does not know, and Spark's built-in Hive 2.3 client over a Hive 4 metastore (a stub)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport

from tests.support.clients import hive2_client, release_client
from tests.support.compat import CompatFederation
from tests.support.hive_stubs import RecordingTransport
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as W

HERE = Path(__file__).resolve().parent


def test_what_a_metastore_lacks_is_learned_once_per_pool(compat: CompatFederation) -> None:
    stub4, stub31 = compat.stubs["4.x"], compat.stubs["3.1"]
    with release_client("2.3", compat.waggle.port) as (c, _):
        for _ in range(5):
            assert c.get_table("v4_compat4", "plain").tableName == "plain"
    with release_client("3.1", compat.waggle.port) as (c, _):
        for _ in range(5):
            assert c.get_database("@hive#v31_compat31").name == "v31_compat31"
    assert stub4.refusals("get_table") == 1  # the first call of the session; every later one went to the bridge
    assert len(stub31.received("get_catalogs")) == 1  # asked once whether it understands catalogs
    learned = compat.waggle.events("compat.learned")
    assert [e for e in learned if e.get("member") == "hive4" and e.get("missing") == "get_table"]


def test_hive_version_hint_bridges_from_the_first_call(compat: CompatFederation) -> None:
    with release_client("2.3", compat.waggle.port) as (c, _):
        for _ in range(3):
            assert c.get_table("v4h_compat4", "plain").dbName == "v4h_compat4"
        tables = c.get_table_objects_by_name("v4h_compat4", ["plain", "parts"])
        assert sorted(t.tableName for t in tables) == ["parts", "plain"]
    assert compat.hinted.refusals("get_table") == 0
    assert compat.hinted.refusals("get_table_objects_by_name") == 0
    assert compat.hinted.received("get_table_req") and compat.hinted.received("get_table_objects_by_name_req")


def test_get_database_req_for_primary_and_federated_databases(waggle: Any) -> None:
    """The session federation: a real Hive 2.3 primary and a real Hive 2.3 member behind analytics_."""
    with release_client("4.x", waggle.port) as (c, T):
        assert c.get_database_req(T.GetDatabaseRequest(name="default", catalogName="hive")).name == "default"
        db = c.get_database_req(T.GetDatabaseRequest(name="analytics_sales", catalogName="hive"))
        assert (db.name, db.catalogName) == ("analytics_sales", "hive")
        with pytest.raises(T.NoSuchObjectException):
            c.get_database_req(T.GetDatabaseRequest(name="analytics_secret"))  # hidden by mapped-databases
        parts = c.get_partitions_req(T.PartitionsRequest(dbName="analytics_sales", tblName="orders"))
        assert {p.dbName for p in parts.partitions} <= {"analytics_sales"}


def test_other_catalogs_do_not_exist_in_a_hive2_metastore(compat: CompatFederation) -> None:
    with release_client("4.x", compat.waggle.port) as (c, T):
        with pytest.raises(T.NoSuchObjectException) as info:
            c.get_database_req(T.GetDatabaseRequest(name="compat23", catalogName="spark"))
        assert "catalog 'spark'" in info.value.message
        with pytest.raises(T.NoSuchObjectException):
            c.get_table_req(T.GetTableRequest(dbName="compat23", tblName="plain", catName="spark"))
        with pytest.raises(T.NoSuchObjectException):
            c.get_database("@spark#compat23")
        assert c.get_database("@hive#compat23").catalogName == "hive"


# -- methods and fields waggle's IDL does not know --------------------------------------------------------------
def _raw_call(port: int, name: str, fields: list[tuple[int, str]], seqid: int = 7) -> tuple[Any, Any, bytes]:
    """Send a call of any name whose arguments are string fields; return (message type, answer, raw request)."""
    sock = TSocket("127.0.0.1", port)
    sock.setTimeout(30000)
    trans = TBufferedTransport(sock)
    trans.open()
    try:
        from thrift.transport.TTransport import TMemoryBuffer

        buf = TMemoryBuffer()
        proto = TBinaryProtocol(buf)
        proto.writeMessageBegin(name, TMessageType.CALL, seqid)
        proto.writeStructBegin(f"{name}_args")
        for fid, value in fields:
            proto.writeFieldBegin("f", TType.STRING, fid)
            proto.writeString(value)
            proto.writeFieldEnd()
        proto.writeFieldStop()
        proto.writeStructEnd()
        proto.writeMessageEnd()
        raw = buf.getvalue()
        trans.write(raw)
        trans.flush()
        iprot = TBinaryProtocol(trans)
        _, mtype, got_seqid = iprot.readMessageBegin()
        assert got_seqid == seqid
        if mtype == TMessageType.EXCEPTION:
            answer: Any = TApplicationException()
            answer.read(iprot)
        else:
            answer = W.get_database_result()
            answer.read(iprot)
        iprot.readMessageEnd()
        # the same connection still works
        client = W.Client(TBinaryProtocol(trans))
        assert client.get_database("default").name == "default"
        return mtype, answer, raw
    finally:
        trans.close()


def test_unknown_method_without_routed_names_reaches_the_primary_unchanged(hive4_primary: Any) -> None:
    proc, stub = hive4_primary
    mtype, answer, raw = _raw_call(proc.port, "frobnicate_things", [(1, "default"), (2, "x")])
    assert mtype == TMessageType.EXCEPTION and answer.type == TApplicationException.UNKNOWN_METHOD
    assert answer.message == "Invalid method name: 'frobnicate_things'"  # the primary's own words
    assert [c.raw for c in stub.received("frobnicate_things")] == [raw]  # byte for byte


def test_unknown_method_naming_a_federated_database_is_refused(hive4_primary: Any) -> None:
    proc, stub = hive4_primary
    for name, fields in (("frobnicate_db", [(1, "an_sales")]), ("frobnicate_qualified", [(1, "default"),
                                                                                          (2, "@hive#an_sales")])):
        mtype, answer, _ = _raw_call(proc.port, name, fields)
        assert mtype == TMessageType.EXCEPTION and answer.type == TApplicationException.UNKNOWN_METHOD
        assert name in answer.message and "an_sales" in answer.message and "analytics" in answer.message
        assert stub.received(name) == []
    # a later argument that merely looks like a federated name does not make the call federated
    mtype, answer, _ = _raw_call(proc.port, "frobnicate_table", [(1, "default"), (2, "an_events")])
    assert answer.message == "Invalid method name: 'frobnicate_table'" and stub.received("frobnicate_table")


def test_fields_waggle_does_not_know_pass_through(hive4_primary: Any) -> None:
    proc, stub = hive4_primary
    # a newer client: get_database with an argument field 42 that no IDL of ours has
    mtype, answer, raw = _raw_call(proc.port, "get_database", [(1, "default"), (42, "from-a-newer-client")])
    assert mtype == TMessageType.REPLY and answer.success.name == "default"
    assert raw in [c.raw for c in stub.received("get_database")]  # byte for byte, field 42 included
    # a newer metastore: field 77 inside the Database it returns
    stub.extra_reply_field = {"get_database": (77, "from-a-newer-metastore")}
    try:
        buffered = TBufferedTransport(TSocket("127.0.0.1", proc.port))
        buffered.open()
        recorder = RecordingTransport(buffered)
        try:
            client = W.Client(TBinaryProtocol(recorder))
            recorder.take()
            assert client.get_database("default").name == "default"
            assert b"from-a-newer-metastore" in recorder.take()
        finally:
            recorder.close()
    finally:
        stub.extra_reply_field = {}


# -- Spark over a Hive 4 metastore --------------------------------------------------------------------------------
def test_spark_builtin_client_over_a_hive4_metastore(hive4_primary: Any, tmp_path: Path) -> None:
    """Spark's Hive 2.3.10 client calls get_table, which Hive 4.0.1 removed: waggle answers it with get_table_req."""
    proc, stub = hive4_primary
    db = f"h4_{uuid.uuid4().hex[:8]}"
    run = subprocess.run(
        [sys.executable, str(HERE / "spark_sql_suite.py"), f"thrift://127.0.0.1:{proc.port}", db,
         str(tmp_path / "wh")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(next(line for line in run.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["select"] == [["1", "a"], ["2", "b"], ["3", "c"]]
    assert result["show_partitions"] == [["day=2024-01-01"], ["day=2024-01-02"]]
    assert result["select_partitioned"] == [["hello", "2024-01-02"], ["world", "2024-01-02"]]
    assert result["after_drop_database"] == ["default"]
    assert stub.refusals("get_table") == 1  # learned on Spark's first lookup
    bridged = [e for e in proc.events("call")
               if e.get("method") == "get_table" and e.get("bridge") == "get_table_req" and e.get("outcome") == "ok"]
    assert len(bridged) >= 5, "Spark's get_table calls were not answered through get_table_req"
    spark_get_tables = [c for c in stub.received("get_table_req") if c.args.req.dbName == db]
    assert spark_get_tables, "Spark's table lookups did not reach the Hive 4 metastore"
    with hive2_client(proc.port) as c:
        assert db not in c.get_all_databases()
