"""Plan one call: which metastore, what to send, and what the reply needs. Pure: no sockets, no waiting.

Everything that depends on the method comes from its entry in the method table (:mod:`waggle.hms.methods`):
its route, access, where it carries database names, lock ids, lock components, table references and catalog
names, and its bridge. Nothing here names an HMS method.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import TYPE_CHECKING, Any

from waggle.call import merge
from waggle.call.memo import NameMemo
from waggle.call.values import Call, Kind, NeedCatalogs, NeedLinks, Plan
from waggle.config.model import TransportKind
from waggle.hms.bridges import DEFAULT_CATALOG, strip_catalog
from waggle.hms.catalogs import carries_catalog
from waggle.hms.methods import Access, LinkOp, MethodSpec, Path, Route
from waggle.hms.names import parse
from waggle.hms.rewrite import Rewriter, call_rewriter
from waggle.hms.strings import strings_in
from waggle.remotes.connectors import REMOTE_DB_NAME, ConnectorError, link_through
from waggle.remotes.links import (
    REMOTE,
    Link,
    LinkError,
    creator_refusal,
    is_link,
    link_of,
    parameters_of,
    policy_refusal,
)
from waggle.remotes.tables import has_remote_table, table_link_of
from waggle.routing.access import create_refusal
from waggle.routing.databases import visible
from waggle.routing.federation import Decision, Naming, Planner, Refused

if TYPE_CHECKING:
    from waggle.runtime import Routes
    from waggle.upstream.pool import UpstreamPool

#: the one rewriter of whole calls (plans are cached per struct class)
REWRITER: Rewriter = call_rewriter()


def value_at(obj: Any, path: Path) -> Any:
    """The value at an attribute path of a decoded object (None where any step is missing, or for no path)."""
    if not path:
        return None
    for attr in path:
        obj = getattr(obj, attr, None)
        if obj is None:
            return None
    return obj


def plan(call: Call, routes: Routes, created: Mapping[str, Set[str]], asked: Set[str] = frozenset()
         ) -> Plan | NeedCatalogs | NeedLinks:
    """What to do with ``call`` under ``routes``. ``created``: databases created through waggle per member (the
    whitelist); ``asked``: members whose catalog support was asked for already (whatever the answer)."""
    spec, planner = call.spec, routes.planner
    if spec is None or call.io is None or call.args is None:
        return _unknown(call, routes)
    if spec.token is not None and routes.config.server.security.answers_tokens:
        return Plan(Kind.TOKENS, call, routes.primary.name, routes.primary)
    if spec.connector is not None and routes.registry is not None:
        return Plan(Kind.CONNECTORS, call, routes.primary.name, routes.primary)
    if spec.link is not None and routes.registry is not None:
        linked = _link_call(call, spec, routes, asked)
        if linked is not None:
            return linked
    if spec.route is Route.IDENTITY:
        return Plan(Kind.IDENTITY, call, routes.primary.name, routes.primary)
    if spec.route is Route.FANOUT:
        return merge.plan(call, spec, routes, asked)
    names: list[str] = []
    if spec.route is Route.LOCK_ID:
        decision = _lock_owner(call, spec, routes)
    else:
        names = REWRITER.names_in(call.args)
        if routes.registry is not None:
            unknown = _unseen(names, routes)
            if unknown:
                return NeedLinks(tuple(unknown))
            if spec.table_refs:
                tabled = _remote_table(call, spec, routes, asked)
                if tabled is not None:
                    return tabled
        if spec.access is Access.READ and not spec.lock_components and not routes.mapped_tables:
            decision = _READS.decide(planner, spec, names)
        else:
            locks = [(c.dbname or "", c.type) for c in value_at(call.args, spec.lock_components) or ()] \
                if spec.lock_components else ()
            tables = _table_refs(call.args, spec) if routes.mapped_tables else ()
            decision = planner.decide(spec, names, locks, created, tables)
    if decision.refusal is not None:
        return _refuse(call, decision.member.name, decision.refusal, decision.refused_as, decision)
    pool = routes.pools[decision.member.name]
    naming = planner.naming(decision.member)
    # Catalogs: a metastore without them (Hive 2) gets plain names, and its replies get the catalog the client
    # named.
    fill = None
    strip = False
    catalog = _catalog_named(names, call.args, spec) if pool.caps.catalogs is not True else None
    if catalog is not None:
        if pool.caps.catalogs is None and pool.name not in asked:
            return NeedCatalogs((pool.name,))
        catalogs = pool.caps.catalogs
        if catalogs is False and catalog.lower() != DEFAULT_CATALOG:
            refused = _refuse(call, pool.name, f"catalog '{catalog}' does not exist in metastore '{pool.name}' (a "
                                               f"Hive 2 metastore has only '{DEFAULT_CATALOG}')",
                              Refused.NO_SUCH_OBJECT, decision)
            refused.quiet = True
            return refused
        strip = catalogs is not True and any(n.startswith("@") for n in names)
        fill = catalog if catalogs is False else None
    raw: bytes | None = call.raw
    if decision.rewrite_request or strip:
        known = _MEMBER_NAMES.of(naming)

        def to_member(name: str) -> str:
            out = known.get(name)
            if out is None:
                out = known[name] = naming.to_member(name)
            return out

        REWRITER.rewrite(call.args, (lambda n: strip_catalog(to_member(n))) if strip else to_member)
        raw = None
    kind = Kind.BRIDGE if spec.bridge is not None and pool.caps.bridges(call.name, call.args) else Kind.SEND
    return _to(kind, call, pool, naming, decision, raw, fill)


class _ReadDecisions:
    """The planner's decisions for reads, remembered: a read names no lock and no table to check, and the
    planner's answer to it depends only on the method and the names (not on the whitelist, which only writes
    consult). The same few databases are read over and over; a remembered decision saves about 3 us of the
    5.5 us a relayed call's plan took (measured on get_table, names unchanged). Remembered per planner (a
    reload or a new database map makes a new one); at most ``LIMIT`` of them, since names are the clients'."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._planner: Planner | None = None
        self._decided: dict[tuple[str, tuple[str, ...]], Decision] = {}

    def decide(self, planner: Planner, spec: MethodSpec, names: list[str]) -> Decision:
        if planner is not self._planner:
            self._planner, self._decided = planner, {}
        key = (spec.name, tuple(names))
        decision = self._decided.get(key)
        if decision is None:
            decision = planner.decide(spec, names)
            if len(self._decided) >= self.LIMIT:
                self._decided = {}
            self._decided[key] = decision
        return decision


