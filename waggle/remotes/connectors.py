"""Hive 4's data connectors, of type ``hivemetastore``, answered by waggle.

In Hive 4 these statements make a remote database:

    CREATE CONNECTOR eu TYPE 'hivemetastore' URL 'thrift://...' WITH DCPROPERTIES (...)
    CREATE REMOTE DATABASE eu_sales USING eu WITH DBPROPERTIES ("connector.remoteDbName"="sales")

Hive 4's own connectors are JDBC only, and none of them reaches another Thrift metastore. With remote databases
enabled, waggle answers the connector calls itself, and a remote database becomes a link like any other
(:mod:`waggle.routing.links`).

A connector names a federation member in one of two ways: with ``'waggle.remote.metastore'='analytics'`` among
its properties, or with a URL equal to one of that member's URIs. Any other URL is a URI link, under the
policy's ``allowed-uris``.

Connectors are kept in the primary metastore, in its key-value token store (the Thrift calls ``add_token``,
``get_token`` and ``remove_token``), under keys ``waggle:connector:<name>``. So they survive restarts, every
replica sees them, and they cost no table of waggle's own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from waggle.config.model import Federation, WaggleConfig
from waggle.hms.gen.hive_metastore.ttypes import DataConnector
from waggle.hms.methods import ConnectorOp
from waggle.routing.links import METASTORE, Link, LinkError, creator_refusal, link_of, policy_refusal

KEY_PREFIX = "waggle:connector:"
TYPE = "hivemetastore"
#: Hive 4's database property naming the remote database of a REMOTE database
REMOTE_DB_NAME = "connector.remoteDbName"


@dataclass(frozen=True, slots=True)
class Connector:
    name: str
    url: str
    description: str | None = None
    parameters: Mapping[str, str] = field(default_factory=dict)
    owner: str | None = None

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "url": self.url, "description": self.description,
                           "parameters": dict(self.parameters), "owner": self.owner}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Connector:
        data = json.loads(text)
        return cls(str(data["name"]), str(data.get("url") or ""), data.get("description"),
                   {str(k): str(v) for k, v in (data.get("parameters") or {}).items()}, data.get("owner"))

    def to_struct(self) -> DataConnector:
        return DataConnector(name=self.name, type=TYPE, url=self.url, description=self.description,
                             parameters=dict(self.parameters), ownerName=self.owner)


class ConnectorError(ValueError):
    pass


def from_struct(connector: Any, owner: str | None) -> Connector:
    """A connector from a client's DataConnector; :class:`ConnectorError` for another type or no name."""
    name = str(getattr(connector, "name", "") or "").strip().lower()
    if not name:
        raise ConnectorError("a data connector needs a name")
    kind = str(getattr(connector, "type", "") or "").strip().lower()
    if kind != TYPE:
        raise ConnectorError(f"waggle serves data connectors of type '{TYPE}' only, not '{kind or '(none)'}'")
    parameters = {str(k): str(v) for k, v in (getattr(connector, "parameters", None) or {}).items()}
    return Connector(name, str(getattr(connector, "url", "") or "").strip(), getattr(connector, "description", None),
                     parameters, owner or getattr(connector, "ownerName", None))


def link_through(connector: Connector, name: str, remote_db: str | None, federation: Federation) -> Link:
    """The link a REMOTE database ``name`` makes through ``connector``."""
    member = connector.parameters.get(METASTORE)
    if member is None:
        member = next((m.name for m in federation.federated
                       if any(str(u) == connector.url.rstrip("/") for u in m.uris)), None)
    props = {METASTORE: member} if member else {"waggle.remote.uris": connector.url}
    if remote_db:
        props["waggle.remote.database"] = remote_db
    try:
        link = link_of(name, props)
    except LinkError as exc:
        raise ConnectorError(f"connector '{connector.name}': {exc}") from None
    assert link is not None
    return Link(link.name, link.database, link.member, link.uri, connector.name)


def key(name: str) -> str:
    return KEY_PREFIX + name.lower()


class Store(Protocol):
    def put(self, key: str, value: str) -> None: ...

    def get(self, key: str) -> str | None: ...

    def remove(self, key: str) -> bool: ...

    def identifiers(self, prefix: str) -> list[str]: ...


class ConnectorService:
    """The data-connector calls, answered from the connectors kept in the primary (``registry.connectors`` is
    this replica's copy; every change is written through to the primary first)."""

    def __init__(self, registry: Any, store: Store, config: Callable[[], WaggleConfig]) -> None:
        self._registry = registry
        self._store = store
        self._config = config

    def answer(self, op: ConnectorOp, values: list[Any], identity: tuple[str, tuple[str, ...]] | None) -> Any:
        """The call's success value (None for a void call); :class:`ConnectorError` to refuse it."""
        known: dict[str, Connector] = self._registry.connectors
        if op is ConnectorOp.LIST:
            return sorted(k[len(KEY_PREFIX):] for k in self._store.identifiers(KEY_PREFIX))
        if op is ConnectorOp.GET:
            return self._get(str(values[0] or "")).to_struct()
        config = self._config()
        user, groups = identity or ("", ())
        why = creator_refusal(config.server.remotes, user, groups)
        if why is not None:
            raise ConnectorError(why)
        if op is ConnectorOp.DROP:
            name = str(values[0] or "").lower()
            self._get(name)
            self._store.remove(key(name))
            known.pop(name, None)
            return None
        connector = from_struct(values[-1], user or None)
        probe = link_through(connector, "probe", None, config.federation)
        refusal = policy_refusal(probe, config.server.remotes, config.federation)
        if refusal is not None:
            raise ConnectorError(f"connector '{connector.name}' names {probe.describe().split(' of ', 1)[1]}: "
                                 f"{refusal}")
        if op is ConnectorOp.CREATE:
            if self._store.get(key(connector.name)) is not None:
                raise ConnectorError(f"data connector '{connector.name}' already exists")
        else:
            old = str(values[0] or "").lower()
            self._get(old)
            if old != connector.name:
                raise ConnectorError("a data connector cannot be renamed")
        self._store.put(key(connector.name), connector.to_json())
        known[connector.name] = connector
        return None

    def _get(self, name: str) -> Connector:
        text = self._store.get(key(name))
        if text is None:
            raise ConnectorError(f"there is no data connector '{name}'")
        connector = Connector.from_json(text)
        self._registry.connectors[connector.name] = connector
        return connector
