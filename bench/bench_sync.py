"""``waggle sync`` against the physical limits it works within, all figures from one run.

    python bench/bench_sync.py [--partitions 5000] [--file-kb 64] [--spark-sql]

Two local Derby-backed Hive 2.3 metastores are started (Java 17 and pyspark needed), a *source* and a
*target* (waggle's primary), with full JIT (``fast_start=False``). The source gets ``bench_src.events``: an
external text table partitioned by ``part`` with ``--partitions`` partitions, each holding one data file grown to
about ``--file-kb`` KB (so that the copy is not all per-file overhead). Then, each into a fresh database of the
target, every figure a ratio to the limit it is anchored on:

1. **mirror vs raw add_partitions**. The limit: the target's own ``add_partitions`` rate, 500 partitions a call
   as the sync writes them, with the same partition objects (pointing at the source's partition directories,
   which exist, with the source partitions' parameters), built in memory so that only the calls are timed.
   ``python -m waggle sync --mode mirror`` runs as a subprocess at its default write limit
   (``max-writes-per-second``); its rate is partitions / the report's table seconds (which leave out the
   interpreter's start-up). Raw and sync alternate, twice each, each into a fresh database; the faster of each
   is compared. Target: >= 0.9x raw.
2. **no-op rerun vs one paged read**. The limit of a diff without an event log: reading the source's
   partitions once, ``get_partition_names`` then ``get_partitions_by_names`` 500 names a call, on one
   connection. The rerun's figure is its report's table seconds. Reads and reruns alternate (3 reruns, 4
   reads); the fastest of each is compared. Target: <= 1.2x the read.
3. **copy vs cp -r**. ``waggle sync --mode copy --master local[2]`` into a directory: bytes and files copied /
   the report's seconds (which include starting Spark), against ``cp -r`` of the source's table directory
   (after ``sync``, page cache warm for both); then a no-op copy rerun.
4. **Iceberg copy vs cp -r of the same files**: an Iceberg table written by pyiceberg at the source
   (``--iceberg-files`` data files over ``--iceberg-commits`` commits), copied by ``waggle sync --mode copy``
   (data files by Spark's executors, manifests and metadata rewritten), against ``cp -r`` of its directory.
5. With ``--spark-sql`` only, for reference: a local Spark session with Hive support (a subprocess: this
   script with a hidden ``--spark-child`` argument; the JVM start is not timed) adds the partitions with
   ``ALTER TABLE ... ADD PARTITION (...) LOCATION '...'`` of 100 a statement, then ``MSCK REPAIR TABLE`` on a
   table whose location is the source's table directory.

Before anything is timed, the target metastore adds (and the source reads) as many partitions (at least 2,000), so
that its JIT is warm. Order: raw, sync, raw, sync, (read, no-op rerun) x 3, read, (Spark SQL), copy, no-op copy
rerun, ``cp -r``. Both metastores, Spark and the sync share this machine's CPUs.

The subprocesses (``waggle sync``, the Spark child) run with their bytecode cached under the work directory
(``PYTHONPYCACHEPREFIX``, with ``PYTHONDONTWRITEBYTECODE`` removed), warmed by one import first, as an
installed package would have it: otherwise every start compiles the generated Thrift code (about 4 MB).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from waggle.hms.gen.hive_metastore import ttypes
from waggle.local.client import hms_client
from waggle.local.jvm import java_executable, pyspark_jars_dir
from waggle.local.metastore import LocalMetastore
from waggle.local.seed import ensure_database, ensure_partitioned_table, ensure_table, text_sd

SRC_DB = "bench_src"
TABLE = "events"
COLS = [("id", "int"), ("name", "string")]
KEYS = [("part", "string")]
BATCH = 500  # partitions per add_partitions call, as waggle.sync.hms.PAGE
SQL_BATCH = 100  # partitions per ALTER TABLE ... ADD PARTITION statement
HEAP = "2g"
RERUNS = 3  # no-op reruns, alternating with paged reads
MB = 1e6


def values(n: int) -> list[str]:
    return [f"p{i:06d}" for i in range(n)]


# -- the Spark SQL side, run as a child process --------------------------------------------------------------------
def spark_child(spec_file: str) -> None:
    """Create the tables and run the timed statements; write the timings as JSON to ``spec['out']``."""
    spec = json.loads(Path(spec_file).read_text())
    import pyspark
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]").appName("bench-sync-sql")
        .config("spark.sql.catalogImplementation", "hive")
        .config("spark.hadoop.hive.metastore.uris", spec["uri"])
        .config("spark.sql.warehouse.dir", spec["warehouse"])
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .enableHiveSupport()
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    db = spec["db"]
    parts: list[list[str]] = spec["partitions"]  # [value, location]

    def create(table: str, location: str) -> None:
        spark.sql(f"CREATE EXTERNAL TABLE {db}.{table} (id INT, name STRING) PARTITIONED BY (part STRING) "
                  f"ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' STORED AS TEXTFILE LOCATION '{location}'")

    def add_partitions(table: str, batch: list[list[str]]) -> str:
        return f"ALTER TABLE {db}.{table} ADD " + " ".join(
            f"PARTITION (part='{value}') LOCATION '{location}'" for value, location in batch)

    try:
        spark.sql(f"CREATE DATABASE {db} LOCATION '{spec['db_location']}'")
        # one untimed statement first: the Hive client's and the planner's classes load here, not below
        create("warmup", f"{spec['db_location']}/warmup")
        spark.sql(add_partitions("warmup", parts[:SQL_BATCH]))
        create("by_alter", f"{spec['db_location']}/by_alter")
        statements = [add_partitions("by_alter", parts[i:i + SQL_BATCH]) for i in range(0, len(parts), SQL_BATCH)]
        alter = 0.0
        for sql in statements:
            t = time.perf_counter()
            spark.sql(sql)
            alter += time.perf_counter() - t
        create("by_msck", spec["source_table_location"])
        t = time.perf_counter()
        spark.sql(f"MSCK REPAIR TABLE {db}.by_msck")
        msck = time.perf_counter() - t
        out = {
            "spark_version": pyspark.__version__,
            "hive_client": spark.conf.get("spark.sql.hive.metastore.version"),
            "statements": len(statements), "alter_seconds": alter, "msck_seconds": msck,
            "first_statement": statements[0] if statements else "",
        }
        Path(spec["out"]).write_text(json.dumps(out))
    finally:
        spark.stop()


# -- helpers -------------------------------------------------------------------------------------------------------
def raw_add(port: int, db: str, db_location: str, table_location: str, params: dict[str, dict[str, str]],
            n: int) -> float:
    """Seconds of ``add_partitions`` alone, ``BATCH`` at a time, of ``n`` partitions into a fresh ``db.TABLE``
    (``params``: each partition's parameters by value; missing: none)."""
    with hms_client("127.0.0.1", port, timeout=600) as c:
        ensure_database(c, db, db_location)
        ensure_table(c, db, TABLE, table_location, COLS, KEYS)
        parts = [ttypes.Partition(values=[v], dbName=db, tableName=TABLE, createTime=0, lastAccessTime=0,
                                  sd=text_sd(f"{table_location}/part={v}", COLS), parameters=dict(params.get(v, {})))
                 for v in values(n)]
        t = time.perf_counter()
        for i in range(0, n, BATCH):
            c.add_partitions(parts[i:i + BATCH])
        seconds = time.perf_counter() - t
    expect(f"{db} partitions", partition_count(port, db, TABLE), n)
    return seconds


@dataclass
class SyncRun:
    cmd: list[str]
    wall: float  # the subprocess, start to exit
    seconds: float  # the report's table seconds
    table: dict[str, Any]
    writes: str  # the report's writes to the target, as one line


def child_env(workdir: Path) -> dict[str, str]:
    """The environment of the subprocesses: bytecode cached under ``workdir`` (see the module doc)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return env


def run_sync(cmd: list[str], log: Path, env: dict[str, str]) -> SyncRun:
    report = Path(cmd[cmd.index("--report") + 1])
    with open(log, "wb") as out:
        t = time.perf_counter()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        wall = time.perf_counter() - t
    if proc.returncode != 0 or not report.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"waggle sync failed (exit {proc.returncode}): {shlex.join(cmd)}\n{tail}")
    data = json.loads(report.read_text())
    table = data["tables"][0]
    if table["status"] != "ok":
        raise SystemExit(f"waggle sync reported {table['status']}: {table.get('error')}")
    w = data.get("writes") or [{}]
    writes = (f"{w[0].get('writes')} calls, {w[0].get('mean_per_second')}/s mean, "
              f"{w[0].get('peak_per_second')} in the busiest second, limit {w[0].get('limit_per_second')}/s")
    return SyncRun(cmd, wall, float(table["seconds"]), table, writes)


def expect(what: str, got: Any, want: Any) -> None:
    if got != want:
        raise SystemExit(f"unexpected {what}: {got!r}, expected {want!r}")


def partition_count(port: int, db: str, table: str) -> int:
    with hms_client("127.0.0.1", port, timeout=600) as c:
        return len(c.get_partition_names(db, table, -1))


def grow_files(table_dir: Path, n: int, kb: int) -> int:
    """Rewrite each partition's data file to about ``kb`` KB of ``i,name{i}`` rows; returns the total bytes."""
    total = 0
    lines, size, j = [], 0, n
    while size < kb * 1024:
        line = f"{j},name{j}\n"
        lines.append(line)
        size += len(line)
        j += 1
    block = "".join(lines)
    for i, value in enumerate(values(n)):
        path = table_dir / f"part={value}" / "data.csv"
        if kb > 0:
            path.write_text(f"{i},name{i}\n{block}")
        total += path.stat().st_size
    return total


def java_version() -> str:
    proc = subprocess.run([java_executable(), "-version"], capture_output=True, text=True)
    return (proc.stderr or proc.stdout).splitlines()[0] if (proc.stderr or proc.stdout) else "?"


def hive_version() -> str:
    jars = sorted(pyspark_jars_dir().glob("hive-metastore-*.jar"))
    match = re.search(r"hive-metastore-(.+)\.jar", jars[0].name) if jars else None
    return match.group(1) if match else "?"


def site_settings(store: LocalMetastore) -> list[str]:
    text = (store.workdir / "conf" / "hive-site.xml").read_text()
    return [f"{k}={v}" for k, v in re.findall(r"<name>(.*?)</name><value>(.*?)</value>", text)]


def server_settings(port: int) -> list[str]:
    keys = ("hive.stats.autogather", "hive.metastore.try.direct.sql", "hive.metastore.batch.retrieve.max",
            "hive.metastore.server.max.threads")
    out = []
    with hms_client("127.0.0.1", port, timeout=60) as c:
        for key in keys:
            try:
                out.append(f"{key}={c.get_config_value(key, '?')}")
            except Exception as exc:
                out.append(f"{key}=({type(exc).__name__})")
    return out


def fmt_rate(count: float, seconds: float) -> str:
    return f"{count / seconds:,.0f}" if seconds > 0 else "-"


def ratio(x: float) -> str:
    return f"{x:.2f}x" if x >= 0.1 else f"{x:.4f}x"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def print_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(r: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i == 0 or i == len(r) - 1 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()

    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


# -- Iceberg copy ------------------------------------------------------------------------------------------------------
@dataclass
class IcebergFigure:
    """An Iceberg table's copy by ``waggle sync`` against ``cp -r`` of the same files."""

    files: int
    bytes: int
    seconds: float  # the sync's report seconds
    wall: float  # the sync subprocess, start to exit
    cp_seconds: float  # cp -r of the same data and metadata files
    command: str


def iceberg_copy(workdir: Path, source: LocalMetastore, target: LocalMetastore, env: dict[str, str],
                 args: argparse.Namespace) -> IcebergFigure | None:
    """An Iceberg table written by pyiceberg at the source (``--iceberg-files`` data files of about
    ``--file-kb`` each, over ``--iceberg-commits`` commits), copied by ``waggle sync --mode copy``, against
    ``cp -r`` of the table's directory (its data and metadata files)."""
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog
    from pyiceberg.transforms import IdentityTransform

    files, commits = args.iceberg_files, args.iceberg_commits
    t = time.perf_counter()
    catalog = load_catalog("bench", type="hive", uri=source.uri, warehouse=f"file://{source.warehouse}")
    schema = pa.schema([("part", pa.int32()), ("payload", pa.string())])
    table = catalog.create_table(f"{SRC_DB}.ice", schema=schema)
    with table.update_spec() as spec:
        spec.add_field("part", IdentityTransform(), "part")
    table = catalog.load_table(f"{SRC_DB}.ice")
    per_commit = max(1, files // commits)
    for c in range(commits):
        parts = range(c * per_commit, (c + 1) * per_commit)
        table.append(pa.table({"part": pa.array(parts, pa.int32()),
                               "payload": [os.urandom(args.file_kb * 512).hex() for _ in parts]}, schema=schema))
    table = catalog.load_table(f"{SRC_DB}.ice")
    table_dir = Path(table.location().removeprefix("file:").removeprefix("//"))
    on_disk = [f for f in table_dir.rglob("*") if f.is_file()]
    print(f"seeded Iceberg table {SRC_DB}.ice: {len(on_disk)} files, "
          f"{sum(f.stat().st_size for f in on_disk) / MB:.1f} MB, {commits} commits, in "
          f"{time.perf_counter() - t:.1f}s", flush=True)
    fed = workdir / "federation.yml"
    root = workdir / "iceberg-copy"
    cmd = [sys.executable, "-m", "waggle", "sync", "--federation-config", str(fed), "--source", "source",
           "--tables", f"{SRC_DB}.ice", "--target-database", "bench_iceberg", "--mode", "copy", "--location-root",
           f"file://{root}", "--master", "local[2]", "--no-progress", "--report", str(workdir / "iceberg.json")]
    os.sync()
    run = run_sync(cmd, workdir / "iceberg.log", env)
    cp_dest = workdir / "cp-iceberg"
    os.sync()
    t = time.perf_counter()
    subprocess.run(["cp", "-r", str(table_dir), str(cp_dest)], check=True)
    cp_seconds = time.perf_counter() - t
    print(f"waggle sync Iceberg copy: {run.seconds:.2f}s (report), {run.wall:.2f}s wall, {run.table['files']} "
          f"files, {run.table['bytes'] / MB:.1f} MB; cp -r {cp_seconds:.2f}s", flush=True)
    return IcebergFigure(int(run.table["files"]), int(run.table["bytes"]), run.seconds, run.wall, cp_seconds,
                         shlex.join(cmd))


# -- the benchmark -------------------------------------------------------------------------------------------------
def paged_read(port: int, db: str, table: str) -> tuple[float, int]:
    """Seconds of one read of a table's partitions as a diff needs them, on one open connection:
    ``get_partition_names``, then ``get_partitions_by_names`` ``BATCH`` names a call; and how many."""
    with hms_client("127.0.0.1", port, timeout=600) as c:
        t = time.perf_counter()
        names = c.get_partition_names(db, table, -1)
        count = 0
        for i in range(0, len(names), BATCH):
            count += len(c.get_partitions_by_names(db, table, names[i:i + BATCH]))
        return time.perf_counter() - t, count


def spark_sql(workdir: Path, target: LocalMetastore, src_loc: str, n: int, env: dict[str, str],
              commands: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "uri": target.uri, "warehouse": str(workdir / "spark-warehouse"), "db": "bench_sql",
        "db_location": f"file://{target.warehouse}/bench_sql.db", "source_table_location": src_loc,
        "partitions": [[v, f"{src_loc}/part={v}"] for v in values(n)], "out": str(workdir / "spark.json"),
    }
    (workdir / "spark-spec.json").write_text(json.dumps(spec))
    spark_cmd = [sys.executable, str(Path(__file__).resolve()), "--spark-child", str(workdir / "spark-spec.json")]
    commands.append("Spark SQL: " + shlex.join(spark_cmd))
    t = time.perf_counter()
    with open(workdir / "spark.log", "wb") as out:
        proc = subprocess.run(spark_cmd, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, env=env)
    spark_wall = time.perf_counter() - t
    if proc.returncode != 0 or not Path(spec["out"]).exists():
        tail = "\n".join((workdir / "spark.log").read_text(errors="replace").splitlines()[-30:])
        raise SystemExit(f"the Spark SQL child failed (exit {proc.returncode}):\n{tail}")
    sql: dict[str, Any] = json.loads(Path(spec["out"]).read_text())
    expect("ALTER partitions", partition_count(target.port, "bench_sql", "by_alter"), n)
    expect("MSCK partitions", partition_count(target.port, "bench_sql", "by_msck"), n)
    first_sql = sql["first_statement"]
    commands.append(f"  {sql['statements']} x " + (first_sql[:220] + " ..." if len(first_sql) > 220 else first_sql))
    commands.append(f"  MSCK REPAIR TABLE bench_sql.by_msck  (LOCATION '{src_loc}')")
    print(f"Spark SQL: ALTER ADD PARTITION {sql['alter_seconds']:.2f}s, MSCK {sql['msck_seconds']:.2f}s "
          f"({spark_wall:.1f}s wall with the JVM and set-up)", flush=True)
    return sql


def bench(args: argparse.Namespace, workdir: Path, source: LocalMetastore, target: LocalMetastore) -> None:
    n = args.partitions
    src_dir = source.warehouse / f"{SRC_DB}.db" / TABLE
    src_loc = f"file://{src_dir}"
    commands: list[str] = []

    t = time.perf_counter()
    with hms_client("127.0.0.1", source.port, timeout=600) as c:
        ensure_database(c, SRC_DB, f"file://{source.warehouse}/{SRC_DB}.db")
        ensure_partitioned_table(c, SRC_DB, TABLE, src_loc, partitions=n, batch=BATCH, data=True)
    data_bytes = grow_files(src_dir, n, args.file_kb)
    os.sync()  # the files' write-back would otherwise slow the metastores' commits while they are timed
    print(f"seeded {SRC_DB}.{TABLE}: {n} partitions, {data_bytes / MB:.1f} MB of data files "
          f"({data_bytes / max(n, 1) / 1024:.1f} KB each) in {time.perf_counter() - t:.1f}s", flush=True)

    # warm-up: the target adds, the source reads, before anything is timed
    t = time.perf_counter()
    warm = max(n, 2000)
    with hms_client("127.0.0.1", target.port, timeout=600) as c:
        ensure_database(c, "bench_warmup", f"file://{target.warehouse}/bench_warmup.db")
        ensure_partitioned_table(c, "bench_warmup", TABLE, f"file://{target.warehouse}/bench_warmup.db/{TABLE}",
                                 partitions=warm, batch=BATCH)
        c.get_partitions("bench_warmup", TABLE, -1)
    source_params: dict[str, dict[str, str]] = {}
    with hms_client("127.0.0.1", source.port, timeout=600) as c:
        names = c.get_partition_names(SRC_DB, TABLE, -1)
        for i in range(0, len(names), BATCH):
            for p in c.get_partitions_by_names(SRC_DB, TABLE, names[i:i + BATCH]):
                source_params[p.values[0]] = dict(p.parameters or {})
    env = child_env(workdir)
    subprocess.run([sys.executable, "-c", "import pyspark, waggle.cli, waggle.sync.runner, waggle.sync.job, "
                    "waggle.sync.files, waggle.hms.gen.hive_metastore.ThriftHiveMetastore"], check=True, env=env,
                   cwd=ROOT)
    print(f"warm-up (target adds {warm} partitions, source reads {len(names)}, bytecode cached): "
          f"{time.perf_counter() - t:.1f}s", flush=True)
    sample = source_params.get(values(1)[0], {})
    print(f"source partition parameters (p000000): {sample}", flush=True)

    # 1. the limit of a mirror: raw add_partitions
    def raw_run(db: str) -> float:
        seconds = raw_add(target.port, db, f"file://{target.warehouse}/{db}.db", src_loc, source_params, n)
        print(f"raw add_partitions into {db}: {n} partitions in {seconds:.2f}s", flush=True)
        return seconds

    raw_before = raw_run("bench_raw")
    commands.append(f"raw: ThriftHiveMetastore.add_partitions(<{BATCH} Partition objects>) x {-(-n // BATCH)}")

    # waggle sync, mirror
    fed = workdir / "federation.yml"
    fed.write_text(
        "primary-meta-store:\n  name: primary\n"
        f"  remote-meta-store-uris: {target.uri}\n  access-control-type: READ_AND_WRITE_AND_CREATE\n"
        f"federated-meta-stores:\n- name: source\n  remote-meta-store-uris: {source.uri}\n")

    def sync_cmd(db: str, mode: str, report: str, *extra: str) -> list[str]:
        return [sys.executable, "-m", "waggle", "sync", "--federation-config", str(fed), "--source", "source",
                "--tables", f"{SRC_DB}.{TABLE}", "--target-database", db, "--mode", mode, *extra, "--no-progress",
                "--report", str(workdir / report)]

    # raw and sync alternate, each twice, each into a fresh database; the faster of each is compared
    mirrors: list[SyncRun] = []
    for db in ("bench_mirror", "bench_mirror_again"):
        cmd = sync_cmd(db, "mirror", f"{db}.json")
        run = run_sync(cmd, workdir / f"{db}.log", env)
        expect("mirror created", run.table["created"], n)
        expect("mirror partitions", partition_count(target.port, db, TABLE), n)
        print(f"waggle sync mirror into {db}: {run.seconds:.2f}s (report), {run.wall:.2f}s wall; writes "
              f"{run.writes}", flush=True)
        mirrors.append(run)
        if len(mirrors) == 1:
            raw_after = raw_run("bench_raw_again")
    commands.append("sync mirror: " + shlex.join(mirrors[0].cmd) + "  (and into bench_mirror_again)")
    first = min(mirrors, key=lambda r: r.seconds)
    raw = min(raw_before, raw_after)

    # 2. the limit of a no-op rerun: one paged read of the source's partitions; reads and reruns alternate,
    # the faster of each is compared
    reads: list[float] = []
    reruns: list[SyncRun] = []
    for i in range(RERUNS):
        seconds, count = paged_read(source.port, SRC_DB, TABLE)
        expect("partitions read", count, n)
        reads.append(seconds)
        run = run_sync(mirrors[0].cmd, workdir / f"mirror-rerun-{i}.log", env)
        expect("rerun unchanged", (run.table["created"], run.table["updated"], run.table["unchanged"]), (0, 0, n))
        reruns.append(run)
    reads.append(paged_read(source.port, SRC_DB, TABLE)[0])
    read = min(reads)
    rerun = min(reruns, key=lambda r: r.seconds)
    commands.append(f"read: get_partition_names + get_partitions_by_names(<{BATCH} names>) x {-(-n // BATCH)}")
    commands.append(f"no-op rerun: the first mirror's command again, {RERUNS} times")
    print(f"paged reads of the source: {', '.join(f'{x:.2f}s' for x in reads)}", flush=True)
    print(f"waggle sync mirror no-op reruns: {', '.join(f'{r.seconds:.2f}s' for r in reruns)} (report); "
          f"{', '.join(f'{r.wall:.2f}s' for r in reruns)} wall", flush=True)

    sql = spark_sql(workdir, target, src_loc, n, env, commands) if args.spark_sql else None

    # 3. copy vs cp -r
    copy_root = workdir / "copy"
    copy_root.mkdir()
    copy_cmd = sync_cmd("bench_copy", "copy", "copy.json", "--location-root", f"file://{copy_root}",
                        "--master", "local[2]")
    commands.append("sync copy (twice): " + shlex.join(copy_cmd))
    os.sync()
    copy = run_sync(copy_cmd, workdir / "copy.log", env)
    expect("copy created", copy.table["created"], n)
    expect("copy bytes", copy.table["bytes"], data_bytes)
    print(f"waggle sync copy: {copy.seconds:.2f}s (report), {copy.wall:.2f}s wall", flush=True)
    copy_rerun = run_sync(copy_cmd, workdir / "copy-rerun.log", env)
    expect("copy rerun", (copy_rerun.table["created"], copy_rerun.table["updated"], copy_rerun.table["bytes"]),
           (0, 0, 0))
    print(f"waggle sync copy no-op rerun: {copy_rerun.seconds:.2f}s (report), {copy_rerun.wall:.2f}s wall",
          flush=True)
    cp_dest = workdir / "cp" / TABLE
    cp_dest.parent.mkdir()
    cp_cmd = ["cp", "-r", str(src_dir), str(cp_dest)]
    commands.append("cp: " + shlex.join(cp_cmd))
    os.sync()
    t = time.perf_counter()
    subprocess.run(cp_cmd, check=True)
    cp = time.perf_counter() - t

    # 4. Iceberg copy vs cp -r
    iceberg = iceberg_copy(workdir, source, target, env, args)
    if iceberg is not None:
        commands.append("sync iceberg copy: " + iceberg.command)

    # -- the results ---------------------------------------------------------------------------------------------
    raw_rate = n / raw
    sync_rate = n / first.seconds
    mirror_ratio = sync_rate / raw_rate
    noop_ratio = rerun.seconds / read
    print(f"\n{n} partitions, 1 table; rates in partitions/second")
    rows: list[tuple[str, ...]] = [
        ("raw add_partitions (500 a call)", f"{raw:.2f}", fmt_rate(n, raw), "1.00x",
         f"the limit: faster of {raw_before:.2f}s and {raw_after:.2f}s"),
        ("waggle sync mirror (report)", f"{first.seconds:.2f}", fmt_rate(n, first.seconds), f"{mirror_ratio:.2f}x",
         f">= 0.9x raw: {verdict(mirror_ratio >= 0.9)}; faster of "
         f"{' and '.join(f'{r.seconds:.2f}s' for r in mirrors)}"),
        ("waggle sync mirror (wall)", f"{first.wall:.2f}", fmt_rate(n, first.wall),
         f"{n / first.wall / raw_rate:.2f}x", "with the interpreter's start-up"),
    ]
    if sql is not None:
        rows += [
            (f"Spark SQL ALTER ADD PARTITION x{SQL_BATCH}", f"{sql['alter_seconds']:.2f}",
             fmt_rate(n, sql["alter_seconds"]), f"{n / sql['alter_seconds'] / raw_rate:.2f}x", "for reference"),
            ("Spark SQL MSCK REPAIR TABLE", f"{sql['msck_seconds']:.2f}", fmt_rate(n, sql["msck_seconds"]),
             f"{n / sql['msck_seconds'] / raw_rate:.2f}x", "for reference"),
        ]
    print_table(("mirror", "seconds", "part/s", "vs raw", "target / note"), rows)
    print()
    print_table(("no-op rerun", "seconds", "part/s", "vs read", "target / note"), [
        ("one paged read of the source", f"{read:.2f}", fmt_rate(n, read), "1.00x",
         f"the limit: fastest of {len(reads)}"),
        ("no-op rerun (report)", f"{rerun.seconds:.2f}", fmt_rate(n, rerun.seconds), f"{noop_ratio:.2f}x",
         f"<= 1.2x the read: {verdict(noop_ratio <= 1.2)}; fastest of {len(reruns)}"),
        ("no-op rerun (wall)", f"{rerun.wall:.2f}", fmt_rate(n, rerun.wall), f"{rerun.wall / read:.2f}x",
         "with the interpreter's start-up"),
    ])
    copied, files = copy.table["bytes"], copy.table["files"]
    cp_rate = data_bytes / cp / MB
    copy_rate = copied / copy.seconds / MB
    print(f"\ncopy: {files} files, {copied / MB:.1f} MB; MB = 10^6 bytes")
    copy_rows: list[tuple[str, ...]] = [
        ("cp -r", f"{cp:.2f}", f"{cp_rate:.1f}", fmt_rate(n, cp), "1.00x", "the limit"),
        ("waggle sync copy (report)", f"{copy.seconds:.2f}", f"{copy_rate:.1f}", fmt_rate(files, copy.seconds),
         ratio(copy_rate / cp_rate), "includes starting Spark (local[2])"),
        ("waggle sync copy (wall)", f"{copy.wall:.2f}", f"{copied / copy.wall / MB:.1f}",
         fmt_rate(files, copy.wall), ratio(copied / copy.wall / MB / cp_rate), ""),
        ("no-op copy rerun (report)", f"{copy_rerun.seconds:.2f}", "", "", "",
         f"{copy_rerun.seconds / copy.seconds:.1%} of the first copy's time"),
    ]
    if iceberg is not None:
        ice_rate = iceberg.bytes / iceberg.seconds / MB
        ice_cp = iceberg.bytes / iceberg.cp_seconds / MB
        copy_rows += [
            ("cp -r of the Iceberg table's files", f"{iceberg.cp_seconds:.2f}", f"{ice_cp:.1f}",
             fmt_rate(iceberg.files, iceberg.cp_seconds), "1.00x", "the limit"),
            ("waggle sync Iceberg copy (report)", f"{iceberg.seconds:.2f}", f"{ice_rate:.1f}",
             fmt_rate(iceberg.files, iceberg.seconds), ratio(ice_rate / ice_cp), ""),
        ]
    print_table(("copy", "seconds", "MB/s", "files/s", "vs cp -r", "note"), copy_rows)
    if iceberg is None:
        print("Iceberg copy: not measured")

    print("\nsetup:")
    print(f"  machine: {platform.platform()}, {os.cpu_count()} CPUs; Python {platform.python_version()}; "
          f"{java_version()}" + (f"; pyspark {sql['spark_version']} (Spark's Hive client {sql['hive_client']})"
                                 if sql is not None else ""))
    print(f"  metastores: 2 x Hive metastore {hive_version()} (pyspark's jars), embedded Derby, -Xmx{HEAP}, "
          "-XX:+UseSerialGC, full JIT (fast_start=False); source and target are separate JVMs")
    print(f"  hive-site.xml: {'; '.join(site_settings(target))}")
    print(f"  target metastore says: {'; '.join(server_settings(target.port))}")
    print(f"  data files: {args.file_kb} KB each (--file-kb), in {src_dir}; work dir {workdir}")
    print(f"  subprocesses: PYTHONPYCACHEPREFIX={env['PYTHONPYCACHEPREFIX']} (warmed before timing)"
          + ("; PYTHONDONTWRITEBYTECODE removed" if "PYTHONDONTWRITEBYTECODE" in os.environ else ""))
    print(f"  mirror writes (report): {first.writes}")
    print("commands:")
    for command in commands:
        print(f"  {command}")
    if sql is not None:
        print(f"  Spark session: master local[2], catalogImplementation=hive, hive.metastore.uris={target.uri}")

    print("\nsummary:")
    print(f"mirror {n} partitions: waggle sync {sync_rate:,.0f}/s vs raw add_partitions {raw_rate:,.0f}/s = "
          f"{mirror_ratio:.2f}x (target >= 0.9x: {verdict(mirror_ratio >= 0.9)})")
    print(f"no-op rerun: {rerun.seconds:.2f} s vs one paged read {read:.2f} s = {noop_ratio:.2f}x "
          f"(target <= 1.2x: {verdict(noop_ratio <= 1.2)})")
    print(f"copy: waggle sync {copy_rate:.1f} MB/s, {files / copy.seconds:,.0f} files/s vs cp -r {cp_rate:.1f} MB/s, "
          f"{n / cp:,.0f} files/s = {ratio(copy_rate / cp_rate)}; no-op copy rerun {copy_rerun.seconds:.2f} s")
    print("iceberg copy: " + ("not measured" if iceberg is None else
                              f"{ratio((iceberg.bytes / iceberg.seconds) / (iceberg.bytes / iceberg.cp_seconds))} "
                              "cp -r"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=5000)
    ap.add_argument("--file-kb", type=int, default=64, help="grow each partition's data file to about K KB")
    ap.add_argument("--iceberg-files", type=int, default=1000, help="data files of the Iceberg table")
    ap.add_argument("--iceberg-commits", type=int, default=10, help="commits that write them")
    ap.add_argument("--spark-sql", action="store_true",
                    help="also time Spark SQL's ALTER TABLE ADD PARTITION and MSCK REPAIR TABLE, for reference")
    ap.add_argument("--spark-child", metavar="SPEC", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.spark_child:
        spark_child(args.spark_child)
        return 0
    if args.partitions < 1:
        ap.error("--partitions must be at least 1")
    if shutil.which("cp") is None:
        ap.error("cp is needed")
    workdir = Path(tempfile.mkdtemp(prefix="waggle-bench-sync-"))
    stores: list[LocalMetastore] = []
    try:
        for name in ("source", "target"):
            stores.append(LocalMetastore(workdir / name / "hms", fast_start=False, heap=HEAP).start())
        for store in stores:
            store.wait_ready()
        print(f"metastores ready: source {stores[0].uri}, target {stores[1].uri}", flush=True)
        bench(args, workdir, stores[0], stores[1])
    finally:
        for store in stores:
            store.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