_READS = _ReadDecisions()
#: a client's name as a member knows it
_MEMBER_NAMES: NameMemo[str] = NameMemo()


def _to(kind: Kind, call: Call, pool: UpstreamPool, naming: Naming, decision: Decision | None, raw: bytes | None,
        fill: str | None) -> Plan:
    result_class = call.io.result if call.io is not None else None
    rewrite_reply = False
    if result_class is not None:
        fill, rewrite_reply = reply_changes(result_class, naming, decision, fill)
    else:
        fill = None
    wire = pool.config.wire
    stream = not rewrite_reply and (wire is call.wire or wire == call.wire) and \
        call.wire.transport is TransportKind.BUFFERED
    link = decision.link if decision is not None else None
    if link is not None:
        rewrite_reply, stream = True, False  # a link's database is described as such
    return Plan(kind, call, pool.name, pool, naming, decision, raw, fill=fill, rewrite_reply=rewrite_reply,
                stream=stream, link=link)


def reply_changes(result_class: type, naming: Naming, decision: Decision | None, fill: str | None
                  ) -> tuple[str | None, bool]:
    """(the catalog to fill in, if this result can hold one; whether the reply must be changed at all)."""
    fill = fill if fill is not None and carries_catalog(result_class) else None
    filters = decision is not None and naming.member.mapped_tables is not None
    return fill, (not naming.identity and REWRITER.touches(result_class)) or filters or fill is not None


def _refuse(call: Call, metastore: str, refusal: str, refused_as: Refused, decision: Decision | None) -> Plan:
    return Plan(Kind.REFUSE, call, metastore, decision=decision, refusal=refusal, refused_as=refused_as)


def _lock_owner(call: Call, spec: MethodSpec, routes: Routes) -> Decision:
    """A call that carries only a lock id goes where the lock was granted on this connection."""
    held = int(value_at(call.args, spec.lock_id) or -1)
    owner = call.session.lock_owners.get(held)
    if owner is None:
        return Decision(routes.planner.primary)
    if owner.name in routes.pools:
        return Decision(routes.config.federation.member(owner.name))
    return Decision(owner, f"lock {held} was granted by metastore '{owner.name}', which is no longer in the "
                           f"federation")


def _table_refs(args: Any, spec: MethodSpec) -> list[tuple[str, str]]:
    """(database, table) pairs a call names, for ``mapped-tables``."""
    out = []
    for ref in spec.table_refs:
        db, table = value_at(args, ref.db), value_at(args, ref.table)
        if isinstance(db, str) and isinstance(table, str) and table:
            out.append((db, table))
    return out


def _catalog_named(names: list[str], args: Any, spec: MethodSpec) -> str | None:
    """The catalog a call names: in an ``@cat#db`` string, or in a request struct's catalog field."""
    for name in names:
        if name.startswith("@"):
            catalog = parse(name).catalog
            if catalog:
                return catalog
    for path in spec.catalog_fields:
        value = value_at(args, path)
        if isinstance(value, str) and value:
            return value
    return None


