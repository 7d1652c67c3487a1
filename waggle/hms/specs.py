"""The one reader of the generated ``thrift_spec`` tuples: what a Thrift struct class says about its fields.

Every other module asks here. Three kinds of answer:

* **fields** of a class (:func:`fields`, :func:`field_named`, :func:`field_by_id`, :func:`exception_fields`),
  each a :class:`Field` with its struct class resolved (:attr:`Field.struct`);
* **plans** (:class:`Plans`): for one question about fields ("carries a database name", "carries a catalog"),
  which fields of a class answer it and which children lead to such fields, so that walking a decoded value
  visits nothing else. Plans are built once per class and cached;
* **paths** (:func:`paths`): attribute paths from a class to the fields that answer a question, shallowest
  first, for facts the method table records per method (lock ids, table references, catalogs).

Nothing here touches a socket, and nothing here knows an HMS method.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from thrift.Thrift import TType

__all__ = [
    "Field",
    "Plan",
    "Plans",
    "Walk",
    "codec",
    "exception_fields",
    "field_by_id",
    "field_named",
    "fields",
    "paths",
    "raised",
]

T = TypeVar("T")
_CONTAINERS = (TType.LIST, TType.SET)


class Field(NamedTuple):
    """One entry of a ``thrift_spec``: ``(fid, ttype, attr, type_args, default)``."""

    fid: int
    ttype: int
    attr: str
    type_args: Any
    default: Any

    @property
    def struct(self) -> type | None:
        """The struct class of a struct field, or of the elements of a list or set of structs."""
        if self.ttype == TType.STRUCT:
            return self.type_args[0]  # type: ignore[no-any-return]
        if self.ttype in _CONTAINERS and self.type_args[0] == TType.STRUCT:
            return self.type_args[1][0]  # type: ignore[no-any-return]
        return None

    @property
    def is_string(self) -> bool:
        return bool(self.ttype == TType.STRING)

    @property
    def is_string_list(self) -> bool:
        return self.ttype in _CONTAINERS and bool(self.type_args[0] == TType.STRING)


_FIELDS: dict[type, tuple[Field, ...]] = {}


def fields(cls: type) -> tuple[Field, ...]:
    """The fields of a generated struct class, in id order (empty for anything that is not one)."""
    found = _FIELDS.get(cls)
    if found is None:
        spec = getattr(cls, "thrift_spec", None) or ()
        found = _FIELDS[cls] = tuple(Field(*entry) for entry in spec if entry)
    return found


def field_named(cls: type, attr: str) -> Field | None:
    return next((f for f in fields(cls) if f.attr == attr), None)


def field_by_id(cls: type, fid: int) -> Field | None:
    return next((f for f in fields(cls) if f.fid == fid), None)


def exception_fields(result_class: type) -> tuple[Field, ...]:
    """The declared exceptions of a ``<method>_result`` class (its struct fields after ``success``)."""
    return tuple(f for f in fields(result_class) if f.fid > 0 and f.ttype == TType.STRUCT)


def raised(result: Any) -> Any | None:
    """The declared exception a decoded result carries, or None."""
    for f in exception_fields(type(result)):
        value = getattr(result, f.attr, None)
        if value is not None:
            return value
    return None


def codec(cls: type) -> list[Any]:
    """The ``[class, spec]`` pair Thrift's C codec takes to decode or encode ``cls``."""
    return [cls, cls.thrift_spec]  # type: ignore[attr-defined]


# -- plans ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Walk(Generic[T]):
    """How to descend into one value: a struct (its plan), or a container of walkable values."""

    kind: int  # TType.STRUCT, LIST, SET or MAP
    plan: Plan[T] | None = None
    element: Walk[T] | None = None  # list/set element, or map value
    key: Walk[T] | None = None  # map key


@dataclass(frozen=True, slots=True)
class Plan(Generic[T]):
    """What one question finds in one struct class: its own matching fields (with what the question said of
    each), and the children worth descending into."""

    own: tuple[tuple[Field, T], ...]
    children: tuple[tuple[Field, Walk[T]], ...]


