"""pyiceberg's Hive catalog, run over waggle's own call path (:mod:`waggle.rest.loopback`) as the REST caller.

pyiceberg's :class:`~pyiceberg.catalog.hive.HiveCatalog` makes Iceberg's Hive commits: it takes the table's
metastore lock, reads the table, checks the commit's requirements against the current metadata, writes the new
metadata file next to the table's, swaps ``metadata_location`` (keeping the old one as
``previous_metadata_location``) and unlocks. Run over a loopback connection, each of those calls reaches the
member that owns the table, under waggle's names, its access checks and its member's own lock, so REST writers
and Thrift writers of one table (Spark's or pyiceberg's Hive catalogs) exclude each other on the same lock.

A catalog object serves one request: pyiceberg's Hive client keeps one open connection at a time. The file IOs
it reads and writes metadata files with are shared by every request of the process (:func:`file_io`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pyiceberg.catalog.hive import OWNER, HiveCatalog, _HiveClient
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.table import Table
from pyiceberg.typedef import EMPTY_DICT, Properties
from thrift.transport.TTransport import TTransportBase

from waggle.rest.loopback import Loopback, transport
from waggle.security.frontdoor import Authenticated

if TYPE_CHECKING:
    from hive_metastore.ThriftHiveMetastore import Client
    from hive_metastore.ttypes import LockRequest
    from hive_metastore.ttypes import Table as HiveTable

    from waggle.server.context import ServerContext

#: how long a commit waits for its table's lock, polling ``check_lock`` (pyiceberg's own properties): from
#: 50 ms, doubling up to 1 s, about 30 s in all, so writers queue on the member's lock rather than fail early
LOCK_WAITS = {"lock-check-min-wait-time": "0.05", "lock-check-max-wait-time": "1.0", "lock-check-retries": "40"}

#: how many file IOs (distinct properties and schemes) the process keeps; past it the oldest is dropped
FILE_IOS_KEPT = 128
_file_ios: dict[tuple[str, tuple[tuple[str, str], ...]], FileIO] = {}


def file_io(properties: Properties, location: str | None) -> FileIO:
    """pyiceberg's file IO for ``properties`` and ``location``, made once per process for the same properties and
    scheme (pyiceberg chooses the IO by them alone) and kept. A new IO per request starts its file system afresh,
    each time: reading a local metadata file took about 0.1 ms more than with a kept IO, and a commit makes several."""
    try:
        key = (urlparse(location).scheme if location else "", tuple(sorted(properties.items())))
        hash(key)
    except TypeError:  # a property that is not a string: not kept
        return load_file_io(properties, location)
    io = _file_ios.get(key)
    if io is None:
        if len(_file_ios) >= FILE_IOS_KEPT:
            del _file_ios[next(iter(_file_ios))]
        io = _file_ios[key] = load_file_io(properties, location)
    return io


class _LoopbackClient(_HiveClient):
    """pyiceberg's Hive client, each of whose connections is a new :class:`Loopback`."""

    def __init__(self, catalog: FederatedCatalog) -> None:  # no super(): it would open a socket to a URI
        self._catalog = catalog
        self._ugi = None
        self._was_opened = False
        self._transport = self._init_thrift_transport()

    def _init_thrift_transport(self) -> TTransportBase:
        sock = self._catalog.connection()
        wrapped, protocol = transport(self._catalog.context, sock)
        self._protocol_class = protocol
        return wrapped

    def _client(self) -> Client:
        from hive_metastore.ThriftHiveMetastore import Client

        return Client(self._protocol_class(self._transport))


class FederatedCatalog(HiveCatalog):
    """The federation as one Iceberg catalog, for one caller and one request."""

    def __init__(self, context: ServerContext, who: Authenticated | None, timeout: float, **properties: str) -> None:
        self.context = context
        self.who = who
        self.timeout = timeout
        #: every connection this request opened, the newest last (its driver's last answer explains an error)
        self.opened: list[Loopback] = []
        super().__init__("waggle", **{**LOCK_WAITS, **properties})

    def _create_hive_client(self, properties: dict[str, str]) -> _HiveClient:  # type: ignore[override]
        return _LoopbackClient(self)

    def connection(self) -> Loopback:
        sock = Loopback(self.context, self.who, self.timeout)
        self.opened.append(sock)
        return sock

    def _load_file_io(self, properties: Properties = EMPTY_DICT, location: str | None = None) -> FileIO:
        return file_io({**self.properties, **properties}, location)

    @property
    def latest(self) -> Loopback | None:
        return self.opened[-1] if self.opened else None

    def _convert_iceberg_into_hive(self, table: Table) -> HiveTable:
        hive = super()._convert_iceberg_into_hive(table)
        if self.who is not None and OWNER not in (table.properties or {}):
            hive.owner = self.who.user  # the caller owns what it creates, not the server's OS user
        return hive

    def _create_lock_request(self, database_name: str, table_name: str) -> LockRequest:
        request = super()._create_lock_request(database_name, table_name)
        if self.who is not None:
            request.user = self.who.user  # SHOW LOCKS names the caller, not the server's OS user
        return request

    def client(self) -> Any:
        """An open connection's Thrift client, as ``with catalog.client() as c:``."""
        return self._client
