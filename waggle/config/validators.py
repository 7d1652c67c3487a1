"""Validators of setting values: small named functions, each returning a :class:`Validator`.

A validator turns a value as YAML gave it into the setting's type, or raises. ``TypeError`` or ``ValueError``
become "expected <what it expects>" (plus the exception's own text, when it has one); :class:`Invalid` gives the
whole reason itself, and may name the value as it was understood (for example lower-cased).
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Generic, TypeVar

from waggle.config import hive_values

V = TypeVar("V", covariant=True)
E = TypeVar("E", bound=enum.Enum)
#: an address range of ``limits.rates[].addresses``
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_NOT_SHOWN = object()


class Invalid(ValueError):
    """A value's complete reason for being refused; ``shown`` is the value to name, when not the one given."""

    def __init__(self, reason: str, shown: object = _NOT_SHOWN) -> None:
        super().__init__(reason)
        self.reason = reason
        self.shown = shown

    def value(self, given: object) -> object:
        return given if self.shown is _NOT_SHOWN else self.shown


class InvalidItems(Invalid):
    """Items of a list refused, each named by its index in the list with its own reason."""

    def __init__(self, items: list[tuple[int, object, str]]) -> None:
        super().__init__("; ".join(reason for _, _, reason in items))
        self.items = items


@dataclass(frozen=True, slots=True)
class Validator(Generic[V]):
    expect: str  # what a valid value is, as error messages say it: "expected <expect>"
    convert: Callable[[object], V]


