"""A page's work done at the target, state-based: each table, or each named partition, is made what the source
holds now (re-read from the source), or absent when the source no longer holds it (with ``propagate-deletes``;
kept otherwise). Applying the same work twice writes nothing the second time, so a page replayed after a crash
ends in the state a run never killed reaches.

- a whole table (created, altered, written without partitions, renamed, dropped) is one
  :class:`~waggle.sync.job.TableSync`, the batch sync of that table;
- named partitions are read from both sides by name and compared by their fingerprints: new ones are added in one
  ``add_partitions`` per table, changed ones altered in one ``alter_partitions``, gone ones dropped in one call;
  in copy mode the files of every partition of the page are copied first, in one Spark job;
- a rename moves the target table (``alter_table`` with the new name) when the target holds the old one and
  made it, then syncs it;
- a table that is bad input (the target does not hold it, or did not make it) is reported failed with the events
  that named it, and the rest of the page goes on;
- databases and functions (:mod:`.databases`): databases the source holds are made and carried first, then
  functions, then tables; databases the source no longer holds are dropped last, once their tables' work is done.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from queue import Queue
from typing import Any
from urllib.parse import urlsplit

from waggle.common.logging import get_logger
from waggle.hms.gen.hive_metastore.ttypes import Partition
from waggle.hms.names import partition_name
from waggle.sync.files import CopyTask, copy_partitions, remove_tree, url
from waggle.sync.follow.databases import Catalog, database_key, function_key
from waggle.sync.follow.plan import DatabaseWork, FunctionWork, Name, Work
from waggle.sync.hms import Metastore
from waggle.sync.job import Options, SyncError, TableSync, describe
from waggle.sync.runner import TableSpec, target_of
from waggle.synced import objects as o

log = get_logger("waggle.sync.follow")


@dataclass
class Applied:
    """What a page's work did."""

    objects: int = 0
    partitions: int = 0
    bytes: int = 0
    failed: dict[str, str] = field(default_factory=dict)  # target db.table -> why
    failed_events: set[int] = field(default_factory=set)


@dataclass
class _Partitions:
    """One table's partition work, between reading and writing."""

    work: Work
    target: o.Target
    adds: list[Partition] = field(default_factory=list)
    alters: list[Partition] = field(default_factory=list)
    drops: list[str] = field(default_factory=list)
    #: copy mode: (name, source partition, recorded files fingerprint, recorded fingerprint); None: a new one
    copies: list[tuple[str, Partition, str | None, str | None]] = field(default_factory=list)


