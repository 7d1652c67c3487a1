"""``waggle sync --follow`` as users run it (a subprocess on a sync file), against real metastores that write
notification events: killed with SIGKILL at five points under a steady writer, it resumes and ends where a run
never killed ends; SIGTERM finishes the batch in hand and exits 0; a second follower of the same policy is
refused."""

from __future__ import annotations

import datetime as dt
import json
import statistics
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.federation import federation_yaml
from tests.support.follower import FollowerProcess, sync_file
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.seed import ensure_database, ensure_table, text_sd
from waggle.synced import objects as o

pytestmark = pytest.mark.integration
COLS = [("id", "int")]
KEYS = [("day", "string")]


@dataclass
class Setup:
    work: Path
    federation: Path
    source_db: str
    target_db: str
    primary: Any
    analytics: Any

    def config(self, name: str, **job: Any) -> Path:
        return sync_file(self.work / f"{name}.yml", self.federation, [
            {"name": name, "tables": f"{self.source_db}\\..*", "target-database": self.target_db, "follow": True,
             **job}], source="analytics", **{"http-port": free_port(), "lease-seconds": 3})


@pytest.fixture
def setup(primary: Any, analytics: Any, tmp_path: Path) -> Iterator[Setup]:
    source_db = f"fk_{uuid.uuid4().hex[:8]}"
    federation = tmp_path / "federation.yml"
    federation.write_text(federation_yaml(primary.uri, "federated-meta-stores:\n- name: analytics\n"
                                                       f"  remote-meta-store-uris: {analytics.uri}\n"))
    with hms_client("127.0.0.1", analytics.port) as c:
        ensure_database(c, source_db, f"file://{tmp_path}/src")
        for t in ("a", "b"):
            ensure_table(c, source_db, t, f"file://{tmp_path}/src/{t}", COLS, KEYS)
    yield Setup(tmp_path, federation, source_db, f"{source_db}_t", primary, analytics)
    for port, db in ((analytics.port, source_db), (primary.port, f"{source_db}_t")):
        with hms_client("127.0.0.1", port) as c:
            try:
                c.drop_database(db, False, True)
            except Exception:
                pass


class Writer(threading.Thread):
    """Adds partitions to both tables at about ``rate`` a second; every fifth call alters an earlier partition
    (a new parameter) and every seventh drops one."""

    def __init__(self, port: int, db: str, work: Path, rate: float = 10.0) -> None:
        super().__init__(daemon=True)
        self.port, self.db, self.work, self.rate = port, db, work, rate
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from waggle.hms.gen.hive_metastore import ttypes

        try:
            with hms_client("127.0.0.1", self.port) as c:
                i = 0
                while not self.stop.is_set():
                    table = "ab"[i % 2]
                    value = f"d{i:05d}"
                    c.add_partition(ttypes.Partition(
                        values=[value], dbName=self.db, tableName=table, parameters={},
                        sd=text_sd(f"file://{self.work}/src/{table}/day={value}", COLS)))
                    if i % 5 == 4:
                        p = c.get_partition(self.db, table, [f"d{i - 2:05d}"])
                        p.parameters = {**(p.parameters or {}), "touched": str(i)}
                        c.alter_partition(self.db, table, p)
                    if i % 7 == 6:
                        c.drop_partition(self.db, table, [f"d{i - 4:05d}"], False)
                    i += 1
                    self.stop.wait(1 / self.rate)
        except BaseException as exc:  # reported by the test
            self.error = exc


def state(port: int, db: str, fingerprints: bool) -> dict[str, dict[str, str]]:
    """Per table: partition name -> the source's fingerprint of it (or, at the target, the recorded one)."""
    out: dict[str, dict[str, str]] = {}
    with hms_client("127.0.0.1", port) as c:
        for t in ("a", "b"):
            try:
                parts = c.get_partitions(db, t, -1)
            except Exception:
                out[t] = {}
                continue
            out[t] = {f"day={p.values[0]}": (o.partition_fingerprint(p) if fingerprints
                                             else (p.parameters or {}).get(o.FINGERPRINT, "")) for p in parts}
    return out


