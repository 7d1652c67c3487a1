"""The cache as a connection uses it (waggle.cache.replies): what a call is about and what a write forgets, read from
the method table; and Replies.fetch over a fake metastore (a send() that counts), with a fake clock. No socket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gevent
import pytest
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.protocol.TCompactProtocol import TCompactProtocol
from thrift.Thrift import TMessageType
from thrift.transport.TTransport import TMemoryBuffer

from waggle.cache.events import Drop
from waggle.cache.replies import TRUE_FOR, Replies, scope_of, written
from waggle.cache.store import Scope
from waggle.config.loader import load
from waggle.config.model import CacheMode, MetastoreConfig
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore import ttypes as tt
from waggle.hms.headers import body_start, header
from waggle.hms.methods import METHODS
from waggle.hms.wire import Header
from waggle.upstream.client import Reply

MAX = 1 << 20
GET_TABLE = METHODS["get_table"]

SERVER = """\
configuration-properties:
  hive.metastore.kerberos.principal: waggle/h@EX.COM
  hive.metastore.kerberos.keytab.file: /k
"""
KERBEROS = """\
    impersonation-enabled: true
    configuration-properties:
      hive.metastore.sasl.enabled: true
      hive.metastore.kerberos.principal: hive/_HOST@EX.COM
"""


def _members(root: Path, lake: str = "", sea: str = "") -> dict[str, MetastoreConfig]:
    """``lake`` (cache: events) and ``sea`` (cache: ttl, 30 s), each with ``lake`` / ``sea`` settings added."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "server.yml").write_text(SERVER)
    (root / "federation.yml").write_text(
        "primary-meta-store:\n  name: main\n  remote-meta-store-uris: thrift://127.0.0.1:9\n"
        "federated-meta-stores:\n"
        "  - name: lake\n    remote-meta-store-uris: thrift://127.0.0.1:9\n    database-prefix: lake_\n"
        f"    cache: events\n{lake}"
        "  - name: sea\n    remote-meta-store-uris: thrift://127.0.0.1:9\n    database-prefix: sea_\n"
        f"    cache: ttl\n    cache-ttl: 30s\n{sea}")
    federation = load(str(root / "server.yml"), str(root / "federation.yml")).federation
    return {name: federation.member(name) for name in ("main", "lake", "sea")}


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def encode(name: str, mtype: int, seqid: int, obj: Any, compact: bool) -> bytes:
    buf = TMemoryBuffer()
    proto = (TCompactProtocol if compact else TBinaryProtocol)(buf)
    proto.writeMessageBegin(name, mtype, seqid)
    obj.write(proto)
    proto.writeMessageEnd()
    return buf.getvalue()


def get_table(db: str = "sales", table: str = "orders") -> Any:
    return T.get_table_args(dbname=db, tbl_name=table)


class Metastore:
    """A send() per call: counts the calls and answers each with ``result`` (a success unless told)."""

    def __init__(self, result: Any = None, first_field: int = 0, mtype: int = TMessageType.REPLY,
                 sleep: float = 0.0, during: Any = None) -> None:
        self.result = result if result is not None else T.get_table_result(
            success=tt.Table(dbName="sales", tableName="orders", owner="ann"))
        self.first_field = first_field
        self.mtype = mtype
        self.sleep = sleep
        self.during = during
        self.calls = 0

    def sender(self, seqid: int, compact: bool, name: str = "get_table") -> Any:
        def send() -> Reply:
            self.calls += 1
            if self.sleep:
                gevent.sleep(self.sleep)
            if self.during is not None:
                self.during()
            raw = encode(name, self.mtype, seqid, self.result, compact)
            return Reply(Header(name, self.mtype, seqid), raw, self.first_field, 0)
        return send


