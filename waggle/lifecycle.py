"""Where a waggle process is in its life, and what readiness reads of it.

A process serves clients (a supervisor does not: its workers do). On SIGTERM it is *stopping*: readiness fails
at once, so load balancers move clients away, while connections are still served; then it is *draining*: each
connection ends after its call in flight. The server, a worker, the supervisor and the HTTP endpoint all read
and move these flags here, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class MemberHealth(Protocol):
    """What readiness reads of the metastores' health (:class:`waggle.upstream.health.Health`)."""

    def is_up(self, name: str) -> bool: ...

    def down_message(self, name: str) -> str: ...


class Lifecycle:
    __slots__ = ("_health", "_primary", "draining", "serving", "stopping")

    def __init__(self, health: MemberHealth, primary: Callable[[], str]) -> None:
        """``primary``: the name of the running configuration's primary metastore (a reload may change it)."""
        self._health = health
        self._primary = primary
        #: this process serves clients (False in a supervisor, whose workers do: it lists no databases)
        self.serving = True
        #: SIGTERM arrived: readiness fails (connections are still served until ``draining``)
        self.stopping = False
        #: connections end after their call in flight
        self.draining = False

    def stop(self) -> bool:
        """Begin stopping: readiness fails from now on. False when stopping had already begun (a second
        SIGTERM: the first one's schedule stands)."""
        if self.stopping:
            return False
        self.stopping = True
        return True

    def drain(self) -> None:
        """Connections end after their call in flight."""
        self.draining = True

    def ready(self) -> tuple[bool, str]:
        """Readiness: a configuration is loaded, waggle is not stopping, and the primary answers."""
        if self.stopping:
            return False, "stopping"
        primary = self._primary()
        if not self._health.is_up(primary):
            return False, self._health.down_message(primary)
        return True, "ok"
