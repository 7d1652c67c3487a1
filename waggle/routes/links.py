"""Remote databases at run time: the links and data connectors read from the primary, the pools of the
metastores that URI links name, and one round of rereading them (:mod:`waggle.loops` runs the rounds). Each
change serves a new routes snapshot (a new planner over the same configuration and pools)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from waggle.common import metrics
from waggle.common.logging import get_logger
from waggle.config.model import MetastoreConfig
from waggle.remotes.registry import LinkRegistry
from waggle.routes.planners import PlannerBuilder
from waggle.routes.snapshot import Routes, RoutesHolder
from waggle.upstream.client import UpstreamError

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool
    from waggle.upstream.token_store import MetastoreTokenStore

log = get_logger("waggle.federation")


class LinksService:
    def __init__(self, registry: LinkRegistry, records: MetastoreTokenStore, builder: PlannerBuilder,
                 holder: RoutesHolder, make_pool: Callable[[MetastoreConfig], UpstreamPool]) -> None:
        """``records``: waggle's records in the primary (data connectors); ``make_pool``: a pool for a URI
        link's metastore."""
        self.registry = registry
        self._records = records
        self._builder = builder
        self._holder = holder
        self._make_pool = make_pool
        #: pools of the metastores that URI links name (they are no federation members)
        self._uri_pools: dict[str, UpstreamPool] = {}

    def link_pool(self, member: MetastoreConfig) -> UpstreamPool:
        """The pool of a link's metastore: a federation member's, or one kept for a URI link's metastore."""
        pool = self._holder.routes.pools.get(member.name) or self._uri_pools.get(member.name)
        if pool is None:
            pool = self._uri_pools[member.name] = self._make_pool(member)
        return pool

    def with_uri_pools(self, routes: Routes) -> Routes:
        """``routes`` with the pools of the URI links its planner serves."""
        extra = {name: self.link_pool(naming.member) for name, naming in routes.planner.namings.items()
                 if name not in routes.pools}
        if not extra:
            return routes
        pools = {**routes.pools, **extra}
        return replace(routes, pools=pools, caps={name: pool.caps for name, pool in pools.items()})

    def learn_links(self, names: list[str]) -> None:
        """Look names this replica has not seen up in the primary (a link made elsewhere works at once)."""
        if self.registry.learn(self._holder.routes.primary, names):
            self.relink()

    def learn_tables(self, keys: list[tuple[str, str]]) -> None:
        """Look tables this replica has not seen up in the primary (a remote table made elsewhere works at once)."""
        if self.registry.learn_tables(self._holder.routes.primary, keys):
            self.relink()

    def learn_connectors(self) -> None:
        """Reread the data connectors from the primary (one named by a call is not known here yet)."""
        try:
            self.registry.load_connectors(self._records)
        except UpstreamError as exc:
            log.info("connectors.refresh_failed", error=str(exc))

    def relink(self) -> None:
        """Serve the registry's links now: a new planner over the same configuration and pools."""
        routes = self._holder.routes
        links = self.registry.served(routes.config)
        self._holder.routes = self.with_uri_pools(replace(
            routes, planner=self._builder.planner(routes.config), links=links,
            tables=self.registry.active_tables(routes.config)))
        counts: dict[str, int] = {m.name: 0 for m in routes.config.federation.federated}
        for link in links.values():
            if link.member is not None:
                counts[link.member] = counts.get(link.member, 0) + 1
        for member, count in counts.items():
            metrics.LINKS.labels(member).set(count)

    # -- one round of the links loop (waggle.loops) ----------------------------------------------------------
    def refresh(self) -> None:
        """Reread the data connectors and the links from the primary, and serve the links if they changed."""
        if not self._holder.routes.config.server.remotes.enabled:
            return
        try:
            self.registry.load_connectors(self._records)
            if self.registry.refresh(self._holder.routes.primary):
                self.relink()
        except UpstreamError as exc:
            log.info("links.refresh_failed", error=str(exc))

    def refresh_seconds(self) -> float:
        """The wait between two rounds (``remote-databases.refresh-seconds``)."""
        return self._holder.routes.config.server.remotes.refresh_seconds
