"""What a call asks of the grants, and what they answer, before anything is sent. Pure.

From the method table alone (:attr:`~waggle.hms.methods.MethodSpec.privilege`, its table references, lock
components and database fields, all derived from the IDL) a call's objects are found in the names the client used,
which are waggle's: each table it names, and each database it names without a table.

* A read needs each object to be visible to the caller (any privilege on it): a hidden one is answered as Hive's
  filter hook answers, ``NoSuchObjectException``, so nothing says that it exists.
* A write needs its privilege on each object: a refusal is a ``MetaException`` naming the rule that decided.
* A lock needs ``select`` for a shared read lock, else ``update``.
* An administrator's call that names no database (roles, grants, catalogs) needs ``admin`` on database ``*``.
* Listings are not refused: their answers are filtered (:mod:`waggle.grants.listings`), and so are the merged
  notification log's events (``server/own_log.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from thrift.Thrift import TType

from waggle.config.kinds import Privilege
from waggle.grants.policy import Policy
from waggle.grants.verdict import Caller
from waggle.hms import specs
from waggle.hms.fields import table_refs, value_at
from waggle.hms.gen.hive_metastore.ttypes import LockType
from waggle.hms.methods import Access, MethodSpec, Route
from waggle.hms.names import parse
from waggle.hms.rewrite import CALL_NAMES

#: the database an administrator's call without one is checked against
EVERY_DATABASE = "*"


class Object(NamedTuple):
    """One thing a call reads or changes: a database (``table`` None) or a table, in the client's names."""

    db: str
    table: str | None
    privilege: Privilege

    def describe(self) -> str:
        return f"{'table' if self.table is not None else 'database'} '{self.shown}'"

    @property
    def shown(self) -> str:
        return self.db if self.table is None else f"{self.db}.{self.table}"


class Refused(NamedTuple):
    """A call the grants refuse: the message the client gets, whether it is answered as an object that does not
    exist, and what the audit line says."""

    message: str
    hidden: bool
    rule: str
    obj: Object


class Allowed(NamedTuple):
    """A write the grants allow (for the audit of allowed writes)."""

    rule: str
    obj: Object


def is_listing(spec: MethodSpec) -> bool:
    """Whether a read's answer is a listing, filtered rather than refused (notification events included: the
    merged log leaves out those of what the caller may not see)."""
    return spec.access is Access.READ and (spec.merge is not None or spec.lists_tables or spec.log is not None or
                                           spec.result_names is not None or spec.route is Route.FANOUT)


def objects(spec: MethodSpec, args: Any) -> list[Object]:
    """The objects a call names, with the privilege each needs."""
    privilege = spec.privilege or Privilege.UPDATE
    if spec.access is Access.LOCK:
        out = []
        for c in value_at(args, spec.lock_components) or ():
            db = parse(c.dbname or "").db
            if db:
                need = Privilege.SELECT if c.type == LockType.SHARED_READ else Privilege.UPDATE
                out.append(Object(db, c.tablename or None, need))
        return out
    named = table_refs(args, spec) if spec.table_refs else []
    listed = _listed(args)
    tables = [(_db(db), table) for db, table in (named + listed if listed else named)]
    out = [Object(db, table, privilege) for db, table in tables if db]
    covered = {db.lower() for db, _ in tables}
    for name in CALL_NAMES.names_in(args):
        db = _db(name)
        if db and not _pattern(db) and db.lower() not in covered:
            covered.add(db.lower())
            out.append(Object(db, None, privilege))
    if not out and privilege is Privilege.ADMIN and spec.token is None:
        out.append(Object(EVERY_DATABASE, None, privilege))
    return out


#: args class -> (struct argument, its owner field) of the arguments that carry an object with its owner
_OWNERS: dict[type, tuple[tuple[str, str], ...]] = {}


def owner_of(args: Any) -> str | None:
    """The owner a call gives the object it creates or alters (``Table.owner``, ``Database.ownerName``): what
    Ranger's ``{OWNER}`` is matched against. None when the call names none."""
    cls = type(args)
    found = _OWNERS.get(cls)
    if found is None:
        found = _OWNERS[cls] = tuple(
            (f.attr, o) for f in specs.fields(cls) if f.ttype == TType.STRUCT and f.struct is not None
            for o in ("owner", "ownerName") if specs.field_named(f.struct, o) is not None)
    for attr, field in found:
        owner = getattr(getattr(args, attr, None), field, None)
        if isinstance(owner, str) and owner:
            return owner
    return None


def check(policy: Policy, who: Caller, spec: MethodSpec, args: Any) -> Refused | Allowed | None:
    """The grants' answer to a call: refused, an allowed write (with the rule that allowed its first object), or
    None for an allowed read (and a listing, a call that names nothing)."""
    if is_listing(spec):
        return None
    return _checked(policy, who, spec, objects(spec, args), owner_of(args) if spec.changes else None)


def check_object(policy: Policy, who: Caller, spec: MethodSpec, db: str, table: str | None
                 ) -> Refused | Allowed | None:
    """The grants' answer to ``spec`` on one database (``table`` None) or table."""
    return _checked(policy, who, spec, [Object(db, table, spec.privilege or Privilege.UPDATE)])


def _checked(policy: Policy, who: Caller, spec: MethodSpec, named: list[Object], owner: str | None = None
             ) -> Refused | Allowed | None:
    allowed: Allowed | None = None
    for obj in named:
        if spec.access is Access.READ:
            seen = policy.sees(who, obj.db, obj.table)
            if not seen.allowed:
                return Refused(_missing(obj), True, seen.rule, obj)
            continue
        verdict = policy.decide(who, obj.db, obj.table, obj.privilege, owner)
        if not verdict.allowed:
            return Refused(f"{spec.name} refused: {who.describe()} has no {obj.privilege.value} privilege on "
                           f"{obj.describe()} ({verdict.rule})", False, verdict.rule, obj)
        allowed = allowed or Allowed(verdict.rule, obj)
    return allowed


#: args class -> its list arguments whose structs name their table (found once per class)
_LISTS: dict[type, tuple[str, ...]] = {}


def _table_lists(cls: type) -> tuple[str, ...]:
    found = _LISTS.get(cls)
    if found is None:
        found = _LISTS[cls] = tuple(
            f.attr for f in specs.fields(cls) if f.ttype in specs.CONTAINERS and f.struct is not None and
            specs.field_named(f.struct, "dbName") is not None and specs.field_named(f.struct, "tableName") is not None)
    return found


def _listed(args: Any) -> list[tuple[str, str]]:
    """(database, table) of each struct in a list argument that names its table (``add_partitions``'s
    partitions), one per table."""
    attrs = _table_lists(type(args))
    if not attrs:
        return []
    out: dict[tuple[str, str], None] = {}
    for attr in attrs:
        value = getattr(args, attr, None)
        if isinstance(value, list):
            for item in value:
                db, table = getattr(item, "dbName", None), getattr(item, "tableName", None)
                if isinstance(db, str) and isinstance(table, str) and table:
                    out[(db, table)] = None
    return list(out)


def _missing(obj: Object) -> str:
    """What Hive says of an object that does not exist."""
    if obj.table is None:
        return f"database '{obj.db}' does not exist"
    return f"{obj.db}.{obj.table} table not found"


def _db(name: str) -> str:
    """The database of a name as a call gives it (``@cat#db`` or ``db``)."""
    return (parse(name).db or "") if name.startswith("@") else name


def _pattern(name: str) -> bool:
    return "*" in name or "|" in name
