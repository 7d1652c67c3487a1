"""waggle's own rules and the policy over them: who sees and may do what."""

from __future__ import annotations

from waggle.config.grants_model import GrantRule
from waggle.config.kinds import Effect, Privilege
from waggle.grants.policy import Policy
from waggle.grants.rules import RuleSource
from waggle.grants.verdict import Caller

S, U, C, D, A = Privilege.SELECT, Privilege.UPDATE, Privilege.CREATE, Privilege.DROP, Privilege.ALTER
ALICE = Caller("alice", frozenset({"analysts"}))
BOB = Caller("bob", frozenset({"engineers"}))
NOBODY = Caller(None)


def rule(name: str, *, users: tuple[str, ...] = (), groups: tuple[str, ...] = (), databases: tuple[str, ...] = ("*",),
         tables: tuple[str, ...] = ("*",), privileges: frozenset[Privilege] = frozenset({S}),
         effect: Effect = Effect.ALLOW) -> GrantRule:
    return GrantRule(name, users, groups, databases, tables, privileges, effect)


RULES = (
    rule("analysts read sales", groups=("analysts",), databases=("sales", "remote_sales")),
    rule("no secrets", groups=("*",), databases=("sales",), tables=("secret_*",), privileges=frozenset(Privilege),
         effect=Effect.DENY),
    rule("bob owns scratch", users=("bob",), databases=("scratch_*",), privileges=frozenset(Privilege)),
    rule("nobody writes archive", users=("*",), databases=("archive",), privileges=frozenset({U, D, A}),
         effect=Effect.DENY),
    rule("everyone reads archive", users=("*",), databases=("archive",)),
)


def policy(default: Effect = Effect.DENY) -> Policy:
    return Policy([RuleSource(RULES)], default)


def test_an_allow_applies_to_its_group_and_patterns() -> None:
    p = policy()
    assert p.decide(ALICE, "sales", "orders", S) == (True, "analysts read sales")
    assert p.decide(ALICE, "SALES", "Orders", S).allowed  # names compare lower-cased
    assert p.decide(ALICE, "remote_sales", "orders", S).allowed
    assert p.decide(ALICE, "sales", "orders", U) == (False, "authorization.default (deny)")
    assert not p.decide(BOB, "sales", "orders", S).allowed


def test_a_deny_wins_over_an_allow() -> None:
    p = policy()
    assert p.decide(ALICE, "sales", "secret_pay", S) == (False, "no secrets")
    assert p.decide(ALICE, "archive", "t", U) == (False, "nobody writes archive")
    assert p.decide(ALICE, "archive", "t", S) == (True, "everyone reads archive")


def test_a_database_itself_needs_a_rule_over_all_its_tables() -> None:
    p = policy()
    assert p.decide(BOB, "scratch_bob", None, D).allowed
    narrow = Policy([RuleSource([rule("one table", users=("bob",), databases=("x",), tables=("t",),
                                      privileges=frozenset({D}))])])
    assert not narrow.decide(BOB, "x", None, D).allowed
    assert narrow.decide(BOB, "x", "t", D).allowed


def test_visibility() -> None:
    p = policy()
    assert p.sees(ALICE, "sales").allowed
    assert not p.sees(BOB, "sales").allowed
    assert not p.sees(ALICE, "sales", "secret_pay").allowed
    assert p.sees(BOB, "archive").allowed  # a read is allowed though writes are denied
    assert p.visible_databases(BOB, ["sales", "scratch_b", "archive", "other"]) == ["scratch_b", "archive"]
    assert p.visible_databases(NOBODY, ["sales", "archive"]) == ["archive"]


def test_the_default_allows_what_no_rule_names() -> None:
    p = policy(Effect.ALLOW)
    assert p.decide(BOB, "other", "t", U) == (True, "authorization.default (allow)")
    assert not p.sees(BOB, "sales", "secret_x").allowed  # every privilege denied: hidden even so
    assert p.sees(BOB, "archive", "t").allowed


def test_listings_filter_to_the_visible_tables_in_order() -> None:
    names = ["orders", "secret_pay", "Customers", "secret_x"]
    for default in (Effect.DENY, Effect.ALLOW):
        p = policy(default)
        expected = [n for n in names if p.sees(ALICE, "sales", n).allowed]
        assert p.visible_tables(ALICE, "sales", names) == expected == ["orders", "Customers"]
    assert policy().visible_tables(BOB, "sales", names) == []
    assert policy(Effect.ALLOW).visible_tables(BOB, "sales", names) == ["orders", "Customers"]
    assert policy().visible_tables(BOB, "scratch_1", names) == names


def test_a_partial_deny_is_decided_per_table() -> None:
    rules = [rule("read", users=("alice",), databases=("d",), privileges=frozenset({S, U})),
             rule("no updates of t*", users=("alice",), databases=("d",), tables=("t*",), privileges=frozenset({U}),
                  effect=Effect.DENY),
             rule("no select of tx", users=("alice",), databases=("d",), tables=("tx",), privileges=frozenset({S}),
                  effect=Effect.DENY)]
    p = Policy([RuleSource(rules)])
    names = ["a", "t1", "tx"]
    assert p.visible_tables(ALICE, "d", names) == ["a", "t1"]
    assert [n for n in names if p.sees(ALICE, "d", n).allowed] == ["a", "t1"]
    assert p.decide(ALICE, "d", "t1", U) == (False, "no updates of t*")
    assert p.decide(ALICE, "d", "t1", S).allowed


def test_a_listing_of_ten_thousand_tables_matches_one_by_one_decisions() -> None:
    names = [f"t{i}" if i % 7 else f"secret_{i}" for i in range(10_000)]
    p = policy()
    fast = p.visible_tables(ALICE, "sales", names)
    assert fast == [n for n in names if not n.startswith("secret_")]