class Harness:
    def __init__(self, root: Path, lake: str = "", sea: str = "") -> None:
        self.members = _members(root, lake, sea)
        self.clock = Clock()
        self.replies = Replies(MAX, clock=self.clock)
        assert self.replies.configure(self.members.values(), MAX) == []
        self.metastore = Metastore()

    def read_through(self, member: str = "lake") -> None:
        self.replies.read_through(member, self.clock.now, ())

    def fetch(self, seqid: int, member: str = "lake", args: Any = None, user: str = "ann", *,
              client_compact: bool = False, upstream_compact: bool = False, metastore: Metastore | None = None
              ) -> Reply | None:
        args = args if args is not None else get_table()
        request = encode("get_table", TMessageType.CALL, seqid, args, client_compact)
        metastore = metastore or self.metastore
        return self.replies.fetch(member, GET_TABLE, args, request, seqid, client_compact=client_compact,
                                  upstream_compact=upstream_compact, user=user, wait=60.0,
                                  send=metastore.sender(seqid, upstream_compact))


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


# -- what a call is about ------------------------------------------------------------------------------------------
def test_a_table_read_is_about_its_table_in_plain_lower_case_names() -> None:
    assert scope_of(GET_TABLE, get_table("@hive#Sales", "Orders"), "lake") == Scope("lake", "sales", "orders")
    assert scope_of(GET_TABLE, get_table("SALES", "orders"), "lake") == Scope("lake", "sales", "orders")
    req = T.get_table_req_args(req=tt.GetTableRequest(dbName="Sales", tblName="ORDERS", catName="hive"))
    assert scope_of(METHODS["get_table_req"], req, "sea") == Scope("sea", "sales", "orders")
    parts = T.get_partitions_args(db_name="@hive#sales", tbl_name="orders", max_parts=-1)
    assert scope_of(METHODS["get_partitions"], parts, "lake") == Scope("lake", "sales", "orders")


def test_a_database_read_is_about_its_database() -> None:
    assert scope_of(METHODS["get_tables"], T.get_tables_args(db_name="@hive#SALES", pattern="*"), "lake") == \
        Scope("lake", "sales", None)
    assert scope_of(METHODS["get_database"], T.get_database_args(name="Sales"), "lake") == Scope("lake", "sales", None)
    req = T.get_database_req_args(request=tt.GetDatabaseRequest(name="@hive#Sales"))
    assert scope_of(METHODS["get_database_req"], req, "lake") == Scope("lake", "sales", None)
    objects = T.get_table_objects_by_name_args(dbname="Sales", tbl_names=["a", "b"])
    assert scope_of(METHODS["get_table_objects_by_name"], objects, "lake") == Scope("lake", "sales", None)


def test_a_read_that_does_not_name_what_it_is_about_has_no_scope() -> None:
    assert scope_of(GET_TABLE, T.get_table_args(dbname="sales"), "lake") is None
    assert scope_of(GET_TABLE, T.get_table_args(tbl_name="orders"), "lake") is None
    assert scope_of(GET_TABLE, get_table("@hive#", "orders"), "lake") is None
    assert scope_of(METHODS["get_tables"], T.get_tables_args(pattern="*"), "lake") is None


def test_a_write_forgets_each_table_it_names() -> None:
    drop = T.drop_table_args(dbname="@hive#Sales", name="Orders", deleteData=True)
    assert written(METHODS["drop_table"], drop) == (Drop("sales", "orders"),)
    add = T.add_partition_args(new_part=tt.Partition(dbName="SALES", tableName="orders", values=["1"]))
    assert written(METHODS["add_partition"], add) == (Drop("sales", "orders"),)


def test_a_rename_forgets_the_old_and_the_new_name() -> None:
    same = T.alter_table_args(dbname="sales", tbl_name="orders", new_tbl=tt.Table(dbName="sales", tableName="orders"))
    assert written(METHODS["alter_table"], same) == (Drop("sales", "orders"),)  # each once
    rename = T.alter_table_args(dbname="Sales", tbl_name="Orders",
                                new_tbl=tt.Table(dbName="Staging", tableName="Orders_Tmp"))
    assert written(METHODS["alter_table"], rename) == (Drop("sales", "orders"), Drop("staging", "orders_tmp"))


