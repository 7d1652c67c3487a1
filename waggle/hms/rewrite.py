"""Rewrite every database name inside a decoded Thrift object, driven by field paths, not per-struct code.

Which fields carry database names is declared once, per struct, in :data:`waggle.hms.methods.STRUCT_DB_FIELDS`.
From it, :class:`Rewriter` asks :mod:`waggle.hms.specs` for a plan per struct class: the name-bearing fields to
rewrite, and the fields (structs, lists, sets, maps of them) worth descending into because something below them
carries a name. Subtrees that cannot hold a name (a ``StorageDescriptor``, say) are never visited, so rewriting
3,000 partitions touches 3,000 ``dbName`` fields and nothing else.

Objects are rewritten in place: they were just decoded and belong to the call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from thrift.Thrift import TType

from waggle.hms import specs
from waggle.hms.gen.hive_metastore.ttypes import HiveObjectType
from waggle.hms.methods import METHODS, STRUCT_DB_FIELDS, DbField, NameForm
from waggle.hms.views import rewrite_view_sql

NameFn = Callable[[str], str]

_DATABASE_OBJECT_TYPE = HiveObjectType.DATABASE


class Rewriter:
    def __init__(self, struct_fields: Mapping[str, tuple[DbField, ...]]) -> None:
        self._fields = struct_fields
        #: the plans of the question "which fields carry a database name", shared with the splicer
        self.plans: specs.Plans[DbField] = specs.Plans(self._select)
        #: per class, its plain name fields when they are all it has (see :meth:`names_in`); None: walk it
        self._flat: dict[type, tuple[tuple[str, bool], ...] | None] = {}
        self._holds: dict[tuple[type, NameForm], bool] = {}

    def _select(self, cls: type, field: specs.Field) -> DbField | None:
        return next((f for f in self._fields.get(cls.__name__, ()) if f.attr == field.attr), None)

    # -- plans ----------------------------------------------------------------------------------------------
    def plan(self, cls: type) -> specs.Plan[DbField] | None:
        """The rewrite plan of a struct class, or None when nothing inside it can carry a database name."""
        return self.plans.plan(cls)

    def holds(self, cls: type, form: NameForm) -> bool:
        """Whether objects of this class can carry a database name spelled as ``form`` anywhere inside (say, a
        ``db.table`` string)."""
        key = (cls, form)
        found = self._holds.get(key)
        if found is None:
            plan = self.plans.plan(cls)
            found = self._holds[key] = plan is not None and _plan_holds(plan, form, set())
        return found

    def touches(self, cls: type) -> bool:
        """Whether objects of this class can carry a database name anywhere inside."""
        return self.plans.reaches(cls)

    # -- rewriting -------------------------------------------------------------------------------------------
    def rewrite(self, obj: Any, fn: NameFn, sql: bool = True) -> None:
        """Apply ``fn`` to every database name inside ``obj`` (a generated struct instance).

        With ``sql``, database qualifiers inside view SQL are mapped too.
        """
        cls = type(obj)
        flat = self._flat[cls] if cls in self._flat else self._flatten(cls)
        if flat is not None:  # a few plain fields (most calls' arguments): set directly, without a walk
            for attr, db, rest in _flat_names(obj, flat):
                setattr(obj, attr, fn(db) + rest)
            return
        plan = self.plans.plan(cls)
        if plan is not None:
            self._apply(obj, plan, fn, sql)

    def _apply(self, obj: Any, plan: specs.Plan[DbField], fn: NameFn, sql: bool) -> None:
        for _, field in plan.own:
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
        for child, walk in plan.children:
            value = getattr(obj, child.attr, None)
            if value is not None:
                self._descend(value, walk, fn, sql)

    def _descend(self, value: Any, walk: specs.Walk[DbField], fn: NameFn, sql: bool) -> None:
        if walk.kind == TType.STRUCT:
            assert walk.plan is not None
            self._apply(value, walk.plan, fn, sql)
        elif walk.kind in specs.CONTAINERS:
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
        cls = type(obj)
        flat = self._flat[cls] if cls in self._flat else self._flatten(cls)
        if flat is not None:
            # Most calls' arguments are a few plain fields (get_table: dbname, tbl_name): read them directly,
            # without a rewrite walk and its callback (a third of a relayed call's planning).
            out: list[str] = []
            for attr, qualified in flat:
                value = getattr(obj, attr, None)
                if value is None:
                    continue
                if not qualified:
                    out.append(value)
                elif "." in value:
                    out.append(value.partition(".")[0])
            return out
        walked: list[str] = []

        def collect(name: str) -> str:
            walked.append(name)
            return name

        self.rewrite(obj, collect, sql=False)
        return walked

    def _flatten(self, cls: type) -> tuple[tuple[str, bool], ...] | None:
        """(attribute, is ``db.table``) of each name field, for a class whose plan is only single names (plain,
        qualified or patterns, which are never names to route by); None for any other."""
        plan = self.plans.plan(cls)
        flat: tuple[tuple[str, bool], ...] | None = ()
        if plan is not None:
            if plan.children or any(f.is_list or f.form not in _FLAT_FORMS for _, f in plan.own):
                flat = None
            else:
                flat = tuple((f.attr, f.form is NameForm.QUALIFIED) for _, f in plan.own
                             if f.form is not NameForm.PATTERN)
        self._flat[cls] = flat
        return flat


def _plan_holds(plan: specs.Plan[DbField], form: NameForm, seen: set[int]) -> bool:
    if id(plan) in seen:
        return False
    seen.add(id(plan))
    if any(f.form is form for _, f in plan.own):
        return True
    for _, walk in plan.children:
        while walk.plan is None and walk.element is not None:
            walk = walk.element
        if walk.plan is not None and _plan_holds(walk.plan, form, seen):
            return True
    return False


_FLAT_FORMS = frozenset({NameForm.NAME, NameForm.QUALIFIED, NameForm.PATTERN})


def _flat_names(obj: Any, flat: tuple[tuple[str, bool], ...]) -> list[tuple[str, str, str]]:
    """(attribute, database name, what follows it: "" or ".table") of each of ``obj``'s plain name fields that
    holds a name (an unqualified ``db.table`` field holds none)."""
    out: list[tuple[str, str, str]] = []
    for attr, qualified in flat:
        value = getattr(obj, attr, None)
        if value is None:
            continue
        if qualified:
            db, sep, table = value.partition(".")
            if sep:
                out.append((attr, db, sep + table))
        else:
            out.append((attr, value, ""))
    return out


def _call_rewriter() -> Rewriter:
    """The rewriter for whole calls: every struct's database fields plus each ``<method>_args``' own."""
    fields = dict(STRUCT_DB_FIELDS)
    for name, spec in METHODS.items():
        if spec.db_args:
            fields[f"{name}_args"] = spec.db_args
    return Rewriter(fields)


#: the one rewriter of whole calls and replies: it reads (``names_in``) and rewrites every database name they hold
CALL_NAMES: Rewriter = _call_rewriter()


def _convert(value: str, form: NameForm, fn: NameFn) -> str:
    if form is NameForm.QUALIFIED:
        db, sep, table = value.partition(".")
        return fn(db) + sep + table if sep else value
    if form is NameForm.PATTERN:
        return value  # patterns are split per member by the fan-out, never rewritten one by one
    return fn(value)
