"""Pooled connections to one metastore, shared by every client connection.

A Hive metastore binds a connection to the identity of its first ``set_ugi`` call and refuses to change it
("UGI is already set. Resetting is not allowed"), so idle connections are kept per identity. A client's
calls always travel on a connection that carries the client's own identity.
"""

from __future__ import annotations

from collections import deque

from thrift.Thrift import TMessageType

from waggle.config.model import Limits, MetastoreConfig
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.upstream.client import Identity, UpstreamConnection, UpstreamError, connect
from waggle.upstream.deadlines import Deadlines
from waggle.wire import decode_message


class UpstreamPool:
    def __init__(self, config: MetastoreConfig, limits: Limits, deadlines: Deadlines) -> None:
        self.config = config
        self.limits = limits
        self.deadlines = deadlines
        self._idle: dict[Identity | None, deque[UpstreamConnection]] = {}
        self._ugi_replies: dict[Identity, list[str]] = {}
        self._idle_total = 0
        self.opened = 0
        self.closed = False

    @property
    def name(self) -> str:
        return self.config.name

    def _open(self, identity: Identity | None) -> UpstreamConnection:
        conn = connect(self.config, self.limits, self.deadlines)
        self.opened += 1
        if identity is not None:
            try:
                self._ugi_replies[identity] = _set_ugi(conn, identity)
            except BaseException:
                conn.close()
                raise
        conn.identity = identity
        return conn

    def acquire(self, identity: Identity | None) -> UpstreamConnection:
        idle = self._idle.get(identity)
        while idle:
            conn = idle.pop()
            self._idle_total -= 1
            if conn.is_reusable():
                return conn
            conn.close()
        return self._open(identity)

    def release(self, conn: UpstreamConnection) -> None:
        if conn.broken or self.closed:
            conn.close()
            return
        if self._idle_total >= self.config.pool_max_idle:
            conn.close()
            return
        self._idle.setdefault(conn.identity, deque()).append(conn)
        self._idle_total += 1

    def set_ugi_reply(self, identity: Identity) -> list[str]:
        """The metastore's answer to ``set_ugi`` for this identity, opening a connection if none was."""
        if identity not in self._ugi_replies:
            self.release(self.acquire(identity))
        return self._ugi_replies[identity]

    def idle_count(self) -> int:
        return self._idle_total

    def close(self) -> None:
        self.closed = True
        for queue in self._idle.values():
            while queue:
                queue.pop().close()
        self._idle.clear()
        self._idle_total = 0


def _set_ugi(conn: UpstreamConnection, identity: Identity) -> list[str]:
    user, groups = identity
    args = ThriftHiveMetastore.set_ugi_args(user_name=user, group_names=list(groups))
    reply = conn.call(conn.wire.encode("set_ugi", TMessageType.CALL, 0, args))
    assert reply is not None
    if reply.header.mtype != TMessageType.REPLY:
        raise UpstreamError(conn.member, "refused set_ugi")
    _, result = decode_message(
        reply.raw, conn.wire.format.protocol, ThriftHiveMetastore.set_ugi_result, conn.wire.limits
    )
    if result.o1 is not None:
        raise UpstreamError(conn.member, f"refused set_ugi: {result.o1.message}")
    return list(result.success or [])
