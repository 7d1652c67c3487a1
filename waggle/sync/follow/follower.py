"""One policy followed: :class:`Follower`, whose :meth:`~Follower.step` is one batch.

A batch is the bootstrap (when the policy has no checkpoint, its definition changed, or the log has a gap: the
batch sync of its tables, with the source's event id read *before* it starts as the checkpoint), or one page of
events after the checkpoint: read, planned (:mod:`.plan`), applied (:mod:`.apply`), then checkpointed. The
checkpoint is written only once the page's effects are durable; a follower killed at any point reads the page
again and applies it again, which changes nothing that is already right.

Connections (four to the source, four to the target whose writes wait for the policy's share of the write budget,
one to the primary for the records) are opened at the first step and again after a failure. Each call waits at
most 30 s for its reply, a listing, a read of many partitions or a write 120 s, never more than the member's
``read-timeout`` (:func:`waggle.sync.hms.follow_connections`): a source or target that cannot be reached, or does
not answer in time, makes the batch a failed execution naming the metastore and the call, and the next step tries
again on new connections. A table whose work failed on a connection that broke is never checkpointed past: the
batch fails, and the page is read again.

A bootstrap whose table patterns match no table at the source fails (:data:`waggle.sync.runner.NO_MATCH`, as a
batch run says it) instead of following nothing.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from waggle.common.logging import get_logger
from waggle.config.model import MetastoreConfig
from waggle.hms.gen.hive_metastore.ttypes import NotificationEvent, NotificationEventRequest
from waggle.sync.execution import (
    BOOTSTRAP,
    FAILED,
    INCREMENTAL,
    PARTIAL,
    SUCCEEDED,
    Execution,
    PolicyState,
    WriteBudget,
)
from waggle.sync.follow.apply import Applier
from waggle.sync.follow.databases import database_key, function_key
from waggle.sync.follow.plan import Page, Scope, gap, plan
from waggle.sync.follow.records import Checkpoint, Records, holder_id
from waggle.sync.hms import FOLLOW_BULK_SECONDS, FOLLOW_CALL_SECONDS, Metastore, follow_connections
from waggle.sync.job import Options, SyncError, TableSync, describe
from waggle.sync.runner import NO_MATCH, TableSpec, resolve, spec_label
from waggle.synced import objects as o
from waggle.upstream.handshake import UpstreamCredentials

log = get_logger("waggle.sync.follow")
#: seconds a hole right after the checkpoint may last before it is a gap (see Follower._uncommitted)
HOLE_WAIT = 10.0
#: connections to the source, and to the target, that read and write a page's tables in parallel
PAIRS = 4
#: a follower this many pages behind reads pages this many times larger
CATCH_UP = 5
#: event ids before the checkpoint read again for changes that committed late (see Follower._late)
OVERLAP = 100
#: seconds between two records of a caught-up policy's coverage (how fresh its copies are)
COVER_EVERY = 10.0
#: seconds between two log lines of a lease renewal that goes on failing
RENEWAL_WARN_EVERY = 60.0


def _identity(event: NotificationEvent) -> tuple[int, str, str, str, int]:
    """An event told apart from another under the same id (by what it names, not its message)."""
    return (int(event.eventId), str(event.eventType), (event.dbName or "").lower(), (event.tableName or "").lower(),
            int(event.eventTime or 0))


@dataclass(frozen=True, slots=True)
class FollowContext:
    """What every policy's follower shares: where to read and write, as whom, under which budget."""

    source: MetastoreConfig
    primary: MetastoreConfig
    credentials: UpstreamCredentials
    budget: WriteBudget | None
    spark: Callable[[], Any] | None
    page_size: int = 1000
    lease_seconds: float = 60.0
    #: seconds a call waits for its reply, and a bulk one (a listing, a read of many partitions, a write): each
    #: never more than the member's ``read-timeout``, plus its ``latency``
    call_timeout: float = FOLLOW_CALL_SECONDS
    bulk_timeout: float = FOLLOW_BULK_SECONDS

    def connect(self, member: MetastoreConfig, count: int, throttle: WriteBudget | None = None
                ) -> AbstractContextManager[list[Metastore]]:
        return follow_connections(member, count, self.credentials, throttle, self.call_timeout, self.bulk_timeout)


