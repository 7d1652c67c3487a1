"""waggle's own grants (``authorization.rules``, or a policy file's ``rules``) as a :class:`GrantSource`. Pure.

A rule applies to a caller named in its ``users`` (``*``: everyone) or in one of its ``groups`` (``*`` or
``public``: everyone), to databases and tables matching its patterns, for its privileges. Of the rules that apply, a
deny wins over an allow; when none applies the source says nothing (:data:`~waggle.grants.verdict.NO_MATCH`) and
the policy's default decides (:mod:`waggle.grants.policy`).

The rules that concern one caller, and of those the ones that concern one database, are found once and remembered:
a decision then looks at the few rules left, and a listing of thousands of tables is filtered with one regular
expression per rule over all the names at once (:meth:`RuleSource.visible_tables`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from waggle.config.grants_model import GrantRule
from waggle.config.kinds import Effect, Privilege
from waggle.grants.patterns import compile_globs, compile_lines, matches_all
from waggle.grants.verdict import NO_MATCH, Caller, Verdict

#: every privilege (a rule denying them all hides what it names)
ALL = frozenset(Privilege)
#: how many callers' and databases' rule lists are remembered before they are worked out afresh
_REMEMBERED = 4096


class _Rule:
    """One rule, compiled."""

    __slots__ = ("all_tables", "any_group", "any_user", "databases", "deny", "groups", "lines", "name",
                 "privileges", "tables", "users")

    def __init__(self, rule: GrantRule) -> None:
        self.name = rule.name
        self.deny = rule.effect is Effect.DENY
        self.privileges = rule.privileges
        self.any_user = "*" in rule.users
        self.users = frozenset(u.lower() for u in rule.users)
        self.any_group = bool({"*", "public"} & set(rule.groups))
        self.groups = frozenset(g.lower() for g in rule.groups)
        self.databases = compile_globs(rule.databases) or re.compile("(?!)")
        self.all_tables = matches_all(rule.tables)
        tables = compile_globs(rule.tables)
        self.tables = tables or re.compile("(?!)")
        #: the table patterns over names one per line (a listing filtered at once)
        self.lines = compile_lines(rule.tables)

    def concerns(self, who: Caller) -> bool:
        if self.any_user or (who.user is not None and who.user.lower() in self.users):
            return True
        return self.any_group or not self.groups.isdisjoint(who.groups)

    def covers(self, table: str | None) -> bool:
        """Whether the rule names ``table`` (None: the database itself, which only a rule over every table does)."""
        return self.all_tables if table is None else self.all_tables or self.tables.fullmatch(table) is not None


class RuleSource:
    """Grants from waggle's rules, in the order given (order does not change a decision: a deny wins)."""

    def __init__(self, rules: Sequence[GrantRule]) -> None:
        self.rules = tuple(rules)
        self._compiled = [_Rule(r) for r in self.rules]
        self._callers: dict[Caller, list[_Rule]] = {}
        self._databases: dict[tuple[Caller, str], list[_Rule]] = {}

    def __len__(self) -> int:
        return len(self.rules)

    def _of(self, who: Caller, db: str) -> list[_Rule]:
        """The rules that concern ``who`` and database ``db``."""
        key = (who, db)
        found = self._databases.get(key)
        if found is None:
            mine = self._callers.get(who)
            if mine is None:
                if len(self._callers) >= _REMEMBERED:
                    self._callers.clear()
                mine = self._callers[who] = [r for r in self._compiled if r.concerns(who)]
            if len(self._databases) >= _REMEMBERED:
                self._databases.clear()
            found = self._databases[key] = [r for r in mine if r.databases.fullmatch(db) is not None]
        return found

    def decide(self, who: Caller, db: str, table: str | None, privilege: Privilege,
               owner: str | None = None) -> Verdict:
        allowed: _Rule | None = None
        for rule in self._of(who, db):
            if privilege in rule.privileges and rule.covers(table):
                if rule.deny:
                    return Verdict(False, rule.name)
                allowed = allowed or rule
        return Verdict(True, allowed.name) if allowed is not None else NO_MATCH

    def sees(self, who: Caller, db: str, table: str | None) -> Verdict:
        """True: some privilege is allowed and not denied; False: every privilege is denied; None: neither (the
        default decides the privileges no rule names). For a database (``table`` None) an allow on any of its
        tables counts, and only denies over all its tables hide it."""
        allowed: set[Privilege] = set()
        denied: set[Privilege] = set()
        first_allow = first_deny = None
        for rule in self._of(who, db):
            if rule.deny:
                if rule.covers(table):
                    denied |= rule.privileges
                    first_deny = first_deny or rule
            elif table is None or rule.covers(table):
                allowed |= rule.privileges
                first_allow = first_allow or rule
        if first_allow is not None and allowed - denied:
            return Verdict(True, first_allow.name)
        if first_deny is not None and denied >= ALL:
            return Verdict(False, first_deny.name)
        return NO_MATCH if first_allow is None else Verdict(None, first_allow.name)

    def whole_database(self, who: Caller, db: str, default_allows: bool) -> bool | None:
        """True when ``who`` sees every table of ``db``, False when none, None when it depends on the table (the
        default applied): a listing of the database is then answered as it is, or empty, without a look at it."""
        rules = self._of(who, db)
        if not rules:
            return default_allows
        if all(r.all_tables for r in rules):  # one verdict for every table of the database
            return _shown(self.sees(who, db, ""), default_allows)
        return None

    def visible_tables(self, who: Caller, db: str, names: Sequence[str], default_allows: bool,
                       text: str | None = None) -> list[str]:
        """The ``names`` (lower-case tables of ``db``) that :meth:`sees` would show, the default applied: each
        rule's patterns run once over all the names (``text``: the names one per line, between line ends, when the
        caller has it already)."""
        whole = self.whole_database(who, db, default_allows)
        if whole is not None:
            return list(names) if whole else []
        if text is None:
            text = "\n" + "\n".join(names) + "\n"
        allowed: set[str] | None = set()
        hidden: set[str] = set()  # denied every privilege
        unsure: set[str] = set()  # some privileges denied: decided one by one
        for rule in self._of(who, db):
            matched = _matched(rule, text)
            if rule.deny:
                if rule.privileges >= ALL:
                    if matched is None:
                        return []
                    hidden |= matched
                elif matched is None:
                    unsure = set(names)
                else:
                    unsure |= matched
            elif allowed is not None:
                if matched is None:
                    allowed = None  # every name
                else:
                    allowed |= matched
        if unsure:
            return [n for n in names if n not in hidden and (
                _shown(self.sees(who, db, n), default_allows) if n in unsure else
                default_allows or allowed is None or n in allowed)]
        if default_allows or allowed is None:
            return [n for n in names if n not in hidden] if hidden else list(names)
        return [n for n in names if n in allowed and n not in hidden]


def _matched(rule: _Rule, text: str) -> set[str] | None:
    """The names a rule's table patterns match (None: every name)."""
    if rule.all_tables or rule.lines is None:
        return None if rule.all_tables else set()
    return set(rule.lines.findall(text))


def _shown(verdict: Verdict, default_allows: bool) -> bool:
    return verdict.allowed if verdict.allowed is not None else default_allows
