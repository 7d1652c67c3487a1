"""Every string in one whole Thrift message held in memory: what waggle reads of a call to a method it has no
IDL for (its first argument may name a database)."""

from __future__ import annotations

import struct

from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.protocol.TCompactProtocol import TCompactProtocol
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TType
from thrift.transport.TTransport import TMemoryBuffer

from waggle.config.model import ProtocolKind


def strings_in(raw: bytes, protocol: ProtocolKind) -> tuple[str | None, list[str]]:
    """The first argument when it is a string (field 1), and every string inside one whole message held in
    memory (the arguments of a method waggle has no IDL for).

    Only called for messages the wire has already read whole, so sizes and nesting are within the limits.
    """
    trans = TMemoryBuffer(raw)
    proto = TCompactProtocol(trans) if protocol is ProtocolKind.COMPACT else TBinaryProtocol(trans)
    out: list[str] = []

    def read(ttype: int) -> None:
        if ttype == TType.STRING:
            try:
                out.append(proto.readBinary().decode("utf-8"))
            except UnicodeDecodeError:
                pass
        elif ttype == TType.STRUCT:
            proto.readStructBegin()
            while True:
                _, ftype, _ = proto.readFieldBegin()
                if ftype == TType.STOP:
                    break
                read(ftype)
                proto.readFieldEnd()
            proto.readStructEnd()
        elif ttype in (TType.LIST, TType.SET):
            etype, size = proto.readListBegin() if ttype == TType.LIST else proto.readSetBegin()
            for _ in range(size):
                read(etype)
        elif ttype == TType.MAP:
            ktype, vtype, size = proto.readMapBegin()
            for _ in range(size):
                read(ktype)
                read(vtype)
        else:
            proto.skip(ttype)

    first: str | None = None
    try:
        proto.readMessageBegin()
        proto.readStructBegin()
        while True:
            _, ftype, fid = proto.readFieldBegin()
            if ftype == TType.STOP:
                break
            before = len(out)
            read(ftype)
            if fid == 1 and ftype == TType.STRING and len(out) > before:
                first = out[before]
            proto.readFieldEnd()
    except (TProtocolException, EOFError, ValueError, TypeError, struct.error):
        pass  # what could be read is enough to decide
    return first, out
