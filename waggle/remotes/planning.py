"""How calls that touch remote databases are planned: pure, no sockets, asked by the call core
(:func:`waggle.call.plan.plan`) as it asks routing.

Two questions, each answered with one of a few values (or None: not a remote-database call):

* :func:`link_call`: is this a create of a link (a database with link properties, or one through a Hive 4 data
  connector), a drop of a link's name, a create of a remote table or a drop of one? Then the primary stores
  (or drops) it (:class:`Store`), or it is refused (:class:`Refuse`), or a data connector must be read first
  (:class:`Learn`).
* :func:`named_call`: does a call name a database or table the registry has not seen (:class:`Learn`), or a
  remote table (:class:`Redirect` to its metastore, in its names)?

Arguments are never changed in place: a plan that sends other arguments carries a copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from waggle.hms import specs
from waggle.hms.fields import replaced, table_refs, value_at
from waggle.hms.methods import Access, LinkOp, MethodSpec
from waggle.hms.names import parse
from waggle.remotes.connectors import REMOTE_DB_NAME, ConnectorError, link_through
from waggle.routing.access import create_refusal
from waggle.routing.databases import visible
from waggle.routing.links import (
    REMOTE,
    Link,
    LinkError,
    creator_refusal,
    is_link,
    link_of,
    parameters_of,
    policy_refusal,
)
from waggle.routing.table_links import TableLink, has_remote_table, table_link_of

if TYPE_CHECKING:
    from waggle.config.model import MetastoreConfig, WaggleConfig
    from waggle.remotes.registry import LinkRegistry
    from waggle.routing.federation import Planner

Identity = tuple[str, tuple[str, ...]]


class RemoteRoutes(Protocol):
    """What planning a remote-database call reads of the routes snapshot."""

    @property
    def config(self) -> WaggleConfig: ...

    @property
    def planner(self) -> Planner: ...

    @property
    def links(self) -> Mapping[str, Link]: ...

    @property
    def tables(self) -> Mapping[tuple[str, str], tuple[MetastoreConfig, TableLink]]: ...

    @property
    def registry(self) -> LinkRegistry | None: ...


@dataclass(frozen=True, slots=True)
class Refuse:
    """The call is refused (a MetaException saying ``message``), for ``metastore``."""

    metastore: str
    message: str


@dataclass(frozen=True, slots=True)
class Learn:
    """Look these up in the primary first, then plan again: database names never seen, data connectors, and
    (database, table) names that may be remote tables."""

    names: tuple[str, ...] = ()
    connectors: tuple[str, ...] = ()
    tables: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Store:
    """The primary makes or drops a link (``link``) or a remote table's stub (``table``)."""

    link: Link | None = None
    table: TableLink | None = None
    #: the arguments to send (a copy carrying the link's properties), or None: the call's own, as they came
    args: Any = None


@dataclass(frozen=True, slots=True)
class Redirect:
    """A call on a remote table goes to ``member`` with ``args`` (the remote's names); its reply gets the
    local names back."""

    member: MetastoreConfig
    table: TableLink
    args: Any


Remote = Refuse | Learn | Store | Redirect


