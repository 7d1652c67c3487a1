"""Independent copies of Iceberg tables.

An Iceberg table's metadata names its files by absolute path: the metadata JSON names the table's location,
each snapshot's manifest list and the statistics files; a manifest list names its manifests; a manifest names
its data and delete files; a position-delete file names the data files it deletes from. Copying the table's
directory therefore gives a table that still reads the source's files. This module copies one table version
so that every path in it names the target:

1. the source's metadata JSON is read, and every file that any of its snapshots references is collected by
   reading the manifest lists and manifests (Avro). A path outside the table's location (a file added from
   elsewhere, ``write.data.path`` pointing away) cannot be made independent: the table is refused before
   anything is written;
2. data files, equality-delete files and statistics files are copied byte for byte (by Spark's executors in a
   sync run). A file already at the target with the size the metadata records is skipped: Iceberg never
   rewrites a file under the same name, so a rerun copies only what is new;
3. position-delete files (Parquet) are rewritten with their data files' new paths; manifests and then manifest
   lists are rewritten (Avro, with the writer's schema, file metadata and codec kept). Every rewritten file is
   written under a temporary name and renamed, so a crash never leaves a partial file under a final name, and a
   file already present is skipped on a rerun;
4. the rewritten metadata JSON is written last, under the source's file name in ``<target>/metadata/``.

Snapshots, their ids, sequence numbers, refs and the table's uuid are kept, so time travel works on the copy.
``metadata-log`` (the list of earlier metadata files) is emptied: those files are not copied, and the copy's
history of metadata files starts at the copied version. Format version 3 (deletion vectors, row lineage) is
refused: its delete vectors name data files inside Puffin blobs, which this module does not rewrite.
"""

from __future__ import annotations

import io
import json
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from waggle.sync.files import TMP, url

#: Table properties that name a location for new files; they move with the table, or the table is refused.
PATH_PROPERTIES = ("write.data.path", "write.metadata.path", "write.object-storage.path",
                   "write.folder-storage.path")
#: ``content`` of a data file entry in a manifest
DATA, POSITION_DELETES, EQUALITY_DELETES = 0, 1, 2
#: ``status`` of a manifest entry
DELETED = 2
#: the field id of a position-delete file's ``file_path`` column (reserved by the Iceberg spec)
DELETE_FILE_PATH = 2147483546

FileCopier = Callable[[list[tuple[str, str]]], tuple[int, int]]


class IcebergError(Exception):
    """The table cannot be copied; the message names the file or path and the reason."""


@dataclass(frozen=True, slots=True)
class IcebergCopy:
    metadata_location: str  # the target's metadata file, written last
    files: int  # files copied or written by this run
    bytes: int
    skipped: int  # files already at the target


# -- paths ----------------------------------------------------------------------------------------------------
def _canonical(path: str) -> str:
    """``file:/x`` and ``file:///x`` are one file; Java writes the first, Python the second."""
    if path.startswith("file:") and not path.startswith("file://"):
        return "file://" + path[len("file:"):]
    return path


@dataclass(frozen=True, slots=True)
class Relocation:
    """Moves paths under the source table's location to the same place under the target's."""

    source: str
    target: str

    def __call__(self, path: str, what: str) -> str:
        root, given = _canonical(self.source).rstrip("/"), _canonical(path)
        if given == root:
            return self.target.rstrip("/")
        if not given.startswith(root + "/"):
            raise IcebergError(f"cannot make an independent copy: {what} {path} is outside the table location "
                               f"{self.source}")
        return self.target.rstrip("/") + given[len(root):]


# -- reading and writing files --------------------------------------------------------------------------------
def _fs(location: str) -> tuple[Any, str]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url(location))
    return fs, path


def _read(location: str, what: str) -> bytes:
    try:
        fs, path = _fs(location)
        with fs.open(path, "rb") as f:
            return bytes(f.read())
    except FileNotFoundError as exc:
        raise IcebergError(f"{what} {location} does not exist") from exc
    except OSError as exc:
        raise IcebergError(f"{what} {location} cannot be read: {exc}") from exc


def _size(location: str) -> int | None:
    fs, path = _fs(location)
    try:
        return int(fs.size(path))
    except FileNotFoundError:
        return None


def _write(location: str, data: bytes) -> int:
    """Write under a temporary name beside the file, then rename it into place."""
    fs, path = _fs(location)
    parent, base = posixpath.split(path)
    fs.makedirs(parent, exist_ok=True)
    tmp = posixpath.join(parent, f"{TMP}{base}")
    with fs.open(tmp, "wb") as out:
        out.write(data)
    fs.mv(tmp, path)
    return len(data)


