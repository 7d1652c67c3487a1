"""What a handler of a call waggle answers itself is given: the connection's session and wire, what is running
(a :class:`~waggle.server.context.ServerContext`), and the one way to send a plan's call upstream (see
:data:`waggle.server.own.HANDLERS`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from waggle.call.values import Answer, Send, Session
    from waggle.hms.wire import Wire
    from waggle.server.context import ServerContext
    from waggle.upstream.pool import UpstreamPool


class Desk(Protocol):
    """One client connection, as the handlers of self-answered calls see it (the driver is one)."""

    #: what is running
    context: ServerContext
    session: Session
    wire: Wire
    #: the client's address, host:port
    peer: str

    def pool(self, name: str) -> UpstreamPool:
        """The pool of metastore ``name`` in the routes the call was planned with."""
        ...

    def send(self, step: Send) -> Answer:
        """Send the plan's call to its metastore (through the method's bridge where the metastore needs one)."""
        ...


#: answers one plan of its kind
Handler = Callable[[Desk, "Send"], "Answer"]
