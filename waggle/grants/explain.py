"""``waggle access``: the grants' decision for one user on one database or table, and the rule that made it, from
the same policy the doors ask (:mod:`waggle.grants.policy`)."""

from __future__ import annotations

from waggle.config.grants_model import Authorization
from waggle.config.kinds import Privilege
from waggle.grants.groups import GroupResolver
from waggle.grants.service import load_ranger, policy_of
from waggle.grants.verdict import Caller


def caller_of(config: Authorization, user: str, groups: list[str] | None) -> tuple[Caller, str]:
    """The caller to decide for, and where its groups came from: the groups given, else the configured source's
    answer (one lookup, waiting at most its timeout)."""
    if groups is not None:
        return Caller(user, frozenset(g.lower() for g in groups)), "as given"
    resolver = GroupResolver(config.groups)
    try:
        found = resolver.groups(user)
    finally:
        resolver.stop()
    source = resolver.source.describe() if resolver.source is not None else "no groups source"
    return Caller(user, found), f"from {source}"


def explain(config: Authorization, user: str, groups: list[str] | None, target: str,
            privilege: Privilege | None) -> tuple[bool, list[str]]:
    """Whether ``user`` (in ``groups``, else the configured source's) may see ``target`` (``db`` or
    ``db.table``, waggle's names) or, given a ``privilege``, has it there; and the lines that say so and why."""
    ranger = load_ranger(config)
    policy = policy_of(config, ranger.current() if ranger is not None else None)
    who, source = caller_of(config, user, groups)
    db, _, table = target.partition(".")
    obj = f"table '{db}.{table}'" if table else f"database '{db}'"
    lines = [f"{who.describe()}, groups {source}"]
    seen = policy.sees(who, db, table or None)
    if privilege is not None:
        verdict = policy.decide(who, db, table or None, privilege)
        word = "allow" if verdict.allowed else "deny"
        lines.append(f"{word}: {privilege.value} on {obj}: {verdict.rule}")
        if not seen.allowed:
            lines.append(f"{obj} is hidden from this user: a read of it is answered as missing ({seen.rule})")
        return bool(verdict.allowed), lines
    lines.append(f"{'visible' if seen.allowed else 'hidden'}: {obj}: {seen.rule}")
    for p in Privilege:
        verdict = policy.decide(who, db, table or None, p)
        lines.append(f"  {p.value:7} {'allow' if verdict.allowed else 'deny':5}  {verdict.rule}")
    return bool(seen.allowed), lines
