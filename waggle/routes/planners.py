"""The planners of routes snapshots: a configuration's database map (PREFIXED: the prefixes; MANUAL: the
members' last listings), with the links served now over it. In MANUAL mode, listing the members' databases too
(the one part that does I/O: the runtime's loop and reloads ask for it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import gevent

from waggle.common.logging import get_logger
from waggle.config.model import DatabaseResolution, ServerConfig, WaggleConfig
from waggle.hms.methods import LIST_ALL_DATABASES
from waggle.hms.service import METHOD_IO
from waggle.remotes.registry import LinkRegistry
from waggle.routing.databases import DatabaseMap, LinkedMap, ManualMap, PrefixedMap
from waggle.routing.federation import Planner
from waggle.upstream.client import UpstreamError

if TYPE_CHECKING:
    from waggle.upstream.health import Health
    from waggle.upstream.pool import UpstreamPool

log = get_logger("waggle.federation")


class PlannerBuilder:
    """Builds the planner of a routes snapshot: the database map of a configuration (PREFIXED: the prefixes;
    MANUAL: the members' last listings, clashes reported once each) with the links served now over it. In MANUAL
    mode it also lists the members (:meth:`list_members`)."""

    def __init__(self, links: LinkRegistry) -> None:
        self.links = links
        #: MANUAL: each member's databases, as last listed (a member whose listing failed keeps its last one)
        self.listings: dict[str, list[str]] = {}
        self._reported_clashes: set[str] = set()

    def planner(self, config: WaggleConfig) -> Planner:
        federation = config.federation
        mode = config.server.database_resolution
        dbmap: DatabaseMap
        if mode is DatabaseResolution.PREFIXED:
            dbmap = PrefixedMap(federation)
        else:
            manual = ManualMap.build(federation, self.listings)
            for clash in manual.clashes:
                text = clash.describe()
                if text not in self._reported_clashes:
                    self._reported_clashes.add(text)
                    log.warning("federation.database_clash", database=clash.name, kept=clash.kept,
                                hidden=clash.hidden, detail=text)
            dbmap = manual
        links = self.links.active(config)
        if links:
            dbmap = LinkedMap(dbmap, links)
        outside = {m.name: m for m, link in links.values() if link.uri is not None}
        outside.update({m.name: m for m, table in self.links.active_tables(config).values()
                        if table.link.uri is not None})
        return Planner(federation, mode, dbmap, config.server.remotes.read_only, tuple(outside.values()))

    # -- MANUAL: the members' listings -------------------------------------------------------------------------
    def list_members(self, config: WaggleConfig, pools: Mapping[str, UpstreamPool], health: Health,
                     names: set[str] | None = None) -> None:
        """List members' databases (in parallel) into ``listings``: ``names`` (new ones, whatever their last
        health), or every member that is up."""
        wanted = [m.name for m in config.federation.members
                  if (m.name in names if names is not None else health.is_up(m.name))]
        jobs = {name: gevent.spawn(_list_databases, config.server, pools[name], health) for name in wanted}
        gevent.joinall(list(jobs.values()))
        for name, job in jobs.items():
            listed = job.value if job.successful() else job.exception
            if isinstance(listed, list):
                self.listings[name] = listed
            else:
                # keep its last listing: calls naming its databases then fail fast, naming it
                log.warning("federation.listing_failed", member=name, error=str(listed))


def _list_databases(server: ServerConfig, pool: UpstreamPool, health: Health) -> list[str] | UpstreamError:
    """The member's databases, or the error that says why not (returned, never raised: a greenlet that raises
    prints a traceback, and a member down at start is one log line)."""
    timeout = (server.fan_out_timeout_ms + pool.config.latency_ms) / 1000.0
    try:
        io = METHOD_IO[LIST_ALL_DATABASES.name]
        assert io.result is not None
        result = pool.invoke(None, io.name, io.args(), io.result, timeout=timeout)
    except UpstreamError as exc:
        health.call_failed(pool.name, exc)
        return exc
    return [str(db) for db in result.success or ()]
