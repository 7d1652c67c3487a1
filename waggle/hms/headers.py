"""Thrift message headers: the constants of each kind, the headers waggle writes, and where a whole message's struct
begins behind any header Thrift writes (strict or old binary, compact).

A reply kept by the cache or by admission keeps its struct's bytes and, each time it answers, gets the header of the
call it answers: :func:`body_start` finds the struct, :func:`header` writes the new header. :mod:`waggle.hms.wire`
reads headers off a stream with the same constants, and writes them with :func:`header`.
"""

from __future__ import annotations

import struct

_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")

#: strict binary: the version word's high half, and the mask that finds it (the low byte is the message type)
STRICT_VERSION = 0x80010000
VERSION_MASK = 0xFFFF0000
#: compact: the protocol id, and the version in the low five bits of the next byte (the type in the high three)
COMPACT_ID = 0x82
COMPACT_VERSION = 1


class WireError(Exception):
    """The peer sent something that is not a valid message, or broke a limit. The connection is unusable."""


class HeaderCache(dict[tuple[str, int], bytes]):
    """The start of a strict binary header (version and type, the name's length and bytes) by (name, type); the
    seqid follows it. A missing one is made, and kept while fewer than ``limit`` are: method names come from
    waggle's IDL and a few unknown ones, so the bound is never reached in practice, but holds all the same.
    A lookup is a plain dict lookup (this is on every encode)."""

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __missing__(self, key: tuple[str, int]) -> bytes:
        name, mtype = key
        encoded = name.encode("utf-8")
        head = _U32.pack(STRICT_VERSION | mtype) + _I32.pack(len(encoded)) + encoded
        if len(self) < self.limit:
            self[key] = head
        return head


#: the strict headers every :class:`Wire` encodes with (immutable bytes: sharing them across threads is safe)
HEADERS = HeaderCache(4096)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _compact_header(name: str, mtype: int, seqid: int) -> bytes:
    encoded = name.encode("utf-8")
    return (
        bytes((COMPACT_ID, COMPACT_VERSION | (mtype << 5)))
        + _uvarint(seqid & 0xFFFFFFFF)
        + _uvarint(len(encoded))
        + encoded
    )


def header(name: str, mtype: int, seqid: int, compact: bool) -> bytes:
    """A message's header as waggle writes it (strict binary, or compact)."""
    return _compact_header(name, mtype, seqid) if compact else HEADERS[(name, mtype)] + _I32.pack(seqid)


def body_start(raw: bytes, compact: bool) -> int:
    """Where the struct of a whole message (``raw``, unframed) begins: the length of its header, in any of the
    headers Thrift writes (strict or old binary, compact). Raises :class:`WireError` for a message too short."""
    try:
        if compact:
            pos = 2
            for _ in range(2):  # the sequence id, then the name's length
                shift = size = 0
                while True:
                    b = raw[pos]
                    pos += 1
                    size |= (b & 0x7F) << shift
                    shift += 7
                    if not b & 0x80:
                        break
            return pos + size
        first: int = _I32.unpack_from(raw, 0)[0]
        if first < 0:  # strict: version and type, name length, name, seqid
            length: int = _I32.unpack_from(raw, 4)[0]
            return 8 + length + 4
        return 4 + first + 1 + 4  # old: name length, name, type, seqid
    except (IndexError, struct.error) as exc:
        raise WireError("message shorter than its header") from exc
