"""``limits.rates`` of the server file: its list of rules, read into :class:`~waggle.config.model.RateLimit` s.

Each rule's keys are declared in :class:`~waggle.config.settings.RateRule` and read through them; what is left
here is what no single declaration says: a rule is a map, its name is required and unique (it is a metrics
label), ``rate`` is required, ``burst`` follows ``rate``, ``*`` among the users (or none) means every user,
and no families means all of them. Every problem names the file, the key (``limits.rates[1].rate``) and the value.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from waggle.config.kinds import Family
from waggle.config.model import RateLimit
from waggle.config.reader import Reader
from waggle.config.settings import RateRule
from waggle.config.settings import Server as S


def parse_rates(r: Reader, unknown: Callable[[Reader], None]) -> tuple[RateLimit, ...]:
    """The rules of ``limits.rates`` in ``r``'s mapping, in file order; problems go to ``r.problems``, and
    ``unknown`` is given each rule's reader to report the keys that are not a rule's."""
    rules: list[RateLimit] = []
    seen: set[str] = set()
    for er in r.entries(S.RATES.key, "a rule: a map with name, rate and optionally users, addresses, methods, "
                                     "burst, per", "rules ({name, rate, ...})"):
        unknown(er)
        rule = _rule(er, seen)
        if rule is not None:
            rules.append(rule)
    return tuple(rules)


def _rule(er: Reader, seen: set[str]) -> RateLimit | None:
    before = len(er.problems)
    for required in (RateRule.NAME, RateRule.RATE):
        if not er.given(required.key):
            er.require(required.key)
    name = er.get(RateRule.NAME)
    if name and name in seen:
        er.fail(RateRule.NAME.key, name, "another rate limit has this name (it names the rule in metrics)")
    seen.add(name)
    rate = er.get(RateRule.RATE)
    burst = er.get(RateRule.BURST)
    users = er.get(RateRule.USERS)
    families = er.get(RateRule.METHODS)
    rule = er.build(RateLimit, name=name, rate=rate, burst=burst if burst is not None else max(1, math.ceil(rate)),
                    users=None if "*" in users or not users else frozenset(users), families=families or tuple(Family))
    return rule if len(er.problems) == before else None
