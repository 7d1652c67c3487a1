"""The merged notification log (``notification-log: federated``) read by the clients that consume logs in
production: Hive 2.3's own ``HiveMetaStoreClient`` (``java/MergedLogCheck.java``, compiled against pyspark's Hive
2.3.9 jars, which decodes each message with Hive's ``MessageDeserializer``), and Impala's event processor, replayed
call by call.

Both read the same changes made straight at the session's primary and ``ops`` (prefix ``ops_``) metastores, through
the waggle of ``tests/integration/test_merged_log.py`` (fixture ``merged``). Other files use the same metastores:
each test sees only its own tables.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_merged_log import _current, _events, _table, merged
from tests.support.clients import hive2_client, release_client
from tests.support.java import compiled
from tests.support.merged_log import wait_merging
from tests.support.proxy import WaggleProcess
from tests.support.waits import wait_for

pytestmark = pytest.mark.integration

__all__ = ["merged"]  # the fixture, imported: a waggle of its own for this module, over the same metastores

SOURCE = Path(__file__).parent / "java" / "MergedLogCheck.java"
#: each member's events for one table, in the order ``_lifecycle`` makes them
LIFECYCLE = ["CREATE_TABLE", "ADD_PARTITION", "ALTER_TABLE", "INSERT", "DROP_TABLE"]


@pytest.fixture(scope="module")
def merged_log_check(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command line that runs the compiled checker."""
    return compiled(SOURCE, tmp_path_factory.mktemp("merged-log-check"))


def _lifecycle(primary: Any, ops: Any, db: str, ours: str, theirs: str, files: Path) -> None:
    """In the primary's ``db`` table ``ours``, and in ops' ``scratch`` table ``theirs``, by turns: created
    (partitioned by dt), a partition added, altered, an INSERT into dt=1 announced (fire_listener_event with its
    files), dropped."""
    from hmsclient.genthrift.hive_metastore import ttypes as h

    with hive2_client(primary.port) as p, hive2_client(ops.port) as o:
        members = ((p, db, ours), (o, "scratch", theirs))
        for c, d, t in members:
            c.create_table(_table(t, d, partitioned=True))
        for c, d, t in members:
            sd = c.get_table(d, t).sd
            c.add_partitions([h.Partition(values=["1"], dbName=d, tableName=t, sd=sd, parameters={})])
        for c, d, t in members:
            changed = c.get_table(d, t)
            changed.parameters = {**(changed.parameters or {}), "touched": "yes"}
            c.alter_table(d, t, changed)
        for c, d, t in members:
            c.fire_listener_event(h.FireEventRequest(
                successful=True, dbName=d, tableName=t, partitionVals=["1"],
                data=h.FireEventRequestData(insertData=h.InsertEventRequestData(
                    filesAdded=[f"file://{files}/{t}/dt=1/part-0"]))))
        for c, d, t in members:
            c.drop_table(d, t, True)


def _names(prefix: str) -> tuple[str, str]:
    return f"{prefix}_{uuid.uuid4().hex[:6]}", f"{prefix}_{uuid.uuid4().hex[:6]}"


def _java_reads(check: list[str], port: int, after: int, prefix: str) -> tuple[int, list[dict[str, Any]]]:
    """(the current id, the events after ``after`` whose table starts with ``prefix``) as Hive's client reads them
    through ``port``."""
    done = subprocess.run([*check, f"thrift://127.0.0.1:{port}", str(after), "1000", prefix],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return int(lines[0]["current"]), lines[1:]


def _expected(waggle_db: str, table: str) -> list[dict[str, Any]]:
    """What Hive's client and deserializer read of one table's lifecycle through waggle: waggle's database name
    ``waggle_db`` everywhere, in the event and in its message's objects."""
    out: list[dict[str, Any]] = []
    for kind in LIFECYCLE:
        read: dict[str, Any] = {"type": kind, "db": waggle_db, "table": table, "message_db": waggle_db,
                                "message_table": table}
        if kind == "CREATE_TABLE":
            read.update(object_db=waggle_db, object_table=table)
        elif kind == "ALTER_TABLE":
            read.update(before_db=waggle_db, after_db=waggle_db, after_table=table)
        elif kind == "ADD_PARTITION":
            read.update(partition_dbs=[waggle_db], partitions=[{"dt": "1"}])
        elif kind == "INSERT":
            read.update(partition={"dt": "1"})
        out.append(read)
    return out


def _without_ids_and_files(read: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in ("id", "files")} for r in read]


