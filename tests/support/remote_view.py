"""The routes snapshot as remote planning reads it, built from a server and a federation file's text: one link
``eu`` (to ``analytics``' ``sales``) and one remote table ``default.eu_orders`` (its ``sales.orders``), PREFIXED."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from waggle.config.loader import load
from waggle.config.model import DatabaseResolution, MetastoreConfig, WaggleConfig
from waggle.remotes.registry import LinkRegistry
from waggle.routing.databases import LinkedMap, PrefixedMap
from waggle.routing.federation import Planner
from waggle.routing.links import Link
from waggle.routing.table_links import TableLink


@dataclass(frozen=True)
class View:
    config: WaggleConfig
    planner: Planner
    registry: LinkRegistry
    links: Mapping[str, Link] = field(default_factory=dict)
    tables: Mapping[tuple[str, str], tuple[MetastoreConfig, TableLink]] = field(default_factory=dict)


def remote_view(folder: Path, server: str, federation: str) -> View:
    (folder / "s.yml").write_text(server)
    (folder / "f.yml").write_text(federation)
    config = load(str(folder / "s.yml"), str(folder / "f.yml"))
    registry = LinkRegistry()
    registry.known.update({"sales": None, "default": None})
    link = Link("eu", "sales", "analytics")
    registry.add(link)
    table = TableLink("default", "eu_orders", "orders", Link("default.eu_orders", "sales", "analytics"))
    registry.add_table(table)
    fed = config.federation
    dbmap = LinkedMap(PrefixedMap(fed), {"eu": (fed.member("analytics"), link)})
    return View(config, Planner(fed, DatabaseResolution.PREFIXED, dbmap), registry, {"eu": link},
                {("default", "eu_orders"): (fed.member("analytics"), table)})
