"""A plain Thrift client for a metastore (or for waggle), built on waggle's own generated code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.protocol.TCompactProtocol import TCompactProtocolAccelerated
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TFramedTransport

from waggle.config.model import ProtocolKind, TransportKind, WireFormat
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore

#: what Hive and Spark clients send
_PLAIN = WireFormat()


@contextmanager
def hms_client(host: str, port: int, timeout: float = 30.0, wire: WireFormat = _PLAIN
               ) -> Iterator[ThriftHiveMetastore.Client]:
    """Open a connection (by default unframed binary, as Hive and Spark clients do) and close it afterwards."""
    sock = TSocket(host, port)
    sock.setTimeout(timeout * 1000)
    transport = TFramedTransport(sock) if wire.transport is TransportKind.FRAMED else TBufferedTransport(sock)
    protocol = TCompactProtocolAccelerated if wire.protocol is ProtocolKind.COMPACT else TBinaryProtocolAccelerated
    transport.open()
    try:
        yield ThriftHiveMetastore.Client(protocol(transport))
    finally:
        transport.close()