def test_killed_at_five_points_under_a_steady_writer_it_ends_where_an_unkilled_run_ends(setup: Setup) -> None:
    config = setup.config("killed", **{"propagate-deletes": True})
    writer = Writer(setup.analytics.port, setup.source_db, setup.work)
    writer.start()
    log = setup.work / "follower.log"
    try:
        for seconds in (1.0, 4.0, 2.5, 6.0, 3.5):  # in the bootstrap, then at varied points of later batches
            follower = FollowerProcess(config, log).start()
            time.sleep(seconds)
            follower.kill()
    finally:
        writer.stop.set()
        writer.join(30)
    assert writer.error is None, writer.error
    follower = FollowerProcess(config, log).start().wait_started()
    try:
        expected = state(setup.analytics.port, setup.source_db, fingerprints=True)
        assert sum(len(v) for v in expected.values()) > 50
        follower.until(lambda: state(setup.primary.port, setup.target_db, fingerprints=False) == expected, 180,
                       "the target's partitions and fingerprints equal the source's")
    finally:
        code = follower.stop()
    assert code == 0, follower.output()[-3000:]


def test_a_second_follower_of_the_same_policy_is_refused(setup: Setup) -> None:
    config = setup.config("only")
    first = FollowerProcess(config, setup.work / "first.log").start()
    try:
        first.until(lambda: state(setup.primary.port, setup.target_db, False) == {"a": {}, "b": {}} and
                    _tables(setup.primary.port, setup.target_db) == ["a", "b"], 120, "the bootstrap")
        second = FollowerProcess(config, setup.work / "second.log").start()
        assert second.wait(60) != 0
        assert "only" in second.output() and "lease" in second.output().lower(), second.output()[-3000:]
        assert first.running()
    finally:
        assert first.stop() == 0


def _waiting_until(config: Path) -> float | None:
    """When the follower's one scheduled policy runs next (epoch seconds), while it waits for that; else None."""
    port = json.loads(config.read_text())["http-port"]
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            (policy,) = json.loads(r.read())["policies"]
    except OSError:  # not serving yet
        return None
    if policy["phase"] != "waiting" or not policy["next_run_at"]:
        return None
    return dt.datetime.fromisoformat(policy["next_run_at"]).timestamp()


def _tables(port: int, db: str) -> list[str]:
    with hms_client("127.0.0.1", port) as c:
        try:
            return sorted(c.get_all_tables(db))
        except Exception:
            return []


