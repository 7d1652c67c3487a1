"""The upstream pool against a real listening socket and an in-memory metastore: reuse, identity separation,
idle bounds that follow demand, the idle timeout, dead peers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import gevent
import pytest

from tests.support.memory_metastore import MemoryMetastore
from tests.support.waits import wait_for, wait_until
from waggle.common.metrics import REGISTRY
from waggle.config.model import HostPort, Limits, MetastoreConfig
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.upstream.client import Identity, UpstreamConnection
from waggle.upstream.deadlines import Deadlines
from waggle.upstream.pool import UpstreamPool

LIMITS = Limits(1 << 20, 1 << 16, 1000)


class Listener:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                return


def peer_closed(conn: UpstreamConnection) -> bool:
    """The metastore's close has reached this end: the socket reads (EOF)."""
    return conn.stream.readable()


def pool_for(listener: Listener, max_idle: int = 16) -> UpstreamPool:
    cfg = MetastoreConfig(name="m", uris=(HostPort("127.0.0.1", listener.port),), primary=True, database_prefix="",
                          pool_max_idle=max_idle)
    return UpstreamPool(cfg, LIMITS, Deadlines())


def test_released_connections_are_reused_and_dead_ones_dropped():
    listener = Listener()
    pool = pool_for(listener)
    a = pool.acquire(None)
    pool.release(a)
    assert pool.acquire(None) is a
    pool.release(a)
    # the metastore closes its end: the idle connection is noticed and replaced
    wait_for(lambda: listener.accepted, 5, "the listener accepting the connection")
    listener.accepted[0].close()
    wait_for(lambda: peer_closed(a), 5, "the close reaching the idle connection")
    b = pool.acquire(None)
    assert b is not a and pool.opened == 2


def test_idle_connections_are_bounded_per_metastore():
    pool = pool_for(Listener(), max_idle=2)
    conns = [pool.acquire(None) for _ in range(5)]
    for c in conns:
        pool.release(c)
    assert pool.idle_count() == 2


def test_the_idle_bound_evicts_the_oldest_of_any_identity():
    """Identities that never come back must not pin the pool: a fresh release evicts the oldest idle one."""
    pool = pool_for(Listener(), max_idle=2)
    gone_a, gone_b = pool.acquire(None), pool.acquire(None)
    for c in (gone_a, gone_b):
        c.identity = ("gone", ())
    pool._idle.clear()
    for c in (gone_a, gone_b):
        pool.release(c)
    active = pool.acquire(None)
    pool.release(active)
    assert pool.idle_count() == 2 and gone_a.broken and not gone_b.broken
    assert pool.acquire(None) is active


def test_remembered_identities_are_bounded():
    pool = pool_for(Listener())
    for i in range(UpstreamPool.MAX_IDENTITIES + 10):
        pool._remember((f"user{i}", ()), [])
    assert len(pool._ugi_replies) == UpstreamPool.MAX_IDENTITIES
    assert ("user0", ()) not in pool._ugi_replies


def test_broken_connections_are_not_returned():
    pool = pool_for(Listener())
    c = pool.acquire(None)
    c.broken = True
    pool.release(c)
    assert pool.idle_count() == 0


def test_deadlines_abort_only_late_calls():
    class Call:
        def __init__(self) -> None:
            self.deadline = 0.0
            self.timed_out = False
            self.aborted = False

        def abort(self) -> None:
            self.aborted = True

    d = Deadlines()
    early, late = Call(), Call()
    d.watch(early, 100.0)
    d.watch(late, 0.0)
    import time

    assert d.expire(time.monotonic()) == 1
    assert late.aborted and late.timed_out and not early.aborted
    d.done(early)
    assert d.expire(time.monotonic() + 1000) == 0
    d.close()


# -- a pool that follows demand, against an in-memory metastore ---------------------------------------------------
CALL_SECONDS = 0.002  # each call takes this long at the metastore, so concurrent callers overlap
THINK_SECONDS = 0.001  # between a caller's calls (its client's round trip): its connection is idle meanwhile


@pytest.fixture
def deadlines() -> Iterator[Deadlines]:
    d = Deadlines()
    yield d
    d.close()


