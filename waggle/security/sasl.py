"""SASL on a Thrift connection, framed as Hive's ``TSaslServerTransport`` and ``TSaslClientTransport`` frame it.

Negotiation is a series of messages, each a status byte, a 4-byte big-endian length and a payload. The client
opens with ``START`` and the mechanism's name, then sends the mechanism's initial response. Each side answers
with ``OK`` while it has more to say and ``COMPLETE`` once it is done. ``BAD`` and ``ERROR`` end the
negotiation with a message.

After the negotiation every write is one frame: a 4-byte length, then the payload. When the negotiated
quality of protection is ``auth-int`` or ``auth-conf``, the payload is wrapped by the mechanism.
:class:`SaslSocket` does this framing behind the socket interface that :class:`~waggle.hms.wire.Wire` uses, so
nothing above it knows SASL is there.

The mechanisms themselves (:mod:`waggle.security.gss`, :mod:`waggle.security.digest`) are pure: they turn
bytes into bytes. Only :func:`accept` and :func:`initiate` touch a socket.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Mapping
from typing import Any, Protocol

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
_STATUS_NAMES = {START: "START", OK: "OK", BAD: "BAD", ERROR: "ERROR", COMPLETE: "COMPLETE"}
_HEADER = struct.Struct("!BI")
_LENGTH = struct.Struct("!I")
#: the largest negotiation message accepted (a Kerberos AP-REQ with a PAC is a few KB)
MAX_NEGOTIATION_BYTES = 1 << 20
_RECV = 256 * 1024


class SaslError(Exception):
    """The negotiation failed. ``str()`` says why, in words fit for a log line (never a key or a token)."""


class Mechanism(Protocol):
    """One side of one SASL mechanism's exchange: bytes in, bytes out, no I/O."""

    name: str

    @property
    def complete(self) -> bool: ...

    def step(self, data: bytes) -> bytes:
        """The answer to the peer's ``data`` (raise :class:`SaslError` to refuse)."""
        ...

    @property
    def wraps(self) -> bool:
        """The negotiated protection needs every frame wrapped (``auth-int`` or ``auth-conf``)."""
        ...

    def wrap(self, data: bytes) -> bytes: ...

    def unwrap(self, data: bytes) -> bytes: ...


class ClientMechanism(Mechanism, Protocol):
    def initial(self) -> bytes:
        """The initial response sent right after ``START`` (empty when the mechanism has none)."""
        ...


def status_name(status: int) -> str:
    return _STATUS_NAMES.get(status, str(status))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    parts = []
    while n:
        data = sock.recv(min(n, _RECV))
        if not data:
            raise SaslError("the peer closed the connection during the SASL negotiation")
        parts.append(data)
        n -= len(data)
    return b"".join(parts)


def read_message(sock: socket.socket) -> tuple[int, bytes]:
    status, length = _HEADER.unpack(_recv_exact(sock, 5))
    if status not in _STATUS_NAMES:
        raise SaslError(f"not a SASL negotiation message (status byte {status:#04x})")
    if length > MAX_NEGOTIATION_BYTES:
        raise SaslError(f"SASL negotiation message of {length} bytes is over the limit of {MAX_NEGOTIATION_BYTES}")
    return status, _recv_exact(sock, length) if length else b""


def send_message(sock: socket.socket, status: int, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(status, len(payload)) + payload)


def _refuse(sock: socket.socket, status: int, message: str) -> SaslError:
    try:
        send_message(sock, status, message.encode("utf-8"))
    except OSError:
        pass
    return SaslError(message)


def accept(sock: socket.socket, mechanisms: Mapping[str, Callable[[], Mechanism]]) -> Mechanism:
    """Run the server side of a negotiation on ``sock``; the completed mechanism, or :class:`SaslError`.

    A peer that does not start with ``START`` (a client without SASL sends a Thrift call) is answered ``BAD``
    before anything else is read.
    """
    head = _recv_exact(sock, 5)
    status, length = _HEADER.unpack(head)
    if status in (BAD, ERROR) and length <= 4096:
        # A Java client whose own mechanism fails first (GSSAPI without a ticket) says so before any START.
        reason = _recv_exact(sock, length).decode("utf-8", "replace") if length else ""
        raise SaslError(f"the client gave up before starting the SASL negotiation ({status_name(status)}): "
                        f"{reason[:200] or 'no reason given'}")
    if status != START:
        raise _refuse(sock, BAD, f"expected a SASL START message, got bytes {head[:5].hex()}: this server "
                                 f"requires SASL ({' or '.join(mechanisms)})")
    if length > 256:
        raise _refuse(sock, BAD, f"SASL START message of {length} bytes names no mechanism")
    name = _recv_exact(sock, length).decode("utf-8", "replace") if length else ""
    factory = mechanisms.get(name)
    if factory is None:
        raise _refuse(sock, BAD, f"unsupported SASL mechanism '{name[:64]}'; this server offers "
                                 f"{', '.join(mechanisms)}")
    mech = factory()
    while not mech.complete:
        status, payload = read_message(sock)
        if status in (BAD, ERROR):
            raise SaslError(f"the client ended the SASL negotiation: {payload[:200].decode('utf-8', 'replace')}")
        if status not in (OK, COMPLETE):
            raise _refuse(sock, ERROR, f"expected a SASL OK or COMPLETE message, got {status_name(status)}")
        try:
            challenge = mech.step(payload)
        except SaslError as exc:
            raise _refuse(sock, BAD, str(exc)) from None
        send_message(sock, COMPLETE if mech.complete else OK, challenge)
    return mech


