"""Replies answered from copies, made to look like the source's: pure functions on decoded results.

- :func:`as_source`: a reply of the primary about a copy (``ice_copy.t2``) becomes a reply about the table the
  client asked for (``lake_ice.t2``): database and table names, and each table's, partition's and database's
  parameters saying where the data comes from (``waggle.served-from``, how stale, why), without the sync's own
  bookkeeping. A listing of a database answered from its copies names only the copied tables.
- :func:`with_copy_storage`: a ``prefer`` read's two replies, the source's and the copy's, become the source's
  partitions with the copy's storage wherever the copy holds them, and not older than the source's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from thrift.Thrift import TType

from waggle.copies.catalog import synced_at
from waggle.hms import specs
from waggle.hms.gen.hive_metastore.ttypes import Database, Partition, Table
from waggle.hms.names import parse
from waggle.hms.rewrite import Rewriter, call_rewriter
from waggle.sync import objects as o

SERVED_FROM = "waggle.served-from"
SERVED_STALENESS = "waggle.served-staleness-seconds"
SERVED_REASON = "waggle.served-reason"
#: a source partition changed this many seconds after its copy was written is stale (clocks of two clusters)
CLOCK_SLACK = 1.0

_REWRITER: Rewriter = call_rewriter()
_OBJECTS = (Table, Partition, Database)
_FOUND: specs.Plans[type] = specs.Plans(lambda _cls, f: f.struct if f.struct in _OBJECTS else None)


@dataclass(frozen=True, slots=True)
class Served:
    """A call answered from copies of ``member``'s tables: what its reply needs to look like the source's."""

    member: str
    #: down (the member is down) or prefer (read-from-copies: prefer)
    reason: str
    #: the copies' database in the primary, and the database as the client named it
    copy_db: str
    client_db: str
    #: copy table -> the table's name as the client sees it (one for a table's call; every copy of the
    #: database in ``copy_db`` for a database's)
    tables: Mapping[str, str]
    staleness: float
    #: a database's call (no table named): listings of its tables keep the copied ones only
    listing: bool = False
    #: prefer: partitions the copy lacks refuse the call (partial: refuse) instead of coming from the source
    refuse_partial: bool = False
    partition_keys: tuple[str, ...] = ()

    def describe(self, table: str | None = None) -> str:
        copy_table = next(iter(self.tables), "") if table is None else table
        return f"{self.copy_db}.{copy_table}"


_CARRIES: dict[type, specs.Plans[type]] = {}


def carries(result_class: type | None, cls: type) -> bool:
    """Whether a result class can hold objects of ``cls`` (a Table, a Partition) anywhere inside."""
    if result_class is None:
        return False
    plans = _CARRIES.get(cls)
    if plans is None:
        plans = _CARRIES[cls] = specs.Plans(lambda _c, f: f.struct if f.struct is cls else None)
    return plans.reaches(result_class)


def objects_in(result: Any) -> list[Any]:
    """Every Table, Partition and Database inside a decoded result (outermost first)."""
    out: list[Any] = []
    plan = _FOUND.plan(type(result))
    if plan is not None:
        _collect(result, plan, out)
    return out


def _collect(obj: Any, plan: specs.Plan[type], out: list[Any]) -> None:
    for f, _ in plan.own:
        value = getattr(obj, f.attr, None)
        if value is None:
            continue
        if isinstance(value, list | tuple | set):
            out.extend(v for v in value if v is not None)
        else:
            out.append(value)
    for f, walk in plan.children:
        value = getattr(obj, f.attr, None)
        if value is not None:
            _descend(value, walk, out)


def _descend(value: Any, walk: specs.Walk[type], out: list[Any]) -> None:
    if walk.kind == TType.STRUCT and walk.plan is not None:
        _collect(value, walk.plan, out)
    elif walk.kind in specs.CONTAINERS and walk.element is not None:
        for item in value:
            _descend(item, walk.element, out)
    elif walk.kind == TType.MAP and walk.element is not None:
        for item in value.values():
            if item is not None:
                _descend(item, walk.element, out)


def decorate(params: dict[str, str] | None, served: Served, copy_table: str | None = None,
             database: bool = False) -> dict[str, str]:
    """An object's parameters as the client sees them: the sync's bookkeeping left out, where it comes from."""
    out = {k: v for k, v in (params or {}).items() if not k.startswith(o.PREFIX)}
    out[SERVED_FROM] = served.copy_db if database else served.describe(copy_table)
    out[SERVED_STALENESS] = str(int(served.staleness))
    out[SERVED_REASON] = served.reason
    return out


#: the sync's bookkeeping parameters (left out of what clients see), and what is said instead
_BOOKKEEPING = (o.SOURCE, o.SOURCE_OBJECT, o.FINGERPRINT, o.SYNCED_AT, o.MODE, o.PARTITIONS, o.LAST_EVENT, o.FILES)


def _partitions(result: Any) -> list[Partition] | None:
    """The result's partitions when it is a plain list of them (most partition reads), else None."""
    success = getattr(result, "success", None)
    if type(success) is list and (not success or type(success[0]) is Partition):
        return success
    return None