def test_a_hive_4_rename_forgets_the_new_name_too() -> None:
    """alter_table_req is how Hive 4 clients rename: the new name is the request's table (AlterTableRequest.table),
    and the new database's listings must be forgotten as with alter_table."""
    req = T.alter_table_req_args(req=tt.AlterTableRequest(
        dbName="sales", tableName="orders", table=tt.Table(dbName="staging", tableName="orders_tmp")))
    drops = written(METHODS["alter_table_req"], req)
    assert Drop("sales", "orders") in drops
    assert Drop("staging", "orders_tmp") in drops or Drop("staging") in drops


def test_a_write_naming_only_a_database_forgets_the_database() -> None:
    alter = T.alter_database_args(dbname="@hive#Sales", db=tt.Database(name="Sales"))
    assert written(METHODS["alter_database"], alter) == (Drop("sales"),)
    assert written(METHODS["drop_database"], T.drop_database_args(name="SALES")) == (Drop("sales", None),)
    create = T.create_table_req_args(request=tt.CreateTableRequest(table=tt.Table(dbName="Sales", tableName="t")))
    assert written(METHODS["create_table_req"], create) == (Drop("sales"),)


def test_reads_and_writes_that_name_nothing_forget_nothing() -> None:
    assert written(GET_TABLE, get_table()) == ()
    assert written(METHODS["drop_table"], None) == ()
    assert written(METHODS["open_txns"], T.open_txns_args(rqst=tt.OpenTxnRequest(num_txns=1, user="u",
                                                                                  hostname="h"))) == ()


# -- answering -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("client_compact, upstream_compact", [(False, False), (True, True), (True, False),
                                                               (False, True)])
def test_a_second_identical_call_is_answered_from_memory_with_its_own_seqid(
        h: Harness, client_compact: bool, upstream_compact: bool) -> None:
    h.read_through()
    first = h.fetch(7, client_compact=client_compact, upstream_compact=upstream_compact)
    assert first is not None and first.header.seqid == 7
    assert h.metastore.calls == 1
    second = h.fetch(300, client_compact=client_compact, upstream_compact=upstream_compact)
    assert h.metastore.calls == 1  # not sent
    assert second is not None
    assert second.header == Header("get_table", TMessageType.REPLY, 300)
    assert (second.first_field, second.streamed) == (0, 0)
    body = first.raw[body_start(first.raw, upstream_compact):]
    assert second.raw == header("get_table", TMessageType.REPLY, 300, upstream_compact) + body
    assert second.raw == encode("get_table", TMessageType.REPLY, 300, h.metastore.result, upstream_compact)
    counts = h.replies.store.count("lake")
    assert (counts.misses, counts.hits) == (1, 1)


def test_another_call_is_another_entry(h: Harness) -> None:
    h.read_through()
    h.fetch(1)
    h.fetch(2, args=get_table("sales", "items"))
    h.fetch(3, client_compact=True)  # the same call in another protocol
    assert h.metastore.calls == 3
    h.fetch(4, args=get_table("sales", "items"))
    h.fetch(5)
    assert h.metastore.calls == 3


def test_users_share_entries_unless_the_member_impersonates_them(tmp_path: Path) -> None:
    own = Harness(tmp_path / "own", lake=KERBEROS)
    own.read_through()
    own.fetch(1, user="ann")
    own.fetch(2, user="bob")
    assert own.metastore.calls == 2
    own.fetch(3, user="ann")
    own.fetch(4, user="bob")
    assert own.metastore.calls == 2

    shared = Harness(tmp_path / "shared", lake=KERBEROS + "    cache-shared-across-users: true\n")
    shared.read_through()
    shared.fetch(1, user="ann")
    shared.fetch(2, user="bob")
    assert shared.metastore.calls == 1

    plain = Harness(tmp_path / "plain")
    plain.read_through()
    plain.fetch(1, user="ann")
    plain.fetch(2, user="bob")
    assert plain.metastore.calls == 1


@pytest.mark.parametrize("first_field, mtype", [(2, TMessageType.REPLY), (1, TMessageType.REPLY),
                                                (-1, TMessageType.REPLY), (0, TMessageType.EXCEPTION)])
