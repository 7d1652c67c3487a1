"""Rewrite database names in an encoded binary-protocol reply without decoding all of it.

Decoding a 3,000-partition reply into Python objects, rewriting 3,000 ``dbName`` fields and encoding it again
costs several times what relaying it costs. In Thrift's binary protocol only a string's own length prefix
depends on its content (structs end with a stop byte, containers carry element counts), so a name can be
replaced in the bytes in place. This module does that, safely:

1. The reply is decoded in C into *thin* mirrors of the generated classes that keep only the fields on the
   way to a database name (the :class:`~waggle.hms.rewrite.Rewriter` plan); everything else is skipped
   in C without building objects.
2. Each (field id, name) found is counted, and its exact encoding (type byte, field id, length, bytes) is
   counted in the raw reply. Every real field produces a match, so equal counts prove every match is a real
   field; otherwise, or when a name is not plain (a list of names, ``db.table``, view SQL, unusual
   characters), :func:`splice_names` returns None and the caller takes the decode-rewrite-encode path.
3. All matches are replaced in one left-to-right pass.

The result is the metastore's own bytes with only the names changed (no defaults added by re-encoding).
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from collections.abc import Callable
from typing import Any

from thrift.Thrift import TType

from waggle.config.model import Limits, ProtocolKind
from waggle.hms.methods import NameForm
from waggle.hms.rewrite import Rewriter, _Plan, _Walk
from waggle.wire import decode_message

#: Names spliced in bytes contain no byte that could begin or end a field encoding.
_PLAIN = re.compile(r"[A-Za-z0-9_$\-]+")


class _Thin:
    """A mirror object of a generated struct with only the fields on the way to a database name."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class Splicer:
    def __init__(self, rewriter: Rewriter) -> None:
        self.rewriter = rewriter
        self._thin: dict[type, type | None] = {}
        self._fids: dict[type, dict[str, int]] = {}
        self._resolved: dict[type, type | None] = {}

    def thin(self, cls: type) -> type | None:
        """The thin mirror of a generated struct class (None when nothing in it carries a name)."""
        if cls in self._thin:
            return self._thin[cls]
        plan = self.rewriter.plan(cls)
        if plan is None:
            self._thin[cls] = None
            return None
        mirror = type(cls.__name__, (_Thin,), {})
        self._thin[cls] = mirror
        full = cls.thrift_spec  # type: ignore[attr-defined]
        spec: list[Any] = [None] * len(full)
        keep = {f.attr for f in plan.names} | {attr for attr, _ in plan.children}
        fids = {}
        for entry in full:
            if entry and entry[2] in keep:
                fid, ttype, attr, type_args, default = entry
                spec[fid] = (fid, ttype, attr, self._thin_args(ttype, type_args), default)
                fids[attr] = fid
        mirror.thrift_spec = tuple(spec)  # type: ignore[attr-defined]
        self._fids[mirror] = fids
        return mirror

    def _thin_args(self, ttype: int, type_args: Any) -> Any:
        if ttype == TType.STRUCT:
            inner = self.thin(type_args[0])
            return [inner, None] if inner is not None else type_args  # spec filled in by _resolve
        if ttype in (TType.LIST, TType.SET):
            return (type_args[0], self._thin_args(type_args[0], type_args[1]), type_args[2])
        if ttype == TType.MAP:
            return (type_args[0], self._thin_args(type_args[0], type_args[1]),
                    type_args[2], self._thin_args(type_args[2], type_args[3]), type_args[4])
        return type_args

    def thin_result(self, cls: type) -> type | None:
        """The thin mirror of a result class, with its nested struct specs wired up (once)."""
        if cls not in self._resolved:
            mirror = self.thin(cls)
            if mirror is not None:
                _resolve(mirror, set())
            self._resolved[cls] = mirror
        return self._resolved[cls]

    # -- splicing -------------------------------------------------------------------------------------------
    def splice_names(self, raw: bytes, result_class: type, fn: Callable[[str], str], limits: Limits
                     ) -> bytes | None:
        """``raw`` (a whole binary-protocol reply) with every database name mapped through ``fn``, or None
        when the reply cannot be spliced safely (the caller then decodes, rewrites and encodes)."""
        mirror = self.thin_result(result_class)
        if mirror is None:
            return raw
        _, obj = decode_message(raw, ProtocolKind.BINARY, mirror, limits)
        found: Counter[tuple[int, str]] = Counter()
        plan = self.rewriter.plan(result_class)
        if plan is None or not self._collect(obj, plan, found):
            return None
        replacements: dict[bytes, bytes] = {}
        for (fid, name), count in found.items():
            new = fn(name)
            if new == name:
                continue
            if not _PLAIN.fullmatch(name):
                return None
            old_b, new_b = name.encode(), new.encode()
            pattern = struct.pack("!bhi", TType.STRING, fid, len(old_b)) + old_b
            if raw.count(pattern) != count:
                return None
            replacements[pattern] = struct.pack("!bhi", TType.STRING, fid, len(new_b)) + new_b
        if not replacements:
            return raw
        if len(replacements) == 1:
            (old, new_bytes), = replacements.items()
            return raw.replace(old, new_bytes)
        regex = re.compile(b"|".join(re.escape(p) for p in sorted(replacements, key=len, reverse=True)))
        return regex.sub(lambda m: replacements[m.group(0)], raw)

    def _collect(self, obj: Any, plan: _Plan, found: Counter[tuple[int, str]]) -> bool:
        fids = self._fids[type(obj)]
        for field in plan.names:
            value = getattr(obj, field.attr, None)
            if value is None:
                continue
            if field.form is not NameForm.NAME or field.is_list or not isinstance(value, str):
                return False  # lists of names, db.table, view SQL, object names: the full path handles them
            found[(fids[field.attr], value)] += 1
        for attr, walk in plan.children:
            value = getattr(obj, attr, None)
            if value is not None and not self._descend(value, walk, found):
                return False
        return True

    def _descend(self, value: Any, walk: _Walk, found: Counter[tuple[int, str]]) -> bool:
        if walk.kind == TType.STRUCT:
            assert walk.plan is not None
            return self._collect(value, walk.plan, found)
        if walk.kind in (TType.LIST, TType.SET):
            assert walk.element is not None
            return all(self._descend(item, walk.element, found) for item in value)
        return False  # maps of name-bearing structs: rare, left to the full path


def _resolve(mirror: type, seen: set[type]) -> None:
    """Fill the [class, spec] pairs of struct-typed fields (as thrift's fix_spec does for generated code)."""
    if mirror in seen:
        return
    seen.add(mirror)
    for entry in mirror.thrift_spec:  # type: ignore[attr-defined]
        if entry:
            _fix(entry[1], entry[3], seen)


def _fix(ttype: int, type_args: Any, seen: set[type]) -> None:
    if ttype == TType.STRUCT and isinstance(type_args, list):
        type_args[1] = type_args[0].thrift_spec
        if issubclass(type_args[0], _Thin):
            _resolve(type_args[0], seen)
    elif ttype in (TType.LIST, TType.SET):
        _fix(type_args[0], type_args[1], seen)
    elif ttype == TType.MAP:
        _fix(type_args[0], type_args[1], seen)
        _fix(type_args[2], type_args[3], seen)
