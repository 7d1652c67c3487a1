"""Notification events as clients see them: a member's database names turned into the names waggle gives them.

Pure: the caller says what each name becomes (``db_name``, given names lower case, as the member spells them; None
for a database clients do not see).

An event names its database twice: in ``dbName``, and in its message. Messages are Hive's ``JSONMessageEncoder``
(format ``json-0.2``, Hive 2 and 3; also a format None or ``""``) or Hive 4's ``GzipJSONMessageEncoder``
(``gzip(json-2.0)``: base64 of the gzipped JSON, the same keys); a renamed message is written back in the format it
came in. Inside a message a database is named

- at the top: ``db`` in most messages, ``database`` (ACID writes, column statistics), ``dbName`` (ALLOC_WRITE_ID,
  DROP_CONSTRAINT), ``dbname`` (COMMIT_COMPACTION), lists ``databases`` (COMMIT_TXN) and ``dbsUpdated`` (ABORT_TXN);
- in Thrift objects, each a string of Thrift's JSON encoding (fields by id: ``{"2":{"str":"sales"}}``), under keys
  ending in ``Json`` (``tableObjJson``, ``partitionListJson``, ``dbJson``, ``colStatsJson``, ...) and COMMIT_TXN's
  ``tableObjs`` and ``partitionObjs``. The key says which struct it is, :data:`OBJECTS` which of its fields are names.

Only names are changed: view text, partition values and keys waggle does not know are left as they are, and so is
a name inside a message that ``db_name`` hides (the event is the caller's to drop). A message, or an object in it,
that cannot be read is kept as it is; one that names nothing to change is kept byte for byte.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeAlias

from waggle.hms.gen.hive_metastore.ttypes import NotificationEvent
from waggle.hms.notification_log import read_message, write_message

__all__ = ["NAME_KEYS", "OBJECTS", "message_db_names", "renamed"]

#: which fields of a Thrift struct name a database, by field id: None for a name (a string), a nested schema for a
#: struct field holding more names
Schema: TypeAlias = Mapping[str, "Schema | None"]

_STATS: Schema = {"1": {"2": None}}  # ColumnStatistics: statsDesc (ColumnStatisticsDesc) .dbName
_TABLE: Schema = {"2": None, "16": {"2": None}, "21": _STATS}  # Table: dbName, creationMetadata.dbName, colStats
_PARTITION: Schema = {"2": None, "12": _STATS}  # Partition: dbName, colStats
_DATABASE: Schema = {"1": None}  # Database: name
_FUNCTION: Schema = {"2": None}  # Function: dbName
_INDEX: Schema = {"3": None}  # Index (Hive 2): dbName
_PRIMARY_KEY: Schema = {"1": None}  # SQLPrimaryKey: table_db
_FOREIGN_KEY: Schema = {"1": None, "4": None}  # SQLForeignKey: pktable_db, fktable_db
_CONSTRAINT: Schema = {"2": None}  # SQLUniqueConstraint, SQLNotNullConstraint, SQLDefaultConstraint, SQLCheckConstraint

#: message keys holding Thrift objects (a string, or a list of strings), and the names in each
OBJECTS: Mapping[str, Schema] = {
    "tableObjJson": _TABLE, "tableObjBeforeJson": _TABLE, "tableObjAfterJson": _TABLE, "tableObjs": _TABLE,
    "partitionObjBeforeJson": _PARTITION, "partitionObjAfterJson": _PARTITION, "partitionListJson": _PARTITION,
    "ptnObjJson": _PARTITION, "partitionObjJson": _PARTITION, "partitionObjs": _PARTITION,
    "dbJson": _DATABASE, "dbObjBeforeJson": _DATABASE, "dbObjAfterJson": _DATABASE,
    "functionObjJson": _FUNCTION,
    "colStatsJson": _STATS,
    "indexObjJson": _INDEX, "beforeIndexObjJson": _INDEX, "afterIndexObjJson": _INDEX,
    "primaryKeyListJson": _PRIMARY_KEY, "foreignKeyListJson": _FOREIGN_KEY,
    "uniqueConstraintListJson": _CONSTRAINT, "notNullConstraintListJson": _CONSTRAINT,
    "defaultConstraintListJson": _CONSTRAINT, "checkConstraintListJson": _CONSTRAINT,
}
#: message keys holding a database name (a string, or a list of strings)
NAME_KEYS = frozenset({"db", "database", "dbName", "dbname", "databases", "dbsUpdated"})

#: one name as the message spells it -> what it becomes; None leaves it as it is
_Rename = Callable[[str], str | None]


def renamed(event: NotificationEvent, db_name: Callable[[str], str | None]) -> NotificationEvent | None:
    """The event as clients see it: a new NotificationEvent (the input is not changed) whose dbName and the
    database names inside its message are db_name(name) (names given lower case, as the member spells them);
    None when db_name returns None for the event's own dbName (a hidden database). An event without dbName is
    returned (copied) unchanged except its message's names. A message that cannot be read is kept as it is."""
    out = copy.copy(event)
    if event.dbName:
        name = db_name(event.dbName.lower())
        if name is None:
            return None
        out.dbName = name
    if event.message:
        out.message = _rewritten(event.message, event.messageFormat, lambda name: db_name(name.lower()))
    return out


