"""The rate limits of ``limits.rates``: which token buckets a call counts against, and whether it may go on.

A pure decision the driver asks before it reads a call's arguments: :meth:`CallLimits.check` takes who calls
(the connection's user and address), the method's family and the clock, and answers None (go on; a token was
taken from every bucket the call counts against) or a :class:`Hit` (answer with its :attr:`~Hit.message`;
nothing was taken). No sockets, no clock of its own, no metrics: the driver writes, counts and logs.

Each serving process has its own buckets. With workers each takes its share of every rule
(``RateLimit.workers``), so a rule holds for the pod while clients' connections spread over the workers.

A reload hands the new rules to :meth:`CallLimits.update`: a rule that keeps its name and what it keeps buckets
for (``per``) keeps its buckets, levels included (cut to the new burst), and applies the new rate from then on.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass

from waggle.common.buckets import Bucket
from waggle.common.limiter import RETRYABLE
from waggle.config.model import Family, Per, RateLimit

#: the buckets one rule keeps before it forgets the full ones (a full bucket is a new one)
MAX_BUCKETS = 10_000
#: the (user, address) pairs whose applicable rules are remembered before they are worked out again
MAX_VIEWS = 10_000
_FAMILIES = len(Family)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Hit:
    """A call over a limit: the rule, the family it counted in, whose bucket was empty, and how long until it
    holds a token again."""

    rule: RateLimit
    family: Family
    user: str
    address: str
    wait: float

    @property
    def who(self) -> str:
        per = self.rule.per
        if per is Per.USER:
            return f"user '{self.user}'" if self.user else "connections without a user"
        if per is Per.ADDRESS:
            return f"address {self.address}"
        return "its clients together"

    @property
    def message(self) -> str:
        """The ``MetaException`` message. It names the rule, and holds ``TTransportException`` so that Hive's
        RetryingMetaStoreClient and Spark's HiveClientImpl retry the call (docs/operations/limits.md)."""
        rule = self.rule
        return (f"waggle rate limit '{rule.name}' reached by {self.who} ({self.family.label}: {rule.rate:g} calls/s, "
                f"burst {rule.burst}); retry in {max(self.wait, 0.001):.3g} s ({RETRYABLE}: rate limited; "
                f"nothing reached a metastore)")


class _Rule:
    """One rule at run time: its share of the rate and burst, and its buckets by key."""

    __slots__ = ("buckets", "config", "prune_at", "rate", "size")

    def __init__(self, config: RateLimit, buckets: dict[str, Bucket] | None = None) -> None:
        self.config = config
        self.rate = config.rate / config.workers
        self.size = float(max(1, -(-config.burst // config.workers)))
        self.buckets: dict[str, Bucket] = {} if buckets is None else buckets
        self.prune_at = MAX_BUCKETS
        for bucket in self.buckets.values():
            if bucket.level > self.size:
                bucket.level = self.size

    def matches(self, user: str, address: Address | None) -> bool:
        config = self.config
        if config.users is not None and user not in config.users:
            return False
        if config.addresses:
            return address is not None and any(address in network for network in config.addresses)
        return True

    def key(self, user: str, host: str) -> str:
        per = self.config.per
        return user if per is Per.USER else host if per is Per.ADDRESS else ""

    def bucket(self, key: str, now: float) -> Bucket:
        """A new, full bucket for ``key`` (forgetting the full ones when there are many)."""
        buckets = self.buckets
        if len(buckets) >= self.prune_at:
            for stale in [k for k, b in buckets.items() if b.full(now, self.rate, self.size)]:
                del buckets[stale]
            self.prune_at = max(MAX_BUCKETS, 2 * len(buckets))
        bucket = buckets[key] = Bucket(self.size, now)
        return bucket


#: per family (indexed by it), the (rule, bucket key) pairs a call of that family counts against
View = tuple[tuple[tuple[_Rule, str], ...], ...]


class CallLimits:
    """The rate limits of one serving process."""

    def __init__(self, rules: tuple[RateLimit, ...] = ()) -> None:
        #: the rules at run time, in file order (empty: the driver asks nothing)
        self.rules: tuple[_Rule, ...] = ()
        self._views: dict[tuple[str, str], View] = {}
        self.update(rules)

    def update(self, rules: tuple[RateLimit, ...]) -> None:
        """Apply a new list of rules (a reload): a rule that keeps its name and ``per`` keeps its buckets."""
        old = {rule.config.name: rule for rule in self.rules}
        fresh = []
        for config in rules:
            before = old.get(config.name)
            kept = before.buckets if before is not None and before.config.per is config.per else None
            fresh.append(_Rule(config, kept))
        self.rules = tuple(fresh)
        self._views = {}

    def check(self, user: str, host: str, family: Family, now: float) -> Hit | None:
        """May a call of ``family`` from ``user`` at ``host`` go on at clock reading ``now``? None: yes, and it
        took a token from each bucket it counts against. A :class:`Hit`: no (nothing was taken)."""
        view = self._views.get((user, host))
        if view is None:
            view = self._view(user, host)
        applies = view[family]
        if not applies:
            return None
        taken = []
        for rule, key in applies:
            bucket = rule.buckets.get(key)
            if bucket is None:
                bucket = rule.bucket(key, now)
            if bucket.refill(now, rule.rate, rule.size) < 1.0:
                return Hit(rule.config, family, user, host, bucket.wait(rule.rate))
            taken.append(bucket)
        for bucket in taken:
            bucket.level -= 1.0
        return None

    def _view(self, user: str, host: str) -> View:
        address = _address(host)
        matching = [(rule, rule.key(user, host)) for rule in self.rules if rule.matches(user, address)]
        view = tuple(tuple((rule, key) for rule, key in matching if Family(i) in rule.config.families)
                     for i in range(_FAMILIES))
        if len(self._views) >= MAX_VIEWS:
            self._views = {}
        self._views[(user, host)] = view
        return view

    def levels(self, now: float) -> Iterator[tuple[str, int, float]]:
        """Per rule: its name, how many buckets it holds, and the tokens they hold together at ``now``."""
        for rule in self.rules:
            tokens = sum(min(rule.size, b.level + max(0.0, now - b.stamp) * rule.rate)
                         for b in rule.buckets.values())
            yield rule.config.name, len(rule.buckets), tokens


def _address(host: str) -> Address | None:
    """The client's address (an IPv4 client of a dual-stack socket as IPv4), or None when it is not one."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
