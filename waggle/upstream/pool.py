"""Pooled connections to one metastore, shared by every client connection.

A Hive metastore binds a connection to the identity of its first ``set_ugi`` call and refuses to change it
("UGI is already set. Resetting is not allowed"), so idle connections are kept per identity. A client's
calls always travel on a connection that carries the client's own identity.

The pool follows demand. A call takes its identity's idle connection released last, and an idle connection
unused for ``pool-idle-timeout`` is closed, so what stays open for an identity is what its recent peak of
concurrent calls used: the windowed peak of its calls in flight over the last ``pool-idle-timeout``, kept with
no bookkeeping per call. Under a steady load of N concurrent calls the pool holds about N connections and opens
none per call; when the load drops, the connections it no longer uses are closed once the timeout has passed.
The peak is per identity, not of the whole pool, because identities cannot share connections: users whose
calls interleave one at a time each keep their own. Idle connections over all identities are capped by
``pool-max-idle``, or when it is unset by the calls the metastore may have in flight at once
(``limits.max-calls-per-metastore``); over the cap, the connection released longest ago is closed, whatever its
identity, so users who are gone do not pin the pool.

Timed-out connections are closed by the pool's reaper, a greenlet that sleeps until the oldest idle connection
is due, runs only while the pool holds idle connections, and is killed by :meth:`close`.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import gevent
from thrift.Thrift import TMessageType

from waggle.common import metrics
from waggle.common.limiter import RETRYABLE, Limiter
from waggle.config.model import Limits, MetastoreConfig, ProtocolKind
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.hms.wire import Header
from waggle.upstream.capabilities import Capabilities
from waggle.upstream.client import Connector, Identity, Reply, UpstreamConnection, UpstreamError, connect
from waggle.upstream.deadlines import Deadlines
from waggle.upstream.handshake import UpstreamCredentials
from waggle.upstream.impersonation import DelegationTokens

if TYPE_CHECKING:
    from waggle.upstream.tunnel import Tunnel

T = TypeVar("T")
_ONEWAY = TMessageType.ONEWAY
_monotonic = time.monotonic


class UpstreamPool:
    #: Identities whose ``set_ugi`` answer is remembered (least recently used ones are forgotten).
    MAX_IDENTITIES = 1024

    def __init__(self, config: MetastoreConfig, limits: Limits, deadlines: Deadlines,
                 tunnel: Tunnel | None = None, max_calls: int = 200, queue_wait: float = 1.0,
                 connector: Connector = connect, credentials: UpstreamCredentials | None = None) -> None:
        self.config = config
        self.connector = connector
        #: waggle's own Kerberos identity (for impersonation: who asks for callers' tokens)
        self.credentials = credentials or UpstreamCredentials(None)
        #: callers' delegation tokens from this metastore (impersonation only)
        self.tokens = DelegationTokens(config.name)
        #: the metastore's SSH tunnel, shared by every connection of this pool
        self.tunnel = tunnel
        self.limits = limits
        self.deadlines = deadlines
        self._idle: dict[Identity | None, deque[UpstreamConnection]] = {}
        #: every idle connection with when it was released (monotonic), oldest first: the pool's bound evicts
        #: from the front, and the reaper closes from there those unused for pool-idle-timeout
        self._lru: OrderedDict[UpstreamConnection, float] = OrderedDict()
        self._reaper: gevent.Greenlet[[], None] | None = None
        self._ugi_replies: OrderedDict[Identity, list[str]] = OrderedDict()
        self.opened = 0
        self.closed = False
        #: what this metastore lacks, learned once for the pool (see waggle.upstream.capabilities)
        self.caps = Capabilities(config)
        #: connections lent out for a call (bounded by limits.max-calls-per-metastore)
        self.slots = Limiter(max_calls)
        self.queue_wait = queue_wait
        # the calls holding a slot, read when scraped (cheaper than counting each call in and out)
        metrics.UPSTREAM_IN_USE.labels(config.name).set_function(lambda: self.slots.busy)
        self._opened = metrics.UPSTREAM_OPENED.labels(config.name)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def busy(self) -> int:
        return self.slots.busy

    def configure(self, config: MetastoreConfig, limits: Limits, max_calls: int, queue_wait: float) -> None:
        """A reload kept this pool: the same connection settings, perhaps new routing settings or limits."""
        self.config, self.limits, self.queue_wait = config, limits, queue_wait
        self.slots.limit = max_calls

    def _open(self, identity: Identity | None) -> UpstreamConnection:
        if identity is not None and identity[0] and self.config.security.impersonation:
            conn = self._open_as(identity[0])
        else:
            conn = self.connector(self.config, self.limits, self.deadlines, tunnel=self.tunnel)
        self.opened += 1
        self._opened.inc()
        if identity is not None:
            try:
                self._remember(identity, _set_ugi(conn, identity))
            except BaseException:
                conn.close()
                raise
        conn.identity = identity
        return conn

    def _open_as(self, user: str) -> UpstreamConnection:
        """A connection on which the metastore sees ``user``: DIGEST-MD5 with ``user``'s delegation token from
        this metastore, got by waggle as a proxy user (impersonation)."""
        def fetch(owner: str) -> str:
            assert self.credentials.login is not None
            result = self.invoke(None, "get_delegation_token", ThriftHiveMetastore.get_delegation_token_args(
                token_owner=owner, renewer_kerberos_principal_name=self.credentials.login.principal),
                ThriftHiveMetastore.get_delegation_token_result)
            return str(result.success)

        def renew(token: str) -> object:
            return self.invoke(None, "renew_delegation_token", ThriftHiveMetastore.renew_delegation_token_args(
                token_str_form=token), ThriftHiveMetastore.renew_delegation_token_result)

        if self.credentials.login is None:
            raise UpstreamError(self.name, "needs waggle's own Kerberos principal and keytab to impersonate users")
        token = self.tokens.get(user, fetch, renew)
        try:
            return self.connector(self.config, self.limits, self.deadlines, tunnel=self.tunnel, token=token)
        except UpstreamError:
            self.tokens.drop(user)  # perhaps cancelled or expired at the metastore: the next try gets a new one
            raise

    def _remember(self, identity: Identity, groups: list[str]) -> None:
        self._ugi_replies[identity] = groups
        self._ugi_replies.move_to_end(identity)
        while len(self._ugi_replies) > self.MAX_IDENTITIES:
            self._ugi_replies.popitem(last=False)

    def _take(self, conn: UpstreamConnection) -> None:
        """Remove an idle connection from the pool's books."""
        del self._lru[conn]
        idle = self._idle[conn.identity]
        idle.remove(conn)
        if not idle:
            del self._idle[conn.identity]

    def acquire(self, identity: Identity | None) -> UpstreamConnection:
        """A connection for one call; waits up to ``queue_wait`` while ``max_calls`` are out, then sheds."""
        if not self.slots.acquire(self.queue_wait):
            metrics.SHED.labels("metastore").inc()
            raise Overloaded(self.name, f"is busy: {self.slots.limit} calls to it are in flight through waggle "
                                        f"(limits.max-calls-per-metastore); try again shortly "
                                        f"({RETRYABLE}: busy; nothing reached it)")
        try:
            conn = self._checkout(identity)
        except UpstreamError as exc:
            self.slots.release()
            exc.sent = False  # a connection that could not be opened (or set up) carried nothing of the call
            raise
        except BaseException:
            self.slots.release()
            raise
        return conn

    def _checkout(self, identity: Identity | None) -> UpstreamConnection:
        return self._pop_idle(identity) or self._open(identity)

    def _pop_idle(self, identity: Identity | None) -> UpstreamConnection | None:
        """The identity's reusable idle connection released last (stale ones found on the way are closed)."""
        idle = self._idle.get(identity)
        while idle:
            conn = idle.pop()  # released last: what _take does, without its search of the deque
            del self._lru[conn]
            if not idle:
                del self._idle[identity]
            if conn.is_reusable():
                return conn
            conn.close()
            idle = self._idle.get(identity)
        return None

    def release(self, conn: UpstreamConnection) -> None:
        """Give back a connection from :meth:`acquire`."""
        self.slots.release()
        self._checkin(conn)

    def _checkin(self, conn: UpstreamConnection) -> None:
        if conn.broken or self.closed:
            conn.close()
            return
        cap = self.slots.limit if self.config.pool_max_idle is None else self.config.pool_max_idle
        if cap <= 0:
            conn.close()
            return
        lru = self._lru
        while len(lru) >= cap:
            oldest = next(iter(lru))  # of whichever identity: gone users do not pin the pool
            self._take(oldest)
            oldest.close()
        idle = self._idle.get(conn.identity)
        if idle is None:
            idle = self._idle[conn.identity] = deque()
        idle.append(conn)
        lru[conn] = _monotonic()
        if self._reaper is None and self.config.pool_idle_timeout_seconds > 0:
            self._reaper = gevent.spawn(self._reap)

    def _reap(self) -> None:
        """Close idle connections unused for pool-idle-timeout, sleeping until the next one is due; end when
        none is left idle."""
        try:
            while self._lru and not self.closed:
                timeout = self.config.pool_idle_timeout_seconds
                if timeout <= 0:
                    return
                released = next(iter(self._lru.values()))
                wait = released + timeout - time.monotonic()
                if wait > 0:
                    gevent.sleep(wait)
                    continue
                oldest = next(iter(self._lru))
                self._take(oldest)
                oldest.close()
        finally:
            if self._reaper is gevent.getcurrent():
                self._reaper = None

    def set_ugi_reply(self, identity: Identity) -> list[str]:
        """The metastore's answer to ``set_ugi`` for this identity, opening a connection if none was."""
        groups = self._ugi_replies.get(identity)
        if groups is None:
            self._checkin(self._open(identity))
            groups = self._ugi_replies[identity]
        return groups

    def using(self, identity: Identity | None, use: Callable[[UpstreamConnection], T]) -> T:
        """``use`` a pooled connection for one call, and give it back. A call that ends in anything but an
        :class:`UpstreamError` (killed mid-call, an undecodable reply) leaves the connection out of step: it is
        not reused (an UpstreamError marked it itself when it had to)."""
        return self._lend(self.acquire(identity), use)

    def using_idle(self, identity: Identity | None, use: Callable[[UpstreamConnection], T]) -> tuple[T] | None:
        """:meth:`using`, when it can start at once: a slot is free and the identity has a reusable idle
        connection. Otherwise None, and nothing was waited for, opened or taken (stale idle connections found on
        the way are closed). The call itself is still bounded by its read timeout."""
        slots = self.slots
        if identity not in self._idle or slots.busy >= slots.limit or not slots.acquire(0):
            return None
        conn = self._pop_idle(identity)
        if conn is None:
            slots.release()
            return None
        return (self._lend(conn, use),)

    def _lend(self, conn: UpstreamConnection, use: Callable[[UpstreamConnection], T]) -> T:
        """``use`` an acquired connection for one call, then release it (see :meth:`using`)."""
        try:
            return use(conn)
        except UpstreamError:
            raise
        except BaseException:
            conn.broken = True
            raise
        finally:
            self.release(conn)

    def invoke(self, identity: Identity | None, name: str, args: Any, result_class: type, seqid: int = 0,
               timeout: float | None = None) -> Any:
        """One decoded call on a pooled connection (see :meth:`UpstreamConnection.invoke`)."""
        return self.using(identity, lambda conn: conn.invoke(name, args, result_class, seqid, timeout))

    def exchange(self, identity: Identity | None, name: str, args: Any, result_class: type, seqid: int = 0,
                 timeout: float | None = None) -> Any:
        """One decoded call on a pooled connection (see :meth:`UpstreamConnection.exchange`)."""
        return self.using(identity, lambda conn: conn.exchange(name, args, result_class, seqid, timeout))

    def forward(self, identity: Identity | None, header: Header, *, args: Any, raw: bytes | None,
                protocol: ProtocolKind, sink: Callable[[bytes], None] | None = None, stream_after: int = 0,
                known: bool = True) -> Reply | None:
        """Send one client call as it is (``raw``, encoded in ``protocol``, when that is this metastore's) or
        encoded from ``args``, and return the reply. With a ``sink``, a reply longer than ``stream_after`` bytes
        is passed to it while it arrives: the sink is the driver's, and only the driver writes to a client.
        ``known``: the method is in waggle's IDL (an unknown oneway call may be answered anyway: its connection
        is not reused).
        """
        oneway = header.mtype == _ONEWAY
        upstream = self.acquire(identity)
        try:
            if raw is None or upstream.wire.format.protocol is not protocol:
                if args is None:
                    raise UpstreamError(self.name, f"cannot translate unknown method '{header.name}'")
                raw = upstream.wire.encode(header.name, header.mtype, header.seqid, args)
            reply = upstream.call(raw, oneway, sink, stream_after)
            if oneway and not known:
                upstream.broken = True
            return reply
        except BaseException:
            upstream.broken = True
            raise
        finally:
            self.release(upstream)

    def idle_count(self) -> int:
        return len(self._lru)

    def close(self) -> None:
        self.closed = True
        if self._reaper is not None:
            self._reaper.kill(block=False)
            self._reaper = None
        for conn in list(self._lru):
            conn.close()
        self._lru.clear()
        self._idle.clear()


class Overloaded(UpstreamError):
    """Too many calls to one metastore are in flight: this one is shed (the metastore itself is fine)."""


def _set_ugi(conn: UpstreamConnection, identity: Identity) -> list[str]:
    user, groups = identity
    args = ThriftHiveMetastore.set_ugi_args(user_name=user, group_names=list(groups))
    result = conn.invoke("set_ugi", args, ThriftHiveMetastore.set_ugi_result)
    return list(result.success or [])
