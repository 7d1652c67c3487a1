"""``waggle sync``: which tables, from which member, how; then one :class:`~waggle.sync.job.TableSync` each.

The source is a member of the federation file (through its SSH tunnel if it has one) and the target is the
primary. Tables are given as ``DB.TABLE`` regexes (the database part is what comes before the first dot),
from the command line or from a sync file (:func:`load_sync_file`).
"""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import yaml

from waggle.common.logging import get_logger
from waggle.config.loader import ConfigError, load
from waggle.config.model import MetastoreConfig
from waggle.config.reader import MISSING, Reader
from waggle.config.registry import setting_field
from waggle.config.sync_settings import SYNC, SYNC_JOB, Sync, SyncJob
from waggle.hms.gen.hive_metastore.ttypes import AlreadyExistsException, Database
from waggle.sync.hms import Metastore, connections
from waggle.sync.job import Options, TableSync, describe
from waggle.sync.report import RunReport, TableReport
from waggle.sync.system import mark_target, record_coverage
from waggle.sync.throttle import WriteThrottle
from waggle.synced import objects as o
from waggle.upstream.blocking import kerberos_identity
from waggle.upstream.handshake import UpstreamCredentials

log = get_logger("waggle.sync")


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One entry of work: table patterns and how to sync them. Each option is its sync-file setting's
    (:class:`~waggle.config.sync_settings.SyncJob`), default included; the command line fills the same object."""

    source: str
    patterns: tuple[str, ...]
    mode: str = setting_field(SyncJob.MODE)
    target_database: str | None = setting_field(SyncJob.TARGET_DATABASE)
    partition_filter: str | None = setting_field(SyncJob.PARTITION_FILTER)
    location_root: str | None = setting_field(SyncJob.LOCATION_ROOT)
    propagate_deletes: bool = setting_field(SyncJob.PROPAGATE_DELETES)
    switch_mode: bool = setting_field(SyncJob.SWITCH_MODE)


@dataclass(frozen=True, slots=True)
class SyncRun:
    """A whole run: the sync file's settings (:class:`~waggle.config.sync_settings.Sync`), and what only the
    command line says."""

    federation_config: str
    specs: tuple[TableSpec, ...]
    incremental: bool = setting_field(Sync.INCREMENTAL)
    master: str | None = setting_field(Sync.MASTER)
    max_writes_per_second: int = setting_field(Sync.MAX_WRITES_PER_SECOND)  # per target metastore; 0: no limit
    dry_run: bool = False
    report: str | None = None
    progress: bool | None = None  # None: a progress bar when stderr is a terminal
    #: who logs in to Kerberized metastores: --principal/--keytab, else the server file's keytab, else the
    #: ticket cache (waggle.upstream.blocking.kerberos_identity)
    principal: str | None = None
    keytab: str | None = None
    server_config: str | None = None


class SyncConfigError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


# -- the sync file: read through the settings registry (waggle.config.sync_settings.Sync / SyncJob) --------------------
def load_sync_file(path: str) -> SyncRun:
    """Read a sync file (docs/reference/sync-configuration.md). Every problem names the file, the key and the
    value."""
    problems: list[str] = []
    run, _ = parse_sync_data(path, read_sync_data(path), problems)
    if problems:
        raise SyncConfigError(problems)
    return run


def read_sync_data(path: str) -> dict[str, object]:
    """A sync file's YAML map."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SyncConfigError([f"{path}: cannot read: {exc}"]) from None
    if not isinstance(data, dict):
        raise SyncConfigError([f"{path}: expected a map with 'federation-config' and 'jobs'"])
    return data


