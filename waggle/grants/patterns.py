"""Name patterns of grants: ``*`` any run of characters, ``?`` one, everything else itself, case-insensitive (as
Hive's and Ranger's names are). Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: matches every name
ANY = "*"


def glob_regex(pattern: str, line: bool = False) -> str:
    """The regular expression (without anchors) of one glob pattern; with ``line``, its wildcards never cross a
    line's end (for names one per line)."""
    many, one = ("[^\n]*", "[^\n]") if line else (".*", ".")
    out = []
    for ch in pattern.lower():
        if ch == "*":
            out.append(many)
        elif ch == "?":
            out.append(one)
        else:
            out.append(re.escape(ch))
    return "".join(out)


def compile_globs(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern that fully matches any of ``patterns`` (lower-cased names); None for no pattern at all."""
    parts = [glob_regex(p) for p in patterns]
    if not parts:
        return None
    return re.compile("(?:" + "|".join(parts) + ")", re.DOTALL)


def compile_lines(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern whose ``findall`` over names one per line, the text starting and ending with a line's end,
    gives the names that match any of ``patterns``: each match starts at the line's end before its name, so a
    pattern with a literal start is found by a fast literal search, not tried at every character."""
    parts = [glob_regex(p, line=True) for p in patterns]
    if not parts:
        return None
    return re.compile("\n(" + "|".join(parts) + ")(?=\n)")


def matches_all(patterns: Iterable[str]) -> bool:
    """Whether the patterns match every name (one of them is ``*`` alone, or a run of ``*``)."""
    return any(p and set(p) == {"*"} for p in patterns)