def link_call(method: str, spec: MethodSpec, args: Any, identity: Identity | None, routes: RemoteRoutes,
              connectors_read: Set[str]) -> Remote | None:
    """A create of a database with link properties, or a drop of a link's name, or a create or drop of a remote
    table; None for any other call. ``connectors_read``: data connectors already looked up for this call."""
    assert spec.link is not None
    policy, primary = routes.config.server.remotes, routes.config.federation.primary.name
    value = value_at(args, spec.link.path) if spec.link.path else None
    who = identity or ("", ())
    if spec.link.op is LinkOp.DROP_TABLE:
        dropped = next((routes.tables[k] for k in _local_tables(args, spec, routes) if k in routes.tables), None)
        if dropped is None:
            return None
        why = creator_refusal(policy, *who)
        return Refuse(primary, f"{method} refused: {why}") if why is not None else Store(table=dropped[1])
    if spec.link.op is LinkOp.CREATE_TABLE:
        return _create_remote_table(method, value, routes, who)
    if spec.link.op is LinkOp.DROP:
        named = parse(str(value or ""))  # Hive 3+ clients send @hive#db
        link = routes.links.get((named.db or "").lower())
        if link is None:
            return None
        why = creator_refusal(policy, *who)
        if why is not None:
            return Refuse(primary, f"{method} refused: {why}")
        # the primary drops the link's database by its plain name, which every release understands
        return Store(link=link, args=replaced(args, [(spec.link.path, named.db)]) if named.catalog else None)
    if value is None:
        return None
    parameters = getattr(value, "parameters", None)
    connector_name = _first(value, "connector_name", "dataConnectorName")
    remote = getattr(value, "type", None) in (REMOTE, "REMOTE") and connector_name
    if not is_link(parameters) and not remote:
        return None
    name = _first(value, "name", "databaseName") or ""
    try:
        if remote:
            assert routes.registry is not None
            connector = routes.registry.connectors.get(connector_name.lower())
            if connector is None:
                if connector_name.lower() not in connectors_read:
                    return Learn(connectors=(connector_name.lower(),))
                return Refuse(primary, f"{method} refused: there is no data connector '{connector_name}'")
            remote_db = getattr(value, "remote_dbname", None) or (parameters or {}).get(REMOTE_DB_NAME)
            link = link_through(connector, name, remote_db, routes.config.federation)
        else:
            found = link_of(name, parameters)
            assert found is not None
            link = found
    except (LinkError, ConnectorError) as exc:
        return Refuse(primary, f"{method} refused: {exc}")
    why = policy_refusal(link, policy, routes.config.federation) or creator_refusal(policy, *who)
    if why is None:
        why = _clash(link, routes)
    if why is None and link.member is not None and \
            not visible(routes.config.federation.member(link.member), link.database):
        why = f"'{link.database}' of metastore '{link.member}' is hidden by its mapped-databases"
    if why is None and len(routes.links) >= policy.max_links:
        why = f"the primary holds {len(routes.links)} links, the limit (remote-databases.max-links)"
    if why is None:
        why = create_refusal(routes.planner.primary, name)
    if why is not None:
        return Refuse(primary, f"{method} refused: cannot link '{name}' to {link.describe()}: {why}")
    # the primary stores the link as a plain database whose parameters are the link (a Hive 4 primary would
    # want a connector of its own for a REMOTE one)
    path = spec.link.path
    stored = {**{k: v for k, v in (parameters or {}).items() if not k.startswith("waggle.remote.")},
              **parameters_of(link)}
    changes: list[tuple[tuple[str, ...], Any]] = [((*path, "parameters"), stored)]
    if remote:
        changes.append(((*path, "type"), None))
        changes += [((*path, attr), None) for attr in ("connector_name", "dataConnectorName", "remote_dbname")
                    if hasattr(value, attr)]
    return Store(link=link, args=replaced(args, changes))


def named_call(method: str, spec: MethodSpec, args: Any, names: list[str], routes: RemoteRoutes,
               tables_read: Set[tuple[str, str]]) -> Remote | None:
    """A call naming databases (``names``, as the client spells them): the names the registry has not seen
    are learned first, and a call on a remote table goes to its metastore; None for any other call.
    ``tables_read``: tables already looked up for this call."""
    registry = routes.registry
    assert registry is not None
    unknown = registry.unknown(_primary_names(names, routes))
    if unknown:
        return Learn(tuple(unknown))
    if not spec.table_refs:
        return None
    keys = _local_tables(args, spec, routes)
    found = next((routes.tables[k] for k in keys if k in routes.tables), None)
    if found is None:
        unseen = tuple(k for k in keys if k not in registry.known_tables and k not in tables_read)
        return Learn(tables=unseen) if unseen else None
    member, table = found
    if spec.access is not Access.READ and routes.config.server.remotes.read_only:
        return Refuse(member.name, f"{method} refused: table '{table.db}.{table.name}' is a link to "
                                   f"{table.describe()}, and links are read-only (remote-databases.access)")
    changes = []
    for ref in spec.table_refs:  # the remote's names in the request
        if value_at(args, ref.table) is not None:
            changes += [(ref.db, table.link.database), (ref.table, table.table)]
    return Redirect(member, table, replaced(args, changes))


def _primary_names(names: list[str], routes: RemoteRoutes) -> list[str]:
    """The primary's databases, as it names them, that these names reach (links left out)."""
    planner = routes.planner
    out = []
    for name in names:
        found = planner.lookup(name)
        if found is not None and found.target is not None and found.target.member.primary and \
                found.target.link is None:
            out.append(found.target.db)
    return out


