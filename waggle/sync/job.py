"""One table's sync: compare the source with what the target recorded, then write only what changed.

Order of work, so that a crash at any point leaves a consistent target and a rerun repairs it:

1. the target table is created if it is missing (without the combined partition fingerprint);
2. copy mode: data files are copied by Spark executors (each into a temporary directory, then swapped in);
3. partitions are added and altered in batches, and dropped (with ``--propagate-deletes``);
4. last, the table is altered to record the combined fingerprint of its partitions (and the source's event id).

A rerun whose combined fingerprint matches reads the source, writes nothing, and never reads the target's
partitions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from waggle.hms.gen.hive_metastore.ttypes import Partition, Table
from waggle.hms.names import partition_name
from waggle.sync import iceberg
from waggle.sync.files import CopyTask, copy_files, copy_partitions, remove_tree
from waggle.sync.hms import Metastore, WritePool, read_pages
from waggle.sync.report import TableReport
from waggle.synced import objects as o
from waggle.upstream.blocking import MetastoreUnavailable


class SyncError(Exception):
    """A table cannot be synced; the message says why. Other tables go on."""


def describe(exc: BaseException) -> str:
    """An error as one line: the sync's own message, or the metastore exception's class and message."""
    if isinstance(exc, (SyncError, MetastoreUnavailable)):
        return str(exc)
    return f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"


@dataclass(frozen=True, slots=True)
class Options:
    dry_run: bool = False
    incremental: bool = False
    propagate_deletes: bool = False
    switch_mode: bool = False
    partition_filter: str | None = None


Progress = Callable[[int], None]


class TableSync:
    def __init__(self, source: Metastore, target: Metastore, plan: o.Target, options: Options,
                 db_names: Mapping[str, str], run_id: str, spark: Callable[[], Any] | None = None,
                 progress: Progress | None = None, writers: list[Metastore] | None = None,
                 readers: list[Metastore] | None = None) -> None:
        self.source, self.target, self.t, self.options = source, target, plan, options
        #: connections to the source that read pages of partitions in parallel (default: the source's)
        self.readers = readers or [source]
        #: connections to the target that add and alter partitions in the background (default: the target's)
        self.writers = writers or [target]
        self.db_names = db_names
        self.run_id = run_id
        #: starts (or returns) the Spark session that copies files; a mirror never needs one
        self.spark = spark
        self.progress = progress or (lambda n: None)
        self.now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.report = TableReport(f"{plan.source}:{plan.source_db}.{plan.source_table}", f"{plan.db}.{plan.table}",
                                  plan.mode)

    # -- the whole table ---------------------------------------------------------------------------------------
    def run(self) -> TableReport:
        started = time.monotonic()
        try:
            self._run()
            if self.options.dry_run:
                self.report.status = "planned"
        except Exception as exc:  # one table's failure never stops the others
            self.report.status = "failed"
            self.report.error = describe(exc)
        self.report.seconds = round(time.monotonic() - started, 3)
        return self.report

    def _plan(self, step: str) -> None:
        self.report.plan.append(step)

    def _run(self) -> None:
        t, r = self.t, self.report
        src = self.source.table(t.source_db, t.source_table)
        if src is None:
            raise SyncError(f"source table {t.source_object} does not exist in {t.source}")
        refusal = o.copy_refusal(src) if t.mode == o.COPY else None
        if refusal:
            raise SyncError(refusal)
        existing = self.target.table(t.db, t.table)
        if existing is not None:
            problem = o.ownership_problem(existing, t)
            if problem:
                raise SyncError(problem)
            was = (existing.parameters or {}).get(o.MODE, t.mode)
            if was != t.mode and not self.options.switch_mode:
                raise SyncError(f"target table {t.db}.{t.table} is a {was} of the source; making it a {t.mode} "
                                "needs --switch-mode (switch-mode: true in a sync file)")
        params = (existing.parameters or {}) if existing is not None else {}
        table_fp = o.table_fingerprint(src)
        event_id = self._events_shortcut(existing, params, table_fp)
        if event_id is None:
            return  # incremental: no event concerns this table since the last sync
        if t.mode == o.COPY and o.is_iceberg(src):
            self._iceberg_copy(src, existing, params, table_fp, event_id)
            return
        if o.is_view(src) or not src.partitionKeys:
            self._unpartitioned(src, existing, params, table_fp, event_id)
            return
        if existing is None:
            r.table = "created"
            if self.options.dry_run:
                self._plan("create table")
            else:
                self.target.create_table(o.target_table(src, t, self.now, self.db_names, table_fp))
        self._partitioned(src, existing, params, table_fp, event_id)

    def _events_shortcut(self, existing: Table | None, params: Mapping[str, str], table_fp: str) -> int | None:
        """The source's current notification event id (0 when it keeps no log); None when ``--incremental``
        finds no event for this table since the last sync (nothing to do)."""
        try:
            current = self.source.current_event_id()
        except Exception:
            return 0  # no notification log: the diff decides
        if (self.options.incremental and existing is not None and current > 0 and o.LAST_EVENT in params
                and params.get(o.FINGERPRINT) == table_fp):
            last = int(params[o.LAST_EVENT])
            if last >= current or self.source.events_for(self.t.source_db, self.t.source_table, last, current) == 0:
                self.report.table = "unchanged"
                return None
        return current

    # -- a view, or a table without partitions --------------------------------------------------------------------
    def _unpartitioned(self, src: Table, existing: Table | None, params: Mapping[str, str], table_fp: str,
                       event_id: int) -> None:
        t, r = self.t, self.report
        files = None
        if t.mode == o.COPY and not o.is_view(src):
            assert src.sd is not None and t.location is not None
            result = self._copy([CopyTask("", src.sd.location, t.location, params.get(o.FILES), self.run_id,
                                          self.options.dry_run)])[0]
            files = result.files_fingerprint
        new = o.target_table(src, t, self.now, self.db_names, table_fp)
        if files is not None:
            new.parameters[o.FILES] = files
        if event_id:
            new.parameters[o.LAST_EVENT] = str(event_id)
        changed = (existing is None or params.get(o.FINGERPRINT) != table_fp or params.get(o.MODE) != t.mode
                   or (files is not None and params.get(o.FILES) != files))
        if not changed:
            r.table = "unchanged"
            return
        r.table = "created" if existing is None else "updated"
        if self.options.dry_run:
            self._plan(f"{'create' if existing is None else 'update'} {'view' if o.is_view(src) else 'table'}")
            return
        self._put_table(existing, new)
        if not o.is_view(src):
            r.statistics += self.target.copy_statistics(self.source, t.source_db, t.source_table, new, [])

    # -- an Iceberg table, copied: its metadata rewritten to name the copy's files ---------------------------------
    def _iceberg_copy(self, src: Table, existing: Table | None, params: Mapping[str, str], table_fp: str,
                      event_id: int) -> None:
        """Copy the files of the source's current version and rewrite its metadata (``waggle.sync.iceberg``),
        then point the target at the new metadata file: the metastore is written last. A mirror needs none of
        this: it keeps the source's ``metadata_location``, and follows it on every run."""
        t, r = self.t, self.report
        where = f"Iceberg table {t.source}:{t.source_object}"
        source_metadata = (src.parameters or {}).get(o.METADATA_LOCATION)
        if not source_metadata:
            raise SyncError(f"{where} has no {o.METADATA_LOCATION} parameter")
        if existing is not None and params.get(o.FINGERPRINT) == table_fp and params.get(o.MODE) == t.mode:
            r.table = "unchanged"
            return
        r.table = "created" if existing is None else "updated"
        if self.options.dry_run:
            self._plan(f"copy Iceberg files named by {source_metadata}, then {r.table[:-1]} the table")
            return
        assert t.location is not None
        try:
            done = iceberg.copy_table(source_metadata, t.location,
                                      lambda pairs: copy_files(pairs, self._spark_session))
        except iceberg.IcebergError as exc:
            raise SyncError(f"{where}: {exc}") from exc
        r.files += done.files
        r.bytes += done.bytes
        new = o.target_table(src, t, self.now, self.db_names, table_fp)
        new.parameters[o.METADATA_LOCATION] = done.metadata_location
        new.parameters.pop(o.PREVIOUS_METADATA_LOCATION, None)
        if existing is not None and params.get(o.METADATA_LOCATION) not in (None, done.metadata_location):
            new.parameters[o.PREVIOUS_METADATA_LOCATION] = params[o.METADATA_LOCATION]
        if event_id:
            new.parameters[o.LAST_EVENT] = str(event_id)
        self._put_table(existing, new)

    def _put_table(self, existing: Table | None, new: Table) -> None:
        if existing is None:
            self.target.create_table(new)
        else:
            self.target.alter_table(self.t.db, self.t.table, new)

    def _spark_session(self) -> Any:
        if self.spark is None:
            raise SyncError("copy mode needs a Spark session to copy files")
        return self.spark()

    # -- a partitioned table ------------------------------------------------------------------------------------
    def _source_names(self, src: Table) -> list[str]:
        t = self.t
        if self.options.partition_filter:
            keys = [k.name for k in src.partitionKeys]
            parts = self.source.filtered_partitions(t.source_db, t.source_table, self.options.partition_filter)
            return [partition_name(keys, p.values) for p in parts]
        return self.source.partition_names(t.source_db, t.source_table)

    def _partitioned(self, src: Table, existing: Table | None, params: Mapping[str, str], table_fp: str,
                     event_id: int) -> None:
        t, r, dry = self.t, self.report, self.options.dry_run
        names = self._source_names(src)
        by_values = {tuple(o.partition_values(n)): n for n in names}
        fresh = existing is None and not dry and t.mode == o.MIRROR
        fps: dict[str, str] = {}
        locations: dict[str, str] = {}
        listed: list[str] | None = None  # the target's partition names, listed while the readers read ahead
        # Read the source a page at a time (the next page is read meanwhile). A new mirror's pages are written by
        # background writers while the following pages are read and prepared.
        with WritePool(self.writers if fresh else []) as pool:
            for page in read_pages(self.readers, t.source_db, t.source_table, names):
                batch = []
                for p in page:
                    name = by_values[tuple(p.values)]
                    fp = fps[name] = o.partition_fingerprint(p)
                    if p.sd is not None and p.sd.location:
                        locations[name] = p.sd.location
                    if fresh:
                        batch.append(o.target_partition(p, t, name, self.now, fingerprint=fp))
                if batch:
                    pool.submit(lambda m, b=batch: m.add_partitions(b))
                    r.created += len(batch)
                self.progress(len(page))
                if listed is None and existing is not None and not self.options.partition_filter:
                    listed = self.target.partition_names(t.db, t.table)
        # A mirror's combined fingerprint needs no file listing: compare it before reading the target's partitions,
        # which are read only when something differs.
        combined = o.combined(fps.items()) if t.mode == o.MIRROR else ""
        need_recorded = existing is not None and (t.mode == o.COPY or params.get(o.PARTITIONS) != combined)
        in_scope, recorded = self._target_partitions(src, existing is not None, need_recorded, listed)
        files = self._copy_partitions(names, locations, recorded) if t.mode == o.COPY else {}
        if t.mode == o.COPY:
            combined = o.combined((n, fp + files.get(n, "")) for n, fp in fps.items())
        new_names: list[str] = []
        changed_names: list[str] = []
        if existing is None and not fresh:
            new_names = list(fps)
        elif existing is not None and params.get(o.PARTITIONS) != combined:
            new_names = [n for n in fps if n not in recorded]
            changed_names = [n for n, fp in fps.items() if n in recorded and (
                recorded[n][0] != fp or (t.mode == o.COPY and recorded[n][1] != files.get(n)))]
        if not fresh:
            r.created, r.updated = len(new_names), len(changed_names)
        r.unchanged = len(fps) - r.created - r.updated
        source_set = set(fps)
        deleted = sorted(n for n in in_scope if n not in source_set)
        if self.options.propagate_deletes:
            r.dropped = len(deleted)
        else:
            r.kept = len(deleted)
        table_changed = existing is not None and (params.get(o.FINGERPRINT) != table_fp
                                                  or params.get(o.MODE) != t.mode)
        if existing is not None:
            r.table = "updated" if table_changed else "unchanged"
            if not (new_names or changed_names or r.dropped or table_changed or params.get(o.PARTITIONS) != combined):
                return  # a no-op: nothing written, not even a timestamp
        if dry:
            for verb, count in (("add", r.created), ("update", r.updated), ("drop", r.dropped)):
                if count:
                    self._plan(f"{verb} {count} partition(s)")
            if table_changed:
                self._plan("update table")
            return
        self._write_partitions(src, by_values, new_names, changed_names, files)
        if self.options.propagate_deletes and deleted:
            self.target.drop_partitions(t.db, t.table, deleted)
            if t.mode == o.COPY and t.location is not None:
                for name in deleted:
                    remove_tree(f"{t.location.rstrip('/')}/{name}")
        final = o.target_table(src, t, self.now, self.db_names, table_fp)
        final.parameters[o.PARTITIONS] = combined
        if event_id:
            final.parameters[o.LAST_EVENT] = str(event_id)
        if existing is not None and not table_changed:
            final.parameters[o.SYNCED_AT] = params.get(o.SYNCED_AT, self.now)  # the table itself did not change
        self.target.alter_table(t.db, t.table, final)
        written = new_names + changed_names if not fresh else list(fps)
        if written or table_changed or existing is None:
            r.statistics += self.target.copy_statistics(self.source, t.source_db, t.source_table, final, written)

    def _target_partitions(self, src: Table, exists: bool, need_recorded: bool, listed: list[str] | None = None
                           ) -> tuple[list[str], dict[str, tuple[str | None, str | None]]]:
        """The target's partitions within the partition filter (all without one), and when ``need_recorded``
        each one's recorded (fingerprint, files fingerprint). Under a filter, the metastore's one filtered read
        gives both; otherwise the names are listed and the partitions read a page at a time."""
        t = self.t
        recorded: dict[str, tuple[str | None, str | None]] = {}
        if not exists:
            return [], recorded
        if self.options.partition_filter:
            keys = [k.name for k in src.partitionKeys]
            parts = self.target.filtered_partitions(t.db, t.table, self.options.partition_filter)
            names = [partition_name(keys, p.values) for p in parts]
            if need_recorded:
                recorded = {n: _bookkeeping(p) for n, p in zip(names, parts, strict=True)}
            return names, recorded
        names = listed if listed is not None else self.target.partition_names(t.db, t.table)
        if need_recorded:
            by_values = {tuple(o.partition_values(n)): n for n in names}
            for page in read_pages(self.writers, t.db, t.table, names):
                for p in page:
                    recorded[by_values[tuple(p.values)]] = _bookkeeping(p)
        return names, recorded

    def _copy_partitions(self, names: list[str], locations: Mapping[str, str],
                         recorded: Mapping[str, tuple[str | None, str | None]]) -> dict[str, str]:
        t = self.t
        assert t.location is not None
        tasks = [CopyTask(n, locations[n], f"{t.location.rstrip('/')}/{n}", (recorded.get(n) or (None, None))[1],
                          self.run_id, self.options.dry_run) for n in names if n in locations]
        results = self._copy(tasks)
        return {res.name: res.files_fingerprint for res in results}

    def _copy(self, tasks: list[CopyTask]) -> list[Any]:
        assert self.spark is not None, "copy mode runs with a Spark session"
        results = copy_partitions(tasks, self.spark)
        failed = [res for res in results if res.error]
        if failed:
            first = failed[0].name or "(the table)"
            raise SyncError(f"copying {len(failed)} of {len(results)} location(s) failed; {first}: "
                            f"{failed[0].error}")
        for res in results:
            if res.copied:
                self.report.files += res.files
                self.report.bytes += res.bytes
        if self.options.dry_run and any(res.copied for res in results):
            self._plan(f"copy {sum(1 for res in results if res.copied)} location(s), {self.report.bytes} bytes")
        return results

    def _write_partitions(self, src: Table, by_values: Mapping[tuple[str, ...], str], new: list[str],
                          changed: list[str], files: Mapping[str, str]) -> None:
        """Add the new partitions and alter the changed ones, re-reading them from the source in pages."""
        t = self.t
        wanted = set(new)
        with WritePool(self.writers) as pool:
            for page in read_pages(self.readers, t.source_db, t.source_table, new + changed):
                adds: list[Partition] = []
                alters: list[Partition] = []
                for p in page:
                    name = by_values[tuple(p.values)]
                    target = o.target_partition(p, t, name, self.now, files.get(name))
                    (adds if name in wanted else alters).append(target)
                if adds:
                    pool.submit(lambda m, b=adds: m.add_partitions(b))
                if alters:
                    pool.submit(lambda m, b=alters: m.alter_partitions(t.db, t.table, b))


def _bookkeeping(p: Partition) -> tuple[str | None, str | None]:
    """A target partition's recorded (fingerprint, files fingerprint)."""
    params = p.parameters or {}
    return params.get(o.FINGERPRINT), params.get(o.FILES)
