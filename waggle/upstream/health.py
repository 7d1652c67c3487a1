"""Whether each metastore is up, checked in the background, off the call path.

A member is checked every ``status-polling-delay`` while it is up, at once when a call to it fails, and every
``down-member-retry`` seconds while it is down. A check opens a fresh connection and asks the metastore's
fb303 ``getStatus``; it is bounded by the fan-out timeout plus the member's ``latency``. While a member is
down, calls that need it are answered at once with a ``MetaException`` naming it, and listings leave it out;
it comes back by itself when a check succeeds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent
import gevent.event

from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.model import MetastoreConfig, ServerConfig
from waggle.hms.gen.fb303 import FacebookService
from waggle.upstream.client import Connector, UpstreamError, connect
from waggle.upstream.deadlines import Deadlines
from waggle.upstream.pool import Overloaded
from waggle.upstream.tunnel import Tunnel

log = get_logger("waggle.health")


@dataclass(slots=True)
class MemberStatus:
    name: str
    up: bool = True
    since: float = 0.0  # time.time() of the last change
    reason: str = ""  # why it is down
    checks: int = 0
    failed_checks: int = 0
    transitions: int = 0


class Health:
    def __init__(self, members: tuple[MetastoreConfig, ...], server: ServerConfig, deadlines: Deadlines,
                 tunnels: dict[str, Tunnel] | None = None, connector: Connector = connect) -> None:
        self.connector = connector
        #: a tunnelled member is checked through its tunnel, which rebuilds a broken tunnel
        self.tunnels = tunnels or {}
        self.members: dict[str, MetastoreConfig] = {}
        self.status: dict[str, MemberStatus] = {}
        self.deadlines = deadlines
        self._wake: dict[str, gevent.event.Event] = {}
        self._loops: dict[str, gevent.Greenlet] = {}
        self._started = False
        #: called with a member's status whenever it changes (a supervisor tells its workers)
        self.listeners: list[Callable[[MemberStatus], None]] = []
        self.update(members, server, self.tunnels)

    def update(self, members: tuple[MetastoreConfig, ...], server: ServerConfig, tunnels: dict[str, Tunnel],
               reset: set[str] | None = None) -> None:
        """Follow a new configuration: new members (and those in ``reset``) start over, removed ones stop."""
        now = time.time()
        self.server, self.limits, self.tunnels = server, server.upstream_limits, tunnels
        wanted = {m.name: m for m in members}
        for name in [n for n in self.members if n not in wanted or n in (reset or ())]:
            loop = self._loops.pop(name, None)
            if loop is not None:
                loop.kill(block=False)
            del self.members[name], self.status[name], self._wake[name]
            if name not in wanted:
                metrics.forget(name)
        for name, member in wanted.items():
            if name in self.members:
                self.members[name] = member
                continue
            self.members[name] = member
            self.status[name] = MemberStatus(name, since=now)
            self._wake[name] = gevent.event.Event()
            metrics.METASTORE_UP.labels(name).set(1)
            if self._started:
                self._wake[name].set()  # a new member is checked at once
                self._loops[name] = gevent.spawn(self._loop, name)

    # -- the call path asks and reports; it never waits for a check -------------------------------------------
    def is_up(self, name: str) -> bool:
        st = self.status.get(name)
        return st is None or st.up  # a member just removed: calls that started before finish as they can

    def down_message(self, name: str) -> str:
        st = self.status.get(name)
        if st is None:
            return f"metastore '{name}' is no longer in the federation"
        return (f"metastore '{name}' is unavailable since {time.strftime('%H:%M:%S', time.localtime(st.since))}: "
                f"{st.reason}")

    def call_failed(self, name: str, error: UpstreamError) -> None:
        """A call to ``name`` failed: check it now (in the background). A shed call says nothing about it."""
        if not isinstance(error, Overloaded):
            self.check_soon(name)

    def check_soon(self, name: str) -> None:
        """Check ``name`` now, in the background."""
        wake = self._wake.get(name)
        if wake is not None:
            wake.set()

    # -- checks -----------------------------------------------------------------------------------------------
    def check(self, name: str) -> bool:
        member = self.members[name]
        timeout = (self.server.fan_out_timeout_ms + member.latency_ms) / 1000.0
        st = self.status[name]
        st.checks += 1
        try:
            conn = self.connector(member, self.limits, self.deadlines, tunnel=self.tunnels.get(name))
            try:
                conn.invoke("getStatus", FacebookService.getStatus_args(), FacebookService.getStatus_result,
                            timeout=timeout)
            finally:
                conn.close()
        except UpstreamError as exc:
            st.failed_checks += 1
            self._set(st, False, exc.detail)
            return False
        self._set(st, True, "")
        return True

    def _set(self, st: MemberStatus, up: bool, reason: str) -> None:
        if self.status.get(st.name) is not st:
            return  # removed (or started over) by a reload while it was being checked
        if st.up == up:
            if not up and st.reason != reason:
                st.reason = reason
                self._tell(st)
            return
        st.up, st.reason, st.since = up, reason, time.time()
        self._tell(st)
        st.transitions += 1
        metrics.METASTORE_UP.labels(st.name).set(1 if up else 0)
        if up:
            log.warning("metastore.up", member=st.name)
        else:
            log.warning("metastore.down", member=st.name, reason=reason)

    def _tell(self, st: MemberStatus) -> None:
        for listener in self.listeners:
            listener(st)

    def _loop(self, name: str) -> None:
        wake = self._wake[name]
        while name in self.status:
            up = self.status[name].up
            delay = self.server.status_polling_delay_seconds if up else self.server.down_retry_seconds
            wake.wait(delay)
            wake.clear()
            try:
                self.check(name)
            except Exception as exc:  # a check must never kill its loop
                log.error("health.check_failed", member=name, error=repr(exc))

    def start(self) -> None:
        self._started = True
        self._loops = {name: gevent.spawn(self._loop, name) for name in self.members}

    def close(self) -> None:
        self._started = False
        for loop in self._loops.values():
            loop.kill(block=False)
        self._loops = {}
