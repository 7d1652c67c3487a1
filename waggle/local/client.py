"""A Thrift client of a metastore (or of waggle) known only by its address: the demo's, the local metastores'
and the benches' and tests' plain client. It is :mod:`waggle.upstream.blocking`, the client every tool uses."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from waggle.config.model import WireFormat
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.upstream.blocking import client, plain_member

#: what Hive and Spark clients send
_PLAIN = WireFormat()


@contextmanager
def hms_client(host: str, port: int, timeout: float = 30.0, wire: WireFormat = _PLAIN
               ) -> Iterator[ThriftHiveMetastore.Client]:
    """Open a connection (by default unframed binary, as Hive and Spark clients do) and close it afterwards."""
    member = plain_member(host, port, wire=wire, connect_timeout_ms=int(timeout * 1000))
    with client(member, None, timeout) as c:
        yield c