def test_an_error_reply_is_not_remembered(h: Harness, first_field: int, mtype: int) -> None:
    h.read_through()
    result = T.get_table_result(o2=tt.NoSuchObjectException(message="sales.orders"))
    metastore = Metastore(result, first_field=first_field, mtype=mtype)
    h.fetch(1, metastore=metastore)
    h.fetch(2, metastore=metastore)
    assert metastore.calls == 2
    assert len(h.replies.store) == 0


def test_an_events_member_is_answered_only_while_its_log_was_read_through_lately(h: Harness) -> None:
    h.fetch(1)  # the log was never read: nothing known true, nothing kept
    h.fetch(2)
    assert h.metastore.calls == 2 and len(h.replies.store) == 0
    assert not h.replies.true("lake")
    h.read_through()
    h.clock.now += TRUE_FOR / 2
    h.fetch(3)
    h.fetch(4)
    assert h.metastore.calls == 3
    h.clock.now += TRUE_FOR / 2  # exactly TRUE_FOR after the read began: still true
    h.fetch(5)
    assert h.metastore.calls == 3
    h.clock.now += 0.01
    assert not h.replies.true("lake")
    h.fetch(6)
    assert h.metastore.calls == 4
    h.read_through()  # a newer read: the entry is known true again
    h.fetch(7)
    assert h.metastore.calls == 4


def test_an_older_read_does_not_make_entries_true_for_longer(h: Harness) -> None:
    h.read_through()
    h.replies.read_through("lake", h.clock.now - 5, ())
    h.clock.now += TRUE_FOR + 0.01
    assert not h.replies.true("lake")


def test_what_the_log_says_changed_is_forgotten(h: Harness) -> None:
    h.read_through()
    h.fetch(1)
    h.replies.read_through("lake", h.clock.now, [Drop("sales", "items")])  # another table
    h.fetch(2)
    assert h.metastore.calls == 1
    h.replies.read_through("lake", h.clock.now, [Drop("sales", "orders")])
    h.fetch(3)
    assert h.metastore.calls == 2
    assert h.replies.store.count("lake").dropped == {"event": 1}


def test_an_unreadable_log_forgets_and_stops_answering(h: Harness) -> None:
    h.read_through()
    h.fetch(1)
    h.replies.unreadable("lake", "gap")
    assert not h.replies.true("lake")
    assert len(h.replies.store) == 0
    assert h.replies.store.count("lake").dropped == {"gap": 1}
    h.fetch(2)
    assert h.metastore.calls == 2
    h.read_through()
    h.fetch(3)  # true again, but the entry went: asked again
    assert h.metastore.calls == 3
    h.fetch(4)
    assert h.metastore.calls == 3


def test_a_ttl_member_is_answered_until_its_ttl_runs_out(h: Harness) -> None:
    assert h.replies.mode("sea") is CacheMode.TTL and h.replies.true("sea")  # no log to read
    h.fetch(1, member="sea")
    h.clock.now += 29.9
    h.fetch(2, member="sea")
    assert h.metastore.calls == 1
    h.clock.now += 0.1  # 30 s after it was fetched
    h.fetch(3, member="sea")
    assert h.metastore.calls == 2
    h.fetch(4, member="sea")
    assert h.metastore.calls == 2


def test_a_member_without_cache_and_an_uncached_method_are_always_sent(h: Harness) -> None:
    h.read_through("main")
    h.fetch(1, member="main")
    h.fetch(2, member="main")
    assert h.metastore.calls == 2
    h.read_through()
    spec = METHODS["get_table_meta"]
    assert spec.cached is None
    args = T.get_table_meta_args(db_patterns="sales", tbl_patterns="*", tbl_types=[])
    for seqid in (1, 2):
        request = encode("get_table_meta", TMessageType.CALL, seqid, args, False)
        h.replies.fetch("lake", spec, args, request, seqid, client_compact=False, upstream_compact=False, user="ann",
                        wait=1.0, send=h.metastore.sender(seqid, False, "get_table_meta"))
    assert h.metastore.calls == 4
    assert len(h.replies.store) == 0


