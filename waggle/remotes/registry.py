"""Which of the primary's databases are links, read from the primary itself.

The registry knows every primary database name it has seen, and which of them are links. A name it has not
seen (a link another replica just created, say) is looked up in the primary before the call that names it
is planned (:class:`~waggle.call.values.NeedLinks`), so a new link works everywhere at once. The whole list
is reread every ``remote-databases.refresh-seconds``; that is how other replicas learn of a dropped link.

A database whose link properties the policy forbids is served as the plain database it is. The refusal is
logged once per database, and such a database is never a way around the policy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import gevent.pool

from waggle.common.logging import get_logger
from waggle.config.model import MetastoreConfig, WaggleConfig
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore.ttypes import Database
from waggle.remotes import connectors
from waggle.remotes.connectors import Connector
from waggle.routing.links import Link, LinkError, is_link, link_of, policy_refusal, uri_member
from waggle.routing.table_links import TableLink, has_remote_table, table_link_of
from waggle.upstream.client import Identity, UpstreamError

if TYPE_CHECKING:
    from waggle.upstream.pool import UpstreamPool
    from waggle.upstream.token_store import MetastoreTokenStore

log = get_logger("waggle.remotes")
#: names of plain primary databases remembered (beyond it the oldest are forgotten and looked up again)
MAX_KNOWN = 200_000
LOOKUPS_AT_ONCE = 8


class LinkRegistry:
    def __init__(self) -> None:
        #: local name -> link, as stored in the primary (policy not applied)
        self.stored: dict[str, Link] = {}
        #: every primary database name looked at (links and plain ones), lower-case
        self.known: dict[str, None] = {}
        #: Hive 4 data connectors (type hivemetastore), by name
        self.connectors: dict[str, Connector] = {}
        self._uri_members: dict[str, MetastoreConfig] = {}
        #: remote tables, by (local database, local table); and the primary's tables looked at (reread with
        #: every refresh: a table is cheap to look up again)
        self.tables: dict[tuple[str, str], TableLink] = {}
        self.known_tables: dict[tuple[str, str], None] = {}
        self._reported: set[tuple[str, str]] = set()

    def __len__(self) -> int:
        return len(self.stored)

    def add(self, link: Link) -> None:
        self.stored[link.name] = link
        self.known[link.name] = None

    def remove(self, name: str) -> None:
        self.stored.pop(name.lower(), None)
        self.known.pop(name.lower(), None)

    def unknown(self, names: Iterable[str]) -> list[str]:
        return [n for n in {n.lower() for n in names} if n and n not in self.known]

    def learn(self, primary: UpstreamPool, names: Iterable[str]) -> bool:
        """Look these names up in the primary; True when the links changed."""
        wanted = self.unknown(names)
        if not wanted:
            return False
        before = dict(self.stored)
        group = gevent.pool.Pool(LOOKUPS_AT_ONCE)
        # every answer first, then the books at once: a name must not be known before the links it brings are
        # served (a call in between would find it known and be planned without its link)
        found = list(zip(wanted, group.imap(lambda n: _database(primary, n), wanted), strict=True))
        for name, (answered, database) in found:
            if not answered:
                continue  # asked again next time
            self.known[name] = None
            if database is None:
                continue
            try:
                link = link_of(name, database.parameters)
            except LinkError as exc:
                self._report(name, f"its link properties are malformed: {exc}")
                continue
            if link is not None:
                self.stored[name] = link
        while len(self.known) > MAX_KNOWN:
            self.known.pop(next(iter(self.known)))
        return self.stored != before

    def add_table(self, table: TableLink) -> None:
        self.tables[(table.db, table.name)] = table
        self.known_tables[(table.db, table.name)] = None

    def remove_table(self, key: tuple[str, str]) -> None:
        self.tables.pop(key, None)
        self.known_tables.pop(key, None)

    def learn_tables(self, primary: UpstreamPool, keys: Iterable[tuple[str, str]]) -> bool:
        """Look these (database, table) names up in the primary; True when the remote tables changed. A table
        that does not exist is not remembered (it may be made as a remote table at any time)."""
        found: list[tuple[tuple[str, str], Any]] = []
        for key in keys:
            if key in self.known_tables:
                continue
            try:
                result = primary.exchange(None, "get_table", T.get_table_args(dbname=key[0], tbl_name=key[1]),
                                          T.get_table_result)
            except UpstreamError as exc:
                log.info("link.lookup_failed", table=f"{key[0]}.{key[1]}", error=str(exc))
                continue
            table = getattr(result, "success", None)
            if table is not None:
                found.append((key, table))
        # the books at once, after every lookup (see learn)
        changed = False
        for key, table in found:
            self.known_tables[key] = None
            try:
                link = table_link_of(key[0], key[1], table.parameters)
            except LinkError as exc:
                self._report(f"{key[0]}.{key[1]}", f"its link properties are malformed: {exc}")
                continue
            if link is not None:
                self.tables[key] = link
                changed = True
        while len(self.known_tables) > MAX_KNOWN:
            self.known_tables.pop(next(iter(self.known_tables)))
        return changed

    def active_tables(self, config: WaggleConfig) -> dict[tuple[str, str], tuple[MetastoreConfig, TableLink]]:
        """The remote tables the policy allows now, with their metastores."""
        policy, federation = config.server.remotes, config.federation
        out: dict[tuple[str, str], tuple[MetastoreConfig, TableLink]] = {}
        if not policy.enabled:
            return out
        for key, table in self.tables.items():
            why = policy_refusal(table.link, policy, federation)
            if why is not None:
                self._report(f"{key[0]}.{key[1]}", why)
                continue
            link = table.link
            out[key] = (federation.member(link.member) if link.member else self.uri_member(link), table)
        return out

    def load_connectors(self, store: MetastoreTokenStore) -> None:
        """Reread every connector from the primary's key-value store."""
        found: dict[str, Connector] = {}
        for key in store.identifiers(connectors.KEY_PREFIX):
            text = store.get(key)
            if text:
                try:
                    found[key[len(connectors.KEY_PREFIX):]] = Connector.from_json(text)
                except (ValueError, KeyError) as exc:
                    log.warning("connector.unreadable", key=key, error=str(exc))
        self.connectors = found

    def refresh(self, primary: UpstreamPool) -> bool:
        """Reread the primary's database list: forget what is gone, look up what is new."""
        result = primary.invoke(None, "get_all_databases", T.get_all_databases_args(), T.get_all_databases_result)
        names = {str(n).lower() for n in result.success or ()}
        before = dict(self.stored)
        # remote tables are looked up again (a dropped one disappears here); plain ones as calls name them
        tables = dict(self.tables)
        self.tables, self.known_tables = {}, {}
        self.learn_tables(primary, [k for k in tables if k[0] in names])
        changed_tables = self.tables != tables
        for gone in [n for n in self.known if n not in names]:
            self.known.pop(gone, None)
            self.stored.pop(gone, None)
        self.learn(primary, names)
        return self.stored != before or changed_tables

    def served(self, config: WaggleConfig) -> dict[str, Link]:
        """The links the policy allows now, by name (see :meth:`active`)."""
        return {name: link for name, (_, link) in self.active(config).items()}

    def active(self, config: WaggleConfig) -> dict[str, tuple[MetastoreConfig, Link]]:
        """The links the policy allows now, with their members; the others are reported once and left out."""
        policy, federation = config.server.remotes, config.federation
        out: dict[str, tuple[MetastoreConfig, Link]] = {}
        if not policy.enabled:
            return out
        for name, link in self.stored.items():
            why = policy_refusal(link, policy, federation)
            if why is not None:
                self._report(name, why)
                continue
            out[name] = (federation.member(link.member) if link.member else self.uri_member(link), link)
        return out

    def uri_member(self, link: Link) -> MetastoreConfig:
        """The metastore of a URI link (one per URI, kept so that its pool is kept)."""
        assert link.uri is not None
        member = self._uri_members.get(link.uri)
        if member is None:
            member = self._uri_members[link.uri] = uri_member(link.uri)
        return member

    def _report(self, name: str, why: str) -> None:
        if (name, why) not in self._reported:
            self._reported.add((name, why))
            log.warning("link.refused", database=name, reason=why,
                        detail="served as an ordinary database of the primary")