def _unknown(call: Call, routes: Routes) -> Plan:
    """A method waggle's IDL does not have: the primary answers, byte for byte, unless it names a database
    that is not the primary's to answer for."""
    planner = routes.planner
    foreign = _foreign_database(*strings_in(call.raw, call.wire.protocol), planner)
    if foreign is not None:
        return Plan(Kind.REFUSE, call, routes.primary.name, unknown_method=True, foreign=foreign,
                    refusal=f"Invalid method name: '{call.name}' (waggle does not know this method, and it names "
                            f"{foreign}; waggle cannot route it)")
    return _to(Kind.SEND, call, routes.primary, planner.naming(planner.primary), None, call.raw, None)


def _foreign_database(first: str | None, strings: list[str], planner: Planner) -> str | None:
    """The database, if any, that an unknown call names and that the primary cannot answer for as it is.

    Without an IDL nothing says which strings are database names: the first argument (where every HMS method
    puts its database) and ``@cat#db`` strings anywhere are taken as such."""
    candidates = [first] if first else []
    candidates += [text for text in strings if text.startswith("@")]
    for text in candidates:
        for candidate in {text, text.partition(".")[0]}:
            found = planner.lookup(candidate) if candidate else None
            if found is not None and found.target is not None and (
                    not found.target.member.primary or found.target.db != (parse(candidate).db or "").lower()):
                return f"database '{found.shown}' of metastore '{found.target.member.name}'"
    return None


def _unseen(names: list[str], routes: Routes) -> list[str]:
    """Names the call would send to the primary that the link registry has never seen: one of them may be a
    link another replica just made."""
    registry, planner = routes.registry, routes.planner
    assert registry is not None
    out = []
    for name in names:
        found = planner.lookup(name)
        if found is not None and found.target is not None and found.target.member.primary and \
                found.target.link is None:
            out.append(found.target.db)
    return registry.unknown(out)


def _link_call(call: Call, spec: MethodSpec, routes: Routes, asked: Set[str]) -> Plan | NeedLinks | None:
    """A create of a database with link properties, or a drop of a link's name; None for any other."""
    assert spec.link is not None
    planner, policy, primary = routes.planner, routes.config.server.remotes, routes.primary
    value = value_at(call.args, spec.link.path) if spec.link.path else None
    identity = call.session.identity or ("", ())
    if spec.link.op is LinkOp.DROP_TABLE:
        dropped = next((routes.tables[k] for k in _local_tables(call, spec, routes) if k in routes.tables), None)
        if dropped is None:
            return None
        why = creator_refusal(policy, *identity)
        if why is not None:
            return _refuse(call, primary.name, f"{call.name} refused: {why}", Refused.META, None)
        step = _to(Kind.LINK, call, primary, planner.naming(planner.primary), Decision(planner.primary), call.raw,
                   None)
        step.table_link = dropped[1]
        return step
    if spec.link.op is LinkOp.CREATE_TABLE:
        return _create_remote_table(call, value, routes, identity)
    if spec.link.op is LinkOp.DROP:
        link = routes.links.get(str(value or "").lower())
        if link is None:
            return None
        why = creator_refusal(policy, *identity)
        if why is not None:
            return _refuse(call, primary.name, f"{call.name} refused: {why}", Refused.META, None)
        step = _to(Kind.LINK, call, primary, planner.naming(planner.primary), Decision(planner.primary), call.raw,
                   None)
        step.link = link
        return step
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
                if f"connector:{connector_name.lower()}" not in asked:
                    return NeedLinks((), (connector_name.lower(),))
                return _refuse(call, primary.name, f"{call.name} refused: there is no data connector "
                                                   f"'{connector_name}'", Refused.META, None)
            remote_db = getattr(value, "remote_dbname", None) or (parameters or {}).get(REMOTE_DB_NAME)
            link = link_through(connector, name, remote_db, routes.config.federation)
        else:
            found = link_of(name, parameters)
            assert found is not None
            link = found
    except (LinkError, ConnectorError) as exc:
        return _refuse(call, primary.name, f"{call.name} refused: {exc}", Refused.META, None)
    why = policy_refusal(link, policy, routes.config.federation) or creator_refusal(policy, *identity)
    if why is None:
        why = _clash(link, routes)
    if why is None and link.member is not None and \
            not visible(routes.config.federation.member(link.member), link.database):
        why = f"'{link.database}' of metastore '{link.member}' is hidden by its mapped-databases"
    if why is None and len(routes.links) >= policy.max_links:
        why = f"the primary holds {len(routes.links)} links, the limit (remote-databases.max-links)"
    if why is None:
        why = create_refusal(planner.primary, name)
    if why is not None:
        return _refuse(call, primary.name, f"{call.name} refused: cannot link '{name}' to {link.describe()}: {why}",
                       Refused.META, None)
    # the primary stores the link as a plain database whose parameters are the link (a Hive 4 primary would
    # want a connector of its own for a REMOTE one)
    value.parameters = {**{k: v for k, v in (parameters or {}).items() if not k.startswith("waggle.remote.")},
                        **parameters_of(link)}
    if remote:
        value.type = None
        for attr in ("connector_name", "dataConnectorName", "remote_dbname"):
            if hasattr(value, attr):
                setattr(value, attr, None)
    step = _to(Kind.LINK, call, primary, planner.naming(planner.primary), Decision(planner.primary), None, None)
    step.link = link
    return step


