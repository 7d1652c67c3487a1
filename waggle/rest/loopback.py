"""An HMS connection to waggle itself, inside the process: how the REST door makes its calls.

Each connection is a socket pair. One end is served by a :class:`~waggle.server.driver.ClientDriver` in a
greenlet of its own, exactly as a client's accepted connection is, but with the session of the REST caller's
identity (the front door is the REST door's token check). The other end is a Thrift transport for pyiceberg's
Hive client. So every call the door makes is planned, renamed, checked, cached and recorded as a Thrift
client's would be, and travels upstream as the caller.

The driver's last answer stays readable (:attr:`Loopback.last`): it says whether a ``MetaException`` was waggle's
refusal, a member that is down, or the member's own error, which the REST door answers with different codes.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import gevent
from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.protocol.TCompactProtocol import TCompactProtocolAccelerated
from thrift.protocol.TProtocol import TProtocolBase
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TFramedTransport, TTransportBase

from waggle.call.values import Answer, Session
from waggle.common.streams import SocketStream
from waggle.config.kinds import TransportKind
from waggle.security.frontdoor import Authenticated
from waggle.server.driver import ClientDriver

if TYPE_CHECKING:
    from waggle.server.context import ServerContext

#: how the REST door's connections show in logs (``peer``) and on the driver
PEER = "iceberg-rest"


class Loopback(TSocket):  # type: ignore[misc]
    """One in-process connection to waggle's call path, opened by :meth:`open` and served until closed."""

    def __init__(self, context: ServerContext, who: Authenticated | None, timeout: float) -> None:
        """``who``: the REST caller (None on an open port: calls carry no identity, as a Thrift client's
        without ``set_ugi``); ``timeout``: how long a call may wait for its answer, in seconds."""
        super().__init__()
        self._context = context
        self._who = who
        self._timeout_seconds = timeout
        self._served: gevent.Greenlet | None = None
        self.driver: ClientDriver | None = None

    def open(self) -> None:
        ours, theirs = socket.socketpair()
        ours.settimeout(self._timeout_seconds)
        self.driver = ClientDriver(SocketStream(theirs), PEER, self._context, Session.of(self._who))
        self._served = gevent.spawn(self._serve, self.driver, theirs)
        self.handle = ours

    @staticmethod
    def _serve(driver: ClientDriver, sock: socket.socket) -> None:
        try:
            driver.serve()
        finally:
            driver.stream.close()

    def close(self) -> None:
        super().close()  # the driver reads the end of its stream and returns
        self._served = None

    @property
    def last(self) -> Answer | None:
        """The answer waggle itself wrote to the last call (None: the member's reply, relayed as it was)."""
        return self.driver.last if self.driver is not None else None


def transport(context: ServerContext, sock: Loopback) -> tuple[TTransportBase, type[TProtocolBase]]:
    """The Thrift transport and protocol that speak the server's wire format over ``sock``.

    The protocols are thrift's accelerated ones (its C codec, as waggle's upstream clients use): pyiceberg's own
    Hive client decodes a ``get_table`` reply in pure Python, several times slower, and the door decodes one per
    ``loadTable`` and several per commit. Both transports are ones the C codec reads from."""
    wire = context.config.server.wire
    framed = wire.transport is TransportKind.FRAMED
    return (TFramedTransport(sock) if framed else TBufferedTransport(sock),
            TCompactProtocolAccelerated if wire.compact else TBinaryProtocolAccelerated)
