"""A plain Thrift client for a metastore (or for waggle), built on waggle's own generated code."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport

from waggle.hms.gen.hive_metastore import ThriftHiveMetastore


@contextmanager
def hms_client(host: str, port: int, timeout: float = 30.0) -> Iterator[ThriftHiveMetastore.Client]:
    """Open an unframed binary connection, as Hive and Spark clients do, and close it afterwards."""
    sock = TSocket(host, port)
    sock.setTimeout(timeout * 1000)
    transport = TBufferedTransport(sock)
    transport.open()
    try:
        yield ThriftHiveMetastore.Client(TBinaryProtocolAccelerated(transport))
    finally:
        transport.close()
