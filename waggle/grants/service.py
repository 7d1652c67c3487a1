"""The grants of a running waggle: the policy in force, the callers' groups, Ranger's policies kept current, and the
audit of every decision. What the doors (the driver, the Iceberg REST port, the merged log) ask.

The policy is rebuilt when the configuration is reloaded and when Ranger's policies change; each call reads the
one in force when it arrives. A caller's groups come from :class:`~waggle.grants.groups.GroupResolver`, which never
makes a call wait past the first lookup of a user.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.grants_model import Authorization
from waggle.config.kinds import Privilege
from waggle.grants import gate
from waggle.grants.groups import GroupResolver
from waggle.grants.listings import Shape, filtered
from waggle.grants.policy import Policy
from waggle.grants.ranger import RangerSource
from waggle.grants.ranger_source import RangerPolicies
from waggle.grants.rules import RuleSource
from waggle.grants.verdict import Caller, GrantSource, Verdict
from waggle.hms.methods import MethodSpec

log = get_logger("waggle.access")
#: the most bytes of filtered listings (and the answers they were filtered from) one process remembers
FILTERED_BYTES = 32 << 20


class NoPolicies:
    """Ranger's policies, configured and not (yet) read: every decision is a deny that says so, rather than the
    rules alone deciding what Ranger's denies may forbid."""

    def __init__(self, where: str) -> None:
        self.verdict = Verdict(False, f"ranger policies from {where} not loaded")

    def decide(self, who: Caller, db: str, table: str | None, privilege: Privilege,
               owner: str | None = None) -> Verdict:
        return self.verdict

    def sees(self, who: Caller, db: str, table: str | None) -> Verdict:
        return self.verdict


def policy_of(config: Authorization, ranger: RangerSource | None = None) -> Policy:
    """The policy of a configuration's rules and, when configured, Ranger's policies (denying everything while
    they cannot be read)."""
    sources: list[GrantSource] = []
    if config.rules:
        sources.append(RuleSource(config.rules))
    if ranger is not None:
        sources.append(ranger)
    elif config.ranger is not None:
        sources.append(NoPolicies(config.ranger.url or config.ranger.policy_file or "-"))
    return Policy(sources, config.default)


def load_ranger(config: Authorization) -> RangerPolicies | None:
    """Ranger's policies read for the first time (None when not configured); a failure is logged, and every
    decision denied until they are read."""
    if config.ranger is None:
        return None
    ranger = RangerPolicies(config.ranger)
    try:
        ranger.load()
    except (OSError, ValueError) as exc:
        log.error("ranger.unavailable", source=ranger.where, error=str(exc))
    return ranger


