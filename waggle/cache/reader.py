"""Each ``cache: events`` member's notification log, read twice a second by one reader per replica.

A reader asks the member for its newest event id; only when it moved does it ask for the events after the last
one read (a page of up to :data:`PAGE` events). What each event changed is forgotten
(:func:`waggle.cache.events.drops`), then the member's entries are known true as of the moment the read began.
When nothing changes the reader costs one call a poll.

Whenever the reader cannot know what changed, the member's entries all go and none is answered until the log is
read through again: a gap (events purged, the log started again, a hole that never fills), the member
unreachable or restarted (its connection broke), a log that cannot be read.

The readers run where the replica's shared work runs: in a single waggle process, or in the supervisor of its
workers, which passes what each read says on to every worker (:class:`LogSink`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import gevent
import structlog

from waggle.cache.events import Cursor, Drop, drops
from waggle.common import metrics
from waggle.config.model import CacheMode, MetastoreConfig
from waggle.hms.notification_log import LISTENER_KEYS, missing_listener
from waggle.upstream.client import UpstreamConnection, UpstreamError
from waggle.upstream.log_calls import PAGE, current_id, next_events, setting

__all__ = ["PAGE", "POLL_SECONDS", "LogReader", "LogReaders", "LogSink", "log_readable"]

log = structlog.get_logger("waggle.cache")

#: seconds between two reads of a log
POLL_SECONDS = 0.5
#: seconds between attempts to reach a member whose log could not be read
RETRY_SECONDS = 1.0


class LogSink(Protocol):
    """Who hears what a log read says (the process's cache; a supervisor's workers)."""

    def read_through(self, member: str, as_of: float, drops: Iterable[Drop], newest_event: float | None = None
                     ) -> None: ...

    def unreadable(self, member: str, cause: str) -> None: ...


def log_readable(conn: UpstreamConnection, timeout: float) -> str | None:
    """Why a member's notification log cannot keep a cache true, or None when it can: it must answer for its
    newest event id and for the events after it, and a notification listener must write it."""
    try:
        last = current_id(conn, timeout)
        next_events(conn, last, timeout)
    except UpstreamError as exc:
        return f"its notification log cannot be read ({exc.detail})"
    return missing_listener(setting(conn, key, timeout) for key in LISTENER_KEYS)


class LogReader:
    """Reads one member's log until stopped."""

    def __init__(self, member: MetastoreConfig, connect: Callable[[], UpstreamConnection], timeout: float,
                 sinks: list[LogSink], clock: Callable[[], float] = time.monotonic) -> None:
        self.member = member
        self._connect = connect
        self._timeout = timeout
        self._sinks = sinks
        self._clock = clock
        self._conn: UpstreamConnection | None = None
        self._cursor: Cursor | None = None
        self._greenlet: gevent.Greenlet | None = None
        #: the last read failed (the outage has been logged)
        self._failing = False
        #: reads that read the log through, and events applied (for tests and status)
        self.reads = 0
        self.events = 0

    def start(self) -> None:
        self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        self._close()

    def _close(self) -> None:
        conn, self._conn, self._cursor = self._conn, None, None
        if conn is not None:
            conn.close()

    def _run(self) -> None:
        name = self.member.name
        while True:
            began = self._clock()
            try:
                caught_up = self.read_once(began)
            except UpstreamError as exc:
                self._lost(f"its notification log cannot be read: {exc.detail}")
                gevent.sleep(RETRY_SECONDS)
                continue
            except Exception as exc:  # a reader must never die: what it cannot read makes it forget
                log.error("cache.reader_failed", member=name, error=repr(exc))
                self._lost(f"reading its notification log failed: {exc!r}")
                gevent.sleep(RETRY_SECONDS)
                continue
            if caught_up:
                gevent.sleep(max(0.0, began + POLL_SECONDS - self._clock()))

    def _lost(self, reason: str) -> None:
        if not self._failing:  # said once an outage; cache.log_readable says when it is read again
            self._failing = True
            log.warning("cache.log_unreadable", member=self.member.name, reason=reason)
        self._close()
        for sink in self._sinks:
            sink.unreadable(self.member.name, "unreadable")

    def read_once(self, began: float) -> bool:
        """One read of the log; whether it read the log through (else another read follows at once)."""
        name = self.member.name
        if self._conn is None:
            self._conn = self._connect()
        conn = self._conn
        calls = metrics.CACHE_LOG_CALLS.labels(name)
        calls.inc()
        current = current_id(conn, self._timeout)
        if self._cursor is None:  # a first read, or a reconnection: whatever was remembered cannot be known true
            self._cursor = Cursor(current)
            for sink in self._sinks:
                sink.unreadable(name, "restart")
            page: list[Any] = []
        else:
            cursor = self._cursor
            page = []
            if current > cursor.last or cursor.ahead:
                calls.inc()
                page = next_events(conn, cursor.last, self._timeout)
        cursor = self._cursor
        purged = False
        if page and page[0].eventId > cursor.last + 1 and cursor.last > 0 and not cursor.ahead:
            # a hole right after the last event read: not committed yet, or purged? the last one read is still
            # held unless the log was purged past it
            calls.inc()
            held = next_events(conn, cursor.last - 1, self._timeout, most=1)
            purged = not held or held[0].eventId != cursor.last
        read = cursor.take(current, page, self._clock(), purged=purged)
        if read.gap is not None:
            log.warning("cache.log_gap", member=name, reason=read.gap)
            for sink in self._sinks:
                sink.unreadable(name, "gap")
        found = [d for e in read.events for d in drops(e.eventType, e.dbName, e.tableName, e.message,
                                                         getattr(e, "messageFormat", None))]
        self.events += len(read.events)
        newest = float(read.events[-1].eventTime) if read.events else None
        full = len(page) >= PAGE
        for sink in self._sinks:
            if full:  # more to read: what this page changed is forgotten, nothing is known true yet
                sink.read_through(name, float("-inf"), found, newest)
            else:
                sink.read_through(name, began, found, newest)
        if not full:
            self.reads += 1
        if self._failing:
            self._failing = False
            log.info("cache.log_readable", member=name)
        return not full


class LogReaders:
    """The readers of every ``cache: events`` member of the configuration served now."""

    def __init__(self, connect: Callable[[MetastoreConfig], UpstreamConnection], timeout: Callable[[MetastoreConfig],
                 float], sinks: list[LogSink]) -> None:
        self._connect = connect
        self._timeout = timeout
        self.sinks = sinks
        self.readers: dict[str, LogReader] = {}
        self._started = False

    def update(self, members: Iterable[MetastoreConfig]) -> None:
        """Read the logs of these members (those with ``cache: events``): a changed member's reader starts over."""
        wanted = {m.name: m for m in members if m.cache is CacheMode.EVENTS}
        for name, reader in list(self.readers.items()):
            member = wanted.get(name)
            if member is None or member.upstream_key() != reader.member.upstream_key():
                reader.stop()
                del self.readers[name]
        for name, member in wanted.items():
            if name not in self.readers:
                reader = LogReader(member, functools.partial(self._connect, member), self._timeout(member),
                                   self.sinks)
                self.readers[name] = reader
                if self._started:
                    reader.start()

    def start(self) -> None:
        self._started = True
        for reader in self.readers.values():
            reader.start()

    def close(self) -> None:
        self._started = False
        for reader in self.readers.values():
            reader.stop()
        self.readers = {}
