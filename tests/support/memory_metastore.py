"""An in-memory Hive metastore behind a real Thrift wire, and a harness that runs waggle's dispatch in front of it.

No Java and no sockets: every upstream connection waggle's pools or health checks open is one end of an
in-memory stream pair (:mod:`tests.support.memory_stream`); the other end is served in a greenlet by the generated
Thrift ``Processor`` over a small unframed ``TBinaryProtocol`` transport, answering from dicts
(:class:`MemoryMetastore`). Clients talk to waggle the same way: a stream pair whose far end is served by waggle's
client-side driver (:func:`serve_client`). The streams cooperate with gevent's hub, so nothing is monkey-patched.

Knobs per metastore:

* ``missing`` -- methods answered with ``TApplicationException(UNKNOWN_METHOD)`` exactly as a Java Thrift server
  answers a method it does not have (Hive 2.3 lacks ``get_catalogs`` and the Hive 4 ``*_req`` methods; Hive 4.0.1
  lacks ``get_table``/``get_table_objects_by_name``). Methods outside the IDL are answered the same way, unless
  ``extra`` gives them an answer.
* ``delay`` -- method -> seconds slept (``gevent.sleep``) before answering.
* ``down`` -- the connector refuses: :class:`~waggle.upstream.client.UpstreamError` ``is unreachable``.
* ``calls`` -- every call that reached it: (method, the connection's ``set_ugi`` user, arguments, connection
  number, whether it was refused as unknown). Health checks (``getStatus``) are counted in ``status_checks`` only.
"""

from __future__ import annotations

import copy
import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gevent
import yaml
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport.TTransport import TTransportBase, TTransportException

from tests.support.memory_stream import MemoryStream, pair
from waggle.config.loader import load
from waggle.hms.gen.fb303.ttypes import fb_status
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.hms.gen.hive_metastore.ttypes import (
    AlreadyExistsException,
    Database,
    FieldSchema,
    Function,
    FunctionType,
    GetAllFunctionsResponse,
    GetCatalogsResponse,
    GetTableResult,
    GetTablesResult,
    InvalidObjectException,
    LockResponse,
    LockState,
    MetaException,
    NoSuchLockException,
    NoSuchObjectException,
    PrincipalType,
    SerDeInfo,
    StorageDescriptor,
    Table,
    TableMeta,
)
from waggle.runtime import Runtime
from waggle.server.driver import ClientDriver
from waggle.upstream.client import Lost, UpstreamConnection, UpstreamError

HIVE4_0_1_MISSING = frozenset({"get_table", "get_table_objects_by_name"})
#: What a Hive 2.3 metastore lacks of the methods these tests use.
HIVE2_MISSING = frozenset({"get_catalogs", "get_catalog", "get_database_req", "get_table_req",
                           "get_table_objects_by_name_req"})


# -- the client-side driver: THE one place that builds it ------------------------------------------------------
def serve_client(runtime: Runtime, stream: MemoryStream, peer: Any) -> None:
    """Serve one client connection with waggle's client-side driver until the client closes it."""
    ClientDriver(stream, peer, runtime).serve()


# -- Thrift over a memory stream --------------------------------------------------------------------------------
class StreamTransport(TTransportBase):  # type: ignore[misc]
    """Unframed Thrift transport over a memory stream: reads buffered, writes sent whole at ``flush``."""

    def __init__(self, stream: MemoryStream) -> None:
        self.stream = stream
        self._rbuf = b""
        self._wbuf: list[bytes] = []

    def isOpen(self) -> bool:
        return True

    def read(self, sz: int) -> bytes:
        if not self._rbuf:
            data = self.stream.recv(65536)
            if not data:
                raise TTransportException(TTransportException.END_OF_FILE, "peer closed")
            self._rbuf = data
        out, self._rbuf = self._rbuf[:sz], self._rbuf[sz:]
        return out

    def write(self, buf: bytes) -> None:
        self._wbuf.append(bytes(buf))

    def flush(self) -> None:
        data, self._wbuf = b"".join(self._wbuf), []
        self.stream.sendall(data)

    def close(self) -> None:
        self.stream.close()


