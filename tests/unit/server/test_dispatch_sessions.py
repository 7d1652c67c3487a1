"""Dispatch without Java: what a client connection carries across calls (lock ids, its set_ugi identity) and
what it is refused when waggle is overloaded."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import gevent
from thrift.Thrift import TApplicationException

from tests.support.memory_metastore import Harness, MemoryMetastore, elapsed, encode_call, failure
from tests.support.waits import wait_until
from waggle.call import lock_ids
from waggle.common import metrics
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.hms.gen.hive_metastore.ttypes import (
    CheckLockRequest,
    HeartbeatRequest,
    LockComponent,
    LockLevel,
    LockRequest,
    LockState,
    LockType,
    MetaException,
    NoSuchLockException,
    UnlockRequest,
)

QUEUE_WAIT = 0.1  # seconds: the harness's limits.queue-wait-ms
#: Hive 2.3's RetryingMetaStoreClient.invoke retries a MetaException whose message matches this (its default of
#: hive.metastore.client... recoverable pattern; 3.1 and 4 add IO)
HIVE_RECOVERABLE = r"(?s).*(JDO[a-zA-Z]*|TProtocol|TTransport)Exception.*"



def federation(make: Callable[..., Harness], fed_settings: dict[str, Any] | None = None,
               server: dict[str, Any] | None = None) -> tuple[Harness, MemoryMetastore, MemoryMetastore]:
    primary = MemoryMetastore("primary", lock_ids_from=1).add_database("default")
    fed = MemoryMetastore("fed", lock_ids_from=1000).add_database("sales")
    harness = make((primary, {"access-control-type": "READ_AND_WRITE_AND_CREATE"}),
                   [(fed, {"database-prefix": "fed_", **(fed_settings or {})})], server)
    return harness, primary, fed


def lock_request(db: str, lock_type: int = LockType.EXCLUSIVE) -> LockRequest:
    return LockRequest(component=[LockComponent(type=lock_type, level=LockLevel.DB, dbname=db)], user="u",
                       hostname="h")


WRITABLE_FED = {"access-control-type": "READ_AND_WRITE_ON_DATABASE_WHITELIST",
                "writable-database-white-list": ["sales"]}


# -- lock ids that name their member -----------------------------------------------------------------------------
def shown(own: int) -> int:
    """The id a client is shown for member ``fed``'s lock id ``own`` (waggle.call.lock_ids)."""
    out = lock_ids.encode(lock_ids.assign(["fed"]).of["fed"], own)
    assert out is not None
    return out


def test_a_lock_granted_by_a_member_is_checked_heartbeated_and_released_there(make):
    h, primary, fed = federation(make, WRITABLE_FED)
    client = h.client()
    granted = client.ok("lock", rqst=lock_request("fed_sales"))
    assert (granted.lockid, granted.state) == (shown(1000), LockState.ACQUIRED)
    assert fed.received("lock")[0].args[0].component[0].dbname == "sales"
    assert client.ok("check_lock", rqst=CheckLockRequest(lockid=shown(1000))).lockid == shown(1000)
    client.ok("heartbeat", ids=HeartbeatRequest(lockid=shown(1000)))
    client.ok("unlock", rqst=UnlockRequest(lockid=shown(1000)))
    assert fed.methods() == ["lock", "check_lock", "heartbeat", "unlock"] and fed.locks == {}
    assert [c.args[0].lockid for c in fed.calls[1:]] == [1000, 1000, 1000]  # the member's own id
    assert primary.calls == []
    # released: the id still names the member, which no longer has the lock
    assert isinstance(failure(client.call("check_lock", rqst=CheckLockRequest(lockid=shown(1000)))),
                      NoSuchLockException)
    assert fed.methods()[-1] == "check_lock" and primary.calls == []


def test_a_lock_id_no_member_granted_goes_to_the_primary(make):
    h, primary, fed = federation(make, WRITABLE_FED)
    client = h.client()
    assert isinstance(failure(client.call("check_lock", rqst=CheckLockRequest(lockid=4242))), NoSuchLockException)
    assert client.ok("lock", rqst=lock_request("default")).lockid == 1  # the primary's ids are shown as they are
    assert client.ok("check_lock", rqst=CheckLockRequest(lockid=1)).lockid == 1
    assert primary.methods() == ["check_lock", "lock", "check_lock"] and fed.calls == []


def test_a_members_lock_is_found_from_any_client_connection(make):
    h, primary, fed = federation(make, WRITABLE_FED)
    taker, other = h.client(), h.client()
    assert taker.ok("lock", rqst=lock_request("fed_sales")).lockid == shown(1000)
    assert other.ok("check_lock", rqst=CheckLockRequest(lockid=shown(1000))).state == LockState.ACQUIRED
    other.ok("unlock", rqst=UnlockRequest(lockid=shown(1000)))
    assert primary.calls == [] and fed.methods() == ["lock", "check_lock", "unlock"] and fed.locks == {}


