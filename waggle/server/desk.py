"""What a handler of a call waggle answers itself is given: the connection's session and wire, what is running
(a :class:`~waggle.server.context.ServerContext`), and the one way to send a plan's call upstream (see
:data:`waggle.server.own.HANDLERS`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from waggle.call.values import Answer, Call, Outcome, Send, Session
    from waggle.hms.wire import Wire
    from waggle.server.context import ServerContext
    from waggle.upstream.client import UpstreamError
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

    #: exceptions that end the connection, which a handler lets through
    fatal: tuple[type[BaseException], ...]

    def fail(self, call: Call, message: str, outcome: Outcome, metastore: str, **fields: Any) -> Answer:
        """A ``MetaException`` saying ``message``, where this client's release reads it."""
        ...

    def lost(self, call: Call, pool: UpstreamPool, exc: UpstreamError, started: float, **fields: Any) -> Answer:
        """The answer to a call whose metastore failed it (planned again, or saying what is known)."""
        ...

    def send(self, step: Send, replied: Callable[[], None] | None = None) -> Answer:
        """Send the plan's call to its metastore (through the method's bridge where the metastore needs one);
        ``replied`` is called once the metastore replied (whatever the reply)."""
        ...


#: answers one plan of its kind (a Send, or for Kind.PAIRED a Paired)
Handler = Callable[[Desk, Any], "Answer"]
