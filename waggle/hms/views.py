"""Database names inside view SQL (``viewOriginalText`` / ``viewExpandedText``), rewritten with a real parser.

sqlglot's Hive dialect parses the statement; every table reference that names a database has that
identifier replaced in the original text, at the parser's character offsets, so the rest of the SQL (layout,
comments, function spelling) is left exactly as the metastore stored it. Text that does not parse (or a
Presto/Trino view, which stores its own encoded definition) is returned unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

_OPAQUE_PREFIXES = ("/* Presto View", "/* Trino View")


def rewrite_view_sql(sql: str | None, fn: Callable[[str], str]) -> str | None:
    """``sql`` with every database qualifier of a table reference mapped through ``fn``."""
    if not sql or sql.lstrip().startswith(_OPAQUE_PREFIXES):
        return sql
    try:
        tree = sqlglot.parse_one(sql, read="hive")
    except SqlglotError:
        return sql
    edits: list[tuple[int, int, str]] = []
    for table in tree.find_all(exp.Table):
        db = table.args.get("db")
        if not isinstance(db, exp.Identifier):
            continue
        start, end = db.meta.get("start"), db.meta.get("end")
        if start is None or end is None:
            continue
        new = fn(db.name)
        if new == db.name:
            continue
        quoted = sql[start] == "`"
        edits.append((start, end + 1, f"`{new}`" if quoted else new))
    for start, end, text in sorted(edits, reverse=True):
        sql = sql[:start] + text + sql[end:]
    return sql
