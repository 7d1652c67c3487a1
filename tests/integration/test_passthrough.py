"""A Hive 2 client gets the same objects and the same declared exceptions through waggle as direct."""

from __future__ import annotations

import re
import socket
import time

import pytest
from hmsclient.genthrift.hive_metastore import ttypes
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.Thrift import TApplicationException, TMessageType
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport

from tests.support.clients import hive2_client
from waggle.local.seed import ensure_database, ensure_partitioned_table, ensure_table

pytestmark = pytest.mark.integration


@pytest.fixture
def seeded(primary, unique_db):
    """A database with an unpartitioned and a partitioned table, written directly to the primary."""
    wh = primary.warehouse
    with hive2_client(primary.port) as c:
        ensure_database(c, unique_db, f"file://{wh}/{unique_db}.db")
        ensure_table(c, unique_db, "people", f"file://{wh}/{unique_db}.db/people", [("id", "int"), ("n", "string")],
                     rows=["1,a"])
        ensure_partitioned_table(c, unique_db, "events", f"file://{wh}/{unique_db}.db/events", partitions=25)
    return unique_db


def test_reads_return_identical_objects(primary, waggle, seeded):
    db = seeded
    with hive2_client(primary.port) as d, waggle.client() as w:
        # the primary's databases come first, unprefixed, then the federated members' (prefixed)
        merged = w.get_all_databases()
        assert merged[:len(d.get_all_databases())] == d.get_all_databases()
        assert all(n.startswith(("analytics_", "ops_")) for n in merged[len(d.get_all_databases()):])
        assert w.get_databases("t_*") == d.get_databases("t_*")
        assert w.get_database(db) == d.get_database(db)
        assert w.get_all_tables(db) == d.get_all_tables(db)
        assert w.get_table(db, "people") == d.get_table(db, "people")
        assert w.get_table_objects_by_name(db, ["people", "events"]) == d.get_table_objects_by_name(
            db, ["people", "events"])
        assert w.get_table_req(ttypes.GetTableRequest(dbName=db, tblName="events")) == d.get_table_req(
            ttypes.GetTableRequest(dbName=db, tblName="events"))
        assert w.get_partitions(db, "events", -1) == d.get_partitions(db, "events", -1)
        assert w.get_partition_names(db, "events", -1) == d.get_partition_names(db, "events", -1)
        assert w.get_partitions_by_filter(db, "events", 'part > "p000020"', -1) == d.get_partitions_by_filter(
            db, "events", 'part > "p000020"', -1)
        assert w.get_fields(db, "people") == d.get_fields(db, "people")
        primary_functions = d.get_all_functions().functions
        assert w.get_all_functions().functions[:len(primary_functions)] == primary_functions
        assert w.getVersion() == d.getVersion()


def _raises(call):
    with pytest.raises(Exception) as info:
        call()
    return info.value


@pytest.mark.parametrize("make_call", [
    pytest.param(lambda c, db: c.get_database(f"{db}_missing"), id="NoSuchObjectException-database"),
    pytest.param(lambda c, db: c.get_table(db, "missing"), id="NoSuchObjectException-table"),
    pytest.param(lambda c, db: c.create_database(ttypes.Database(name=db, locationUri="file:///tmp/x")),
                 id="AlreadyExistsException"),
    pytest.param(lambda c, db: c.drop_database(db, False, False), id="InvalidOperationException-not-empty"),
    pytest.param(lambda c, db: c.alter_table(db, "missing", ttypes.Table(tableName="x", dbName=db)),
                 id="InvalidOperationException-alter-missing"),
])
def test_declared_exceptions_are_the_same(primary, waggle, seeded, make_call):
    with hive2_client(primary.port) as d, waggle.client() as w:
        direct = _raises(lambda: make_call(d, seeded))
        proxied = _raises(lambda: make_call(w, seeded))
        assert type(proxied) is type(direct)
        assert isinstance(direct, (ttypes.NoSuchObjectException, ttypes.AlreadyExistsException,
                                   ttypes.InvalidOperationException))
        assert proxied.message == direct.message
        assert w.get_database(seeded).name == seeded  # the connection is still usable


