"""One connection to one upstream metastore: connect with a timeout, call, read the reply with a timeout."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from thrift.Thrift import TApplicationException, TMessageType

from waggle.common.streams import SocketStream
from waggle.config.model import HostPort, Limits, MetastoreConfig
from waggle.hms import specs
from waggle.hms.decode import decode_message
from waggle.hms.headers import WireError
from waggle.hms.wire import Channel, Header, PeerClosed, Wire
from waggle.upstream.deadlines import Deadlines
from waggle.upstream.handshake import SecurityFailed, Unreachable, UpstreamCredentials, dial, handshake, tune

if TYPE_CHECKING:
    from waggle.upstream.tunnel import Tunnel

_REPLY = TMessageType.REPLY

#: A client identity as given to ``set_ugi``: (user, groups). ``None`` means the client never called it.
Identity = tuple[str, tuple[str, ...]]


class Lost(enum.Enum):
    """How a call lost its metastore, where that says something about the metastore itself (see
    :attr:`UpstreamError.lost`)."""

    #: no connection could be opened: refused, reset, or the connect timed out. The metastore is gone.
    UNREACHABLE = "unreachable"
    #: the connection was closed or reset under the call, before any reply: the metastore may be gone
    DROPPED = "dropped"
    #: the call was let go while it waited, because the metastore was found down meanwhile
    RELEASED = "released"
    #: no reply within the read timeout
    TIMED_OUT = "timed_out"


class UpstreamError(Exception):
    """The metastore could not be reached, or failed mid-call. ``str()`` names the metastore."""

    def __init__(self, member: str, detail: str, partial_reply_sent: bool = False, lost: Lost | None = None,
                 sent: bool = False) -> None:
        super().__init__(f"metastore '{member}' {detail}")
        self.member = member
        self.detail = detail
        #: Part of the reply already reached the client: the client connection cannot be answered any more.
        self.partial_reply_sent = partial_reply_sent
        #: how the metastore was lost (None: it answered, with an error or with something waggle cannot read)
        self.lost = lost
        #: the call's request had been sent when it failed: a write may have been applied
        self.sent = sent


class Reply(NamedTuple):
    header: Header
    raw: bytes  # the whole reply, or what remains of it when ``streamed`` bytes went to the sink already
    first_field: int  # 0: success; >0: a declared exception; -1: empty/void; see Wire.first_field_id
    streamed: int


class UpstreamConnection:
    """A connection to one metastore (a stream: a connected socket's, or an in-memory one in tests), used by one
    call at a time (the pool guarantees it). Whatever closes or shuts it down goes through :attr:`stream`."""

    __slots__ = ("_deadlines", "_read_timeout", "address", "broken", "deadline", "identity", "member",
                 "released", "stream", "suspect_at", "timed_out", "tunnel", "tunnel_port", "wire")

    def __init__(self, member: str, address: HostPort, stream: Channel, config: MetastoreConfig,
                 limits: Limits, deadlines: Deadlines) -> None:
        self.member = member
        self.address = address
        self.stream = stream
        self.wire = Wire(stream, config.wire, limits)
        self.identity: Identity | None = None
        self.broken = False
        self.timed_out = False
        #: why the call in flight was let go (its metastore was found down while it waited), or ""
        self.released = ""
        #: when the call in flight is due to have its metastore checked (see waggle.upstream.deadlines)
        self.deadline = self.suspect_at = 0.0
        #: the SSH tunnel this connection goes through, and its port on the tunnel's side (to ask why it broke)
        self.tunnel: Tunnel | None = None
        self.tunnel_port = 0
        self._deadlines = deadlines
        self._read_timeout = (config.read_timeout_ms + config.latency_ms) / 1000.0
        stream.settimeout(None)  # the read timeout is enforced by ``deadlines``

    def abort(self) -> None:
        """Called by the deadline watchdog: wake the blocked call by shutting the connection down."""
        self.broken = True
        self.stream.shutdown()

    def call(self, raw: bytes, oneway: bool = False, sink: Callable[[bytes], None] | None = None,
             stream_after: int = 0, timeout: float | None = None) -> Reply | None:
        """Send one encoded request and return the raw reply. Any failure marks the connection broken.

        With a ``sink``, a reply longer than ``stream_after`` bytes is passed to it while it arrives.
        ``timeout`` (seconds) replaces the metastore's read timeout for this call.
        """
        wire = self.wire
        read_timeout = self._read_timeout if timeout is None else timeout
        self._deadlines.watch(self, read_timeout)
        sent = False
        try:
            wire.send_raw(raw)
            sent = True
            if oneway:
                return None
            header = wire.read_begin()
            if sink is not None:
                wire.stream_to(sink, stream_after)
            wire.skip_struct()
            raw_reply = wire.read_end()
        except (TimeoutError, PeerClosed, WireError, OSError) as exc:
            raise self._failed(exc, sent, read_timeout) from exc
        finally:
            self._deadlines.done(self)
        if header.mtype != _REPLY:
            # A TApplicationException may mean the metastore lost its place in the stream ("Unrecognized type"
            # and the rest of the call read as a new one): never reuse this connection.
            self.broken = True
            return Reply(header, raw_reply, -1, wire.streamed)
        if wire.streamed:
            return Reply(header, raw_reply, wire.first_field, wire.streamed)
        return Reply(header, raw_reply, wire.first_field_id(raw_reply), 0)

    def _failed(self, exc: Exception, sent: bool, read_timeout: float) -> UpstreamError:
        """The error a call that failed with ``exc`` raises: what it says, and how the metastore was lost."""
        self.broken = True
        tunnel = None
        if self.tunnel is not None and not self.timed_out and not self.released and \
                isinstance(exc, (PeerClosed, ConnectionError)):
            tunnel = self.tunnel.explain(self.tunnel_port)  # the tunnel broke (naming the hop), or None
        member, address = self.member, self.address
        if self.wire.streamed:
            what = f"lost its SSH tunnel: {tunnel}" if tunnel else f"failed ({address}): {exc}"
            return UpstreamError(member, f"{what}, in the middle of a streamed reply", partial_reply_sent=True,
                                 lost=Lost.DROPPED, sent=sent)
        if self.released:
            return UpstreamError(member, f"was found down while the call waited for it ({address}): "
                                         f"{self.released}", lost=Lost.RELEASED, sent=sent)
        if self.timed_out:
            return UpstreamError(member, f"did not answer within {read_timeout:g}s ({address})", lost=Lost.TIMED_OUT,
                                 sent=sent)
        if tunnel is not None:
            return UpstreamError(member, f"lost its SSH tunnel mid-call: {tunnel}", lost=Lost.DROPPED, sent=sent)
        if isinstance(exc, PeerClosed):
            return UpstreamError(member, f"closed the connection ({address})", lost=Lost.DROPPED, sent=sent)
        if isinstance(exc, WireError):
            return UpstreamError(member, f"sent an invalid reply ({address}): {exc}", sent=sent)
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return UpstreamError(member, f"connection failed ({address}): {detail}", lost=Lost.DROPPED, sent=sent)

    def exchange(self, name: str, args: Any, result_class: type, seqid: int = 0, timeout: float | None = None
                 ) -> Any:
        """Call ``name`` with decoded ``args``: the decoded result struct (declared exceptions included), or the
        ``TApplicationException`` the metastore answered with."""
        return self._exchange(name, self.wire.encode(name, TMessageType.CALL, seqid, args), result_class,
                              timeout)[0]

    def _exchange(self, name: str, request: bytes, result_class: type, timeout: float | None) -> tuple[Any, bytes]:
        reply = self.call(request, timeout=timeout)
        assert reply is not None
        try:
            return decode_message(reply.raw, self.wire.format.protocol, result_class, self.wire.limits)[1], reply.raw
        except WireError as exc:
            self.broken = True
            raise UpstreamError(self.member, f"answered {name} with a reply waggle cannot decode: {exc}") from exc

    def invoke(self, name: str, args: Any, result_class: type, seqid: int = 0, timeout: float | None = None
               ) -> Any:
        """Call ``name`` with decoded ``args`` and return the decoded result; an application error or a declared
        exception in the reply becomes an :class:`UpstreamError` naming the metastore."""
        return self._checked(name, self.exchange(name, args, result_class, seqid, timeout))

    def ask(self, name: str, args: Any, request: bytes | None, result_class: type, seqid: int = 0,
            timeout: float | None = None) -> tuple[Any, bytes]:
        """:meth:`invoke`, sending ``request`` (the call already encoded in this connection's protocol) when
        given, and returning the reply's own bytes with its decoded result."""
        if request is None:
            request = self.wire.encode(name, TMessageType.CALL, seqid, args)
        result, raw = self._exchange(name, request, result_class, timeout)
        return self._checked(name, result), raw

    def _checked(self, name: str, result: Any) -> Any:
        if isinstance(result, TApplicationException):
            raise UpstreamError(self.member, f"answered {name} with an application error: {result.message}")
        exc = specs.raised(result)
        if exc is not None:
            raise UpstreamError(self.member, f"answered {name} with {type(exc).__name__}: "
                                             f"{getattr(exc, 'message', exc)}")
        return result

    def is_reusable(self) -> bool:
        """False when the peer has closed (or sent unsolicited bytes on) this idle connection.

        An idle, healthy connection has nothing to read; anything readable (EOF, a reset, stray bytes) means
        it is out of step. The stream tells without waiting (a socket's: one non-blocking ``poll``).
        """
        return not self.broken and not self.stream.readable()

    def close(self) -> None:
        self.broken = True
        self.stream.close()


#: How pools and health checks open a connection to a metastore: :func:`connect`, or an in-memory
#: metastore in tests.
Connector = Callable[..., "UpstreamConnection"]


def connect(config: MetastoreConfig, limits: Limits, deadlines: Deadlines,
            addresses: tuple[HostPort, ...] | None = None, tunnel: Tunnel | None = None,
            credentials: UpstreamCredentials | None = None, token: str | None = None) -> UpstreamConnection:
    """Connect to the first of the metastore's URIs that accepts, in order (through ``tunnel``, if given), then
    do its TLS and SASL handshakes (as waggle, or with ``token``, a caller's delegation token from it)."""
    timeout = (config.connect_timeout_ms + config.latency_ms) / 1000.0
    if tunnel is not None:
        from waggle.upstream.tunnel import TunnelUnavailable

        try:
            sock, address = tunnel.open(timeout)
        except TunnelUnavailable as exc:
            raise UpstreamError(config.name, str(exc), lost=Lost.UNREACHABLE) from None
        tune(sock)
        host = config.uris[0].host  # Kerberos and TLS name the metastore's host, not the tunnel's local end
    else:
        try:
            sock, address = dial(addresses or config.uris, timeout)
        except Unreachable as exc:
            raise UpstreamError(config.name, f"is unreachable: {exc}", lost=Lost.UNREACHABLE) from None
        host = address.host
    try:
        secured = handshake(sock, config, address, host, credentials, token, limits.max_message_bytes + 1024,
                            timeout)
    except SecurityFailed as exc:
        raise UpstreamError(config.name, str(exc)) from None
    conn = UpstreamConnection(config.name, address, SocketStream(secured), config, limits, deadlines)
    if tunnel is not None:
        conn.tunnel, conn.tunnel_port = tunnel, sock.getsockname()[1]
    return conn
