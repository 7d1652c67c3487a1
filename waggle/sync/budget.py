"""One write budget on the target metastore (``max-writes-per-second``) shared by every policy of a
``waggle sync --follow`` process, in weighted fair shares.

Writes start one every ``1 / per_second`` seconds at most (a token bucket of one token, like
:class:`~waggle.sync.throttle.WriteThrottle`); who takes each slot is decided by start-time fair queuing (SFQ,
Goyal, Vin and Cheng, 1996): a request is tagged, on arrival, with the larger of the system's virtual time and the
finish tag of its policy's previous request, and its finish tag is that start plus ``1 / weight``. Each slot goes to
the waiting request with the smallest start tag, and the virtual time becomes that tag.

What that gives:

- weighted shares: two policies that both always wait get slots in the ratio of their weights;
- work conservation: a slot no one else waits for goes to whoever waits (an idle policy's share is used);
- no starvation: a policy that asks now and then is tagged with the current virtual time, so it waits behind at
  most the requests already tagged below it (one per writer thread of each other policy) however large the others'
  weights or backlogs; a large bootstrap cannot hold a small continuous policy back by more than a few slots;
- no banked credit: a policy idle for an hour gets no burst when it comes back (its start tag is the virtual time).

A policy's weight is the number of source tables it follows, once its bootstrap has counted them (1 until then),
at most :data:`MAX_WEIGHT` (:func:`policy_weight`): the service sets it with :meth:`Share.set_weight`. The cap keeps
every policy's share at least ``1 / (MAX_WEIGHT * (n - 1) + 1)`` of the budget, so a policy of one table that
writes a few times a second keeps getting its writes through beside a bootstrap of a thousand tables.
``per_second`` 0 is no limit: writes are only counted.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from waggle.sync.throttle import WriteStats, WriteThrottle

#: The largest weight a policy gets, however many tables it has.
MAX_WEIGHT = 10.0


def policy_weight(tables: int) -> float:
    """A policy's weight from the number of source tables it follows."""
    return float(min(max(tables, 1), MAX_WEIGHT))


@dataclass(frozen=True, slots=True)
class ShareStats:
    policy: str
    weight: float
    writes: int
    waited_seconds: float  # in all
    max_wait_seconds: float  # the longest one write waited


@dataclass(slots=True)
class _Flow:
    name: str
    weight: float
    finish: float = 0.0  # finish tag of the last request
    writes: int = 0
    waited: float = 0.0
    max_wait: float = 0.0


@dataclass(slots=True)
class _Request:
    flow: _Flow
    start: float  # start tag
    arrived: float
    seq: int

    def __lt__(self, other: _Request) -> bool:
        return (self.start, self.seq) < (other.start, other.seq)


class FairQueue:
    """The pure scheduler: requests arrive, slots are granted (times are passed in). :class:`FairBudget` runs it
    under a lock with real waits; tests drive it with a simulated clock."""

    def __init__(self, per_second: float) -> None:
        if per_second < 0:
            raise ValueError(f"per_second must be >= 0, not {per_second}")
        self.interval = 1.0 / per_second if per_second else 0.0
        self.virtual = 0.0
        self.next_slot = float("-inf")
        self._waiting: list[_Request] = []
        self._seq = itertools.count()

    def flow(self, name: str, weight: float = 1.0) -> _Flow:
        return _Flow(name, max(weight, 1e-6))

    def arrive(self, flow: _Flow, now: float) -> _Request:
        start = max(self.virtual, flow.finish)
        flow.finish = start + 1.0 / flow.weight
        request = _Request(flow, start, now, next(self._seq))
        heapq.heappush(self._waiting, request)
        return request

    def head(self) -> _Request | None:
        return self._waiting[0] if self._waiting else None

    def take(self, now: float) -> tuple[_Request, float]:
        """Grant the head request its slot: (the request, the slot's start, ``now`` or later)."""
        request = heapq.heappop(self._waiting)
        at = max(now, self.next_slot)
        self.next_slot = at + self.interval
        self.virtual = request.start
        wait = at - request.arrived
        flow = request.flow
        flow.writes += 1
        flow.waited += wait
        flow.max_wait = max(flow.max_wait, wait)
        return request, at

    def cancel(self, request: _Request) -> None:
        if request in self._waiting:
            self._waiting.remove(request)
            heapq.heapify(self._waiting)


class Share:
    """One policy's share of the budget: what its writes wait on (a :class:`~waggle.sync.execution.WriteBudget`)."""

    def __init__(self, budget: FairBudget, flow: _Flow) -> None:
        self._budget, self._flow = budget, flow

    @property
    def policy(self) -> str:
        return self._flow.name

    def acquire(self) -> None:
        self._budget._acquire(self._flow)

    def set_weight(self, weight: float) -> None:
        with self._budget._cond:
            self._flow.weight = max(weight, 1e-6)

    def stats(self) -> ShareStats:
        f = self._flow
        with self._budget._cond:
            return ShareStats(f.name, f.weight, f.writes, round(f.waited, 3), round(f.max_wait, 3))


class FairBudget:
    def __init__(self, metastore: str, per_second: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.metastore, self.per_second = metastore, per_second
        self._queue = FairQueue(per_second)
        self._clock = clock
        self._cond = threading.Condition()
        self._counter = WriteThrottle(metastore, 0, clock)  # counts the writes for stats(); no limit of its own
        self._shares: dict[str, Share] = {}

    def share(self, policy: str, weight: float = 1.0) -> Share:
        """The share of ``policy`` (the same one each time it is asked: a restarted policy keeps its tags)."""
        with self._cond:
            if policy not in self._shares:
                self._shares[policy] = Share(self, self._queue.flow(policy, weight))
            return self._shares[policy]

    def _acquire(self, flow: _Flow) -> None:
        with self._cond:
            now = self._clock()
            request = self._queue.arrive(flow, now)
            try:
                while True:
                    now = self._clock()
                    if self._queue.head() is request and now >= self._queue.next_slot:
                        self._queue.take(now)
                        self._cond.notify_all()  # the next head works out its own wait
                        break
                    self._cond.wait(self._queue.next_slot - now if self._queue.head() is request else None)
            except BaseException:
                self._queue.cancel(request)
                self._cond.notify_all()
                raise
        self._counter.acquire()

    def stats(self) -> WriteStats:
        """The writes to the target, as :meth:`WriteThrottle.stats` says them, with this budget's limit."""
        return replace(self._counter.stats(), limit_per_second=self.per_second)

    def shares(self) -> list[ShareStats]:
        return [s.stats() for s in list(self._shares.values())]