class Applier:
    def __init__(self, spec: TableSpec, source: Metastore, target: Metastore, readers: list[Metastore],
                 writers: list[Metastore], spark: Callable[[], Any] | None, run_id: str) -> None:
        self.spec, self.source, self.target = spec, source, target
        self.readers, self.writers = readers, writers
        self.spark, self.run_id = spark, run_id
        self.locations: dict[str, str | None] = {}
        #: tables known, from an earlier page, to exist at the target (made by the sync) and at the source, with
        #: the source's partition keys; forgotten on whole-table work or a failure
        self.known: dict[Name, list[str]] = {}
        self.options = Options(propagate_deletes=spec.propagate_deletes, switch_mode=spec.switch_mode,
                               partition_filter=spec.partition_filter)
        self.catalog = Catalog(spec, source, target, self.locations, self._forget)

    def _forget(self, db: str) -> None:
        """A database is gone: what is known of its tables goes with it."""
        self.known = {name: keys for name, keys in self.known.items() if name[0] != db}

    def _target(self, name: Name) -> o.Target:
        return target_of(self.spec, name[0], name[1], self.target, self.locations)

    def db_names(self, names: list[Name]) -> Mapping[str, str]:
        return {db: (self.spec.target_database or db).lower() for db, _ in names}

    def apply(self, page: tuple[Work, ...], databases: tuple[DatabaseWork, ...] = (),
              functions: tuple[FunctionWork, ...] = ()) -> Applied:
        """Databases the source holds, then functions; whole tables one after another; then the partition work of
        every other table, read on the source and target connection pairs in parallel, copied in one job, and
        written in parallel; then databases the source no longer holds."""
        done = Applied()
        gone = self._databases(databases, functions, done)
        self._tables(page, done)
        for work in gone:
            self._catalog_work(done, database_key(self.spec, work.db), work.events, "database",
                               partial(self.catalog.gone, work))
        return done

    def _databases(self, databases: tuple[DatabaseWork, ...], functions: tuple[FunctionWork, ...], done: Applied
                   ) -> list[DatabaseWork]:
        """The databases the source holds, made and carried, then the functions; the databases it no longer holds
        (their work is done after the tables')."""
        gone: list[DatabaseWork] = []

        def present(w: DatabaseWork) -> int:
            source = self.catalog.source_database(w.db)
            if source is None:
                gone.append(w)
                return 0
            return self.catalog.present(w, source)

        for work in databases:
            self._catalog_work(done, database_key(self.spec, work.db), work.events, "database", partial(present, work))
        for fn in functions:
            self._catalog_work(done, function_key(self.spec, fn.db, fn.name), fn.events, "function",
                               partial(self.catalog.function, fn))
        return gone

    def _catalog_work(self, done: Applied, key: str, events: list[int], what: str, job: Callable[[], int]) -> None:
        try:
            done.objects += job()
        except Exception as exc:  # one database's or function's failure never stops the rest
            why = describe(exc)
            done.failed[key] = why
            done.failed_events.update(events)
            log.warning(f"sync.follow_{what}_failed", target=key, events=events, error=why)

    def _tables(self, page: tuple[Work, ...], done: Applied) -> None:
        names = [w.name for w in page]
        partial: list[tuple[Work, o.Target]] = []
        for work in page:
            try:
                if work.whole or self.spec.partition_filter:
                    self.known.pop(work.name, None)
                    if work.renamed_from is not None:
                        self.known.pop(work.renamed_from, None)
                    self._whole(work, done, names)
                else:
                    partial.append((work, self._target(work.name)))
            except Exception as exc:  # one table's failure never stops the others
                self._failed(done, work, describe(exc))
        prepared: list[_Partitions] = []
        reads = self._in_parallel(lambda item, pair: self._read_partitions(item[0], item[1], *pair), partial)
        for (work, _), result in zip(partial, reads, strict=True):
            if isinstance(result, BaseException):
                self._failed(done, work, describe(result))
            elif result is not None:
                prepared.append(result)
        if prepared:
            self._write_partitions(prepared, done)

    def _in_parallel(self, job: Callable[[Any, tuple[Metastore, Metastore]], Any], items: Sequence[Any]
                     ) -> list[Any]:
        """``job(item, pair)`` for each item, each with a (source, target) connection pair of its own, as many at
        once as there are pairs; each result, or the exception raised, in order."""
        pairs: Queue[tuple[Metastore, Metastore]] = Queue()
        for pair in zip(self.readers, self.writers, strict=False):
            pairs.put(pair)

        def run(item: Any) -> Any:
            pair = pairs.get()
            try:
                return job(item, pair)
            except Exception as exc:
                return exc
            finally:
                pairs.put(pair)

        if len(items) <= 1 or pairs.qsize() <= 1:
            return [run(item) for item in items]
        with ThreadPoolExecutor(pairs.qsize(), thread_name_prefix="apply") as pool:
            return list(pool.map(run, items))

    def _failed(self, done: Applied, work: Work, why: str) -> None:
        target = f"{(self.spec.target_database or work.name[0]).lower()}.{work.name[1]}"
        done.failed[target] = why
        done.failed_events.update(work.events)
        log.warning("sync.follow_table_failed", table=target, source=f"{work.name[0]}.{work.name[1]}",
                    events=work.events, error=why)

    # -- a whole table ---------------------------------------------------------------------------------------------
    def _whole(self, work: Work, done: Applied, names: list[Name]) -> None:
        if work.renamed_from is not None:
            self._move(work, done)
        t = self._target(work.name)
        source = self.source.table(*work.name)
        if source is None:
            self._gone(work, t, done)
            return
        job = TableSync(self.source, self.target, t, self.options, self.db_names(names), self.run_id,
                        spark=self.spark if t.mode == o.COPY else None, writers=self.writers, readers=self.readers)
        report = job.run()
        if report.status == "failed":
            raise SyncError(report.error or "failed")
        if report.table != "unchanged":
            done.objects += 1
        done.partitions += report.created + report.updated + report.dropped
        done.bytes += report.bytes

    def _move(self, work: Work, done: Applied) -> None:
        """A rename at the source: rename the target too, when it holds the old table and made it, the source no
        longer has the old name, and the target has nothing under the new one yet."""
        assert work.renamed_from is not None
        old, new = self._target(work.renamed_from), self._target(work.name)
        existing = self.target.table(old.db, old.table)
        if existing is None or o.ownership_problem(existing, old) or self.target.table(new.db, new.table):
            return
        if self.source.table(*work.renamed_from) is not None:
            return
        moved = copy.deepcopy(existing)
        moved.dbName, moved.tableName = new.db, new.table
        moved.parameters = {**(moved.parameters or {}), o.SOURCE_OBJECT: new.source_object}
        was = existing.sd.location if existing.sd is not None else None
        if new.mode == o.COPY and was and new.location and moved.sd is not None:
            # a copy's files move with it, as Hive moves a managed table's directory and its partitions'
            # locations on a rename (HiveAlterHandler.alterTable): nothing is copied again. Directory first, then
            # the partitions, then the table, so that a replay after a crash finds each step done or to do.
            fs, old_path = _filesystem(was)
            new_path = _filesystem(new.location)[1]
            if fs.exists(old_path) and not fs.exists(new_path):
                fs.mv(old_path, new_path, recursive=True)
            moved.sd.location = new.location
        self._move_partitions(old, new, was)
        self.target.alter_table(old.db, old.table, moved)
        done.objects += 1
        log.info("sync.follow_renamed", source=f"{work.renamed_from[0]}.{work.renamed_from[1]}",
                 target=f"{new.db}.{new.table}", was=f"{old.db}.{old.table}")

    def _move_partitions(self, old: o.Target, new: o.Target, was: str | None) -> None:
        """The moved table's partitions name their new source object (and, in a copy, their new location)."""
        names = self.target.partition_names(old.db, old.table)
        prefix = urlsplit(was or "").path.rstrip("/")  # the metastore may spell the scheme differently (file:/, file:///)
        for start in range(0, len(names), 1000):
            changed = []
            for p in self.target.partitions_by_names(old.db, old.table, names[start:start + 1000]):
                params = dict(p.parameters or {})
                _, _, name = params.get(o.SOURCE_OBJECT, "").partition("/")
                location = urlsplit(p.sd.location).path if p.sd is not None and p.sd.location else None
                relocate = bool(new.mode == o.COPY and new.location is not None and prefix and location is not None
                                and location.startswith(prefix + "/"))
                if not name or (params[o.SOURCE_OBJECT] == f"{new.source_object}/{name}" and not relocate):
                    continue
                params[o.SOURCE_OBJECT] = f"{new.source_object}/{name}"
                p.parameters = params
                if relocate and p.sd is not None and location is not None and new.location is not None:
                    p.sd.location = new.location.rstrip("/") + location[len(prefix):]
                changed.append(p)
            if changed:
                self.target.alter_partitions(old.db, old.table, changed)

    def _gone(self, work: Work, t: o.Target, done: Applied) -> None:
        """The source no longer holds the table: drop the target's with propagate-deletes, else keep it."""
        existing = self.target.table(t.db, t.table)
        if existing is None or not self.spec.propagate_deletes:
            return
        problem = o.ownership_problem(existing, t)
        if problem:
            raise SyncError(problem)
        self.target.drop_table(t.db, t.table)
        if t.mode == o.COPY and existing.sd is not None and existing.sd.location:
            remove_tree(existing.sd.location)
        done.objects += 1

    # -- named partitions ------------------------------------------------------------------------------------------
    def _read_partitions(self, work: Work, t: o.Target, source_ms: Metastore, target_ms: Metastore
                         ) -> _Partitions | None:
        keys = self.known.get(work.name)
        if keys is None:
            existing = target_ms.table(t.db, t.table)
            if existing is None:
                raise SyncError(f"the target holds no table {t.db}.{t.table} for these partition events (events "
                                f"{_ids(work.events)}); a bootstrap of the policy makes it")
            problem = o.ownership_problem(existing, t)
            if problem:
                raise SyncError(problem)
            source = source_ms.table(*work.name)
            if source is None:
                return None  # dropped meanwhile: its DROP_TABLE event follows
            keys = [k.name for k in source.partitionKeys or []]
            self.known[work.name] = keys
        names = []
        for pairs in work.partitions:
            values = dict(pairs)
            if set(values) != {k.lower() for k in keys}:
                raise SyncError(f"events {_ids(work.events)} name partition keys {sorted(values)}, the table has "
                                f"{keys}")
            names.append(partition_name(keys, [values[k.lower()] for k in keys]))
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        at_source = {partition_name(keys, p.values): p for p in source_ms.partitions_by_names(*work.name, names)}
        at_target = {partition_name(keys, p.values): p for p in target_ms.partitions_by_names(t.db, t.table, names)}
        out = _Partitions(work, t)
        for name in names:
            src, have = at_source.get(name), at_target.get(name)
            if src is None:
                if have is not None and self.spec.propagate_deletes:
                    out.drops.append(name)
                continue
            fp = o.partition_fingerprint(src)
            recorded = (have.parameters or {}) if have is not None else {}
            if t.mode == o.COPY:
                out.copies.append((name, src, recorded.get(o.FILES), None if have is None else
                                   recorded.get(o.FINGERPRINT, "")))
                continue
            if have is None:
                out.adds.append(o.target_partition(src, t, name, now, fingerprint=fp))
            elif recorded.get(o.FINGERPRINT) != fp:
                out.alters.append(o.target_partition(src, t, name, now, fingerprint=fp))
        return out

    def _write_partitions(self, tables: list[_Partitions], done: Applied) -> None:
        """Copy every partition's files of the page in one Spark job, then write each table's partitions."""
        tasks = [CopyTask(f"{i}/{name}", src.sd.location, f"{p.target.location.rstrip('/')}/{name}", recorded,
                          self.run_id)
                 for i, p in enumerate(tables) for name, src, recorded, _ in p.copies
                 if p.target.location is not None and src.sd is not None and src.sd.location]
        if tasks and self.spark is None:
            raise SyncError("copy mode needs a Spark session to copy files")
        results = {r.name: r for r in copy_partitions(tasks, self.spark)} if tasks and self.spark else {}
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        writes = self._in_parallel(lambda item, pair: self._finish(item[0], item[1], results, now, pair[1]),
                                   list(enumerate(tables)))
        for p, result in zip(tables, writes, strict=True):
            if isinstance(result, BaseException):
                self.known.pop(p.work.name, None)
                self._failed(done, p.work, describe(result))
            else:
                done.bytes += result[0]
                done.partitions += result[1]

    def _finish(self, i: int, p: _Partitions, results: Mapping[str, Any], now: str, target_ms: Metastore
                ) -> tuple[int, int]:
        """One table's partitions written (copy mode: from its copies' results); (bytes copied, partitions)."""
        copied = 0
        for name, src, recorded, recorded_fp in p.copies:
            result = results.get(f"{i}/{name}")
            if result is None:
                continue
            if result.error:
                raise SyncError(f"copying {name} failed: {result.error}")
            copied += result.bytes if result.copied else 0
            fp = o.partition_fingerprint(src)
            target = o.target_partition(src, p.target, name, now, result.files_fingerprint, fingerprint=fp)
            if recorded_fp is None:
                p.adds.append(target)
            elif result.copied or recorded != result.files_fingerprint or recorded_fp != fp:
                p.alters.append(target)
        t = p.target
        if p.adds:
            target_ms.add_partitions(p.adds)
        if p.alters:
            target_ms.alter_partitions(t.db, t.table, p.alters)
        if p.drops:
            target_ms.drop_partitions(t.db, t.table, p.drops)
            if t.mode == o.COPY and t.location is not None:
                for name in p.drops:
                    remove_tree(f"{t.location.rstrip('/')}/{name}")
        return copied, len(p.adds) + len(p.alters) + len(p.drops)


def _filesystem(location: str) -> tuple[Any, str]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url(location))
    return fs, path


def _ids(events: list[int]) -> str:
    return ", ".join(map(str, events[:5])) + (f" and {len(events) - 5} more" if len(events) > 5 else "")
