"""Pure functions of the sync: fingerprints, bookkeeping parameters, and the target's table and partitions built
from the source's. No sockets and no files.

A fingerprint is a hash of what a metastore object means, leaving out what changes without the object changing:
timestamps, statistics parameters (``transient_lastDdlTime``, ``COLUMN_STATS_ACCURATE``, ``numRows``, ...) and
the sync's own bookkeeping. The target records the source's fingerprint, so a rerun compares fingerprints and
writes nothing when they are equal.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from thrift.protocol.TBinaryProtocol import TBinaryProtocolAccelerated
from thrift.transport.TTransport import TMemoryBuffer

from waggle.hms import specs
from waggle.hms.gen.hive_metastore.ttypes import Partition, Table
from waggle.hms.views import rewrite_view_sql

#: Bookkeeping parameters on every target table and partition.
SOURCE = "waggle.sync.source"  # the source metastore's name in the federation
SOURCE_OBJECT = "waggle.sync.source-object"  # db.table, or db.table/partition-name
FINGERPRINT = "waggle.sync.fingerprint"  # the source object's fingerprint when it was last synced
SYNCED_AT = "waggle.sync.synced-at"  # when the sync last changed this object (UTC, ISO 8601)
MODE = "waggle.sync.mode"  # table: mirror or copy
PARTITIONS = "waggle.sync.partitions-fingerprint"  # table: all its partitions' fingerprints, combined
LAST_EVENT = "waggle.sync.last-event-id"  # table: the source's notification event id it is synced to
FILES = "waggle.sync.files"  # copy mode: fingerprint of the source files (names, sizes, modification times)
PREFIX = "waggle.sync."

#: Parameters that change without the object changing.
VOLATILE = frozenset({
    "transient_lastDdlTime", "COLUMN_STATS_ACCURATE", "numFiles", "numRows", "rawDataSize", "totalSize",
    "numFilesErasureCoded", "numPartitions", "last_modified_by", "last_modified_time", "STATS_GENERATED",
    "STATS_GENERATED_VIA_STATS_TASK", "DO_NOT_UPDATE_STATS", "external.table.purge",
})
VOLATILE_PREFIXES = (PREFIX, "spark.sql.statistics.", "impala_intermediate_stats")

MIRROR, COPY = "mirror", "copy"

#: An Iceberg table's current and previous metadata files, as Iceberg's Hive catalogs record them.
METADATA_LOCATION, PREVIOUS_METADATA_LOCATION = "metadata_location", "previous_metadata_location"


def _plain(value: Any) -> Any:
    """A Thrift value as JSON-able data, with None fields left out."""
    if specs.is_struct(type(value)):
        fields = (f.attr for f in specs.fields(type(value)))
        return {k: _plain(v) for k in sorted(fields) if (v := getattr(value, k, None)) is not None}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_plain(v) for v in value)
    if isinstance(value, bytes):
        return value.hex()
    return value


def digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]


def stable_params(params: Mapping[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (params or {}).items() if k not in VOLATILE and not k.startswith(VOLATILE_PREFIXES)}


def table_fingerprint(table: Table) -> str:
    data = _plain(table)
    for volatile in ("dbName", "tableName", "createTime", "lastAccessTime", "catName", "writeId", "privileges",
                     "isStatsCompliant", "colStats", "id", "accessType", "requiredReadCapabilities",
                     "requiredWriteCapabilities", "dictionary", "txnId", "creationMetadata"):
        data.pop(volatile, None)
    data["parameters"] = stable_params(table.parameters)
    if table.sd is not None and table.sd.parameters is not None:
        data["sd"]["parameters"] = stable_params(table.sd.parameters)
    return digest(data)


def partition_fingerprint(partition: Partition) -> str:
    """Values, storage and stable parameters, hashed from their Thrift encoding (Thrift's C codec: a rerun
    fingerprints every source partition, so this is on the hot path). Maps are sorted first: the storage
    descriptor's in place (the same map in another order), which spares copying it."""
    sd = partition.sd
    if sd is not None:
        sd.parameters = _sorted(sd.parameters)
        if sd.serdeInfo is not None:
            sd.serdeInfo.parameters = _sorted(sd.serdeInfo.parameters)
    stable = Partition(values=list(partition.values or ()), sd=sd,
                       parameters=dict(sorted(stable_params(partition.parameters).items())))
    buffer = TMemoryBuffer()
    stable.write(TBinaryProtocolAccelerated(buffer))
    return hashlib.sha256(buffer.getvalue()).hexdigest()[:32]


