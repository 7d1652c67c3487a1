"""Each policy's checkpoint and lease, kept in the target primary as parameters of the ``waggle_sys`` database,
as Hive keeps ``repl.last.id`` in the replicated database:

- ``waggle.sync.policy.NAME.checkpoint``: the source's last event id whose effect is durable at the target;
- ``.source`` (the member), ``.scope`` (a digest of the policy's definition: a change bootstraps again),
  ``.bootstrapped-at``;
- ``.lease``: ``HOLDER EXPIRES`` (``host:pid:nonce``, epoch seconds): one process at a time follows a policy.

A lease is taken by writing it, waiting a moment and reading it back (the metastore keeps the last write); it is
renewed while held. A lease past its expiry is free, and so is one whose holder is a process of this host that is
no longer running (a follower killed and started again takes its policy back at once).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from waggle.common.lease import holder_id as holder_id
from waggle.common.lease import lease_text, live_other, parse_lease
from waggle.sync.hms import Metastore
from waggle.sync.system import SYS_DB, WRITE, ensure_database
from waggle.synced import coverage

PREFIX = "waggle.sync.policy."


def key(policy: str, field: str) -> str:
    return f"{PREFIX}{policy}.{field}"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    event_id: int
    source: str
    scope: str


class LeaseHeld(Exception):
    """Another follower holds the policy; the message names it."""


class Records:
    """A policy's records, through one connection to the primary (used by one thread at a time)."""

    def __init__(self, target: Metastore, policy: str) -> None:
        self.target, self.policy = target, policy
        self._ensured = False

    def _params(self) -> dict[str, str]:
        if not self._ensured:
            ensure_database(self.target)
            self._ensured = True
        return dict(self.target.client.get_database(SYS_DB).parameters or {})

    def _update(self, values: dict[str, str | None], me: str | None = None, raw: dict[str, str] | None = None
                ) -> None:
        """Write the policy's ``values``, re-read just before under the process's lock; with ``me``, only while no
        other follower holds the lease (a follower that stalled past its lease must not write over the one that
        took the policy since)."""
        with WRITE:
            if not self._ensured:
                self._params()
            db = self.target.client.get_database(SYS_DB)
            params = dict(db.parameters or {})
            if me is not None:
                other = live_other(params.get(key(self.policy, "lease")), me)
                if other is not None:
                    raise LeaseHeld(f"policy '{self.policy}' is now followed by {other}: this follower stopped "
                                    "writing it")
            for name, value in values.items():
                if value is None:
                    params.pop(key(self.policy, name), None)
                else:
                    params[key(self.policy, name)] = value
            params.update(raw or {})
            db.parameters = params
            self.target.client.alter_database(SYS_DB, db)

    # -- the checkpoint --------------------------------------------------------------------------------------------
    def checkpoint(self) -> Checkpoint | None:
        params = self._params()
        value = params.get(key(self.policy, "checkpoint"))
        if value is None:
            return None
        return Checkpoint(int(value), params.get(key(self.policy, "source"), ""), params.get(key(self.policy,
                                                                                                 "scope"), ""))

    def save(self, event_id: int, source: str | None = None, scope: str | None = None,
             bootstrapped_at: str | None = None, me: str | None = None) -> None:
        values: dict[str, str | None] = {"checkpoint": str(event_id)}
        if source is not None:
            values["source"] = source
        if scope is not None:
            values["scope"] = scope
        if bootstrapped_at is not None:
            values["bootstrapped-at"] = bootstrapped_at
        self._update(values, me)

    def cover(self, source: str, patterns: list[str], at: float, me: str, database: str | None = None,
              mode: str | None = None) -> None:
        """Say that the policy's copies matched the source at ``at`` (:mod:`waggle.synced.coverage`)."""
        self._update({}, me, {coverage.PREFIX + f"policy-{self.policy}": coverage.record(source, patterns, at,
                                                                                           database, mode)})

    # -- the lease ---------------------------------------------------------------------------------------------------
    def lease(self) -> tuple[str, float] | None:
        return parse_lease(self._params().get(key(self.policy, "lease")))

    def live_holder(self, me: str) -> str | None:
        """Who else holds the policy now, or None."""
        return live_other(self._params().get(key(self.policy, "lease")), me)

    def take(self, me: str, seconds: float, settle: float = 1.0) -> None:
        """Take the policy's lease, or raise :class:`LeaseHeld`."""
        other = self.live_holder(me)
        if other is not None:
            raise LeaseHeld(f"policy '{self.policy}' is followed by {other}: one follower at a time (its lease "
                            "in the primary's waggle_sys database)")
        self.renew(me, seconds)
        time.sleep(settle)
        found = self.lease()
        if found is None or found[0] != me:
            raise LeaseHeld(f"policy '{self.policy}' was taken by {found[0] if found else 'another follower'} "
                            "while starting: one follower at a time")

    def renew(self, me: str, seconds: float) -> None:
        self._update({"lease": lease_text(me, seconds)}, me)

    def release(self, me: str) -> None:
        found = self.lease()
        if found is not None and found[0] == me:
            self._update({"lease": None})