def _table(result: Any) -> Table | None:
    """The result's one table when that is all it is (not a view, whose text names databases), else None."""
    success = getattr(result, "success", None)
    table = success if type(success) is Table else getattr(success, "table", None)
    if not isinstance(table, Table) or table.tableType == "VIRTUAL_VIEW":
        return None
    return table


def as_partitions_of_source(partitions: list[Partition], served: Served) -> None:
    """A copy's partitions (in the primary's names) as the source's: the hot path of a partition read answered
    from a copy, without a walk (a Partition names its database and table in ``dbName`` and ``tableName``)."""
    client_db = parse(served.client_db).db or served.client_db
    shown = next(iter(served.tables.values()), None)
    extra = {SERVED_FROM: served.describe(), SERVED_STALENESS: str(int(served.staleness)),
             SERVED_REASON: served.reason}
    copy_db = served.copy_db
    for p in partitions:
        if p.dbName == copy_db or str(p.dbName or "").lower() == copy_db:
            p.dbName = client_db
        if shown is not None:
            p.tableName = shown
        params = p.parameters
        if params is None:
            p.parameters = dict(extra)
            continue
        for key in _BOOKKEEPING:
            params.pop(key, None)
        params.update(extra)


def as_source(result: Any, served: Served) -> None:
    """A reply about copies (decoded, in the primary's names), changed in place into the client's names."""
    partitions = _partitions(result) if not served.listing else None
    if partitions is not None:
        as_partitions_of_source(partitions, served)
        return
    table = _table(result) if not served.listing else None
    if table is not None:  # get_table, get_table_req: one table, set directly
        copied = str(table.tableName or "").lower()
        if str(table.dbName or "").lower() == served.copy_db:
            table.dbName = parse(served.client_db).db or served.client_db
        table.tableName = served.tables.get(copied, table.tableName)
        table.parameters = decorate(table.parameters, served, copied)
        return
    copy_db = served.copy_db

    def database(name: str) -> str:
        qualified = parse(name)
        return qualified.requalify(served.client_db) if (qualified.db or "").lower() == copy_db else name

    if served.listing:
        _keep_copied(result, served)
    _REWRITER.rewrite(result, database)
    for obj in objects_in(result):
        if isinstance(obj, Database):
            obj.parameters = decorate(obj.parameters, served, database=True)
            continue
        table = str(obj.tableName or "").lower()
        shown = served.tables.get(table)
        if shown is not None:
            obj.tableName = shown
        obj.parameters = decorate(obj.parameters, served, table)


def _keep_copied(result: Any, served: Served) -> None:
    """A database's listing answered from its copies: the copied tables only, by their source names."""
    success = getattr(result, "success", None)
    if isinstance(success, list):
        result.success = _kept(success, served.tables)
        return
    for attr in ("tables", "tableNames"):
        value = getattr(success, attr, None)
        if isinstance(value, list):
            setattr(success, attr, _kept(value, served.tables))