def encode_call(name: str, args: Any, seqid: int) -> bytes:
    """A call as a Thrift client puts it on the wire (strict binary, unframed), with the pure-Python codec."""
    from thrift.transport.TTransport import TMemoryBuffer

    buf = TMemoryBuffer()
    proto = TBinaryProtocol(buf)
    proto.writeMessageBegin(name, TMessageType.CALL, seqid)
    args.write(proto)
    proto.writeMessageEnd()
    return bytes(buf.getvalue())


def _write_exception(proto: TBinaryProtocol, name: str, seqid: int, exc: TApplicationException) -> None:
    proto.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
    exc.write(proto)
    proto.writeMessageEnd()
    proto.trans.flush()


# -- the in-memory metastore ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    method: str
    user: str | None  # the set_ugi user of the connection it arrived on (None: never set)
    args: tuple[Any, ...]  # as the handler received them, positionally
    conn: int  # which connection to this metastore (1, 2, ...)
    refused: bool = False  # answered UNKNOWN_METHOD


def _pattern(pattern: str | None) -> re.Pattern[str]:
    """A Hive name pattern (``*`` wildcard, ``|`` alternatives, case-insensitive) as a regex."""
    text = pattern if pattern not in (None, "") else "*"
    assert text is not None
    alternatives = ["[^.]*".join(re.escape(part) for part in alt.strip().split("*")) for alt in text.split("|")]
    return re.compile("|".join(f"(?:{a})" for a in alternatives), re.IGNORECASE)


