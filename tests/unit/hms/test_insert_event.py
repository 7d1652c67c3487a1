"""fire_listener_event's insert data across releases that number it apart (waggle.hms.insert_event): a call of
each release's generated code, read as it arrives and written for a Hive 2 or a Hive 3+ metastore."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from thrift.protocol import fastbinary
from thrift.protocol.TCompactProtocol import TCompactProtocol
from thrift.Thrift import TMessageType
from thrift.transport.TTransport import TMemoryBuffer

from tests.support.clients import encode_call
from tests.unit.hms.test_bridges import Scripted
from waggle.call.values import Call, Session
from waggle.config.model import Limits, ProtocolKind, TransportKind, WireFormat
from waggle.hms import specs
from waggle.hms.bridges import BRIDGES, bridges_call
from waggle.hms.decode import decode_message
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore import ttypes as T
from waggle.hms.insert_event import arrived, as_hive2, inserts
from waggle.hms.methods import METHODS
from waggle.hms.service import METHOD_IO
from waggle.hms.wire import Header

PACKAGES = {"2.3": "hmsclient.genthrift.hive_metastore",
            "3.1": "thrift_files.libraries.thrift_hive_metastore_client",
            "4.x": "waggle.hms.gen.hive_metastore"}
FILES = ["file:/w/t/ds=1/part-0", "file:/w/t/ds=1/part-1"]
SUMS = ["c0", "c1"]
LIMITS = Limits(1 << 20, 1 << 20, 1 << 16)


def release(name: str) -> tuple[Any, Any]:
    """(ThriftHiveMetastore, ttypes) of one release's generated code."""
    package = PACKAGES[name]
    return importlib.import_module(f"{package}.ThriftHiveMetastore"), importlib.import_module(f"{package}.ttypes")


def fired(name: str) -> Any:
    """fire_listener_event's arguments as a client of release ``name`` builds them."""
    service, types = release(name)
    request = types.FireEventRequest(successful=True, dbName="sales", tableName="orders", partitionVals=["1"],
                                     data=types.FireEventRequestData(insertData=types.InsertEventRequestData(
                                         filesAdded=FILES, filesAddedChecksum=SUMS)))
    return service.fire_listener_event_args(rqst=request)


def as_waggle_decodes(raw: bytes, protocol: ProtocolKind = ProtocolKind.BINARY) -> Any:
    """The arguments as the driver decodes them (waggle's IDL)."""
    return decode_message(raw, protocol, H.fire_listener_event_args, LIMITS)[1]


def compact_call(args: Any) -> bytes:
    buf = TMemoryBuffer()
    proto = TCompactProtocol(buf)
    proto.writeMessageBegin("fire_listener_event", TMessageType.CALL, 7)
    args.write(proto)
    proto.writeMessageEnd()
    return buf.getvalue()


def test_a_hive2_call_loses_its_files_when_read_in_waggles_ids() -> None:
    """The problem: field 1 (a list) is no bool and is skipped; the checksums are read as the files."""
    insert = as_waggle_decodes(encode_call("fire_listener_event", fired("2.3"))).rqst.data.insertData
    assert insert.filesAdded == SUMS and insert.replace is None


@pytest.mark.parametrize("protocol", [ProtocolKind.BINARY, ProtocolKind.COMPACT])
def test_a_hive2_call_arrives_in_waggles_numbering(protocol: ProtocolKind) -> None:
    raw = encode_call("fire_listener_event", fired("2.3")) if protocol is ProtocolKind.BINARY else \
        compact_call(fired("2.3"))
    args = as_waggle_decodes(raw, protocol)
    same, again = arrived(args, raw, protocol)
    assert same is args
    insert = args.rqst.data.insertData
    assert (insert.filesAdded, insert.filesAddedChecksum, insert.replace) == (FILES, SUMS, None)
    assert (args.rqst.dbName, args.rqst.tableName, args.rqst.partitionVals) == ("sales", "orders", ["1"])
    # the bytes say the same in waggle's ids, under the same header
    header, reread = decode_message(again, protocol, H.fire_listener_event_args, LIMITS)
    assert header == Header("fire_listener_event", TMessageType.CALL, 1 if protocol is ProtocolKind.BINARY else 7)
    assert reread == args
    assert arrived(reread, again, protocol) == (reread, again)  # once is enough


