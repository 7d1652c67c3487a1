"""What one notification event makes the cache forget, and how far a member's log has been read.

Pure: the reader (:mod:`waggle.cache.reader`) fetches events and passes them here.

An event names the database and table it changed (``dbName``, ``tableName``). A rename says its old name only in
its message (``ALTER_TABLE``: the ``db`` and ``table`` of a message are the table before), which is read in both
the formats metastores write: ``json-0.2`` (Hive 2 and 3) and Hive 4's ``gzip(json-2.0)`` (base64 of gzipped
JSON). An event that names no database and is not a transaction's bookkeeping, or a rename whose message cannot
be read, makes the member's entries all go: waggle cannot tell what changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from waggle.hms.notification_log import read_message

__all__ = ["Cursor", "Drop", "Read", "drops"]

#: events that change no metadata a cached reply holds (transactions' own bookkeeping)
NOTHING_CACHED = frozenset({"OPEN_TXN", "COMMIT_TXN", "ABORT_TXN", "ALLOC_WRITE_ID", "CREATE_FUNCTION",
                            "DROP_FUNCTION", "UPDATE_TABLE_COLUMN_STAT", "DELETE_TABLE_COLUMN_STAT",
                            "UPDATE_PARTITION_COLUMN_STAT", "DELETE_PARTITION_COLUMN_STAT", "COMMIT_COMPACTION"})
#: events whose message may name an older table or database than the event does (a rename)
RENAMES = frozenset({"ALTER_TABLE", "ALTER_DATABASE"})
#: how long a hole in the ids (an id handed out, its change not committed yet) is waited for before it is a gap
HOLE_SECONDS = 10.0


class Drop(NamedTuple):
    """Forget a table (and its database's database-wide entries), a whole database (``table`` None), or the whole
    member (``db`` None too). Names are lower case, the member's own."""

    db: str | None
    table: str | None = None


EVERYTHING = Drop(None)


def drops(event_type: str, db: str | None, table: str | None, message: str | None,
          message_format: str | None = None) -> tuple[Drop, ...]:
    """What the cache forgets for one event."""
    kind = (event_type or "").upper()
    db = (db or "").lower() or None
    table = (table or "").lower() or None
    if db is None:
        return () if kind in NOTHING_CACHED else (EVERYTHING,)
    here = Drop(db, table)
    if kind not in RENAMES:
        return (here,)
    before = _message_names(message, message_format)
    if before is None:
        return (EVERYTHING,)
    old_db, old_table = before
    if kind == "ALTER_DATABASE":
        return (Drop(db),) if old_db in (None, db) else (Drop(db), Drop(old_db))
    if old_db is None or (old_db, old_table) == (db, table):
        return (here,)
    return (here, Drop(old_db, old_table))


def _message_names(message: str | None, message_format: str | None) -> tuple[str | None, str | None] | None:
    """The ``db`` and ``table`` a message names, or None when it cannot be read."""
    body = read_message(message, message_format)
    if not isinstance(body, dict):
        return None
    db, table = body.get("db"), body.get("table")
    return (db.lower() if isinstance(db, str) and db else None,
            table.lower() if isinstance(table, str) and table else None)


# -- how far a log has been read ----------------------------------------------------------------------------
class Read(NamedTuple):
    """What one page of a log says: the events to apply (new ones, in id order), and why the member's entries
    must all go instead, if they must."""

    events: tuple[Any, ...]
    gap: str | None


@dataclass(slots=True)
class Cursor:
    """Where a member's log has been read to: every id up to :attr:`last` is applied. Hive hands out an event's
    id before its change commits, so a later id can be read before an earlier one: such a hole is asked for
    again (from :attr:`last`) until it fills, and after :data:`HOLE_SECONDS` it is a gap."""

    last: int
    #: ids past ``last`` already applied (read past a hole)
    ahead: frozenset[int] = frozenset()
    hole_since: float | None = None

    def take(self, current: int, page: list[Any], now: float, purged: bool = False) -> Read:
        """``current``: the newest id, read before ``page`` (the events after :attr:`last`, in id order);
        ``purged``: the events right after :attr:`last` are known gone (the log no longer holds the last one read)."""
        if current < self.last:
            why = f"the notification log started again: its newest event is {current}, waggle had read {self.last}"
            self._restart(current)
            return Read((), why)
        if purged:
            why = f"events after {self.last} were purged from the log before they were read"
            self._restart(max(current, page[-1].eventId if page else current))
            return Read((), why)
        fresh = tuple(e for e in page if e.eventId > self.last and e.eventId not in self.ahead)
        ids = sorted({self.last, *self.ahead, *(e.eventId for e in page if e.eventId > self.last)})
        last = self.last
        for i in ids[1:]:
            if i != last + 1:
                break
            last = i
        ahead = frozenset(i for i in ids if i > last)
        self.last = last
        self.ahead = ahead
        if not ahead:
            self.hole_since = None
            return Read(fresh, None)
        if self.hole_since is None:
            self.hole_since = now
        if now - self.hole_since >= HOLE_SECONDS:
            why = f"events {self.last + 1}-{min(ahead) - 1} never appeared (purged, or never committed)"
            self._restart(max(ahead))
            return Read(fresh, why)
        return Read(fresh, None)

    def _restart(self, last: int) -> None:
        self.last, self.ahead, self.hole_since = last, frozenset(), None
