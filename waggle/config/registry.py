"""The machinery of the settings registry: one :class:`Setting` per key, grouped in :class:`Section` s.

The declarations themselves live in the modules named for the file they describe (:mod:`waggle.config.settings`
for the server and federation files, :mod:`waggle.config.hive_properties` for ``configuration-properties``,
:mod:`waggle.config.sync_settings` for sync files); :mod:`waggle.docs.config_page` renders them all as the
docs' configuration reference pages. This module knows none of them.

The frozen model objects (:mod:`waggle.config.model`) name, for each attribute, the setting it holds
(:func:`setting_field`, :func:`nested`): the attribute's default is the setting's, and
:meth:`waggle.config.reader.Reader.build` reads, validates and converts it from a file. So a setting's key,
default, validator and meaning are written once, in its declaration; the model adds only the attribute's name,
type and unit.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from waggle.config.validators import Validator

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

V = TypeVar("V", covariant=True)
T = TypeVar("T")
U = TypeVar("U")
D = TypeVar("D", bound="DataclassInstance")

#: The key of a model field's metadata that says where its value comes from (:class:`FromSetting`, :class:`Nested`).
SOURCE = "waggle.config.source"

#: How the docs show the default of a setting that must be given.
REQUIRED = "(required)"


@dataclass(frozen=True, slots=True)
class Setting(Generic[V]):
    """One key of one section. ``parse`` is None for values with a structure of their own, read by the loader's
    own function for them (URIs, mapped tables, the tunnel, ...), and for keys waggle does not implement."""

    key: str
    default: V
    doc: str
    parse: Validator[V] | None = None
    implemented: bool = True
    shown: str | None = None  # the default as the docs show it, when not the default value itself

    @property
    def shown_default(self) -> str:
        if self.shown is not None:
            return self.shown
        value: object = self.default
        if value is None:
            return "none"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, enum.Enum):
            return str(value.value)
        if isinstance(value, Mapping):
            return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
        if isinstance(value, tuple):
            return "[" + ", ".join(map(str, value)) + "]"
        return str(value)


@dataclass(frozen=True, slots=True)
class FromSetting:
    """Where a model attribute declared with :func:`setting_field` comes from."""

    setting: Setting[object]
    convert: Callable[[Any], object] | None


@dataclass(frozen=True, slots=True)
class Nested:
    """Where a model attribute declared with :func:`nested` comes from."""

    cls: type[DataclassInstance]
    parts: Mapping[str, object]  # attribute of ``cls`` -> the setting that fills it, or a constant


@overload
def setting_field(setting: Setting[T]) -> T: ...


@overload
def setting_field(setting: Setting[T], convert: Callable[[T], U]) -> U: ...


def setting_field(setting: Setting[object], convert: Callable[[Any], Any] | None = None) -> Any:
    """A model attribute that holds ``setting``: a dataclass field defaulting to the setting's default, which
    :meth:`~waggle.config.reader.Reader.build` reads from a file. ``convert`` turns the setting's value into the
    attribute's unit (milliseconds into seconds, say), for the default and for what is read alike."""
    default = setting.default if convert is None else convert(setting.default)
    metadata = {SOURCE: FromSetting(setting, convert)}
    if isinstance(default, Mapping):
        return dataclasses.field(default_factory=lambda: default, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def nested(cls: type[D], **parts: object) -> D:
    """A model attribute that holds a ``cls`` value object built from settings: each attribute of ``cls``
    declared with :func:`setting_field` is read, and ``parts`` fill the others, each with a setting or a constant.
    (:class:`~waggle.config.model.Limits` is one class for the server's limits and for the metastores' replies,
    so the attribute that holds it says which settings fill it.)"""
    make: Callable[..., D] = cls
    default = make(**{k: p.default if isinstance(p, Setting) else p for k, p in parts.items()})
    return dataclasses.field(default=default, metadata={SOURCE: Nested(cls, MappingProxyType(dict(parts)))})


class Section:
    """The settings of one part of one file, in declaration order."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._settings: list[Setting[object]] = []

    def add(self, key: str, default: T, parse: Validator[T] | None, doc: str, shown: str | None = None) -> Setting[T]:
        setting = Setting(key, default, doc, parse, True, shown)
        self._settings.append(setting)
        return setting

    def ignored(self, key: str, shown: str, doc: str) -> None:
        """A Waggle Dance key that waggle accepts with a warning and does not implement."""
        self._settings.append(Setting(key, shown, doc, None, False))

    def __iter__(self) -> Iterator[Setting[object]]:
        return iter(self._settings)

    @property
    def settings(self) -> tuple[Setting[object], ...]:
        return tuple(self._settings)

    def keys(self) -> list[str]:
        return [s.key for s in self._settings]

    def unknown(self, data: Mapping[str, object]) -> list[tuple[str, Setting[object] | None]]:
        """Every key of ``data`` that is not a setting (with None) or not implemented (with its setting).

        Nested maps are followed down to the settings' own keys, so ``logging: {level: debug}`` is the implemented
        ``logging.level`` while ``logging: {config: ...}`` is the unimplemented ``logging.config``.
        """
        by_key = {s.key: s for s in self._settings}
        found: list[tuple[str, Setting[object] | None]] = []

        def walk(node: Mapping[str, object], prefix: str) -> None:
            for key, value in node.items():
                full = f"{prefix}{key}"
                setting = by_key.get(full)
                if setting is None and isinstance(value, Mapping) and any(k.startswith(full + ".") for k in by_key):
                    walk(value, full + ".")
                elif setting is None or not setting.implemented:
                    found.append((full, setting))

        walk(data, "")
        return found


def markdown_table(settings: tuple[Setting[object], ...]) -> str:
    rows = ["| Key | Default | Meaning |", "|---|---|---|"]
    for s in settings:
        note = "" if s.implemented else " *(accepted with a warning)*"
        rows.append(f"| `{s.key}` | {s.shown_default} | {s.doc}{note} |")
    return "\n".join(rows)
