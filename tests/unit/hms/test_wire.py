"""The message layer over an in-memory stream pair (no sockets): framing, raw relaying, limits and garbage, the one
wait before each message, and the codec's bounded caches."""

from __future__ import annotations

import struct

import gevent
import pytest
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.protocol.TCompactProtocol import TCompactProtocol
from thrift.Thrift import TMessageType
from thrift.transport.TTransport import TFramedTransport, TMemoryBuffer

from tests.support import memory_stream
from waggle.config.model import Limits, ProtocolKind, TransportKind, WireFormat
from waggle.hms import decode as decode_module
from waggle.hms.decode import DecoderPool, decode_message
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore import ttypes
from waggle.hms.headers import WireError
from waggle.hms.wire import PeerClosed, Wire

LIMITS = Limits(max_message_bytes=1 << 20, max_string_bytes=1 << 16, max_container_items=1000)
FORMATS = [WireFormat(t, p) for t in TransportKind for p in ProtocolKind]


def encode_with_thrift(fmt: WireFormat, name: str, mtype: int, seqid: int, obj: object) -> bytes:
    """Encode with Apache Thrift's own pure-Python classes, as an independent reference."""
    buf = TMemoryBuffer()
    trans = TFramedTransport(buf) if fmt.transport is TransportKind.FRAMED else buf
    proto = (TCompactProtocol if fmt.protocol is ProtocolKind.COMPACT else TBinaryProtocol)(trans)
    proto.writeMessageBegin(name, mtype, seqid)
    obj.write(proto)  # type: ignore[attr-defined]
    proto.writeMessageEnd()
    trans.flush()
    return buf.getvalue()


@pytest.fixture
def pair():
    a, b = memory_stream.pair(timeout=5)
    yield a, b
    a.close()
    b.close()


def sample_table(i: int = 0) -> ttypes.Table:
    return ttypes.Table(tableName=f"t{i}", dbName="db", parameters={"k": "v" * 10},
                        sd=ttypes.StorageDescriptor(cols=[ttypes.FieldSchema("c", "int", None)], location="/x"))


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.describe())
def test_reads_what_thrift_writes_and_relays_it_byte_for_byte(pair, fmt):
    a, b = pair
    args = T.get_table_args(dbname="sales", tbl_name="orders")
    data = encode_with_thrift(fmt, "get_table", TMessageType.CALL, 7, args)
    a.sendall(data * 3)  # three calls back to back in one stream
    wire = Wire(b, fmt, LIMITS)
    for _ in range(3):
        header = wire.read_begin()
        assert (header.name, header.mtype, header.seqid) == ("get_table", TMessageType.CALL, 7)
        decoded = wire.read_struct(T.get_table_args)
        raw = wire.read_end()
        assert decoded == args
        expected = data[4:] if fmt.transport is TransportKind.FRAMED else data
        assert raw == expected
    # what waggle encodes is what Thrift encodes
    assert wire.encode("get_table", TMessageType.CALL, 7, args) == (
        data[4:] if fmt.transport is TransportKind.FRAMED else data)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.describe())
def test_skipping_a_large_reply_keeps_its_bytes(pair, fmt):
    a, b = pair
    result = T.get_table_objects_by_name_result(success=[sample_table(i) for i in range(500)])
    data = encode_with_thrift(fmt, "get_table_objects_by_name", TMessageType.REPLY, 1, result)
    a.sendall(data)
    wire = Wire(b, fmt, Limits(1 << 24, 1 << 16, 1000))
    wire.read_begin()
    wire.skip_struct()
    raw = wire.read_end()
    assert wire.first_field_id(raw) == 0
    _, body = decode_message(raw, fmt.protocol, T.get_table_objects_by_name_result, LIMITS)
    assert body == result


def test_fields_this_side_does_not_know_survive_relaying(pair):
    """A newer peer's extra field is not dropped: the raw bytes are relayed, not re-encoded."""
    a, b = pair
    buf = TMemoryBuffer()
    p = TBinaryProtocol(buf)
    p.writeMessageBegin("get_table", TMessageType.CALL, 1)
    p.writeStructBegin("x")
    p.writeFieldBegin("dbname", 11, 1)
    p.writeString("db")
    p.writeFieldEnd()
    p.writeFieldBegin("future_field", 11, 99)
    p.writeString("from a newer client")
    p.writeFieldEnd()
    p.writeFieldStop()
    p.writeStructEnd()
    data = buf.getvalue()
    a.sendall(data)
    wire = Wire(b, WireFormat(), LIMITS)
    wire.read_begin()
    assert wire.read_struct(T.get_table_args).dbname == "db"
    assert wire.read_end() == data


