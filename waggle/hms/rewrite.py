"""Rewrite every database name inside a decoded Thrift object, driven by field paths, not per-struct code.

Which fields carry database names is declared once, per struct, in :data:`waggle.hms.methods.STRUCT_DB_FIELDS`.
From it and the generated ``thrift_spec`` tuples, :class:`Rewriter` derives, per struct class, a plan: the
name-bearing fields to rewrite, and the fields (structs, lists, sets, maps of them) worth descending into
because something below them carries a name. Subtrees that cannot hold a name (a ``StorageDescriptor``, say)
are never visited, so rewriting 3,000 partitions touches 3,000 ``dbName`` fields and nothing else.

Objects are rewritten in place: they were just decoded and belong to the call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from thrift.Thrift import TType

from waggle.hms.gen.hive_metastore.ttypes import HiveObjectType
from waggle.hms.methods import METHODS, STRUCT_DB_FIELDS, DbField, NameForm
from waggle.hms.views import rewrite_view_sql

NameFn = Callable[[str], str]

_DATABASE_OBJECT_TYPE = HiveObjectType.DATABASE


@dataclass(frozen=True, slots=True)
class _Plan:
    names: tuple[DbField, ...]
    children: tuple[tuple[str, _Walk], ...]


@dataclass(frozen=True, slots=True)
class _Walk:
    """How to descend into one value: a struct (plan), or a container of walkable values."""

    kind: int  # TType.STRUCT, LIST, SET or MAP
    plan: _Plan | None = None
    element: _Walk | None = None  # list/set element, or map value
    key: _Walk | None = None  # map key


class Rewriter:
    def __init__(self, struct_fields: Mapping[str, tuple[DbField, ...]]) -> None:
        self._fields = struct_fields
        self._plans: dict[type, _Plan | None] = {}

    # -- plans ----------------------------------------------------------------------------------------------
    def plan(self, cls: type) -> _Plan | None:
        """The rewrite plan of a struct class, or None when nothing inside it can carry a database name."""
        if cls in self._plans:
            return self._plans[cls]
        self._plans[cls] = None  # guards recursive types while the plan is built
        names = self._fields.get(cls.__name__, ())
        children = []
        for entry in getattr(cls, "thrift_spec", None) or ():
            if not entry:
                continue
            _, ttype, attr, type_args, _ = entry
            walk = self._walk(ttype, type_args)
            if walk is not None:
                children.append((attr, walk))
        plan = _Plan(tuple(names), tuple(children)) if names or children else None
        self._plans[cls] = plan
        return plan

    def _walk(self, ttype: int, type_args: Any) -> _Walk | None:
        if ttype == TType.STRUCT:
            plan = self.plan(type_args[0])
            return _Walk(TType.STRUCT, plan=plan) if plan is not None else None
        if ttype in (TType.LIST, TType.SET):
            element = self._walk(type_args[0], type_args[1])
            return _Walk(ttype, element=element) if element is not None else None
        if ttype == TType.MAP:
            key = self._walk(type_args[0], type_args[1])
            value = self._walk(type_args[2], type_args[3])
            return _Walk(TType.MAP, element=value, key=key) if key is not None or value is not None else None
        return None

    def touches(self, cls: type) -> bool:
        """Whether objects of this class can carry a database name anywhere inside."""
        return self.plan(cls) is not None

    # -- rewriting -------------------------------------------------------------------------------------------
    def rewrite(self, obj: Any, fn: NameFn, sql: bool = True) -> None:
        """Apply ``fn`` to every database name inside ``obj`` (a generated struct instance).

        With ``sql``, database qualifiers inside view SQL are mapped too.
        """
        plan = self.plan(type(obj))
        if plan is not None:
            self._apply(obj, plan, fn, sql)

    def _apply(self, obj: Any, plan: _Plan, fn: NameFn, sql: bool) -> None:
        for field in plan.names:
            value = getattr(obj, field.attr, None)
            if value is None:
                continue
            if field.form is NameForm.OBJECT_NAME and getattr(obj, "objectType", None) != _DATABASE_OBJECT_TYPE:
                continue
            if field.form is NameForm.VIEW_SQL:
                if sql:
                    setattr(obj, field.attr, rewrite_view_sql(value, fn))
                continue
            if field.is_list:
                converted = [_convert(v, field.form, fn) for v in value]
                setattr(obj, field.attr, type(value)(converted) if isinstance(value, (set, frozenset)) else converted)
            else:
                setattr(obj, field.attr, _convert(value, field.form, fn))
        for attr, walk in plan.children:
            value = getattr(obj, attr, None)
            if value is not None:
                self._descend(value, walk, fn, sql)

    def _descend(self, value: Any, walk: _Walk, fn: NameFn, sql: bool) -> None:
        if walk.kind == TType.STRUCT:
            assert walk.plan is not None
            self._apply(value, walk.plan, fn, sql)
        elif walk.kind in (TType.LIST, TType.SET):
            assert walk.element is not None
            for item in value:
                self._descend(item, walk.element, fn, sql)
        elif walk.kind == TType.MAP:
            for k, v in value.items():
                if walk.key is not None:
                    self._descend(k, walk.key, fn, sql)
                if walk.element is not None and v is not None:
                    self._descend(v, walk.element, fn, sql)

    def names_in(self, obj: Any) -> list[str]:
        """Every database name inside ``obj`` (for routing and access checks), in walk order."""
        found: list[str] = []

        def collect(name: str) -> str:
            found.append(name)
            return name

        self.rewrite(obj, collect, sql=False)
        return found


def call_rewriter() -> Rewriter:
    """The rewriter for whole calls: every struct's database fields plus each ``<method>_args``' own."""
    fields = dict(STRUCT_DB_FIELDS)
    for name, spec in METHODS.items():
        if spec.db_args:
            fields[f"{name}_args"] = spec.db_args
    return Rewriter(fields)


def _convert(value: str, form: NameForm, fn: NameFn) -> str:
    if form is NameForm.QUALIFIED:
        db, sep, table = value.partition(".")
        return fn(db) + sep + table if sep else value
    if form is NameForm.PATTERN:
        return value  # patterns are split per member by the fan-out, never rewritten one by one
    return fn(value)
