"""Notification events as the follower reads them: which table, which partitions, which rename; which database;
which function.

Messages are those of Hive's message factories, in both the formats metastores write: ``json-0.2``
(``JSONMessageFactory``, Hive 2.x and 3.x) and Hive 4's default ``gzip(json-2.0)`` (``GzipJSONMessageEncoder``:
the same JSON, gzipped, then base64; its bodies start ``H4sI``). A message is a JSON object with ``db`` and, for a
table's events, ``table``; partition events list the partitions' values by key (``partitions`` in
ADD/DROP_PARTITION, ``keyValues`` in ALTER_PARTITION, ``partKeyVals`` in INSERT); ALTER_TABLE carries the table
before and after, Thrift objects in Thrift's JSON encoding (``tableObjBeforeJson``), from which only the names are
read. Database events (CREATE/ALTER/DROP_DATABASE) are read for their database alone (the follower reads the
database itself again); CREATE_FUNCTION carries the function (``functionObjJson``, a Thrift ``Function`` in
TJSONProtocol, decoded with Thrift's own protocol), DROP_FUNCTION its name (``functionName``). Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from thrift.protocol.TJSONProtocol import TJSONProtocolFactory
from thrift.TSerialization import deserialize

from waggle.hms.gen.hive_metastore.ttypes import Function, NotificationEvent

TABLE_EVENTS = frozenset({"CREATE_TABLE", "ALTER_TABLE", "DROP_TABLE"})
PARTITION_EVENTS = frozenset({"ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION"})
INSERT = "INSERT"
ALTER_TABLE_EVENT = "ALTER_TABLE"
DATABASE_EVENTS = frozenset({"CREATE_DATABASE", "ALTER_DATABASE", "DROP_DATABASE"})
FUNCTION_EVENTS = frozenset({"CREATE_FUNCTION", "DROP_FUNCTION"})
JSON, GZIP = "json-0.2", "gzip(json-2.0)"
FORMATS = frozenset({JSON, GZIP, None, ""})


class MessageError(ValueError):
    """An event whose message cannot be read; the message names the event."""


@dataclass(frozen=True, slots=True)
class Change:
    """What one event says happened to one table."""

    event_id: int
    time: int  # the event's commit time at the source (seconds)
    kind: str  # the event type
    db: str  # lower case, as the metastore keeps names
    table: str
    #: the partitions named by the event, each as (key, value) pairs in the table's key order
    partitions: tuple[tuple[tuple[str, str], ...], ...] = ()
    #: ALTER_TABLE that renamed the table: its name before
    renamed_from: tuple[str, str] | None = None
    #: a function's event: the function's name (lower case, as the metastore keeps it); ``table`` is empty
    function: str | None = None
    #: CREATE_FUNCTION: the function as its message holds it
    function_obj: Function | None = field(default=None, compare=False, repr=False)

    @property
    def whole_table(self) -> bool:
        """The table itself changed (or was created, renamed, dropped, or written without partitions)."""
        return self.kind in TABLE_EVENTS or (self.kind == INSERT and not self.partitions)


def concerns_tables(event: NotificationEvent) -> bool:
    """Whether the event is about a table or its partitions at all (database and function events are not)."""
    return bool(event.tableName) and (event.eventType in TABLE_EVENTS or event.eventType in PARTITION_EVENTS
                                      or event.eventType == INSERT)


def concerns_database(event: NotificationEvent) -> bool:
    """Whether the event is a database's own (created, altered, dropped)."""
    return bool(event.dbName) and event.eventType in DATABASE_EVENTS


def concerns_function(event: NotificationEvent) -> bool:
    """Whether the event is a function's (created, dropped)."""
    return bool(event.dbName) and event.eventType in FUNCTION_EVENTS


def decode(event: NotificationEvent) -> Change:
    """The change an event records. Raises :class:`MessageError` for a message that cannot be read."""
    db, table = (event.dbName or "").lower(), (event.tableName or "").lower()
    kind = str(event.eventType)
    if kind in DATABASE_EVENTS or kind in FUNCTION_EVENTS:
        table = ""
    where = f"event {event.eventId} ({kind} of {db}.{table})" if table else f"event {event.eventId} ({kind} of {db})"
    message = _message(event, where)
    partitions: list[tuple[tuple[str, str], ...]] = []
    renamed_from = function = function_obj = None
    try:
        if kind in ("ADD_PARTITION", "DROP_PARTITION"):
            partitions = [_pairs(p) for p in message.get("partitions") or []]
        elif kind == "ALTER_PARTITION":
            partitions = [_pairs(message["keyValues"])]
        elif kind == INSERT and message.get("partKeyVals"):
            partitions = [_pairs(message["partKeyVals"])]
        elif kind == "ALTER_TABLE":
            before = _names(message["tableObjBeforeJson"])
            if before != (db, table):
                renamed_from = before
        elif kind == "CREATE_FUNCTION":
            function_obj = function_of(message["functionObjJson"])
            function = _name(function_obj.functionName)
        elif kind == "DROP_FUNCTION":
            function = _name(message["functionName"])
    except (KeyError, TypeError, ValueError, EOFError) as exc:
        raise MessageError(f"{where}: unexpected message: {type(exc).__name__}: {exc}") from None
    return Change(int(event.eventId), int(event.eventTime or 0), kind, db, table, tuple(partitions), renamed_from,
                  function, function_obj)


def _message(event: NotificationEvent, where: str) -> dict[str, Any]:
    """The message's JSON object: read as it is (``json-0.2``), or base64-decoded and gunzipped first
    (``gzip(json-2.0)``, or a body that starts as one does when the event names no format)."""
    fmt, body = event.messageFormat, event.message or ""
    if fmt not in FORMATS:
        raise MessageError(f"{where}: message format {fmt!r} is not read ({JSON} and {GZIP} are)")
    if fmt == GZIP or (not fmt and body.startswith("H4sI")):
        try:
            body = gzip.decompress(base64.b64decode(body, validate=False)).decode("utf-8")
        except (binascii.Error, OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError) as exc:
            raise MessageError(f"{where}: the message is not base64 of gzipped JSON ({GZIP}): "
                               f"{type(exc).__name__}: {exc}") from None
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise MessageError(f"{where}: the message is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise MessageError(f"{where}: the message is not a JSON object")
    return message


def function_of(function_json: Any) -> Function:
    """A ``Function`` from Thrift's JSON encoding (TJSONProtocol, as ``functionObjJson`` holds it)."""
    if not isinstance(function_json, str):
        raise ValueError(f"expected a Function in Thrift's JSON encoding, not {function_json!r}")
    try:
        return deserialize(Function(), function_json.encode("utf-8"), TJSONProtocolFactory())
    except Exception as exc:  # Thrift's protocol errors are of its own classes
        raise ValueError(f"functionObjJson is not a Function in Thrift's JSON encoding: {exc}") from None


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a function name, not {value!r}")
    return value.lower()


def _pairs(values: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(values, dict):
        raise ValueError(f"expected partition values by key, not {values!r}")
    return tuple((str(k).lower(), str(v)) for k, v in values.items())


def _names(table_json: Any) -> tuple[str, str]:
    """(db, table) of a Table in Thrift's JSON encoding: fields by id, ``{"1": {"str": name}, "2": {"str": db}}``."""
    data = json.loads(table_json) if isinstance(table_json, str) else table_json
    return str(data["2"]["str"]).lower(), str(data["1"]["str"]).lower()