def test_writes_go_through(primary, waggle, unique_db):
    wh = primary.warehouse
    with waggle.client() as w:
        ensure_database(w, unique_db, f"file://{wh}/{unique_db}.db")
        ensure_partitioned_table(w, unique_db, "logs", f"file://{wh}/{unique_db}.db/logs", partitions=3)
        w.drop_partition_by_name(unique_db, "logs", "part=p000001", False)
        w.drop_table(unique_db, "logs", False)
    with hive2_client(primary.port) as d:
        assert d.get_database(unique_db).name == unique_db
        assert d.get_all_tables(unique_db) == []


def raw_call(port: int, name: str, args: object, seqid: int = 1):
    """Send one call by hand and read the reply header, as a client of some future version would."""
    sock = TSocket("127.0.0.1", port)
    sock.setTimeout(10000)
    trans = TBufferedTransport(sock)
    trans.open()
    proto = TBinaryProtocolAccelerated(trans)
    return trans, proto


def _send_unknown(proto, trans, name: str, seqid: int) -> tuple[int, object]:
    proto.writeMessageBegin(name, TMessageType.CALL, seqid)
    proto.writeStructBegin("args")
    proto.writeFieldBegin("x", 11, 1)
    proto.writeString("@hive#default")
    proto.writeFieldEnd()
    proto.writeFieldStop()
    proto.writeStructEnd()
    proto.writeMessageEnd()
    trans.flush()
    _, mtype, rseqid = proto.readMessageBegin()
    assert rseqid == seqid
    if mtype == TMessageType.EXCEPTION:
        exc = TApplicationException()
        exc.read(proto)
        proto.readMessageEnd()
        return mtype, exc
    return mtype, None


def test_unknown_method_gets_application_exception_and_connection_stays_usable(waggle):
    trans, proto = raw_call(waggle.port, "no_such_method", None)
    try:
        mtype, exc = _send_unknown(proto, trans, "no_such_method", 41)
        assert mtype == TMessageType.EXCEPTION
        assert isinstance(exc, TApplicationException)
        assert exc.type == TApplicationException.UNKNOWN_METHOD
        assert "no_such_method" in str(exc.message)
        # same connection, a normal call
        from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore
        client = ThriftHiveMetastore.Client(proto)
        assert "default" in client.get_all_databases()
    finally:
        trans.close()


def test_method_the_upstream_lacks_gets_its_application_exception(waggle):
    """get_dataconnectors is in waggle's IDL (Hive 4) but not in a Hive 2.3 metastore, and there is no older call
    that could stand in for it: the metastore's answer is relayed."""
    from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as W

    sock = TSocket("127.0.0.1", waggle.port)
    trans = TBufferedTransport(sock)
    trans.open()
    try:
        client = W.Client(TBinaryProtocolAccelerated(trans))
        with pytest.raises(TApplicationException) as info:
            client.get_dataconnectors()
        assert info.value.type == TApplicationException.UNKNOWN_METHOD
        assert client.get_database("default").name == "default"
    finally:
        trans.close()


def test_set_ugi_identity_reaches_the_metastore(primary, waggle, seeded):
    """Each client's calls run upstream as that client's user (the metastore's audit log says so)."""
    with waggle.client() as alice, waggle.client() as bob:
        assert alice.set_ugi("alice_u", ["analysts"]) is not None
        assert bob.set_ugi("bob_u", ["engineers"]) is not None
        alice.get_table(seeded, "people")
        bob.get_table(seeded, "events")
    deadline = time.monotonic() + 10
    pattern_a = re.compile(rf"ugi=alice_u\s.*cmd=\S* ?get_table : db={seeded} tbl=people")
    pattern_b = re.compile(rf"ugi=bob_u\s.*cmd=\S* ?get_table : db={seeded} tbl=events")
    while time.monotonic() < deadline:
        log = primary.log_path.read_text(errors="replace")
        if pattern_a.search(log) and pattern_b.search(log):
            break
        time.sleep(0.2)
    assert pattern_a.search(log), "alice's call did not run as alice"
    assert pattern_b.search(log), "bob's call did not run as bob"