def scalar(value: object) -> str:
    """A YAML scalar as text; booleans as YAML writes them."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _whole(v: object) -> int:
    """An integer given as a YAML integer or as digits; anything else a bare ValueError (the message says what
    was expected, never Python's own words)."""
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise TypeError
    if isinstance(v, str) and not v.strip().lstrip("+-").isdigit():
        raise ValueError
    return int(v)


def integer(low: int = 0, high: int | None = None) -> Validator[int]:
    def convert(v: object) -> int:
        n = _whole(v)
        if n < low or (high is not None and n > high):
            raise ValueError  # the expectation names the range
        return n

    expect = f"an integer >= {low}" if high is None else f"an integer between {low} and {high}"
    return Validator(expect, convert)


def worker_count(high: int = 256) -> Validator[int | None]:
    """A number of serving processes, or ``auto`` (0: as many as the CPUs the process may use)."""
    def convert(v: object) -> int | None:
        if isinstance(v, str) and v.strip().lower() == "auto":
            return 0
        n = _whole(v)
        if not 1 <= n <= high:
            raise ValueError  # the expectation names the range
        return n

    return Validator(f"auto or an integer between 1 and {high}", convert)


def boolean() -> Validator[bool]:
    """``true``/``yes``/``on``/``1`` or ``false``/``no``/``off``/``0``, as Spring reads them."""
    def convert(v: object) -> bool:
        if isinstance(v, bool):
            return v
        s = str(v).strip().lower()
        if s in ("true", "yes", "on", "1"):
            return True
        if s in ("false", "no", "off", "0"):
            return False
        raise ValueError

    return Validator("true or false", convert)


def yes_no(expect: str, strip: bool = True) -> Validator[bool]:
    """``yes``/``true`` or ``no``/``false`` only (OpenSSH's spelling, and the sync file's flags)."""
    def convert(v: object) -> bool:
        if isinstance(v, bool):
            return v
        s = scalar(v).lower()
        s = s.strip() if strip else s
        if s in ("yes", "true"):
            return True
        if s in ("no", "false"):
            return False
        raise Invalid(f"expected {expect}")

    return Validator(expect, convert)


def choice(enum_type: type[E]) -> Validator[E]:
    """A member of ``enum_type`` by its value, case-insensitively."""
    def convert(v: object) -> E:
        s = str(v).strip().lower()
        for member in enum_type:
            if str(member.value).lower() == s:
                return member
        raise ValueError

    return Validator("one of " + ", ".join(str(e.value) for e in enum_type), convert)


def _text(v: object) -> str:
    if isinstance(v, (Mapping, list)):
        raise TypeError
    return str(v)


def string() -> Validator[str]:
    return Validator("a string", _text)


def optional_string() -> Validator[str | None]:
    """A string; empty means not set."""
    return Validator("a string", lambda v: _text(v) or None)


def optional_text() -> Validator[str | None]:
    """Anything, as text; null or empty means not set."""
    return Validator("a string", lambda v: None if v is None or v == "" else str(v))


def optional_name() -> Validator[str | None]:
    """A name, as text; anything false (null, empty, 0, false, an empty list) means not set."""
    return Validator("a name", lambda v: str(v) if v else None)


def one_of(names: Iterable[str], expect: str, fold: Callable[[str], str] = str,
           strings_only: bool = True) -> Validator[str]:
    """One of ``names`` after ``fold`` (e.g. ``str.lower``); a refused value is named folded. With
    ``strings_only``, a map or list is refused as not a string; without, it is compared as text."""
    allowed = tuple(names)

    def convert(v: object) -> str:
        if strings_only and isinstance(v, (Mapping, list)):
            raise Invalid("expected a string")
        s = fold(str(v))
        if s not in allowed:
            raise Invalid(f"expected {expect}", shown=s)
        return s

    return Validator(expect, convert)


def string_map() -> Validator[Mapping[str, str]]:
    """A map of the user's own keys to scalars, read-only."""
    def convert(v: object) -> Mapping[str, str]:
        if not isinstance(v, Mapping):
            raise TypeError
        return MappingProxyType({str(k): scalar(x) for k, x in v.items()})

    return Validator("a map", convert)


def names() -> Validator[tuple[str, ...]]:
    """A list of names, as a YAML list or a comma-separated string; blank ones are left out."""
    def convert(v: object) -> tuple[str, ...]:
        items = v.split(",") if isinstance(v, str) else v
        if not isinstance(items, list) or not all(isinstance(x, (str, int)) for x in items):
            raise Invalid("expected a list of names")
        return tuple(str(x).strip() for x in items if str(x).strip())

    return Validator("a list of names", convert)


def aliases() -> Validator[Mapping[str, str]]:
    """``{name: alias}`` of database names, both lower-cased, read-only; no two names may share an alias."""
    as_map = string_map().convert

    def convert(v: object) -> Mapping[str, str]:
        given = as_map(v)
        lowered = {k.lower(): x.lower() for k, x in given.items()}
        seen: dict[str, str] = {}
        clashes = []
        for name, alias in lowered.items():
            if alias in seen:
                clashes.append(f"'{seen[alias]}' and '{name}' both map to alias '{alias}'")
            seen[alias] = name
        if clashes:
            raise Invalid("; ".join(clashes), shown=dict(given))
        return MappingProxyType(lowered)

    return Validator("a map", convert)


def hive_version() -> Validator[str | None]:
    """A Hive release waggle serves (:func:`waggle.config.hive_values.parse_version`), kept as written; empty
    means not set."""
    def convert(v: object) -> str | None:
        text = _text(v) or None
        try:
            hive_values.parse_version(text)
        except ValueError as exc:
            raise Invalid(str(exc), shown=text) from None
        return text

    return Validator("a string", convert)


def duration_ms() -> Validator[int]:
    """Hive's time values for token lifetimes (``86400000`` in ms, ``3600s``, ``1d``), in milliseconds."""
    expect = "a duration such as 86400000 (ms), 3600s or 1d"

    def convert(v: object) -> int:
        text = _text(v)
        try:
            return hive_values.duration_ms(text)
        except ValueError:
            raise Invalid(f"expected {expect}", shown=text) from None

    return Validator(expect, convert)


def protection() -> Validator[tuple[str, ...]]:
    """``hadoop.rpc.protection``: protection levels in order of preference, as QOP names (``auth``, ...)."""
    def convert(v: object) -> tuple[str, ...]:
        text = _text(v)
        try:
            return hive_values.parse_qop(text)
        except ValueError as exc:
            raise Invalid(str(exc), shown=text) from None

    return Validator("protection levels", convert)


def hive_flag() -> Validator[bool]:
    """A Hive boolean property as Hive's ``Configuration.getBoolean`` reads it: ``true`` in any case is true,
    anything else false."""
    return Validator("true or false", lambda v: scalar(v).strip().lower() == "true")


def count_or_none() -> Validator[int | None]:
    """A Hive count property: its digits, or None (ignored) when it is not a plain number."""
    return Validator("a number", lambda v: int(s) if (s := scalar(v).strip()).isdigit() else None)


def timeout_ms() -> Validator[int]:
    """Hive's time values such as ``600``, ``600s`` or ``5000ms`` (seconds when no unit), in milliseconds."""
    def convert(v: object) -> int:
        text = scalar(v)
        try:
            return hive_values.timeout_ms(text)
        except ValueError:
            raise Invalid("expected a duration such as 600s", shown=text) from None

    return Validator("a duration such as 600s", convert)


def age_seconds() -> Validator[int | None]:
    """An age in seconds (``600``, ``600s``, ``15m``, ``2h``, ``1d``); null means no limit."""
    def convert(v: object) -> int | None:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise TypeError
        try:
            return hive_values.staleness_seconds(str(v))
        except ValueError:
            raise Invalid("expected an age such as 600, 600s, 15m, 2h or 1d") from None

    return Validator("an age such as 600s, 15m, 2h or 1d", convert)


def regexes() -> Validator[tuple[re.Pattern[str], ...]]:
    """Case-insensitive regular expressions, as a YAML list or one comma-separated string; every item that does not
    compile is named by its index."""
    def convert(v: object) -> tuple[re.Pattern[str], ...]:
        items = [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else v
        if not isinstance(items, list) or any(isinstance(x, (Mapping, list)) for x in items):
            raise Invalid("expected a list of regular expressions")
        out, refused = [], []
        for i, item in enumerate(items):
            try:
                out.append(re.compile(str(item), re.IGNORECASE))
            except re.error as exc:
                refused.append((i, item, f"not a regular expression: {exc}"))
        if refused:
            raise InvalidItems(refused)
        return tuple(out)

    return Validator("a list of regular expressions", convert)


def positive_number() -> Validator[float]:
    """A number above zero (an integer or a decimal)."""
    def convert(v: object) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise TypeError
        n = float(v)
        if not 0 < n < float("inf"):
            raise Invalid("expected a number above 0")
        return n

    return Validator("a number above 0", convert)


def label() -> Validator[str]:
    """A name that may become a metrics label: letters, digits, ``_``, ``-`` and ``.``."""
    def convert(v: object) -> str:
        s = _text(v).strip()
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", s):
            raise Invalid("expected a name of 1 to 64 letters, digits, '_', '-' or '.'")
        return s

    return Validator("a name of letters, digits, '_', '-' or '.'", convert)


def networks() -> Validator[tuple[Network, ...]]:
    """Client addresses and CIDR ranges (``10.1.0.0/16``, ``192.0.2.7``, ``2001:db8::/32``), as a YAML list or
    one comma-separated string; every item that is neither is named by its index."""
    def convert(v: object) -> tuple[Network, ...]:
        items = [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else v
        if not isinstance(items, list) or any(isinstance(x, (Mapping, list)) for x in items):
            raise Invalid("expected a list of addresses or CIDR ranges")
        out: list[Network] = []
        refused: list[tuple[int, object, str]] = []
        for i, item in enumerate(items):
            try:
                out.append(ipaddress.ip_network(str(item).strip(), strict=True))
            except ValueError as exc:
                refused.append((i, item, f"not an address or CIDR range: {exc}"))
        if refused:
            raise InvalidItems(refused)
        return tuple(out)

    return Validator("a list of addresses or CIDR ranges", convert)


def choices(enum_type: type[E], label_of: Callable[[E], str]) -> Validator[tuple[E, ...]]:
    """A list of members of ``enum_type`` by their labels (case-insensitively), as a YAML list or one
    comma-separated string; every item that is none is named by its index."""
    by_label = {label_of(m).lower(): m for m in enum_type}
    expect = "a list of " + ", ".join(by_label)

    def convert(v: object) -> tuple[E, ...]:
        items = [x.strip() for x in v.split(",") if x.strip()] if isinstance(v, str) else v
        if not isinstance(items, list) or any(isinstance(x, (Mapping, list)) for x in items):
            raise Invalid(f"expected {expect}")
        out: list[E] = []
        refused: list[tuple[int, object, str]] = []
        for i, item in enumerate(items):
            member = by_label.get(str(item).strip().lower())
            if member is None:
                refused.append((i, item, "expected one of " + ", ".join(by_label)))
            elif member not in out:
                out.append(member)
        if refused:
            raise InvalidItems(refused)
        return tuple(out)

    return Validator(expect, convert)
