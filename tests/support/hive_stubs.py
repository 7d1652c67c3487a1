"""Stub Hive 3.1 and Hive 4.0.1 metastores: thin Thrift wrappers around a REAL Hive 2.3 metastore.

No Hive 3.1 or Hive 4 metastore runs locally (the local metastores come from the Hive 2.3 jars that pyspark
bundles), so tests that need one talk to a *stub*: a small threaded TCP server speaking unframed
TBinaryProtocol (the default Hive client wire format) that forwards every call to a real Hive 2.3 metastore,
and changes only what the modelled version does differently on the wire:

* ``Hive4StubMetastore`` (4.0.1) refuses ``get_table`` and ``get_table_objects_by_name`` (removed by
  HIVE-26537) exactly as a Java Thrift server refuses an unknown method, and understands catalogs.
* ``Hive31StubMetastore`` (3.1.3) refuses every method our IDL has that Hive 3.1's does not (computed from the
  ``hive-metastore-client`` package's Hive 3.1 generated code), understands catalogs, and answers
  ``truncate_table`` (which Hive 2.3 lacks) itself.
* "Understands catalogs" means: ``get_catalogs`` / ``get_catalog`` are answered locally (one catalog,
  ``hive``) and catalog-qualified names (``@hive#db``, ``@hive#`` for all, ``@hive#!`` for empty) in top-level
  string and list<string> arguments are rewritten to what Hive 2.3 understands.
* ``getVersion`` answers the modelled version.
* ``fire_listener_event``'s insert data reaches the Hive 2.3 metastore in Hive 2.3's field ids (``filesAdded`` is
  field 1 there, field 2 in Hive 3+), as the modelled server's own reading would have it.

What they do NOT model: any other behaviour difference of the newer servers (semantics, validation, default
values, new response fields, stats, transactions), methods newer than Hive 2.3 that are not answered locally
(the real 2.3 metastore refuses them with its own ``Invalid method name``), catalogs other than ``hive``,
catalog names inside request structs (ignored), framed or SASL transports, and the data side of
``truncate_table`` (the Hive 3.1 stub records the call and answers success; it deletes nothing).
Every call is recorded (``calls``) so tests can check what a client sent.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TApplicationException, TMessageType, TType
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TMemoryBuffer, TTransportBase

from waggle.hms.gen.fb303 import FacebookService
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.hms.gen.hive_metastore.ttypes import (
    Catalog,
    GetCatalogResponse,
    GetCatalogsResponse,
    NoSuchObjectException,
)

LocalHandler = Callable[[Any], Any]
_SERVICES: tuple[ModuleType, ...] = (ThriftHiveMetastore, FacebookService)
HIVE4_REMOVED = frozenset({"get_table", "get_table_objects_by_name"})


@dataclass
class StubCall:
    """One request a stub received: ``args`` decoded after catalog emulation (None when refused)."""

    method: str
    args: Any
    raw: bytes
    refused: bool


class RecordingTransport(TTransportBase):  # type: ignore[misc]
    """Delegates to ``inner`` and keeps every byte read (``take()`` returns and resets them)."""

    def __init__(self, inner: TTransportBase) -> None:
        self.inner = inner
        self._buf = bytearray()

    def isOpen(self) -> bool:
        return bool(self.inner.isOpen())

    def read(self, sz: int) -> bytes:
        data: bytes = self.inner.read(sz)
        self._buf += data
        return data

    def write(self, buf: bytes) -> None:
        self.inner.write(buf)

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()

    def take(self) -> bytes:
        data, self._buf = bytes(self._buf), bytearray()
        return data


def _service_class(name: str, suffix: str) -> type | None:
    for module in _SERVICES:
        cls = getattr(module, f"{name}{suffix}", None)
        if isinstance(cls, type):
            return cls
    return None


def uncatalog(value: str) -> str:
    """What a Hive 3+ server makes of ``@<cat>#<rest>`` (only catalog ``hive`` exists)."""
    if not value.startswith("@") or "#" not in value:
        return value
    cat, rest = value[1:].split("#", 1)
    if cat.lower() != "hive":
        return value
    return "*" if rest == "" else "" if rest == "!" else rest