def test_upstream_connections_are_pooled_across_clients(primary, tmp_path):
    """40 short client connections, two identities: the metastore sees one connection per identity."""
    from tests.support.faults import SlowLink
    from tests.support.federation import federation_yaml
    from tests.support.proxy import WaggleProcess

    link = SlowLink(primary.port, delay=0.0)  # a plain relay that counts the connections it accepts
    proxy = WaggleProcess(tmp_path, federation_yaml(f"thrift://127.0.0.1:{link.port}")).start()
    try:
        for _ in range(20):
            with proxy.client() as w:
                w.get_all_databases()
        for _ in range(20):
            with proxy.client() as w:
                w.set_ugi("pool_user", [])
                w.get_all_databases()
        # one per identity, and the health check's before waggle served
        assert link.accepted == 3, f"{link.accepted} upstream connections for 40 sequential clients"
    finally:
        proxy.stop()
        link.close()


def test_client_sending_garbage_is_disconnected_and_others_are_served(waggle):
    with waggle.client() as good:
        bad = socket.create_connection(("127.0.0.1", waggle.port))
        bad.sendall(b"GET / HTTP/1.1\r\nHost: waggle\r\n\r\n" * 4)
        bad.settimeout(5)
        assert bad.recv(100) == b""  # closed by waggle
        bad.close()
        assert "default" in good.get_all_databases()
    assert "client.protocol_error" in waggle.log()


def test_one_structured_log_line_per_call_at_debug(waggle, seeded):

    with waggle.client() as w:
        w.set_ugi("log_user", [])
        w.get_table(seeded, "people")
        with pytest.raises(ttypes.NoSuchObjectException):
            w.get_table(seeded, "nope")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = waggle.events()
        calls = [e for e in waggle.events("call") if e.get("db") == seeded and e.get("user") == "log_user"]
        if len(calls) >= 2:
            break
        time.sleep(0.1)
    ok = next(e for e in calls if e["outcome"] == "ok")
    assert ok["method"] == "get_table" and ok["metastore"] == "primary" and ok["level"] == "debug"
    assert isinstance(ok["duration_ms"], float) and "conn" in ok and "peer" in ok
    assert any(e["outcome"] == "NoSuchObjectException" for e in calls)
    started = next(e for e in lines if e.get("event") == "server.listening")
    assert started["gevent_patched"] is True


def test_connections_beyond_the_limit_are_refused_with_a_clear_error(primary, tmp_path):
    from tests.support.federation import federation_yaml
    from tests.support.proxy import WaggleProcess
    from tests.support.waits import wait_for

    proxy = WaggleProcess(tmp_path, federation_yaml(primary.uri), "max-connections: 1\n").start()
    try:
        # the start-up probe's connection has been closed; wait until waggle has let go of it too
        wait_for(lambda: proxy.metric("waggle_client_connections") == 0, 10, "the probe connection released")
        with proxy.client() as first:
            assert "default" in first.get_all_databases()
            started = time.monotonic()
            with proxy.client() as second, pytest.raises(ttypes.MetaException) as refused:
                second.get_all_databases()
            assert time.monotonic() - started < 5, "the extra connection was queued instead of refused"
            assert "max-connections" in refused.value.message and "1 client connections" in refused.value.message
            assert "default" in first.get_all_databases()  # the one within the limit is untouched
        deadline = time.monotonic() + 5
        while True:  # the slot frees as soon as waggle sees the first connection close
            try:
                with proxy.client() as third:
                    assert "default" in third.get_all_databases()
                break
            except ttypes.MetaException:
                assert time.monotonic() < deadline, "the freed slot was not reused"
                time.sleep(0.1)
        assert 'waggle_shed_total{limit="connections"} 1.0' in proxy.http("/metrics")
    finally:
        proxy.stop()
