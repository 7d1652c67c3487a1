"""Reading one YAML mapping through the settings registry, collecting problems instead of stopping at the first.

Each problem names the file, the key (with the path to it) and the value:
``server.yml: key 'port': invalid value 'abc': expected an integer between 0 and 65535``.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from waggle.config.registry import SOURCE, FromSetting, Nested, Section, Setting
from waggle.config.validators import Invalid, InvalidItems

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")
D = TypeVar("D", bound="DataclassInstance")


class _Unset(enum.Enum):
    UNSET = 0


UNSET = _Unset.UNSET
#: What :meth:`Reader.raw` returns for a key that is not in the file.
MISSING: object = object()
#: The key of the Hive properties, in the server file and in each metastore.
PROPERTIES = "configuration-properties"


class Reader:
    """Typed access to one mapping (``prefix`` is its path in the file, e.g. ``primary-meta-store.``).

    ``nulls_are_unset``: a key given as null reads as its default (the server and federation files), or is
    validated like any other value (sync files).
    """

    def __init__(self, file: str, data: Mapping[str, object], prefix: str, problems: list[str],
                 nulls_are_unset: bool = True) -> None:
        self.file, self.data, self.prefix, self.problems = file, data, prefix, problems
        self.nulls_are_unset = nulls_are_unset

    def path(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def fail(self, key: str, value: object, reason: str) -> None:
        self.problems.append(f"{self.file}: key '{self.path(key)}': invalid value {value!r}: {reason}")

    def require(self, key: str, detail: str = "") -> None:
        self.problems.append(f"{self.file}: key '{self.path(key)}' is required{detail}")

    def raw(self, key: str) -> object:
        """The value at a dotted ``key`` as the file has it, or :data:`MISSING`."""
        node: object = self.data
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return MISSING
            node = node[part]
        return node

    def given(self, key: str) -> bool:
        value = self.raw(key)
        return value is not MISSING and not (value is None and self.nulls_are_unset)

    def get(self, setting: Setting[T], default: T | _Unset = UNSET) -> T:
        """The setting's value, validated; its default (or ``default``) when absent or invalid."""
        fallback: T = setting.default if isinstance(default, _Unset) else default
        parse = setting.parse
        if parse is None:
            raise TypeError(f"setting '{setting.key}' has no validator: it is read by its own function")
        if not self.given(setting.key):
            return fallback
        value = self.raw(setting.key)
        try:
            return parse.convert(value)
        except InvalidItems as exc:
            for index, item, reason in exc.items:
                self.fail(f"{setting.key}[{index}]", item, reason)
        except Invalid as exc:
            self.fail(setting.key, exc.value(value), exc.reason)
        except (TypeError, ValueError) as exc:
            detail = f": {exc}" if str(exc) else ""
            self.fail(setting.key, value, f"expected {parse.expect}{detail}")
        return fallback

    def build(self, cls: type[D], defaults: Mapping[str, object] | None = None, **given: object) -> D:
        """A ``cls`` model object read from this mapping.

        Each attribute declared with :func:`~waggle.config.registry.setting_field` is its setting's value,
        validated (its default: ``defaults`` by attribute name, else the setting's) and converted; each declared with
        :func:`~waggle.config.registry.nested` a value object built the same way. ``given`` names the attributes
        read otherwise: the settings with a structure of their own, and values that are not settings at all.
        """
        return self._build(cls, given, defaults or {})

    def _build(self, cls: type[D], given: Mapping[str, object], defaults: Mapping[str, object]) -> D:
        names = {f.name for f in dataclasses.fields(cls)}
        if not set(defaults) | set(given) <= names:
            raise TypeError(f"{cls.__name__} has no attribute {sorted(set(defaults) | set(given) - names)}")
        values = dict(given)
        for f in dataclasses.fields(cls):
            source = f.metadata.get(SOURCE)
            if f.name in values or source is None:
                continue
            if isinstance(source, FromSetting):
                value = self.get(source.setting, defaults.get(f.name, UNSET))
                values[f.name] = value if source.convert is None else source.convert(value)
            elif isinstance(source, Nested):
                parts = {k: self.get(p) if isinstance(p, Setting) else p for k, p in source.parts.items()}
                values[f.name] = self._build(source.cls, parts, {})
        make: Callable[..., D] = cls
        return make(**values)

    def entries(self, key: str, one: str, many: str) -> list[Reader]:
        """A reader of each map of the list at ``key`` (``limits.rates``, ``iceberg-rest.clients``), whose problems
        name ``key[i].<key>``; ``one`` and ``many`` say what an entry is and what the list holds, for the problem
        of an entry that is not a map and of a value that is not a list."""
        value = self.raw(key)
        if value is MISSING or value is None:
            return []
        if not isinstance(value, list):
            self.fail(key, value, f"expected a list of {many}")
            return []
        readers = []
        for i, entry in enumerate(value):
            where = f"{key}[{i}]"
            if isinstance(entry, Mapping):
                readers.append(Reader(self.file, entry, self.path(f"{where}."), self.problems))
            else:
                self.fail(where, entry, f"expected {one}")
        return readers

    def unknown(self, section: Section) -> list[tuple[str, Setting[object] | None]]:
        """Keys of this mapping that ``section`` does not declare (None) or does not implement (the setting)."""
        return section.unknown(self.data)


class PropertiesReader(Reader):
    """A :class:`Reader` over a flat map of Hive properties, whose keys contain dots themselves."""

    def raw(self, key: str) -> object:
        return self.data.get(key, MISSING)


def properties(r: Reader) -> PropertiesReader:
    """A reader of the ``configuration-properties`` of the mapping ``r`` reads (an empty one when it has none)."""
    value = r.raw(PROPERTIES)
    data: Mapping[str, object] = value if isinstance(value, Mapping) else {}
    return PropertiesReader(r.file, {str(k): v for k, v in data.items()}, r.path(f"{PROPERTIES}."), r.problems)
