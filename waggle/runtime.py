"""What every client connection shares: the live routes (:class:`~waggle.routes.Routes`), health and limits.

A configuration is immutable. The call path reads :attr:`Runtime.routes` once per call and uses that snapshot
to the end, so replacing it (a reload, or in MANUAL mode a new database map) is one reference swap: a call in
flight finishes on the configuration it started with, and the next call uses the new one.

A reload keeps the upstream pool of every member whose connection settings did not change
(:meth:`~waggle.config.model.MetastoreConfig.upstream_key`) and its SSH tunnel while the tunnel's own settings
did not change; those of removed or changed members are closed once the calls still using them finish.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import gevent
import gevent.lock

from waggle.common import metrics
from waggle.common.limiter import Limiter
from waggle.common.logging import get_logger
from waggle.config.model import DatabaseResolution, MetastoreConfig, ServerConfig, WaggleConfig
from waggle.lifecycle import Lifecycle
from waggle.loops import Loop, Loops
from waggle.remotes.connectors import ConnectorService
from waggle.remotes.registry import LinkRegistry
from waggle.remotes.service import LinksService
from waggle.routes import PlannerBuilder, Routes
from waggle.routing.federation import Planner
from waggle.security.token_service import TokenService
from waggle.server.guard import Guard
from waggle.upstream.client import Connector, connect
from waggle.upstream.deadlines import Deadlines
from waggle.upstream.health import Health
from waggle.upstream.pool import UpstreamPool
from waggle.upstream.token_store import MetastoreTokenStore
from waggle.upstream.tunnel import Tunnel

log = get_logger("waggle.federation")

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


def _restart_only(old: ServerConfig, new: ServerConfig) -> ServerConfig:
    """``new`` with the running values of the keys that need a restart."""
    return replace(new, **{attr: getattr(old, attr) for attr in RESTART_KEYS})


TunnelFactory = Callable[[MetastoreConfig], Tunnel]


class Runtime:
    def __init__(self, config: WaggleConfig, connector: Connector = connect, tunnel: TunnelFactory = Tunnel,
                 health: type[Health] = Health, token_key: bytes | None = None) -> None:
        """``tunnel`` and ``health`` make the SSH tunnels and the health checks: a worker's follow its
        supervisor's (waggle.workers.shared); ``token_key``: the random key of waggle's delegation tokens when
        no signing-key file is set (one for all of a supervisor's workers)."""
        self.deadlines = Deadlines()
        self._tunnel = tunnel
        #: waggle's records in the primary's key-value (token) store: data connectors, token renewals
        self.records = MetastoreTokenStore(lambda: self.routes.primary)
        #: waggle's login, tokens, front door and security watch
        self.guard = Guard(config, self.records, token_key)
        self.credentials = self.guard.credentials
        if connector is connect:
            connector = functools.partial(connect, credentials=self.credentials)
        #: how upstream connections are opened (an in-memory metastore in the dispatch tests)
        self.connector = connector
        #: one SSH tunnel per tunnelled metastore, shared by its pool and its health checks
        self.tunnels = {m.name: tunnel(m) for m in config.federation.members if m.tunnel is not None}
        pools = {m.name: self._pool(m, config.server, self.tunnels) for m in config.federation.members}
        self.health = health(config.federation.members, config.server, self.deadlines, self.tunnels, connector)
        #: serving, stopping, draining; readiness
        self.lifecycle = Lifecycle(self.health, lambda: self.config.federation.primary.name)
        #: Databases created through waggle under *_CREATE_ON_DATABASE_WHITELIST, per member (memory only).
        self.created: dict[str, set[str]] = {}
        #: one reload, or one MANUAL refresh, at a time
        self._reloading = gevent.lock.Semaphore()
        #: remote databases: which primary databases are links, and Hive 4 data connectors
        self.links = LinkRegistry()
        #: the planners of routes snapshots (and, in MANUAL mode, the members' listings they map)
        self.builder = PlannerBuilder(self.links)
        self.connectors = ConnectorService(self.links, self.records, lambda: self.config)
        self.routes = Routes.build(config, pools, self.builder.planner(config), 1, self.links)
        #: links and data connectors at run time: learned, reread, served (each change a new routes snapshot)
        self.remotes = LinksService(self.links, self.records, self.builder, self,
                                    lambda member: self._pool(member, self.config.server, {}))
        #: the background loops: MANUAL database listings, remote databases' links and data connectors
        self.loops = Loops([
            Loop("federation.refresh_failed", self._refresh_manual, lambda: self.config.server.database_refresh_seconds,
                 wait_first=True),
            Loop("links.refresh_failed", self.remotes.refresh, self.remotes.refresh_seconds),
        ])
        #: client calls being answered (bounded by limits.max-in-flight-calls)
        self.call_slots = Limiter(config.server.load.max_in_flight_calls)
        # read when scraped: an increment and a decrement per call (gevent-locked) measured 0.8 to 1.1 us
        metrics.CALLS_IN_FLIGHT.set_function(lambda: self.call_slots.busy)

    def _pool(self, member: MetastoreConfig, server: ServerConfig, tunnels: Mapping[str, Tunnel]) -> UpstreamPool:
        return UpstreamPool(member, server.upstream_limits, self.deadlines, tunnels.get(member.name),
                            server.load.max_calls_per_metastore, server.load.queue_wait_seconds, self.connector,
                            self.credentials)

    @property
    def tokens(self) -> TokenService | None:
        """waggle's delegation tokens (the guard's), as the handlers of token calls read them."""
        return self.guard.tokens

    @property
    def config(self) -> WaggleConfig:
        return self.routes.config

    @property
    def planner(self) -> Planner:
        return self.routes.planner

    @property
    def manual(self) -> bool:
        return self.config.server.database_resolution is DatabaseResolution.MANUAL

    @property
    def log_calls(self) -> bool:
        """One debug line per successful call is built only when it will be written."""
        return self.config.server.log_level == "debug"

    # -- MANUAL: which member owns each database ------------------------------------------------------------
    def refresh_databases(self) -> None:
        """List every member's databases (in parallel, bounded) and swap in a new map."""
        with self._reloading:  # never a listing of a pool that a reload is replacing
            self.builder.list_members(self.routes.config, self.routes.pools, self.health)
            self.routes = replace(self.routes, planner=self.builder.planner(self.routes.config))

    # -- reload -----------------------------------------------------------------------------------------------
    def reload(self, config: WaggleConfig) -> ReloadPlan:
        """Swap in a new, already validated configuration (one reload at a time).

        Everything new (tunnels, pools, a MANUAL member's listing) is built first; the swap itself has no
        yield, so a call sees either the old routes or the new ones. If building fails, what was built is
        closed and nothing changes.
        """
        with self._reloading:
            old = self.routes
            plan = plan_reload(old.config, config)
            if plan.restart_required:
                config = replace(config, server=_restart_only(old.config.server, config.server))
            server = config.server
            members = {m.name: m for m in config.federation.members}
            opened_tunnels = {n: self._tunnel(members[n]) for n in plan.open_tunnels}
            tunnels = {**{n: self.tunnels[n] for n in plan.keep_tunnels}, **opened_tunnels}
            opened_pools = {n: self._pool(members[n], server, tunnels) for n in plan.open_pools}
            try:
                for tunnel in opened_tunnels.values():
                    tunnel.start()
                for name in plan.close_pools:
                    self.builder.listings.pop(name, None)  # a changed member is listed again
                if server.database_resolution is DatabaseResolution.MANUAL and self.lifecycle.serving:
                    self.builder.list_members(config, {**old.pools, **opened_pools}, self.health,
                                              {n for n in members if n not in self.builder.listings})
                planner = self.builder.planner(config)
            except BaseException:
                for tunnel in opened_tunnels.values():
                    tunnel.close()
                for pool in opened_pools.values():
                    pool.close()
                raise
            # -- the swap: no yield from here on --
            pools: dict[str, UpstreamPool] = {}
            for name, member in members.items():
                pool = opened_pools.get(name) or old.pools[name]
                pool.configure(member, server.upstream_limits, server.load.max_calls_per_metastore,
                               server.load.queue_wait_seconds)
                pools[name] = pool
            retired_tunnels = [self.tunnels[n] for n in plan.close_tunnels]
            for tunnel in retired_tunnels:
                tunnel.retire()
            self.tunnels = tunnels
            for tunnel in opened_tunnels.values():
                tunnel.publish()
            self.health.update(config.federation.members, server, self.tunnels, reset=set(plan.open_pools))
            self.call_slots.limit = server.load.max_in_flight_calls
            self.guard.reload(config)
            self.routes = self.remotes.with_uri_pools(
                Routes.build(config, pools, planner, old.generation + 1, self.links))
            for name in plan.close_pools:
                if name not in members:
                    self.created.pop(name, None)
                    self.builder.listings.pop(name, None)
            retired = [old.pools[n] for n in plan.close_pools]
            if retired or retired_tunnels:
                gevent.spawn(self._retire, retired, retired_tunnels, server)
            return plan

    @staticmethod
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

    # -- lifecycle --------------------------------------------------------------------------------------------
    def start(self, serving: bool = True) -> None:
        """Background work: tunnels, health checks, and in MANUAL mode the first database map (before serving).
        Without ``serving`` (a supervisor, whose workers serve), only the tunnels, health checks and security
        watch."""
        self.lifecycle.serving = serving
        self.guard.start(self.config)
        for tunnel in self.tunnels.values():
            tunnel.start()
        self.health.start()
        if not serving:
            return
        if self.manual:
            self.refresh_databases()
        self.loops.start()

    def _refresh_manual(self) -> None:
        if self.manual:  # a reload may switch the mode either way
            self.refresh_databases()

    def close(self) -> None:
        self.loops.close()
        self.health.close()
        self.guard.close()
        for pool in self.routes.pools.values():
            pool.close()
        for tunnel in self.tunnels.values():
            tunnel.close()
        self.deadlines.close()
