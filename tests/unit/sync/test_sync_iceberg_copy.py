"""Independent Iceberg copies (``waggle.sync.iceberg``) of real Iceberg tables written by pyiceberg, on real
files: the copy reads correctly with the source deleted, and a rerun copies only what is new."""

from __future__ import annotations

import datetime
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import require
from waggle.sync.iceberg import IcebergError, Relocation, copy_table, rewrite_metadata


def _catalog(root: Path, name: str = "src") -> Any:
    try:
        from pyiceberg.catalog.sql import SqlCatalog
    except ImportError:
        require(False, "pyiceberg with its SQL catalog is not installed (pip install -e '.[test]')")
    root.mkdir(parents=True, exist_ok=True)
    return SqlCatalog(name, uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")


def _rows(n: int, start: int = 0) -> Any:
    import pyarrow as pa

    return pa.table({"id": pa.array(range(start, start + n), pa.int64()),
                     "day": pa.array([datetime.date(2026, 11, 1 + i % 3) for i in range(start, start + n)],
                                     pa.date32())})


def _table(root: Path) -> Any:
    """A partitioned table with three appends, a schema change and a delete."""
    import pyarrow as pa
    from pyiceberg.expressions import EqualTo
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import StringType

    cat = _catalog(root)
    cat.create_namespace("ns")
    table = cat.create_table("ns.events", schema=pa.schema([("id", pa.int64()), ("day", pa.date32())]))
    with table.update_spec() as spec:
        spec.add_field("day", IdentityTransform(), "day")
    table = cat.load_table("ns.events")
    table.append(_rows(6))
    table.append(_rows(6, start=6))
    with table.update_schema() as update:
        update.add_column("note", StringType())
    table = cat.load_table("ns.events")
    table.append(_rows(3, start=12).append_column("note", pa.array(["a", "b", "c"], pa.string())))
    table.delete(EqualTo("id", 0))
    return cat.load_table("ns.events")


def _files(root: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _every_path_in(root: Path) -> list[str]:
    """Every string in the copy's metadata: JSON, and Avro records and headers decoded."""
    import fastavro

    found: list[str] = []
    for path in root.rglob("*"):
        if path.suffix == ".json":
            found += _strings(json.loads(path.read_text()))
        elif path.suffix == ".avro":
            reader = fastavro.reader(io.BytesIO(path.read_bytes()))
            found += _strings(list(reader)) + list(reader.metadata.values())
    return found


def _register(root: Path, metadata_location: str) -> Any:
    cat = _catalog(root, "copies")
    cat.create_namespace("ns")
    return cat.register_table("ns.copy", metadata_location)


def test_a_copy_reads_the_same_rows_and_versions_with_the_source_deleted(tmp_path: Path) -> None:
    source = _table(tmp_path / "src")
    expected = source.scan().to_arrow().sort_by("id")
    first = source.snapshots()[0].snapshot_id
    expected_first = source.scan(snapshot_id=first).to_arrow().sort_by("id")
    target = f"file://{tmp_path}/copy/events"

    done = copy_table(source.metadata_location, target)
    assert done.metadata_location.startswith(f"{target}/metadata/")
    assert done.metadata_location.endswith(os.path.basename(source.metadata_location))
    assert done.files > 0 and done.bytes > 0 and done.skipped == 0
    shutil.rmtree(tmp_path / "src" / "warehouse")

    copy = _register(tmp_path / "cat", done.metadata_location)
    assert copy.scan().to_arrow().sort_by("id").equals(expected)
    assert copy.scan(snapshot_id=first).to_arrow().sort_by("id").equals(expected_first)
    assert [s.snapshot_id for s in copy.snapshots()] == [s.snapshot_id for s in source.snapshots()]
    assert {f.startswith(target) for f in copy.inspect.files().column("file_path").to_pylist()} == {True}
    assert {m.startswith(target) for m in copy.inspect.manifests().column("path").to_pylist()} == {True}
    source_root = source.location().removeprefix("file://")
    assert not [s for s in _every_path_in(tmp_path / "copy") if source_root in s]


def test_a_rerun_writes_nothing_then_copies_only_what_a_new_commit_added(tmp_path: Path) -> None:
    source = _table(tmp_path / "src")
    target = f"file://{tmp_path}/copy/events"
    copy_table(source.metadata_location, target)
    before = _files(tmp_path / "copy")

    again = copy_table(source.metadata_location, target)
    assert (again.files, again.bytes) == (0, 0)
    assert _files(tmp_path / "copy") == before

    source.append(_rows(2, start=50))  # two days: two data files
    source = _catalog(tmp_path / "src").load_table("ns.events")
    more = copy_table(source.metadata_location, target)
    after = _files(tmp_path / "copy")
    new = sorted(os.path.basename(p) for p in set(after) - set(before))
    # two data files, one manifest, one manifest list, one metadata file; nothing earlier rewritten
    assert len(new) == 5 and more.files == 5, new
    assert sum(n.endswith(".parquet") for n in new) == 2
    assert {p: t for p, t in after.items() if p in before} == before
    assert more.skipped > 0
    shutil.rmtree(tmp_path / "src" / "warehouse")
    assert _register(tmp_path / "cat", more.metadata_location).scan().to_arrow().num_rows == 16


def test_a_missing_or_corrupt_metadata_file_fails_clearly_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "copy"
    missing = f"file://{tmp_path}/nowhere/metadata/00001-x.metadata.json"
    with pytest.raises(IcebergError, match="does not exist") as gone:
        copy_table(missing, f"file://{target}")
    assert missing in str(gone.value)
    corrupt = tmp_path / "00002-y.metadata.json"
    corrupt.write_text("{not json")
    with pytest.raises(IcebergError, match="not valid JSON"):
        copy_table(f"file://{corrupt}", f"file://{target}")
    assert not target.exists()


def test_a_file_outside_the_table_location_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = _table(tmp_path / "src")
    outside = tmp_path / "elsewhere" / "extra.parquet"
    outside.parent.mkdir()
    pq.write_table(_rows(1, start=90).append_column("note", pa.array(["x"], pa.string())), outside)
    source.add_files([f"file://{outside}"])
    source = _catalog(tmp_path / "src").load_table("ns.events")
    with pytest.raises(IcebergError) as refused:
        copy_table(source.metadata_location, f"file://{tmp_path}/copy/events")
    assert str(outside) in str(refused.value) and "outside the table location" in str(refused.value)
    assert not (tmp_path / "copy").exists()


def test_format_version_3_is_refused_with_the_reason(tmp_path: Path) -> None:
    metadata = tmp_path / "00001-z.metadata.json"
    metadata.write_text(json.dumps({"format-version": 3, "location": "file:///wh/t"}))
    with pytest.raises(IcebergError, match=r"format version 3.*deletion vectors"):
        copy_table(f"file://{metadata}", f"file://{tmp_path}/copy")
    assert not (tmp_path / "copy").exists()


def test_relocation_accepts_both_spellings_of_local_paths_and_rewrites_every_metadata_path() -> None:
    move = Relocation("file:/wh/db/t", "s3://bucket/copies/t")
    assert move("file:///wh/db/t/data/a.parquet", "data file") == "s3://bucket/copies/t/data/a.parquet"
    assert move("file:/wh/db/t", "location") == "s3://bucket/copies/t"
    with pytest.raises(IcebergError, match="outside the table location"):
        move("file:/wh/db/t2/data/a.parquet", "data file")
    metadata = {
        "location": "file:/wh/db/t", "metadata-log": [{"metadata-file": "file:/wh/db/t/metadata/0.json"}],
        "properties": {"write.data.path": "file:/wh/db/t/data"},
        "snapshots": [{"manifest-list": "file:/wh/db/t/metadata/snap-1.avro"},
                      {"manifests": ["file:/wh/db/t/metadata/m1.avro"]}],
        "statistics": [{"statistics-path": "file:/wh/db/t/metadata/s.puffin"}],
    }
    out = rewrite_metadata(metadata, move)
    assert not [s for s in _strings(out) if "/wh/" in s]
    assert out["metadata-log"] == [] and metadata["metadata-log"]  # the source's dict is untouched


def test_position_delete_files_name_the_copied_data_files(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from waggle.sync.iceberg import _position_deletes

    deletes = pa.table({"file_path": ["file:/wh/t/data/a.parquet", "file:/wh/t/data/b.parquet"],
                        "pos": pa.array([3, 7], pa.int64())})
    buf = io.BytesIO()
    pq.write_table(deletes, buf)
    moved = pq.read_table(io.BytesIO(_position_deletes(buf.getvalue(), Relocation("file:///wh/t", "file:///c/t"),
                                                       "position-delete file")))
    assert moved.column("file_path").to_pylist() == ["file:///c/t/data/a.parquet", "file:///c/t/data/b.parquet"]
    assert moved.column("pos").to_pylist() == [3, 7]


def test_a_position_delete_files_path_bounds_move_with_it_and_truncated_ones_are_dropped() -> None:
    """Readers match a position-delete file to its data files by its bounds on ``file_path``."""
    from waggle.sync.iceberg import DELETE_FILE_PATH, _relocate_bounds

    whole = b"file:/wh/t/data/a.parquet"
    data_file = {"lower_bounds": [{"key": DELETE_FILE_PATH, "value": whole}, {"key": 2147483545, "value": b"\0"}],
                 "upper_bounds": [{"key": DELETE_FILE_PATH, "value": b"file:/wh/u"}]}
    _relocate_bounds(data_file, Relocation("file:///wh/t", "file:///c/t"))
    assert data_file["lower_bounds"] == [{"key": DELETE_FILE_PATH, "value": b"file:///c/t/data/a.parquet"},
                                         {"key": 2147483545, "value": b"\0"}]
    assert data_file["upper_bounds"] == []  # truncated inside the root: dropped; readers match by partition