def test_identical_calls_in_flight_together_are_sent_once(h: Harness) -> None:
    h.read_through()
    metastore = Metastore(sleep=0.02)
    calls = [gevent.spawn(h.fetch, seqid, metastore=metastore) for seqid in (11, 12, 13)]
    # no deadline of the test's own (nor a short wait for the flight, see fetch): a worker process that stalls for
    # seconds (a loaded machine, a long collection) made both expire together, the test's first, and a call that
    # coalesced looked unanswered; a hang is the test run's timeout to catch
    gevent.joinall(calls, raise_error=True)
    assert metastore.calls == 1
    replies = [c.value for c in calls]
    assert [r.header.seqid for r in replies] == [11, 12, 13]
    assert [r.raw for r in replies] == [encode("get_table", TMessageType.REPLY, s, metastore.result, False)
                                        for s in (11, 12, 13)]
    assert not h.replies._flights


def test_a_waiter_whose_flight_failed_sends_its_own_call(h: Harness) -> None:
    h.read_through()
    failing = Metastore(T.get_table_result(o2=tt.NoSuchObjectException(message="x")), first_field=2, sleep=0.02)
    calls = [gevent.spawn(h.fetch, seqid, metastore=failing) for seqid in (1, 2)]
    gevent.joinall(calls, raise_error=True)  # no timeout: see test_identical_calls_in_flight_together_are_sent_once
    assert failing.calls == 2


def test_a_write_while_a_reply_is_on_its_way_keeps_it_from_being_stored(h: Harness) -> None:
    h.read_through()
    rename = T.alter_table_args(dbname="sales", tbl_name="orders", new_tbl=tt.Table(dbName="sales", tableName="o2"))

    def write() -> None:
        assert h.replies.wrote("lake", METHODS["alter_table"], rename) == (Drop("sales", "orders"),
                                                                           Drop("sales", "o2"))

    racing = Metastore(during=write)
    reply = h.fetch(1, metastore=racing)
    assert reply is not None and reply.header.seqid == 1  # answered all the same
    assert len(h.replies.store) == 0
    h.fetch(2, metastore=racing)
    assert racing.calls == 2


def test_a_write_elsewhere_does_not_keep_a_reply_from_being_stored(h: Harness) -> None:
    h.read_through()
    other = T.drop_table_args(dbname="web", name="clicks")
    racing = Metastore(during=lambda: h.replies.wrote("lake", METHODS["drop_table"], other))
    h.fetch(1, metastore=racing)
    h.fetch(2, metastore=racing)
    assert racing.calls == 1


def test_a_write_forgets_what_it_names_in_its_member_only(h: Harness) -> None:
    h.read_through()
    h.fetch(1)
    h.fetch(2, member="sea")
    drop = T.drop_table_args(dbname="sales", name="orders")
    assert h.replies.wrote("main", METHODS["drop_table"], drop) == ()  # no cache there
    assert h.replies.wrote("sea", METHODS["drop_table"], drop) == (Drop("sales", "orders"),)
    h.fetch(3)
    assert h.metastore.calls == 2  # lake's entry stays
    h.fetch(4, member="sea")
    assert h.metastore.calls == 3
    assert h.replies.store.count("sea").dropped == {"write": 1}


def test_a_reload_forgets_the_members_whose_cache_settings_changed(h: Harness, tmp_path: Path) -> None:
    h.read_through()
    h.fetch(1)
    h.fetch(2, member="sea")
    members = _members(tmp_path / "reload", sea="    cache-shared-across-users: true\n")
    assert h.replies.configure(members.values(), MAX) == ["sea"]
    assert h.replies.true("lake")
    h.fetch(3)
    h.fetch(4, member="sea")
    assert h.metastore.calls == 3
    assert h.replies.store.count("sea").dropped == {"reload": 1}
    gone = {k: v for k, v in members.items() if k != "lake"}
    assert h.replies.configure(gone.values(), MAX) == ["lake"]
    assert not h.replies.true("lake") and h.replies.mode("lake") is CacheMode.OFF
