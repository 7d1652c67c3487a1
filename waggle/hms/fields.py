"""Reading and replacing the values at the method table's attribute paths in a call's decoded arguments. Pure;
a replacement copies the structs along its path and leaves the call's own arguments as they arrived."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from thrift.Thrift import TType

from waggle.hms import specs
from waggle.hms.methods import MethodSpec, Path
from waggle.hms.names import parse


def value_at(obj: Any, path: Path) -> Any:
    """The value at an attribute path of a decoded object (None where any step is missing, or for no path)."""
    if not path:
        return None
    for attr in path:
        obj = getattr(obj, attr, None)
        if obj is None:
            return None
    return obj


def catalog_named(names: Iterable[str], args: Any, paths: Iterable[Path]) -> str | None:
    """The catalog a call names: in an ``@cat#db`` string of ``names``, or in one of its catalog fields."""
    for name in names:
        if name.startswith("@"):
            catalog = parse(name).catalog
            if catalog:
                return catalog
    return catalog_field(args, paths)


def catalog_field(args: Any, paths: Iterable[Path]) -> str | None:
    """The catalog a request struct names in one of its catalog fields (the method table's ``catalog_fields``)."""
    for path in paths:
        value = value_at(args, path)
        if isinstance(value, str) and value:
            return value
    return None


def replaced(obj: Any, changes: Iterable[tuple[Path, Any]]) -> Any:
    """A copy of ``obj`` with the value at each path replaced (the structs along the paths are copied; a path
    whose parent is missing is skipped)."""
    out = copy.copy(obj)
    copied: dict[Path, Any] = {(): out}
    for path, value in changes:
        parent = out
        for i in range(1, len(path)):
            prefix = path[:i]
            inner = copied.get(prefix)
            if inner is None:
                inner = getattr(parent, path[i - 1], None)
                if inner is None:
                    break
                inner = copied[prefix] = copy.copy(inner)
                setattr(parent, path[i - 1], inner)
            parent = inner
        else:
            setattr(parent, path[-1], value)
    return out


def table_refs(args: Any, spec: MethodSpec) -> list[tuple[str, str]]:
    """(database, table) pairs a call names, for ``mapped-tables`` and remote tables."""
    out = []
    for ref in spec.table_refs:
        db, table = value_at(args, ref.db), value_at(args, ref.table)
        if isinstance(db, str) and isinstance(table, str) and table:
            out.append((db, table))
    return out


def copied_along(obj: Any, plan: specs.Plan[Any] | None) -> Any:
    """A copy of the struct ``obj`` in which every struct and container that a walk along ``plan`` (a rewrite's)
    descends into is a copy too; what the walk never reaches is shared. Rewriting the copy leaves ``obj`` as it
    was."""
    out = _shallow(obj)
    if plan is not None:
        for field, walk in plan.children:
            value = getattr(out, field.attr, None)
            if value is not None:
                setattr(out, field.attr, _copied(value, walk))
    return out


def _shallow(obj: Any) -> Any:
    cls: Any = type(obj)
    slots = getattr(cls, "__slots__", None)
    if slots is None:
        return copy.copy(obj)
    out = cls.__new__(cls)  # not through the generated __init__ (keyword arguments, a third slower)
    for attr in slots:
        setattr(out, attr, getattr(obj, attr))
    return out


def _copied(value: Any, walk: specs.Walk[Any]) -> Any:
    if walk.kind == TType.STRUCT:
        return copied_along(value, walk.plan)
    element, key = walk.element, walk.key
    if walk.kind in specs.CONTAINERS:
        assert element is not None
        items = [_copied(item, element) for item in value]
        return type(value)(items) if isinstance(value, set | frozenset) else items
    return {(_copied(k, key) if key is not None else k): (_copied(v, element) if element is not None and v is not None
                                                          else v) for k, v in value.items()}
