"""Where database names travel in each HMS call.

This first version finds the database of a call for logging only: the first argument (or the first field of a
request struct argument) with a database-name field name. Routing by database builds on the method table
that replaces it.
"""

from __future__ import annotations

from typing import Any

_DB_FIELDS = ("db_name", "dbname", "dbName", "databaseName", "db")


def database_of(args: Any) -> str | None:
    if args is None:
        return None
    for attr in _DB_FIELDS:
        value = getattr(args, attr, None)
        if isinstance(value, str):
            return value
    for attr in getattr(args, "__slots__", ()):
        value = getattr(args, attr, None)
        if value is not None and hasattr(value, "thrift_spec"):
            for inner in _DB_FIELDS:
                found = getattr(value, inner, None)
                if isinstance(found, str):
                    return found
    return None