def _kept(items: list[Any], tables: Mapping[str, str]) -> list[Any]:
    out = []
    for item in items:
        if isinstance(item, str):
            shown = tables.get(item.lower())
            if shown is not None:
                out.append(shown)
        elif str(getattr(item, "tableName", "") or "").lower() in tables:
            out.append(item)
    return out


class PartitionStamp:
    """What a prefer read needs of a source partition: its values and parameters (the rest is skipped while
    decoding, which makes reading the source's reply cheap)."""

    __slots__ = ("parameters", "values")

    def __init__(self, values: list[str] | None = None, parameters: dict[str, str] | None = None) -> None:
        self.values, self.parameters = values, parameters


class PartitionStamps:
    """A reply whose success is a list of partitions, read as stamps."""

    __slots__ = ("success",)

    def __init__(self, success: list[PartitionStamp] | None = None) -> None:
        self.success = success


specs.declare(PartitionStamp, (None, Partition.thrift_spec[1], None, None, None, None, None,  # type: ignore[attr-defined]
                               Partition.thrift_spec[7]))  # type: ignore[attr-defined]
specs.declare(PartitionStamps, ((0, TType.LIST, "success", (TType.STRUCT, specs.codec(PartitionStamp), False), None),))


def stamped(result_class: type) -> bool:
    """Whether a result class's success is a plain list of partitions (read as :class:`PartitionStamps`)."""
    success = specs.field_named(result_class, "success")
    return success is not None and success.ttype == TType.LIST and success.struct is Partition


def in_source_order(stamps: list[PartitionStamp], copied: list[Partition], served: Served
                    ) -> tuple[list[Partition | None], list[int]]:
    """A prefer read of a partition list: the copy's partitions, as the source's, in the source's order, for each
    source partition the copy holds and is current; None (and its index in the second list) for the others."""
    held = {tuple(p.values or ()): p for p in copied if p.parameters and o.SOURCE in p.parameters}
    out: list[Partition | None] = []
    missing: list[int] = []
    for i, stamp in enumerate(stamps):
        found = held.get(tuple(stamp.values or ()))
        if found is None or not _current_params(stamp.parameters, found.parameters):
            out.append(None)
            missing.append(i)
        else:
            out.append(found)
    as_partitions_of_source([p for p in out if p is not None], served)
    return out, missing


def with_copy_storage(source: Any, copy: Any, served: Served) -> list[str]:
    """A prefer read: each partition of the ``source`` reply (decoded, in the member's names) that the ``copy``
    reply holds, written by the sync and not changed at the source since, gets the copy's storage and says so.
    Returns the names of the partitions that stay the source's."""
    held: dict[tuple[str, ...], Partition] = {}
    for obj in objects_in(copy):
        if isinstance(obj, Partition) and obj.parameters and o.SOURCE in obj.parameters:
            held[tuple(obj.values or ())] = obj
    missing: list[str] = []
    for obj in objects_in(source):
        if not isinstance(obj, Partition):
            continue
        found = held.get(tuple(obj.values or ()))
        if found is None or found.sd is None or obj.sd is None or not _current_params(obj.parameters,
                                                                                     found.parameters):
            missing.append(partition_name(served.partition_keys, obj.values or []))
            continue
        obj.sd.location = found.sd.location
        obj.parameters = decorate(obj.parameters, served)
    return missing


def _current_params(source: dict[str, str] | None, copied: dict[str, str] | None) -> bool:
    """The copy was written after the source partition last changed (its ``transient_lastDdlTime``)."""
    try:
        changed = float((source or {}).get("transient_lastDdlTime") or 0)
    except ValueError:
        return False
    return changed <= synced_at(copied) + CLOCK_SLACK


def partition_name(keys: tuple[str, ...], values: list[str]) -> str:
    if len(keys) != len(values):
        return "/".join(values)
    return "/".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))


#: a reply's names as the client sees them (the member's rewrite), applied by the caller
NameFn = Callable[[str], str]