@pytest.mark.parametrize("name", ["3.1", "4.x"])
def test_a_hive3_or_4_call_arrives_as_it_came(name: str) -> None:
    raw = encode_call("fire_listener_event", fired(name))
    args = as_waggle_decodes(raw)
    assert arrived(args, raw, ProtocolKind.BINARY) == (args, raw)
    assert args.rqst.data.insertData.filesAdded == FILES
    replaced = fired(name)
    replaced.rqst.data.insertData.replace = True
    raw = encode_call("fire_listener_event", replaced)
    args = as_waggle_decodes(raw)
    assert arrived(args, raw, ProtocolKind.BINARY)[1] is raw  # not even read again: replace is Hive 3+'s


def test_calls_without_insert_data_arrive_as_they_came() -> None:
    args = H.fire_listener_event_args(rqst=T.FireEventRequest(successful=True, dbName="d",
                                                              data=T.FireEventRequestData(refreshEvent=True)))
    raw = encode_call("fire_listener_event", args)
    decoded = as_waggle_decodes(raw)
    assert arrived(decoded, raw, ProtocolKind.BINARY) == (decoded, raw)
    assert not inserts(decoded) and inserts(fired("4.x"))


@pytest.mark.parametrize("name", ["2.3", "3.1", "4.x"])
def test_a_call_leaves_for_hive2_in_its_numbering(name: str) -> None:
    """Whatever release sent it, a Hive 2.3 metastore reads the files where it reads them."""
    raw = encode_call("fire_listener_event", fired(name))
    args, _ = arrived(as_waggle_decodes(raw), raw, ProtocolKind.BINARY)
    args.rqst.catName = "hive"  # a Hive 3+ field: Hive 2.3 has none
    hive2 = as_hive2(args)
    body = fastbinary.encode_binary(hive2, specs.codec(type(hive2)))
    service, _ = release("2.3")
    read = service.fire_listener_event_args()
    read.read(_binary(body))
    insert = read.rqst.data.insertData
    assert (insert.filesAdded, insert.filesAddedChecksum) == (FILES, SUMS)
    assert (read.rqst.successful, read.rqst.dbName, read.rqst.tableName, read.rqst.partitionVals) == \
        (True, "sales", "orders", ["1"])
    # and a Hive 3.1 metastore reads the same from the arguments as they arrived
    service, _ = release("3.1")
    read = service.fire_listener_event_args()
    read.read(_binary(fastbinary.encode_binary(args, specs.codec(type(args)))))
    assert read.rqst.data.insertData.filesAdded == FILES


def _binary(body: bytes) -> Any:
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol

    return TBinaryProtocol(TMemoryBuffer(body))


def test_the_bridge_writes_hive2_numbering_for_a_metastore_without_catalogs() -> None:
    args = fired("4.x")
    bridge = BRIDGES["fire_listener_event"]
    assert METHODS["fire_listener_event"].bridge is bridge
    hive2 = Scripted({"fire_listener_event": T.FireEventResponse()}, catalogs=False)
    assert bridge.answer(args, hive2).success == T.FireEventResponse()
    (method, sent), = hive2.asked
    assert method == "fire_listener_event" and sent.rqst is args.rqst and type(sent) is not type(args)
    hive3 = Scripted({"fire_listener_event": T.FireEventResponse(eventIds=[5])}, catalogs=True)
    assert bridge.answer(args, hive3).success.eventIds == [5]
    assert hive3.asked == [("fire_listener_event", args)]


def test_bridged_unless_known_hive3_and_only_with_insert_data() -> None:
    args = fired("4.x")
    assert bridges_call("fire_listener_event", args, frozenset(), None)
    assert bridges_call("fire_listener_event", args, frozenset(), (2, 3, 10))
    assert not bridges_call("fire_listener_event", args, frozenset(), (3, 1, 3))
    assert not bridges_call("fire_listener_event", args, frozenset(), (4, 0, 1))
    refresh = H.fire_listener_event_args(rqst=T.FireEventRequest(data=T.FireEventRequestData(refreshEvent=True)))
    assert not bridges_call("fire_listener_event", refresh, frozenset(), None)


def test_a_call_is_made_waggles_as_it_arrives() -> None:
    """The driver's Call reads a Hive 2.3 client's insert data again (MethodIO.arrives)."""
    raw = encode_call("fire_listener_event", fired("2.3"))
    call = Call(Header("fire_listener_event", TMessageType.CALL, 1), METHODS["fire_listener_event"],
                METHOD_IO["fire_listener_event"], as_waggle_decodes(raw), raw, Session(),
                WireFormat(TransportKind.BUFFERED, ProtocolKind.BINARY))
    assert call.args.rqst.data.insertData.filesAdded == FILES and call.raw != raw
    assert as_waggle_decodes(call.raw) == call.args
