"""The copies at run time: read from the primary every ``copies-refresh-seconds`` (:mod:`waggle.copies.registry`,
one round run by :mod:`waggle.loops`) and served in the routes snapshot.

Nothing is read while no member has ``read-from-copies``. A failed round keeps the copies served before. The
service also says, in the log, when a member's reads switch to copies and when they switch back
(:meth:`CopiesService.watch`: when the member's health changes, and every second).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from waggle.common.logging import get_logger
from waggle.config.model import CopyReads, MetastoreConfig
from waggle.copies.catalog import NONE, Copies
from waggle.copies.registry import CopyRegistry
from waggle.routes.snapshot import RoutesHolder

if TYPE_CHECKING:
    from waggle.upstream.health import Health

log = get_logger("waggle.copies")


class CopiesService:
    """The copies at run time: read every ``copies-refresh-seconds`` and served in the routes snapshot."""

    def __init__(self, holder: RoutesHolder, health: Health, now: Callable[[], float]) -> None:
        self.registry = CopyRegistry()
        self._holder = holder
        self._health = health
        self._now = now
        #: member -> why its reads are answered from copies now (down, prefer), as last logged
        self._serving: dict[str, str] = {}
        health.listeners.append(lambda _status: self.watch())  # a member down or back: said at once

    def refresh_seconds(self) -> float:
        return self._holder.routes.config.server.copies_refresh_seconds

    def refresh(self) -> None:
        routes = self._holder.routes
        members = {m.name: m for m in routes.config.federation.federated
                   if m.read_from_copies is not CopyReads.NEVER}
        copies = NONE if not members else self.registry.read(routes.primary, members)
        if copies != self._holder.routes.copies:
            before = self._holder.routes.copies.counts
            self._holder.routes = replace(self._holder.routes, copies=copies)
            for name in sorted(set(before) | set(copies.counts)):
                if before.get(name, 0) != copies.counts.get(name, 0):
                    log.info("copies.found", member=name, copies=copies.counts.get(name, 0))
        self.watch()

    def refresh_quietly(self) -> None:
        """:meth:`refresh` out of its loop (after a reload): a failure is logged, as the loop logs it."""
        try:
            self.refresh()
        except Exception as exc:
            log.error("copies.refresh_failed", error=repr(exc))

    def watch(self) -> None:
        """Log each member whose reads switch to copies, or back."""
        routes = self._holder.routes
        for member in routes.config.federation.federated:
            now = _serving_reason(member, routes.copies, self._health)
            before = self._serving.get(member.name)
            if now == before:
                continue
            if now is None:
                self._serving.pop(member.name, None)
                log.warning("copies.released", member=member.name, reason=before,
                            detail="its reads go to the metastore again")
            else:
                self._serving[member.name] = now
                log.warning("copies.serving", member=member.name, reason=now,
                            copies=routes.copies.counts.get(member.name, 0),
                            detail="reads of its tables with copies are answered from them")


def _serving_reason(member: MetastoreConfig, copies: Copies, health: Health) -> str | None:
    if member.read_from_copies is CopyReads.NEVER or not copies.held_for(member.name):
        return None
    if not health.is_up(member.name):
        return "down"
    return "prefer" if member.read_from_copies is CopyReads.PREFER else None