def _arrived(port: int, after: int, tables: set[str], count: int) -> None:
    """Wait until waggle lists ``count`` events of ``tables`` after ``after``."""
    wait_for(lambda: len([e for e in _events(port, after) if e.tableName in tables]) >= count, timeout=30,
             message=f"{count} events of {sorted(tables)} after {after}")


def test_hives_own_client_reads_both_members_under_waggles_names_and_again_after_a_restart(
        merged: WaggleProcess, primary: Any, ops: Any, unique_db: str, merged_log_check: list[str],
        tmp_path: Path) -> None:
    from hmsclient.genthrift.hive_metastore.ttypes import Database

    with hive2_client(primary.port) as p:
        p.create_database(Database(name=unique_db, description="", parameters={}))
    prefix = f"j{uuid.uuid4().hex[:8]}"
    ours, theirs = _names(prefix)
    start = _current(merged.port)
    _lifecycle(primary, ops, unique_db, ours, theirs, tmp_path)
    _arrived(merged.port, start, {ours, theirs}, 2 * len(LIFECYCLE))

    current, read = _java_reads(merged_log_check, merged.port, start, prefix)
    assert current >= max(r["id"] for r in read) > start
    ids = [r["id"] for r in read]
    assert ids == sorted(set(ids))  # increasing, none twice
    mine = [r for r in read if r["table"] == ours]
    other = [r for r in read if r["table"] == theirs]
    assert len(mine) + len(other) == len(read)
    assert _without_ids_and_files(mine) == _expected(unique_db, ours)
    assert _without_ids_and_files(other) == _expected("ops_scratch", theirs)
    for r, t in ((mine[3], ours), (other[3], theirs)):
        assert r["files"] == [f"file://{tmp_path}/{t}/dt=1/part-0"]

    # a consumer saved the id of the third event it read; waggle restarts while both members change more
    saved = ids[2]
    before_restart = [r for r in read if r["id"] > saved]
    merged.stop()
    try:
        later = _names(prefix)
        _lifecycle(primary, ops, unique_db, *later, tmp_path)
    finally:
        merged.start()
    wait_merging(merged, primary.port, ("primary", "ops"))
    _arrived(merged.port, saved, set(later), 2 * len(LIFECYCLE))

    _, again = _java_reads(merged_log_check, merged.port, saved, prefix)
    again_ids = [r["id"] for r in again]
    assert again_ids == sorted(set(again_ids)) and again_ids[0] > saved  # every later event once, in order
    assert again[:len(before_restart)] == before_restart  # the same ids for the same events
    rest = again[len(before_restart):]
    assert [r["table"] for r in rest if r["table"] not in later] == []
    assert _without_ids_and_files([r for r in rest if r["table"] == later[0]]) == \
        _expected(unique_db, later[0])
    assert _without_ids_and_files([r for r in rest if r["table"] == later[1]]) == \
        _expected("ops_scratch", later[1])


# -- Impala's event processor, replayed ---------------------------------------------------------------------------
#: what Impala's event processor skips by default (flag ``default_skipped_hms_event_types``)
IMPALA_SKIPPED = ["OPEN_TXN", "UPDATE_TBL_COL_STAT_EVENT", "UPDATE_PART_COL_STAT_EVENT"]
#: the configuration keys Impala's validateConfigs asks for, and the values it needs to start
IMPALA_CONFIG = {"hive.metastore.dml.events": "true", "metastore.catalog.default": "hive"}


