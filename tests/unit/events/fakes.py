"""In-memory stand-ins for the merged log's surroundings: a member's log and its pool, the journal's store in the
primary, and the names clients see (a real Shown, from a federation file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from waggle.config.loader import load
from waggle.events.journal import BLOCK_PAGES, Block, Position, Round, Span, Tail
from waggle.events.shown import Shown
from waggle.events.store import JournalError
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore.ttypes import (
    CurrentNotificationEventId,
    NotificationEvent,
    NotificationEventResponse,
)
from waggle.routing.databases import PrefixedMap
from waggle.routing.federation import Planner
from waggle.upstream.client import UpstreamError

#: the primary ``main`` shows its databases as they are; ``fed`` shows ``sales`` and ``web`` (only its table
#: ``visits``) as ``fed_sales`` and ``fed_web``
FEDERATION = """\
primary-meta-store:
  name: main
  remote-meta-store-uris: thrift://h:1
federated-meta-stores:
- name: fed
  remote-meta-store-uris: thrift://h:2
  database-prefix: fed_
  mapped-databases: [sales, web]
  mapped-tables:
  - database: web
    mapped-tables: [visits]
"""


def shown_for(tmp: Path) -> Shown:
    """The names clients see in :data:`FEDERATION`."""
    path = tmp / "federation.yml"
    path.write_text(FEDERATION)
    config = load(None, str(path))
    fed = config.federation
    planner = Planner(fed, config.server.database_resolution, PrefixedMap(fed))
    return Shown(planner, {m.name: m for m in fed.members})


def event(event_id: int, db: str | None = "sales", table: str | None = "orders", time: int | None = None,
          kind: str = "ALTER_TABLE") -> NotificationEvent:
    """A member's event (its time: 1000 + its id, unless given)."""
    return NotificationEvent(eventId=event_id, eventTime=1000 + event_id if time is None else time, eventType=kind,
                             dbName=db, tableName=table, message="{}")


class MemberLog:
    """A metastore's notification log as a connection answers it: ``events`` by id, ``newest`` the current id."""

    def __init__(self) -> None:
        self.events: dict[int, NotificationEvent] = {}
        self.seconds: dict[int, list[NotificationEvent]] = {}  # more events of an id (HIVE-16886)
        self.newest = 0
        self.calls: list[tuple[str, int, int]] = []  # (method, after, most)

    def add(self, *events: NotificationEvent) -> MemberLog:
        for found in events:
            self.events[found.eventId] = found
            self.newest = max(self.newest, found.eventId)
        return self

    def add_again(self, found: NotificationEvent) -> MemberLog:
        """Another event under an id the log holds already (two writes read the same next id)."""
        self.seconds.setdefault(found.eventId, []).append(found)
        return self

    def restart(self) -> None:
        """The log starts again from id 1 (its database emptied)."""
        self.events.clear()
        self.seconds.clear()
        self.newest = 0

    def invoke(self, name: str, args: Any, result_class: type, seqid: int = 0, timeout: float | None = None) -> Any:
        if name == "get_current_notificationEventId":
            self.calls.append((name, 0, 0))
            return T.get_current_notificationEventId_result(success=CurrentNotificationEventId(self.newest))
        assert name == "get_next_notification", name
        after, most = args.rqst.lastEvent, args.rqst.maxEvents
        self.calls.append((name, after, most))
        found = [e for i in sorted(self.events) if i > after for e in (self.events[i], *self.seconds.get(i, ()))
                 ][:most]
        return T.get_next_notification_result(success=NotificationEventResponse(found))

    def fetches(self) -> list[tuple[int, int]]:
        """The (after, most) of every get_next_notification."""
        return [(after, most) for name, after, most in self.calls if name == "get_next_notification"]


class Pool:
    """A member's pool: ``using`` runs the function on the member's log, or fails while ``down``."""

    def __init__(self, name: str, log: MemberLog | None = None) -> None:
        self.name = name
        self.log = log if log is not None else MemberLog()
        self.down = False
        self.uses = 0

    def using(self, identity: Any, fn: Callable[[Any], Any]) -> Any:
        self.uses += 1
        if self.down:
            raise UpstreamError(self.name, "is unreachable")
        return fn(self.log)


class Store:
    """The journal's blocks as the primary keeps them: each block's parameters (text), by its first id."""

    def __init__(self, *blocks: Block) -> None:
        self.params: dict[int, dict[str, str]] = {}
        self.lists = 0
        self.reads: list[int] = []
        self.writes: list[tuple[int, bool]] = []
        self.dropped: list[int] = []
        self.ensured = 0
        self.lease_value: str | None = None
        for block in blocks:
            self.put(block)

    def ensure(self) -> None:
        self.ensured += 1

    def lease(self) -> str | None:
        return self.lease_value

    def set_lease(self, value: str | None) -> None:
        self.lease_value = value

    def put(self, block: Block) -> None:
        """A block written by someone else (no write is counted)."""
        self.params[block.first] = block.parameters()

    def firsts(self) -> list[int]:
        self.lists += 1
        return sorted(self.params)

    def read(self, first: int) -> Block | None:
        self.reads.append(first)
        found = self.params.get(first)
        return None if found is None else Block.parse(first, dict(found))

    def write(self, block: Block, new: bool) -> None:
        if new == (block.first in self.params):
            raise JournalError(f"cannot {'create' if new else 'alter'} block {block.first}")
        self.writes.append((block.first, new))
        self.params[block.first] = block.parameters()

    def drop(self, first: int) -> None:
        self.dropped.append(first)
        del self.params[first]

    def last(self) -> Block:
        first = max(self.params)
        return Block.parse(first, self.params[first])


def filler(start: int, time: int = 0) -> Round:
    """A round of one lost id whose text fills half a page (of a member, long gone, with a long name)."""
    return Round(start, time, (Span("gone" * 450, 0, ((0, -1),)),))


def full(block: Block, time: int = 0) -> Block:
    """The block with filler rounds added until it is full (its tail's positions kept)."""
    while not block.full:
        added = filler(block.tail.next, time)
        block = block.with_round(added, Tail(added.end, block.tail.positions))
    assert len(block.pages) == BLOCK_PAGES
    return block


def block_of(first: int, *rounds: tuple[Span, ...], positions: dict[str, Position] | None = None,
             time: int = 100) -> Block:
    """A block of these rounds (each given at ``time``), leaving ``positions`` (both members at epoch 0 unless
    given)."""
    kept = {"main": Position(0, 0, 0), "fed": Position(0, 0, 0)} if positions is None else positions
    block = Block.empty(Tail(first, kept))
    for spans in rounds:
        made = Round(block.tail.next, time, spans)
        block = block.with_round(made, Tail(made.end, kept))
    return block


def span(member: str, *runs: tuple[int, int], epoch: int = 0) -> tuple[Span, ...]:
    """A round of one span."""
    return (Span(member, epoch, runs),)


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