def parse_sync_data(path: str, data: dict[str, object], problems: list[str]
                    ) -> tuple[SyncRun, list[tuple[Reader, TableSpec]]]:
    """A sync file's run, and each job's reader with its spec (the policies read their own keys with it); the
    problems go to ``problems``."""
    r = Reader(path, data, "", problems, nulls_are_unset=False)
    for key, _ in r.unknown(SYNC):
        problems.append(f"{path}: unknown key '{key}' (expected one of {', '.join(sorted(SYNC.keys()))})")
    fed = r.raw(Sync.FEDERATION_CONFIG.key)
    if not isinstance(fed, str) or not fed:
        r.require(Sync.FEDERATION_CONFIG.key)
        fed = ""
    elif not Path(fed).is_absolute():
        fed = str(Path(path).resolve().parent / fed)
    default_source = r.get(Sync.SOURCE)
    default_deletes = r.get(Sync.PROPAGATE_DELETES)
    jobs = r.raw(Sync.JOBS.key)
    read: list[tuple[Reader, TableSpec]] = []
    if not isinstance(jobs, list) or not jobs:
        r.require(Sync.JOBS.key, ": a list of {tables: ..., mode: ...}")
        jobs = []
    for i, job in enumerate(jobs):
        where = f"jobs[{i}]"
        if not isinstance(job, dict):
            r.fail(where, job, "expected a map")
            continue
        jr = Reader(path, job, f"{where}.", problems, nulls_are_unset=False)
        read.append((jr, _job(jr, default_source, default_deletes)))
    run = r.build(SyncRun, federation_config=fed, specs=tuple(spec for _, spec in read))
    return run, read


def _job(r: Reader, default_source: str | None, default_deletes: bool) -> TableSpec:
    """One entry of ``jobs``; its problems go to ``r.problems``."""
    for key, _ in r.unknown(SYNC_JOB):
        r.problems.append(f"{r.file}: unknown key '{r.path(key)}'")
    tables = r.raw(SyncJob.TABLES.key)  # comma-separated, or a YAML list
    text = "" if tables is MISSING or not tables else tables if isinstance(tables, str) else \
        ",".join(map(str, cast(Iterable[object], tables)))
    patterns, bad = parse_patterns(text)
    if not patterns:
        r.require(SyncJob.TABLES.key)
    for pattern, why in bad:
        r.fail(SyncJob.TABLES.key, pattern, why)
    source = r.get(SyncJob.SOURCE, default_source)
    if not source:
        r.require(SyncJob.SOURCE.key, " (or a top-level 'source')")
    return r.build(TableSpec, {"propagate_deletes": default_deletes}, source=source or "", patterns=patterns)


def parse_patterns(text: str) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
    """The comma-separated table patterns in ``text``, and (pattern, problem) for each one that is not valid."""
    patterns = tuple(p.strip() for p in text.split(",") if p.strip())
    return patterns, [(p, why) for p in patterns if (why := pattern_problem(p))]


def pattern_problem(pattern: str) -> str | None:
    if "." not in pattern:
        return "expected DB.TABLE (a regex over database.table names, e.g. sales.* or sales.order_.*)"
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"not a regex: {exc}"
    return None


# -- resolving tables ------------------------------------------------------------------------------------------
_LITERAL_DB = re.compile(r"([\w$]+)\.")


#: what a job (a batch run) or a policy (``--follow``) whose table patterns name no table at its source says
NO_MATCH = "no source table matches"


def spec_label(spec: TableSpec) -> str:
    """A spec as its source and patterns, ``analytics:sales.*,web.visits``: how reports and errors name it."""
    return f"{spec.source}:{','.join(spec.patterns)}"


def resolve(spec: TableSpec, source: Metastore, target: Metastore, dry_run: bool) -> list[o.Target]:
    """The tables a spec names at the source (:func:`source_tables`), each with its target (creating target
    databases unless dry)."""
    locations: dict[str, str | None] = {}  # target database -> its location (each database looked at once)
    return [target_of(spec, db, table, target, locations, dry_run) for db, table in source_tables(spec, source)]


def source_tables(spec: TableSpec, source: Metastore) -> list[tuple[str, str]]:
    """The (database, table) names a spec's patterns name at the source; none is :data:`NO_MATCH`.

    A pattern is a regex over ``database.table`` names: ``sales.*`` is every table of ``sales``,
    ``sales.order_.*`` the ones whose name starts with ``order_``. When it starts with a plain database name,
    only that database is listed. A plain ``db.table`` that matches nothing is named anyway: its table sync
    reports it missing."""
    found: list[tuple[str, str]] = []
    databases: list[str] | None = None
    for pattern in spec.patterns:
        rx = re.compile(pattern, re.IGNORECASE)
        literal = _LITERAL_DB.match(pattern)
        if literal:
            dbs = [literal.group(1)]
        else:
            databases = databases if databases is not None else source.databases()
            dbs = databases
        matched = False
        for db in dbs:
            if literal and not source.has_database(db):
                continue  # a listed database exists; a named one may not
            for table in source.tables(db):
                if rx.fullmatch(f"{db}.{table}"):
                    matched = True
                    if (db, table) not in found:
                        found.append((db, table))
        if not matched and re.fullmatch(r"[\w$]+\.[\w$]+", pattern):
            db, table = pattern.split(".", 1)
            found.append((db, table))  # reported as missing by its table sync
    return found


