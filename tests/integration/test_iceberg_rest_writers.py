"""Concurrent Iceberg writers of one table in a federated member (``ops_scratch``), through both of waggle's doors
at once: 4 writers with Iceberg's Java ``RESTCatalog`` on the REST port and 2 with its Java ``HiveCatalog`` on the
Thrift port append 5 times each (``java/IcebergWritersCheck.java``, one JVM, 6 threads). Writers that lose a race
are retried by Iceberg's own ``SnapshotProducer.commit``; at the end every one of the 30 commits is in the table,
whichever door reads it, and no lock is left on the member."""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore.ttypes import ShowLocksRequest

from tests.support.clients import hive2_client
from tests.support.env import java_available, require
from tests.support.federation import federated_members, federation_yaml
from tests.support.iceberg_rest import CLIENT_ID, CLIENT_SECRET, rest_catalog, start_rest_waggle
from tests.support.proxy import WaggleProcess, owner
from tests.support.waits import wait_for
from waggle.call import lock_ids
from waggle.local.jvm import java_executable

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).parent / "java" / "IcebergWritersCheck.java"
REST_WRITERS, THRIFT_WRITERS, APPENDS = 4, 2, 5
COMMITS = (REST_WRITERS + THRIFT_WRITERS) * APPENDS
CONFLICTS = "waggle_iceberg_rest_commits_total"