def test_a_lock_id_whose_slot_names_no_member_is_refused_naming_it(make):
    h, primary, fed = federation(make, WRITABLE_FED)
    unknown = lock_ids.encode(lock_ids.assign(["fed"]).of["fed"] % lock_ids.MAX_SLOT + 1, 1000)
    error = failure(h.client().call("check_lock", rqst=CheckLockRequest(lockid=unknown)))
    assert f"lock id {unknown} names metastore slot" in str(getattr(error, "message", error))
    assert primary.calls == [] and fed.calls == []


def test_a_read_only_member_grants_shared_read_locks_and_exclusive_ones_are_refused(make):
    h, primary, fed = federation(make)  # fed is READ_ONLY
    client = h.client()
    assert client.ok("lock", rqst=lock_request("fed_sales", LockType.SHARED_READ)).lockid == shown(1000)
    # lock declares no MetaException, and Iceberg's Java client retries any error from it for minutes: the
    # refusal is a lock not acquired, with the reason, and the connection goes on
    refusal = client.ok("lock", rqst=lock_request("fed_sales", LockType.EXCLUSIVE))
    assert (refusal.lockid, refusal.state) == (0, LockState.NOT_ACQUIRED)
    assert refusal.errorMessage == ("database 'fed_sales' in metastore 'fed' is read-only (access-control-type "
                                    "READ_ONLY); refused a lock of type EXCLUSIVE")
    assert client.ok("lock", rqst=lock_request("fed_sales", LockType.SHARED_READ)).lockid == shown(1001)
    assert fed.methods() == ["lock", "lock"] and primary.calls == []


# -- set_ugi ---------------------------------------------------------------------------------------------------
def test_set_ugi_is_answered_by_the_primary_and_later_calls_run_as_that_user_everywhere(make):
    h, primary, fed = federation(make)
    client = h.client()
    assert client.ok("set_ugi", user_name="alice", group_names=["g"]) == ["g", "groups-of-primary"]
    assert [c.args for c in primary.received("set_ugi")] == [("alice", ["g"])]
    client.ok("get_database", name="fed_sales")
    client.ok("get_database", name="default")
    client.ok("get_all_databases")
    for store in (primary, fed):
        assert {c.user for c in store.calls if c.method != "set_ugi"} == {"alice"}, store.name
    assert [c.args for c in fed.received("set_ugi")] == [("alice", ["g"])]
    # the primary's connection opened for set_ugi is the one its later calls use (the first one was the health
    # check's, before waggle served)
    assert primary.status_checks == 1
    assert {c.conn for c in primary.calls} == {2} and primary.connections == 2


def test_two_users_never_share_an_upstream_connection(make):
    h, _primary, fed = federation(make)
    alice, bob, anonymous = h.client(), h.client(), h.client()
    alice.ok("set_ugi", user_name="alice", group_names=[])
    bob.ok("set_ugi", user_name="bob", group_names=[])
    for _ in range(2):
        for client in (alice, bob, anonymous):
            client.ok("get_database", name="fed_sales")
    calls = fed.received("get_database")
    assert [c.user for c in calls] == ["alice", "bob", None] * 2
    connections = {user: {c.conn for c in calls if c.user == user} for user in ("alice", "bob", None)}
    assert all(len(conns) == 1 for conns in connections.values())  # each user's connection is reused
    assert len(set.union(*connections.values())) == 3  # and never shared


def test_set_ugi_replies_are_remembered_per_identity(make):
    h, primary, _ = federation(make)
    first, second = h.client(), h.client()
    assert first.ok("set_ugi", user_name="alice", group_names=["g"]) == ["g", "groups-of-primary"]
    assert second.ok("set_ugi", user_name="alice", group_names=["g"]) == ["g", "groups-of-primary"]
    assert len(primary.received("set_ugi")) == 1


# -- shedding --------------------------------------------------------------------------------------------------
def test_calls_over_max_calls_per_metastore_are_shed_after_the_queue_wait(make):
    h, _primary, fed = federation(make, server={"limits.max-calls-per-metastore": 1})
    fed.delay["get_database"] = 0.5
    first, second, third = h.client(), h.client(), h.client()
    slow = gevent.spawn(first.ok, "get_database", name="fed_sales")
    wait_until(lambda: fed.received("get_database"))
    with elapsed() as took:
        shed = failure(second.call("get_database", name="fed_sales"))
    assert isinstance(shed, MetaException)
    assert shed.message == ("metastore 'fed' is busy: 1 calls to it are in flight through waggle "
                            "(limits.max-calls-per-metastore); try again shortly (TTransportException: busy; "
                            "nothing reached it)")
    assert re.search(HIVE_RECOVERABLE, shed.message)  # Hive's RetryingMetaStoreClient retries it
    assert QUEUE_WAIT <= took[0] < 0.4
    with elapsed() as took:
        assert third.ok("get_database", name="default").name == "default"  # another metastore is served
    assert took[0] < 0.25
    assert slow.get(timeout=2).name == "fed_sales"
    assert len(fed.received("get_database")) == 1


