"""The routes snapshot: the federation as the call path sees it, for one configuration and one database map.

The call core (:mod:`waggle.call`) plans from it and never from the pools themselves: it reads each member's
capabilities (``caps``), the planner, the links and remote tables served now, and what it remembered for this
snapshot (``memo``). The driver takes the pool to send to from ``pools``. A new configuration, database map
or set of links makes a new snapshot (:class:`waggle.runtime.Runtime` swaps one reference), with a planner
from :class:`waggle.routes.planners.PlannerBuilder`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from waggle.config.model import MetastoreConfig, WaggleConfig
from waggle.copies.catalog import NONE, Copies
from waggle.remotes.registry import LinkRegistry
from waggle.routes.memo import Memo
from waggle.routing.federation import Planner
from waggle.routing.links import Link
from waggle.routing.table_links import TableLink

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool


class Capabilities(Protocol):
    """What is known of one metastore's abilities when a call is planned (its pool's
    :class:`waggle.upstream.compat.Capabilities`, learned as calls go; a plain value in tests)."""

    @property
    def catalogs(self) -> bool | None:
        """Whether it understands catalogs (None: not known yet)."""
        ...

    def bridges(self, method: str, args: Any) -> bool:
        """Whether a call of ``method`` with ``args`` must go through the method's bridge."""
        ...


@dataclass(frozen=True, slots=True)
class Routes:
    """The federation as the call path sees it: one configuration, its pools and its database map."""

    config: WaggleConfig
    pools: Mapping[str, UpstreamPool]
    planner: Planner
    #: 1 for the configuration waggle started with, +1 per applied reload
    generation: int
    loaded_at: float
    #: some member hides tables with mapped-tables: calls carry a table check (else skipped entirely)
    mapped_tables: bool
    #: remote databases: the links served now (local name -> link), and the registry that knows every primary
    #: database name seen (None when remote-databases.enabled is false)
    links: Mapping[str, Link] = field(default_factory=dict)
    registry: LinkRegistry | None = None
    #: remote tables served now: (local database, local table) -> (their metastore, the table link)
    tables: Mapping[tuple[str, str], tuple[MetastoreConfig, TableLink]] = field(default_factory=dict)
    #: what the call core remembers for this snapshot (read decisions, translated names)
    memo: Memo = field(default_factory=Memo)
    #: what is known of each metastore the planner can send to (its pool's, learned as calls go)
    caps: Mapping[str, Capabilities] = field(default_factory=dict)
    #: the copies of members' tables the primary holds (read-from-copies), as last read
    copies: Copies = NONE

    @classmethod
    def build(cls, config: WaggleConfig, *, pools: Mapping[str, UpstreamPool], planner: Planner, generation: int,
              registry: LinkRegistry | None = None, copies: Copies = NONE) -> Routes:
        """The routes a configuration is served with: its ``pools``, ``planner`` and links' ``registry``, the
        ``generation``-th configuration applied (1 at start), and the copies last read."""
        return replace(cls.of(config, planner=planner, caps={name: pool.caps for name, pool in pools.items()},
                              registry=registry),
                       pools=pools, generation=generation, loaded_at=time.time(), copies=copies)

    @classmethod
    def of(cls, config: WaggleConfig, *, planner: Planner, caps: Mapping[str, Capabilities],
           registry: LinkRegistry | None = None) -> Routes:
        """Routes without pools (nothing can be sent): what the call core needs to plan, from plain values."""
        links = registry.served(config) if registry else {}
        tables = registry.active_tables(config) if registry else {}
        return cls(config=config, pools={}, planner=planner, generation=1, loaded_at=0.0,
                   mapped_tables=any(m.mapped_tables is not None for m in config.federation.members), links=links,
                   registry=registry if config.server.remotes.enabled else None, tables=tables, caps=caps)

    @property
    def primary(self) -> UpstreamPool:
        return self.pools[self.config.federation.primary.name]


class RoutesHolder(Protocol):
    """Whoever holds the routes snapshot every call reads (the runtime): the services that keep it current swap
    in a new one."""

    routes: Routes