def scope_digest(spec: TableSpec) -> str:
    """What of a policy's definition decides its target's content: a change bootstraps it again."""
    return o.digest([spec.source, list(spec.patterns), spec.mode, spec.target_database, spec.partition_filter,
                     spec.location_root])


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def no_match(name: str, spec: TableSpec) -> str:
    """A policy whose table patterns name no table at its source, in a batch run's words."""
    return f"policy '{name}' ({spec_label(spec)}): {NO_MATCH}"


class Follower:
    def __init__(self, name: str, spec: TableSpec, ctx: FollowContext) -> None:
        self.name, self.spec, self.ctx = name, spec, ctx
        self.scope = Scope.of(spec.patterns)
        self.me = holder_id()
        self._stack: contextlib.ExitStack | None = None
        self._readers: list[Metastore] = []
        self._writers: list[Metastore] = []
        self._records: Records | None = None
        self._lease_thread: threading.Thread | None = None
        self._lease_stop = threading.Event()
        self._state = PolicyState(name, spec.source, None, None, None, None)
        self._failed: dict[str, str] = {}
        #: the checkpoint as last read or written (read again after a failure); this follower holds the lease
        self._saved: Checkpoint | None = None
        self._hole_since: float | None = None  # when a hole after the checkpoint was first seen
        self._applier: Applier | None = None  # kept from page to page (what it learnt of the tables with it)
        #: the events applied within OVERLAP ids of the checkpoint (see _late)
        self._seen: set[tuple[int, str, str, str, int]] = set()
        self._watching = False
        self._covered = float("-inf")  # when the policy's coverage was last recorded (monotonic)

    # -- connections and the lease ---------------------------------------------------------------------------------
    def _open(self) -> Records:
        if self._records is not None:
            return self._records
        stack = contextlib.ExitStack()
        try:
            self._readers = stack.enter_context(self.ctx.connect(self.ctx.source, PAIRS))
            self._writers = stack.enter_context(self.ctx.connect(self.ctx.primary, PAIRS, self.ctx.budget))
            (own,) = stack.enter_context(self.ctx.connect(self.ctx.primary, 1))
            records = Records(own, self.name)
            records.take(self.me, self.ctx.lease_seconds)
        except BaseException:
            stack.close()
            raise
        self._stack, self._records = stack, records
        self._start_renewing()
        return records

    def _start_renewing(self) -> None:
        """Renew the lease from a connection of its own, a third of its length apart, while this follower runs
        (a bootstrap may take longer than the lease)."""
        if self._lease_thread is not None:
            return
        self._lease_stop.clear()

        def renew() -> None:
            failing_since: float | None = None
            warned = float("-inf")
            while not self._lease_stop.wait(max(1.0, self.ctx.lease_seconds / 3)):
                try:
                    with self.ctx.connect(self.ctx.primary, 1) as (own,):
                        Records(own, self.name).renew(self.me, self.ctx.lease_seconds)
                except Exception as exc:  # said when it starts failing, then once a minute
                    now = time.monotonic()
                    failing_since = now if failing_since is None else failing_since
                    if now - warned >= RENEWAL_WARN_EVERY:
                        warned = now
                        log.warning("sync.follow_lease_renewal_failed", policy=self.name, error=describe(exc),
                                    failing_seconds=round(now - failing_since, 1))
                    continue
                if failing_since is not None:
                    log.info("sync.follow_lease_renewed", policy=self.name,
                             failed_seconds=round(time.monotonic() - failing_since, 1))
                    failing_since, warned = None, float("-inf")

        self._lease_thread = threading.Thread(target=renew, name=f"lease-{self.name}", daemon=True)
        self._lease_thread.start()

    def _drop_connections(self) -> None:
        stack, self._stack, self._records, self._saved = self._stack, None, None, None
        self._applier, self._watching = None, False
        self._seen.clear()
        if stack is not None:
            with contextlib.suppress(Exception):
                stack.close()

    def close(self) -> None:
        """Stop renewing, give the lease back, close the connections."""
        self._lease_stop.set()
        if self._lease_thread is not None:
            self._lease_thread.join(5)
            self._lease_thread = None
        if self._records is not None:
            with contextlib.suppress(Exception):
                self._records.release(self.me)
        self._drop_connections()

    def _late(self, source: Metastore, checkpoint: int) -> list[NotificationEvent]:
        """Events at or below the checkpoint, within ``OVERLAP`` ids of it, that this follower has not applied:
        Hive 2.3 hands out ids before commit and may give concurrent changes one id (HIVE-16886), so a change can
        appear under an id the checkpoint has passed. The first look after a (re)start takes what is there as
        covered by the checkpoint; from then on, what appears below it is applied with the next page."""
        start = max(0, checkpoint - OVERLAP)
        if start >= checkpoint:
            return []
        got = source.client.get_next_notification(NotificationEventRequest(lastEvent=start,
                                                                           maxEvents=4 * OVERLAP)).events or []
        below = [e for e in got if e.eventId <= checkpoint]
        if not self._watching:  # the first look (after a start): what is there is what the checkpoint covers
            self._watching = True
            self._seen.update(_identity(e) for e in below)
            return []
        return [e for e in below if _identity(e) not in self._seen]

    def _remember(self, events: list[NotificationEvent], checkpoint: int) -> None:
        self._seen.update(_identity(e) for e in events)
        self._seen = {k for k in self._seen if k[0] > checkpoint - OVERLAP}

    def _uncommitted(self, source: Metastore, checkpoint: int) -> bool:
        """Whether a hole right after the checkpoint is a change still committing (its neighbours are in the log,
        so nothing was purged), for at most ``HOLE_WAIT`` seconds: Hive 2.3 hands out ids before commit, so a
        later change may commit first. A hole that lasts longer is a gap."""
        oldest = source.client.get_next_notification(NotificationEventRequest(lastEvent=0, maxEvents=1)).events
        if not oldest or oldest[0].eventId > checkpoint:
            return False  # purged: the events around the checkpoint are gone
        if self._hole_since is None:
            self._hole_since = time.monotonic()
        return time.monotonic() - self._hole_since < HOLE_WAIT

    def _reachable(self, records: Records) -> None:
        """Both sides still answer, and no connection broke (raises when not): what failed in the batch failed for
        a reason of its own."""
        self._intact()
        self._readers[0].current_event_id()
        self._writers[0].database_location("default")
        records.checkpoint()

    def _intact(self) -> None:
        """Raise when a connection broke in the batch (a call timed out on it, or it was cut): the work done on it
        may be missing, so the checkpoint must not move past it."""
        for metastore in (*self._readers, *self._writers):
            metastore.check()

    def _cover(self, records: Records, at: float) -> None:
        """Say, at most every ``COVER_EVERY`` seconds, that the policy's copies matched the source at ``at`` (the
        proxy judges their freshness by it: :mod:`waggle.synced.coverage`)."""
        if time.monotonic() - self._covered < COVER_EVERY:
            return
        try:
            records.cover(self.spec.source, list(self.spec.patterns), at, self.me, self.spec.target_database,
                          self.spec.mode)
        except Exception as exc:  # the next one says it; following goes on
            log.warning("sync.follow_coverage_failed", policy=self.name, error=describe(exc))
            return
        self._covered = time.monotonic()

    def state(self) -> PolicyState:
        return self._state

    # -- one batch ---------------------------------------------------------------------------------------------------
    def step(self, stop: threading.Event) -> Execution | None:
        started, clock = _now(), time.monotonic()
        checkpoint = self._state.checkpoint or 0
        try:
            records = self._open()
            saved = self._saved or records.checkpoint()
            if saved is None:
                return self._bootstrap(records, stop, "first run", started, clock, 0)
            if saved.source != self.spec.source or saved.scope != scope_digest(self.spec):
                return self._bootstrap(records, stop, "policy changed", started, clock, saved.event_id)
            checkpoint = saved.event_id
            if self._state.checkpoint is None:
                self._state = replace(self._state, checkpoint=checkpoint)
            return self._incremental(records, checkpoint, stop, started, clock)
        except Exception as exc:  # a metastore down, a lease held: this batch fails, the next one tries again
            self._drop_connections()  # the service logs it (when the policy starts failing, not at every batch)
            error = describe(exc)
            return Execution(self.name, INCREMENTAL, checkpoint, checkpoint, status=FAILED, error=error,
                             started_at=started, seconds=round(time.monotonic() - clock, 3))

    def _bootstrap(self, records: Records, stop: threading.Event, reason: str, started: str, clock: float,
                   previous: int) -> Execution:
        source, target = self._readers[0], self._writers[0]
        current = source.current_event_id()  # before anything is read: events from here on are replayed
        log.info("sync.follow_bootstrap", policy=self.name, reason=reason, from_event=current)
        targets = resolve(self.spec, source, target, dry_run=False)
        if not targets:
            raise SyncError(no_match(self.name, self.spec))
        db_names = {t.source_db: t.db for t in targets}
        options = Options(propagate_deletes=self.spec.propagate_deletes, switch_mode=self.spec.switch_mode,
                          partition_filter=self.spec.partition_filter)
        objects = partitions = copied = 0
        failed: dict[str, str] = {}
        run_id = uuid.uuid4().hex[:8]
        for t in targets:
            if stop.is_set():
                break
            report = TableSync(source, target, t, options, db_names, run_id,
                               spark=self.ctx.spark if t.mode == o.COPY else None, writers=self._writers,
                               readers=self._readers).run()
            if report.status == "failed":
                failed[f"{t.db}.{t.table}"] = report.error or "failed"
                continue
            objects += 1
            partitions += report.created + report.updated + report.dropped
            copied += report.bytes
        if stop.is_set():  # stopped in the middle: no checkpoint, the next start bootstraps again
            status, to_event = FAILED, previous
            error: str | None = "stopped before the bootstrap finished; the next start bootstraps again"
        else:
            self._reachable(records)
            records.save(current, self.spec.source, scope_digest(self.spec), _now(), me=self.me)
            self._saved = Checkpoint(current, self.spec.source, scope_digest(self.spec))
            status, to_event, error = (PARTIAL if failed else SUCCEEDED), current, None
        self._failed = dict(failed)
        self._state = PolicyState(self.name, self.spec.source, to_event if not stop.is_set() else None, current,
                                  None, None, dict(failed))
        return Execution(self.name, BOOTSTRAP, previous, to_event, objects=objects, partitions=partitions,
                         bytes=copied, seconds=round(time.monotonic() - clock, 3), status=status, error=error,
                         started_at=started, bootstrap_reason=reason, failed_tables=failed)

    def _incremental(self, records: Records, checkpoint: int, stop: threading.Event, started: str,
                     clock: float) -> Execution | None:
        source = self._readers[0]
        read_at = time.time()
        current = source.current_event_id()
        if current == checkpoint:  # caught up: one call a poll
            self._state = PolicyState(self.name, self.spec.source, checkpoint, current, 0, 0.0, dict(self._failed))
            self._cover(records, read_at)
            return None
        size = self.ctx.page_size
        if current - checkpoint > CATCH_UP * size:  # far behind: larger pages, larger batched writes
            size *= CATCH_UP
        events = list(source.client.get_next_notification(
            NotificationEventRequest(lastEvent=checkpoint, maxEvents=size + 1)).events or [])
        events = [e for e in events if e.eventId > checkpoint]
        if len(events) > size:
            # one event more than a page: whether the page ends inside a run of events sharing an id (Hive 2.3
            # gives concurrent changes the same id, HIVE-16886); such a run is read whole by the next page
            after, events = events[size], events[:size]
            if after.eventId == events[-1].eventId and events[0].eventId != after.eventId:
                events = [e for e in events if e.eventId != after.eventId]
        why = gap(checkpoint, events[0].eventId if events else None, current)
        if why is not None and events and current >= checkpoint and self._uncommitted(source, checkpoint):
            return None  # a change that has its id but is not committed yet: read again at the next poll
        self._hole_since = None
        if why is not None:
            log.warning("sync.follow_gap", policy=self.name, checkpoint=checkpoint, source_event=current, gap=why)
            return self._bootstrap(records, stop, f"gap: {why}", started, clock, checkpoint)
        late = self._late(source, checkpoint)

        if not events and not late:
            self._state = PolicyState(self.name, self.spec.source, checkpoint, current, 0, 0.0, dict(self._failed))
            return None
        if late:
            log.info("sync.follow_late_events", policy=self.name, checkpoint=checkpoint,
                     events=[e.eventId for e in late][:20])
        newest = events[-1].eventId if events else checkpoint
        events = late + events
        page = plan(events, self.scope)
        if self._applier is None:
            self._applier = Applier(self.spec, source, self._writers[0], self._readers, self._writers,
                                    self.ctx.spark, uuid.uuid4().hex[:8])
        done = self._applier.apply(page.work, page.databases, page.functions)
        last = newest
        if done.failed:  # a table that failed because a metastore went away is not checkpointed past
            self._reachable(records)
        self._intact()
        records.save(last, me=self.me)
        self._saved = Checkpoint(last, self.spec.source, scope_digest(self.spec))
        self._remember(events, last)
        failed = {**{_key(self.spec, n): s.reason for s, n in page.unreadable}, **done.failed}
        for skipped, name in page.unreadable:
            log.warning("sync.follow_unreadable_event", policy=self.name, event_id=skipped.event_id, kind=skipped.kind,
                        table=f"{name[0]}.{name[1]}" if name[1] else name[0], error=skipped.reason)
        outcomes: Counter[tuple[str, str]] = Counter()
        failed_ids = done.failed_events | {s.event_id for s, _ in page.unreadable}
        skipped_ids = {s.event_id for s in page.skipped}
        for e in events:
            outcome = "failed" if e.eventId in failed_ids else "skipped" if e.eventId in skipped_ids else "applied"
            outcomes[(str(e.eventType), outcome)] += 1
        self._failed = {**{k: v for k, v in self._failed.items() if k not in _targets(page, self.spec)}, **failed}
        lag = max(0.0, time.time() - (events[-1].eventTime or time.time()))
        if last >= current and not failed:
            self._cover(records, read_at)
        self._state = PolicyState(self.name, self.spec.source, last, max(current, last), max(0, current - last),
                                  lag if current > last else 0.0, dict(self._failed))
        return Execution(self.name, INCREMENTAL, checkpoint, last, objects=done.objects, partitions=done.partitions,
                         bytes=done.bytes, seconds=round(time.monotonic() - clock, 3),
                         status=PARTIAL if failed else SUCCEEDED, started_at=started, events=dict(outcomes),
                         failed_tables=failed, lag_seconds=round(lag, 3))


def _key(spec: TableSpec, name: tuple[str, str]) -> str:
    """How a failed table (``db.table``) or database (``(db, "")``: the target database) is named."""
    return f"{database_key(spec, name[0])}.{name[1]}" if name[1] else database_key(spec, name[0])


def _targets(page: Page, spec: TableSpec) -> set[str]:
    """The target tables, databases and functions a page worked on (one that succeeds again is no longer
    failed)."""
    return ({_key(spec, w.name) for w in page.work} | {database_key(spec, w.db) for w in page.databases}
            | {function_key(spec, w.db, w.name) for w in page.functions})
