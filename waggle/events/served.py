"""The merged log as one waggle process serves it: the journal read from the primary (the process that merges
hands it over as it writes it), the members' events fetched from them by id range and kept for a while, each
renamed to waggle's names (:mod:`waggle.events.messages`) under its merged id.

A journaled event of a member that cannot be reached now ends the page before it: the consumer gets the events
before it, or, when it is the first, a ``MetaException`` naming the member; it asks again and gets it once the
member is back. Nothing journaled is skipped for a member being down. An event that its member no longer holds
(purged, or its log started again) is not served: the consumer's next id jumps, as Hive shows a gap.
"""

from __future__ import annotations

import bisect
import copy
import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import gevent.lock

from waggle.common import metrics
from waggle.events.journal import Block, Ref, refs_after
from waggle.events.messages import renamed
from waggle.events.shown import Shown
from waggle.events.store import JournalStore
from waggle.upstream.client import UpstreamError
from waggle.upstream.log_calls import PAGE, next_events

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool

__all__ = ["MAX_EVENTS", "MergedLog"]

#: the most events one call answers (a consumer asking for all gets them a page at a time)
MAX_EVENTS = 10_000
#: seconds the journal's last block, as read, stands for the journal
FRESH_SECONDS = 0.05
#: events kept once fetched (by member, epoch, id)
KEPT_EVENTS = 20_000

Keep = Callable[[Any], bool]


