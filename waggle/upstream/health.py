"""Whether each metastore is up: one fact for every call, checked in the background and learned from the calls.

- **At start**, every metastore is checked at once, in parallel, before the port serves (:meth:`Health.start`
  waits for those first checks, each bounded by its connect timeout and ``health-check-timeout``): one that fails
  starts down, with one warning line.
- **While up**, a metastore is checked every ``status-polling-delay``, and at once when a call to it fails.
- **A call that finds it gone** (its connection refused, or not opened in time) marks it down at once
  (:meth:`Health.found_down`), for every call from then on; the call is planned again with it down.
- **A call that waits long on it** (``hung-member-check-after``) has it checked (:meth:`Health.suspect`, through
  the upstream deadlines' watchdog). A failed check marks it down.
- **While down**, it is checked every ``down-member-retry`` seconds, and comes back by itself when a check
  succeeds. Calls that need it are answered at once (from copies, or with a ``MetaException`` naming it), and
  listings leave it out.

Whenever a metastore goes down, every call still waiting on it is let go (:meth:`Deadlines.release`).

A check opens a fresh connection and asks the metastore's fb303 ``getStatus``, bounded by the member's connect
timeout and then by ``health-check-timeout``, each plus its ``latency``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import gevent
import gevent.event

from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.model import MetastoreConfig, ServerConfig
from waggle.hms.gen.fb303 import FacebookService
from waggle.upstream.client import Connector, Lost, UpstreamError, connect
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
    #: another process checks the members and logs what it finds (a worker's health follows its supervisor's)
    follows = False

    def __init__(self, members: tuple[MetastoreConfig, ...], server: ServerConfig, deadlines: Deadlines,
                 tunnels: dict[str, Tunnel] | None = None, connector: Connector = connect) -> None:
        self.connector = connector
        #: a tunnelled member is checked through its tunnel, which rebuilds a broken tunnel
        self.tunnels = tunnels or {}
        self.members: dict[str, MetastoreConfig] = {}
        self.status: dict[str, MemberStatus] = {}
        self.deadlines = deadlines
        deadlines.on_slow = self.suspect
        self._wake: dict[str, gevent.event.Event] = {}
        #: set once a member's first check is done (start waits for them)
        self._first: dict[str, gevent.event.Event] = {}
        #: members marked down by a call since their loop last looked: checked after down-member-retry
        self._found: set[str] = set()
        #: when each member was last suspected of hanging (monotonic)
        self._suspected: dict[str, float] = {}
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
        self.deadlines.suspect_after = server.hung_check_seconds
        wanted = {m.name: m for m in members}
        for name in [n for n in self.members if n not in wanted or n in (reset or ())]:
            loop = self._loops.pop(name, None)
            if loop is not None:
                loop.kill(block=False)
            del self.members[name], self.status[name], self._wake[name], self._first[name]
            self._found.discard(name)
            if name not in wanted:
                metrics.forget(name)
        for name, member in wanted.items():
            if name in self.members:
                self.members[name] = member
                continue
            self.members[name] = member
            self.status[name] = MemberStatus(name, since=now)
            self._wake[name] = gevent.event.Event()
            self._first[name] = gevent.event.Event()
            metrics.METASTORE_UP.labels(name).set(1)
            if self._started:
                self._loops[name] = gevent.spawn(self._loop, name)  # a new member is checked at once

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
        """A call to ``name`` failed. A connection it could not open says that the member is gone: it is down
        from now on (:meth:`found_down`). Any other failure has it checked now, in the background, unless it is
        down already (a call let go when it was found down); a shed call says nothing about it."""
        if error.lost is Lost.UNREACHABLE:
            self.found_down(name, error.detail)
        elif not isinstance(error, Overloaded) and self.is_up(name):
            self.check_soon(name)

    def found_down(self, name: str, reason: str) -> None:
        """A call found ``name`` gone: it is down now, for every call; the checks (every down-member-retry)
        decide when it is back."""
        st = self.status.get(name)
        if st is None or not st.up:
            return
        self._set(st, False, reason, quiet=self.follows)
        self._recheck(name, reason)

    def _recheck(self, name: str, reason: str) -> None:
        """``name`` was found down by a call: its loop waits down-member-retry from now (not
        status-polling-delay), then checks it."""
        self._found.add(name)
        wake = self._wake.get(name)
        if wake is not None:
            wake.set()

    def suspect(self, name: str) -> None:
        """A call has waited ``hung-member-check-after`` on ``name``: check it now, unless it was checked for that
        within the last such interval (told by the deadlines' watchdog)."""
        now = time.monotonic()
        if now - self._suspected.get(name, -math.inf) < self.server.hung_check_seconds or not self.is_up(name):
            return
        self._suspected[name] = now
        self.check_soon(name)

    def check_soon(self, name: str) -> None:
        """Check ``name`` now, in the background."""
        wake = self._wake.get(name)
        if wake is not None:
            wake.set()

    # -- checks -----------------------------------------------------------------------------------------------
    def check(self, name: str) -> bool:
        member = self.members[name]
        timeout = (self.server.health_check_timeout_ms + member.latency_ms) / 1000.0
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

    def _set(self, st: MemberStatus, up: bool, reason: str, quiet: bool = False) -> None:
        """A member's state, as a check, a call or the supervisor found it. ``quiet``: another process logs it."""
        if self.status.get(st.name) is not st:
            return  # removed (or started over) by a reload while it was being checked
        if st.up == up:
            if not up and st.reason != reason:
                st.reason = reason
                self._tell(st)
            return
        st.up, st.reason, st.since = up, reason, time.time()
        st.transitions += 1
        metrics.METASTORE_UP.labels(st.name).set(1 if up else 0)
        if not up:
            released = self.deadlines.release(st.name, reason)
            if released:
                metrics.RELEASED_CALLS.labels(st.name).inc(released)
            if not quiet:
                log.warning("metastore.down", member=st.name, reason=reason, released_calls=released)
        elif not quiet:
            log.warning("metastore.up", member=st.name)
        self._tell(st)

    def _tell(self, st: MemberStatus) -> None:
        for listener in self.listeners:
            listener(st)

    def _loop(self, name: str) -> None:
        wake = self._wake[name]
        self._check_quietly(name)  # the first check, at once
        self._first[name].set()
        while name in self.status:
            up = self.status[name].up
            delay = self.server.status_polling_delay_seconds if up else self.server.down_retry_seconds
            wake.wait(delay)
            wake.clear()
            if name in self._found:  # a call found it down meanwhile: checked after down-member-retry
                self._found.discard(name)
                continue
            self._check_quietly(name)

    def _check_quietly(self, name: str) -> None:
        try:
            self.check(name)
        except Exception as exc:  # a check must never kill its loop
            log.error("health.check_failed", member=name, error=repr(exc))

    def first_checks_bound(self) -> float:
        """Seconds the first checks of every member may take together (they run in parallel)."""
        return max((m.connect_timeout_ms + 2 * m.latency_ms + self.server.health_check_timeout_ms) / 1000.0
                   for m in self.members.values()) + 1.0

    def start(self) -> None:
        """Check every member now, in parallel, and return once each first check is done (or the bound of the
        slowest passed: a tunnel still starting, say); then keep checking each in the background."""
        self._started = True
        self._loops = {name: gevent.spawn(self._loop, name) for name in self.members}
        deadline = time.monotonic() + self.first_checks_bound()
        for first in list(self._first.values()):
            first.wait(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        self._started = False
        for loop in self._loops.values():
            loop.kill(block=False)
        self._loops = {}
