"""Where one call goes and what it may do: decided from the method table and the names in the call. Pure.

Given the database names a call carries (as the client wrote them), :func:`decide` answers

* which member receives it (one member: calls never span metastores);
* whether it is refused before anything is sent (unknown or hidden database, a write the access rules do not
  allow, names owned by several members), with the exception type and message the client gets;
* how names translate between the client's view and the member's (:class:`Naming`), in both directions.

Fan-out calls (listings) are planned by :mod:`waggle.call.merge` with the same :class:`Naming`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field

from waggle.config.model import AccessControlType, DatabaseResolution, Federation, MetastoreConfig
from waggle.hms.gen.hive_metastore.ttypes import LockType
from waggle.hms.methods import Access, LinkOp, MethodSpec, Route
from waggle.hms.names import parse
from waggle.routing.access import create_refusal, table_visible, write_refusal
from waggle.routing.databases import DatabaseMap, Target, visible
from waggle.routing.links import Link


class Naming:
    """How one member's database names look to clients under one :class:`DatabaseMap`."""

    __slots__ = ("dbmap", "identity", "member", "mode", "prefix")

    def __init__(self, member: MetastoreConfig, dbmap: DatabaseMap, mode: DatabaseResolution) -> None:
        self.member = member
        self.dbmap = dbmap
        self.mode = mode
        self.prefix = member.database_prefix.lower() if mode is DatabaseResolution.PREFIXED else ""
        #: Client and member spell every name the same way: calls and replies can travel unchanged.
        self.identity = not self.prefix and not member.database_name_mapping and not dbmap.renames(member)

    def to_member(self, name: str) -> str:
        """A client's name (``db`` or ``@cat#db``) as this member knows it; names of others stay as they are."""
        qualified = parse(name)
        if not qualified.db:
            return name
        target = self.dbmap.resolve(qualified.db)
        if target is None or target.member.name != self.member.name:
            return name
        return qualified.requalify(target.db)

    def to_client(self, name: str, preferred: Mapping[str, str] | None = None) -> str:
        """A member's name as the client sees it: the spelling the client used in this call, if any."""
        qualified = parse(name)
        if not qualified.db:
            return name
        real = qualified.db.lower()
        if preferred:
            shown = preferred.get(real)
            if shown is not None:
                return qualified.requalify(shown)
        names = self.dbmap.client_names(self.member, real)
        return qualified.requalify(names[0] if names else self.prefix + real)

    def client_names(self, name: str) -> tuple[str, ...]:
        """Every name clients see for one of this member's databases; ``()`` when it is hidden."""
        return self.dbmap.client_names(self.member, name)


class Refused(enum.Enum):
    NO_SUCH_OBJECT = "NoSuchObjectException"
    META = "MetaException"


@dataclass(frozen=True, slots=True)
class Decision:
    member: MetastoreConfig
    refusal: str | None = None
    refused_as: Refused = Refused.META
    #: member's name -> the client's spelling, for the names this call used (replies answer in kind)
    requested: Mapping[str, str] = field(default_factory=dict)
    #: the request carries a name the member spells differently: it must be re-encoded
    rewrite_request: bool = False
    #: a database this call creates, added to the in-memory whitelist when it succeeds
    creates: str | None = None
    #: the call names a link: the remote database it stands for
    link: Link | None = None


@dataclass(frozen=True, slots=True)
class Lookup:
    """A client's name resolved: its member and real name, or why it cannot be used."""

    shown: str
    target: Target | None  # None: no visible database has this name


