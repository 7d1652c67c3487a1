"""Names replaced in encoded replies: identical to decoding, rewriting and encoding, or refused safely."""

from __future__ import annotations

import copy

from thrift.Thrift import TMessageType

from waggle.config.model import Limits, ProtocolKind, WireFormat
from waggle.hms.decode import decode_message
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore import ttypes
from waggle.hms.rewrite import CALL_NAMES
from waggle.hms.splice import Splicer
from waggle.hms.wire import Wire

LIMITS = Limits(1 << 30, 1 << 26, 10_000_000)
SPLICER = Splicer(CALL_NAMES)


def encode(name: str, result) -> bytes:
    wire = Wire(None, WireFormat(), LIMITS)  # type: ignore[arg-type]
    return wire.encode(name, TMessageType.REPLY, 7, result)


def prefix(name: str) -> str:
    return "fed_" + name


def full_path(raw: bytes, cls: type):
    _, result = decode_message(raw, ProtocolKind.BINARY, cls, LIMITS)
    CALL_NAMES.rewrite(result, prefix)
    return result


def partitions(n: int, params=None) -> list:
    sd = ttypes.StorageDescriptor(cols=[ttypes.FieldSchema("id", "int", "sales")], location="file:/w/sales.db/t")
    return [ttypes.Partition(values=[f"p{i}"], dbName="sales", tableName="t", sd=copy.deepcopy(sd),
                             parameters=dict(params or {})) for i in range(n)]


def test_spliced_partitions_equal_the_full_path_and_keep_everything_else():
    raw = encode("get_partitions", T.get_partitions_result(success=partitions(50)))
    spliced = SPLICER.splice_names(raw, T.get_partitions_result, prefix, LIMITS)
    assert spliced is not None and spliced != raw
    _, got = decode_message(spliced, ProtocolKind.BINARY, T.get_partitions_result, LIMITS)
    assert got == full_path(raw, T.get_partitions_result)
    assert {p.dbName for p in got.success} == {"fed_sales"}
    assert got.success[0].sd.cols[0].comment == "sales"  # a column comment is not a database name
    assert len(spliced) == len(raw) + 50 * len("fed_")


def test_a_name_hidden_in_other_bytes_makes_it_fall_back():
    # a parameter value that contains the exact encoding of Partition.dbName: the counts differ, so no splice
    marker = b"\x0b\x00\x02\x00\x00\x00\x05sales"
    assert marker in encode("get_partitions", T.get_partitions_result(success=partitions(1)))
    raw = encode("get_partitions", T.get_partitions_result(
        success=partitions(2, {"note": marker.decode("latin-1")})))
    assert SPLICER.splice_names(raw, T.get_partitions_result, prefix, LIMITS) is None


def test_views_and_qualified_names_take_the_full_path():
    view = ttypes.Table(dbName="sales", tableName="v", viewOriginalText="SELECT * FROM sales.t")
    raw = encode("get_table", T.get_table_result(success=view))
    assert SPLICER.splice_names(raw, T.get_table_result, prefix, LIMITS) is None
    table = ttypes.Table(dbName="sales", tableName="t")
    raw = encode("get_table", T.get_table_result(success=table))
    _, got = decode_message(SPLICER.splice_names(raw, T.get_table_result, prefix, LIMITS), ProtocolKind.BINARY,
                            T.get_table_result, LIMITS)
    assert got.success.dbName == "fed_sales"


def test_nested_names_in_several_structs():
    desc = ttypes.ColumnStatisticsDesc(isTblLevel=True, dbName="sales", tableName="t")
    table = ttypes.Table(dbName="sales", tableName="t",
                         colStats=ttypes.ColumnStatistics(statsDesc=desc, statsObj=[]))
    raw = encode("get_table_req", T.get_table_req_result(success=ttypes.GetTableResult(table=table)))
    spliced = SPLICER.splice_names(raw, T.get_table_req_result, prefix, LIMITS)
    _, got = decode_message(spliced, ProtocolKind.BINARY, T.get_table_req_result, LIMITS)
    assert got == full_path(raw, T.get_table_req_result)
    assert got.success.table.colStats.statsDesc.dbName == "fed_sales"


def test_a_body_seen_before_is_spliced_alike_whatever_its_header():
    """Small replies' names are remembered by body: the next reply (another seqid, another name function) is
    spliced as if seen for the first time, and one that could not be spliced still cannot."""
    splicer = Splicer(CALL_NAMES)
    wire = Wire(None, WireFormat(), LIMITS)  # type: ignore[arg-type]
    result = T.get_database_result(success=ttypes.Database(name="sales", locationUri="file:/w/sales.db"))
    for seqid, fn in ((7, prefix), (8, prefix), (9, lambda n: "other_" + n), (10, lambda n: n)):
        raw = wire.encode("get_database", TMessageType.REPLY, seqid, result)
        spliced = splicer.splice_names(raw, T.get_database_result, fn, LIMITS)
        assert spliced is not None
        header, got = decode_message(spliced, ProtocolKind.BINARY, T.get_database_result, LIMITS)
        assert header.seqid == seqid and got.success.name == fn("sales")
    view = T.get_table_result(success=ttypes.Table(dbName="sales", tableName="v", viewOriginalText="SELECT 1"))
    for seqid in (1, 2):
        raw = wire.encode("get_table", TMessageType.REPLY, seqid, view)
        assert splicer.splice_names(raw, T.get_table_result, prefix, LIMITS) is None


def test_a_small_reply_seen_before_is_spliced_from_memory_for_its_own_header_and_mapping():
    """The same body under another header (seqid) gets that header; another mapping gets its own names."""
    splicer = Splicer(CALL_NAMES)
    table = ttypes.Table(tableName="t", dbName="sales", sd=ttypes.StorageDescriptor(location="file:/w/sales.db/t"))
    wire = Wire(None, WireFormat(), LIMITS)  # type: ignore[arg-type]
    first, second = (wire.encode("get_table", TMessageType.REPLY, seqid, T.get_table_result(success=table))
                     for seqid in (7, 8))
    for raw in (first, second, first):
        spliced = splicer.splice_names(raw, T.get_table_result, prefix, LIMITS)
        assert spliced is not None
        header, got = decode_message(spliced, ProtocolKind.BINARY, T.get_table_result, LIMITS)
        assert header.seqid == (8 if raw is second else 7) and got == full_path(raw, T.get_table_result)
    other = splicer.splice_names(second, T.get_table_result, lambda name: "x_" + name, LIMITS)
    assert other is not None
    assert decode_message(other, ProtocolKind.BINARY, T.get_table_result, LIMITS)[1].success.dbName == "x_sales"
    assert splicer.splice_names(first, T.get_table_result, lambda name: name, LIMITS) == first