def test_first_field_id_tells_success_from_declared_exception(pair):
    a, b = pair
    wire = Wire(b, WireFormat(), LIMITS)
    for result, expected in [
        (T.get_database_result(success=ttypes.Database(name="x")), 0),
        (T.get_database_result(o1=ttypes.NoSuchObjectException("gone")), 1),
        (T.drop_table_result(), -1),
    ]:
        a.sendall(wire.encode("m", TMessageType.REPLY, 1, result))
        wire.read_begin()
        wire.skip_struct()
        assert wire.first_field_id(wire.read_end()) == expected


def test_clean_eof_between_messages_is_peer_closed(pair):
    a, b = pair
    a.close()
    with pytest.raises(PeerClosed):
        Wire(b, WireFormat(), LIMITS).read_begin()


def test_truncated_message_is_a_wire_error(pair):
    a, b = pair
    data = encode_with_thrift(WireFormat(), "get_table", TMessageType.CALL, 1, T.get_table_args("d", "t"))
    a.sendall(data[:-3])
    a.close()
    wire = Wire(b, WireFormat(), LIMITS)
    wire.read_begin()
    with pytest.raises(WireError):
        wire.read_struct(T.get_table_args)


@pytest.mark.parametrize("garbage", [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"\x80\x01\x00\x01" + struct.pack("!i", 10_000_000),  # absurd method-name length
    b"\x00\x00\x00\x05hello\x09",  # old-style header with an invalid message type
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS client hello
])
def test_garbage_is_a_wire_error(pair, garbage):
    a, b = pair
    a.sendall(garbage)
    a.close()
    with pytest.raises((WireError, PeerClosed)):
        wire = Wire(b, WireFormat(), LIMITS)
        wire.read_begin()
        wire.skip_struct()


def test_oversized_string_is_refused(pair):
    a, b = pair
    data = encode_with_thrift(WireFormat(), "get_table", TMessageType.CALL, 1, T.get_table_args("d" * 70_000, "t"))
    a.sendall(data)
    wire = Wire(b, WireFormat(), LIMITS)
    wire.read_begin()
    with pytest.raises(WireError, match="limit"):
        wire.read_struct(T.get_table_args)


def test_oversized_container_is_refused(pair):
    a, b = pair
    args = T.get_partitions_by_names_args("d", "t", [f"p={i}" for i in range(1001)])
    data = encode_with_thrift(WireFormat(), "get_partitions_by_names", TMessageType.CALL, 1, args)
    a.sendall(data)
    wire = Wire(b, WireFormat(), LIMITS)
    wire.read_begin()
    with pytest.raises(WireError):
        wire.read_struct(T.get_partitions_by_names_args)


def test_oversized_message_is_refused_without_buffering_it(pair):
    a, b = pair
    small = Limits(max_message_bytes=4096, max_string_bytes=1 << 20, max_container_items=10**6)
    args = T.get_partitions_by_names_args("d", "t", [f"p={i}" for i in range(2000)])
    data = encode_with_thrift(WireFormat(), "get_partitions_by_names", TMessageType.CALL, 1, args)
    a.sendall(data)
    wire = Wire(b, WireFormat(), small)
    with pytest.raises(WireError, match="4096"):
        wire.read_begin()
        wire.read_struct(T.get_partitions_by_names_args)


def test_framed_message_longer_than_its_frame_is_refused(pair):
    a, b = pair
    data = encode_with_thrift(WireFormat(), "get_table", TMessageType.CALL, 1, T.get_table_args("d", "t"))
    a.sendall(struct.pack("!i", len(data) - 2) + data)
    wire = Wire(b, WireFormat(TransportKind.FRAMED), LIMITS)
    wire.read_begin()
    with pytest.raises(WireError):
        wire.read_struct(T.get_table_args)
        wire.read_end()


def test_streaming_a_large_reply_through_a_sink(pair):
    a, b = pair
    result = T.get_table_objects_by_name_result(success=[sample_table(i) for i in range(800)])
    data = encode_with_thrift(WireFormat(), "get_table_objects_by_name", TMessageType.REPLY, 3, result)

    def trickle() -> None:  # as a metastore writes a long reply: in pieces, over time
        for i in range(0, len(data), 16384):
            a.sendall(data[i:i + 16384])
            gevent.sleep(0.002)

    gevent.spawn(trickle)
    wire = Wire(b, WireFormat(), Limits(1 << 24, 1 << 16, 1000))
    sent: list[bytes] = []
    wire.read_begin()
    wire.stream_to(sent.append, after=4096)
    wire.skip_struct()
    rest = wire.read_end()
    assert wire.streamed == sum(len(c) for c in sent) > 0
    assert b"".join(sent) + rest == data
    assert wire.first_field == 0