def message_db_names(message: str, message_format: str | None) -> list[str]:
    """Every database name the message names, as it spells them, each once, in the order they come; [] when it
    cannot be read."""
    names: list[str] = []

    def note(name: str) -> None:
        if name not in names:
            names.append(name)

    body = read_message(message, message_format)
    if isinstance(body, dict):
        _message(body, note)
    return names


# -- the message -----------------------------------------------------------------------------------------------
def _rewritten(message: str, message_format: str | None, rename: _Rename) -> str:
    body = read_message(message, message_format)
    if not isinstance(body, dict) or not _message(body, rename):
        return message
    return write_message(body, message, message_format)


def _message(body: dict[str, Any], rename: _Rename) -> bool:
    """Renames the names in a message's JSON in place; whether any changed."""
    changed = False
    for key, value in body.items():
        if key in NAME_KEYS:
            new = _each(value, partial(_name, rename=rename))
        elif key in OBJECTS:
            new = _each(value, partial(_object, schema=OBJECTS[key], rename=rename))
        else:
            continue
        if new is not None:
            body[key] = new
            changed = True
    return changed


def _each(value: Any, change: Callable[[str], str | None]) -> Any:
    """``change`` applied to a string, or to each string of a list (other items kept); None when nothing changed."""
    if isinstance(value, str):
        return change(value)
    if not isinstance(value, list):
        return None
    new = [change(item) if isinstance(item, str) else None for item in value]
    if all(item is None for item in new):
        return None
    return [old if item is None else item for old, item in zip(value, new, strict=True)]


def _name(name: str, rename: _Rename) -> str | None:
    """The name's new spelling, None when it stays (not a name, hidden, or the same)."""
    if not name:
        return None
    new = rename(name)
    return new if new is not None and new != name else None


# -- Thrift objects in Thrift's JSON encoding ------------------------------------------------------------------
def _object(text: str, schema: Schema, rename: _Rename) -> str | None:
    """A Thrift object's JSON with its names renamed; None when it cannot be read or names nothing to change."""
    try:
        fields = json.loads(text)
    except ValueError:
        return None
    if not isinstance(fields, dict) or not _struct(fields, schema, rename):
        return None
    return _dumps(fields)


def _struct(fields: dict[str, Any], schema: Schema, rename: _Rename) -> bool:
    """Renames a struct's names in place (fields by id, each ``{type: value}``); whether any changed."""
    changed = False
    for field_id, nested in schema.items():
        cell = fields.get(field_id)
        if not isinstance(cell, dict):
            continue
        if nested is None:
            value = cell.get("str")
            new = _name(value, rename) if isinstance(value, str) else None
            if new is not None:
                cell["str"] = new
                changed = True
        elif isinstance(cell.get("rec"), dict):
            changed = _struct(cell["rec"], nested, rename) or changed
    return changed


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
