"""The merger: one process of the federation at a time (the holder of a lease in the primary) reads every
member's notification log and writes the rounds of the merged log's journal (:mod:`waggle.events.journal`).

Every :data:`POLL_SECONDS` it reads each member's log at once, with a deadline of its own: a member that does not
answer in time is left for the next round, and delays only its own events (its position does not move, so none
of its events is skipped). The events read (shown or not) are handed to the process's merged log
(:mod:`waggle.events.served`), which serves them without asking the member again.

Before each write the merger reads the journal's last block back: if it is not the one the merger wrote last,
another process has written since (its lease was lost), and this one stops merging until it holds the lease
again. Positions that move with no event shown are saved at most every :data:`SAVE_SECONDS` (each write is an
event in the primary's own log, which clients are not shown).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gevent
import structlog

from waggle.common import metrics
from waggle.common.lease import holder_id, lease_text, live_other
from waggle.events.journal import Block, Position, Tail
from waggle.events.rounds import Step, compose, split, step
from waggle.events.store import JournalError, JournalStore
from waggle.upstream.client import UpstreamError
from waggle.upstream.log_calls import current_id, next_events

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool

__all__ = ["LEASE_SECONDS", "POLL_SECONDS", "Merger"]

log = structlog.get_logger("waggle.events")

#: seconds between two rounds
POLL_SECONDS = 0.15
#: seconds one round waits for a member's log
READ_SECONDS = 5.0
#: the lease's length; it is renewed a third of it apart
LEASE_SECONDS = 30.0
#: seconds after a member's events were taken during which its last event id is read again (HIVE-16886)
DUPLICATE_SECONDS = 2.0
#: seconds between two saves of positions that moved with no event shown
SAVE_SECONDS = 60.0
#: seconds between two looks for blocks past the retention
PRUNE_SECONDS = 300.0

Member = tuple[str, "UpstreamPool"]
#: (the block written, the events read by member) -> whoever serves them in this process
Publish = Callable[[Block, dict[str, tuple[int, Sequence[Any]]]], None]


class Merger:
    """Merges while it holds the lease; started and stopped with the process."""

    def __init__(self, store: JournalStore, members: Callable[[], Sequence[Member]],
                 shown: Callable[[str, Any], bool], publish: Publish, retention: Callable[[], float],
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._members = members
        self._shown = shown
        self._publish = publish
        self._retention = retention
        self._clock = clock
        self.me = holder_id()
        self.block: Block | None = None  # the journal's last block, as this merger wrote it
        self._in_store = False  # whether that block is in the primary (the journal's first is not, until written)
        self.holding = False
        self._renewed = 0.0
        self._saved = 0.0
        self._pruned = 0.0
        self._waiting: dict[str, float] = {}  # member -> when a hole after its position was first seen
        self._suspect: set[str] = set()  # members whose last read failed: the event at the position is read again
        self._moved: dict[str, float] = {}  # member -> when its last events were taken
        self._ahead: dict[str, Position] = {}  # positions moved by events no client is shown, not written yet
        self._failing = False
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=5)
            self._greenlet = None
        if self.holding:
            try:
                if live_other(self.store.lease(), self.me) is None:
                    self.store.set_lease(None)
            except (UpstreamError, JournalError):
                pass
            self.holding = False
            metrics.MERGING.set(0)

    def _run(self) -> None:
        while True:
            began = self._clock()
            try:
                if self._hold():
                    self.merge_once()
                    if self._failing:
                        self._failing = False
                        log.info("events.merging", holder=self.me)
            except (UpstreamError, JournalError) as exc:
                self._lost(str(exc))
            except Exception as exc:  # the merger must never die
                log.error("events.merger_failed", error=repr(exc))
                self._lost(repr(exc))
            gevent.sleep(max(0.0, began + POLL_SECONDS - self._clock()))

    def _lost(self, why: str) -> None:
        if not self._failing:
            self._failing = True
            log.warning("events.merge_failed", reason=why)
        self.block = None  # read again from the primary before the next write

    # -- the lease ---------------------------------------------------------------------------------------------
    def _hold(self) -> bool:
        """Whether this process merges now: it holds the lease, renewed when due, or has just taken it."""
        now = self._clock()
        if self.holding and now - self._renewed < LEASE_SECONDS / 3:
            return True
        if not self.holding and now - self._renewed < LEASE_SECONDS / 3:
            return False  # held by another: look again later
        self._renewed = now
        self.store.ensure()
        other = live_other(self.store.lease(), self.me)
        if other is not None:
            if self.holding:
                log.warning("events.lease_lost", holder=other)
            self.holding, self.block = False, None
            metrics.MERGING.set(0)
            return False
        self.store.set_lease(lease_text(self.me, LEASE_SECONDS, now))
        if not self.holding:
            gevent.sleep(1.0)  # another taking it at the same moment: the last write stands
            if live_other(self.store.lease(), self.me) is not None:
                self._renewed = self._clock()
                return False
            self.holding, self.block = True, None
            metrics.MERGING.set(1)
            log.info("events.lease_taken", holder=self.me)
        return True

    # -- one round ---------------------------------------------------------------------------------------------
    def _last_block(self) -> Block | None:
        firsts = self.store.firsts()
        return self.store.read(firsts[-1]) if firsts else None

    def merge_once(self) -> None:
        """Read every member's log once; write the round they make (or the positions, when due)."""
        if self.block is None:
            last = self._last_block()
            self.block, self._in_store = (last, True) if last is not None else (Block.empty(Tail(1)), False)
            self._ahead = {}
        block, now = self.block, self._clock()
        # the positions as read here: those written, and those moved since by events no client is shown
        tail = Tail(block.tail.next, {**block.tail.positions, **self._ahead})
        members = list(self._members())
        jobs = {name: gevent.spawn(self._read, name, pool, tail.positions.get(name)) for name, pool in members}
        gevent.joinall(list(jobs.values()), timeout=READ_SECONDS)
        steps: dict[str, Step] = {}
        for name, job in jobs.items():
            if job.successful():
                steps[name] = job.value
                self._suspect.discard(name)
            else:
                job.kill(block=False)
                self._suspect.add(name)
        for name, found in steps.items():
            if found.waiting_since is None:
                self._waiting.pop(name, None)
            else:
                self._waiting[name] = found.waiting_since
            if found.taken:
                self._moved[name] = now
        made, new_tail = compose(tail, steps, self._shown, now)
        if made is not None:
            base = Block.empty(block.tail) if block.full else block
            self._write(base.with_round(made, new_tail), new=base is not block or not self._in_store)
        elif new_tail != block.tail and (now - self._saved >= SAVE_SECONDS or _new_members(tail, new_tail)):
            self._write(block.with_tail(new_tail), new=not self._in_store)
        else:
            self._ahead = {m: p for m, p in new_tail.positions.items() if block.tail.positions.get(m) != p}
        joined = sorted(m for m in new_tail.positions if m not in tail.positions)
        if joined:  # their events from here on are merged (the older ones never)
            log.info("events.members_joined", members=joined,
                     after={m: new_tail.positions[m].last for m in joined}, next_id=new_tail.next)
        self._publish(self.block, {name: (s.position.epoch, s.taken) for name, s in steps.items() if s.taken})
        for name, found in steps.items():
            if found.taken:
                metrics.MERGED_LAG.labels(name).set(max(0.0, now - float(found.taken[-1].eventTime or now)))
        if now - self._pruned >= PRUNE_SECONDS:
            self._pruned = now
            self._prune(now)

    def _read(self, name: str, pool: UpstreamPool, position: Position | None) -> Step:
        def read(conn: Any) -> Step:
            timeout = READ_SECONDS
            current = current_id(conn, timeout)
            now = self._clock()
            if position is None:
                return step(None, current, (), None, now)
            # the event at the position is read again with those after it: a second event of its id (HIVE-16886)
            # commits just after the first, with the newest id unchanged
            again = name in self._suspect or now - self._moved.get(name, float("-inf")) < DUPLICATE_SECONDS
            if current <= position.last and not again:
                return step(position, current, (), None, now, self._waiting.get(name))
            page = next_events(conn, max(0, position.last - 1), timeout)
            probe, rest = split(position, page)
            return step(position, current, rest, probe if position.last > 0 else None, now,
                        self._waiting.get(name))

        return pool.using(None, read)

    def _write(self, block: Block, new: bool) -> None:
        written = self.block
        assert written is not None
        stored = self._last_block()
        if (stored is not None) != self._in_store or (stored is not None and (
                stored.tail != written.tail or stored.first != written.first)):
            self.holding, self._renewed = False, 0.0  # look at the lease again before the next round
            metrics.MERGING.set(0)
            raise JournalError("the merged log was written by another process: this one stops merging until "
                               "it holds the lease again")
        self.store.write(block, new)
        self.block, self._in_store, self._ahead = block, True, {}
        self._saved = self._clock()

    def _prune(self, now: float) -> None:
        """Drop the blocks whose rounds are all older than the retention (never the last)."""
        firsts = self.store.firsts()
        for first in firsts[:-1]:
            found = self.store.read(first)
            if found is None or (found.rounds and found.rounds[-1].time >= now - self._retention()):
                break
            self.store.drop(first)
            log.info("events.block_dropped", first=first)


def _new_members(old: Tail, new: Tail) -> bool:
    return any(m not in old.positions for m in new.positions)
