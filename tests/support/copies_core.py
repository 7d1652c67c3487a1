"""The call core's inputs for reads from copies, as plain values (no socket): a PREFIXED federation of a primary
``main`` and a member ``lake`` (prefix ``lake_``, writable ``ice`` and ``web``), with the copies the primary holds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from waggle.config.loader import load
from waggle.config.model import WaggleConfig
from waggle.copies.catalog import Copies, Copy
from waggle.hms.wire import Wire
from waggle.routes.snapshot import Routes
from waggle.routing.databases import PrefixedMap
from waggle.routing.federation import Planner
from waggle.upstream.capabilities import Capabilities


def lake_routes(root: Path, copies: list[Copy], **lake: Any) -> tuple[WaggleConfig, Routes]:
    """The configuration, and routes serving ``copies``; ``lake``: more keys of the member (``read-from-copies``)."""
    federation = {
        "primary-meta-store": {"name": "main", "remote-meta-store-uris": "thrift://127.0.0.1:9",
                               "access-control-type": "READ_AND_WRITE_AND_CREATE"},
        "federated-meta-stores": [
            {"name": "lake", "remote-meta-store-uris": "thrift://127.0.0.1:9", "database-prefix": "lake_",
             "access-control-type": "READ_AND_WRITE_ON_DATABASE_WHITELIST",
             "writable-database-white-list": ["ice", "web"], **lake},
        ],
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "server.yml").write_text(yaml.safe_dump({"database-resolution": "PREFIXED"}))
    (root / "federation.yml").write_text(yaml.safe_dump(federation))
    config = load(str(root / "server.yml"), str(root / "federation.yml"))
    fed = config.federation
    planner = Planner(fed, config.server.database_resolution, PrefixedMap(fed))
    routes = Routes.of(config, planner=planner, caps={m.name: Capabilities(m) for m in fed.members})
    return config, replace(routes, copies=Copies.of(copies))


def client_wire(config: WaggleConfig) -> Wire:
    """The client's encoding, as the driver's Wire does it (it is the core's Encoder)."""
    return Wire(None, config.server.wire, config.server.limits)  # type: ignore[arg-type]