def test_small_replies_are_not_streamed(pair):
    a, b = pair
    data = encode_with_thrift(WireFormat(), "get_table", TMessageType.REPLY, 3,
                              T.get_table_result(success=sample_table()))
    a.sendall(data)
    wire = Wire(b, WireFormat(), LIMITS)
    sent: list[bytes] = []
    wire.read_begin()
    wire.stream_to(sent.append, after=65536)
    wire.skip_struct()
    assert wire.read_end() == data and sent == [] and wire.streamed == 0


class Counting:
    """A stream that counts its calls, over one end of a memory pair."""

    def __init__(self, stream: memory_stream.MemoryStream) -> None:
        self.stream = stream
        self.waits = self.recvs = 0

    def recv(self, n: int, /) -> bytes:
        self.recvs += 1
        return self.stream.recv(n)

    def send(self, data: bytes | memoryview, /) -> int:
        return self.stream.send(data)

    def sendall(self, data: bytes | memoryview, /) -> None:
        self.stream.sendall(data)

    def wait_readable(self) -> None:
        self.waits += 1
        self.stream.wait_readable()


def test_each_message_is_waited_for_once_then_read_with_one_recv(pair):
    """The hot path: one wait and one recv a message when it arrives whole; none when it was read ahead."""
    a, b = pair
    fmt = WireFormat()
    data = encode_with_thrift(fmt, "get_table", TMessageType.CALL, 7, T.get_table_args("sales", "orders"))
    counting = Counting(b)
    wire = Wire(counting, fmt, LIMITS)
    gevent.spawn_later(0.01, a.sendall, data)  # not there yet: the wire waits for it
    wire.read_begin()
    wire.skip_struct()
    assert wire.read_end() == data
    assert (counting.waits, counting.recvs) == (1, 1)
    a.sendall(data * 2)  # two back to back: the second was read with the first
    for _ in range(2):
        wire.read_begin()
        wire.skip_struct()
        assert wire.read_end() == data
    assert (counting.waits, counting.recvs) == (2, 2)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.describe())
def test_a_message_arriving_a_byte_at_a_time_is_read_whole(pair, fmt):
    a, b = pair
    args = T.get_table_args(dbname="sales", tbl_name="orders")
    data = encode_with_thrift(fmt, "get_table", TMessageType.CALL, 7, args)

    def trickle() -> None:
        for i in range(len(data)):
            a.sendall(data[i:i + 1])
            gevent.sleep(0)

    gevent.spawn(trickle)
    wire = Wire(b, fmt, LIMITS)
    assert wire.read_begin().name == "get_table"
    assert wire.read_struct(T.get_table_args) == args
    assert wire.read_end() == (data[4:] if fmt.transport is TransportKind.FRAMED else data)


def test_sending_writes_the_whole_message_to_the_stream(pair):
    a, b = pair
    for fmt in FORMATS:
        wire = Wire(a, fmt, LIMITS)
        args = T.get_table_args(dbname="sales", tbl_name="orders")
        wire.send("get_table", TMessageType.CALL, 7, args)
        assert b.recv(1 << 16) == encode_with_thrift(fmt, "get_table", TMessageType.CALL, 7, args)


def test_a_stream_closed_by_another_greenlet_wakes_the_reader(pair):
    _a, b = pair
    wire = Wire(b, WireFormat(), LIMITS)
    gevent.spawn_later(0.01, b.close)
    with pytest.raises(OSError):
        wire.read_begin()


def test_the_peer_closing_while_the_reader_waits_is_peer_closed(pair):
    a, b = pair
    wire = Wire(b, WireFormat(), LIMITS)
    gevent.spawn_later(0.01, a.close)
    with pytest.raises(PeerClosed):
        wire.read_begin()


def test_a_stream_timeout_ends_the_wait():
    _a, b = memory_stream.pair(timeout=0.05)
    with pytest.raises(TimeoutError):
        Wire(b, WireFormat(), LIMITS).read_begin()


def test_the_decoder_pool_reuses_one_decoder_per_protocol_and_limits_within_its_bound():
    pool = DecoderPool(2)
    raw = Wire(None, WireFormat(), LIMITS).encode(  # type: ignore[arg-type]
        "get_table", TMessageType.REPLY, 1, T.get_table_result(success=sample_table()))
    for limits in (LIMITS, LIMITS, Limits(1 << 20, 1 << 16, 999), Limits(1 << 20, 1 << 16, 998)):
        header, body = pool.decode(raw, ProtocolKind.BINARY, T.get_table_result, limits)
        assert header.name == "get_table" and body.success == sample_table()
    assert len(pool) == 2  # the same limits twice: one decoder; then the third limits found the pool full
    with pytest.raises(WireError):  # a truncated message: the decoder has nothing more to read
        pool.decode(raw[:-5], ProtocolKind.BINARY, T.get_table_result, LIMITS)
    assert decode_message.__self__ is decode_module.DECODERS  # type: ignore[attr-defined]