def _emulate_catalogs(args: Any) -> None:
    for spec in args.thrift_spec or ():
        if spec is None:
            continue
        _, ttype, field, elem, _default = spec
        value = getattr(args, field, None)
        if ttype == TType.STRING and isinstance(value, str):
            setattr(args, field, uncatalog(value))
        elif ttype == TType.LIST and isinstance(value, list) and elem and elem[0] == TType.STRING:
            setattr(args, field, [uncatalog(v) if isinstance(v, str) else v for v in value])


def _for_hive2(name: str, args: Any) -> Any:
    """The arguments as the Hive 2.3 metastore underneath reads them: ``fire_listener_event``'s insert data in
    Hive 2.3's field ids (hmsclient's generated code); any other call as it is."""
    insert = getattr(getattr(getattr(args, "rqst", None), "data", None), "insertData", None)
    if name != "fire_listener_event" or insert is None:
        return args
    from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore as Hive2
    from hmsclient.genthrift.hive_metastore import ttypes as h2

    r = args.rqst
    return Hive2.fire_listener_event_args(rqst=h2.FireEventRequest(
        successful=r.successful, dbName=r.dbName, tableName=r.tableName, partitionVals=r.partitionVals,
        data=h2.FireEventRequestData(insertData=h2.InsertEventRequestData(
            filesAdded=insert.filesAdded, filesAddedChecksum=insert.filesAddedChecksum))))


def _result_with_exception(result: Any, exc: Exception) -> bool:
    """Set ``exc`` on the result field declaring its type; False when the method does not declare it."""
    for spec in result.thrift_spec or ():
        if spec and spec[0] > 0 and spec[1] == TType.STRUCT and isinstance(exc, spec[3][0]):
            setattr(result, spec[2], exc)
            return True
    return False


def _has_success(result: Any, ttype: int | None = None) -> bool:
    """Whether the result struct has a ``success`` field (of ``ttype``, when given): void methods have none."""
    spec = result.thrift_spec[0] if result.thrift_spec else None
    return spec is not None and spec[0] == 0 and (ttype is None or spec[1] == ttype)


def _extra_string_field(field_id: int, value: str) -> bytes:
    data = value.encode()
    return b"\x0b" + struct.pack(">hi", field_id, len(data)) + data


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.server.stub._serve(self.request)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, stub: HiveStubMetastore) -> None:
        self.stub = stub
        super().__init__(("127.0.0.1", 0), _Handler)
        # accept() never blocks the serving loop (a client gone between select and accept would, and then
        # shutdown() would wait for ever); accepted sockets are blocking again
        self.socket.settimeout(0.5)


