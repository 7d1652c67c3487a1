"""What every client connection shares, assembled from the collaborators that each do one job:

- the live routes (:class:`~waggle.routes.snapshot.Routes`) and the builder of their planners
  (:mod:`waggle.routes.planners`);
- the metastores' side: tunnels, pools, health checks (:mod:`waggle.metastores`);
- waggle's own security: login, tokens, front door (:mod:`waggle.server.guard`);
- remote databases: the links service (:mod:`waggle.routes.links`) and data connectors;
- copies of members' tables: the copies service (:mod:`waggle.routes.copies`);
- the replies remembered for members with ``cache`` on, and the readers of their logs (:mod:`waggle.cache`);
- the federation's merged notification log, and its merger (:mod:`waggle.events`);
- serving, stopping, draining and readiness (:mod:`waggle.lifecycle`);
- the background loops (:mod:`waggle.loops`).

The server sees the runtime only as a :class:`waggle.server.context.ServerContext` (the attributes below it reads).
A configuration is immutable. The call path reads :attr:`Runtime.routes` once per call and uses that snapshot
to the end, so replacing it (a reload, or in MANUAL mode a new database map) is one reference swap: a call in
flight finishes on the configuration it started with, and the next call uses the new one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import gevent
import gevent.lock

from waggle.cache.events import Drop
from waggle.cache.reader import LogReaders, log_readable
from waggle.cache.replies import Replies
from waggle.common import metrics
from waggle.common.limiter import Limiter
from waggle.config.grants_model import Authorization
from waggle.config.model import CacheMode, DatabaseResolution, MetastoreConfig, NotificationLog, WaggleConfig
from waggle.events.merger import Merger
from waggle.events.served import MergedLog
from waggle.events.shown import Shown
from waggle.events.store import JournalStore
from waggle.grants.service import Grants
from waggle.hms.methods import MethodSpec
from waggle.lifecycle import Lifecycle
from waggle.loops import Loop, Loops
from waggle.metastores import Metastores, ReloadPlan, TunnelFactory, plan_reload, restart_only
from waggle.remotes.connectors import ConnectorService
from waggle.remotes.registry import LinkRegistry
from waggle.routes.copies import CopiesService
from waggle.routes.links import LinksService
from waggle.routes.planners import PlannerBuilder
from waggle.routes.snapshot import Routes
from waggle.server.guard import Guard
from waggle.server.limits import CallLimits
from waggle.upstream.client import Connector, UpstreamConnection, UpstreamError, connect
from waggle.upstream.deadlines import Deadlines
from waggle.upstream.health import Health, MemberStatus
from waggle.upstream.token_store import MetastoreTokenStore
from waggle.upstream.tunnel import Tunnel

#: who hears a write's drops besides this process (a worker's supervisor, passing them to the other workers)
Written = Callable[[str, tuple[Drop, ...]], None]


class CacheLogError(Exception):
    """A member with ``cache: events`` whose notification log cannot be read: it cannot be served so."""


class Runtime:
    def __init__(self, config: WaggleConfig, connector: Connector = connect, tunnel: TunnelFactory = Tunnel,
                 health: type[Health] = Health, token_key: bytes | None = None, read_logs: bool = True) -> None:
        """``tunnel`` and ``health`` make the SSH tunnels and the health checks: a worker's follow its
        supervisor's (waggle.workers.shared); ``token_key``: the random key of waggle's delegation tokens when
        no signing-key file is set (one for all of a supervisor's workers); ``read_logs``: whether this process
        reads the notification logs of ``cache: events`` members (a worker hears its supervisor's reads)."""
        #: waggle's records in the primary's key-value (token) store: data connectors, token renewals
        self.records = MetastoreTokenStore(lambda: self.routes.primary)
        #: waggle's login, tokens, front door and security watch
        self.guard = Guard(config, self.records, token_key)
        #: the metastores' side: connections, SSH tunnels, pools, health checks
        self.metastores = Metastores(config, self.guard.credentials, connector, tunnel, health)
        #: the metastores' health (the same object for the runtime's life: the call path reads it here)
        self.health = self.metastores.health
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
        self.routes = Routes.build(config, pools=self.metastores.pools(config),
                                   planner=self.builder.planner(config), generation=1, registry=self.links)
        #: links and data connectors at run time: learned, reread, served (each change a new routes snapshot)
        self.remotes = LinksService(self.links, self.records, self.builder, self,
                                    lambda member: self.metastores.pool(member, self.config.server, {}))
        #: copies of members' tables in the primary (read-from-copies): read, served, watched
        self.copies = CopiesService(self, self.health, time.time)
        #: the background loops: MANUAL database listings, remote databases' links and data connectors, copies
        self.loops = Loops([
            Loop("federation.refresh_failed", self._refresh_manual, lambda: self.config.server.database_refresh_seconds,
                 wait_first=True),
            Loop("links.refresh_failed", self.remotes.refresh, self.remotes.refresh_seconds),
            Loop("copies.refresh_failed", self.copies.refresh, self.copies.refresh_seconds, wait_first=True),
            Loop("copies.watch_failed", self.copies.watch, lambda: 1.0, wait_first=True),
        ])
        #: the replies remembered for members with cache on, and the readers of their logs (one per replica)
        self.replies = Replies(config.server.cache_max_bytes)
        self.replies.configure(config.federation.members, config.server.cache_max_bytes)
        metrics.watch_cache(self.replies.rows)
        self.read_logs = read_logs
        #: the log readers' own deadlines: a read waiting on a hung member neither has it checked nor counts
        #: among the calls let go when it is found down (those are the clients')
        self._log_deadlines = Deadlines()
        self.log_readers = LogReaders(self._log_connection, _log_timeout, [self.replies])
        #: the federation's merged notification log: served by every process, merged by one process of the
        #: federation (the holder of its lease) among those that read logs
        self.journal = JournalStore(lambda: self.routes.primary)
        self._shown: tuple[object, Shown] | None = None
        self.notification_log = MergedLog(self.journal, self.routes.pools.get, self._events_shown)
        self.merger = Merger(self.journal, self._merged_members, lambda m, e: self._events_shown().event(m, e),
                             self.notification_log.publish, self._retention)
        self._merging = False
        #: who else hears what a write through this process forgot
        self.written: list[Written] = []
        self.health.listeners.append(self._member_changed)
        #: the rate limits of limits.rates (this process's buckets)
        self.call_limits = CallLimits(config.server.rates)
        metrics.watch_limits(lambda: self.call_limits.levels(time.monotonic()))
        #: per-user and per-group grants (authorization): None when off
        self.grants = Grants(config.server.authorization) if config.server.authorization is not None else None
        #: client calls being answered (bounded by limits.max-in-flight-calls)
        self.call_slots = Limiter(config.server.load.max_in_flight_calls)
        # read when scraped: an increment and a decrement per call (gevent-locked) measured 0.8 to 1.1 us
        metrics.CALLS_IN_FLIGHT.set_function(lambda: self.call_slots.busy)

    @property
    def config(self) -> WaggleConfig:
        return self.routes.config

    @property
    def manual(self) -> bool:
        return self.config.server.database_resolution is DatabaseResolution.MANUAL

    @property
    def log_calls(self) -> bool:
        """One debug line per successful call is built only when it will be written."""
        return self.config.server.log_level == "debug"

    # -- the cache ------------------------------------------------------------------------------------------------
    def forget_written(self, member: str, spec: MethodSpec, args: Any) -> None:
        drops = self.replies.wrote(member, spec, args)
        if drops:
            for listener in self.written:
                listener(member, drops)

    def _member_changed(self, status: MemberStatus) -> None:
        """A member found down: what is remembered of it cannot be known true (it may come back changed)."""
        if not status.up:
            self.replies.unreadable(status.name, "down")

    def _log_connection(self, member: MetastoreConfig) -> UpstreamConnection:
        ms = self.metastores
        return ms.connector(member, self.config.server.upstream_limits, self._log_deadlines,
                            tunnel=ms.tunnels.get(member.name))

    def check_logs(self) -> None:
        """Every reachable ``cache: events`` member's log can be read; raises :class:`CacheLogError` naming each
        that cannot (one that is down is read once it is up)."""
        problems = []
        for member in self.config.federation.members:
            if member.cache is not CacheMode.EVENTS or not self.health.is_up(member.name):
                continue
            try:
                conn = self._log_connection(member)
            except UpstreamError:
                continue  # unreachable now: its reader keeps trying, and nothing is remembered meanwhile
            try:
                why = log_readable(conn, _log_timeout(member))
            finally:
                conn.close()
            if why is not None:
                problems.append(f"metastore '{member.name}' has cache: events, but {why}")
        if problems:
            raise CacheLogError("; ".join(problems))

    # -- the merged notification log -----------------------------------------------------------------------------
    def _events_shown(self) -> Shown:
        """The names clients see now (made again when the planner changes)."""
        routes = self.routes
        if self._shown is None or self._shown[0] is not routes.planner:
            self._shown = (routes.planner, Shown(routes.planner, {m.name: m for m in routes.config.federation.members}))
        return self._shown[1]

    def _retention(self) -> float:
        kept = self.config.server.notification_log_retention
        return float("inf") if kept is None else float(kept)

    def _merged_members(self) -> list[tuple[str, Any]]:
        routes = self.routes
        return [(m.name, routes.pools[m.name]) for m in routes.config.federation.members if m.name in routes.pools]

    def _merge(self) -> None:
        """Merge the members' logs while ``notification-log`` is federated (in a process that reads logs)."""
        wanted = self.read_logs and self.config.server.notification_log is NotificationLog.FEDERATED
        if wanted and not self._merging:
            self.merger.start()
        elif self._merging and not wanted:
            self.merger.stop()
        self._merging = wanted

    # -- MANUAL: which member owns each database ------------------------------------------------------------
    def refresh_databases(self) -> None:
        """List every member's databases (in parallel, bounded) and swap in a new map."""
        with self._reloading:  # never a listing of a pool that a reload is replacing
            self.builder.list_members(self.routes.config, self.routes.pools, self.health)
            self.routes = replace(self.routes, planner=self.builder.planner(self.routes.config))

    def _refresh_manual(self) -> None:
        if self.manual:  # a reload may switch the mode either way
            self.refresh_databases()

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
                config = replace(config, server=restart_only(old.config.server, config.server))
            server = config.server
            members = {m.name for m in config.federation.members}
            staged = self.metastores.stage(config, plan)
            try:
                staged.start()
                for name in plan.close_pools:
                    self.builder.listings.pop(name, None)  # a changed member is listed again
                if server.database_resolution is DatabaseResolution.MANUAL and self.lifecycle.serving:
                    self.builder.list_members(config, {**old.pools, **staged.opened_pools}, self.health,
                                              {n for n in members if n not in self.builder.listings})
                planner = self.builder.planner(config)
            except BaseException:
                staged.abandon()
                raise
            # -- the swap: no yield from here on --
            pools = self.metastores.swap(staged, old.pools)
            self.call_slots.limit = server.load.max_in_flight_calls
            self.call_limits.update(server.rates)
            self.guard.reload(config)
            self._reload_grants(server.authorization)
            self.routes = self.remotes.with_uri_pools(
                Routes.build(config, pools=pools, planner=planner, generation=old.generation + 1,
                             registry=self.links, copies=self.routes.copies))
            for name in plan.close_pools:
                if name not in members:
                    self.created.pop(name, None)
                    self.builder.listings.pop(name, None)
            self.replies.configure(config.federation.members, server.cache_max_bytes)
            if self.read_logs:
                self.log_readers.update(config.federation.members)
            self._merge()
            if self.lifecycle.serving and _copy_readers(old.config) != _copy_readers(config):
                gevent.spawn(self.copies.refresh_quietly)  # read-from-copies changed: the copies now, not later
            return plan

    def _reload_grants(self, config: Authorization | None) -> None:
        """New grants (or none) from a reloaded configuration, started before they are served."""
        if config is None:
            if self.grants is not None:
                self.grants.stop()
            self.grants = None
        elif self.grants is None:
            self.grants = Grants(config).start() if self.lifecycle.serving else Grants(config)
        else:
            self.grants.reload(config)

    # -- start and stop -----------------------------------------------------------------------------------------
    def start(self, serving: bool = True) -> None:
        """Background work: tunnels, health checks, and in MANUAL mode the first database map (before serving).
        Without ``serving`` (a supervisor, whose workers serve), only the tunnels, health checks and security
        watch."""
        self.lifecycle.serving = serving
        self.guard.start(self.config)
        self.metastores.start()
        if self.read_logs:
            self.check_logs()
            self.log_readers.update(self.config.federation.members)
            self.log_readers.start()
        self._merge()
        if not serving:
            return
        if self.grants is not None:
            self.grants.start()
        if self.manual:
            self.refresh_databases()
        self.copies.refresh_quietly()  # before serving: a replica started while a member is down serves its copies
        self.loops.start()

    def close(self) -> None:
        if self._merging:
            self._merging = False
            self.merger.stop()
        self.log_readers.close()
        self._log_deadlines.close()
        self.loops.close()
        if self.grants is not None:
            self.grants.stop()
        self.guard.close()
        self.metastores.close(self.routes.pools)


def _log_timeout(member: MetastoreConfig) -> float:
    """How long a log read waits on its member: its read timeout, at most 10 s (two small calls)."""
    return (min(member.read_timeout_ms, 10_000) + member.latency_ms) / 1000.0


def _copy_readers(config: WaggleConfig) -> set[tuple[str, str]]:
    return {(m.name, m.read_from_copies.value) for m in config.federation.federated}
