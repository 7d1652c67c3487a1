"""The upstream pool against a real listening socket: reuse, identity separation, idle bound, dead peers."""

from __future__ import annotations

import socket
import threading

from waggle.config.model import HostPort, Limits, MetastoreConfig
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
    while not listener.accepted:
        pass
    listener.accepted[0].close()
    import time

    time.sleep(0.1)
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
