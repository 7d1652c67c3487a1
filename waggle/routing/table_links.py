"""Remote tables: one remote table under a local name, in any database, made by one stock SQL statement.

    CREATE TABLE default.eu_orders (id INT) TBLPROPERTIES ('waggle.remote.metastore'='analytics',
        'waggle.remote.database'='sales', 'waggle.remote.table'='orders')

The primary keeps a stub table with those properties; the columns SQL makes you write are never served. Every
read of ``default.eu_orders`` is answered by the remote table itself, as it is now: its schema, partitions,
location and statistics. The reply names the table ``default.eu_orders``. Dropping the table drops the stub
only. Writes are refused while links are read-only (``remote-databases.access``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from waggle.hms import specs
from waggle.routing.links import DATABASE, METASTORE, PREFIX, URIS, Link, LinkError, link_of

TABLE = "waggle.remote.table"
#: the fields that carry a table's name (as the method table derives them)
_TABLE_FIELDS = frozenset(("tbl_name", "tblName", "tableName", "table_name", "tablename"))


@dataclass(frozen=True, slots=True)
class TableLink:
    """``db.name`` (local, lower-case) stands for ``table`` of ``link`` (its remote database and metastore)."""

    db: str
    name: str
    table: str
    link: Link

    def describe(self) -> str:
        return f"table '{self.link.database}.{self.table}' of {self.link.describe().split(' of ', 1)[1]}"


def table_link_of(db: str, name: str, parameters: Mapping[str, str] | None) -> TableLink | None:
    """The remote table these table parameters name, None for a plain table; :class:`LinkError` if malformed."""
    if not parameters or TABLE not in parameters:
        return None
    props = {k: v for k, v in parameters.items() if k in (METASTORE, URIS, DATABASE)}
    props.setdefault(DATABASE, db)
    link = link_of(f"{db}.{name}", props)
    if link is None:
        raise LinkError(f"{TABLE} needs {METASTORE} or {URIS}")
    table = (parameters.get(TABLE) or "").strip().lower() or name.lower()
    return TableLink(db.lower(), name.lower(), table, link)


def has_remote_table(parameters: Mapping[str, str] | None) -> bool:
    return bool(parameters) and any(str(k).startswith(PREFIX) for k in parameters or {}) and \
        TABLE in (parameters or {})


def rename(obj: Any, names: Callable[[str, str], str | None]) -> None:
    """Set every table-name field of a decoded struct (and of the structs inside it) to ``names(field, value)``
    when that is not None."""
    if isinstance(obj, list | tuple | set):
        for item in obj:
            rename(item, names)
        return
    if isinstance(obj, dict):
        for item in obj.values():
            rename(item, names)
        return
    if not hasattr(obj, "thrift_spec"):
        return
    for field in specs.fields(type(obj)):
        value = getattr(obj, field.attr, None)
        if value is None:
            continue
        if isinstance(value, str):
            if field.attr in _TABLE_FIELDS:
                new = names(field.attr, value)
                if new is not None:
                    setattr(obj, field.attr, new)
        else:
            rename(value, names)
