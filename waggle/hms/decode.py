"""Decoding one whole Thrift message already in memory (a reply read, spliced or answered from elsewhere): a
reply's result or a ``TApplicationException``, with a :class:`~waggle.hms.wire.Wire` over nothing, kept idle
between decodes (making one costs a third of decoding a small reply)."""

from __future__ import annotations

from typing import Any

from thrift.Thrift import TMessageType

from waggle.config.model import Limits, ProtocolKind, TransportKind, WireFormat
from waggle.hms.wire import Header, Wire, read_application_error


class _Exhausted:
    """A stream stand-in for decoding bytes already in memory: it has nothing more to give."""

    def recv(self, _n: int, /) -> bytes:
        return b""

    def send(self, data: bytes | memoryview, /) -> int:
        raise OSError("a decoder does not send")

    def sendall(self, data: bytes | memoryview, /) -> None:
        raise OSError("a decoder does not send")

    def wait_readable(self) -> None:
        pass


class DecoderPool:
    """Idle decoders (a :class:`Wire` over nothing) for :meth:`decode`, by protocol and limits: a Wire costs a
    third of decoding a small reply, so it is made once, not per message. A decoder is taken out while it
    decodes, so concurrent decodes (threads) never share one. Keyed by the limits' identity (hashing the
    dataclass is a Python call), and checked against them on use; at most ``limit`` are kept (limits come from
    configuration: a few, unless reloads keep changing them)."""

    __slots__ = ("_idle", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._idle: dict[tuple[bool, int], Wire] = {}

    def __len__(self) -> int:
        return len(self._idle)

    def decode(self, raw: bytes, protocol: ProtocolKind, cls: type, limits: Limits) -> tuple[Header, Any]:
        """Decode one whole message held in memory (no frame prefix): a reply's result or a
        TApplicationException."""
        key = (protocol is ProtocolKind.COMPACT, id(limits))
        idle = self._idle
        wire = idle.pop(key, None)
        if wire is None or wire.limits is not limits:
            wire = Wire(_Exhausted(), WireFormat(TransportKind.BUFFERED, protocol), limits)
        wire._load(raw)
        header = wire._read_header()
        body = read_application_error(wire) if header.mtype == TMessageType.EXCEPTION else wire.read_struct(cls)
        wire.read_end()
        wire._set_buffer(b"")  # an idle decoder holds no reply
        if len(idle) < self.limit:
            idle[key] = wire
        return header, body


#: the decoders :func:`decode_message` takes and gives back
DECODERS = DecoderPool(64)

#: Decode one whole message held in memory (no frame prefix): a reply's result or a TApplicationException, with
#: a decoder of :data:`DECODERS` (its bound method, so a decode costs no extra call).
decode_message = DECODERS.decode
