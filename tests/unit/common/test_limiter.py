"""The load limiter: first come, first served, and resizable while work is in progress."""

from __future__ import annotations

import gevent

from tests.support.waits import wait_until
from waggle.common.limiter import Limiter


def test_waiters_are_served_in_order_and_refused_after_their_wait():
    limiter = Limiter(2)
    got: list[tuple[int, bool]] = []

    def work(i: int) -> None:
        ok = limiter.acquire(0.5)
        got.append((i, ok))
        if ok:
            gevent.sleep(0.3)
            limiter.release()

    gevent.joinall([gevent.spawn(work, i) for i in range(5)])
    # two at once, two more when they finish (0.3 s), the fifth would need 0.6 s: refused
    assert got == [(0, True), (1, True), (2, True), (3, True), (4, False)] and limiter.busy == 0


def test_a_limit_resized_while_work_is_in_progress():
    limiter = Limiter(1)
    assert limiter.acquire(0)
    assert not limiter.acquire(0.05)  # full: refused after the wait
    waiter = gevent.spawn(limiter.acquire, 5)
    wait_until(lambda: limiter._waiters)  # waiting now
    limiter.limit = 2  # raised by a reload: the one waiting fits now, without anyone releasing
    assert waiter.get(timeout=1) is True and limiter.busy == 2
    limiter.limit = 1  # lowered: the two admitted finish; nobody new until below it
    limiter.release()
    assert not limiter.acquire(0)
    limiter.release()
    assert limiter.busy == 0 and limiter.acquire(0)
