"""What a policy covers: its tables (``DB.TABLE`` regexes, Hive REPL's policy), and the databases they can name.
Pure: no I/O.

A policy covers a database when one of its patterns can match a table of it: some ``db.table`` the pattern matches
starts with ``db.`` (``sales\\..*`` and ``sales.order_.*`` cover ``sales``, ``fl_.*\\..*`` every database whose
name starts with ``fl_``, ``web\\.clicks`` covers ``web``). A new database has no table yet, and a dropped one none
any more, so this is read from the pattern itself, by walking Python's parse of it over the characters of ``db.``
(:func:`could_start`). A part of a pattern this walk cannot judge (a look-around, a back reference) is taken as
matching: a database it cannot rule out is covered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

try:  # Python 3.11+
    import re._constants as _c
    import re._parser as _parser
except ImportError:  # pragma: no cover
    import sre_constants as _c  # type: ignore[no-redef]
    import sre_parse as _parser  # type: ignore[no-redef]


@dataclass(frozen=True, slots=True)
class Scope:
    """The tables a policy covers: its ``DB.TABLE`` regexes (Hive REPL's policy), matched case-insensitively."""

    patterns: tuple[re.Pattern[str], ...]

    @classmethod
    def of(cls, patterns: Iterable[str]) -> Scope:
        return cls(tuple(re.compile(p, re.IGNORECASE) for p in patterns))

    def covers(self, db: str, table: str) -> bool:
        return any(p.fullmatch(f"{db}.{table}") for p in self.patterns)

    def covers_database(self, db: str) -> bool:
        """Whether a table of ``db`` may be covered (see the module's docstring)."""
        return any(could_start(p, f"{db}.") for p in self.patterns)


def could_start(pattern: re.Pattern[str], prefix: str) -> bool:
    """Whether some string ``pattern`` fullmatches starts with ``prefix``."""
    return _Walk(prefix, bool(pattern.flags & re.IGNORECASE)).seq(
        list(_parser.parse(pattern.pattern, pattern.flags)), 0, 0, lambda pos: pos >= len(prefix))


Then = Callable[[int], bool]


class _Walk:
    """A backtracking walk of a parsed pattern over ``text``: true as soon as all of ``text`` is read."""

    def __init__(self, text: str, ignore_case: bool) -> None:
        self.text, self.ignore_case = text, ignore_case

    def seq(self, items: list[tuple[Any, Any]], i: int, pos: int, then: Then) -> bool:
        if pos >= len(self.text):
            return True  # the prefix is read: whatever is left of the pattern can follow
        if i == len(items):
            return then(pos)
        op, av = items[i]

        def rest(p: int) -> bool:
            return self.seq(items, i + 1, p, then)

        if op in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN):
            return self._char(op, av, self.text[pos]) and rest(pos + 1)
        if op is _c.SUBPATTERN:
            return self.seq(list(av[-1]), 0, pos, rest)
        if op is _c.ATOMIC_GROUP:
            return self.seq(list(av), 0, pos, rest)
        if op is _c.BRANCH:
            return any(self.seq(list(alt), 0, pos, rest) for alt in av[1])
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, getattr(_c, "POSSESSIVE_REPEAT", _c.MAX_REPEAT)):
            low, high, body = av
            return self._repeat(list(body), low, high, 0, pos, rest)
        if op is _c.AT:
            if av in (_c.AT_END, _c.AT_END_STRING):
                return False  # more of the prefix is to come
            if av in (_c.AT_BEGINNING, _c.AT_BEGINNING_STRING):
                return pos == 0 and rest(pos)
            return rest(pos)
        if op in (_c.ASSERT, _c.ASSERT_NOT):
            return rest(pos)  # a look-around reads nothing: not judged, taken as matching
        return True  # a back reference, a conditional: not judged, taken as matching what is left

    def _repeat(self, body: list[tuple[Any, Any]], low: int, high: int, count: int, pos: int, then: Then) -> bool:
        if count >= low and then(pos):
            return True
        if count >= high:
            return False
        # each further round reads something (or is needed to reach ``low``): no endless empty rounds
        return self.seq(body, 0, pos, lambda p: (p > pos or count < low)
                        and self._repeat(body, low, high, count + 1, p, then))

    def _char(self, op: Any, av: Any, c: str) -> bool:
        forms = {c, c.lower(), c.upper()} if self.ignore_case else {c}
        if op is _c.ANY:
            return c != "\n"
        if op is _c.LITERAL:
            return chr(av) in forms
        if op is _c.NOT_LITERAL:
            return chr(av) not in forms
        negate = bool(av) and av[0][0] is _c.NEGATE
        hit = any(self._in(item, f) for item in av for f in forms)
        return hit != negate

    @staticmethod
    def _in(item: tuple[Any, Any], c: str) -> bool:
        op, av = item
        if op is _c.LITERAL:
            return chr(av) == c
        if op is _c.RANGE:
            return bool(av[0] <= ord(c) <= av[1])
        if op is _c.CATEGORY:
            word = c.isalnum() or c == "_"
            return bool({_c.CATEGORY_DIGIT: c.isdigit(), _c.CATEGORY_NOT_DIGIT: not c.isdigit(),
                         _c.CATEGORY_SPACE: c.isspace(), _c.CATEGORY_NOT_SPACE: not c.isspace(),
                         _c.CATEGORY_WORD: word, _c.CATEGORY_NOT_WORD: not word}.get(av, True))
        return False  # NEGATE (read by the caller)
