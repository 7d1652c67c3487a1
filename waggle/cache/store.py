"""The replies waggle remembers: encoded reply bodies by the call that asked for them, bounded in bytes.

Pure: no sockets, no clocks of its own (the caller passes ``now``), no gevent. Each entry is filed under the
member, database and table it is about (a database-wide reply under its database alone), so that a change drops
exactly what it touches:

* a change to a table drops that table's entries and its database's database-wide ones (listings, the
  database itself, several tables at once);
* a change to a database, or one whose table is not known, drops every entry of the database;
* a change waggle cannot place drops every entry of the member.

A reply is stored only if nothing it is about changed while it was being fetched: :meth:`ReplyCache.token` is
taken before the call is sent, and :meth:`ReplyCache.put` refuses a reply whose token has moved on since. So a
read that raced a write never outlives the write's drop.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["Counts", "Key", "ReplyCache", "Scope"]


class Scope(NamedTuple):
    """What a reply is about, in the member's own names (lower case): a table, or a database as a whole
    (``table`` None)."""

    member: str
    db: str
    table: str | None


class Key(NamedTuple):
    """One call as it reaches the member: who asks (``""`` when replies are shared across users), in which
    protocol, which method, and the encoded arguments (the message after its header, so the sequence id does
    not count)."""

    member: str
    user: str
    protocol: str
    method: str
    args: bytes


@dataclass(slots=True)
class _Entry:
    scope: Scope
    body: bytes
    size: int
    expires: float | None


@dataclass(slots=True)
class Counts:
    """What happened to one member's entries (read by the metrics)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    #: cause -> entries dropped for it (write, event, gap, restart, reload, admin, unreadable)
    dropped: dict[str, int] = field(default_factory=dict)
    #: cause -> times it made the cache forget (a table, a database or the member), held or not
    invalidations: dict[str, int] = field(default_factory=dict)


#: the overhead counted per entry besides its bytes (the key, the index): keeps many tiny replies bounded too
ENTRY_OVERHEAD = 200


class ReplyCache:
    """Reply bodies by :class:`Key`, the oldest used dropped first once ``max_bytes`` are held."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()
        #: member -> database -> table (None: database-wide) -> keys
        self._index: dict[str, dict[str, dict[str | None, set[Key]]]] = {}
        #: bumped by every drop: (member, database) and member-wide
        self._db_gen: dict[tuple[str, str], int] = {}
        self._member_gen: dict[str, int] = {}
        self.counts: dict[str, Counts] = {}
        self.member_bytes: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def count(self, member: str) -> Counts:
        found = self.counts.get(member)
        if found is None:
            found = self.counts[member] = Counts()
        return found

    # -- reading and storing ------------------------------------------------------------------------------------
    def get(self, key: Key, now: float) -> bytes | None:
        """The stored body of ``key``, counted as a hit (and made the newest used), or None, counted as a miss."""
        entry = self._entries.get(key)
        if entry is not None and entry.expires is not None and now >= entry.expires:
            self._remove(key, entry)
            entry = None
        counts = self.count(key.member)
        if entry is None:
            counts.misses += 1
            return None
        counts.hits += 1
        self._entries.move_to_end(key)
        return entry.body

    def token(self, scope: Scope) -> tuple[int, int]:
        """Where the changes of what ``scope`` is about stand now: :meth:`put` takes it back."""
        return self._member_gen.get(scope.member, 0), self._db_gen.get((scope.member, scope.db), 0)

    def put(self, key: Key, scope: Scope, body: bytes, token: tuple[int, int], expires: float | None = None
            ) -> bool:
        """Remember ``body`` unless what it is about changed since ``token`` was taken, or it alone is over a
        quarter of the bound. Whether it was stored."""
        size = len(body) + len(key.args) + ENTRY_OVERHEAD
        if token != self.token(scope) or size > self.max_bytes // 4:
            return False
        old = self._entries.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        entry = _Entry(scope, body, size, expires)
        self._entries[key] = entry
        self._index.setdefault(scope.member, {}).setdefault(scope.db, {}).setdefault(scope.table, set()).add(key)
        self.bytes += size
        self.member_bytes[scope.member] = self.member_bytes.get(scope.member, 0) + size
        while self.bytes > self.max_bytes and self._entries:
            oldest, dropped = next(iter(self._entries.items()))
            self._remove(oldest, dropped)
            self.count(dropped.scope.member).evictions += 1
        return key in self._entries

    # -- forgetting ---------------------------------------------------------------------------------------------
    def drop_table(self, member: str, db: str, table: str, cause: str) -> int:
        """Forget a table's entries and its database's database-wide ones."""
        self._db_gen[(member, db)] = self._db_gen.get((member, db), 0) + 1
        tables = self._index.get(member, {}).get(db)
        keys = [*tables.get(table, ()), *tables.get(None, ())] if tables else []
        return self._drop(member, keys, cause)

    def drop_database(self, member: str, db: str, cause: str) -> int:
        """Forget every entry of a database."""
        self._db_gen[(member, db)] = self._db_gen.get((member, db), 0) + 1
        tables = self._index.get(member, {}).get(db, {})
        return self._drop(member, [k for keys in tables.values() for k in keys], cause)

    def drop_member(self, member: str, cause: str) -> int:
        """Forget every entry of a member."""
        self._member_gen[member] = self._member_gen.get(member, 0) + 1
        dbs = self._index.get(member, {})
        return self._drop(member, [k for tables in dbs.values() for keys in tables.values() for k in keys], cause)

    def _drop(self, member: str, keys: list[Key], cause: str) -> int:
        for key in keys:
            entry = self._entries.get(key)
            if entry is not None:
                self._remove(key, entry)
        counts = self.count(member)
        counts.invalidations[cause] = counts.invalidations.get(cause, 0) + 1
        if keys:
            counts.dropped[cause] = counts.dropped.get(cause, 0) + len(keys)
        return len(keys)

    def _remove(self, key: Key, entry: _Entry) -> None:
        del self._entries[key]
        self._unindex(key, entry)

    def _unindex(self, key: Key, entry: _Entry) -> None:
        self.bytes -= entry.size
        member = entry.scope.member
        self.member_bytes[member] = self.member_bytes.get(member, 0) - entry.size
        dbs = self._index.get(member)
        if dbs is None:
            return
        tables = dbs.get(entry.scope.db)
        if tables is None:
            return
        keys = tables.get(entry.scope.table)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del tables[entry.scope.table]
        if not tables:
            del dbs[entry.scope.db]