def test_iceberg_commits_at_the_source_move_the_mirror_and_the_copy_stands_alone(setup: Setup) -> None:
    """pyiceberg commits at the source (each an ALTER_TABLE event moving metadata_location): the mirror follows
    within the lag bound; the copy gets only the new files, and reads the same rows once the source is gone."""
    import shutil
    from urllib.parse import urlsplit

    from tests.support.env import java_available, require

    require(java_available(), "Java 17 is needed for Spark")
    try:
        import pyarrow as pa
        from pyiceberg.catalog import load_catalog
    except ImportError:
        require(False, "pyiceberg is not installed (pip install 'pyiceberg[hive,pyarrow,pyiceberg-core]')")

    def catalog(store: Any) -> Any:
        return load_catalog("c", type="hive", uri=store.uri, warehouse=f"file://{store.warehouse}")

    def rows(start: int) -> Any:
        return pa.table({"id": pa.array(range(start, start + 5), pa.int64())})

    source = catalog(setup.analytics).create_table(f"{setup.source_db}.ice",
                                                   schema=pa.schema([("id", pa.int64())]))
    source.append(rows(0))
    root = setup.work / "copies"
    config = sync_file(setup.work / "ice.yml", setup.federation, [
        {"name": "ice-mirror", "tables": f"{setup.source_db}\\.ice", "target-database": f"{setup.target_db}_m",
         "follow": True},
        {"name": "ice-copy", "tables": f"{setup.source_db}\\.ice", "target-database": f"{setup.target_db}_c",
         "mode": "copy", "location-root": f"file://{root}", "follow": True}],
        source="analytics", master="local[1]", **{"http-port": free_port(), "lease-seconds": 3})
    follower = FollowerProcess(config, setup.work / "ice.log").start()

    def metadata(port: int, db: str) -> str:
        with hms_client("127.0.0.1", port) as c:
            try:
                return str(c.get_table(db, "ice").parameters.get("metadata_location", ""))
            except Exception:
                return ""

    try:
        follower.until(lambda: metadata(setup.primary.port, f"{setup.target_db}_c"), 240, "the bootstrap's copy")
        for k in (1, 2, 3):
            source.append(rows(10 * k))
            source = catalog(setup.analytics).load_table(f"{setup.source_db}.ice")
            committed, wanted = time.monotonic(), source.metadata_location
            follower.until(lambda w=wanted: metadata(setup.primary.port, f"{setup.target_db}_m") == w,
                           30, f"the mirror following commit {k}")
            assert time.monotonic() - committed < 5, "the mirror followed outside the lag bound"
        expected = sorted(source.scan().to_arrow().column("id").to_pylist())
        copy_db = f"{setup.target_db}_c"

        def copy_ids() -> list[int]:
            try:
                return sorted(catalog(setup.primary).load_table(f"{copy_db}.ice").scan().to_arrow()
                              .column("id").to_pylist())
            except Exception:
                return []

        follower.until(lambda: copy_ids() == expected, 120, "the copy reading the source's rows")
    finally:
        assert follower.stop() == 0, follower.output()[-3000:]
    shutil.rmtree(urlsplit(source.location()).path)
    copy = catalog(setup.primary).load_table(f"{copy_db}.ice")
    assert sorted(copy.scan().to_arrow().column("id").to_pylist()) == expected == list(range(5)) + [
        i for k in (1, 2, 3) for i in range(10 * k, 10 * k + 5)]
    assert {urlsplit(f).path.startswith(str(root)) for f in copy.inspect.files().column("file_path").to_pylist()} \
        == {True}


def test_run_now_runs_a_scheduled_policy_at_once_in_the_running_follower_or_here(setup: Setup) -> None:
    """``waggle sync --run-now NAME``: the running follower runs the scheduled policy at once; with none running,
    the command runs it itself until caught up."""
    import subprocess
    import sys

    from tests.support.env import ROOT

    config = setup.config("hourly", follow=False, every="1h")

    def run_now() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "waggle", "sync", "--run-now", "hourly", "--config",
                               str(config)], capture_output=True, text=True, timeout=300, cwd=ROOT)

    def later_exists() -> bool:
        return "later" in _tables(setup.primary.port, setup.target_db)

    follower = FollowerProcess(config, setup.work / "hourly.log").start()
    try:
        follower.until(lambda: any(line.get("event") == "sync.execution" for line in follower.lines()), 120,
                       "the first run's end")
        with hms_client("127.0.0.1", setup.analytics.port) as c:
            ensure_table(c, setup.source_db, "later", f"file://{setup.work}/src/later", COLS, KEYS)
        # the policy waits for its next run, an hour away (as its /healthz says), so the new table stays unread
        waiting = follower.until(lambda: _waiting_until(config), 30, "the policy waiting for its next run")
        assert waiting - time.time() > 3000, waiting - time.time()
        assert not later_exists()
        done = run_now()
        assert done.returncode == 0 and "started in the running service" in done.stdout, done.stdout + done.stderr
        follower.until(later_exists, 60, "the run the request started")
    finally:
        assert follower.stop() == 0, follower.output()[-3000:]
    with hms_client("127.0.0.1", setup.analytics.port) as c:
        ensure_table(c, setup.source_db, "latest", f"file://{setup.work}/src/latest", COLS, KEYS)
    done = run_now()  # no follower runs: this process runs the policy until caught up
    assert done.returncode == 0, done.stdout + done.stderr
    assert "latest" in _tables(setup.primary.port, setup.target_db)


#: the small policy's bound under fair shares (see the test below): the median of its partitions' delays, with room
#: for a busy machine (2-6 s on a quiet one). One partition may be later (18 s seen on a loaded machine, and its
#: first batch after its bootstrap makes a few more writes): what shows the shares is the order, every partition
#: arriving before the bootstrap ends, and each is waited for up to WAIT
BOUND, WAIT = 10, 60