class HiveStubMetastore:
    """A Thrift proxy to a real Hive 2.3 metastore that models a newer Hive version (see the module doc).

    ``refused``: methods answered with ``Invalid method name`` like a Java server that lacks them.
    ``catalogs``: answer ``get_catalogs``/``get_catalog`` and rewrite ``@hive#...`` names.
    ``local``: method -> callable(args) returning the ``success`` value (None for void); it may raise one of
    the method's declared exceptions. ``extra_reply_field``: method -> (field id, string) added inside the
    ``success`` struct of that method's replies on the wire (a field the client does not know).
    """

    def __init__(self, upstream_host: str, upstream_port: int, *, version: str,
                 refused: frozenset[str] = frozenset(), catalogs: bool = False,
                 local: dict[str, LocalHandler] | None = None,
                 extra_reply_field: dict[str, tuple[int, str]] | None = None,
                 upstream_timeout: float = 60.0) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.version = version
        self.refused = frozenset(refused)
        self.catalogs = catalogs
        self.local: dict[str, LocalHandler] = {"getVersion": lambda _args: self.version}
        if catalogs:
            self.local.update(get_catalogs=self._get_catalogs, get_catalog=self._get_catalog)
        self.local.update(local or {})
        self.extra_reply_field: dict[str, tuple[int, str]] = dict(extra_reply_field or {})
        self.upstream_timeout = upstream_timeout
        self.calls: list[StubCall] = []
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._warehouse: str | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------
    def start(self) -> HiveStubMetastore:
        if self._server is None:
            self._server = _Server(self)
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                            name=f"hive-stub-{self.version}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            socks = list(self._sockets)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> HiveStubMetastore:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("stub metastore not started")
        return int(self._server.server_address[1])

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    # -- recording ----------------------------------------------------------------------------------------
    def received(self, method: str) -> list[StubCall]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def refusals(self, method: str) -> int:
        return sum(1 for c in self.received(method) if c.refused)

    def clear(self) -> None:
        with self._lock:
            self.calls.clear()

    def _record(self, call: StubCall) -> None:
        with self._lock:
            self.calls.append(call)

    # -- built-in local answers ---------------------------------------------------------------------------
    def _get_catalogs(self, _args: Any) -> GetCatalogsResponse:
        return GetCatalogsResponse(names=["hive"])

    def _get_catalog(self, args: Any) -> GetCatalogResponse:
        name = args.catName.name if args.catName is not None else None
        if (name or "").lower() != "hive":
            raise NoSuchObjectException(message=f"No catalog {name}")
        return GetCatalogResponse(catalog=Catalog(name="hive", description="Hive catalog (stub)",
                                                  locationUri=self._warehouse_uri()))

    def _warehouse_uri(self) -> str:
        """The upstream's warehouse (the default database's location), asked once on a side connection."""
        if self._warehouse is None:
            trans = TBufferedTransport(TSocket(self.upstream_host, self.upstream_port))
            trans.open()
            try:
                db = ThriftHiveMetastore.Client(TBinaryProtocol(trans)).get_database("default")
                self._warehouse = db.locationUri or ""
            finally:
                trans.close()
        return self._warehouse

    # -- one client connection ----------------------------------------------------------------------------
    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection((self.upstream_host, self.upstream_port), self.upstream_timeout)
        except OSError:
            client.close()
            return
        with self._lock:
            self._sockets.update((client, upstream))
        client_sock, upstream_sock = TSocket(), TSocket()
        client_sock.setHandle(client)
        upstream_sock.setHandle(upstream)
        ctrans, utrans = TBufferedTransport(client_sock), TBufferedTransport(upstream_sock)
        recorder = RecordingTransport(ctrans)
        iprot, oprot, uprot = TBinaryProtocol(recorder), TBinaryProtocol(ctrans), TBinaryProtocol(utrans)
        try:
            while True:
                self._one_call(recorder, iprot, oprot, uprot)
        except Exception:  # client or upstream gone, or garbage on the wire: end this connection quietly
            pass
        finally:
            with self._lock:
                self._sockets.difference_update((client, upstream))
            for s in (client, upstream):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def _one_call(self, recorder: RecordingTransport, iprot: TBinaryProtocol, oprot: TBinaryProtocol,
                  uprot: TBinaryProtocol) -> None:
        recorder.take()
        name, mtype, seqid = iprot.readMessageBegin()
        args_cls = _service_class(name, "_args")
        if name in self.refused or args_cls is None:
            iprot.skip(TType.STRUCT)
            iprot.readMessageEnd()
            self._record(StubCall(name, None, recorder.take(), refused=True))
            self._reply_exception(oprot, name, seqid, TApplicationException(
                TApplicationException.UNKNOWN_METHOD, f"Invalid method name: '{name}'"))
            return
        args = args_cls()
        args.read(iprot)
        iprot.readMessageEnd()
        if self.catalogs:
            _emulate_catalogs(args)
        self._record(StubCall(name, args, recorder.take(), refused=False))
        result_cls = _service_class(name, "_result")
        oneway = mtype == TMessageType.ONEWAY or result_cls is None
        handler = self.local.get(name)
        if handler is not None:
            if oneway:
                handler(args)
                return
            assert result_cls is not None
            result = result_cls()
            try:
                value = handler(args)
                if _has_success(result):
                    result.success = value
            except Exception as exc:
                if not _result_with_exception(result, exc):
                    self._reply_exception(oprot, name, seqid, TApplicationException(
                        TApplicationException.INTERNAL_ERROR, f"Internal error processing {name}: {exc}"))
                    return
            self._reply(oprot, name, seqid, result)
            return
        uprot.writeMessageBegin(name, mtype, seqid)
        _for_hive2(name, args).write(uprot)
        uprot.writeMessageEnd()
        uprot.trans.flush()
        if oneway:
            return
        assert result_cls is not None
        _rname, rtype, _rseqid = uprot.readMessageBegin()
        if rtype == TMessageType.EXCEPTION:
            x = TApplicationException()
            x.read(uprot)
            uprot.readMessageEnd()
            self._reply_exception(oprot, name, seqid, x)
            return
        result = result_cls()
        result.read(uprot)
        uprot.readMessageEnd()
        self._reply(oprot, name, seqid, result)

    def _reply(self, oprot: TBinaryProtocol, name: str, seqid: int, result: Any) -> None:
        body = TMemoryBuffer()
        result.write(TBinaryProtocol(body))
        data = body.getvalue()
        extra = self.extra_reply_field.get(name)
        if extra is not None and _has_success(result, TType.STRUCT) and result.success is not None:
            # the body ends with the success struct's STOP and the result's STOP
            data = data[:-2] + _extra_string_field(*extra) + data[-2:]
        oprot.writeMessageBegin(name, TMessageType.REPLY, seqid)
        oprot.trans.write(data)
        oprot.writeMessageEnd()
        oprot.trans.flush()

    @staticmethod
    def _reply_exception(oprot: TBinaryProtocol, name: str, seqid: int, x: TApplicationException) -> None:
        oprot.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
        x.write(oprot)
        oprot.writeMessageEnd()
        oprot.trans.flush()