class Grants:
    """The grants in force, for every door of one process."""

    def __init__(self, config: Authorization, groups: GroupResolver | None = None,
                 ranger: RangerPolicies | None = None) -> None:
        self.config = config
        self.groups = groups if groups is not None else GroupResolver(config.groups)
        self.ranger = ranger if ranger is not None else load_ranger(config)
        self._ranger_seen: RangerSource | None = self.ranger.current() if self.ranger is not None else None
        self._policy = policy_of(config, self._ranger_seen)
        #: listings as filtered for their callers, under the policy ``_filtered_for`` (see remembered)
        self._filtered: dict[Hashable, tuple[bytes, int]] = {}
        self._filtered_bytes = 0
        self._filtered_for: Policy | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> Grants:
        self.groups.start()
        if self.ranger is not None:
            self.ranger.start()
        return self

    def stop(self) -> None:
        self.groups.stop()
        if self.ranger is not None:
            self.ranger.stop()

    def reload(self, config: Authorization) -> None:
        """New grants from a reloaded configuration; the groups cache is kept when its source is unchanged."""
        if config.groups != self.config.groups:
            self.groups.stop()
            self.groups = GroupResolver(config.groups).start()
        if config.ranger != self.config.ranger:
            if self.ranger is not None:
                self.ranger.stop()
            self.ranger = load_ranger(config)
            if self.ranger is not None:
                self.ranger.start()
        self.config = config
        self._ranger_seen = self.ranger.current() if self.ranger is not None else None
        self._policy = policy_of(config, self._ranger_seen)

    # -- decisions -----------------------------------------------------------------------------------------
    @property
    def policy(self) -> Policy:
        """The policy in force now (rebuilt when Ranger's policies changed)."""
        if self.ranger is not None:
            current = self.ranger.current()
            if current is not self._ranger_seen:
                self._ranger_seen = current
                self._policy = policy_of(self.config, current)
        return self._policy

    def caller(self, proven: str | None, named: str | None) -> Caller:
        """Who a call is from: the user a connection proved (Kerberos through ``auth_to_local``, a token's owner, a
        REST client's user), else the ``set_ugi`` user where ``trust-set-ugi`` says so; with the user's groups."""
        user = proven if proven else named if self.config.trust_set_ugi and named else None
        return Caller(user, self.groups.groups(user) if user else frozenset())

    def admit(self, who: Caller, spec: MethodSpec, args: Any, door: str = "thrift") -> gate.Refused | None:
        """The grants' answer to a call, audited: a refusal, or None."""
        return self._audited(who, spec, gate.check(self.policy, who, spec, args), door)

    def admit_object(self, who: Caller, spec: MethodSpec, db: str, table: str | None,
                     door: str = "rest") -> gate.Refused | None:
        """The grants' answer to a write of ``spec``'s privilege on one database or table (a door that knows its
        objects without a call's arguments: the Iceberg REST port), audited."""
        return self._audited(who, spec, gate.check_object(self.policy, who, spec, db, table), door)

    def _audited(self, who: Caller, spec: MethodSpec, answer: gate.Refused | gate.Allowed | None,
                 door: str) -> gate.Refused | None:
        if answer is None:
            return None
        if isinstance(answer, gate.Allowed):
            metrics.ACCESS_DECISIONS.labels("allowed", answer.rule).inc()
            if self.config.audit_writes:
                log.info("access.allowed", user=who.user, groups=sorted(who.groups), method=spec.name,
                         object=answer.obj.shown, privilege=answer.obj.privilege.value, rule=answer.rule, door=door)
            return None
        outcome = "hidden" if answer.hidden else "refused"
        metrics.ACCESS_DECISIONS.labels(outcome, answer.rule).inc()
        log.warning("access.refused", user=who.user, groups=sorted(who.groups), method=spec.name,
                    object=answer.obj.shown, privilege=answer.obj.privilege.value, rule=answer.rule,
                    hidden=answer.hidden, door=door)
        return answer

    def filter(self, who: Caller, result: Any, shape: Shape, args: Any) -> int:
        """Leave out of a listing what ``who`` may not see; how many entries were left out."""
        left_out = filtered(result, shape, args, self.policy, who)
        self.count(shape, left_out)
        return left_out

    @staticmethod
    def count(shape: Shape, left_out: int) -> None:
        """Count the entries a listing left out for its caller."""
        if left_out:
            metrics.ACCESS_FILTERED.labels("databases" if shape is Shape.DATABASE_NAMES else "tables").inc(left_out)

    def remembered(self, key: Hashable) -> tuple[bytes, int] | None:
        """A listing's answer (its body) as filtered for a caller before: ``key`` holds the caller, the method, the
        database listed and the unfiltered body. Forgotten when the policy changes."""
        if self._filtered_for is not self._policy:
            self._filtered.clear()
            self._filtered_bytes = 0
            self._filtered_for = self._policy
        return self._filtered.get(key)

    def remember(self, key: Hashable, body: bytes, left_out: int) -> bytes:
        """Remember a filtered listing's body, and how many entries it left out (within :data:`FILTERED_BYTES`);
        the body."""
        size = len(body) + len(key[-1]) if isinstance(key, tuple) and isinstance(key[-1], bytes) else len(body)
        if size > FILTERED_BYTES // 16:
            return body
        if self._filtered_bytes + size > FILTERED_BYTES:
            self._filtered.clear()
            self._filtered_bytes = 0
        self._filtered[key] = (body, left_out)
        self._filtered_bytes += size
        return body

    def sees(self, who: Caller, db: str, table: str | None = None) -> bool:
        """Whether ``who`` may see the database (or table): what the merged log asks of each event."""
        return bool(self.policy.sees(who, db, table).allowed)
