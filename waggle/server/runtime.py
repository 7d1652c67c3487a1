"""What every client connection shares: the live configuration, the upstream pools, health and the planner.

A configuration is immutable; replacing it means building a new :class:`Runtime` state and swapping one
reference, so a call in flight finishes on the configuration it started with. In MANUAL mode the database
map is rebuilt in the background from the members' listings and swapped the same way (a new
:class:`~waggle.routing.federation.Planner`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import gevent

from waggle.config.model import DatabaseResolution, WaggleConfig
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore
from waggle.ops.logging import get_logger
from waggle.routing.databases import ManualMap, PrefixedMap
from waggle.routing.federation import Planner
from waggle.upstream.client import UpstreamError
from waggle.upstream.deadlines import Deadlines
from waggle.upstream.health import Health
from waggle.upstream.pool import UpstreamPool
from waggle.upstream.tunnel import Tunnel

log = get_logger("waggle.federation")


@dataclass(frozen=True, slots=True)
class Routes:
    """The federation as the call path sees it: one pool per metastore."""

    config: WaggleConfig
    pools: dict[str, UpstreamPool] = field(default_factory=dict)

    @property
    def primary(self) -> UpstreamPool:
        return self.pools[self.config.federation.primary.name]


class Runtime:
    def __init__(self, config: WaggleConfig) -> None:
        self.deadlines = Deadlines()
        #: one SSH tunnel per tunnelled metastore, shared by its pool and its health checks
        self.tunnels = {m.name: Tunnel(m) for m in config.federation.members if m.tunnel is not None}
        pools = {m.name: UpstreamPool(m, config.server.upstream_limits, self.deadlines, self.tunnels.get(m.name))
                 for m in config.federation.members}
        self.routes = Routes(config, pools)
        self.health = Health(config.federation.members, config.server, config.server.upstream_limits,
                             self.deadlines, self.tunnels)
        self.draining = False
        #: One debug line per call is built only when it will be written.
        self.log_calls = config.server.log_level == "debug"
        #: Databases created through waggle under *_CREATE_ON_DATABASE_WHITELIST, per member (memory only).
        self.created: dict[str, set[str]] = {}
        #: Members left out of merged calls, by (method, member).
        self.omissions: Counter[tuple[str, str]] = Counter()
        #: Some member hides tables with mapped-tables: calls carry a table check (else skipped entirely).
        self.mapped_tables = any(m.mapped_tables is not None for m in config.federation.members)
        self._listings: dict[str, list[str]] = {}
        self._reported_clashes: set[str] = set()
        self._refresher: gevent.Greenlet | None = None
        self.planner = self._planner()

    @property
    def config(self) -> WaggleConfig:
        return self.routes.config

    @property
    def manual(self) -> bool:
        return self.config.server.database_resolution is DatabaseResolution.MANUAL

    def _planner(self) -> Planner:
        federation = self.config.federation
        mode = self.config.server.database_resolution
        if mode is DatabaseResolution.PREFIXED:
            return Planner(federation, mode, PrefixedMap(federation))
        dbmap = ManualMap.build(federation, self._listings)
        for clash in dbmap.clashes:
            text = clash.describe()
            if text not in self._reported_clashes:
                self._reported_clashes.add(text)
                log.warning("federation.database_clash", database=clash.name, kept=clash.kept,
                            hidden=clash.hidden, detail=text)
        return Planner(federation, mode, dbmap)

    def count_omission(self, method: str, member: str) -> None:
        self.omissions[(method, member)] += 1

    # -- MANUAL: which member owns each database ------------------------------------------------------------
    def refresh_databases(self) -> None:
        """List every member's databases (in parallel, bounded) and swap in a new map."""
        jobs = {m.name: gevent.spawn(self._list_databases, m.name) for m in self.config.federation.members
                if self.health.is_up(m.name)}
        gevent.joinall(list(jobs.values()))
        for name, job in jobs.items():
            if job.successful():
                self._listings[name] = job.value
            else:
                # keep its last listing: calls naming its databases then fail fast, naming it
                log.warning("federation.listing_failed", member=name, error=str(job.exception))
        self.planner = self._planner()

    def _list_databases(self, name: str) -> list[str]:
        pool = self.routes.pools[name]
        timeout = (self.config.server.fan_out_timeout_ms + pool.config.latency_ms) / 1000.0
        try:
            result = pool.invoke(None, "get_all_databases", ThriftHiveMetastore.get_all_databases_args(),
                                 ThriftHiveMetastore.get_all_databases_result, timeout=timeout)
        except UpstreamError as exc:
            self.health.call_failed(name, exc)
            raise
        return [str(db) for db in result.success or ()]

    def _refresh_loop(self) -> None:
        while True:
            gevent.sleep(self.config.server.database_refresh_seconds)
            try:
                self.refresh_databases()
            except Exception as exc:  # never let the loop die
                log.error("federation.refresh_failed", error=repr(exc))

    # -- lifecycle --------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Background work: tunnels, health checks, and in MANUAL mode the first database map (before serving)."""
        for tunnel in self.tunnels.values():
            tunnel.start()
        self.health.start()
        if self.manual:
            self.refresh_databases()
            self._refresher = gevent.spawn(self._refresh_loop)

    def close(self) -> None:
        if self._refresher is not None:
            self._refresher.kill(block=False)
        self.health.close()
        for pool in self.routes.pools.values():
            pool.close()
        for tunnel in self.tunnels.values():
            tunnel.close()
        self.deadlines.close()