def _sorted(params: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if params is None else dict(sorted(params.items()))


def combined(fingerprints: Iterable[tuple[str, str]]) -> str:
    """One fingerprint for many ``(name, fingerprint)`` pairs, whatever their order."""
    return digest(sorted(fingerprints))


def partition_values(name: str) -> list[str]:
    """``k1=v1/k2=v2`` (as ``get_partition_names`` spells it, path-escaped) to ``[v1, v2]``."""
    return [unquote(part.split("=", 1)[1]) for part in name.split("/")]


def is_view(table: Table) -> bool:
    return bool(table.tableType == "VIRTUAL_VIEW")


#: Formats with metadata of their own (``table_type`` or Spark's provider names them).
FORMATS = ("iceberg", "delta", "hudi", "paimon")


def table_format(table: Table) -> str | None:
    """The table format that keeps its own metadata beside the data (``iceberg``, ``delta``, ...), or None for
    a plain Hive or Spark datasource table, whose metastore entry is all its metadata."""
    params = table.parameters or {}
    for key in ("table_type", "spark.sql.sources.provider"):
        declared = (params.get(key) or "").strip().lower()
        if declared in FORMATS:
            return declared
    handler = (params.get("storage_handler") or "").lower()
    input_format = ((table.sd.inputFormat if table.sd is not None else None) or "").lower()
    for name in ("delta", "hudi", "hoodie", "paimon"):
        if name in handler or name in input_format:
            return "hudi" if name == "hoodie" else name
    return None


def is_iceberg(table: Table) -> bool:
    return table_format(table) == "iceberg"


def copy_refusal(table: Table) -> str | None:
    """Why copy mode cannot make this table independent of its source, or None when it can: a format whose
    metadata may name files by absolute path, other than Iceberg (whose metadata the copy rewrites)."""
    kind = table_format(table)
    if kind is None or kind == "iceberg":
        return None
    if kind == "delta":
        why = "Delta Lake's transaction log (_delta_log) may name data files by absolute path"
    else:
        why = f"its format ({kind}) keeps metadata that may name files by absolute path"
    return (f"cannot make an independent copy of {table.dbName}.{table.tableName}: {why}, and the copy does not "
            "rewrite it; mirror the table instead")


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how one source table lands in the primary."""

    source: str  # the source metastore's name
    source_db: str
    source_table: str
    db: str
    table: str
    mode: str  # mirror or copy
    location: str | None = None  # copy: the table's new data location

    @property
    def source_object(self) -> str:
        return f"{self.source_db}.{self.source_table}"


def _bookkeeping(params: dict[str, str], target: Target, source_object: str, fingerprint: str, now: str) -> None:
    params[SOURCE] = target.source
    params[SOURCE_OBJECT] = source_object
    params[FINGERPRINT] = fingerprint
    params[SYNCED_AT] = now


def _relocate_path_property(params: dict[str, str] | None, old: str | None, new: str) -> None:
    """Spark datasource tables keep their location in the serde's ``path`` property too."""
    if params is not None and "path" in params and old is not None and params["path"].rstrip("/") == \
            old.rstrip("/"):
        params["path"] = new


def target_table(source: Table, target: Target, now: str, db_names: Mapping[str, str],
                 fingerprint: str | None = None) -> Table:
    """The target's table for a source table: renamed, EXTERNAL (its data is never purged by a drop), its
    location moved for a copy, views' database references translated, with bookkeeping parameters
    (``fingerprint``: the source's, when the caller has it already)."""
    t = copy.deepcopy(source)
    t.dbName, t.tableName = target.db, target.table
    t.catName = None
    t.createTime = t.lastAccessTime = None
    t.privileges = None
    t.temporary = False
    params = dict(t.parameters or {})
    if is_view(source):
        mapping = {k.lower(): v for k, v in db_names.items()}
        t.viewOriginalText = rewrite_view_sql(t.viewOriginalText, lambda db: mapping.get(db.lower(), db))
        t.viewExpandedText = rewrite_view_sql(t.viewExpandedText, lambda db: mapping.get(db.lower(), db))
    else:
        t.tableType = "EXTERNAL_TABLE"
        params["EXTERNAL"] = "TRUE"
        params.pop("external.table.purge", None)
        if target.mode == COPY and target.location is not None and t.sd is not None:
            old = t.sd.location
            t.sd.location = target.location
            if t.sd.serdeInfo is not None:
                _relocate_path_property(t.sd.serdeInfo.parameters, old, target.location)
    _bookkeeping(params, target, target.source_object, fingerprint or table_fingerprint(source), now)
    params[MODE] = target.mode
    t.parameters = params
    return t


def target_partition(source: Partition, target: Target, name: str, now: str, files: str | None = None,
                     fingerprint: str | None = None) -> Partition:
    """The target's partition for a source partition (``name`` as ``get_partition_names`` spells it). A shallow
    copy: the source object must not be used afterwards for anything but reading."""
    fingerprint = fingerprint or partition_fingerprint(source)
    p = copy.copy(source)
    p.dbName, p.tableName = target.db, target.table
    p.catName = None
    p.createTime = p.lastAccessTime = None
    p.privileges = None
    if target.mode == COPY and target.location is not None and p.sd is not None:
        p.sd = copy.copy(p.sd)
        old = p.sd.location
        p.sd.location = f"{target.location.rstrip('/')}/{name}"
        if p.sd.serdeInfo is not None and p.sd.serdeInfo.parameters:
            p.sd.serdeInfo = copy.copy(p.sd.serdeInfo)
            p.sd.serdeInfo.parameters = dict(p.sd.serdeInfo.parameters)
            _relocate_path_property(p.sd.serdeInfo.parameters, old, p.sd.location)
    params = dict(p.parameters or {})
    _bookkeeping(params, target, f"{target.source_object}/{name}", fingerprint, now)
    if files is not None:
        params[FILES] = files
    p.parameters = params
    return p


def ownership_problem(existing: Table, target: Target) -> str | None:
    """Why the sync must not touch an existing target table, or None when it is the sync's own."""
    params = existing.parameters or {}
    where = f"{target.db}.{target.table}"
    if SOURCE not in params:
        return (f"target table {where} exists and was not created by waggle sync (it has no '{SOURCE}' "
                "parameter); refusing to change it")
    if params[SOURCE] != target.source or params.get(SOURCE_OBJECT, "").lower() != target.source_object.lower():
        return (f"target table {where} was synced from {params[SOURCE]}:{params.get(SOURCE_OBJECT)}, not from "
                f"{target.source}:{target.source_object}; refusing to change it")
    return None
