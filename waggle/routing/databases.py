"""Which metastore owns a database name, and what a metastore's database is called for clients.

Pure: built from immutable configuration (and, for MANUAL resolution, from the members' database
listings); no sockets. Both strategies answer the same two questions:

* :meth:`DatabaseMap.resolve` — a name as a client wrote it -> (member, name in that member), or None when no
  visible database has that name;
* :meth:`DatabaseMap.client_names` — a member's database -> every name clients see for it (the name and its
  alias), or ``()`` when it is hidden by ``mapped-databases``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from waggle.config.model import Federation, MetastoreConfig
from waggle.routing.links import Link


@dataclass(frozen=True, slots=True)
class Target:
    member: MetastoreConfig
    db: str  # the database's name inside the member's metastore (lower-case)
    #: the name is a link (a remote database under a local name), not the member's own naming
    link: Link | None = None


def visible(member: MetastoreConfig, db: str) -> bool:
    """``mapped-databases``: null shows everything, a list shows full, case-insensitive matches only."""
    if member.mapped_databases is None:
        return True
    return any(p.fullmatch(db) for p in member.mapped_databases)


def _alias_tables(member: MetastoreConfig) -> tuple[dict[str, str], dict[str, str]]:
    real_to_alias = dict(member.database_name_mapping)
    alias_to_real = {alias: real for real, alias in real_to_alias.items()}
    return real_to_alias, alias_to_real


class DatabaseMap:
    """Common interface of the PREFIXED and MANUAL strategies."""

    def resolve(self, name: str) -> Target | None:
        raise NotImplementedError

    def client_names(self, member: MetastoreConfig, db: str) -> tuple[str, ...]:
        raise NotImplementedError

    def renames(self, member: MetastoreConfig) -> bool:
        """Some name clients use for this member's databases is not the member's own (links)."""
        return False

    def linked(self, member: MetastoreConfig) -> Mapping[str, str]:
        """The links to this member's databases: local name -> the member's database."""
        return {}


class LinkedMap(DatabaseMap):
    """Another map, with links on top: a link's local name resolves to its remote database, and the remote
    database's names for clients include the link's (replies answer in the name the call used)."""

    def __init__(self, base: DatabaseMap, links: Mapping[str, tuple[MetastoreConfig, Link]]) -> None:
        self.base = base
        self.links = dict(links)
        self._by_target: dict[tuple[str, str], list[str]] = {}
        for name, (member, link) in sorted(self.links.items()):
            self._by_target.setdefault((member.name, link.database), []).append(name)
        self._linked_members = {member.name for member, _ in self.links.values()}
        self._outside = {member.name for member, link in self.links.values() if link.uri is not None}

    def resolve(self, name: str) -> Target | None:
        found = self.links.get(name.lower())
        if found is not None:
            member, link = found
            return Target(member, link.database, link)
        return self.base.resolve(name)

    def client_names(self, member: MetastoreConfig, db: str) -> tuple[str, ...]:
        # a URI link's metastore is none of the base map's members: only its links name its databases
        own = self.base.client_names(member, db) if member.name not in self._outside else ()
        linked = self._by_target.get((member.name, db.lower()))
        return own + tuple(linked) if linked else own

    def renames(self, member: MetastoreConfig) -> bool:
        return member.name in self._linked_members or self.base.renames(member)

    def linked(self, member: MetastoreConfig) -> Mapping[str, str]:
        if member.name not in self._linked_members:
            return {}
        return {name: link.database for name, (owner, link) in self.links.items() if owner.name == member.name}


@dataclass(frozen=True)
class _MemberNames:
    member: MetastoreConfig
    prefix: str
    real_to_alias: dict[str, str]
    alias_to_real: dict[str, str]


class PrefixedMap(DatabaseMap):
    """Each member's databases appear as ``prefix + name``; the longest matching prefix wins."""

    def __init__(self, federation: Federation) -> None:
        entries = []
        for m in federation.members:
            real_to_alias, alias_to_real = _alias_tables(m)
            entries.append(_MemberNames(m, m.database_prefix.lower(), real_to_alias, alias_to_real))
        # longest prefix first; among equals (only possible for ""), the primary first
        self._by_prefix = sorted(entries, key=lambda e: (-len(e.prefix), not e.member.primary))
        self._by_name = {e.member.name: e for e in entries}

    def resolve(self, name: str) -> Target | None:
        lowered = name.lower()
        for entry in self._by_prefix:
            if not lowered.startswith(entry.prefix):
                continue
            rest = lowered[len(entry.prefix):]
            if not rest:
                continue
            real = entry.alias_to_real.get(rest, rest)
            if visible(entry.member, real):
                return Target(entry.member, real)
            return None  # the owning prefix hides it: never fall through to a shorter prefix
        return None

    def client_names(self, member: MetastoreConfig, db: str) -> tuple[str, ...]:
        entry = self._by_name[member.name]
        real = db.lower()
        if not visible(member, real):
            return ()
        alias = entry.real_to_alias.get(real)
        return (entry.prefix + real,) if alias is None else (entry.prefix + real, entry.prefix + alias)


@dataclass(frozen=True, slots=True)
class Clash:
    name: str
    kept: str  # member that serves the name
    hidden: str  # member whose database of the same name is not reachable

    def describe(self) -> str:
        return (f"database '{self.name}' exists in metastores '{self.kept}' and '{self.hidden}'; "
                f"serving it from '{self.kept}' (exclude it with mapped-databases in '{self.hidden}')")


@dataclass(frozen=True)
class ManualMap(DatabaseMap):
    """Each visible database belongs to exactly one member, learned from the members' listings.

    On a name present in several members, the first in configuration order (the primary first) keeps it and
    the clash is reported; it is never a per-call failure.
    """

    owners: Mapping[str, Target] = field(default_factory=dict)
    clashes: tuple[Clash, ...] = ()
    aliases: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # member -> real -> alias

    @classmethod
    def build(cls, federation: Federation, listings: Mapping[str, Iterable[str]]) -> ManualMap:
        owners: dict[str, Target] = {}
        clashes: list[Clash] = []
        aliases: dict[str, dict[str, str]] = {}
        for member in federation.members:
            real_to_alias, _ = _alias_tables(member)
            aliases[member.name] = real_to_alias
            for db in listings.get(member.name, ()):
                real = db.lower()
                if not visible(member, real):
                    continue
                alias = real_to_alias.get(real)
                for shown in (real, alias) if alias else (real,):
                    existing = owners.get(shown)
                    if existing is not None:
                        if existing.member.name != member.name:
                            clashes.append(Clash(shown, existing.member.name, member.name))
                        continue
                    owners[shown] = Target(member, real)
        return cls(owners, tuple(clashes), aliases)

    def resolve(self, name: str) -> Target | None:
        return self.owners.get(name.lower())

    def client_names(self, member: MetastoreConfig, db: str) -> tuple[str, ...]:
        real = db.lower()
        out = []
        alias = self.aliases.get(member.name, {}).get(real)
        for shown in (real, alias) if alias else (real,):
            owner = self.owners.get(shown)
            if owner is not None and owner.member.name == member.name and owner.db == real:
                out.append(shown)
        if not out and visible(member, real) and real not in self.owners:
            out.append(real)  # created since the last refresh: shown until the next one decides
        return tuple(out)
