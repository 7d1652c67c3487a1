"""Data files for copy mode, moved by Spark executors through fsspec (local files, HDFS, S3, ...).

One task per partition (or per unpartitioned table): list the source directory, fingerprint its files (relative
name, size, modification time), and if that differs from what the target recorded, or the target directory is
missing, copy the files into a temporary directory beside the target, then swap it into place. Leftover temporary
directories of a crashed run are removed first. The driver writes metadata only after every task finished, so
a partition never points at incomplete data.

These functions run on executors: they import nothing from the proxy and keep no state.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass
from typing import Any

#: Bytes per read while copying a file.
CHUNK = 8 * 1024 * 1024
TMP = ".waggle-tmp-"
OLD = ".waggle-old-"


@dataclass(frozen=True, slots=True)
class CopyTask:
    name: str  # the partition name, or "" for an unpartitioned table
    source: str  # source directory URL
    target: str  # target directory URL
    recorded: str | None  # the files fingerprint the target recorded, if any
    run_id: str
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class CopyResult:
    name: str
    files_fingerprint: str
    copied: bool
    files: int
    bytes: int
    error: str | None = None


def url(location: str) -> str:
    """A Hive location as fsspec reads it: ``file:/x`` is ``file:///x``; ``s3a://`` and ``s3n://`` are S3."""
    if location.startswith("file:") and not location.startswith("file://"):
        return "file://" + location[len("file:"):]
    for scheme in ("s3a://", "s3n://"):
        if location.startswith(scheme):
            return "s3://" + location[len(scheme):]
    return location


def _fs(location: str) -> tuple[Any, str]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url(location))
    return fs, path


def listing(fs: Any, path: str) -> dict[str, tuple[int, float]]:
    """Every file under ``path``: relative name -> (size, modification time). Hidden files (``.`` and ``_``
    names, as Hive and Spark treat them) are left out."""
    if not fs.exists(path):
        return {}
    out: dict[str, tuple[int, float]] = {}
    for full, info in fs.find(path, detail=True).items():
        rel = posixpath.relpath(full, path)
        if any(part.startswith((".", "_")) for part in rel.split("/")):
            continue
        mtime = info.get("mtime") or info.get("LastModified") or info.get("last_modified") or 0
        out[rel] = (int(info.get("size") or 0), float(mtime.timestamp() if hasattr(mtime, "timestamp") else mtime))
    return out


def files_fingerprint(files: dict[str, tuple[int, float]]) -> str:
    return hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:32]


def copy_one(task: CopyTask) -> CopyResult:
    """Make the target directory hold the source's files (see the module doc). Never raises."""
    try:
        sfs, spath = _fs(task.source)
        files = listing(sfs, spath)
        fingerprint = files_fingerprint(files)
        tfs, tpath = _fs(task.target)
        if fingerprint == task.recorded and tfs.exists(tpath):
            return CopyResult(task.name, fingerprint, False, 0, 0)
        size = sum(s for s, _ in files.values())
        if task.dry_run:
            return CopyResult(task.name, fingerprint, True, len(files), size)
        parent, base = posixpath.split(tpath.rstrip("/"))
        for stale in tfs.glob(posixpath.join(parent, f"{TMP}{base}-*")) + \
                tfs.glob(posixpath.join(parent, f"{OLD}{base}-*")):
            tfs.rm(stale, recursive=True)
        tmp = posixpath.join(parent, f"{TMP}{base}-{task.run_id}")
        tfs.makedirs(tmp, exist_ok=True)
        for rel in files:
            dst = posixpath.join(tmp, rel)
            tfs.makedirs(posixpath.dirname(dst), exist_ok=True)
            with sfs.open(posixpath.join(spath, rel), "rb") as src, tfs.open(dst, "wb") as out:
                while chunk := src.read(CHUNK):
                    out.write(chunk)
        if tfs.exists(tpath):
            old = posixpath.join(parent, f"{OLD}{base}-{task.run_id}")
            tfs.mv(tpath, old, recursive=True)
            tfs.mv(tmp, tpath, recursive=True)
            tfs.rm(old, recursive=True)
        else:
            tfs.mv(tmp, tpath, recursive=True)
        return CopyResult(task.name, fingerprint, True, len(files), size)
    except Exception as exc:  # reported per partition; the table fails, the others go on
        return CopyResult(task.name, "", False, 0, 0, f"{type(exc).__name__}: {exc}")


def remove_tree(location: str) -> None:
    """Delete a copied directory (a partition dropped with --propagate-deletes)."""
    fs, path = _fs(location)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def copy_partitions(tasks: list[CopyTask], spark: Any | None) -> list[CopyResult]:
    """Run the tasks on Spark's executors (one Spark task per ~16 partitions), or here without a session."""
    if not tasks:
        return []
    if spark is None:
        return [copy_one(t) for t in tasks]
    slices = max(1, min(len(tasks), (len(tasks) + 15) // 16))
    return list(spark.sparkContext.parallelize(tasks, slices).map(copy_one).collect())