class MemoryMetastore:
    """A small Hive metastore in dicts, served over real Thrift (see the module doc)."""

    def __init__(self, name: str, *, catalogs: bool = False, missing: Iterable[str] = (),
                 delay: dict[str, float] | None = None, lock_ids_from: int = 1) -> None:
        self.name = name
        #: understands ``@hive#db`` names and has get_catalogs (Hive 3+); without it, a Hive 2 metastore
        self.catalogs = catalogs
        self.missing: set[str] = set(missing) | (set() if catalogs else {"get_catalogs", "get_catalog"})
        self.delay: dict[str, float] = dict(delay or {})
        self.down = False
        #: extra methods outside waggle's IDL: name -> (args class, result class, args -> success)
        self.extra: dict[str, tuple[type, type, Callable[[Any], Any]]] = {}
        self.databases: dict[str, Database] = {}
        self.tables: dict[tuple[str, str], Table] = {}
        self.functions: list[Function] = []
        self.locks: dict[int, Any] = {}
        self._lock_ids = itertools.count(lock_ids_from)
        self.calls: list[Call] = []
        self.status_checks = 0
        self.connections = 0
        self._greenlets: list[gevent.Greenlet] = []

    # -- contents --------------------------------------------------------------------------------------------
    def add_database(self, *names: str) -> MemoryMetastore:
        for name in names:
            self.databases[name] = Database(
                name=name, description=f"{name} in {self.name}", locationUri=f"file:/{self.name}/{name}.db",
                parameters={}, ownerName="hive", ownerType=PrincipalType.USER,
                catalogName="hive" if self.catalogs else None)
        return self

    def add_table(self, db: str, *names: str) -> MemoryMetastore:
        for name in names:
            self.tables[(db, name)] = Table(
                tableName=name, dbName=db, owner="hive", createTime=1, lastAccessTime=0, retention=0,
                sd=StorageDescriptor(cols=[FieldSchema("id", "int", None)], location=f"file:/{self.name}/{db}/{name}",
                                     inputFormat="in", outputFormat="out", compressed=False, numBuckets=-1,
                                     serdeInfo=SerDeInfo(name=None, serializationLib="lib", parameters={}),
                                     bucketCols=[], sortCols=[], parameters={}),
                partitionKeys=[], parameters={}, tableType="MANAGED_TABLE",
                catName="hive" if self.catalogs else None)
        return self

    def add_function(self, db: str, *names: str) -> MemoryMetastore:
        for name in names:
            self.functions.append(Function(functionName=name, dbName=db, className=f"udf.{name}", ownerName="hive",
                                           ownerType=PrincipalType.USER, createTime=1,
                                           functionType=FunctionType.JAVA, resourceUris=[],
                                           catName="hive" if self.catalogs else None))
        return self

    # -- what reached it ---------------------------------------------------------------------------------------
    def received(self, method: str | None = None) -> list[Call]:
        """The calls that reached it (``method``'s only, if given), ``set_ugi`` included."""
        return [c for c in self.calls if method is None or c.method == method]

    def methods(self) -> list[str]:
        """The names of the calls that reached it, in order, without the pools' ``set_ugi``."""
        return [c.method for c in self.calls if c.method != "set_ugi"]

    # -- connections ---------------------------------------------------------------------------------------------
    def connect(self, config: Any, limits: Any, deadlines: Any, tunnel: Any = None) -> UpstreamConnection:
        """The connector: a real :class:`UpstreamConnection` over a stream pair whose far end this serves."""
        address = config.uris[0]
        if self.down:
            raise UpstreamError(config.name, f"is unreachable: {address}: Connection refused after 0 ms",
                                lost=Lost.UNREACHABLE)
        self.connections += 1
        ours, theirs = pair(names=(f"waggle-{config.name}-{self.connections}", f"{self.name}-{self.connections}"))
        self._greenlets.append(gevent.spawn(self._serve, theirs, self.connections))
        return UpstreamConnection(config.name, address, ours, config, limits, deadlines)

    def close(self) -> None:
        gevent.killall(self._greenlets, block=True, timeout=1)
        self._greenlets.clear()

    def _serve(self, stream: MemoryStream, conn: int) -> None:
        session = _Session(self, conn)
        processor = ThriftHiveMetastore.Processor(_Recorder(session))
        proto = TBinaryProtocol(StreamTransport(stream))
        try:
            while True:
                name, _mtype, seqid = proto.readMessageBegin()
                if name in self.extra:
                    args_cls, result_cls, answer = self.extra[name]
                    args = args_cls()
                    args.read(proto)
                    proto.readMessageEnd()
                    self.calls.append(Call(name, session.user, (args,), conn))
                    result = result_cls(success=answer(args))
                    proto.writeMessageBegin(name, TMessageType.REPLY, seqid)
                    result.write(proto)
                    proto.writeMessageEnd()
                    proto.trans.flush()
                    continue
                if name in self.missing or name not in processor._processMap:
                    proto.skip(TType.STRUCT)
                    proto.readMessageEnd()
                    self.calls.append(Call(name, session.user, (), conn, refused=True))
                    _write_exception(proto, name, seqid, TApplicationException(
                        TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{name}'"))
                    continue
                processor._processMap[name](processor, seqid, proto, proto)
        except (TTransportException, EOFError, OSError):
            pass  # waggle closed (or abandoned) the connection
        finally:
            stream.close()


class _Recorder:
    """The handler the Processor calls: records the call, sleeps its ``delay``, then answers from the session."""

    def __init__(self, session: _Session) -> None:
        self._session = session

    def __getattr__(self, method: str) -> Callable[..., Any]:
        session = self._session
        store = session.store
        impl = getattr(session, method)

        def handle(*args: Any) -> Any:
            if method == "getStatus":
                store.status_checks += 1
            else:
                store.calls.append(Call(method, session.user, args, session.conn))
            pause = store.delay.get(method)
            if pause:
                gevent.sleep(pause)
            return impl(*args)

        return handle


class _Session:
    """One connection's view of a :class:`MemoryMetastore`: the Hive methods these tests use."""

    def __init__(self, store: MemoryMetastore, conn: int) -> None:
        self.store = store
        self.conn = conn
        self.user: str | None = None

    # -- names -------------------------------------------------------------------------------------------------
    def _db_name(self, name: str | None) -> str:
        """A database name as this metastore reads it: ``@hive#db`` only when it has catalogs."""
        text = name or ""
        if self.store.catalogs and text.startswith("@") and "#" in text:
            catalog, text = text[1:].split("#", 1)
            if catalog.lower() != "hive":
                raise NoSuchObjectException(f"catalog {catalog} does not exist")
        return text.lower()

    def _database(self, name: str | None) -> Database:
        db = self.store.databases.get(self._db_name(name))
        if db is None:
            raise NoSuchObjectException(f"{name}: database does not exist in {self.store.name}")
        return copy.deepcopy(db)

    def _table(self, db: str | None, name: str | None) -> Table:
        table = self.store.tables.get((self._db_name(db), (name or "").lower()))
        if table is None:
            raise NoSuchObjectException(f"{db}.{name} table not found in {self.store.name}")
        return copy.deepcopy(table)

    # -- fb303 and the session -------------------------------------------------------------------------------
    def getStatus(self) -> int:
        return fb_status.ALIVE

    def set_ugi(self, user_name: str, group_names: list[str]) -> list[str]:
        if self.user is not None:
            raise MetaException("UGI is already set. Resetting is not allowed")
        self.user = user_name
        return [*(group_names or []), f"groups-of-{self.store.name}"]

    def get_catalogs(self) -> GetCatalogsResponse:
        return GetCatalogsResponse(names=["hive"])

    # -- databases ---------------------------------------------------------------------------------------------
    def get_all_databases(self) -> list[str]:
        return sorted(self.store.databases)

    def get_databases(self, pattern: str | None) -> list[str]:
        regex = _pattern(self._db_name(pattern) if pattern else pattern)
        return [d for d in sorted(self.store.databases) if regex.fullmatch(d)]

    def get_database(self, name: str) -> Database:
        return self._database(name)

    def get_database_req(self, request: Any) -> Database:
        catalog = request.catalogName
        if catalog is not None and catalog.lower() != "hive":
            raise NoSuchObjectException(f"catalog {catalog} does not exist")
        return self._database(request.name)

    def create_database(self, database: Database) -> None:
        name = self._db_name(database.name)
        if name in self.store.databases:
            raise AlreadyExistsException(f"database {name} already exists")
        self.store.add_database(name)

    # -- tables ------------------------------------------------------------------------------------------------
    def get_all_tables(self, db_name: str) -> list[str]:
        db = self._database(db_name).name
        return sorted(t for d, t in self.store.tables if d == db)

    def get_table(self, dbname: str, tbl_name: str) -> Table:
        return self._table(dbname, tbl_name)

    def get_table_req(self, req: Any) -> GetTableResult:
        return GetTableResult(table=self._table(req.dbName, req.tblName))

    def get_table_objects_by_name(self, dbname: str, tbl_names: list[str]) -> list[Table]:
        db = self._db_name(dbname)
        return [copy.deepcopy(self.store.tables[(db, t)]) for t in tbl_names or () if (db, t) in self.store.tables]

    def get_table_objects_by_name_req(self, req: Any) -> GetTablesResult:
        return GetTablesResult(tables=self.get_table_objects_by_name(req.dbName, req.tblNames))

    def create_table(self, tbl: Table) -> None:
        db = self._database(tbl.dbName).name
        if (db, tbl.tableName) in self.store.tables:
            raise AlreadyExistsException(f"table {db}.{tbl.tableName} already exists")
        if not tbl.tableName:
            raise InvalidObjectException("a table needs a name")
        self.store.add_table(db, tbl.tableName)

    def drop_table(self, dbname: str, name: str, deleteData: bool) -> None:
        table = self._table(dbname, name)
        del self.store.tables[(table.dbName, table.tableName)]

    def get_table_meta(self, db_patterns: str | None, tbl_patterns: str | None, tbl_types: list[str] | None
                       ) -> list[TableMeta]:
        dbs, tables = _pattern(self._db_name(db_patterns) if db_patterns else None), _pattern(tbl_patterns)
        return [TableMeta(dbName=t.dbName, tableName=t.tableName, tableType=t.tableType, comments=None,
                          catName=t.catName)
                for (d, name), t in sorted(self.store.tables.items())
                if dbs.fullmatch(d) and tables.fullmatch(name) and (not tbl_types or t.tableType in tbl_types)]

    # -- functions -----------------------------------------------------------------------------------------------
    def get_all_functions(self) -> GetAllFunctionsResponse:
        return GetAllFunctionsResponse(functions=copy.deepcopy(self.store.functions))

    # -- locks ---------------------------------------------------------------------------------------------------
    def lock(self, rqst: Any) -> LockResponse:
        for component in rqst.component or ():
            self._database(component.dbname)
        lockid = next(self.store._lock_ids)
        self.store.locks[lockid] = rqst
        return LockResponse(lockid=lockid, state=LockState.ACQUIRED)

    def check_lock(self, rqst: Any) -> LockResponse:
        if rqst.lockid not in self.store.locks:
            raise NoSuchLockException(f"no lock {rqst.lockid} in {self.store.name}")
        return LockResponse(lockid=rqst.lockid, state=LockState.ACQUIRED)

    def unlock(self, rqst: Any) -> None:
        if self.store.locks.pop(rqst.lockid, None) is None:
            raise NoSuchLockException(f"no lock {rqst.lockid} in {self.store.name}")

    def heartbeat(self, ids: Any) -> None:
        if ids.lockid is not None and ids.lockid not in self.store.locks:
            raise NoSuchLockException(f"no lock {ids.lockid} in {self.store.name}")


# -- a client ----------------------------------------------------------------------------------------------------
class Client:
    """A synchronous Thrift client of waggle over a stream pair (one client connection)."""

    def __init__(self, runtime: Runtime, number: int, timeout: float = 5.0) -> None:
        ours, theirs = pair(names=(f"client-{number}", f"waggle-client-{number}"))
        ours.settimeout(timeout)  # a call waggle never answers fails the test instead of hanging it
        #: the client's end of the pair (a stream, named as the socket it stands for)
        self.sock = ours
        self._theirs = theirs
        self.driver = gevent.spawn(self._drive, runtime, theirs, ("memory-client", number))
        self.proto = TBinaryProtocol(StreamTransport(ours))
        self._seqids = itertools.count(1)

    @staticmethod
    def _drive(runtime: Runtime, stream: MemoryStream, peer: Any) -> None:
        try:
            serve_client(runtime, stream, peer)
        finally:
            stream.close()

    def send(self, name: str, args: Any, result_class: type | None) -> Any:
        """One call of any name: the decoded result struct, or the ``TApplicationException`` answered."""
        seqid = next(self._seqids)
        self.sock.sendall(encode_call(name, args, seqid))
        rname, mtype, rseqid = self.proto.readMessageBegin()
        assert (rname, rseqid) == (name, seqid), f"reply to {rname}#{rseqid}, expected {name}#{seqid}"
        if mtype == TMessageType.EXCEPTION:
            body: Any = TApplicationException()
        else:
            assert mtype == TMessageType.REPLY and result_class is not None
            body = result_class()
        body.read(self.proto)
        self.proto.readMessageEnd()
        return body

    def call(self, method: str, **kwargs: Any) -> Any:
        """``method`` with these arguments: its result struct (success or declared exception), or the
        ``TApplicationException`` waggle answered with."""
        args = getattr(ThriftHiveMetastore, f"{method}_args")(**kwargs)
        return self.send(method, args, getattr(ThriftHiveMetastore, f"{method}_result"))

    def ok(self, method: str, **kwargs: Any) -> Any:
        """``method``'s success value; fails the test on any exception."""
        result = self.call(method, **kwargs)
        assert not isinstance(result, TApplicationException), f"{method}: {result.type} {result.message}"
        failed = failure(result)
        assert failed is None, f"{method}: {type(failed).__name__}: {getattr(failed, 'message', failed)}"
        return getattr(result, "success", None)

    def close(self) -> None:
        self.sock.close()
        self.driver.join(timeout=2)
        self.driver.kill(block=False)


def failure(result: Any) -> Any:
    """The declared exception a result struct carries (or the ``TApplicationException`` itself), or None."""
    if isinstance(result, TApplicationException):
        return result
    for entry in type(result).thrift_spec or ():
        if entry and entry[0] > 0 and getattr(result, entry[2], None) is not None:
            return getattr(result, entry[2])
    return None


# -- the harness -------------------------------------------------------------------------------------------------
_SERVER_DEFAULTS: dict[str, Any] = {
    "database-resolution": "PREFIXED",
    "fan-out-timeout": 200,
    "limits.queue-wait-ms": 100,
    "down-member-retry": 1,
    "status-polling-delay": 60,
}


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"limits.queue-wait-ms": 1}`` -> ``{"limits": {"queue-wait-ms": 1}}``."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


class Harness:
    """waggle's runtime in front of in-memory metastores: the first is the primary, named after the store."""

    def __init__(self, tmp_path: Path, primary: tuple[MemoryMetastore, dict[str, Any]],
                 federated: Iterable[tuple[MemoryMetastore, dict[str, Any]]] = (),
                 server: dict[str, Any] | None = None) -> None:
        self.stores: dict[str, MemoryMetastore] = {}
        members = []
        for store, settings in [primary, *federated]:
            self.stores[store.name] = store
            members.append({"name": store.name, "remote-meta-store-uris": "thrift://127.0.0.1:9", **settings})
        federation = {"primary-meta-store": members[0], "federated-meta-stores": members[1:]}
        server_file = tmp_path / "waggle-server.yml"
        federation_file = tmp_path / "waggle-federation.yml"
        server_file.write_text(yaml.safe_dump(_nest({**_SERVER_DEFAULTS, **(server or {})})))
        federation_file.write_text(yaml.safe_dump(federation))
        self.config = load(str(server_file), str(federation_file))
        self.runtime = Runtime(self.config, connector=self._connect)
        self.runtime.start()  # every metastore is checked (getStatus, counted apart) before waggle serves
        self._clients: list[Client] = []

    def _connect(self, config: Any, limits: Any, deadlines: Any, tunnel: Any = None) -> UpstreamConnection:
        return self.stores[config.name].connect(config, limits, deadlines, tunnel=tunnel)

    def client(self) -> Client:
        client = Client(self.runtime, len(self._clients) + 1)
        self._clients.append(client)
        return client

    def all_calls(self) -> dict[str, list[str]]:
        """Every metastore's received method names (``set_ugi`` left out)."""
        return {name: store.methods() for name, store in self.stores.items()}

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self.runtime.close()
        for store in self.stores.values():
            store.close()


@contextmanager
def elapsed() -> Iterator[list[float]]:
    """``with elapsed() as took: ...`` then ``took[0]`` is the seconds the block took."""
    took: list[float] = []
    started = time.monotonic()
    try:
        yield took
    finally:
        took.append(time.monotonic() - started)


@contextmanager
def harnesses(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    """A factory of harnesses (``build(primary, federated, server)``), every one closed at the end."""
    built: list[Harness] = []

    def build(primary: tuple[MemoryMetastore, dict[str, Any]],
              federated: Iterable[tuple[MemoryMetastore, dict[str, Any]]] = (),
              server: dict[str, Any] | None = None) -> Harness:
        workdir = tmp_path / f"waggle-{len(built) + 1}"
        workdir.mkdir()
        harness = Harness(workdir, primary, federated, server)
        built.append(harness)
        return harness

    try:
        yield build
    finally:
        for harness in built:
            harness.close()
