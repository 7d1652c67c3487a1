"""A bound on work in progress whose size can change while work is in progress (a reload may resize it).

Unlike a semaphore, the limit is a plain attribute: raising or lowering it takes effect for the next
:meth:`Limiter.acquire`, and work already admitted is never counted against a different bound.
"""

from __future__ import annotations

import time
from collections import deque

import gevent.event

#: Held in the message of every MetaException waggle answers for a limit (shed, busy, rate limited): Hive's
#: RetryingMetaStoreClient (its recoverable-message pattern) and Spark's HiveClientImpl (causedByThrift) retry a
#: call whose error message names it; Trino retries any MetaException.
RETRYABLE = "TTransportException"


class Limiter:
    def __init__(self, limit: int) -> None:
        self._limit = limit
        self.busy = 0
        self._waiters: deque[gevent.event.Event] = deque()

    @property
    def limit(self) -> int:
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._limit = value
        if self._waiters:
            self._waiters[0].set()  # raised: the next in line may fit now

    def acquire(self, timeout: float) -> bool:
        """Take a slot, waiting up to ``timeout`` seconds (first come, first served). False: none came free."""
        if self.busy < self._limit and not self._waiters:  # the usual case first (no property call)
            self.busy += 1
            return True
        deadline = time.monotonic() + timeout
        waiter = gevent.event.Event()
        self._waiters.append(waiter)
        try:
            while self.busy >= self.limit or self._waiters[0] is not waiter:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not waiter.wait(remaining):
                    return False
                waiter.clear()
            self.busy += 1
            return True
        finally:
            self._waiters.remove(waiter)
            if self._waiters and self.busy < self.limit:
                self._waiters[0].set()  # the next in line may fit too (the limit was raised)

    def release(self) -> None:
        self.busy -= 1
        if self._waiters:
            self._waiters[0].set()
