"""What the generated code says about each HMS method: its argument and result structs.

Derived from ``waggle.hms.gen`` once, at import. The routing semantics of each method live in
:mod:`waggle.hms.methods`; this module only knows how to decode and answer a call.

An error waggle writes itself is put where the client's release reads it (:mod:`waggle.hms.layouts`): for the
few methods whose exceptions a release declares unlike waggle's IDL, a result class declaring that release's
fields is made once, here.

A call whose arguments a release numbers unlike waggle's IDL is read again as it arrives (:attr:`MethodIO.arrives`):
``fire_listener_event``'s insert data from a Hive 2.3 client (:mod:`waggle.hms.insert_event`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from thrift.Thrift import TType

from waggle.config.model import ProtocolKind
from waggle.hms import insert_event, specs
from waggle.hms.gen.fb303 import FacebookService
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore, ttypes
from waggle.hms.gen.hive_metastore.ttypes import MetaException
from waggle.hms.layouts import Layout, agreed_fields


@dataclass(frozen=True, slots=True)
class MethodIO:
    name: str
    args: type
    result: type | None  # None for oneway methods
    meta_field: str | None  # the result attribute that carries a MetaException, if the method declares one
    service: str  # "ThriftHiveMetastore" or "FacebookService"
    #: per client layout that reads this method's exceptions unlike waggle's IDL: a result class declaring its
    #: fields, and exception class name -> the field's attribute (only for the few methods that differ)
    declared: Mapping[Layout, tuple[type, dict[str, str]]] = dataclasses.field(default_factory=dict,
                                                                                   compare=False)
    #: the layouts whose metastores put an exception at a field id where waggle's IDL has another class
    misread: frozenset[Layout] = frozenset()
    #: (arguments decoded in waggle's IDL, the whole message, its protocol) -> the same call in waggle's numbering,
    #: for a method some release numbers its arguments apart (None for the others: they arrive as they are)
    arrives: Callable[[Any, bytes, ProtocolKind], tuple[Any, bytes]] | None = None

    def meta_exception_result(self, message: str) -> object | None:
        """A result struct carrying ``MetaException(message)``, or None when the method declares none."""
        if self.result is None or self.meta_field is None:
            return None
        result: object = self.result()
        setattr(result, self.meta_field, MetaException(message=message))
        return result


    def result_class(self, layout: Layout) -> type:
        """The result struct as a metastore of ``layout`` declares it (waggle's where they agree)."""
        assert self.result is not None
        declared = self.declared.get(layout) if layout is Layout.HIVE_2 else None
        return self.result if declared is None else declared[0]

    def redeclared(self, result: object, layout: Layout) -> object | None:
        """The declared exception ``result`` (decoded with :meth:`result_class`) carries, where a client reading
        ``layout`` finds it; None when it carries none, or the client reads none (then an application error)."""
        for entry in specs.fields(type(result)):
            raised = getattr(result, entry.attr, None) if entry.fid > 0 else None
            if raised is not None:
                return self.exception_result(type(raised).__name__, getattr(raised, "message", None) or "", layout)
        return None

    def as_ours(self, result: object) -> object:
        """A result decoded with another release's :meth:`result_class` as waggle's own result struct."""
        assert self.result is not None
        if type(result) is self.result:
            return result
        out: object = self.result()
        for entry in specs.fields(type(result)):
            value = getattr(result, entry.attr, None)
            if value is None:
                continue
            ours = specs.field_by_id(self.result, 0) if entry.fid == 0 else \
                next((f for f in specs.fields(self.result) if f.fid > 0 and _struct_of(f) is type(value)), None)
            if ours is not None:
                setattr(out, ours.attr, value)
        return out

    def exception_result(self, exception: str, message: str, layout: Layout = Layout.CURRENT) -> object | None:
        """A result carrying the declared exception class named ``exception`` (else a MetaException), where a
        client reading ``layout`` finds it; None when it reads neither (or the method is oneway)."""
        if self.result is None:
            return None
        declared = self.declared.get(layout)
        if declared is not None:
            made, attrs = declared
            name = exception if exception in attrs else MetaException.__name__
            attr = attrs.get(name)
            if attr is None:
                return None  # no field every release of the layout reads: a TApplicationException instead
            out: object = made()
            setattr(out, attr, getattr(ttypes, name)(message=message))
            return out
        for field in specs.fields(self.result):
            cls = _struct_of(field)
            if cls is not None and cls.__name__ == exception:
                result: object = self.result()
                setattr(result, field.attr, cls(message=message))
                return result
        return self.meta_exception_result(message)


def _struct_of(field: specs.Field) -> type | None:
    """The class of a struct-typed field (not of a container's elements)."""
    return field.struct if field.ttype == TType.STRUCT else None


def _meta_field(result: type) -> str | None:
    return next((f.attr for f in specs.fields(result) if _struct_of(f) is MetaException), None)


class _DeclaredResult:
    """A method's result struct as another Hive release declares it: waggle's success field, that release's
    exception fields (subclassed per method and layout)."""

    def __init__(self, **values: object) -> None:
        for entry in type(self).thrift_spec:  # type: ignore[attr-defined]
            if entry is not None:
                setattr(self, entry[2], values.get(entry[2]))


def _declared(method: str, result: type) -> dict[Layout, tuple[type, dict[str, str]]]:
    out = {}
    success = specs.field_by_id(result, 0)
    for layout in Layout:
        ids = agreed_fields(method, layout)
        if ids is None:
            continue
        cls = type(f"{method}_result_{layout.name.lower()}", (_DeclaredResult,), {"__module__": __name__})
        spec: list[tuple[object, ...] | None] = [None] * (max(ids.values(), default=0) + 1)
        if success is not None:
            spec[0] = tuple(success)
        for name, fid in ids.items():
            exception = getattr(ttypes, name)
            spec[fid] = (fid, TType.STRUCT, f"o{fid}", [exception, exception.thrift_spec], None)
        specs.declare(cls, tuple(spec))
        out[layout] = (cls, {name: f"o{fid}" for name, fid in ids.items()})
    return out


def _misread(declared: type, result: type | None) -> bool:
    return result is not None and any(
        f.fid > 0 and _struct_of(f) is not _struct_of(specs.field_by_id(result, f.fid) or f)
        for f in specs.fields(declared))


def _methods(module: ModuleType, service: str) -> dict[str, MethodIO]:
    out = {}
    for name, member in vars(module.Iface).items():
        if not inspect.isfunction(member) or name.startswith("_"):
            continue
        args = getattr(module, f"{name}_args")
        result = getattr(module, f"{name}_result", None)
        declared = _declared(name, result) if result else {}
        out[name] = MethodIO(name, args, result, _meta_field(result) if result else None, service, declared,
                             frozenset(layout for layout, (cls, _) in declared.items() if _misread(cls, result)),
                             _ARRIVES.get(name))
    return out


#: the methods whose arguments a release numbers apart from waggle's IDL, and how such a call is read again
_ARRIVES = {"fire_listener_event": insert_event.arrived}


METHOD_IO: dict[str, MethodIO] = {
    **_methods(FacebookService, "FacebookService"),
    **_methods(ThriftHiveMetastore, "ThriftHiveMetastore"),
}
