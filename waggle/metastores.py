"""The metastores' side of a running process: how connections to them are opened, their SSH tunnels, the
making of their pools, their health checks, and what a reload does to all of these.

A reload keeps the upstream pool of every member whose connection settings did not change
(:meth:`~waggle.config.model.MetastoreConfig.upstream_key`) and its SSH tunnel while the tunnel's own settings
did not change; those of removed or changed members are closed once the calls still using them finish.
:func:`plan_reload` decides which, from the two configurations alone. The pools themselves are served in the
routes snapshot (:attr:`waggle.routes.snapshot.Routes.pools`); this side makes them and retires them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import gevent

from waggle.config.model import MetastoreConfig, ServerConfig, WaggleConfig
from waggle.upstream.client import Connector, connect
from waggle.upstream.deadlines import Deadlines
from waggle.upstream.handshake import UpstreamCredentials
from waggle.upstream.health import Health
from waggle.upstream.pool import UpstreamPool
from waggle.upstream.tunnel import Tunnel

#: Server keys whose new value needs a restart: a reload keeps the running value and says so.
RESTART_KEYS = {
    "port": "port", "bind_address": "bind-address", "endpoint_port": "endpoint.port", "wire": "transport/protocol",
    "limits": "limits.max-message-bytes/max-string-bytes/max-container-items", "max_connections": "max-connections",
    "workers": "workers",
    "hot_reload": "hot-reload", "log_level": "logging.level", "log_format": "logging.format",
    "security": "Kerberos and TLS (hive.metastore.sasl.enabled, its principal and keytab, tls.*, delegation-tokens.*)",
}


@dataclass(frozen=True, slots=True)
class ReloadPlan:
    """What a reload does to the upstream side, by member name (pure: see :func:`plan_reload`)."""

    keep_pools: tuple[str, ...]
    open_pools: tuple[str, ...]
    close_pools: tuple[str, ...]
    keep_tunnels: tuple[str, ...]
    open_tunnels: tuple[str, ...]
    close_tunnels: tuple[str, ...]
    #: server keys that changed but only apply at a restart
    restart_required: tuple[str, ...]

    def describe(self) -> dict[str, list[str]]:
        return {k: list(getattr(self, k)) for k in self.__slots__ if getattr(self, k)}  # type: ignore[attr-defined]


def plan_reload(old: WaggleConfig, new: WaggleConfig) -> ReloadPlan:
    """Which pools and tunnels a move from ``old`` to ``new`` keeps, opens and closes."""
    before = {m.name: m for m in old.federation.members}
    after = {m.name: m for m in new.federation.members}
    keep = tuple(n for n, m in after.items() if n in before and before[n].upstream_key() == m.upstream_key())
    opened = tuple(n for n in after if n not in keep)
    closed = tuple(n for n in before if n not in keep)
    old_t = {n: m.tunnel_key() for n, m in before.items() if m.tunnel is not None}
    new_t = {n: m.tunnel_key() for n, m in after.items() if m.tunnel is not None}
    keep_t = tuple(n for n, key in new_t.items() if old_t.get(n) == key)
    restart = tuple(key for attr, key in RESTART_KEYS.items()
                    if getattr(old.server, attr) != getattr(new.server, attr))
    return ReloadPlan(keep, opened, closed, keep_t, tuple(n for n in new_t if n not in keep_t),
                      tuple(n for n in old_t if n not in keep_t), restart)


def restart_only(old: ServerConfig, new: ServerConfig) -> ServerConfig:
    """``new`` with the running values of the keys that need a restart."""
    return replace(new, **{attr: getattr(old, attr) for attr in RESTART_KEYS})


TunnelFactory = Callable[[MetastoreConfig], Tunnel]


@dataclass(slots=True)
class Staged:
    """What a reload built before its swap (:meth:`Metastores.stage`): nothing serves it yet."""

    config: WaggleConfig
    plan: ReloadPlan
    #: the tunnels after the swap (kept and opened), and those opened
    tunnels: dict[str, Tunnel]
    opened_tunnels: dict[str, Tunnel]
    #: the pools opened (the kept ones are the running routes')
    opened_pools: dict[str, UpstreamPool]

    def start(self) -> None:
        for tunnel in self.opened_tunnels.values():
            tunnel.start()

    def abandon(self) -> None:
        """The reload failed before its swap: close what it opened."""
        for tunnel in self.opened_tunnels.values():
            tunnel.close()
        for pool in self.opened_pools.values():
            pool.close()


class Metastores:
    def __init__(self, config: WaggleConfig, credentials: UpstreamCredentials, connector: Connector = connect,
                 tunnel: TunnelFactory = Tunnel, health: type[Health] = Health) -> None:
        """``tunnel`` and ``health`` make the SSH tunnels and the health checks: a worker's follow its
        supervisor's (waggle.workers.shared)."""
        self.deadlines = Deadlines()
        self._tunnel = tunnel
        self.credentials = credentials
        if connector is connect:
            connector = functools.partial(connect, credentials=credentials)
        #: how upstream connections are opened (an in-memory metastore in the dispatch tests)
        self.connector = connector
        #: one SSH tunnel per tunnelled metastore, shared by its pool and its health checks
        self.tunnels = {m.name: tunnel(m) for m in config.federation.members if m.tunnel is not None}
        self.health = health(config.federation.members, config.server, self.deadlines, self.tunnels, connector)

    def pool(self, member: MetastoreConfig, server: ServerConfig, tunnels: Mapping[str, Tunnel] | None = None
             ) -> UpstreamPool:
        """A pool for ``member``, through its tunnel in ``tunnels`` (the running ones by default)."""
        tunnel = (self.tunnels if tunnels is None else tunnels).get(member.name)
        return UpstreamPool(member, server.upstream_limits, self.deadlines, tunnel,
                            server.load.max_calls_per_metastore, server.load.queue_wait_seconds, self.connector,
                            self.credentials)

    def pools(self, config: WaggleConfig) -> dict[str, UpstreamPool]:
        """A pool for every member of ``config``."""
        return {m.name: self.pool(m, config.server) for m in config.federation.members}

    def start(self) -> None:
        for tunnel in self.tunnels.values():
            tunnel.start()
        self.health.start()

    def close(self, pools: Mapping[str, UpstreamPool]) -> None:
        self.health.close()
        for pool in pools.values():
            pool.close()
        for tunnel in self.tunnels.values():
            tunnel.close()
        self.deadlines.close()

    # -- reload ---------------------------------------------------------------------------------------------------
    def stage(self, config: WaggleConfig, plan: ReloadPlan) -> Staged:
        """Make the tunnels and pools that ``plan`` opens (not started, not served)."""
        members = {m.name: m for m in config.federation.members}
        opened_tunnels = {n: self._tunnel(members[n]) for n in plan.open_tunnels}
        tunnels = {**{n: self.tunnels[n] for n in plan.keep_tunnels}, **opened_tunnels}
        opened_pools = {n: self.pool(members[n], config.server, tunnels) for n in plan.open_pools}
        return Staged(config, plan, tunnels, opened_tunnels, opened_pools)

    def swap(self, staged: Staged, running: Mapping[str, UpstreamPool]) -> dict[str, UpstreamPool]:
        """Serve what ``staged`` built: the pools to serve (``running``'s kept, reconfigured, and the opened ones),
        the tunnels and health checks of the new configuration. Retired pools and tunnels close once the calls
        still using them finish. No yield."""
        config, plan = staged.config, staged.plan
        server = config.server
        pools: dict[str, UpstreamPool] = {}
        for member in config.federation.members:
            pool = staged.opened_pools.get(member.name) or running[member.name]
            pool.configure(member, server.upstream_limits, server.load.max_calls_per_metastore,
                           server.load.queue_wait_seconds)
            pools[member.name] = pool
        retired_tunnels = [self.tunnels[n] for n in plan.close_tunnels]
        for tunnel in retired_tunnels:
            tunnel.retire()
        self.tunnels = staged.tunnels
        for tunnel in staged.opened_tunnels.values():
            tunnel.publish()
        self.health.update(config.federation.members, server, self.tunnels, reset=set(plan.open_pools))
        retired = [running[n] for n in plan.close_pools]
        if retired or retired_tunnels:
            gevent.spawn(_retire, retired, retired_tunnels, server)
        return pools


def _retire(pools: list[UpstreamPool], tunnels: list[Tunnel], server: ServerConfig) -> None:
    """Close replaced pools and tunnels once the calls still using them finish (or the grace runs out)."""
    for pool in pools:
        pool.close()  # idle connections now; borrowed ones as they come back
    # calls that took the old routes but have not borrowed a connection yet (queued for a slot, asking
    # for capabilities) get a moment before their tunnel goes
    gevent.sleep(server.load.queue_wait_seconds + 1.0)
    deadline = time.monotonic() + server.graceful_stop_seconds
    while any(pool.busy for pool in pools) and time.monotonic() < deadline:
        gevent.sleep(0.1)
    for tunnel in tunnels:
        tunnel.close()
