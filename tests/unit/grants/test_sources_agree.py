"""Ranger's policies and waggle's rules, written to say the same, decide the same: the Ranger export
(``data/ranger_hive_export.json``) read by :class:`~waggle.grants.ranger.RangerSource`, and its policies written
as :class:`~waggle.config.grants_model.GrantRule` for :class:`~waggle.grants.rules.RuleSource` (a Ranger deny item
as a deny rule). A verdict of None is the default, a denial, for both.

What rules cannot say is left out of the rules, and the cases keep clear of it: exceptions (carol's and dora's),
``isDenyAllElse`` with an override (for hive and admin in ``finance``), excludes (``etl``, erin), column policies
(``marketing``'s visibility), ``{OWNER}`` (no owner is given), ``{USER}`` for an anonymous caller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from waggle.config.grants_model import GrantRule
from waggle.config.kinds import Effect, Privilege
from waggle.grants.ranger import RangerSource
from waggle.grants.rules import RuleSource
from waggle.grants.verdict import Caller, GrantSource

S, U, C, D, A, ADM = (Privilege.SELECT, Privilege.UPDATE, Privilege.CREATE, Privilege.DROP, Privilege.ALTER,
                      Privilege.ADMIN)
EXPORT = Path(__file__).parent / "data" / "ranger_hive_export.json"


def rule(name: str, privileges: set[Privilege], databases: tuple[str, ...], tables: tuple[str, ...] = ("*",),
         users: tuple[str, ...] = (), groups: tuple[str, ...] = (), effect: Effect = Effect.ALLOW) -> GrantRule:
    return GrantRule(name=name, users=users, groups=groups, databases=databases, tables=tables,
                     privileges=frozenset(privileges), effect=effect)


#: the export's policies, as rules (by policy id)
RULES = (
    rule("1, 2: all", set(Privilege), ("*",), users=("hive", "admin")),
    rule("4: default create", {C}, ("default",), groups=("public",)),
    rule("10: analysts read sales", {S}, ("sales",), groups=("analysts",)),
    rule("10: bob reads and updates sales", {S, U}, ("sales",), users=("bob",)),
    rule("10: not mallory", {S}, ("sales",), users=("mallory",), effect=Effect.DENY),
    rule("11: no pii for analysts", {S}, ("sales",), ("customers_pii",), groups=("analysts",), effect=Effect.DENY),
    rule("12: finance", {S, U, A}, ("finance",), groups=("finance",)),
    rule("13: staging", {S}, ("stag*",), users=("*",)),
    rule("14: sandbox", {C, S}, ("sandbox",), groups=("analysts",)),
    rule("19: reference", {S}, ("ref",), groups=("public",)),
    rule("21: no drops for interns", {D, A}, ("sales",), groups=("interns",), effect=Effect.DENY),
    rule("22: ops admin", {ADM}, ("ops",), users=("olga",)),
)


def who(user: str | None, *groups: str) -> Caller:
    return Caller(user, frozenset(groups))


def sources() -> list[GrantSource]:
    ranger = RangerSource.from_document(json.loads(EXPORT.read_text()), "hive", str(EXPORT))
    return [ranger, RuleSource(RULES)]


DECISIONS = [
    (who("hive"), "sales", "orders", D, True),
    (who("admin"), "anything", None, C, True),
    (who("hive"), "ops", None, ADM, True),
    (who("ann", "analysts"), "sales", "orders", S, True),
    (who("ann", "analysts"), "sales", "orders", U, False),
    (who("ann", "analysts"), "sales", "customers_pii", S, False),
    (who("ann", "analysts"), "sales", None, S, True),
    (who("mallory", "analysts"), "sales", "orders", S, False),
    (who("mallory"), "sales", "orders", U, False),
    (who("bob"), "sales", "orders", U, True),
    (who("bob"), "sales", "orders", D, False),  # Ranger: a conditional item, failing closed
    (who("bob", "interns"), "sales", "orders", U, True),
    (who("ian", "interns", "analysts"), "sales", "orders", S, True),
    (who("ian", "interns", "analysts"), "sales", "orders", A, False),
    (who("ian", "interns"), "sales", None, D, False),
    (who("fay", "finance"), "finance", "ledger", U, True),
    (who("fay", "finance"), "finance", "ledger", D, False),
    (who("zed"), "finance", "ledger", S, False),
    (who("zed"), "staging_eu", "t", S, True),
    (who("zed"), "Staging_EU", "T", S, True),
    (who("zed"), "staging_eu", "t", U, False),
    (who("zed"), "ref", "countries", S, True),
    (who(None), "ref", "countries", S, True),
    (who("zed"), "ref", "countries", D, False),
    (who("zed"), "default", None, C, True),
    (who("zed"), "default", "t", C, True),
    (who("zed"), "default", "t", S, False),
    (who("ann", "analysts"), "sandbox", "t", C, True),
    (who("ann", "analysts"), "sandbox", "t", D, False),
    (who("olga"), "ops", "jobs", ADM, True),
    (who("olga"), "ops", "jobs", S, False),
    (who("zed"), "hr", "people", S, False),
]


@pytest.mark.parametrize(("caller", "db", "table", "privilege", "expected"), DECISIONS)
def test_ranger_and_rules_decide_the_same(caller: Caller, db: str, table: str | None, privilege: Privilege,
                                          expected: bool) -> None:
    said = [bool(s.decide(caller, db.lower(), table.lower() if table else None, privilege).allowed)
            for s in sources()]
    assert said == [expected, expected], f"ranger, rules: {said}"


VISIBILITY = [
    (who("hive"), "anything", None, True),
    (who("ann", "analysts"), "sales", None, True),
    (who("ann", "analysts"), "sales", "orders", True),
    (who("ann", "analysts"), "sales", "customers_pii", False),  # select, its one privilege there, denied
    (who("mallory", "analysts"), "sales", "orders", False),
    (who("mallory"), "sales", None, False),
    (who("ian", "interns", "analysts"), "sales", "orders", True),
    (who("bob"), "sales", "orders", True),
    (who("fay", "finance"), "finance", "ledger", True),
    (who("zed"), "finance", None, False),
    (who("zed"), "ref", None, True),
    (who(None), "ref", "countries", True),
    (who("zed"), "staging_x", None, True),
    (who("zed"), "sales", None, False),
    (who("zed"), "default", "t", True),
    (who("olga"), "ops", None, True),
    (who("olga"), "sales", None, False),
]


@pytest.mark.parametrize(("caller", "db", "table", "expected"), VISIBILITY)
def test_ranger_and_rules_show_the_same(caller: Caller, db: str, table: str | None, expected: bool) -> None:
    said = [bool(s.sees(caller, db, table).allowed) for s in sources()]
    assert said == [expected, expected], f"ranger, rules: {said}"
