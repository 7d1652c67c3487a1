"""Fair shares of the target's write budget: start-time fair queuing over a token bucket, driven by a simulated
clock (the pure :class:`FairQueue`) and, briefly, by real threads (:class:`FairBudget`)."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

import pytest

from waggle.sync.budget import MAX_WEIGHT, FairBudget, FairQueue, policy_weight

RATE = 10.0  # writes per second
SLOT = 1 / RATE


class Writer:
    """One writer thread of a policy, simulated: it asks for a write at ``next_ask`` times given by ``pace``."""

    def __init__(self, flow: object, pace: Callable[[float], float], first: float = 0.0) -> None:
        self.flow, self.pace, self.next_ask = flow, pace, first
        self.waiting: object | None = None


def simulate(queue: FairQueue, writers: list[Writer], until: float) -> list[tuple[float, str]]:
    """Grant slots until ``until``: (slot start, policy) of each write."""
    granted: list[tuple[float, str]] = []
    now = 0.0
    while now < until:
        for w in writers:
            if w.waiting is None and w.next_ask <= now:
                w.waiting = queue.arrive(w.flow, w.next_ask)  # type: ignore[arg-type]
        head = queue.head()
        if head is None:
            now = min(w.next_ask for w in writers)
            continue
        slot = max(now, queue.next_slot)
        # arrivals before the slot starts compete for it
        early = [w for w in writers if w.waiting is None and w.next_ask <= slot]
        if early:
            now = min(w.next_ask for w in early)
            continue
        request, at = queue.take(slot)
        writer = next(w for w in writers if w.waiting is request)
        writer.waiting = None
        writer.next_ask = writer.pace(at)
        granted.append((at, request.flow.name))
        now = at
    return granted


def test_a_lone_policy_gets_the_whole_budget():
    q = FairQueue(RATE)
    flow = q.flow("big")
    granted = simulate(q, [Writer(flow, lambda t: t), Writer(flow, lambda t: t)], until=10)
    assert len(granted) == pytest.approx(RATE * 10, abs=2)
    starts = [t for t, _ in granted]
    assert min(b - a for a, b in itertools.pairwise(starts)) == pytest.approx(SLOT)


def test_two_saturating_policies_share_by_weight():
    q = FairQueue(RATE)
    big, small = q.flow("big", 3), q.flow("small", 1)
    writers = [Writer(big, lambda t: t), Writer(big, lambda t: t), Writer(small, lambda t: t)]
    granted = simulate(q, writers, until=40)
    share = sum(1 for _, p in granted if p == "big") / len(granted)
    assert share == pytest.approx(0.75, abs=0.02)


def test_a_saturating_bootstrap_does_not_starve_a_small_continuous_policy():
    """The big policy (the largest weight) always waits with both writers; the small one asks 1.5 s after each of
    its writes (within its share, 1/11 of 10 writes a second): each of its writes waits at most a couple of slots,
    however long the run."""
    q = FairQueue(RATE)
    big, small = q.flow("bootstrap", MAX_WEIGHT), q.flow("live", 1)
    writers = [Writer(big, lambda t: t), Writer(big, lambda t: t), Writer(small, lambda t: t + 1.5, first=0.05)]
    granted = simulate(q, writers, until=120)
    assert small.writes >= 75
    assert small.max_wait <= 3 * SLOT + 1e-9
    assert big.writes + small.writes == len(granted)
    assert len(granted) == pytest.approx(RATE * 120, abs=3)  # work-conserving: no slot goes unused


def test_an_idle_policy_banks_no_credit():
    """A policy idle for a long spell comes back at the current virtual time: it does not take a burst of slots
    ahead of the other's waiting writes."""
    q = FairQueue(RATE)
    a, b = q.flow("a"), q.flow("b")
    writers = [Writer(a, lambda t: t), Writer(b, lambda t: t, first=30.0)]
    granted = simulate(q, writers, until=40)
    after = [p for t, p in granted if t >= 30.0]
    run = max(len(s) for s in "".join("b" if p == "b" else " " for p in after).split())
    assert run <= 2  # alternating, not a run of b's
    assert after.count("b") == pytest.approx(len(after) / 2, abs=2)


def test_policy_weight_is_tables_capped():
    assert [policy_weight(n) for n in (0, 1, 4, 1000)] == [1.0, 1.0, 4.0, MAX_WEIGHT]


def test_threads_share_the_budget_and_stats_count_them():
    budget = FairBudget("primary", 200)
    big, small = budget.share("big", 4), budget.share("small")
    assert budget.share("big") is big
    stop = threading.Event()

    def saturate() -> None:
        while not stop.is_set():
            big.acquire()

    threads = [threading.Thread(target=saturate) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        waits = []
        for _ in range(5):
            time.sleep(0.03)
            started = time.monotonic()
            small.acquire()
            waits.append(time.monotonic() - started)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert max(waits) < 0.05  # a few slots of 5 ms, with room for a busy machine
    stats = budget.stats()
    assert stats.limit_per_second == 200 and stats.writes == big.stats().writes + small.stats().writes
    assert stats.peak_per_second <= 201
    assert {s.policy for s in budget.shares()} == {"big", "small"}


def test_no_limit_only_counts():
    budget = FairBudget("primary", 0)
    share = budget.share("p")
    started = time.monotonic()
    for _ in range(1000):
        share.acquire()
    assert time.monotonic() - started < 0.5
    assert budget.stats().writes == 1000 and share.stats().writes == 1000