def read_metadata(location: str) -> dict[str, Any]:
    """The table metadata JSON at ``location``, checked for what a copy needs."""
    raw = _read(location, "Iceberg metadata file")
    try:
        metadata = json.loads(raw)
    except ValueError as exc:
        raise IcebergError(f"Iceberg metadata file {location} is not valid JSON: {exc}") from exc
    if not isinstance(metadata, dict) or not isinstance(metadata.get("location"), str):
        raise IcebergError(f"Iceberg metadata file {location} has no table location")
    version = metadata.get("format-version", 1)
    if version not in (1, 2):
        raise IcebergError(f"cannot make an independent copy: Iceberg format version {version} (metadata "
                           f"{location}) may name data files inside deletion vectors, which the copy does not "
                           "rewrite; mirror the table instead")
    return metadata


def _avro(data: bytes, what: str) -> tuple[Any, list[dict[str, Any]], dict[str, str], str]:
    import fastavro

    try:
        reader = fastavro.reader(io.BytesIO(data))
        records: list[dict[str, Any]] = [r for r in reader if isinstance(r, dict)]
    except Exception as exc:
        raise IcebergError(f"{what} is not a readable Avro file: {exc}") from exc
    metadata = {k: v for k, v in reader.metadata.items() if k not in ("avro.schema", "avro.codec")}
    return reader.writer_schema, records, metadata, str(reader.codec)


def _avro_bytes(schema: Any, records: list[dict[str, Any]], metadata: dict[str, str], codec: str) -> bytes:
    import fastavro

    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), records, codec=codec, metadata=metadata)
    return out.getvalue()


def _position_deletes_at(location: str, move: Relocation) -> bytes:
    return _position_deletes(_read(location, "position-delete file"), move, f"position-delete file {location}")


def _position_deletes(data: bytes, move: Relocation, what: str) -> bytes:
    """A position-delete Parquet file with its ``file_path`` column relocated."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(data))
    if "file_path" not in table.column_names:
        raise IcebergError(f"{what} has no file_path column")
    index = table.column_names.index("file_path")
    moved = pa.array([move(p, "a deleted row's data file") for p in table.column("file_path").to_pylist()],
                     table.schema.field("file_path").type)
    table = table.set_column(index, table.schema.field("file_path"), moved)
    out = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(table.schema.metadata), out)
    return out.getvalue()


# -- the plan -------------------------------------------------------------------------------------------------
@dataclass
class _Plan:
    move: Relocation
    copies: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # source -> (target, size)
    deletes: dict[str, str] = field(default_factory=dict)  # position-delete files: source -> target
    manifests: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # source -> (target, raw source)
    manifest_lists: dict[str, tuple[str, bytes]] = field(default_factory=dict)


def _manifest_paths(snapshot: dict[str, Any], plan: _Plan) -> Iterator[str]:
    if "manifest-list" in snapshot:
        location = snapshot["manifest-list"]
        raw = _read(location, "manifest list")
        plan.manifest_lists[location] = (plan.move(location, "manifest list"), raw)
        for entry in _avro(raw, f"manifest list {location}")[1]:
            yield str(entry["manifest_path"])
    else:  # format 1 may list its manifests in the snapshot itself
        yield from (str(m) for m in snapshot.get("manifests", ()))


def plan_copy(metadata: dict[str, Any], target_location: str) -> _Plan:
    """Everything one copy must copy or rewrite; refuses a path outside the table's location."""
    plan = _Plan(Relocation(metadata["location"], target_location))
    for key in PATH_PROPERTIES:
        value = (metadata.get("properties") or {}).get(key)
        if value:
            plan.move(value, f"table property {key} =")
    for stats in [*metadata.get("statistics", ()), *metadata.get("partition-statistics", ())]:
        path = stats["statistics-path"]
        plan.copies[path] = (plan.move(path, "statistics file"), stats.get("file-size-in-bytes"))
    for snapshot in metadata.get("snapshots", ()):
        for manifest in _manifest_paths(snapshot, plan):
            if manifest in plan.manifests:
                continue
            raw = _read(manifest, "manifest")
            plan.manifests[manifest] = (plan.move(manifest, "manifest"), raw)
            for entry in _avro(raw, f"manifest {manifest}")[1]:
                data_file = entry["data_file"]
                path = str(data_file["file_path"])
                target = plan.move(path, "data file")
                if entry["status"] == DELETED:
                    continue  # still listed by the snapshot that deleted it; live ones come from others
                if data_file.get("content", DATA) == POSITION_DELETES:
                    plan.deletes[path] = target
                else:
                    plan.copies[path] = (target, data_file.get("file_size_in_bytes"))
    return plan


