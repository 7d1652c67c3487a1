"""Whether a call is answered from a copy, and how: pure, asked by the call core (:func:`waggle.call.plan.plan`)
once routing chose a federated member, with the member's health and the copies as inputs. A copy is chosen
when the call is planned, never as a retry: a call never waits for a dead member when a copy can answer it.

- ``when-down``, the member down: a read of a table that has a copy (within ``max-staleness``) is answered by
  the primary from the copy (:class:`FromCopy`); a read of a database that has copies too (its tables listed
  are the copied ones). Writes are refused, saying that reads are served from copies (:class:`WriteRefused`).
- ``prefer``, the member up: a read of a table's object (``get_table``) is answered from its copy; a read of
  partitions reads the source and the copy at once and merges them (:class:`FromBoth`). Other reads go to
  the member. Only copies with files of their own (``mode: copy``) are preferred.
- A read lock on tables answered from copies is taken in the primary (:class:`LockInPrimary`).
- An Iceberg commit built on the copy's metadata is refused (:class:`WriteRefused`): the copy is read-only.

:func:`planned` is the call core's one question: it answers with the choice finished, the request to send the
primary already in the copy's names (``args``, and ``fill``, the catalog the client named, for a primary without
catalogs), so the core only makes it a plan.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from waggle.config.model import CopyReads, MetastoreConfig, PartialCopies
from waggle.copies.catalog import Copies, Copy
from waggle.copies.serve import Served, carries, objects_in
from waggle.hms.fields import catalog_named, copied_along, replaced, table_refs, value_at
from waggle.hms.gen.hive_metastore.ttypes import LockType, Partition, PartitionWithoutSD, Table
from waggle.hms.methods import Access, MethodSpec
from waggle.hms.names import parse
from waggle.hms.rewrite import CALL_NAMES
from waggle.hms.service import MethodIO
from waggle.routing.federation import Naming
from waggle.synced import objects as o

DOWN, PREFER = "down", "prefer"


@dataclass(frozen=True, slots=True)
class FromCopy:
    """The primary answers from the copy: the call's names are the copy's (``args``, and ``fill``: the catalog
    to fill in for a primary without catalogs), the reply made the source's."""

    served: Served
    args: Any = None
    fill: str | None = None


@dataclass(frozen=True, slots=True)
class FromBoth:
    """The member and the primary are asked at once; the source's partitions get the copy's storage. The
    primary is asked with ``args`` (and ``fill``), as for :class:`FromCopy`."""

    served: Served
    args: Any = None
    fill: str | None = None


@dataclass(frozen=True, slots=True)
class LockInPrimary:
    """A read lock on tables answered from copies: the primary takes it, on the copies, named by these
    (copy database, copy table) per component (None: a component of the primary's own, left as it is)."""

    renamed: tuple[tuple[str, str] | None, ...]
    #: the call's arguments with those components renamed
    args: Any = None


@dataclass(frozen=True, slots=True)
class WriteRefused:
    """A write refused before anything is sent: ``message`` (the member's down message comes first when
    ``down``)."""

    message: str
    down: bool


Choice = FromCopy | FromBoth | LockInPrimary | WriteRefused


@dataclass(frozen=True, slots=True)
class Facts:
    """What a choice depends on besides the call: the copies, and the health of the member and the primary."""

    copies: Copies
    #: the member is up; the primary (which holds the copies) is up
    up: bool
    primary_up: bool
    now: float
    primary: str
    #: the primary understands catalogs (else the copy's names are sent plain)
    primary_catalogs: bool = True


def serves(member: MetastoreConfig, copies: Copies) -> bool:
    """Whether reads of ``member`` may be answered from copies at all (asked before anything else)."""
    return copies.serve(member)


def planned(spec: MethodSpec, io: MethodIO | None, args: Any, names: Sequence[str], naming: Naming, facts: Facts,
            qualified: bool = False) -> Choice | None:
    """:func:`choose`, finished: a choice that sends to the primary carries the request to send it."""
    chosen = choose(spec, io, args, names, naming, facts, qualified)
    if isinstance(chosen, FromCopy | FromBoth):
        copy_args, fill = _copy_request(spec, args, names, chosen.served, facts.primary_catalogs)
        return replace(chosen, args=copy_args, fill=fill)
    if isinstance(chosen, LockInPrimary):
        components = []
        for component, renamed in zip(value_at(args, spec.lock_components) or (), chosen.renamed, strict=True):
            component = copy.copy(component)
            if renamed is not None:
                component.dbname, component.tablename = renamed
            components.append(component)
        return replace(chosen, args=replaced(args, [(spec.lock_components, components)]))
    return chosen


def _copy_request(spec: MethodSpec, args: Any, names: Sequence[str], served: Served, catalogs: bool
                  ) -> tuple[Any, str | None]:
    """The call's arguments as sent to the primary about the copy: its database and table named as the copy's
    (plain names for a primary without catalogs, whose reply gets the catalog the client named); and that
    catalog. The call's own arguments stay as they came."""
    catalog = catalog_named(names, args, spec.catalog_fields) if not catalogs else None

    def to_copy(name: str) -> str:
        qualified = parse(name)
        if qualified.db is None or qualified.db.lower() != (parse(served.client_db).db or "").lower():
            return name
        return qualified.requalify(served.copy_db) if catalogs else served.copy_db

    out = copied_along(args, CALL_NAMES.plan(type(args)))
    CALL_NAMES.rewrite(out, to_copy)
    if not served.listing:
        copy_table = next(iter(served.tables))
        out = replaced(out, [(ref.table, copy_table) for ref in spec.table_refs
                             if value_at(out, ref.table) is not None])
    return out, catalog


