"""The cache as a connection uses it: whether a call may be answered from memory, the answer if so, and the
call to the metastore otherwise, made once for identical calls in flight together.

What a call is about (:func:`scope_of`) and what a write forgets (:func:`written`) come from the method table
(``MethodSpec.cached``, ``table_refs``, the database arguments): no method is named here.

A reply is answered from memory only while it is known to be true:

* ``cache: events``: while the member's log reader has read the log through within the last
  :data:`TRUE_FOR` seconds (:meth:`Replies.read_through`); a reader that cannot read says so
  (:meth:`Replies.unreadable`) and the member's entries go;
* ``cache: ttl``: until its ``cache-ttl`` runs out.

In both, a write through this process forgets what it names before it is answered (:meth:`Replies.wrote`).
The connection says when none of this applies (a lock held, a transaction open, a cascade): then the call
goes to the metastore and its reply is not kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import gevent.event
from thrift.Thrift import TMessageType

from waggle.cache.events import Drop
from waggle.cache.store import Key, ReplyCache, Scope
from waggle.common.metrics import CacheRow
from waggle.config.model import CacheMode, MetastoreConfig
from waggle.hms.fields import value_at
from waggle.hms.headers import body_start, header
from waggle.hms.methods import Access, Cached, MethodSpec, database_of, databases_of
from waggle.hms.wire import Header
from waggle.upstream.client import Reply

__all__ = ["TRUE_FOR", "Replies", "scope_of", "written"]

T = TypeVar("T")

#: seconds after the start of a log read that entries are still known true without a newer one
TRUE_FOR = 1.0


def _plain(name: Any) -> str | None:
    """A database or table name as the cache files it: catalog prefix (``@hive#db``) dropped, lower case."""
    if not isinstance(name, str) or not name:
        return None
    text: str = name.partition("#")[2] if name.startswith("@") else name
    return text.lower() or None


def scope_of(spec: MethodSpec, args: Any, member: str) -> Scope | None:
    """What a cacheable read is about, in the member's names; None when the call does not say (not kept)."""
    if spec.cached is Cached.TABLE:
        for ref in spec.table_refs:
            db, table = _plain(value_at(args, ref.db)), _plain(value_at(args, ref.table))
            if db is not None and table is not None:
                return Scope(member, db, table)
        return None
    db = _plain(database_of(args))
    return Scope(member, db, None) if db is not None else None


def written(spec: MethodSpec, args: Any) -> tuple[Drop, ...]:
    """What a write forgets: each table its table references name (with its database's database-wide entries),
    and each other database it names anywhere (a rename's target, a database's new definition) as a whole.
    Reads, and writes that name nothing, forget nothing."""
    if spec.access is Access.READ or args is None:
        return ()
    found: dict[Drop, None] = {}
    for ref in spec.table_refs:
        db, table = _plain(value_at(args, ref.db)), _plain(value_at(args, ref.table))
        if db is not None:
            found[Drop(db, table)] = None
    tabled = {d.db for d in found if d.table is not None}
    for name in sorted(databases_of(args)):
        db = _plain(name)
        if db is not None and db not in tabled:
            found[Drop(db)] = None
    return tuple(found)


class Replies:
    """One process's cache: its members' settings, what is known true, the entries, and the calls in flight."""

    def __init__(self, max_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = ReplyCache(max_bytes)
        self.clock = clock
        #: members with cache on, by name
        self.members: dict[str, MetastoreConfig] = {}
        #: cache: events -- when the last read of the member's log that read it through began (clock's time)
        self.true_as_of: dict[str, float] = {}
        #: cache: events -- seconds from the newest event applied being written at the member to its being applied
        self.lag: dict[str, float] = {}
        self._flights: dict[tuple[Key, tuple[int, int]], gevent.event.AsyncResult] = {}

    # -- configuration ------------------------------------------------------------------------------------------
    def configure(self, members: Iterable[MetastoreConfig], max_bytes: int) -> list[str]:
        """Take a configuration's members: one whose caching settings or address changed, or that is gone, has
        its entries forgotten. The names of those forgotten."""
        now = {m.name: m for m in members if m.cache is not CacheMode.OFF}
        changed = [name for name, old in self.members.items()
                   if name not in now or _cache_key(now[name]) != _cache_key(old)]
        for name in changed:
            self.forget(name, "reload")
            self.true_as_of.pop(name, None)
        self.members = now
        self.store.max_bytes = max_bytes
        return changed

    def mode(self, member: str) -> CacheMode:
        found = self.members.get(member)
        return found.cache if found is not None else CacheMode.OFF

    def true(self, member: str) -> bool:
        """Whether the member's entries may be answered now."""
        config = self.members.get(member)
        if config is None:
            return False
        if config.cache is CacheMode.TTL:
            return True
        as_of = self.true_as_of.get(member)
        return as_of is not None and self.clock() - as_of <= TRUE_FOR

    # -- what keeps it true -------------------------------------------------------------------------------------
    def read_through(self, member: str, as_of: float, drops: Iterable[Drop], newest_event: float | None = None
                     ) -> None:
        """The member's log was read through, by a read that began at ``as_of``: forget what its new events
        changed, then take the member's entries as true as of then."""
        self.apply(member, drops, "event")
        if newest_event is not None:
            self.lag[member] = max(0.0, time.time() - newest_event)
        if as_of > self.true_as_of.get(member, float("-inf")):
            self.true_as_of[member] = as_of

    def unreadable(self, member: str, cause: str) -> None:
        """The member's log cannot be read now (a gap, a restart, the member unreachable): forget its entries and
        answer none until the log is read through again."""
        self.true_as_of.pop(member, None)
        self.forget(member, cause)

    def apply(self, member: str, drops: Iterable[Drop], cause: str) -> None:
        for drop in drops:
            if drop.db is None:
                self.store.drop_member(member, cause)
            elif drop.table is None:
                self.store.drop_database(member, drop.db, cause)
            else:
                self.store.drop_table(member, drop.db, drop.table, cause)

    def forget(self, member: str, cause: str) -> int:
        return self.store.drop_member(member, cause)

    def wrote(self, member: str, spec: MethodSpec, args: Any) -> tuple[Drop, ...]:
        """A write through this process: forget what it names (called before its answer is sent, whatever the
        answer). What was forgotten, for the other processes of the replica."""
        if member not in self.members:
            return ()
        drops = written(spec, args)
        self.apply(member, drops, "write")
        return drops

    def rows(self) -> list[CacheRow]:
        """Each member's figures, for the metrics."""
        store = self.store
        return [CacheRow(name, c.hits, c.misses, c.evictions, store.member_bytes.get(name, 0), dict(c.invalidations),
                         self.lag.get(name)) for name in self.members for c in (store.count(name),)]

    # -- answering ----------------------------------------------------------------------------------------------
    def fetch(self, member: str, spec: MethodSpec, args: Any, request: bytes, seqid: int, *, client_compact: bool,
              upstream_compact: bool, user: str, wait: float, send: Callable[[], Reply | None]) -> Reply | None:
        """The metastore's reply to a read: from memory when it is there and true, else ``send()``'s, kept when it
        is a success. ``request`` is the call as the client's protocol encodes it, ``seqid`` its sequence id (the
        reply's); ``wait`` bounds how long an identical call in flight is waited for. The reply is the member's, in
        its names: the caller finishes it as it finishes any reply."""
        kind = f"{'c' if client_compact else 'b'}{'c' if upstream_compact else 'b'}"

        def kept(reply: Reply | None) -> bytes | None:
            if reply is None or reply.streamed or reply.first_field != 0 or reply.header.mtype != TMessageType.REPLY:
                return None
            return reply.raw[body_start(reply.raw, upstream_compact):]

        return self.remember(member, spec, args, request, client_compact, kind, user, wait, send, kept,
                             lambda body: _reply(spec.name, seqid, body, upstream_compact))

    def remember(self, member: str, spec: MethodSpec, args: Any, request: bytes, compact: bool, kind: str,
                 user: str, wait: float, send: Callable[[], T], kept: Callable[[T], bytes | None],
                 made: Callable[[bytes], T]) -> T:
        """What ``send()`` returns for a read, or ``made(body)`` from the body ``kept`` took of an earlier result
        of the same call (``request``, encoded in the client's protocol: ``compact``; ``kind``: what the body is,
        in which layout). ``args`` name what the read is about, in the member's names."""
        config = self.members.get(member)
        if config is None or spec.cached is None:
            return send()
        scope = scope_of(spec, args, member)
        if scope is None:
            return send()
        shared = config.cache_shared_across_users or not config.security.impersonation
        key = Key(member, "" if shared else user, kind, spec.name, request[body_start(request, compact):])
        if self.true(member):
            body = self.store.get(key, self.clock())
            if body is not None:
                return made(body)
        # not held (or not known true now): an identical call already on its way answers this one too, since it
        # left after anything this process forgot (the token), as a call sent now would
        token = self.store.token(scope)
        flight = self._flights.get((key, token))
        if flight is not None:  # the same call is on its way: its result is this one's
            try:
                body = flight.get(timeout=wait)
            except gevent.Timeout:
                body = None
            return made(body) if body is not None else send()
        flight = self._flights[(key, token)] = gevent.event.AsyncResult()
        body = None
        try:
            result = send()
            body = kept(result)
            if body is not None:
                expires = self.clock() + (config.cache_ttl_seconds or 0) if config.cache is CacheMode.TTL else None
                if config.cache is CacheMode.TTL or self.true(member):
                    self.store.put(key, scope, body, token, expires)
            return result
        finally:
            del self._flights[(key, token)]
            flight.set(body)


def _cache_key(member: MetastoreConfig) -> tuple[object, ...]:
    return (member.cache, member.cache_ttl_seconds, member.cache_shared_across_users, member.upstream_key())


def _reply(name: str, seqid: int, body: bytes, compact: bool) -> Reply:
    """A remembered reply, as the metastore would send it to this call."""
    raw = header(name, TMessageType.REPLY, seqid, compact) + body
    return Reply(Header(name, TMessageType.REPLY, seqid), raw, 0, 0)
