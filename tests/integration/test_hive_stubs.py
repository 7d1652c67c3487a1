"""The Hive 3.1 / Hive 4 stub metastores (tests/support/hive_stubs.py) over a real Hive 2.3 metastore."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TMemoryBuffer

from tests.support.clients import hive2_client
from tests.support.hive_stubs import Hive4StubMetastore, Hive31StubMetastore, HiveStubMetastore, RecordingTransport
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.hms.gen.hive_metastore.ttypes import (
    GetCatalogRequest,
    GetDatabaseRequest,
    GetTableRequest,
    NoSuchObjectException,
)
from waggle.local.seed import ensure_database, ensure_table

pytestmark = pytest.mark.integration


@contextmanager
def stub_client(port: int) -> Iterator[tuple[Any, RecordingTransport]]:
    """Our generated client, unframed binary; the transport also records every reply byte read."""
    sock = TSocket("127.0.0.1", port)
    sock.setTimeout(30_000)
    trans = TBufferedTransport(sock)
    trans.open()
    recorder = RecordingTransport(trans)
    try:
        yield ThriftHiveMetastore.Client(TBinaryProtocol(recorder)), recorder
    finally:
        trans.close()


@pytest.fixture(scope="module")
def hive4(primary: Any) -> Iterator[HiveStubMetastore]:
    with Hive4StubMetastore("127.0.0.1", primary.port) as stub:
        yield stub


@pytest.fixture(scope="module")
def hive31(primary: Any) -> Iterator[HiveStubMetastore]:
    with Hive31StubMetastore("127.0.0.1", primary.port) as stub:
        yield stub


@pytest.fixture
def table(primary: Any, unique_db: str) -> tuple[str, str]:
    wh = primary.warehouse
    with hive2_client(primary.port) as c:
        ensure_database(c, unique_db, f"file://{wh}/{unique_db}.db")
        ensure_table(c, unique_db, "people", f"file://{wh}/{unique_db}.db/people", [("id", "int")])
    return unique_db, "people"


def test_hive4_refuses_removed_methods_and_keeps_the_connection(hive4: HiveStubMetastore, table: tuple[str, str]):
    db, tbl = table
    hive4.clear()
    with stub_client(hive4.port) as (c, _):
        for call in (lambda: c.get_table(db, tbl), lambda: c.get_table_objects_by_name(db, [tbl])):
            with pytest.raises(TApplicationException) as err:
                call()
            assert err.value.type == TApplicationException.UNKNOWN_METHOD
        assert err.value.message == "Invalid method name: 'get_table_objects_by_name'"
        assert "default" in c.get_all_databases()  # same connection still in step
        got = c.get_table_req(GetTableRequest(dbName=db, tblName=tbl, catName="hive")).table
        assert (got.dbName, got.tableName) == (db, tbl)
        assert c.getVersion() == "4.0.1"
    assert hive4.refusals("get_table") == 1 and hive4.refusals("get_table_objects_by_name") == 1
    [refused] = hive4.received("get_table")
    assert refused.args is None and db.encode() in refused.raw
    assert hive4.received("get_table_req")[0].args.req.tblName == tbl


def test_hive4_catalogs(hive4: HiveStubMetastore, primary: Any):
    hive4.clear()
    with stub_client(hive4.port) as (c, _):
        assert c.get_catalogs().names == ["hive"]
        cat = c.get_catalog(GetCatalogRequest(name="hive")).catalog
        assert cat.name == "hive" and cat.locationUri
        with pytest.raises(NoSuchObjectException):
            c.get_catalog(GetCatalogRequest(name="spark"))
        assert c.get_database("@hive#default").name == "default"
        assert "default" in c.get_databases("@hive#")
        assert c.get_databases("@hive#def*") == ["default"]
        with pytest.raises(NoSuchObjectException):
            c.get_database("@spark#default")  # other catalogs stay unknown
    [call] = [x for x in hive4.received("get_database") if x.args.name == "default"]
    assert b"@hive#default" in call.raw
    assert not any(c.refused for c in hive4.calls)


def test_recorded_raw_request_is_the_clients_bytes(hive4: HiveStubMetastore):
    hive4.clear()
    with stub_client(hive4.port) as (c, _):
        c.get_all_databases()
    expected = TMemoryBuffer()
    proto = TBinaryProtocol(expected)
    proto.writeMessageBegin("get_all_databases", TMessageType.CALL, 0)
    ThriftHiveMetastore.get_all_databases_args().write(proto)
    proto.writeMessageEnd()
    assert [x.raw for x in hive4.received("get_all_databases")] == [expected.getvalue()]


def test_extra_reply_field_is_on_the_wire_and_skipped_by_the_client(primary: Any):
    with Hive4StubMetastore("127.0.0.1", primary.port, extra_reply_field={"get_database": (77, "futuristic")}) as stub:
        with stub_client(stub.port) as (c, recorder):
            recorder.take()
            db = c.get_database("default")
            reply = recorder.take()
            assert c.get_all_databases()  # the stream stays in step after the unknown field
        with stub_client(primary.port) as (direct, _):
            assert db == direct.get_database("default")
    assert b"\x0b\x00\x4d\x00\x00\x00\x0afuturistic\x00\x00" in reply


def test_hive31_refuses_newer_methods_and_answers_truncate(hive31: HiveStubMetastore, table: tuple[str, str]):
    db, tbl = table
    hive31.clear()
    with stub_client(hive31.port) as (c, _):
        with pytest.raises(TApplicationException) as err:
            c.get_database_req(GetDatabaseRequest(name="default"))
        assert err.value.type == TApplicationException.UNKNOWN_METHOD
        assert err.value.message == "Invalid method name: 'get_database_req'"
        assert c.get_table(f"@hive#{db}", tbl).tableName == tbl  # Hive 3.1 still has get_table
        c.truncate_table(f"@hive#{db}", tbl, None)
        assert c.getVersion() == "3.1.3"
    assert hive31.refusals("get_database_req") == 1
    assert "get_table" not in hive31.refused and "truncate_table" not in hive31.refused
    [trunc] = hive31.received("truncate_table")
    assert (trunc.args.dbName, trunc.args.tableName, trunc.refused) == (db, tbl, False)
