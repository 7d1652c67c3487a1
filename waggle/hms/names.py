"""Names as HMS clients write them: catalog-qualified database names, listing patterns, partition names.

Pure functions, no sockets.

Hive 3+ clients put the catalog into string arguments: ``@hive#sales`` is database ``sales`` of catalog
``hive``, ``@hive#`` (no database) means "all databases", and ``!`` stands for an empty name. Patterns in
``get_databases`` / ``get_table_meta`` use ``*`` (any run), ``.`` (any one character, as Hue sends) and ``|``
(alternatives), matched case-insensitively against the whole name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

CATALOG_MARKER = "@"
CATALOG_SEPARATOR = "#"
EMPTY_MARKER = "!"


@dataclass(frozen=True, slots=True)
class QualifiedName:
    """A database name with the catalog it came with. ``db is None`` means "every database"."""

    catalog: str | None
    db: str | None

    def requalify(self, db: str | None) -> str:
        """Write ``db`` back in the form this name arrived in."""
        if self.catalog is None:
            return db or ""
        body = "" if db is None else (db or EMPTY_MARKER)
        return f"{CATALOG_MARKER}{self.catalog}{CATALOG_SEPARATOR}{body}"


def parse(name: str | None) -> QualifiedName:
    """Split ``@cat#db`` / ``@cat#`` / ``@cat#!`` / ``db`` into catalog and database."""
    if name is None:
        return QualifiedName(None, None)
    if name.startswith(CATALOG_MARKER):
        catalog, sep, rest = name[1:].partition(CATALOG_SEPARATOR)
        if sep:
            if rest == "":
                return QualifiedName(catalog, None)
            return QualifiedName(catalog, "" if rest == EMPTY_MARKER else rest)
        return QualifiedName(catalog, None)  # "@cat" alone: Hive treats it as the whole catalog
    return QualifiedName(None, name)


# -- patterns -------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The Hive listing pattern as a regex: ``*`` any run, ``.`` any character, ``|`` alternatives."""
    alternatives = []
    for alt in pattern.split("|"):
        parts = []
        for ch in alt.strip():
            if ch == "*":
                parts.append(".*")
            elif ch == ".":
                parts.append(".")
            else:
                parts.append(re.escape(ch))
        alternatives.append("".join(parts))
    return re.compile("(?:" + "|".join(alternatives) + r")\Z", re.IGNORECASE | re.DOTALL)


def matches(pattern: str | None, name: str) -> bool:
    if pattern is None or pattern in ("", "*"):
        return True
    return compile_pattern(pattern).match(name) is not None


def residual_patterns(pattern: str | None, prefix: str) -> list[str] | None:
    """The patterns to send to a member whose databases are shown as ``prefix + name``.

    Returns ``None`` when no name with that prefix can match (the member need not be asked), else the
    de-duplicated list of sub-patterns for the member's own names. Results are filtered again against
    the original pattern after prefixing, so a residual may be wider than exact but never narrower.
    """
    if pattern is None or pattern.strip() in ("", "*"):
        return ["*"]
    out: list[str] = []
    for alt in pattern.split("|"):
        residual = _residual(alt.strip(), prefix.lower())
        if residual is not None and residual not in out:
            out.append(residual)
    return out or None


def _residual(alt: str, prefix: str) -> str | None:
    i = 0
    for ch in prefix:
        if i >= len(alt):
            return None
        token = alt[i]
        if token == "*":
            return "*" + alt[i + 1:] if alt[i + 1:] != "" else "*"
        if token != "." and token.lower() != ch:
            return None
        i += 1
    rest = alt[i:]
    return rest or None


# -- partition names ------------------------------------------------------------------------------------
#: Characters Hive escapes in partition names (FileUtils.escapePathName: every control character, and these), as %XX.
_ESCAPED = frozenset('"#%\'*/:=?\\{[]^\x7f') | {chr(c) for c in range(32)}


_NEEDS_ESCAPE = re.compile("[" + re.escape("".join(sorted(_ESCAPED))) + "]")


def _escape(text: str) -> str:
    if _NEEDS_ESCAPE.search(text) is None:  # most values: nothing to escape
        return text
    return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in text)


def partition_name(keys: Iterable[str], values: Iterable[str]) -> str:
    """Hive's ``key=value/key=value`` partition name, with Hive's escaping."""
    return "/".join(f"{_escape(k)}={_escape(v)}" for k, v in zip(keys, values, strict=True))