class MergedLog:
    """Answers the log calls of ``notification-log: federated``."""

    def __init__(self, store: JournalStore, pool: Callable[[str], UpstreamPool | None], shown: Callable[[], Shown],
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``pool``: a member's pool (None: no such member now); ``shown``: the names clients see now."""
        self.store = store
        self._pool = pool
        self._shown = shown
        self._clock = clock
        self._firsts: list[int] = []
        self._blocks: dict[int, Block] = {}  # every block read but the last (they no longer change)
        self._last: Block | None = None
        self._read_at = float("-inf")
        self._relist = False  # the blocks must be listed at the next read
        #: events fetched or read by the merger, by (member, epoch, id): every event of that id, in the log's order
        self._kept: OrderedDict[tuple[str, int, int], list[Any]] = OrderedDict()
        #: events as clients see them, by (member, epoch, id, nth), for the names of ``_renamed_for``
        self._renamed: OrderedDict[tuple[str, int, int, int], Any] = OrderedDict()
        self._renamed_for: Shown | None = None
        self._reading = gevent.lock.Semaphore()

    # -- the journal -------------------------------------------------------------------------------------------
    def publish(self, block: Block, read: dict[str, tuple[int, Sequence[Any]]]) -> None:
        """The merger of this process wrote ``block`` and read these events (by member: epoch, events)."""
        for member, (epoch, events) in read.items():
            self._keep(member, epoch, events, whole=False)
        if block.rounds or block.tail.positions:
            last = self._last
            if last is None or block.first not in (last.first, last.tail.next):
                self._relist = True  # blocks before it may be unknown here: list them at the next read
                self._read_at = float("-inf")
            else:
                self._read_at = self._clock()
            self._set_last(block)

    def _set_last(self, block: Block) -> None:
        last = self._last
        if last is not None and last.first != block.first and last.tail.next == block.first:
            self._blocks[last.first] = last  # complete: the next block starts where it ends
        if not self._firsts or self._firsts[-1] != block.first:
            bisect.insort(self._firsts, block.first)
        self._last = block

    def _fresh(self) -> Block | None:
        """The journal's last block, read again when older than :data:`FRESH_SECONDS`."""
        with self._reading:
            if self._clock() - self._read_at < FRESH_SECONDS:
                return self._last
            last = self._last
            found = self.store.read(last.first) if last is not None and not last.full and not self._relist \
                else None
            if found is None:  # none yet, full, dropped, or others unknown: list the blocks
                self._relist = False
                self._firsts = self.store.firsts()
                self._blocks = {f: b for f, b in self._blocks.items() if f in self._firsts}
                found = self.store.read(self._firsts[-1]) if self._firsts else None
            if found is not None:
                self._set_last(found)
            self._read_at = self._clock()
            return self._last

    def _blocks_after(self, after: int) -> list[Block]:
        """The blocks holding ids above ``after``, in order."""
        last = self._last
        firsts = [f for f in self._firsts if last is None or f < last.first]
        start = max(0, bisect.bisect_right(firsts, after + 1) - 1)
        found: list[Block] = []
        for first in firsts[start:]:
            block = self._blocks.get(first) or self.store.read(first)
            if block is not None:
                self._blocks[first] = block
                found.append(block)
        return found + ([last] if last is not None else [])

    def current(self) -> int:
        """The newest merged id (0 before the first)."""
        last = self._fresh()
        return 0 if last is None else last.tail.next - 1

    # -- the events --------------------------------------------------------------------------------------------
    def events(self, after: int, most: int, keep: Keep) -> list[Any]:
        """Up to ``most`` events above id ``after`` that ``keep`` keeps, renamed, in id order."""
        most = MAX_EVENTS if most <= 0 else min(most, MAX_EVENTS)
        return list(self._walk(after, self._shown(), keep, most))

    def count(self, after: int, upto: int | None, keep: Keep, limit: int | None) -> int:
        """How many events above ``after`` (up to ``upto``) ``keep`` keeps."""
        counted = 0
        for event in self._walk(after, self._shown(), keep, None):
            if upto is not None and event.eventId > upto:
                break
            counted += 1
            if limit and counted >= limit:
                break
        return counted

    def _walk(self, after: int, shown: Shown, keep: Keep, most: int | None) -> Iterable[Any]:
        last = self._fresh()
        if last is None:
            return
        epochs = {m: p.epoch for m, p in last.tail.positions.items()}
        batch: list[Ref] = []
        given = 0
        refs = refs_after(self._blocks_after(after), after)
        while True:
            batch = [r for _, r in zip(range(PAGE), refs, strict=False)]
            if not batch:
                return
            served, failed = self._serve(batch, epochs, shown, keep)
            for event in served:
                yield event
                given += 1
                if most is not None and given >= most:
                    return
            if failed is not None:
                if given == 0:
                    raise failed
                return

    def _serve(self, refs: list[Ref], epochs: dict[str, int], shown: Shown, keep: Keep
               ) -> tuple[list[Any], UpstreamError | None]:
        if self._renamed_for is not shown:  # other names: renamed again
            self._renamed, self._renamed_for = OrderedDict(), shown
        wanted: dict[str, list[int]] = {}
        for ref in refs:
            if ref.event and epochs.get(ref.member) == ref.epoch and \
                    len(self._kept.get((ref.member, ref.epoch, ref.event), ())) <= ref.nth:
                wanted.setdefault(ref.member, []).append(ref.event)
        failed: dict[str, UpstreamError] = {}
        for member, ids in wanted.items():
            try:
                self._fetch(member, epochs[member], min(ids), max(ids))
            except UpstreamError as exc:
                failed[member] = exc
        out: list[Any] = []
        for ref in refs:
            if not ref.event or epochs.get(ref.member) != ref.epoch:
                continue  # lost, or of an epoch of the member's log that is gone
            key = (ref.member, ref.epoch, ref.event, ref.nth)
            event = self._renamed.get(key)
            if event is None:
                held = self._kept.get(key[:3])
                if held is None:
                    if ref.member in failed:
                        return out, failed[ref.member]
                    continue  # no longer held by the member
                # the journal holds the events of an id that clients see (an id may hold one they do not)
                seen = [e for e in held if shown.event(ref.member, e)] if len(held) > 1 else held
                if len(seen) <= ref.nth or not shown.event(ref.member, seen[ref.nth]):
                    continue
                event = renamed(seen[ref.nth], functools.partial(shown.db, ref.member))
                if event is None:
                    continue
                self._renamed[key] = event
                if len(self._renamed) > KEPT_EVENTS:
                    self._renamed.popitem(last=False)
            event = copy.copy(event)
            event.eventId = ref.merged
            if keep(event):
                out.append(event)
                metrics.MERGED_EVENTS_SERVED.labels(ref.member).inc()
        return out, None

    def _fetch(self, member: str, epoch: int, low: int, high: int) -> None:
        pool = self._pool(member)
        if pool is None:
            return  # no longer a member: its events are not served
        while low <= high:
            # a few more than the ids: an id may hold two events (HIVE-16886)
            found = pool.using(None, functools.partial(_page, after=low - 1, most=min(PAGE, high - low + 1 + 16)))
            self._keep(member, epoch, found, whole=True)
            if not found:
                return
            low = int(found[-1].eventId) + 1

    def _keep(self, member: str, epoch: int, events: Iterable[Any], whole: bool) -> None:
        """Keep events read (``whole``: every event of their ids, as a fetch reads them; else the merger's, which
        may add a later event of an id)."""
        kept = self._kept
        by_id: dict[int, list[Any]] = {}
        for event in events:
            by_id.setdefault(int(event.eventId), []).append(event)
        for event_id, found in by_id.items():
            key = (member, epoch, event_id)
            held = kept.get(key)
            if whole or held is None:
                kept[key] = found
            else:
                held.extend(e for e in found if e not in held)
            kept.move_to_end(key)
        while len(kept) > KEPT_EVENTS:
            kept.popitem(last=False)


def _page(conn: Any, after: int, most: int) -> list[Any]:
    return next_events(conn, after, None, most=most)
