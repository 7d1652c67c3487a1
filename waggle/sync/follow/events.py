"""Notification events as the follower reads them: which table, which partitions, which rename.

Messages are those of Hive's ``JSONMessageFactory`` (format ``json-0.2``, Hive 2.x and 3.x; Hive 4's ``gzip(json-2.0)``
is not read): a JSON object with ``db`` and ``table``; partition events list the partitions' values by key
(``partitions`` in ADD/DROP_PARTITION, ``keyValues`` in ALTER_PARTITION, ``partKeyVals`` in INSERT); ALTER_TABLE
carries the table before and after, Thrift objects in Thrift's JSON encoding (``tableObjBeforeJson``), from which
only the names are read. Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from waggle.hms.gen.hive_metastore.ttypes import NotificationEvent

TABLE_EVENTS = frozenset({"CREATE_TABLE", "ALTER_TABLE", "DROP_TABLE"})
PARTITION_EVENTS = frozenset({"ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION"})
INSERT = "INSERT"
ALTER_TABLE_EVENT = "ALTER_TABLE"
FORMATS = frozenset({"json-0.2", None, ""})


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

    @property
    def whole_table(self) -> bool:
        """The table itself changed (or was created, renamed, dropped, or written without partitions)."""
        return self.kind in TABLE_EVENTS or (self.kind == INSERT and not self.partitions)


def concerns_tables(event: NotificationEvent) -> bool:
    """Whether the event is about a table or its partitions at all (database and function events are not)."""
    return bool(event.tableName) and (event.eventType in TABLE_EVENTS or event.eventType in PARTITION_EVENTS
                                      or event.eventType == INSERT)


def decode(event: NotificationEvent) -> Change:
    """The change an event records. Raises :class:`MessageError` for a message that cannot be read."""
    db, table = (event.dbName or "").lower(), (event.tableName or "").lower()
    where = f"event {event.eventId} ({event.eventType} of {db}.{table})"
    if event.messageFormat not in FORMATS:
        raise MessageError(f"{where}: message format {event.messageFormat!r} is not read (json-0.2 is)")
    try:
        message = json.loads(event.message or "")
    except ValueError as exc:
        raise MessageError(f"{where}: the message is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise MessageError(f"{where}: the message is not a JSON object")
    kind = str(event.eventType)
    partitions: list[tuple[tuple[str, str], ...]] = []
    renamed_from = None
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
    except (KeyError, TypeError, ValueError) as exc:
        raise MessageError(f"{where}: unexpected message: {type(exc).__name__}: {exc}") from None
    return Change(int(event.eventId), int(event.eventTime or 0), kind, db, table, tuple(partitions), renamed_from)


def _pairs(values: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(values, dict):
        raise ValueError(f"expected partition values by key, not {values!r}")
    return tuple((str(k).lower(), str(v)) for k, v in values.items())


def _names(table_json: Any) -> tuple[str, str]:
    """(db, table) of a Table in Thrift's JSON encoding: fields by id, ``{"1": {"str": name}, "2": {"str": db}}``."""
    data = json.loads(table_json) if isinstance(table_json, str) else table_json
    return str(data["2"]["str"]).lower(), str(data["1"]["str"]).lower()