def target_of(spec: TableSpec, db: str, table: str, target: Metastore, locations: dict[str, str | None],
              dry_run: bool = False) -> o.Target:
    """Where the source table ``db.table`` goes (creating the target database unless dry); ``locations``
    remembers each target database's location across calls."""
    tdb = (spec.target_database or db).lower()
    if tdb not in locations:
        locations[tdb] = target.database_location(tdb)
        if locations[tdb] is None and not dry_run:
            create_database(target, tdb, spec, db)
            locations[tdb] = target.database_location(tdb) if spec.mode == o.COPY else ""
        elif not dry_run:
            mark_target(target, tdb, spec.source)
    location = None
    if spec.mode == o.COPY:
        root = spec.location_root or locations[tdb]
        if root is None:  # a dry run did not create the database: where the metastore would put it
            default = target.database_location("default") or ""
            root = f"{default.rsplit('/', 1)[0]}/{tdb}.db"
        location = f"{root.rstrip('/')}/{table.lower()}"
    return o.Target(spec.source, db, table, tdb, table.lower(), spec.mode, location)


def create_database(target: Metastore, db: str, spec: TableSpec, source_db: str) -> None:
    try:
        target.create_database(Database(name=db, description=f"synced by waggle from {spec.source}:{source_db}",
                                        parameters={o.SOURCE: spec.source}))
    except AlreadyExistsException:
        return  # another job or policy made it meanwhile
    log.info("sync.database_created", database=db)


# -- the run -------------------------------------------------------------------------------------------------------
def run(sync: SyncRun, out: IO[str] | None = None) -> int:
    """Sync every table; print the report. Exit code 0: all succeeded; 2: some table failed; 1: nothing ran."""
    out = out or sys.stdout
    started = time.monotonic()
    try:
        config = load(sync.server_config, sync.federation_config, serving=False)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1
    members = {m.name: m for m in config.federation.members}
    problems = [f"source metastore '{s.source}' is not in {sync.federation_config} (members: {', '.join(members)})"
                for s in sync.specs if s.source not in members]
    problems += [f"source metastore '{s.source}' is the primary: the sync brings other members' tables into it"
                 for s in sync.specs if s.source == config.federation.primary.name]
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1
    report = RunReport(dry_run=sync.dry_run)
    primary = config.federation.primary
    credentials = kerberos_identity(sync.principal, sync.keytab, config.server.security.kerberos)
    throttle = WriteThrottle(primary.name, sync.max_writes_per_second)  # the run has one target: the primary
    spark = _LazySpark(sync.master)
    run_id = uuid.uuid4().hex[:8]
    bar = _progress(sync.progress)
    try:
        for source_name in dict.fromkeys(s.source for s in sync.specs):
            specs = [s for s in sync.specs if s.source == source_name]
            _run_source(members[source_name], primary, credentials, throttle, specs, sync, report, spark, run_id,
                        bar)
    finally:
        if bar is not None:
            bar.close()
        spark.stop()
    report.seconds = time.monotonic() - started
    report.writes = [throttle.stats()]
    print(report.render(), file=out)
    if sync.report:
        Path(sync.report).write_text(report.to_json())
    log.info("sync.finished", tables=len(report.tables), failed=len(report.failed), seconds=round(report.seconds, 2),
             **report.totals(), writes={w.metastore: w.writes for w in report.writes})
    return 2 if report.failed else 0


