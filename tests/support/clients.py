"""Thrift clients as users run them (hmsclient, hive-metastore-client, waggle's own IDL), and messages encoded
exactly as a peer puts them on the wire."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def hive2_client(port: int, timeout: float = 30.0, framed: bool = False) -> Iterator[Any]:
    """hmsclient: the generated Hive 2 client many users already run (unframed, or framed)."""
    from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore
    from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
    from thrift.transport.TSocket import TSocket
    from thrift.transport.TTransport import TBufferedTransport, TFramedTransport

    sock = TSocket("127.0.0.1", port)
    sock.setTimeout(timeout * 1000)
    transport = TFramedTransport(sock) if framed else TBufferedTransport(sock)
    transport.open()
    try:
        yield ThriftHiveMetastore.Client(TBinaryProtocolAccelerated(transport))
    finally:
        transport.close()


def encode_call(name: str, args: Any, seqid: int = 1, mtype: int | None = None) -> bytes:
    """A message exactly as a Thrift peer puts it on the wire (unframed, strict binary); a call by default."""
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.Thrift import TMessageType
    from thrift.transport.TTransport import TMemoryBuffer

    buf = TMemoryBuffer()
    proto = TBinaryProtocol(buf)
    proto.writeMessageBegin(name, TMessageType.CALL if mtype is None else mtype, seqid)
    args.write(proto)
    proto.writeMessageEnd()
    return buf.getvalue()


@contextmanager
def release_client(release: str, port: int, timeout: float = 30.0) -> Iterator[tuple[Any, Any]]:
    """(client, ttypes) of one Hive release's generated code: hmsclient (2.3), hive-metastore-client (3.1),
    or waggle's own IDL (4.x)."""
    import importlib

    from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
    from thrift.transport.TSocket import TSocket
    from thrift.transport.TTransport import TBufferedTransport

    package = {"2.3": "hmsclient.genthrift.hive_metastore",
               "3.1": "thrift_files.libraries.thrift_hive_metastore_client",
               "4.x": "waggle.hms.gen.hive_metastore"}[release]
    service = importlib.import_module(f"{package}.ThriftHiveMetastore")
    types = importlib.import_module(f"{package}.ttypes")
    sock = TSocket("127.0.0.1", port)
    sock.setTimeout(timeout * 1000)
    transport = TBufferedTransport(sock)
    transport.open()
    try:
        yield service.Client(TBinaryProtocolAccelerated(transport)), types
    finally:
        transport.close()
