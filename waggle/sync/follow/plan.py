"""A page of events as work at the target, and gaps in the log. Pure: no I/O.

Every piece of work is state-based: it makes the target's table (or some of its partitions, a database, a
function) what the source holds *now*, or absent when the source no longer holds it. So replaying events (after a
crash, before the checkpoint moved) converges to the same state, and many events of one table collapse into one
piece of work: consecutive partition events into one set of partitions (read, added and altered in one batch
each), and any table-level event into one sync of the whole table. Likewise every event of a database (created,
altered, dropped) is one piece of work for that database, and every event of a function one for that function;
they are events of the databases the policy covers (:meth:`.scope.Scope.covers_database`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from waggle.hms.gen.hive_metastore.ttypes import NotificationEvent
from waggle.sync.follow.events import (
    ALTER_TABLE_EVENT,
    Change,
    MessageError,
    concerns_database,
    concerns_function,
    concerns_tables,
    decode,
)
from waggle.sync.follow.scope import Scope

__all__ = ["DatabaseWork", "FunctionWork", "Name", "Page", "Scope", "Skipped", "Work", "gap", "plan"]

Name = tuple[str, str]  # (db, table) at the source, lower case; (db, "") names a database


@dataclass
class Work:
    """One table's work: the whole table, or some of its partitions (values by key)."""

    name: Name
    whole: bool = False
    partitions: dict[tuple[tuple[str, str], ...], None] = field(default_factory=dict)  # ordered set
    #: a rename to ``name`` from this name: the target moves with it before anything else is done
    renamed_from: Name | None = None
    events: list[int] = field(default_factory=list)


@dataclass
class DatabaseWork:
    """One database's work: made what the source's database is now (created, its description, parameters and
    owner carried), or dropped when the source no longer has it."""

    db: str  # at the source, lower case
    events: list[int] = field(default_factory=list)


@dataclass
class FunctionWork:
    """One function's work: made what the source's function is now, or dropped when the source has none."""

    db: str  # at the source, lower case
    name: str  # lower case
    events: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Skipped:
    event_id: int
    kind: str
    reason: str  # "out of scope", or the unreadable message's error


@dataclass(frozen=True, slots=True)
class Page:
    work: tuple[Work, ...]
    skipped: tuple[Skipped, ...]
    unreadable: tuple[tuple[Skipped, Name], ...]  # with the table (or (db, "")) they name (marked failed)
    databases: tuple[DatabaseWork, ...] = ()
    functions: tuple[FunctionWork, ...] = ()


def plan(events: Sequence[NotificationEvent], scope: Scope) -> Page:
    """The work for a page of events, in the order tables first appear; events outside the scope are skipped
    before their messages are read (only an ALTER_TABLE's message is read, to see a rename into the scope).
    Database and function events of the databases the scope covers are work for those; other events (indexes,
    transactions, statistics) are skipped."""
    work: dict[Name, Work] = {}
    databases: dict[str, DatabaseWork] = {}
    functions: dict[Name, FunctionWork] = {}
    skipped: list[Skipped] = []
    unreadable: list[tuple[Skipped, Name]] = []
    for event in events:
        db, table = (event.dbName or "").lower(), (event.tableName or "").lower()
        if concerns_database(event) or concerns_function(event):
            if not scope.covers_database(db):
                skipped.append(Skipped(event.eventId, str(event.eventType), "out of scope"))
                continue
            try:
                change = decode(event)
            except MessageError as exc:
                unreadable.append((Skipped(event.eventId, str(event.eventType), str(exc)), (db, "")))
                continue
            if change.function is None:
                databases.setdefault(db, DatabaseWork(db)).events.append(change.event_id)
            else:
                functions.setdefault((db, change.function), FunctionWork(db, change.function)).events.append(
                    change.event_id)
            continue
        if not concerns_tables(event):
            skipped.append(Skipped(event.eventId, str(event.eventType), "not a table event"))
            continue
        if not scope.covers(db, table) and event.eventType != ALTER_TABLE_EVENT:
            skipped.append(Skipped(event.eventId, str(event.eventType), "out of scope"))
            continue
        try:
            change = decode(event)
        except MessageError as exc:
            if scope.covers(db, table):
                unreadable.append((Skipped(event.eventId, str(event.eventType), str(exc)), (db, table)))
            else:
                skipped.append(Skipped(event.eventId, str(event.eventType), "out of scope"))
            continue
        if not scope.covers(db, table) and not (change.renamed_from and scope.covers(*change.renamed_from)):
            skipped.append(Skipped(event.eventId, str(event.eventType), "out of scope"))
            continue
        _add(work, change, scope)
    return Page(tuple(work.values()), tuple(skipped), tuple(unreadable), tuple(databases.values()),
                tuple(functions.values()))


def _add(work: dict[Name, Work], change: Change, scope: Scope) -> None:
    name = (change.db, change.table)
    if change.renamed_from is not None:
        old = change.renamed_from
        # the old name's own work first, then the move (the old table is gone at the source: its target is
        # renamed when it is ours, else dropped or kept by propagate-deletes)
        if scope.covers(*name):
            w = work.setdefault(name, Work(name))
            w.whole, w.partitions, w.renamed_from = True, {}, old
            w.events.append(change.event_id)
        if scope.covers(*old):
            gone = work.pop(old, None) or Work(old)
            gone.whole, gone.partitions = True, {}
            gone.events.append(change.event_id)
            work[old] = gone  # after the rename's work: the move happens first
        return
    w = work.setdefault(name, Work(name))
    w.events.append(change.event_id)
    if w.whole:
        return
    if change.whole_table:
        w.whole, w.partitions = True, {}
        return
    for values in change.partitions:
        w.partitions[values] = None


# -- gaps ---------------------------------------------------------------------------------------------------------
def gap(checkpoint: int, first_read: int | None, current: int) -> str | None:
    """Why the events after ``checkpoint`` cannot all be read (HIVE-19219, HIVE-20629), or None.

    ``current`` is the source's current event id read *before* the page, ``first_read`` the first event id the
    page returned (None: no events). Ids are contiguous, so a first event after ``checkpoint + 1``, or none while
    ``current`` is past the checkpoint, means events were purged (their time to live) before they were read; a
    ``current`` below the checkpoint means the source's log started again (a new metastore database)."""
    if current < checkpoint:
        return f"the source's notification log restarted: its newest event is {current}, the checkpoint {checkpoint}"
    if first_read is not None and first_read > checkpoint + 1:
        return f"events {checkpoint + 1}-{first_read - 1} were purged from the source before they were read"
    if first_read is None and current > checkpoint:
        return f"events {checkpoint + 1}-{current} were purged from the source before they were read"
    return None
