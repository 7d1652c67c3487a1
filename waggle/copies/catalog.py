"""The copies of members' tables that the primary holds, as values: which member's table each one copies, where
it is, and since when it is known to match its source. Pure: built from the primary's tables and the sync's
coverage records (:mod:`waggle.copies.registry` reads them), and read by the call core through the routes
snapshot.

A copy is a table of the primary whose parameters carry the sync's bookkeeping: ``waggle.sync.source`` (the
member) and ``waggle.sync.source-object`` (``db.table`` in the member's own names). It was confirmed in sync
with its source at the later of its ``waggle.sync.synced-at`` (the last change the sync wrote to it) and the
newest coverage record that covers it (a follower caught up, a batch run that succeeded).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from waggle.config.model import CopyReads, MetastoreConfig
from waggle.synced import objects as o
from waggle.synced.coverage import Coverage


@dataclass(frozen=True, slots=True)
class Copy:
    """``copy_db.copy_table`` in the primary copies ``db.table`` of metastore ``member`` (names lower-case)."""

    member: str
    db: str
    table: str
    copy_db: str
    copy_table: str
    #: ``copy`` (its own files) or ``mirror`` (the source's files)
    mode: str
    #: when it was last known to match its source (epoch seconds; 0: never said)
    confirmed_at: float
    partition_keys: tuple[str, ...] = ()
    #: an Iceberg copy's current metadata file
    metadata_location: str | None = None
    #: the copy table's storage (its partitions' directories are below it)
    location: str | None = None

    def staleness(self, now: float) -> float:
        return max(0.0, now - self.confirmed_at)

    def usable(self, member: MetastoreConfig, now: float) -> bool:
        """Within the member's ``max-staleness``."""
        limit = member.max_staleness_seconds
        return limit is None or self.staleness(now) <= limit


@dataclass(frozen=True, slots=True)
class Copies:
    """Every copy the primary holds, by the source table it copies."""

    tables: Mapping[tuple[str, str, str], Copy] = field(default_factory=dict)
    #: (member, member's database) -> its copies
    databases: Mapping[tuple[str, str], tuple[Copy, ...]] = field(default_factory=dict)
    #: member -> how many of its tables have copies
    counts: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, copies: Iterable[Copy]) -> Copies:
        tables: dict[tuple[str, str, str], Copy] = {}
        for c in copies:
            known = tables.get((c.member, c.db, c.table))
            # two copies of one table (two target databases): the fresher one is served
            if known is None or c.confirmed_at > known.confirmed_at:
                tables[(c.member, c.db, c.table)] = c
        databases: dict[tuple[str, str], list[Copy]] = {}
        counts: dict[str, int] = {}
        for c in tables.values():
            databases.setdefault((c.member, c.db), []).append(c)
            counts[c.member] = counts.get(c.member, 0) + 1
        return cls(tables, {k: tuple(v) for k, v in databases.items()}, counts)

    def __bool__(self) -> bool:
        return bool(self.tables)

    def held_for(self, member: str) -> bool:
        return member in self.counts

    def serve(self, member: MetastoreConfig) -> bool:
        """Whether reads of ``member`` may be answered from copies at all (its setting, and copies to read)."""
        return member.read_from_copies is not CopyReads.NEVER and self.held_for(member.name)

    def table(self, member: str, db: str, table: str) -> Copy | None:
        return self.tables.get((member, db.lower(), table.lower()))

    def database(self, member: str, db: str) -> tuple[Copy, ...]:
        return self.databases.get((member, db.lower()), ())

    def member_databases(self, member: MetastoreConfig, now: float) -> list[str]:
        """The member's databases that have a copy within its ``max-staleness``."""
        return sorted({db for (m, db), held in self.databases.items()
                       if m == member.name and any(c.usable(member, now) for c in held)})


NONE = Copies()


def copy_of(copy_db: str, table: Any, coverages: Iterable[Coverage], members: Mapping[str, Any]) -> Copy | None:
    """The copy a table of the primary is (a decoded ``Table``), or None: no bookkeeping, or its source is not a
    member now."""
    params = table.parameters or {}
    member, source = params.get(o.SOURCE), params.get(o.SOURCE_OBJECT)
    if not member or not source or "." not in source or member not in members or "/" in source:
        return None
    db, _, name = source.lower().partition(".")
    confirmed = synced_at(params)
    mode = params.get(o.MODE) or o.MIRROR
    for cover in coverages:
        if cover.at > confirmed and cover.covers(member, db, name, copy_db, mode):
            confirmed = cover.at
    keys = tuple(str(k.name).lower() for k in table.partitionKeys or ())
    return Copy(member, db, name, copy_db.lower(), str(table.tableName).lower(), mode,
                confirmed, keys, params.get(o.METADATA_LOCATION), table.sd.location if table.sd is not None else None)


def _epoch(text: str | None) -> float:
    """``2026-11-25T10:00:00Z`` (the sync's ``synced-at``) in epoch seconds; 0 when absent or unreadable."""
    if not text:
        return 0.0
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def synced_at(params: Mapping[str, str] | None) -> float:
    """When the sync last wrote an object (its ``synced-at``), in epoch seconds (0: unknown)."""
    return _epoch((params or {}).get(o.SYNCED_AT))
