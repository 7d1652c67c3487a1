"""Listings filtered for their caller: a read's answer keeps only the databases and tables the caller may see.
Pure: a decoded result in, the same result filtered.

Which answers are listings is read off the method table and the IDL, once per method (:func:`shape_of`):

* a list of database names (``result_names``: ``get_all_databases``, ``get_databases``);
* a list of table names of the database the call names (``lists_tables``: ``get_all_tables``, ``get_tables``);
* a list of tables or table descriptions (``Table``, ``TableMeta``: ``get_table_meta``,
  ``get_table_objects_by_name``), or a result struct holding one (``GetTablesResult.tables``).

One listing is remembered per member for every caller (waggle's cache), and filtered for each caller as it is
answered, as a metastore's filter hook filters.
"""

from __future__ import annotations

import enum
from typing import Any

from thrift.Thrift import TType

from waggle.grants.policy import Policy
from waggle.grants.verdict import Caller
from waggle.hms import specs
from waggle.hms.gen.hive_metastore.ttypes import Table, TableMeta
from waggle.hms.methods import Access, MethodSpec
from waggle.hms.names import parse
from waggle.hms.rewrite import CALL_NAMES


class Shape(enum.Enum):
    DATABASE_NAMES = "database names"
    TABLE_NAMES = "table names"  # of the one database the call names
    TABLES = "tables"  # Table or TableMeta structs
    HELD_TABLES = "held tables"  # a struct whose ``tables`` are Table structs


_TABLE_CLASSES = (Table, TableMeta)
_shapes: dict[str, Shape | None] = {}


def shape_of(spec: MethodSpec, result: type | None) -> Shape | None:
    """What kind of listing a read's answer is (None: not a listing), decided once per method."""
    if spec.name in _shapes:
        return _shapes[spec.name]
    shape = None
    success = specs.field_by_id(result, 0) if result is not None else None
    if spec.access is Access.READ and success is not None:
        element = success.struct
        if success.is_string_list:
            shape = Shape.DATABASE_NAMES if spec.result_names is not None else \
                Shape.TABLE_NAMES if spec.lists_tables else None
        elif success.ttype in specs.CONTAINERS and element in _TABLE_CLASSES:
            shape = Shape.TABLES
        elif success.ttype == TType.STRUCT and element is not None:
            held = specs.field_named(element, "tables")
            if held is not None and held.ttype in specs.CONTAINERS and held.struct is Table:
                shape = Shape.HELD_TABLES
    _shapes[spec.name] = shape
    return shape


def filtered(result: Any, shape: Shape, args: Any, policy: Policy, who: Caller) -> int:
    """Leave out of ``result`` what ``who`` may not see; how many entries were left out."""
    success = getattr(result, "success", None)
    if success is None:
        return 0
    if shape is Shape.HELD_TABLES:
        tables = getattr(success, "tables", None)
        if not tables:
            return 0
        kept = _tables(tables, policy, who)
        success.tables = kept
        return len(tables) - len(kept)
    if shape is Shape.DATABASE_NAMES:
        kept = policy.visible_databases(who, [parse(n).db or n for n in success]) if success else []
        if len(kept) != len(success):
            keep = {k.lower() for k in kept}
            kept = [n for n in success if (parse(n).db or n).lower() in keep]
    elif shape is Shape.TABLE_NAMES:
        names = CALL_NAMES.names_in(args)
        db = parse(names[0]).db if names else None
        kept = policy.visible_tables(who, db, success) if db else list(success)
    else:
        kept = _tables(success, policy, who)
    result.success = kept
    return len(success) - len(kept)


def _tables(tables: list[Any], policy: Policy, who: Caller) -> list[Any]:
    """The tables (or descriptions) whose database and name ``who`` may see, by database."""
    by_db: dict[str, list[str]] = {}
    for t in tables:
        by_db.setdefault(parse(t.dbName or "").db or "", []).append(t.tableName or "")
    visible = {(db, name) for db, names in by_db.items() for name in policy.visible_tables(who, db, names)}
    return [t for t in tables if (parse(t.dbName or "").db or "", t.tableName or "") in visible]