def _first(obj: Any, *attrs: str) -> str:
    """The first of these string attributes that ``obj`` has set (the same field of two request structs)."""
    for attr in attrs:
        value = getattr(obj, attr, None)
        if value:
            return str(value)
    return ""


def _clash(link: Link, routes: Routes) -> str | None:
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


def _local_tables(call: Call, spec: MethodSpec, routes: Routes) -> list[tuple[str, str]]:
    """The (primary database, table) pairs a call names, in the primary's names (lower-case)."""
    out = []
    for db, table in _table_refs(call.args, spec):
        found = routes.planner.lookup(db)
        if found is not None and found.target is not None and found.target.member.primary and \
                found.target.link is None:
            out.append((found.target.db, table.lower()))
    return out


def _remote_table(call: Call, spec: MethodSpec, routes: Routes, asked: Set[str]) -> Plan | NeedLinks | None:
    """A call on a remote table goes to its metastore, in its names; None for any other call."""
    keys = _local_tables(call, spec, routes)
    found = next((routes.tables[k] for k in keys if k in routes.tables), None)
    if found is None:
        assert routes.registry is not None
        unseen = tuple(k for k in keys if k not in routes.registry.known_tables and f"table:{k[0]}.{k[1]}" not in asked)
        return NeedLinks((), (), unseen) if unseen else None
    member, table = found
    policy = routes.config.server.remotes
    if spec.access is not Access.READ and policy.read_only:
        return _refuse(call, member.name, f"{call.name} refused: table '{table.db}.{table.name}' is a link to "
                                          f"{table.describe()}, and links are read-only (remote-databases.access)",
                       Refused.META, None)
    for ref in spec.table_refs:  # the remote's names in the request
        if value_at(call.args, ref.table) is not None:
            _set(call.args, ref.db, table.link.database)
            _set(call.args, ref.table, table.table)
    pool = routes.pools[member.name]
    kind = Kind.BRIDGE if spec.bridge is not None and pool.caps.bridges(call.name, call.args) else Kind.SEND
    step = _to(kind, call, pool, routes.planner.naming(member), Decision(member), None, None)
    step.rewrite_reply, step.stream, step.table_link = True, False, table
    return step


def _set(obj: Any, path: Path, value: str) -> None:
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    if parent is not None:
        setattr(parent, path[-1], value)


def _create_remote_table(call: Call, table: Any, routes: Routes, identity: tuple[str, tuple[str, ...]]
                         ) -> Plan | None:
    """A create of a table with waggle.remote.table: a remote table, its stub kept in the primary."""
    parameters = getattr(table, "parameters", None)
    if not has_remote_table(parameters):
        return None
    planner, policy, primary = routes.planner, routes.config.server.remotes, routes.primary
    db, name = str(getattr(table, "dbName", "") or ""), str(getattr(table, "tableName", "") or "")
    try:
        found = table_link_of(db, name, parameters)
    except LinkError as exc:
        return _refuse(call, primary.name, f"{call.name} refused: {exc}", Refused.META, None)
    assert found is not None
    local = planner.lookup(db)
    why = policy_refusal(found.link, policy, routes.config.federation) or creator_refusal(policy, *identity)
    if why is None and (local is None or local.target is None or not local.target.member.primary or
                        local.target.link is not None):
        why = f"a remote table is made in a database of the primary, and '{db}' is not one"
    if why is None and found.link.member is not None and \
            not visible(routes.config.federation.member(found.link.member), found.link.database):
        why = f"'{found.link.database}' of metastore '{found.link.member}' is hidden by its mapped-databases"
    if why is not None:
        return _refuse(call, primary.name, f"{call.name} refused: cannot make '{db}.{name}' a link to "
                                           f"{found.describe()}: {why}", Refused.META, None)
    step = _to(Kind.LINK, call, primary, planner.naming(planner.primary), Decision(planner.primary), call.raw,
               None)
    step.table_link = found
    return step