@pytest.fixture(scope="module")
def rest(primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any],
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    proc = start_rest_waggle(tmp_path_factory.mktemp("rest-writers"), primary.uri, analytics.uri, ops.uri)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def writers_check(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command line that runs the compiled checker: Iceberg's runtime (with its relocated Jackson) and the
    Hive 2.3.9 and Hadoop jars of the pyspark it was built for."""
    import shutil

    from tests.support import iceberg_spark

    require(java_available() and shutil.which("javac") is not None, "Java (java and javac) is not installed")
    require(iceberg_spark.available(), "Iceberg's runtime is not prepared (scripts/iceberg_spark.sh)")
    require(iceberg_spark.rest_jars() is not None,
            "Iceberg's REST classes need HttpCore 5 (apt-get install libhttpcore5-java) and jarjar")
    jar = iceberg_spark.compile_java(tmp_path_factory.mktemp("iceberg-writers") / "classes", SOURCE.stem)
    return [java_executable(), "-Xmx768m", "-cp", f"{jar}:{iceberg_spark.classpath()}", SOURCE.stem]


def _locks(store: Any) -> list[Any]:
    with hive2_client(store.port) as c:
        return list(c.show_locks(ShowLocksRequest()).locks or [])


def test_rest_and_thrift_writers_race_on_one_member_table_and_every_commit_lands(
        rest: WaggleProcess, ops: Any, writers_check: list[str]) -> None:
    name = f"writers_{uuid.uuid4().hex[:8]}"
    labels = {"metastore": "ops", "outcome": "conflict"}
    conflicts_before = rest.metric(CONFLICTS, **labels) or 0.0
    committed_before = rest.metric(CONFLICTS, metastore="ops", outcome="committed") or 0.0
    done = subprocess.run([*writers_check, f"http://127.0.0.1:{rest.rest_port}",  # type: ignore[attr-defined]
                           f"{CLIENT_ID}:{CLIENT_SECRET}", "ops", f"thrift://127.0.0.1:{rest.port}", "ops_scratch",
                           name, str(REST_WRITERS), str(THRIFT_WRITERS), str(APPENDS)],
                          capture_output=True, text=True, timeout=600)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, f"the writers exited with {done.returncode}:\n{done.stderr[-6000:]}"
    result = json.loads(line[len("RESULT "):])

    assert result["failures"] == [] and result["commits"] == COMMITS, result
    expected = sorted(f"{'rest' if w < REST_WRITERS else 'thrift'}-{w}-{i}.parquet"
                      for w in range(REST_WRITERS + THRIFT_WRITERS) for i in range(APPENDS))
    for door in ("rest", "thrift"):  # both doors load the same table: every commit, every file
        table = result[door]
        assert table["snapshots"] == COMMITS and table["operations"] == "append", (door, table)
        assert table["files"] == COMMITS and table["records"] == COMMITS, (door, table)
        assert sorted(p.rsplit("/", 1)[-1] for p in table["paths"]) == expected, (door, table)
    assert result["rest"]["metadata"] == result["thrift"]["metadata"]

    # the member's own record names that metadata, and pyiceberg (a third client) reads it through REST too
    with hive2_client(ops.port) as c:
        assert c.get_table("scratch", name).parameters["metadata_location"] == result["rest"]["metadata"]
    table = rest_catalog(rest, warehouse="ops").load_table(f"ops_scratch.{name}")
    assert len(table.snapshots()) == COMMITS and table.metadata_location == result["rest"]["metadata"]

    # Iceberg's own retry: every commit reported its attempts, and the losers of a race took more than one
    attempts = result["attempts"]
    assert len(attempts) == COMMITS and all(a >= 1 for a in attempts), attempts
    assert any(a > 1 for a in attempts), f"no commit was retried: no race happened ({attempts})"
    conflicts = (rest.metric(CONFLICTS, **labels) or 0.0) - conflicts_before
    committed = (rest.metric(CONFLICTS, metastore="ops", outcome="committed") or 0.0) - committed_before
    # REST commits: the table's creation and each REST append; REST conflicts are answered 409 and retried
    assert committed == 1 + REST_WRITERS * APPENDS, committed
    retried = sum(a - 1 for a in attempts)
    assert conflicts <= retried, (conflicts, retried)
    print(f"attempts {attempts}: {retried} retries, {conflicts:.0f} of them REST conflicts (409)")

    assert _locks(ops) == []
    rest_catalog(rest, warehouse="ops").drop_table(f"ops_scratch.{name}")


def _lock_request(name: str) -> Any:
    from hmsclient.genthrift.hive_metastore.ttypes import LockComponent, LockLevel, LockRequest, LockType

    return LockRequest(component=[LockComponent(type=LockType.EXCLUSIVE, level=LockLevel.TABLE,
                                                dbname="ops_scratch", tablename=name)],
                       user="etl", hostname="writer", agentInfo=f"Iceberg-{name}")


def _lock_checked_and_released_elsewhere(ops: Any, name: str, first: Any, second: Any, third: Any) -> None:
    """``lock`` of a table of member ``ops`` on ``first``; ``show_locks``, ``check_lock``, ``heartbeat`` and
    ``unlock`` on the others: the id shown names the member, and the member's own id is what it sees."""
    from hmsclient.genthrift.hive_metastore.ttypes import (
        CheckLockRequest,
        HeartbeatRequest,
        LockState,
        UnlockRequest,
    )

    granted = first.lock(_lock_request(name))
    try:
        assert granted.state == LockState.ACQUIRED
        slot, own = lock_ids.decode(granted.lockid)
        assert slot != 0, granted.lockid  # a member's id carries its slot
        assert [lk.lockid for lk in _locks(ops) if lk.tablename == name] == [own]
        shown = second.show_locks(ShowLocksRequest(dbname="ops_scratch", tablename=name)).locks or []
        assert [lk.lockid for lk in shown] == [granted.lockid]  # as Iceberg finds a lock it lost track of
        assert second.check_lock(CheckLockRequest(lockid=granted.lockid)).lockid == granted.lockid
        third.heartbeat(HeartbeatRequest(lockid=granted.lockid))
        third.unlock(UnlockRequest(lockid=granted.lockid))
        assert [lk for lk in _locks(ops) if lk.tablename == name] == []
    finally:
        try:
            first.unlock(UnlockRequest(lockid=granted.lockid))
        except Exception:
            pass


def test_a_member_lock_is_checked_and_released_on_another_connection(rest: WaggleProcess, ops: Any) -> None:
    """What Iceberg's Java ``HiveCatalog`` does with its default client pool when two threads commit: ``lock`` on
    one pooled connection, ``check_lock`` and ``unlock`` on whichever is free. A lock of a federated member must be
    found whichever connection asks; otherwise it is left WAITING on the member and every later commit of the
    table queues behind it until the member's lock timeout (Hive's ``hive.txn.timeout``, 300 s)."""
    name = f"pooled_{uuid.uuid4().hex[:8]}"
    with hive2_client(rest.port) as first, hive2_client(rest.port) as second, hive2_client(rest.port) as third:
        _lock_checked_and_released_elsewhere(ops, name, first, second, third)


@pytest.fixture(scope="module")
def two_workers(primary: Any, analytics: Any, ops: Any, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[WaggleProcess]:
    proc = WaggleProcess(tmp_path_factory.mktemp("lock-workers"),
                         federation_yaml(primary.uri, federated_members(analytics.uri, ops.uri)),
                         "database-resolution: PREFIXED\n", ("--workers", "2")).start()
    yield proc
    proc.stop()


def _worker_pids(proxy: WaggleProcess) -> list[int]:
    def serving() -> list[int] | None:
        try:
            workers = json.loads(proxy.http("/healthz")).get("workers", [])
        except Exception:
            return None
        pids = [int(w["pid"]) for w in workers if w["serving"] and w["answered"]]
        return pids if len(pids) == 2 else None

    return list(wait_for(serving, 60.0, "2 workers serving"))


def test_a_member_lock_is_checked_and_released_through_another_worker(two_workers: WaggleProcess, ops: Any,
                                                                      primary: Any) -> None:
    """Through ``waggle serve --workers 2``: the lock taken on a connection of one worker, checked, heartbeated and
    released on connections of the other (no process remembers it); the primary's lock ids pass as they are."""
    from hmsclient.genthrift.hive_metastore.ttypes import (
        CheckLockRequest,
        LockComponent,
        LockLevel,
        LockRequest,
        LockType,
        UnlockRequest,
    )

    pids = _worker_pids(two_workers)
    by_worker: dict[int, list[Any]] = {pid: [] for pid in pids}
    with contextlib.ExitStack() as stack:
        for _ in range(40):
            if all(len(held) >= 2 for held in by_worker.values()):
                break
            c = stack.enter_context(hive2_client(two_workers.port))
            c.get_database("default")
            by_worker[owner(two_workers, c, pids)].append(c)
        (a1, a2), (b1, b2) = (by_worker[pid][:2] for pid in pids)
        _lock_checked_and_released_elsewhere(ops, f"workers_{uuid.uuid4().hex[:8]}", a1, b1, b2)
        _lock_checked_and_released_elsewhere(ops, f"workers_{uuid.uuid4().hex[:8]}", b1, a1, a2)

        # the primary's lock: shown as the primary granted it, found through the other worker too
        granted = a1.lock(LockRequest(component=[LockComponent(
            type=LockType.SHARED_READ, level=LockLevel.DB, dbname="default")], user="etl", hostname="writer"))
        assert [lk.lockid for lk in _locks(primary) if lk.lockid == granted.lockid] == [granted.lockid]
        assert b1.check_lock(CheckLockRequest(lockid=granted.lockid)).lockid == granted.lockid
        b2.unlock(UnlockRequest(lockid=granted.lockid))
        assert [lk for lk in _locks(primary) if lk.lockid == granted.lockid] == []