def memory_pool(store: MemoryMetastore, deadlines: Deadlines, timeout: float = 60.0,
                max_idle: int | None = None) -> UpstreamPool:
    store.add_database("alice", "bob").delay.update(get_database=CALL_SECONDS, get_all_databases=CALL_SECONDS)
    cfg = MetastoreConfig(name=store.name, uris=(HostPort("memory", 9083),), primary=True, database_prefix="",
                          pool_max_idle=max_idle, pool_idle_timeout_seconds=timeout)
    return UpstreamPool(cfg, LIMITS, deadlines, connector=store.connect)


def run_callers(pool: UpstreamPool, callers: int, calls: int = 0, seconds: float = 0.0,
                identity: Identity | None = None) -> int:
    """``callers`` concurrent callers, each making ``calls`` calls (or calling for ``seconds``) with a pause
    between them; the most calls that were in flight at once."""
    peak = 0
    until = time.monotonic() + seconds

    def caller() -> None:
        nonlocal peak
        done = 0
        while done < calls or time.monotonic() < until:
            if identity is None:
                pool.invoke(None, "get_all_databases", ThriftHiveMetastore.get_all_databases_args(),
                            ThriftHiveMetastore.get_all_databases_result)
            else:  # each user asks for the database named after them: the metastore records who asked on what
                conn = pool.acquire(identity)
                peak = max(peak, pool.busy)
                try:
                    conn.invoke("get_database", ThriftHiveMetastore.get_database_args(name=identity[0]),
                                ThriftHiveMetastore.get_database_result)
                finally:
                    pool.release(conn)
            peak = max(peak, pool.busy)
            done += 1
            gevent.sleep(THINK_SECONDS)

    gevent.joinall([gevent.spawn(caller) for _ in range(callers)], raise_error=True)
    return peak


def opened_metric(name: str) -> float | None:
    return REGISTRY.get_sample_value("waggle_upstream_connections_opened_total", {"metastore": name})


def test_a_steady_load_opens_one_connection_per_concurrent_caller(deadlines: Deadlines) -> None:
    """More calls in flight than the old fixed idle bound (16): nothing is closed and reopened."""
    store = MemoryMetastore("steady")
    pool = memory_pool(store, deadlines)
    try:
        assert run_callers(pool, 40, calls=25) > 16
        assert 40 <= pool.opened <= 42, f"{pool.opened} connections opened for 1000 calls by 40 callers"
        assert pool.idle_count() == pool.opened == store.connections  # none closed
        run_callers(pool, 40, calls=10)
        assert pool.opened <= 42 and pool.idle_count() == pool.opened
        assert opened_metric("steady") == pool.opened
    finally:
        pool.close()
        store.close()


def test_idle_connections_beyond_the_recent_peak_are_closed_after_the_idle_timeout(deadlines: Deadlines) -> None:
    store = MemoryMetastore("bursty")
    timeout = 0.3
    pool = memory_pool(store, deadlines, timeout=timeout)
    try:
        run_callers(pool, 20, calls=3)
        assert pool.opened == pool.idle_count() == 20
        # the load drops to two callers: the burst's other connections go once unused for the timeout
        run_callers(pool, 2, seconds=4 * timeout)
        assert pool.idle_count() == 2 and pool.opened == 20  # the two callers' connections were never reopened
        # no load at all: the reaper closes the rest once unused for the timeout, then ends
        quiet = time.monotonic()
        wait_until(lambda: pool.idle_count() == 0 and pool._reaper is None, timeout=10 * timeout)
        assert time.monotonic() - quiet >= timeout * 0.9
        run_callers(pool, 3, calls=2)
        assert pool.opened == 23 and pool._reaper is not None
    finally:
        pool.close()
        store.close()


def test_a_pool_without_an_idle_timeout_keeps_its_idle_connections(deadlines: Deadlines) -> None:
    store = MemoryMetastore("no-timeout")
    pool = memory_pool(store, deadlines, timeout=0)
    try:
        run_callers(pool, 5, calls=2)
        # no reaper was started (one would be from the first release): nothing is there to close them
        assert pool.idle_count() == 5 and pool._reaper is None
    finally:
        pool.close()
        store.close()


def test_pool_max_idle_caps_the_idle_connections_kept(deadlines: Deadlines) -> None:
    store = MemoryMetastore("capped")
    pool = memory_pool(store, deadlines, max_idle=4)
    try:
        run_callers(pool, 10, calls=1)
        assert pool.opened == 10 and pool.idle_count() == 4
    finally:
        pool.close()
        store.close()


