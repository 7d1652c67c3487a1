"""Whether each metastore is up, checked in the background, off the call path.

A member is checked every ``status-polling-delay`` while it is up, at once when a call to it fails, and every
``down-member-retry`` seconds while it is down. A check opens a fresh connection and asks the metastore's
fb303 ``getStatus``; it is bounded by the fan-out timeout plus the member's ``latency``. While a member is
down, calls that need it are answered at once with a ``MetaException`` naming it, and listings leave it out;
it comes back by itself when a check succeeds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import gevent
import gevent.event

from waggle.config.model import Limits, MetastoreConfig, ServerConfig
from waggle.hms.gen.fb303 import FacebookService
from waggle.ops import metrics
from waggle.ops.logging import get_logger
from waggle.upstream.client import UpstreamError, connect
from waggle.upstream.deadlines import Deadlines
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
    def __init__(self, members: tuple[MetastoreConfig, ...], server: ServerConfig, limits: Limits,
                 deadlines: Deadlines, tunnels: dict[str, Tunnel] | None = None) -> None:
        now = time.time()
        #: a tunnelled member is checked through its tunnel, which rebuilds a broken tunnel
        self.tunnels = tunnels or {}
        self.members = {m.name: m for m in members}
        self.status = {m.name: MemberStatus(m.name, since=now) for m in members}
        for m in members:
            metrics.METASTORE_UP.labels(m.name).set(1)
        self.server = server
        self.limits = limits
        self.deadlines = deadlines
        self._wake = {m.name: gevent.event.Event() for m in members}
        self._loops: list[gevent.Greenlet] = []

    # -- the call path asks and reports; it never waits for a check -------------------------------------------
    def is_up(self, name: str) -> bool:
        return self.status[name].up

    def down_message(self, name: str) -> str:
        st = self.status[name]
        return (f"metastore '{name}' is unavailable since {time.strftime('%H:%M:%S', time.localtime(st.since))}: "
                f"{st.reason}")

    def call_failed(self, name: str, error: UpstreamError) -> None:
        """A call to ``name`` failed: check it now (in the background)."""
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
            conn = connect(member, self.limits, self.deadlines, tunnel=self.tunnels.get(name))
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
        if st.up == up:
            if not up:
                st.reason = reason
            return
        st.up, st.reason, st.since = up, reason, time.time()
        st.transitions += 1
        metrics.METASTORE_UP.labels(st.name).set(1 if up else 0)
        if up:
            log.warning("metastore.up", member=st.name)
        else:
            log.warning("metastore.down", member=st.name, reason=reason)

    def _loop(self, name: str) -> None:
        wake = self._wake[name]
        while True:
            up = self.status[name].up
            delay = self.server.status_polling_delay_seconds if up else self.server.down_retry_seconds
            wake.wait(delay)
            wake.clear()
            try:
                self.check(name)
            except Exception as exc:  # a check must never kill its loop
                log.error("health.check_failed", member=name, error=repr(exc))

    def start(self) -> None:
        self._loops = [gevent.spawn(self._loop, name) for name in self.members]

    def close(self) -> None:
        for loop in self._loops:
            loop.kill(block=False)
        self._loops = []