class Hive4StubMetastore(HiveStubMetastore):
    """Stub Hive 4.0.1 metastore: no ``get_table``/``get_table_objects_by_name`` (HIVE-26537), catalogs."""

    def __init__(self, upstream_host: str, upstream_port: int, *, refused: frozenset[str] = frozenset(),
                 **kw: Any) -> None:
        kw.setdefault("version", "4.0.1")
        kw.setdefault("catalogs", True)
        super().__init__(upstream_host, upstream_port, refused=HIVE4_REMOVED | refused, **kw)


def _iface_methods(iface: type) -> set[str]:
    return {n for n, v in vars(iface).items() if callable(v) and not n.startswith("_")}


def hive31_missing_methods() -> frozenset[str]:
    """Methods of our IDL that Hive 3.1's lacks (from the ``hive-metastore-client`` package's generated code)."""
    from thrift_files.libraries.thrift_hive_metastore_client import ThriftHiveMetastore as Hive31

    ours = {n[: -len("_args")] for n in vars(ThriftHiveMetastore) if n.endswith("_args")}
    return frozenset(ours - _iface_methods(Hive31.Iface))


class Hive31StubMetastore(HiveStubMetastore):
    """Stub Hive 3.1.3 metastore: refuses methods newer than 3.1, catalogs, and a local ``truncate_table``.

    ``truncate_table`` (which Hive 3.1 has and the 2.3 upstream lacks) is only recorded and answered with
    success: the stub models the call, it does not delete any data.
    """

    def __init__(self, upstream_host: str, upstream_port: int, *, refused: frozenset[str] = frozenset(),
                 local: dict[str, LocalHandler] | None = None, **kw: Any) -> None:
        kw.setdefault("version", "3.1.3")
        kw.setdefault("catalogs", True)
        super().__init__(upstream_host, upstream_port, refused=hive31_missing_methods() | refused,
                         local={"truncate_table": lambda _args: None, **(local or {})}, **kw)
