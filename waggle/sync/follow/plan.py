"""A page of events as work at the target, and gaps in the log. Pure: no I/O.

Every piece of work is state-based: it makes the target's table (or some of its partitions) what the source
holds *now*, or absent when the source no longer holds it. So replaying events (after a crash, before the
checkpoint moved) converges to the same state, and many events of one table collapse into one piece of work:
consecutive partition events into one set of partitions (read, added and altered in one batch each), and any
table-level event into one sync of the whole table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from waggle.hms.gen.hive_metastore.ttypes import NotificationEvent
from waggle.sync.follow.events import ALTER_TABLE_EVENT, Change, MessageError, concerns_tables, decode

Name = tuple[str, str]  # (db, table) at the source, lower case


@dataclass(frozen=True, slots=True)
class Scope:
    """The tables a policy covers: its ``DB.TABLE`` regexes (Hive REPL's policy), matched case-insensitively."""

    patterns: tuple[re.Pattern[str], ...]

    @classmethod
    def of(cls, patterns: Iterable[str]) -> Scope:
        return cls(tuple(re.compile(p, re.IGNORECASE) for p in patterns))

    def covers(self, db: str, table: str) -> bool:
        return any(p.fullmatch(f"{db}.{table}") for p in self.patterns)


@dataclass
class Work:
    """One table's work: the whole table, or some of its partitions (values by key)."""

    name: Name
    whole: bool = False
    partitions: dict[tuple[tuple[str, str], ...], None] = field(default_factory=dict)  # ordered set
    #: a rename to ``name`` from this name: the target moves with it before anything else is done
    renamed_from: Name | None = None
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
    unreadable: tuple[tuple[Skipped, Name], ...]  # with the table they name (marked failed)


def plan(events: Sequence[NotificationEvent], scope: Scope) -> Page:
    """The work for a page of events, in the order tables first appear; events outside the scope are skipped
    before their messages are read (only an ALTER_TABLE's message is read, to see a rename into the scope)."""
    work: dict[Name, Work] = {}
    skipped: list[Skipped] = []
    unreadable: list[tuple[Skipped, Name]] = []
    for event in events:
        db, table = (event.dbName or "").lower(), (event.tableName or "").lower()
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
    return Page(tuple(work.values()), tuple(skipped), tuple(unreadable))


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
