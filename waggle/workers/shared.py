"""A worker's side of what its supervisor runs once for the pod: SSH tunnels and health checks.

The supervisor runs one tunnel helper per tunnelled metastore and one health check loop per metastore, as a
single waggle process does. Its workers do not: their tunnels follow the supervisor's helper (they connect to
the port it forwards, and learn its state from the helper's own events, passed on by the supervisor), and their
health follows the supervisor's checks (a failed call asks the supervisor to check at once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from waggle.config.model import MetastoreConfig, ServerConfig
from waggle.upstream.client import Connector, connect
from waggle.upstream.deadlines import Deadlines
from waggle.upstream.health import Health, MemberStatus
from waggle.upstream.tunnel import Tunnel

#: a logger that writes nothing: what a followed tunnel reports is the supervisor's to log
_SILENT = structlog.wrap_logger(structlog.ReturnLogger())


class FollowedTunnel(Tunnel):
    """A tunnel whose helper the supervisor runs: :meth:`follow` gets the helper's events."""

    def __init__(self, member: MetastoreConfig) -> None:
        super().__init__(member)
        self.log = _SILENT

    def start(self) -> None:
        self._helper_running = True  # calls wait up to TUNNEL_STARTUP_WAIT for the supervisor's news

    def follow(self, event: dict[str, Any]) -> None:
        self._on_event(event)

    def close(self) -> None:
        self._closing = True

    def _gauge(self) -> None:
        pass  # the supervisor's tunnel owns the gauge


class FollowedHealth(Health):
    """Health as the supervisor's checks find it. A call of this worker that finds a member gone marks it down
    here at once and tells the supervisor, which tells every worker."""

    follows = True

    def __init__(self, members: tuple[MetastoreConfig, ...], server: ServerConfig, deadlines: Deadlines,
                 tunnels: dict[str, Tunnel] | None = None, connector: Connector = connect) -> None:
        #: asks the supervisor to check a member now, and tells it of a member a call found down (set by the
        #: worker)
        self.ask: Callable[[str], None] = lambda name: None
        self.tell_down: Callable[[str, str], None] = lambda name, reason: None
        super().__init__(members, server, deadlines, tunnels, connector)

    def start(self) -> None:
        pass  # no checks of its own

    def check_soon(self, name: str) -> None:
        self.ask(name)

    def _recheck(self, name: str, reason: str) -> None:
        self.tell_down(name, reason)  # the supervisor marks it down too, logs it, tells every worker, checks it

    def follow(self, name: str, up: bool, since: float, reason: str) -> None:
        st = self.status.get(name)
        if st is not None:
            self._set(st, up, reason, quiet=True)
            st.since = since


def status_of(st: MemberStatus) -> tuple[bool, float, str]:
    return st.up, st.since, st.reason
