"""What the generated code says about each HMS method: its argument and result structs.

Derived from ``waggle.hms.gen`` once, at import. The routing semantics of each method live in
:mod:`waggle.hms.methods`; this module only knows how to decode and answer a call.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import ModuleType

from thrift.Thrift import TType

from waggle.hms import specs
from waggle.hms.gen.fb303 import FacebookService
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.hms.gen.hive_metastore.ttypes import MetaException


@dataclass(frozen=True, slots=True)
class MethodIO:
    name: str
    args: type
    result: type | None  # None for oneway methods
    meta_field: str | None  # the result attribute that carries a MetaException, if the method declares one
    service: str  # "ThriftHiveMetastore" or "FacebookService"

    def meta_exception_result(self, message: str) -> object | None:
        """A result struct carrying ``MetaException(message)``, or None when the method declares none."""
        if self.result is None or self.meta_field is None:
            return None
        result: object = self.result()
        setattr(result, self.meta_field, MetaException(message=message))
        return result


    def exception_result(self, exception: str, message: str) -> object | None:
        """A result carrying the declared exception class named ``exception`` (else a MetaException)."""
        if self.result is None:
            return None
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


def _methods(module: ModuleType, service: str) -> dict[str, MethodIO]:
    out = {}
    for name, member in vars(module.Iface).items():
        if not inspect.isfunction(member) or name.startswith("_"):
            continue
        args = getattr(module, f"{name}_args")
        result = getattr(module, f"{name}_result", None)
        out[name] = MethodIO(name, args, result, _meta_field(result) if result else None, service)
    return out


METHOD_IO: dict[str, MethodIO] = {
    **_methods(FacebookService, "FacebookService"),
    **_methods(ThriftHiveMetastore, "ThriftHiveMetastore"),
}
