"""Thrift messages over a byte stream: read one message, keep its raw bytes, write one message.

Unframed binary Thrift has no length prefix, so the only way to find where a message ends is to parse it.
:class:`Wire` parses with Thrift's C codec (``fastbinary``) directly from its receive buffer and remembers the
raw bytes it consumed, so that a message which needs no change is relayed byte for byte: nothing is
re-encoded and fields this side does not know survive. :meth:`Wire.skip_struct` walks a struct in C without
building Python objects, for replies that only need relaying.

Limits on message size, string length and container size are enforced while reading, so a hostile peer
cannot make this side buffer more than ``max_message_bytes``.

The codec is pure: it reads and writes through a :class:`Stream` (a socket's adapter is
:class:`waggle.common.streams.SocketStream`; tests use an in-memory pair), and knows nothing of sockets or gevent.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from thrift.protocol import fastbinary
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TApplicationException, TMessageType, TType

from waggle.config.model import Limits, ProtocolKind, TransportKind, WireFormat
from waggle.hms import specs
from waggle.hms.headers import COMPACT_ID, COMPACT_VERSION, STRICT_VERSION, VERSION_MASK, WireError, header

_I32 = struct.Struct("!i")
_I32x2 = struct.Struct("!ii")
_MAX_RECV = 4 * 1024 * 1024  # one recv() never asks for more (its buffer is allocated up front)
_RECV_SIZE = 256 * 1024
_MESSAGE_TYPES = frozenset((TMessageType.CALL, TMessageType.REPLY, TMessageType.EXCEPTION, TMessageType.ONEWAY))


class Stream(Protocol):
    """What a :class:`Wire` reads and writes with: a socket's calls, and a wait for the next message.

    ``recv`` returns at least one byte, or ``b""`` at the end of the stream; ``send`` may send part of ``data``
    and says how much. ``wait_readable`` returns once ``recv`` would not block (bytes, the end, or an error to
    report): a :class:`Wire` calls it once before each message it reads, since the next message is rarely there
    yet; a stream that cannot tell (or need not) returns at once.
    """

    def recv(self, n: int, /) -> bytes: ...

    def send(self, data: bytes | memoryview, /) -> int: ...

    def sendall(self, data: bytes | memoryview, /) -> None: ...

    def wait_readable(self) -> None: ...


class Channel(Stream, Protocol):
    """A :class:`Stream` that is one end of a connection: what the client driver and an upstream connection hold.

    ``settimeout`` bounds every later wait (``None``: no bound), as a socket's does; ``readable`` says, without
    waiting, whether ``recv`` has something to return (bytes, the end, or an error); ``shutdown`` ends both
    directions (a ``recv`` blocked in another greenlet returns ``b""``); ``close`` releases it, and a greenlet
    blocked in ``recv`` or ``wait_readable`` is woken with an ``OSError``. Neither raises.
    """

    def settimeout(self, seconds: float | None, /) -> None: ...

    def readable(self) -> bool: ...

    def shutdown(self) -> None: ...

    def close(self) -> None: ...


class PeerClosed(Exception):
    """The peer closed the connection between messages."""


class _Skip:
    """Decode target whose empty spec (:data:`_SKIP_SPEC`) makes the C codec skip every field."""

    __slots__ = ()


_SKIP_SPEC = [_Skip, ()]


class Header(NamedTuple):
    name: str
    mtype: int
    seqid: int


class _Proto:
    """What ``fastbinary`` reads from a protocol object: its transport and its limits."""

    __slots__ = ("container_length_limit", "string_length_limit", "trans")

    def __init__(self, trans: Wire, limits: Limits) -> None:
        self.trans = trans
        self.string_length_limit = limits.max_string_bytes
        self.container_length_limit = limits.max_container_items


class Wire:
    """One side of a Thrift connection. Not thread-safe; one greenlet uses it at a time."""

    __slots__ = (
        "_buf_len",
        "_chunks",
        "_compact",
        "_decode",
        "_encode",
        "_frame_tail",
        "_framed",
        "_in_frame",
        "_proto",
        "_received",
        "_sink",
        "_sink_after",
        "cstringio_buf",
        "first_field",
        "format",
        "header_end",
        "limits",
        "stream",
        "streamed",
    )

    def __init__(self, stream: Stream, fmt: WireFormat, limits: Limits) -> None:
        self.stream = stream
        self.format = fmt
        self.limits = limits
        self.cstringio_buf = io.BytesIO()
        self._buf_len = 0
        self._sink: Callable[[bytes], None] | None = None
        self._sink_after = 0
        self.streamed = 0
        self.first_field = -1
        self._chunks: list[bytes] = []
        self._received = 0
        self._proto = _Proto(self, limits)
        self._framed = fmt.transport is TransportKind.FRAMED
        self._compact = fmt.protocol is ProtocolKind.COMPACT
        self._decode = fastbinary.decode_compact if self._compact else fastbinary.decode_binary
        self._encode = fastbinary.encode_compact if self._compact else fastbinary.encode_binary
        self._in_frame = False
        self._frame_tail = b""
        self.header_end = 0

    # -- reading ---------------------------------------------------------------------------------------
    def cstringio_refill(self, partial: bytes, reqlen: int) -> io.BytesIO:
        """Called by the C codec (and by :meth:`read`) when the buffer runs dry."""
        need = reqlen - len(partial)
        if self._in_frame:
            raise WireError("message is longer than its frame")
        if self._received + need > self.limits.max_message_bytes:
            # a declared length (a string, even one in a field that is only skipped) beyond what the whole
            # message may be: refuse it now, without waiting for bytes that must not be read
            raise WireError(f"message exceeds the limit of {self.limits.max_message_bytes} bytes "
                            f"(it declares {need} more bytes)")
        # one recv is the usual case (a message, or what is left of it, arrives whole): taken first, no list
        size = need if need > _RECV_SIZE else _RECV_SIZE
        data = self.stream.recv(size if size < _MAX_RECV else _MAX_RECV)
        if not data:
            if self._received == 0 and not partial:
                raise PeerClosed()
            raise WireError("connection closed in the middle of a message")
        if len(data) < need:
            data = self._recv_rest(data, need)
        self._chunks.append(data)
        self._received += len(data)
        if self._received > self.limits.max_message_bytes:
            raise WireError(f"message exceeds the limit of {self.limits.max_message_bytes} bytes")
        if self._sink is not None and self._received >= self._sink_after:
            self._flush_to_sink()
        return self._set_buffer(partial + data if partial else data)

    def _recv_rest(self, first: bytes, need: int) -> bytes:
        """``first`` and what follows it, until ``need`` bytes in all (within the message's limit)."""
        got = [first]
        have = len(first)
        while have < need:
            if self._received + have >= self.limits.max_message_bytes:
                raise WireError(f"message exceeds the limit of {self.limits.max_message_bytes} bytes")
            data = self.stream.recv(min(max(_RECV_SIZE, need - have), _MAX_RECV))
            if not data:
                raise WireError("connection closed in the middle of a message")
            got.append(data)
            have += len(data)
        return b"".join(got)

    # -- cut-through relaying ----------------------------------------------------------------------------
    def stream_to(self, sink: Callable[[bytes], None], after: int) -> None:
        """Once more than ``after`` bytes of the current message have arrived, pass them to ``sink`` as they
        come instead of keeping them: a large reply reaches the client while it is still being read, and
        memory holds one chunk of it, not all of it. Call after :meth:`read_begin`."""
        self._sink = sink
        self._sink_after = after
        self.streamed = 0

    def _flush_to_sink(self) -> None:
        assert self._sink is not None
        if self.streamed == 0:
            head = b"".join(self._chunks)
            self.first_field = self.first_field_id(head)
        for chunk in self._chunks:
            self._sink(chunk)
            self.streamed += len(chunk)
        self._chunks = []

    def _set_buffer(self, data: bytes) -> io.BytesIO:
        self._buf_len = len(data)
        self.cstringio_buf = io.BytesIO(data)
        return self.cstringio_buf

    def read(self, n: int) -> bytes:
        data = self.cstringio_buf.read(n)
        if len(data) < n:
            data = self.cstringio_refill(data, n).read(n)
        return data

    def read_begin(self) -> Header:
        """Start reading the next message and return its header. Raises :class:`PeerClosed` at a clean EOF."""
        rest = self.cstringio_buf.read()
        self._received = len(rest)
        self._in_frame = False
        if rest:
            self._chunks = [rest]
            self._set_buffer(rest)
        else:  # the usual case: nothing read ahead, so the message's first bytes are received here, at once
            stream = self.stream
            stream.wait_readable()  # rarely there yet: waited for, rather than tried first (see Stream)
            data = stream.recv(_RECV_SIZE)
            if not data:
                self._chunks = []
                raise PeerClosed()
            if len(data) > self.limits.max_message_bytes:
                raise WireError(f"message exceeds the limit of {self.limits.max_message_bytes} bytes")
            self._chunks = [data]
            self._received = len(data)
            self._set_buffer(data)
        if self._framed:
            size = _I32.unpack(self.read(4))[0]
            if size <= 0 or size > self.limits.max_message_bytes:
                raise WireError(f"frame size {size} outside 1..{self.limits.max_message_bytes}")
            payload = self.read(size)
            self._frame_tail = self.cstringio_buf.read()
            self._chunks = [payload]
            self._received = size
            self._set_buffer(payload)
            self._in_frame = True
        return self._read_header()

    def _load(self, raw: bytes) -> None:
        """Start reading ``raw``, one whole message already in memory."""
        self._chunks = [raw]
        self._received = len(raw)
        self._in_frame = False
        self._set_buffer(raw)

    def _read_header(self) -> Header:
        if self._compact:
            return self._read_compact_header()
        head = self.cstringio_buf.read(8)
        if len(head) < 8:
            head = self.cstringio_refill(head, 8).read(8)
        version, size = _I32x2.unpack(head)
        if version < 0:
            if (version & VERSION_MASK) != STRICT_VERSION:
                raise WireError(f"bad protocol version 0x{version & 0xFFFFFFFF:08x}")
            mtype = version & 0xFF
            if size < 0 or size > 1024:
                raise WireError(f"bad method name length {size}")
            tail = self.cstringio_buf.read(size + 4)
            if len(tail) < size + 4:
                tail = self.cstringio_refill(tail, size + 4).read(size + 4)
            try:
                name = tail[:size].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise WireError("method name is not UTF-8") from exc
            seqid = _I32.unpack_from(tail, size)[0]
        else:  # old non-strict header: name length, name, type byte, seqid
            self.cstringio_buf.seek(-4, io.SEEK_CUR)
            name = self._read_name(version)
            mtype = self.read(1)[0]
            seqid = _I32.unpack(self.read(4))[0]
        if mtype not in _MESSAGE_TYPES:
            raise WireError(f"bad message type {mtype}")
        self.header_end = self._consumed()
        return Header(name, mtype, seqid)

    def _read_name(self, size: int) -> str:
        if size < 0 or size > 1024:
            raise WireError(f"bad method name length {size}")
        try:
            return self.read(size).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise WireError("method name is not UTF-8") from exc

    def _varint(self) -> int:
        shift = result = 0
        for _ in range(5):
            b = self.read(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
        raise WireError("varint too long")

    def _read_compact_header(self) -> Header:
        proto, vt = self.read(2)
        if proto != COMPACT_ID or (vt & 0x1F) != COMPACT_VERSION:
            raise WireError(f"bad compact protocol header {proto:#x} {vt:#x}")
        seqid = self._varint()
        if seqid >= 1 << 31:
            seqid -= 1 << 32
        name = self._read_name(self._varint())
        self.header_end = self._consumed()
        return Header(name, vt >> 5, seqid)

    def _consumed(self) -> int:
        buf = self.cstringio_buf
        return self._received - (self._buf_len - buf.tell())

    def read_struct(self, cls: type) -> Any:
        obj = cls()
        try:
            self._decode(obj, self._proto, specs.codec(cls))
        except (OverflowError, TypeError, ValueError, UnicodeDecodeError, TProtocolException) as exc:
            raise WireError(f"cannot decode {cls.__name__}: {exc}") from exc
        return obj

    def skip_struct(self) -> None:
        try:
            self._decode(_Skip(), self._proto, _SKIP_SPEC)
        except (OverflowError, TypeError, ValueError, TProtocolException) as exc:
            raise WireError(f"cannot decode message body: {exc}") from exc

    def read_end(self) -> bytes:
        """Finish the message and return its raw bytes (for framed transport, the frame's payload)."""
        buf = self.cstringio_buf
        unread = self._buf_len - buf.tell()
        if self._in_frame:
            if unread:
                raise WireError("frame holds more than one message")
            raw = self._chunks[0]
            self._set_buffer(self._frame_tail)
            self._in_frame = False
        else:
            raw = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
            if unread:
                if unread > len(raw):
                    raise WireError("peer sent bytes beyond the end of a streamed message")
                raw = raw[:-unread]
        self._chunks = []
        self._sink = None
        return raw

    def first_field_id(self, raw: bytes) -> int:
        """Id of the first field of the struct that follows the header (0 = a result's success), or -1."""
        pos = self.header_end
        if pos >= len(raw):
            return -1
        if self._compact:
            b = raw[pos]
            if b == 0:
                return -1
            if b >> 4:
                return b >> 4
            n, shift = 0, 0
            for c in raw[pos + 1:pos + 4]:
                n |= (c & 0x7F) << shift
                shift += 7
                if not c & 0x80:
                    break
            return (n >> 1) ^ -(n & 1)
        if raw[pos] == 0 or pos + 3 > len(raw):
            return -1
        return int.from_bytes(raw[pos + 1:pos + 3], "big", signed=True)

    # -- writing ---------------------------------------------------------------------------------------
    def encode(self, name: str, mtype: int, seqid: int, obj: Any) -> bytes:
        body: bytes = self._encode(obj, specs.codec(obj.__class__))
        return header(name, mtype, seqid, self._compact) + body

    def send_raw(self, raw: bytes) -> None:
        if self._framed:
            raw = _I32.pack(len(raw)) + raw
        # One send() moves a typical message whole; a gevent socket's sendall costs a getsockopt per call.
        stream = self.stream
        sent = stream.send(raw)
        if sent < len(raw):
            stream.sendall(memoryview(raw)[sent:])

    def send(self, name: str, mtype: int, seqid: int, obj: Any) -> None:
        self.send_raw(self.encode(name, mtype, seqid, obj))

    def encode_application_error(self, name: str, seqid: int, kind: int, message: str) -> bytes:
        return self.encode(name, TMessageType.EXCEPTION, seqid, _AppError(kind, message))


class _AppError:
    """A ``TApplicationException`` in the shape the C codec encodes and decodes."""

    __slots__ = ("message", "type")

    def __init__(self, type: int = 0, message: str | None = None) -> None:
        self.type = type
        self.message = message

    def to_exception(self) -> TApplicationException:
        return TApplicationException(self.type, self.message)


specs.declare(_AppError, (None, (1, TType.STRING, "message", "UTF8", None), (2, TType.I32, "type", None, None)))


def read_application_error(wire: Wire) -> TApplicationException:
    return wire.read_struct(_AppError).to_exception()  # type: ignore[no-any-return]