def initiate(sock: socket.socket, mech: ClientMechanism) -> None:
    """Run the client side of a negotiation on ``sock`` with ``mech``; :class:`SaslError` if it fails."""
    send_message(sock, START, mech.name.encode("ascii"))
    send_message(sock, COMPLETE if mech.complete else OK, mech.initial())
    last = OK
    while not mech.complete:
        last, payload = read_message(sock)
        if last in (BAD, ERROR):
            raise SaslError(f"the server refused the SASL negotiation ({status_name(last)}): "
                            f"{payload[:500].decode('utf-8', 'replace')}")
        response = mech.step(payload)
        if last == COMPLETE:
            if not mech.complete:
                raise SaslError("the server said COMPLETE before the mechanism was complete")
            return
        send_message(sock, COMPLETE if mech.complete else OK, response)
    if last != COMPLETE:
        status, payload = read_message(sock)
        if status != COMPLETE:
            raise SaslError(f"expected the server's SASL COMPLETE, got {status_name(status)}: "
                            f"{payload[:500].decode('utf-8', 'replace')}")


class SaslSocket:
    """A socket after a SASL negotiation: ``recv`` and ``send`` see the Thrift bytes, the wire sees frames.

    One ``send`` is one frame. ``recv`` returns bytes of one or more frames, unwrapped when the protection
    needs it. Every other socket method is the underlying socket's.
    """

    __slots__ = ("_buf", "_max_frame", "_mech", "_pos", "_raw", "_wraps", "sock")

    def __init__(self, sock: socket.socket, mech: Mechanism, max_frame: int) -> None:
        self.sock = sock
        self._mech = mech
        self._wraps = mech.wraps
        self._max_frame = max_frame
        self._raw = b""  # bytes received and not yet cut into frames
        self._buf = b""  # payload bytes not yet returned
        self._pos = 0

    @property
    def mechanism(self) -> Mechanism:
        return self._mech

    def recv(self, n: int) -> bytes:
        if self._pos >= len(self._buf) and not self._fill():
            return b""
        end = self._pos + n
        data = self._buf[self._pos:end] if (self._pos or end < len(self._buf)) else self._buf
        self._pos += len(data)
        return data

    def _fill(self) -> bool:
        """Read at least one whole frame; False at a clean end of stream."""
        raw = self._raw
        if not raw:
            # the usual case: nothing left over, and one recv brings exactly one whole frame
            raw = self.sock.recv(_RECV)
            if not raw:
                return False
            n = len(raw)
            if n > 4:
                size = _LENGTH.unpack_from(raw)[0]
                if n == 4 + size and size <= self._max_frame:
                    self._raw = b""
                    payload = raw[4:]
                    self._buf = self._mech.unwrap(payload) if self._wraps else payload
                    self._pos = 0
                    return True
        while len(raw) < 4:
            more = self.sock.recv(_RECV)
            if not more:
                raise ConnectionError("connection closed in the middle of a SASL frame")
            raw += more
        size = _LENGTH.unpack_from(raw)[0]
        if size > self._max_frame:
            raise ConnectionError(f"SASL frame of {size} bytes is over the limit of {self._max_frame}")
        while len(raw) < 4 + size:
            more = self.sock.recv(max(_RECV, 4 + size - len(raw)))
            if not more:
                raise ConnectionError("connection closed in the middle of a SASL frame")
            raw += more
        payload = raw[4:4 + size]
        self._raw = raw[4 + size:]
        self._buf = self._mech.unwrap(payload) if self._wraps else payload
        self._pos = 0
        return True

    def send(self, data: bytes | memoryview) -> int:
        payload = self._mech.wrap(bytes(data)) if self._wraps else data
        frame = _LENGTH.pack(len(payload)) + payload
        # One send() moves a typical frame whole; gevent's sendall costs a getsockopt per call.
        sent = self.sock.send(frame)
        if sent < len(frame):
            self.sock.sendall(memoryview(frame)[sent:])
        return len(data)

    def sendall(self, data: bytes | memoryview) -> None:
        self.send(data)

    def pending(self) -> bool:
        """Bytes already received and not yet read (an idle connection has none)."""
        return self._pos < len(self._buf) or bool(self._raw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)