def test_calls_over_max_in_flight_calls_are_shed_but_set_ugi_never(make):
    h, primary, fed = federation(make, server={"limits.max-in-flight-calls": 1})
    fed.delay["get_database"] = 0.5
    first, second = h.client(), h.client()
    slow = gevent.spawn(first.ok, "get_database", name="fed_sales")
    wait_until(lambda: fed.received("get_database"))
    with elapsed() as took:
        shed = failure(second.call("get_database", name="default"))
    assert isinstance(shed, MetaException)
    assert shed.message == ("waggle is overloaded: 1 calls are in flight (limits.max-in-flight-calls); try again "
                            "shortly (TTransportException: overloaded; nothing reached a metastore)")
    assert re.search(HIVE_RECOVERABLE, shed.message)
    assert QUEUE_WAIT <= took[0] < 0.4
    assert primary.calls == []
    with elapsed() as took:
        assert second.ok("set_ugi", user_name="bob", group_names=[]) == ["groups-of-primary"]
    assert took[0] < 0.25
    assert not slow.ready()  # the slow call was still in flight all along
    assert slow.get(timeout=2).name == "fed_sales"
    assert second.ok("get_database", name="default").name == "default"  # a slot is free again


def test_a_primary_lock_id_equal_to_one_a_member_granted_goes_to_the_primary(make):
    """The primary and a member grant the same id: the client is shown two ids, each naming its metastore."""
    h, primary, fed = federation(make, WRITABLE_FED)
    fed._lock_ids = iter(range(7, 100))
    primary._lock_ids = iter(range(7, 100))
    client = h.client()
    assert client.ok("lock", rqst=lock_request("fed_sales")).lockid == shown(7)
    assert client.ok("lock", rqst=lock_request("default")).lockid == 7
    client.ok("check_lock", rqst=CheckLockRequest(lockid=7))
    client.ok("check_lock", rqst=CheckLockRequest(lockid=shown(7)))
    assert fed.methods() == ["lock", "check_lock"] and primary.methods() == ["lock", "check_lock"]


# -- a member that is down --------------------------------------------------------------------------------------
def test_a_call_to_a_member_that_is_down_fails_naming_it_and_the_connection_stays_usable(make):
    h, primary, fed = federation(make)
    fed.down = True
    client = h.client()
    error = failure(client.call("get_database", name="fed_sales"))
    # the refused connection marks the member down in the call that found it: the call is planned again and
    # answered with the member's down message, and so is every call from then on, without trying it
    assert isinstance(error, MetaException)
    assert error.message.startswith("metastore 'fed' is unavailable since ")
    assert error.message.endswith("is unreachable: thrift://127.0.0.1:9: Connection refused after 0 ms")
    assert not h.runtime.health.is_up("fed")
    error = failure(client.call("get_database", name="fed_sales"))
    assert isinstance(error, MetaException) and error.message.startswith("metastore 'fed' is unavailable since ")
    # a method that declares no MetaException gets an application error instead
    refused = client.call("lock", rqst=lock_request("fed_sales", LockType.SHARED_READ))
    assert isinstance(refused, TApplicationException) and refused.type == TApplicationException.INTERNAL_ERROR
    assert refused.message.startswith("metastore 'fed' is unavailable since ")
    assert client.ok("get_database", name="default").name == "default"
    assert fed.calls == [] and primary.methods() == ["get_database"]


# -- a client that hangs up ---------------------------------------------------------------------------------------
def test_a_client_that_hangs_up_mid_stream_never_counts_against_the_metastore(make):
    """The reply streams to the client through the driver's sink; the client is gone, the metastore is fine."""
    harness, primary, _ = federation(make, server={"limits.stream-replies-after-bytes": 1024})
    primary.add_table("default", *(f"table_with_a_long_name_{i:05d}" for i in range(20000)))
    status = harness.runtime.health.status["primary"]
    client = harness.client()
    assert len(client.ok("get_all_tables", db_name="default")) == 20000  # streams, whole, to a client that reads
    checks = status.checks
    labels = {"method": "get_all_tables", "metastore": "primary", "kind": "client"}
    counted = metrics.REGISTRY.get_sample_value("waggle_call_errors_total", labels) or 0.0
    args = ThriftHiveMetastore.get_all_tables_args(db_name="default")
    client.sock.sendall(encode_call("get_all_tables", args, 99))
    client.sock.close()  # gone before the reply
    client.driver.join(timeout=2)
    assert client.driver.dead  # the call is settled: had the metastore been blamed, its check would be woken,
    # and either still due (the wake set) or already run (counted): the loop clears and counts without yielding
    assert not harness.runtime.health._wake["primary"].is_set()
    assert status.checks == checks and status.up
    assert metrics.REGISTRY.get_sample_value("waggle_call_errors_total", labels) == counted + 1  # the client's
    assert harness.client().ok("get_all_tables", db_name="default")[:1] == ["table_with_a_long_name_00000"]