@dataclass
class ImpalaReplay:
    """The calls Impala's catalog makes to follow a metastore's notification log, as apache/impala's
    ``fe/src/main/java/org/apache/impala/service/JniCatalog.java`` (start),
    ``fe/src/main/java/org/apache/impala/catalog/events/MetastoreEventsProcessor.java`` (processEvents, the poll)
    and ``fe/src/main/java/org/apache/impala/catalog/events/MetastoreEventProcessorConfig.java`` (validateConfigs)
    make them (see /work/shared/reference/events-rest-grants.md, section 1). Written from that description: Thrift
    calls straight through the generated client (Hive 4's fields), no gap check."""

    client: Any
    types: Any
    last_synced: int = 0
    config: dict[str, str] = field(default_factory=dict)
    first: list[Any] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    polls: list[tuple[int, int, int]] = field(default_factory=list)  # (current, events answered, cursor after)

    def start(self) -> ImpalaReplay:
        """The start: the current id is the cursor (nothing older is replayed); the configuration checked; the
        start event read for its time."""
        current = int(self.client.get_current_notificationEventId().eventId)
        for key in IMPALA_CONFIG:
            try:
                self.config[key] = str(self.client.get_config_value(key, ""))
            except Exception as exc:  # the answer a metastore gives (ConfigValSecurityException, ...)
                self.config[key] = f"!{type(exc).__name__}: {getattr(exc, 'message', exc)}"
        if current > 0:
            self.first = list(self.client.get_next_notification(self.types.NotificationEventRequest(
                lastEvent=current - 1, maxEvents=1)).events or [])
        self.last_synced = current
        return self

    def poll(self) -> list[Any]:
        """One round of processEvents: the current id; if it moved, the events after the cursor (skipping Impala's
        default types); the cursor to the last event, or to the current id when none came."""
        current = int(self.client.get_current_notificationEventId().eventId)
        if current <= self.last_synced:
            self.polls.append((current, 0, self.last_synced))
            return []
        found = list(self.client.get_next_notification(self.types.NotificationEventRequest(
            lastEvent=self.last_synced, maxEvents=1000, eventTypeSkipList=IMPALA_SKIPPED)).events or [])
        self.last_synced = int(found[-1].eventId) if found else current
        self.polls.append((current, len(found), self.last_synced))
        self.events.extend(found)
        return found

    def of(self, tables: set[str]) -> list[tuple[str, str, str]]:
        return [(e.eventType, e.dbName, e.tableName) for e in self.events if e.tableName in tables]


@pytest.fixture
def impala(merged: WaggleProcess, primary: Any, ops: Any) -> Iterator[dict[str, ImpalaReplay]]:
    """Impala's event processor started against the primary, ops, and waggle (each its own connection)."""
    with ExitStack() as stack:
        yield {name: ImpalaReplay(*stack.enter_context(release_client("4.x", port))).start()
               for name, port in (("primary", primary.port), ("ops", ops.port), ("waggle", merged.port))}


def test_impalas_event_processor_gets_through_waggle_what_it_gets_from_each_member(
        impala: dict[str, ImpalaReplay], merged: WaggleProcess, primary: Any, ops: Any, unique_db: str,
        tmp_path: Path) -> None:
    from hmsclient.genthrift.hive_metastore.ttypes import Database

    with hive2_client(primary.port) as p:
        p.create_database(Database(name=unique_db, description="", parameters={}))
    started = impala["waggle"]
    # the start: the configuration answers are the primary's; the start event read is the current one
    assert started.config == impala["primary"].config, (started.config, impala["primary"].config)
    assert [e.eventId for e in started.first] == [started.last_synced]

    ours, theirs = _names("i")
    _lifecycle(primary, ops, unique_db, ours, theirs, tmp_path)
    tables = {ours, theirs}

    def caught_up() -> bool:
        for replay in impala.values():
            replay.poll()
        return all(len(impala[name].of(tables)) == len(LIFECYCLE) for name in ("primary", "ops")) and \
            len(impala["waggle"].of(tables)) == 2 * len(LIFECYCLE)

    deadline = time.monotonic() + 30
    while not caught_up():
        assert time.monotonic() < deadline, {name: r.of(tables) for name, r in impala.items()}
        time.sleep(0.5)  # hms_event_polling_interval_s, as since IMPALA-14562
    for _ in range(2):  # and nothing more of them comes after
        time.sleep(0.5)
        caught_up()

    direct_primary = impala["primary"].of(tables)
    direct_ops = impala["ops"].of(tables)
    assert [t for t, _, _ in direct_primary] == [t for t, _, _ in direct_ops] == LIFECYCLE
    through = impala["waggle"].of(tables)
    assert [e for e in through if e[2] == ours] == direct_primary
    assert [e for e in through if e[2] == theirs] == [(t, "ops_scratch", n) for t, _, n in direct_ops]
    ids = [e.eventId for e in impala["waggle"].events]
    assert ids == sorted(set(ids)) and all(i > started.first[0].eventId for i in ids)
    cursors = [cursor for _, _, cursor in started.polls]
    assert cursors == sorted(cursors) and cursors[-1] >= max(ids)