def test_a_large_bootstrap_does_not_hold_back_a_small_continuous_policy(setup: Setup) -> None:
    """Fair shares of the target's write budget: while one policy bootstraps 10,000 partitions under a write
    limit (1 a second: about 20 writes of 500 partitions), another policy's partitions keep reaching the target
    within a bound the shares set. Both policies weigh 1, so while both wait each gets every other slot: each write
    of the small policy waits at most one of the bootstrap's: 2 s a write, and a batch makes a few (its partitions
    and its checkpoint): about 2-6 s; the first batch after its bootstrap makes a few more (about 6 s). Without the
    shares every partition would wait behind the bootstrap's remaining writes: so all eight must arrive while the
    bootstrap is still going (its batch line not yet in the follower's log), their median delay within a bound. The
    source and the target are metastores of their own (the 10,000 partitions, and the writes still going on when
    the follower is killed, stay out of the session's metastores)."""
    from waggle.hms.gen.hive_metastore import ttypes
    from waggle.local.metastore import LocalMetastore
    from waggle.local.seed import ensure_partitioned_table

    store = LocalMetastore(setup.work / "big-source").start()
    target = LocalMetastore(setup.work / "big-target").start()
    follower: FollowerProcess | None = None
    try:
        store.wait_ready()
        target.wait_ready()
        with hms_client("127.0.0.1", store.port, timeout=600) as c:
            ensure_database(c, setup.source_db, f"file://{setup.work}/src")
            ensure_table(c, setup.source_db, "a", f"file://{setup.work}/src/a", COLS, KEYS)
            ensure_partitioned_table(c, setup.source_db, "big", f"file://{setup.work}/src/big", 10_000, batch=2000)
        federation = setup.work / "big-federation.yml"
        federation.write_text(federation_yaml(target.uri, "federated-meta-stores:\n- name: big\n"
                                                                 f"  remote-meta-store-uris: {store.uri}\n"))
        config = sync_file(setup.work / "shares.yml", federation, [
            {"name": "big", "tables": f"{setup.source_db}\\.big", "target-database": setup.target_db,
             "follow": True},
            {"name": "small", "tables": f"{setup.source_db}\\.a", "target-database": setup.target_db,
             "follow": True}],
            source="big", **{"http-port": free_port(), "lease-seconds": 3, "max-writes-per-second": 1})
        follower = FollowerProcess(config, setup.work / "shares.log").start()

        def names(table: str) -> set[str]:
            with hms_client("127.0.0.1", target.port, timeout=120) as c:
                try:
                    return set(c.get_partition_names(setup.target_db, table, -1))
                except ttypes.NoSuchObjectException:
                    return set()

        follower.until(lambda: _tables(target.port, setup.target_db) == ["a", "big"], 120,
                       "both bootstraps started")
        lags: list[float] = []
        with hms_client("127.0.0.1", store.port) as c:
            for i in range(8):
                value = f"s{i}"
                c.add_partition(ttypes.Partition(values=[value], dbName=setup.source_db, tableName="a",
                                                 parameters={},
                                                 sd=text_sd(f"file://{setup.work}/src/a/day={value}", COLS)))
                committed = time.monotonic()
                follower.until(lambda v=value: f"day={v}" in names("a"), WAIT,
                               f"partition {value} of the small policy")
                lags.append(time.monotonic() - committed)
        # the bootstrap (about 20 writes, every other slot) still going: said by the follower's log, not by listing
        # the big table's partitions at the target, which (on Derby) waits behind the bootstrap's writes until the last
        assert not [line for line in follower.lines() if line.get("event") == "sync.batch"
                    and line.get("policy") == "big"], \
            "the large bootstrap was over before the small policy's partitions were measured"
        assert statistics.median(lags) < BOUND, lags
    finally:
        if follower is not None:
            follower.kill()  # the bootstrap's end is not what is measured (a restart would finish it)
        store.stop()
        target.kill()