def _database(primary: UpstreamPool, name: str) -> tuple[bool, Database | None]:
    """(the primary answered, the database or None when there is none of that name)."""
    try:
        result = primary.exchange(None, "get_database", T.get_database_args(name=name), T.get_database_result)
    except UpstreamError as exc:
        log.info("link.lookup_failed", database=name, error=str(exc))
        return False, None
    database = getattr(result, "success", None)
    if database is None and getattr(result, "o1", None) is None:  # neither the database nor NoSuchObject
        return False, None
    return True, database if isinstance(database, Database) else None


def remote_refusal(pool: UpstreamPool, identity: Identity | None, link: Link) -> str | None:
    """Why the remote end of a new link cannot be linked (it is missing, or is a link itself), or None. Asked
    as the caller, so a database the caller cannot see cannot be linked either."""
    try:
        result = pool.exchange(identity, "get_database", T.get_database_args(name=link.database),
                               T.get_database_result)
    except UpstreamError as exc:
        return f"the remote metastore cannot be asked: {exc}"
    database = getattr(result, "success", None)
    if not isinstance(database, Database):
        return f"{link.describe().replace('database ', 'there is no database ', 1)}"
    if is_link(database.parameters):
        return f"{link.describe()} is itself a link; a link must name a real database"
    return None


def remote_table_refusal(pool: UpstreamPool, identity: Identity | None, table: TableLink) -> str | None:
    """Why the remote end of a new remote table cannot be linked (the table is missing, or is a remote table
    itself), or None."""
    try:
        result = pool.exchange(identity, "get_table", T.get_table_args(dbname=table.link.database,
                                                                       tbl_name=table.table), T.get_table_result)
    except UpstreamError as exc:
        return f"the remote metastore cannot be asked: {exc}"
    found = getattr(result, "success", None)
    if found is None:
        return f"there is no {table.describe()}"
    if has_remote_table(found.parameters):
        return f"{table.describe()} is itself a remote table; a link must name a real table"
    return None


def create_stub(primary: UpstreamPool, identity: Identity | None, database: Any) -> str | None:
    """Store a link in the primary: a database whose parameters are the link (``database`` is the client's
    Database or CreateDatabaseRequest, already carrying them). Always ``create_database``, which every Hive
    release has. None when it was created, else why not."""
    def first(*attrs: str) -> Any:
        return next((getattr(database, a) for a in attrs if getattr(database, a, None) is not None), None)

    stub = Database(name=first("name", "databaseName"), description=first("description"),
                    locationUri=first("locationUri"), parameters=dict(first("parameters") or {}),
                    ownerName=first("ownerName"), ownerType=first("ownerType"))
    try:
        result = primary.exchange(identity, "create_database", T.create_database_args(database=stub),
                                  T.create_database_result)
    except UpstreamError as exc:
        return str(exc)
    for attr in ("o1", "o2", "o3"):
        raised = getattr(result, attr, None)
        if raised is not None:
            return f"{type(raised).__name__}: {getattr(raised, 'message', raised)}"
    if not hasattr(result, "o1"):  # a TApplicationException
        return f"metastore '{primary.name}' failed: {getattr(result, 'message', result)}"
    return None