def choose(spec: MethodSpec, io: MethodIO | None, args: Any, names: Sequence[str], naming: Naming, facts: Facts,
           qualified: bool = False) -> Choice | None:
    """How a call for ``naming``'s member is answered from copies, or None: as it would be without them.
    ``qualified``: the call names tables as ``db.table`` strings (never a database's call)."""
    member, copies, now, primary = naming.member, facts.copies, facts.now, facts.primary
    mode = member.read_from_copies
    up = facts.up
    reason = DOWN if not up else PREFER if mode is CopyReads.PREFER and facts.primary_up else None
    if spec.lock_components:
        return _lock(spec, args, naming, copies, reason, now) if reason is not None else None
    if spec.access is not Access.READ:
        if reason == DOWN:
            return WriteRefused(f"reads of its tables are served from copies in the primary '{primary}' "
                                f"(read-from-copies: {mode.value}); writes wait until it is back", True)
        if reason == PREFER:
            return _copy_commit(spec, args, naming, copies)
        return None
    if reason is None:
        return None
    refs = table_refs(args, spec)
    result = io.result if io is not None else None
    if refs:
        client_db, client_table = refs[0]
        found = _copy(naming, copies, client_db, client_table, now)
        if found is None or (reason == PREFER and found.mode != o.COPY):
            return None
        served = _served(found, reason, client_db, {found.copy_table: client_table}, now)
        if reason == DOWN:
            return FromCopy(served)
        if carries(result, PartitionWithoutSD):
            return None  # partitions under a shared storage descriptor: answered by the member alone
        if carries(result, Partition):
            if not found.location:
                return None
            return FromBoth(replace(served, refuse_partial=member.partial is PartialCopies.REFUSE,
                                    copy_location=found.location, confirmed_at=found.confirmed_at))
        return FromCopy(served) if carries(result, Table) else None
    if reason != DOWN or qualified:
        return None
    return _database(names, naming, copies, now)


def _copy(naming: Naming, copies: Copies, client_db: str, table: str, now: float) -> Copy | None:
    db = parse(naming.to_member(client_db)).db
    if not db:
        return None
    found = copies.table(naming.member.name, db, table)
    return found if found is not None and found.usable(naming.member, now) else None


def _served(found: Copy, reason: str, client_db: str, tables: dict[str, str], now: float) -> Served:
    return Served(found.member, reason, found.copy_db, client_db, tables, found.staleness(now),
                  partition_keys=found.partition_keys)


def _database(names: Sequence[str], naming: Naming, copies: Copies, now: float) -> FromCopy | None:
    """A database's call (no table named) while its member is down: answered from the copy database that holds
    most of its copies, its listings naming the copied tables."""
    if len(set(names)) != 1:
        return None
    client_db = names[0]
    db = parse(naming.to_member(client_db)).db
    held = [c for c in copies.database(naming.member.name, db or "") if c.usable(naming.member, now)]
    if not held:
        return None
    counts: dict[str, int] = {}
    for c in held:
        counts[c.copy_db] = counts.get(c.copy_db, 0) + 1
    copy_db = max(counts, key=lambda d: counts[d])
    chosen = [c for c in held if c.copy_db == copy_db]
    staleness = max(c.staleness(now) for c in chosen)
    return FromCopy(Served(naming.member.name, DOWN, copy_db, client_db, {c.copy_table: c.table for c in chosen},
                           staleness, listing=True))


def _lock(spec: MethodSpec, args: Any, naming: Naming, copies: Copies, reason: str | None, now: float
          ) -> LockInPrimary | None:
    """A lock whose every component is a read of a table answered from a copy (the member down, or prefer)."""
    components: Sequence[Any] = value_at(args, spec.lock_components) or ()
    renamed: list[tuple[str, str] | None] = []
    for c in components:
        found = _copy(naming, copies, c.dbname or "", c.tablename or "", now) if c.tablename else None
        if found is None or c.type != LockType.SHARED_READ or (reason == PREFER and found.mode != o.COPY):
            return None
        renamed.append((found.copy_db, found.copy_table))
    return LockInPrimary(tuple(renamed)) if renamed else None


def _copy_commit(spec: MethodSpec, args: Any, naming: Naming, copies: Copies) -> WriteRefused | None:
    """A write that would make the source point at the copy's storage: an object read from the copy (through
    waggle, under prefer) and written back, say a partition's statistics after an INSERT, or an Iceberg commit
    whose base is the copy's metadata. Refused: the source must never depend on a copy."""
    refs = table_refs(args, spec)
    for value in objects_in(args):
        if not isinstance(value, Table | Partition):
            continue
        client_db = value.dbName or (refs[0][0] if refs else "")
        client_table = value.tableName or (refs[0][1] if refs else "")
        db = parse(naming.to_member(client_db)).db or ""
        found = copies.table(naming.member.name, db, client_table)
        if found is None or found.mode != o.COPY:
            continue  # a mirror's storage and metadata are the source's own
        params = value.parameters or {}
        location = value.sd.location if value.sd is not None else None
        if (found.metadata_location and params.get(o.PREVIOUS_METADATA_LOCATION) == found.metadata_location) \
                or _under(location, found.location):
            return WriteRefused(f"this write would make table '{client_db}.{client_table}' of metastore "
                                f"'{naming.member.name}' point at its copy '{found.copy_db}.{found.copy_table}' "
                                f"in the primary ({location or found.metadata_location}), which it read from "
                                f"the copy (read-from-copies: prefer); the copy is read-only: write where the "
                                f"table is read from its own metastore", False)
    return None


def _under(location: str | None, root: str | None) -> bool:
    if not location or not root:
        return False
    location, root = location.rstrip("/"), root.rstrip("/")
    return location == root or location.startswith(root + "/")