def _first(obj: Any, *attrs: str) -> str:
    """The first of these string attributes that ``obj`` has set (the same field of two request structs)."""
    for attr in attrs:
        value = getattr(obj, attr, None)
        if value:
            return str(value)
    return ""


def _clash(link: Link, routes: RemoteRoutes) -> str | None:
    if link.name in routes.links:
        return f"'{link.name}' is already a link to {routes.links[link.name].describe()}"
    for naming in routes.planner.namings.values():
        if naming.prefix and link.name.startswith(naming.prefix):
            return f"'{link.name}' carries the prefix '{naming.prefix}' of metastore '{naming.member.name}'"
    found = routes.planner.lookup(link.name)
    if found is not None and found.target is not None and not found.target.member.primary:
        return f"'{link.name}' is already the name of database '{found.target.db}' of metastore " \
               f"'{found.target.member.name}'"
    return None


def _local_tables(args: Any, spec: MethodSpec, routes: RemoteRoutes) -> list[tuple[str, str]]:
    """The (primary database, table) pairs a call names, in the primary's names (lower-case)."""
    out = []
    for db, table in table_refs(args, spec):
        found = routes.planner.lookup(db)
        if found is not None and found.target is not None and found.target.member.primary and \
                found.target.link is None:
            out.append((found.target.db, table.lower()))
    return out


def _create_remote_table(method: str, table: Any, routes: RemoteRoutes, who: Identity) -> Remote | None:
    """A create of a table with waggle.remote.table: a remote table, its stub kept in the primary."""
    parameters = getattr(table, "parameters", None)
    if not has_remote_table(parameters):
        return None
    planner, policy, primary = routes.planner, routes.config.server.remotes, routes.config.federation.primary.name
    db, name = str(getattr(table, "dbName", "") or ""), str(getattr(table, "tableName", "") or "")
    try:
        found = table_link_of(db, name, parameters)
    except LinkError as exc:
        return Refuse(primary, f"{method} refused: {exc}")
    assert found is not None
    local = planner.lookup(db)
    why = policy_refusal(found.link, policy, routes.config.federation) or creator_refusal(policy, *who)
    if why is None and (local is None or local.target is None or not local.target.member.primary or
                        local.target.link is not None):
        why = f"a remote table is made in a database of the primary, and '{db}' is not one"
    if why is None and found.link.member is not None and \
            not visible(routes.config.federation.member(found.link.member), found.link.database):
        why = f"'{found.link.database}' of metastore '{found.link.member}' is hidden by its mapped-databases"
    if why is not None:
        return Refuse(primary, f"{method} refused: cannot make '{db}.{name}' a link to {found.describe()}: {why}")
    return Store(table=found)


def cascading(spec: MethodSpec | None, args_class: type | None, names: list[str], links: Mapping[str, Link],
              current: str | None) -> str | None:
    """The link whose tables a connection is dropping one by one, after this call, or None.

    A stock ``DROP DATABASE ... CASCADE`` is a client sequence, not a call: Hive's ``HiveMetaStoreClient
    .dropDatabase`` (2.3, and 3.1 with its batches) lists every table itself (``get_all_tables``), drops each one
    (``get_table`` or ``get_table_objects_by_name``, then ``drop_table_with_environment_context`` with
    ``ignoreUnknownTab``, which ignores NoSuchObjectException), and only then calls ``drop_database``; Spark's
    ``DROP DATABASE`` goes through it. A listing of every table of a link starts such a sequence; a call naming
    that database alone continues it; any other call ends it. Within it, a table drop refused because the link is
    read-only is answered as a table that does not exist, so the sequence reaches ``drop_database``, which drops
    the link alone. Outside it (an explicit ``DROP TABLE``, which Spark sends with ``ignoreUnknownTab`` too), the
    refusal is a MetaException saying why."""
    if spec is None or not links:
        return None
    dbs = {(parse(n).db or "").lower() for n in names}
    if len(dbs) != 1:
        return None
    (db,) = dbs
    if spec.lists_tables and args_class is not None and len(specs.fields(args_class)) == 1:
        return db if db in links else None  # every table of one database: get_all_tables
    return current if db == current else None
