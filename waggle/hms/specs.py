"""The one reader of the generated ``thrift_spec`` tuples: what a Thrift struct class says about its fields.

Every other module asks here. Three kinds of answer:

* **fields** of a class (:func:`fields`, :func:`field_named`, :func:`field_by_id`, :func:`exception_fields`),
  each a :class:`Field` with its struct class resolved (:attr:`Field.struct`);
* **plans** (:class:`Plans`): for one question about fields ("carries a database name", "carries a catalog"),
  which fields of a class answer it and which children lead to such fields, so that walking a decoded value
  visits nothing else. Plans are built once per class and cached;
* **paths** (:func:`paths`): attribute paths from a class to the fields that answer a question, shallowest
  first, for facts the method table records per method (lock ids, table references, catalogs).

It is also the one writer of specs: :class:`Mirrors` builds thin mirror classes that keep only the fields of a
plan, for the C codec to decode into, and :func:`declare` gives a hand-written class its spec.

Nothing here touches a socket, and nothing here knows an HMS method.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from thrift.Thrift import TType

__all__ = [
    "CONTAINERS",
    "Field",
    "Mirror",
    "Mirrors",
    "Plan",
    "Plans",
    "Walk",
    "codec",
    "declare",
    "exception_fields",
    "field_by_id",
    "field_named",
    "fields",
    "is_struct",
    "paths",
    "raised",
]

T = TypeVar("T")
#: the container types whose elements a walk goes into one by one
CONTAINERS = (TType.LIST, TType.SET)


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
        if self.ttype in CONTAINERS and self.type_args[0] == TType.STRUCT:
            return self.type_args[1][0]  # type: ignore[no-any-return]
        return None

    @property
    def is_string(self) -> bool:
        return bool(self.ttype == TType.STRING)

    @property
    def is_string_list(self) -> bool:
        return self.ttype in CONTAINERS and bool(self.type_args[0] == TType.STRING)


_FIELDS: dict[type, tuple[Field, ...]] = {}


def _spec(cls: type) -> tuple[Any, ...]:
    return getattr(cls, "thrift_spec", None) or ()


def is_struct(cls: type) -> bool:
    """Whether ``cls`` is a Thrift struct class (one with a spec, even an empty one)."""
    return hasattr(cls, "thrift_spec")


def fields(cls: type) -> tuple[Field, ...]:
    """The fields of a generated struct class, in id order (empty for anything that is not one)."""
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = tuple(Field(*entry) for entry in _spec(cls) if entry)
    return found


def field_named(cls: type, attr: str) -> Field | None:
    return next((f for f in fields(cls) if f.attr == attr), None)


def field_by_id(cls: type, fid: int) -> Field | None:
    return next((f for f in fields(cls) if f.fid == fid), None)


_EXCEPTIONS: dict[type, tuple[Field, ...]] = {}


def exception_fields(result_class: type) -> tuple[Field, ...]:
    """The declared exceptions of a ``<method>_result`` class (its struct fields after ``success``)."""
    found = _EXCEPTIONS.get(result_class)
    if found is None:
        found = _EXCEPTIONS[result_class] = tuple(f for f in fields(result_class) if f.fid > 0 and
                                                  f.ttype == TType.STRUCT)
    return found


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


def declare(cls: type, spec: tuple[Any, ...]) -> None:
    """Give a hand-written class the spec the C codec encodes and decodes it by (entries as generated code
    writes them, indexed by field id)."""
    cls.thrift_spec = spec  # type: ignore[attr-defined]


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
        if ttype in CONTAINERS:
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
        elif walk.kind in CONTAINERS:
            element = walk.element
            assert element is not None
            if element.plan is not None:  # a list of structs (thousands of partitions): one call less per item
                for item in value:
                    self._apply(item, element.plan, fn)
            else:
                for item in value:
                    self._descend(item, element, fn)
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


# -- mirrors ----------------------------------------------------------------------------------------------------
class Mirror:
    """Base of mirror classes: the C codec builds a struct with its decoded fields as keyword arguments."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


class Mirrors:
    """Thin mirrors of generated struct classes for one question: a mirror's spec keeps only the fields its
    plan names (the answering ones and the children leading to them), so that the C codec, decoding into it,
    skips everything else without building objects. Mirrors keep their class's name and field ids."""

    def __init__(self, plans: Plans[Any]) -> None:
        self._plans = plans
        self._mirrors: dict[type, type | None] = {}
        self._ready: dict[type, type | None] = {}

    def mirror(self, cls: type) -> type | None:
        """The mirror of a struct class, ready to decode into: the specs of its nested structs filled in
        (once, as thrift's ``fix_spec`` does for generated code). None when nothing in it answers."""
        if cls not in self._ready:
            found = self.thin(cls)
            if found is not None:
                _link(found, set())
            self._ready[cls] = found
        return self._ready[cls]

    def thin(self, cls: type) -> type | None:
        """The mirror of a struct class, its nested struct specs not filled in yet."""
        if cls in self._mirrors:
            return self._mirrors[cls]
        plan = self._plans.plan(cls)
        if plan is None:
            self._mirrors[cls] = None
            return None
        mirror = type(cls.__name__, (Mirror,), {})
        self._mirrors[cls] = mirror
        keep = {f.attr for f, _ in plan.own} | {f.attr for f, _ in plan.children}
        spec: list[Any] = [None] * len(_spec(cls))
        for f in fields(cls):
            if f.attr in keep:
                spec[f.fid] = (f.fid, f.ttype, f.attr, self._args(f.ttype, f.type_args), f.default)
        declare(mirror, tuple(spec))
        return mirror

    def _args(self, ttype: int, type_args: Any) -> Any:
        if ttype == TType.STRUCT:
            inner = self.thin(type_args[0])
            return [inner, None] if inner is not None else type_args  # the spec is filled in by _link
        if ttype in CONTAINERS:
            return (type_args[0], self._args(type_args[0], type_args[1]), type_args[2])
        if ttype == TType.MAP:
            return (type_args[0], self._args(type_args[0], type_args[1]),
                    type_args[2], self._args(type_args[2], type_args[3]), type_args[4])
        return type_args


def _link(mirror: type, seen: set[type]) -> None:
    """Fill the ``[class, spec]`` pairs of a mirror's struct-typed fields, and of the mirrors they lead to."""
    if mirror in seen:
        return
    seen.add(mirror)
    for entry in _spec(mirror):
        if entry:
            _fill(entry[1], entry[3], seen)


def _fill(ttype: int, type_args: Any, seen: set[type]) -> None:
    if ttype == TType.STRUCT and isinstance(type_args, list):
        type_args[1] = type_args[0].thrift_spec
        if issubclass(type_args[0], Mirror):
            _link(type_args[0], seen)
    elif ttype in CONTAINERS:
        _fill(type_args[0], type_args[1], seen)
    elif ttype == TType.MAP:
        _fill(type_args[0], type_args[1], seen)
        _fill(type_args[2], type_args[3], seen)
