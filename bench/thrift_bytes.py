"""Just enough of Thrift's strict binary protocol, on bytes, to know where a message ends: for the load generator
and the stub metastore of bench/bench_load.py, which must cost far less per call than what they measure.

Nothing here decodes values: a message's header is read (type, method name, seqid) and its struct is skipped
field by field, by type, to its end. No waggle import, so the generator processes start quickly.
"""

from __future__ import annotations

from struct import error as struct_error
from struct import unpack_from

VERSION_1 = 0x80010000
CALL, REPLY, EXCEPTION, ONEWAY = 1, 2, 3, 4

# TType -> size in bytes of a fixed-size value: BOOL, BYTE, DOUBLE, I16, I32, I64
_FIXED = {2: 1, 3: 1, 4: 8, 6: 2, 8: 4, 10: 8}
_STRING, _STRUCT, _MAP, _SET, _LIST = 11, 12, 13, 14, 15


class Incomplete(Exception):
    """The buffer holds only the start of a message."""


class ProtocolError(Exception):
    """Not strict binary Thrift."""


def skip(buf: bytes, pos: int, ttype: int) -> int:
    """The offset just past the value of type ``ttype`` that starts at ``pos`` (raises :class:`Incomplete`,
    ``IndexError`` or ``struct.error`` when ``buf`` ends first)."""
    size = _FIXED.get(ttype)
    if size is not None:
        return pos + size
    if ttype == _STRING:
        return pos + 4 + unpack_from(">i", buf, pos)[0]
    if ttype == _STRUCT:
        while True:
            ft = buf[pos]
            if ft == 0:
                return pos + 1
            pos = skip(buf, pos + 3, ft)
    if ttype == _MAP:
        kt, vt = buf[pos], buf[pos + 1]
        n = unpack_from(">i", buf, pos + 2)[0]
        pos += 6
        if n < 0:
            raise ProtocolError(f"map of {n} entries")
        ks, vs = _FIXED.get(kt), _FIXED.get(vt)
        if ks is not None and vs is not None:
            return pos + n * (ks + vs)
        if n > len(buf) - pos:
            raise Incomplete
        for _ in range(n):
            pos = skip(buf, skip(buf, pos, kt), vt)
        return pos
    if ttype in (_SET, _LIST):
        et = buf[pos]
        n = unpack_from(">i", buf, pos + 1)[0]
        pos += 5
        if n < 0:
            raise ProtocolError(f"list of {n} elements")
        es = _FIXED.get(et)
        if es is not None:
            return pos + n * es
        if n > len(buf) - pos:
            raise Incomplete
        for _ in range(n):
            pos = skip(buf, pos, et)
        return pos
    raise ProtocolError(f"unknown type {ttype}")


def message_end(buf: bytes, pos: int = 0) -> tuple[int, int, bytes, int, int] | None:
    """The message starting at ``pos``: (offset just past it, message type, method name, seqid, offset of its
    struct), or None while ``buf`` holds only part of it."""
    try:
        word = unpack_from(">I", buf, pos)[0]
        if word & 0xFFFF0000 != VERSION_1:
            raise ProtocolError(f"not strict binary Thrift (first word {word:#010x})")
        n = unpack_from(">i", buf, pos + 4)[0]
        body = pos + 12 + n
        seqid = unpack_from(">i", buf, body - 4)[0]
        end = skip(buf, body, _STRUCT)
    except (Incomplete, IndexError, struct_error):  # struct.error: unpack_from past the end
        return None
    if end > len(buf):
        return None
    return end, word & 0xFF, bytes(buf[pos + 8:pos + 8 + n]), seqid, body


def is_success(buf: bytes, parsed: tuple[int, int, bytes, int, int]) -> bool:
    """A reply whose result struct carries field 0 (``success``) or nothing (a void method): not an exception."""
    _, mtype, _, _, body = parsed
    if mtype != REPLY:
        return False
    return buf[body] == 0 or unpack_from(">h", buf, body + 1)[0] == 0
