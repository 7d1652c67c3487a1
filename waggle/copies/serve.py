"""Replies answered from copies, made to look like the source's: pure functions on decoded results.

- :func:`as_source`: a reply of the primary about a copy (``ice_copy.t2``) becomes a reply about the table the
  client asked for (``lake_ice.t2``): database and table names, and each table's, partition's and database's
  parameters saying where the data comes from (``waggle.served-from``, how stale, why), without the sync's own
  bookkeeping. A listing of a database answered from its copies names only the copied tables.
- :func:`with_copy_storage`: a ``prefer`` read's reply from the member, and the names of the partitions the copy
  holds, become the source's partitions with the copy's directory wherever the copy holds them and the source did
  not change them since the copy was confirmed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from thrift.Thrift import TType

from waggle.hms import specs
from waggle.hms.gen.hive_metastore.ttypes import Database, Partition, Table
from waggle.hms.names import parse, partition_name
from waggle.hms.rewrite import CALL_NAMES
from waggle.synced import objects as o

SERVED_FROM = "waggle.served-from"
SERVED_STALENESS = "waggle.served-staleness-seconds"
SERVED_REASON = "waggle.served-reason"
#: a source partition changed this many seconds after its copy was written is stale (clocks of two clusters)
CLOCK_SLACK = 1.0

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
    #: prefer: the copy table's storage (a partition ``name`` the sync copied is at ``<copy_location>/<name>``),
    #: and when the copy was last known to match its source (a source partition changed after it is stale)
    copy_location: str | None = None
    confirmed_at: float = 0.0

    @property
    def copy_table(self) -> str:
        return next(iter(self.tables), "")

    def describe(self, table: str | None = None) -> str:
        copy_table = next(iter(self.tables), "") if table is None else table
        return f"{self.copy_db}.{copy_table}"

    def as_source(self, result: Any) -> None:
        """A reply about the copies made the source's (see :func:`as_source`): what the call core asks of a plan
        it sent about a copy."""
        as_source(result, self)

    def with_copy_storage(self, source: Any, held: set[str]) -> list[str]:
        """A prefer read's source partitions with the copy's storage (see :func:`with_copy_storage`)."""
        return with_copy_storage(source, held, self)


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


def as_served(params: dict[str, str] | None, served: Served, copy_table: str | None = None,
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
        table.parameters = as_served(table.parameters, served, copied)
        return
    copy_db = served.copy_db

    def database(name: str) -> str:
        qualified = parse(name)
        return qualified.requalify(served.client_db) if (qualified.db or "").lower() == copy_db else name

    if served.listing:
        _keep_copied(result, served)
    CALL_NAMES.rewrite(result, database)
    for obj in objects_in(result):
        if isinstance(obj, Database):
            obj.parameters = as_served(obj.parameters, served, database=True)
            continue
        table = str(obj.tableName or "").lower()
        shown = served.tables.get(table)
        if shown is not None:
            obj.tableName = shown
        obj.parameters = as_served(obj.parameters, served, table)


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


def with_copy_storage(source: Any, held: set[str], served: Served) -> list[str]:
    """A prefer read: each partition of the ``source`` reply (decoded, in the member's names) that the copy holds
    (``held``: the copy's partition names) and that did not change at the source after the copy was last known to
    match it gets the copy's storage, and says so. Returns the names of the partitions that stay the source's."""
    root = (served.copy_location or "").rstrip("/")
    newest = served.confirmed_at + CLOCK_SLACK
    extra = {SERVED_FROM: served.describe(), SERVED_STALENESS: str(int(served.staleness)),
             SERVED_REASON: served.reason}
    keys = served.partition_keys
    partitions = _partitions(source)
    found = partitions if partitions is not None else [p for p in objects_in(source) if isinstance(p, Partition)]
    missing: list[str] = []
    for p in found:
        values = p.values or []
        if len(values) != len(keys):
            missing.append("/".join(values))
            continue
        name = partition_name(keys, values)
        if not root or name not in held or p.sd is None or _changed_at(p.parameters) > newest:
            missing.append(name)
            continue
        p.sd.location = f"{root}/{name}"
        params = p.parameters
        if params is None:
            p.parameters = dict(extra)
        else:
            params.update(extra)
    return missing


def _changed_at(params: dict[str, str] | None) -> float:
    """When a source partition last changed (its ``transient_lastDdlTime``; unreadable: now, so it is stale)."""
    try:
        return float((params or {}).get("transient_lastDdlTime") or 0)
    except ValueError:
        return float("inf")