# -- rewriting ------------------------------------------------------------------------------------------------
def _rewrite_manifest(raw: bytes, move: Relocation, sizes: dict[str, int], what: str) -> bytes:
    schema, records, file_metadata, codec = _avro(raw, what)
    for entry in records:
        data_file = entry["data_file"]
        old = str(data_file["file_path"])
        data_file["file_path"] = move(old, "data file")
        if old in sizes:  # a rewritten position-delete file
            data_file["file_size_in_bytes"] = sizes[old]
            _relocate_bounds(data_file, move)
        if data_file.get("referenced_data_file"):
            data_file["referenced_data_file"] = move(data_file["referenced_data_file"], "referenced data file")
    return _avro_bytes(schema, records, file_metadata, codec)


def _relocate_bounds(data_file: dict[str, Any], move: Relocation) -> None:
    """A position-delete file's bounds on ``file_path`` name the data files it deletes from, and readers use them
    to match the two. Bounds that are whole paths are relocated; others (truncated) are dropped, which only makes
    readers match the file by partition instead."""
    for key in ("lower_bounds", "upper_bounds"):
        bounds = data_file.get(key)
        if not bounds:
            continue
        kept = []
        for bound in bounds:
            if bound["key"] == DELETE_FILE_PATH:
                try:
                    bound = {"key": bound["key"], "value": move(bound["value"].decode(), "bound").encode()}
                except (IcebergError, UnicodeDecodeError):
                    continue
            kept.append(bound)
        data_file[key] = kept


def _rewrite_manifest_list(raw: bytes, move: Relocation, sizes: dict[str, int], what: str) -> bytes:
    schema, records, file_metadata, codec = _avro(raw, what)
    for entry in records:
        old = str(entry["manifest_path"])
        entry["manifest_path"] = move(old, "manifest")
        entry["manifest_length"] = sizes[old]
    return _avro_bytes(schema, records, file_metadata, codec)


def rewrite_metadata(metadata: dict[str, Any], move: Relocation) -> dict[str, Any]:
    """The metadata JSON with every path relocated (pure)."""
    out: dict[str, Any] = json.loads(json.dumps(metadata))
    out["location"] = move(metadata["location"], "table location")
    properties = out.get("properties") or {}
    for key in PATH_PROPERTIES:
        if properties.get(key):
            properties[key] = move(properties[key], f"table property {key} =")
    for snapshot in out.get("snapshots", ()):
        if "manifest-list" in snapshot:
            snapshot["manifest-list"] = move(snapshot["manifest-list"], "manifest list")
        if "manifests" in snapshot:
            snapshot["manifests"] = [move(m, "manifest") for m in snapshot["manifests"]]
    for stats in [*out.get("statistics", ()), *out.get("partition-statistics", ())]:
        stats["statistics-path"] = move(stats["statistics-path"], "statistics file")
    out["metadata-log"] = []
    return out


def _local_copier(pairs: list[tuple[str, str]]) -> tuple[int, int]:
    from waggle.sync.files import copy_file

    return len(pairs), sum(copy_file(pair) for pair in pairs)


# -- one copy -------------------------------------------------------------------------------------------------
def copy_table(metadata_location: str, target_location: str, copy_files: FileCopier | None = None) -> IcebergCopy:
    """Make the table version at ``metadata_location`` an independent table at ``target_location`` (see the
    module doc). Nothing is written when the source cannot be read or cannot be made independent."""
    metadata = read_metadata(metadata_location)
    move = Relocation(metadata["location"], target_location)
    target_metadata = move(posixpath.join(metadata["location"].rstrip("/"), "metadata",
                                          posixpath.basename(metadata_location)), "metadata file")
    if _size(target_metadata) is not None:
        return IcebergCopy(target_metadata, 0, 0, 1)
    plan = plan_copy(metadata, target_location)

    pairs = [(source, target) for source, (target, size) in plan.copies.items()
             if size is None or _size(target) != size]
    files, copied = (copy_files or _local_copier)(pairs)
    skipped = len(plan.copies) - len(pairs)

    def write_once(target: str, build: Callable[[], bytes]) -> int:
        """Write a rewritten file unless a run before wrote it (rewritten files are only renamed into place
        whole); its size either way."""
        nonlocal files, copied, skipped
        existing = _size(target)
        if existing is not None:
            skipped += 1
            return existing
        size = _write(target, build())
        files, copied = files + 1, copied + size
        return size

    sizes: dict[str, int] = {}
    for source, target in plan.deletes.items():
        sizes[source] = write_once(target, partial(_position_deletes_at, source, move))
    manifest_sizes: dict[str, int] = {}
    for source, (target, raw) in plan.manifests.items():
        manifest_sizes[source] = write_once(target, partial(_rewrite_manifest, raw, move, sizes,
                                                            f"manifest {source}"))
    for source, (target, raw) in plan.manifest_lists.items():
        write_once(target, partial(_rewrite_manifest_list, raw, move, manifest_sizes, f"manifest list {source}"))
    data = json.dumps(rewrite_metadata(metadata, move), indent=2).encode()
    copied += _write(target_metadata, data)
    return IcebergCopy(target_metadata, files + 1, copied, skipped)
