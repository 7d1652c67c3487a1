"""Where a message's struct begins (waggle.hms.headers.body_start) in every header Thrift writes, and the headers
waggle writes (waggle.hms.headers.header and its bounded cache), checked against Apache Thrift's own pure-Python
protocols."""

from __future__ import annotations

import struct

import pytest
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.protocol.TCompactProtocol import TCompactProtocol
from thrift.Thrift import TMessageType
from thrift.transport.TTransport import TMemoryBuffer

from waggle.hms import headers
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.headers import HeaderCache, WireError, body_start, header

ARGS = T.get_table_args(dbname="sales", tbl_name="orders")


def struct_bytes(compact: bool) -> bytes:
    buf = TMemoryBuffer()
    ARGS.write((TCompactProtocol if compact else TBinaryProtocol)(buf))
    return buf.getvalue()


def message(name: str, mtype: int, seqid: int, *, compact: bool = False, strict: bool = True) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf) if compact else TBinaryProtocol(buf, strictWrite=strict)
    proto.writeMessageBegin(name, mtype, seqid)
    ARGS.write(proto)
    proto.writeMessageEnd()
    return buf.getvalue()


SEQIDS = [0, 1, 127, 128, 16383, 16384, 2**21, 2**31 - 1]


@pytest.mark.parametrize("seqid", SEQIDS)
@pytest.mark.parametrize("name", ["get_table", "x", "é" * 70])
def test_the_struct_of_a_strict_binary_message(name: str, seqid: int) -> None:
    raw = message(name, TMessageType.CALL, seqid)
    start = body_start(raw, False)
    assert start == 4 + 4 + len(name.encode()) + 4
    assert raw[start:] == struct_bytes(False)


@pytest.mark.parametrize("seqid", SEQIDS)
@pytest.mark.parametrize("name", ["get_table", "x"])
def test_the_struct_of_an_old_non_strict_binary_message(name: str, seqid: int) -> None:
    raw = message(name, TMessageType.REPLY, seqid, strict=False)
    assert struct.unpack_from("!i", raw)[0] == len(name)  # no version: the name's length comes first
    start = body_start(raw, False)
    assert start == 4 + len(name) + 1 + 4
    assert raw[start:] == struct_bytes(False)


@pytest.mark.parametrize("seqid, seqid_bytes", [(0, 1), (127, 1), (128, 2), (16383, 2), (16384, 3), (2**21, 4),
                                                (2**31 - 1, 5)])
@pytest.mark.parametrize("name", ["get_table", "é" * 70])  # a name over 127 bytes has a two-byte length
def test_the_struct_of_a_compact_message(name: str, seqid: int, seqid_bytes: int) -> None:
    raw = message(name, TMessageType.CALL, seqid, compact=True)
    encoded = len(name.encode())
    start = body_start(raw, True)
    assert start == 2 + seqid_bytes + (1 if encoded < 128 else 2) + encoded
    assert raw[start:] == struct_bytes(True)


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("seqid", [0, 300, 2**31 - 1])
def test_waggles_headers_are_thrifts(compact: bool, seqid: int) -> None:
    raw = message("get_table", TMessageType.REPLY, seqid, compact=compact)
    made = header("get_table", TMessageType.REPLY, seqid, compact)
    assert raw.startswith(made)
    assert body_start(raw, compact) == len(made)


@pytest.mark.parametrize("raw, compact", [
    (b"", False),
    (b"\x80\x01\x00", False),  # strict: the version cut short
    (b"\x80\x01\x00\x01\x00\x00", False),  # strict: the name's length cut short
    (b"\x00\x00", False),  # old: the name's length cut short
    (b"", True),
    (b"\x82", True),
    (b"\x82\x21", True),  # no sequence id
    (b"\x82\x21\x80\x80", True),  # a sequence id whose varint never ends
    (b"\x82\x21\x05", True),  # no name length
])
def test_a_message_shorter_than_its_header_is_a_wire_error(raw: bytes, compact: bool) -> None:
    with pytest.raises(WireError):
        body_start(raw, compact)


def test_the_header_cache_is_bounded_and_encodes_as_thrift_does() -> None:
    heads = HeaderCache(2)
    for name in ("a", "bb", "ccc", "dddd"):
        head = heads[(name, TMessageType.CALL)]
        assert head == struct.pack("!Ii", 0x80010000 | TMessageType.CALL, len(name)) + name.encode()
    assert list(heads) == [("a", TMessageType.CALL), ("bb", TMessageType.CALL)]
    assert len(headers.HEADERS) <= headers.HEADERS.limit