class Plans(Generic[T]):
    """Plans for one question, asked of every field of every class reached: ``select(cls, field)`` returns what
    the field is to the question (any value), or None when it is nothing."""

    def __init__(self, select: Callable[[type, Field], T | None]) -> None:
        self._select = select
        self._plans: dict[type, Plan[T] | None] = {}

    def plan(self, cls: type) -> Plan[T] | None:
        """The plan of a struct class, or None when nothing inside it answers the question."""
        if cls in self._plans:
            return self._plans[cls]
        self._plans[cls] = None  # guards recursive types while the plan is built
        own: list[tuple[Field, T]] = []
        children: list[tuple[Field, Walk[T]]] = []
        for f in fields(cls):
            found = self._select(cls, f)
            if found is not None:
                own.append((f, found))
                continue
            walk = self._walk(f.ttype, f.type_args)
            if walk is not None:
                children.append((f, walk))
        plan = Plan(tuple(own), tuple(children)) if own or children else None
        self._plans[cls] = plan
        return plan

    def _walk(self, ttype: int, type_args: Any) -> Walk[T] | None:
        if ttype == TType.STRUCT:
            plan = self.plan(type_args[0])
            return Walk(TType.STRUCT, plan=plan) if plan is not None else None
        if ttype in _CONTAINERS:
            element = self._walk(type_args[0], type_args[1])
            return Walk(ttype, element=element) if element is not None else None
        if ttype == TType.MAP:
            key = self._walk(type_args[0], type_args[1])
            value = self._walk(type_args[2], type_args[3])
            return Walk(TType.MAP, element=value, key=key) if key is not None or value is not None else None
        return None

    def reaches(self, cls: type) -> bool:
        """Whether values of this class can hold a field that answers the question anywhere inside."""
        return self.plan(cls) is not None

    def visit(self, obj: Any, fn: Callable[[Any, Field, T], None]) -> None:
        """Call ``fn(parent, field, what)`` for every answering field inside a decoded value (set or not)."""
        plan = self.plan(type(obj))
        if plan is not None:
            self._apply(obj, plan, fn)

    def _apply(self, obj: Any, plan: Plan[T], fn: Callable[[Any, Field, T], None]) -> None:
        for f, what in plan.own:
            fn(obj, f, what)
        for f, walk in plan.children:
            value = getattr(obj, f.attr, None)
            if value is not None:
                self._descend(value, walk, fn)

    def _descend(self, value: Any, walk: Walk[T], fn: Callable[[Any, Field, T], None]) -> None:
        if walk.kind == TType.STRUCT:
            assert walk.plan is not None
            self._apply(value, walk.plan, fn)
        elif walk.kind in _CONTAINERS:
            assert walk.element is not None
            for item in value:
                self._descend(item, walk.element, fn)
        elif walk.kind == TType.MAP:
            for k, v in value.items():
                if walk.key is not None:
                    self._descend(k, walk.key, fn)
                if walk.element is not None and v is not None:
                    self._descend(v, walk.element, fn)


# -- paths ------------------------------------------------------------------------------------------------------
def _struct_children(cls: type) -> Iterator[tuple[str, type]]:
    for f in fields(cls):
        inner = f.struct
        if inner is not None:
            yield f.attr, inner


def paths(cls: type, select: Callable[[type, Field], T | None], max_depth: int,
          own: tuple[tuple[tuple[str, ...], T], ...] = ()) -> tuple[tuple[tuple[str, ...], T], ...]:
    """``(attribute path, what select said)`` for every answering field reachable from ``cls``: ``own`` first,
    then the fields of ``cls`` itself, then struct fields breadth-first, at most ``max_depth`` structs deep,
    never revisiting a struct type on one path. Through a list of structs a path goes on into its elements."""
    found = list(own)
    level: list[tuple[tuple[str, ...], type, frozenset[type]]] = [((), cls, frozenset((cls,)))]
    depth = 0
    while level and depth <= max_depth:
        deeper: list[tuple[tuple[str, ...], type, frozenset[type]]] = []
        for prefix, struct, seen in level:
            for f in fields(struct):
                what = select(struct, f)
                if what is not None:
                    found.append(((*prefix, f.attr), what))
            for attr, inner in _struct_children(struct):
                if inner not in seen:
                    deeper.append(((*prefix, attr), inner, seen | {inner}))
        level = deeper
        depth += 1
    return tuple(found)