def test_identities_are_kept_apart_and_each_follows_its_own_demand(deadlines: Deadlines) -> None:
    """Each call travels on a connection carrying its caller's identity. Connections cannot be shared across
    identities, so each keeps what its own recent calls used; a user who went away loses theirs after the idle
    timeout while the others keep theirs."""
    store = MemoryMetastore("identities")
    timeout = 0.3
    pool = memory_pool(store, deadlines, timeout=timeout)
    alice: Identity = ("alice", ("staff",))
    bob: Identity = ("bob", ())
    try:
        assert pool.set_ugi_reply(alice) == ["staff", "groups-of-identities"]
        run_callers(pool, 1, calls=1, identity=alice)
        assert pool.opened == 1  # set_ugi's connection served alice's first call
        run_callers(pool, 10, calls=3, identity=alice)
        run_callers(pool, 10, calls=3, identity=bob)
        assert pool.opened == pool.idle_count() == 20
        calls = store.received("get_database")
        assert len(calls) == 61 and all(c.user == c.args[0] for c in calls)
        assert sorted(c.args[0] for c in store.received("set_ugi")) == ["alice"] * 10 + ["bob"] * 10
        # alice went away, bob keeps calling: alice's connections go after the timeout, bob's stay
        run_callers(pool, 10, seconds=4 * timeout, identity=bob)
        assert pool.opened == 20 and pool.idle_count() == 10 and set(pool._idle) == {bob}
        # both at once: still never a connection of the other's
        store.calls.clear()
        gevent.joinall([gevent.spawn(run_callers, pool, 8, 5, 0.0, who) for who in (alice, bob)],
                       raise_error=True)
        calls = store.received("get_database")
        assert len(calls) == 80 and all(c.user == c.args[0] for c in calls)
        users_of = {c.conn: {d.user for d in calls if d.conn == c.conn} for c in calls}
        assert all(len(users) == 1 for users in users_of.values())
    finally:
        pool.close()
        store.close()


def test_users_calling_one_at_a_time_each_keep_their_connection(deadlines: Deadlines) -> None:
    """A peak of one call in flight, three users: each keeps its own connection (a bound of the whole pool's
    peak would close and reopen one for every call)."""
    store = MemoryMetastore("interleaved")
    pool = memory_pool(store, deadlines)
    users: list[Identity] = [("alice", ()), ("bob", ()), ("carol", ())]
    store.add_database("carol")
    try:
        for _ in range(5):
            for user in users:
                assert run_callers(pool, 1, calls=1, identity=user) == 1
        assert pool.opened == pool.idle_count() == 3
    finally:
        pool.close()
        store.close()


def test_close_stops_the_reaper(deadlines: Deadlines) -> None:
    store = MemoryMetastore("closing")
    pool = memory_pool(store, deadlines)
    try:
        run_callers(pool, 3, calls=1)
        reaper = pool._reaper
        assert reaper is not None and not reaper.dead
        pool.close()
        gevent.sleep(0)
        assert reaper.dead and pool._reaper is None and pool.idle_count() == 0
    finally:
        store.close()


def test_using_idle_takes_only_an_idle_connection_and_a_free_slot():
    """A one-member fan-out asks at once only when nothing can wait: an idle connection of the identity, a free
    slot. Otherwise it takes nothing, opens nothing, and the bounded path asks."""
    listener = Listener()
    pool = pool_for(listener)
    assert pool.using_idle(None, lambda conn: conn) is None
    assert pool.opened == 0 and pool.busy == 0
    a = pool.acquire(None)
    pool.release(a)
    got = pool.using_idle(None, lambda conn: (conn, pool.busy))
    assert got == ((a, 1),) and pool.busy == 0 and pool.idle_count() == 1
    pool.slots.limit = 0  # no slot free: nothing taken
    assert pool.using_idle(None, lambda conn: conn) is None and pool.idle_count() == 1
    pool.slots.limit = 16
    wait_for(lambda: listener.accepted, 5, "the listener accepting the connection")
    listener.accepted[0].close()  # the idle one went stale: closed, and nothing else opened
    wait_for(lambda: peer_closed(a), 5, "the close reaching the idle connection")
    assert pool.using_idle(None, lambda conn: conn) is None
    assert pool.idle_count() == 0 and pool.opened == 1 and pool.busy == 0