class Planner:
    """Decides calls for one immutable configuration and one database map (rebuilt when either changes)."""

    def __init__(self, federation: Federation, mode: DatabaseResolution, dbmap: DatabaseMap,
                 links_read_only: bool = True, extra_members: tuple[MetastoreConfig, ...] = ()) -> None:
        self.federation = federation
        #: remote-databases.access: writes through a link are refused
        self.links_read_only = links_read_only
        self.mode = mode
        self.dbmap = dbmap
        self.primary = federation.primary
        self.namings = {m.name: Naming(m, dbmap, mode) for m in federation.members}
        for member in extra_members:  # the metastores of URI links
            self.namings[member.name] = Naming(member, dbmap, mode)

    def naming(self, member: MetastoreConfig) -> Naming:
        return self.namings[member.name]

    def lookup(self, name: str) -> Lookup | None:
        """None for a name that names no single database (``@cat#``, empty)."""
        db = parse(name).db
        if not db:
            return None
        target = self.dbmap.resolve(db)
        if target is not None:
            return Lookup(db, target)
        if self.mode is DatabaseResolution.MANUAL and visible(self.primary, db.lower()):
            # not (yet) in the map: the primary answers (it may have just been created there)
            return Lookup(db, Target(self.primary, db.lower()))
        return Lookup(db, None)

    def _prefix_owner(self, name: str) -> MetastoreConfig:
        """The member whose prefix a name carries (the primary when none does), visible or not."""
        lowered = name.lower()
        owners = [n for n in self.namings.values() if n.prefix and lowered.startswith(n.prefix)]
        return max(owners, key=lambda n: len(n.prefix)).member if owners else self.primary

    def decide(self, spec: MethodSpec, names: Iterable[str], locks: Iterable[tuple[str, int]] = (),
               created: Mapping[str, Set[str]] | None = None, tables: Iterable[tuple[str, str]] = ()
               ) -> Decision:
        """Plan one call. ``names``: every database name in the request; ``locks``: (name, LockType) of a
        lock request's components; ``tables``: (database, table) pairs for ``mapped-tables``."""
        created = created or {}
        lookups: list[Lookup] = []
        for name in names:
            found = self.lookup(name)
            if found is not None:
                lookups.append(found)
        for found in lookups:
            if found.target is None:
                if spec.access is Access.CREATE_DATABASE:
                    owner = self._prefix_owner(found.shown)
                    return Decision(self.primary, create_refusal(owner, found.shown)
                                    or f"database '{found.shown}' is hidden by mapped-databases")
                return Decision(self.primary, f"database '{found.shown}' does not exist (or is not visible "
                                              f"through waggle)", Refused.NO_SUCH_OBJECT)
        if spec.route is Route.DATABASE:
            members = {f.target.member.name: f for f in lookups if f.target is not None}
            if len(members) > 1:
                a, b = list(members.values())[:2]
                assert a.target is not None and b.target is not None
                return Decision(self.primary, f"{spec.name} names databases of two metastores: '{a.shown}' "
                                              f"('{a.target.member.name}') and '{b.shown}' "
                                              f"('{b.target.member.name}'); waggle sends a call to one metastore")
            member = next(iter(members.values())).target.member if members else self.primary  # type: ignore
        else:
            member = self.primary
        naming = self.namings[member.name]
        requested: dict[str, str] = {}
        rewrite = False
        own = [f for f in lookups if f.target is not None and f.target.member.name == member.name]
        for f in own:
            assert f.target is not None
            requested.setdefault(f.target.db, f.shown)
            if not naming.identity and f.shown != f.target.db:
                rewrite = True
        for db, table in tables:
            found = self.lookup(db)
            if found is not None and found.target is not None and \
                    not table_visible(found.target.member, found.target.db, table):
                return Decision(member, f"table '{found.shown}.{table}' does not exist (or is not visible "
                                        f"through waggle)", Refused.NO_SUCH_OBJECT)
        if spec.link is not None and spec.link.op is LinkOp.DROP_TABLE:
            linked = next((f for f in own if self._link_refusal(f) is not None), None)
            if linked is not None:
                # refused, naming the link; within a stock DROP DATABASE ... CASCADE of the link the call core
                # answers it as a table that does not exist (see waggle.remotes.planning.cascading)
                assert linked.target is not None
                return Decision(member, f"{spec.name}: nothing dropped: {self._link_refusal(linked)}; the remote "
                                        f"table stays (DROP DATABASE {linked.shown} CASCADE removes the link alone)",
                                link=linked.target.link)
        refusal = self._access(spec, member, own, locks, created)
        if refusal is not None:
            return Decision(member, refusal)
        creates = None
        if spec.access is Access.CREATE_DATABASE and own and member.access_control_type is \
                AccessControlType.READ_AND_WRITE_AND_CREATE_ON_DATABASE_WHITELIST:
            assert own[0].target is not None
            creates = own[0].target.db
        link = next((f.target.link for f in own if f.target is not None and f.target.link is not None), None)
        return Decision(member, None, Refused.META, requested, rewrite, creates, link)

    def _access(self, spec: MethodSpec, member: MetastoreConfig, own: list[Lookup],
                locks: Iterable[tuple[str, int]], created: Mapping[str, Set[str]]) -> str | None:
        access = spec.access
        if access is Access.READ:
            return None
        if access is Access.CREATE_CATALOG:
            if not member.access_control_type.primary_only:
                return (f"{spec.name} is not allowed: the primary metastore '{member.name}' has "
                        f"access-control-type {member.access_control_type.value}")
            return None
        if access is Access.CREATE_DATABASE:
            return create_refusal(member, own[0].shown if own else "")
        writable = created.get(member.name, frozenset())
        if access is Access.LOCK:
            for name, lock_type in locks:
                if lock_type == LockType.SHARED_READ:  # a read: no write access needed
                    continue
                found = self.lookup(name)
                if found is not None and found.target is not None:
                    why = self._link_refusal(found) or \
                        write_refusal(found.target.member, found.target.db, writable, found.shown)
                    if why is not None:
                        return f"{why}; refused a lock of type {LockType._VALUES_TO_NAMES.get(lock_type, lock_type)}"
            return None
        for f in own:
            assert f.target is not None
            why = self._link_refusal(f) or write_refusal(member, f.target.db, writable, f.shown)
            if why is not None:
                return f"{spec.name} refused: {why}"
        return None

    def _link_refusal(self, found: Lookup) -> str | None:
        link = found.target.link if found.target is not None else None
        if link is None or not self.links_read_only:
            return None
        return f"database '{found.shown}' is a link to {link.describe()}, and linked databases are read-only " \
               f"(remote-databases.access)"