def _run_source(member: MetastoreConfig, primary: MetastoreConfig, credentials: UpstreamCredentials,
                throttle: WriteThrottle, specs: list[TableSpec], sync: SyncRun, report: RunReport, spark: _LazySpark,
                run_id: str, bar: Any) -> None:
    try:
        # two connections each way: pages of partitions are read, and written, two at a time
        with connections(member, 2, credentials) as readers, \
                connections(primary, 2, credentials, throttle=throttle) as writers:
            source, target = readers[0], writers[0]
            started = time.time()  # every copy a spec's run finds in sync matched its source from here on
            resolved: list[tuple[o.Target, Options]] = []
            covered: dict[str, list[o.Target]] = {}  # spec key -> its tables, for specs that resolved
            for spec in specs:
                opts = Options(dry_run=sync.dry_run, incremental=sync.incremental,
                               propagate_deletes=spec.propagate_deletes, switch_mode=spec.switch_mode,
                               partition_filter=spec.partition_filter)
                try:
                    targets = resolve(spec, source, target, sync.dry_run)
                except Exception as exc:
                    report.tables.append(TableReport(spec_label(spec), "-", spec.mode,
                                                     status="failed", error=describe(exc)))
                    continue
                if not targets:
                    report.tables.append(TableReport(spec_label(spec), "-", spec.mode,
                                                     status="failed", error=NO_MATCH))
                resolved += [(t, opts) for t in targets]
                if targets:
                    covered[_coverage_name(spec)] = targets
            db_names = {t.source_db: t.db for t, _ in resolved}
            for t, opts in resolved:
                log.info("sync.table_started", source=f"{t.source}:{t.source_object}", target=f"{t.db}.{t.table}",
                         mode=t.mode)
                job = TableSync(source, target, t, opts, db_names, run_id,
                                spark=spark.get if t.mode == o.COPY else None,
                                progress=bar.update if bar is not None else None,
                                writers=writers, readers=readers)
                result = job.run()
                report.tables.append(result)
                log.info("sync.table_finished", source=result.source, target=result.target, status=result.status,
                         table=result.table, created=result.created, updated=result.updated,
                         dropped=result.dropped, unchanged=result.unchanged, bytes=result.bytes,
                         seconds=result.seconds, error=result.error)
                if result.status == "failed":
                    covered = {k: v for k, v in covered.items() if t not in v}
            if not sync.dry_run:
                for spec in specs:
                    if _coverage_name(spec) in covered:
                        record_coverage(target, _coverage_name(spec), spec.source, spec.patterns, started,
                                        spec.target_database, spec.mode)
    except Exception as exc:  # the source or the target cannot be reached: every table of this source fails
        for spec in specs:
            report.tables.append(TableReport(spec_label(spec), "-", spec.mode,
                                             status="failed", error=describe(exc)))


def _coverage_name(spec: TableSpec) -> str:
    """The name of the coverage record of a batch run of ``spec`` (:mod:`waggle.synced.coverage`)."""
    return "run-" + o.digest([spec.source, list(spec.patterns), spec.target_database, spec.mode])[:12]


class _LazySpark:
    """A Spark session, started the first time a copy needs executors: ``--master``, else the one spark-submit
    set, else ``local[*]``."""

    def __init__(self, master: str | None) -> None:
        self.master = master
        self.session: Any = None

    def get(self) -> Any:
        if self.session is None:
            from pyspark import SparkConf
            from pyspark.sql import SparkSession

            # Python workers run this interpreter (which has waggle and fsspec) unless told otherwise.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = (SparkSession.builder.appName("waggle-sync").config("spark.ui.enabled", "false")
                       .config("spark.ui.showConsoleProgress", "false"))
            if self.master:
                builder = builder.master(self.master)
            elif not SparkConf().contains("spark.master"):
                builder = builder.master("local[*]")
            self.session = builder.getOrCreate()
        return self.session

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()


#: seconds between two progress lines of a run whose output is not a terminal
PROGRESS_LINE_SECONDS = 10.0


class ProgressLines:
    """A run's progress where no bar can be drawn (output to a file, a pipe, a pod's log): a ``sync.progress`` line
    at most every ``every`` seconds while partitions are being synced, with how many so far and how fast."""

    def __init__(self, every: float = PROGRESS_LINE_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.clock = every, clock
        self.started = self.last = clock()
        self.partitions = 0

    def update(self, n: int) -> None:
        self.partitions += n
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            elapsed = now - self.started
            log.info("sync.progress", partitions=self.partitions, seconds=round(elapsed, 1),
                     per_second=round(self.partitions / elapsed, 1) if elapsed > 0 else None)

    def close(self) -> None:
        pass


def _progress(wanted: bool | None) -> Any:
    """A progress bar on a terminal, progress lines elsewhere; nothing with ``--no-progress``."""
    if wanted is False:
        return None
    if wanted is None and not sys.stderr.isatty():
        return ProgressLines()
    from tqdm import tqdm

    return tqdm(unit=" partitions", desc="sync", file=sys.stderr)
