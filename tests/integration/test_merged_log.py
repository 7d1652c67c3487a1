"""The federation's merged notification log (``notification-log: federated``) over real Hive 2.3 metastores that
write their logs as production ones do: the session's primary and ``ops`` (prefix ``ops_``).

Each test changes databases and tables of its own straight at the members, then reads the log through waggle as
event consumers do (ids saved and asked after), and checks what it sees by its own names only: other files use
the same metastores, and their events are in the log too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.clients import hive2_client, release_client
from tests.support.event_check import hive_reads
from tests.support.federation import federation_yaml
from tests.support.merged_log import wait_merging
from tests.support.proxy import WaggleProcess
from tests.support.waits import wait_for

pytestmark = pytest.mark.integration

#: grants that hide ops' databases from mallory alone (a caller who names herself with set_ugi); every other
#: caller sees everything, as without grants
SERVER = ("database-resolution: PREFIXED\nnotification-log: federated\n"
          "authorization:\n  trust-set-ugi: true\n  default: allow\n  rules:\n  - name: mallory sees no ops\n"
          "    users: [mallory]\n    databases: ['ops_*']\n    privileges: all\n    effect: deny\n")


def _members(ops: Any) -> str:
    return (f"federated-meta-stores:\n- name: ops\n  remote-meta-store-uris: {ops.uri}\n  database-prefix: ops_\n"
            "  access-control-type: READ_AND_WRITE_ON_DATABASE_WHITELIST\n  writable-database-white-list: [scratch]\n")


@pytest.fixture(scope="module")
def merged(primary: Any, ops: Any, federation_data: dict[str, Any],
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    proc = WaggleProcess(tmp_path_factory.mktemp("merged"), federation_yaml(primary.uri, _members(ops)),
                         SERVER).start()
    wait_merging(proc, primary.port, ("primary", "ops"))
    yield proc
    proc.stop()


def _table(name: str, db: str, partitioned: bool = False) -> Any:
    from hmsclient.genthrift.hive_metastore.ttypes import FieldSchema, SerDeInfo, StorageDescriptor, Table

    sd = StorageDescriptor(cols=[FieldSchema("id", "string", None)], location=None,
                           inputFormat="org.apache.hadoop.mapred.TextInputFormat",
                           outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                           serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy."
                                                                "LazySimpleSerDe", parameters={}),
                           parameters={})
    return Table(tableName=name, dbName=db, owner="test", sd=sd, parameters={}, tableType="MANAGED_TABLE",
                 partitionKeys=[FieldSchema("dt", "string", None)] if partitioned else [])


def _name() -> str:
    return f"m_{uuid.uuid4().hex[:10]}"


def _events(port: int, after: int, most: int = 1000) -> list[Any]:
    from hmsclient.genthrift.hive_metastore.ttypes import NotificationEventRequest

    with hive2_client(port) as c:
        return list(c.get_next_notification(NotificationEventRequest(lastEvent=after, maxEvents=most)).events or [])


def _current(port: int) -> int:
    with hive2_client(port) as c:
        return int(c.get_current_notificationEventId().eventId)


def _mine(events: list[Any], tables: set[str]) -> list[Any]:
    return [e for e in events if (e.tableName or "").lower() in tables]


def _changes(primary: Any, ops: Any, db: str, names: tuple[str, str]) -> None:
    """A table created, partitioned and altered in the primary's ``db``; one created, altered and dropped in ops'
    ``scratch``."""
    from hmsclient.genthrift.hive_metastore.ttypes import Partition

    ours, theirs = names
    with hive2_client(primary.port) as p, hive2_client(ops.port) as o:
        p.create_table(_table(ours, db, partitioned=True))
        o.create_table(_table(theirs, "scratch"))
        table = p.get_table(db, ours)
        part = Partition(values=["1"], dbName=db, tableName=ours, sd=table.sd, parameters={})
        p.add_partitions([part])
        changed = o.get_table("scratch", theirs)
        changed.parameters = {**(changed.parameters or {}), "touched": "yes"}
        o.alter_table("scratch", theirs, changed)
        o.drop_table("scratch", theirs, True)


def _changed(merged: WaggleProcess, primary: Any, ops: Any, db: str) -> tuple[int, tuple[str, str], list[Any]]:
    """A database of the test's in the primary, then :func:`_changes` in it and in ops: the merged id before them,
    the two tables' names, and their five events as waggle serves them once all have arrived."""
    from hmsclient.genthrift.hive_metastore.ttypes import Database

    with hive2_client(primary.port) as p:
        p.create_database(Database(name=db, description="", parameters={}))
    start = _current(merged.port)
    names = (_name(), _name())
    _changes(primary, ops, db, names)
    seen = wait_for(lambda: (lambda found: found if len(found) == 5 else None)(
        _mine(_events(merged.port, start), set(names))), timeout=20, message=lambda: merged.log()[-4000:])
    return start, names, seen


def test_both_members_changes_arrive_under_waggles_names_in_order_with_ids_of_their_own(
        merged: WaggleProcess, primary: Any, ops: Any, unique_db: str, event_check: list[str]) -> None:
    start, names, seen = _changed(merged, primary, ops, unique_db)
    ours = [(e.eventType, e.dbName, e.tableName) for e in seen if e.tableName == names[0]]
    theirs = [(e.eventType, e.dbName, e.tableName) for e in seen if e.tableName == names[1]]
    assert ours == [("CREATE_TABLE", unique_db, names[0]), ("ADD_PARTITION", unique_db, names[0])]
    assert theirs == [("CREATE_TABLE", "ops_scratch", names[1]), ("ALTER_TABLE", "ops_scratch", names[1]),
                      ("DROP_TABLE", "ops_scratch", names[1])]
    everything = _events(merged.port, start)
    ids = [e.eventId for e in everything]
    assert ids == sorted(set(ids)) and ids[0] > start  # one increasing id space, no id twice
    assert _current(merged.port) >= ids[-1]

    read = hive_reads(event_check, seen)  # Hive's own deserializer names waggle's databases
    assert [r["db"] for r in read] == [e.dbName for e in seen]
    created = next(r for r, e in zip(read, seen, strict=True) if e.tableName == names[1])
    assert created["object"]["db"] == "ops_scratch"


def test_a_saved_id_asked_again_through_another_waggle_gets_the_same_events(
        merged: WaggleProcess, primary: Any, ops: Any, unique_db: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    start, _, _ = _changed(merged, primary, ops, unique_db)
    first = [(e.eventId, e.eventType, e.dbName, e.tableName, e.message) for e in _events(merged.port, start)]

    other = WaggleProcess(tmp_path_factory.mktemp("merged-other"), federation_yaml(primary.uri, _members(ops)),
                          SERVER).start()
    try:
        again = [(e.eventId, e.eventType, e.dbName, e.tableName, e.message) for e in _events(other.port, start)]
        assert again[:len(first)] == first
        merged.stop()  # the merger goes: the other takes the lease, and the ids go on
        try:
            later = (_name(), _name())
            _changes(primary, ops, unique_db, later)
            after = first[-1][0]
            found = wait_for(lambda: (lambda f: f if len(f) == 5 else None)(
                _mine(_events(other.port, after), set(later))), timeout=60, message="events after the switch")
            everything = _events(other.port, start)
            ids = [e.eventId for e in everything]
            assert ids == sorted(set(ids))
            assert all(e.eventId > after for e in found)
        finally:
            merged.start()
    finally:
        other.stop()


def test_the_requests_filters_apply_to_waggles_names(merged: WaggleProcess, primary: Any, ops: Any,
                                                      unique_db: str) -> None:
    start, names, _ = _changed(merged, primary, ops, unique_db)
    with release_client("4.x", merged.port) as (client, types):
        request = types.NotificationEventRequest(lastEvent=start, maxEvents=1000, dbName="ops_scratch",
                                                 eventTypeSkipList=["ALTER_TABLE"])
        found = _mine(list(client.get_next_notification(request).events or []), set(names))
        count = client.get_notification_events_count(types.NotificationEventsCountRequest(
            fromEventId=start, dbName="ops_scratch", catName="hive")).eventsCount
    assert [(e.eventType, e.tableName) for e in found] == [("CREATE_TABLE", names[1]), ("DROP_TABLE", names[1])]
    assert count >= 3


def test_the_grants_leave_out_the_events_a_caller_may_not_see(merged: WaggleProcess, primary: Any, ops: Any,
                                                              unique_db: str) -> None:
    start, names, seen = _changed(merged, primary, ops, unique_db)
    assert {e.dbName for e in seen} == {unique_db, "ops_scratch"}
    with release_client("4.x", merged.port) as (c, types):
        c.set_ugi("mallory", [])
        request = types.NotificationEventRequest(lastEvent=start, maxEvents=1000)
        events = _mine(list(c.get_next_notification(request).events or []), set(names))
        count = c.get_notification_events_count(types.NotificationEventsCountRequest(
            fromEventId=start, dbName="ops_scratch", catName="hive")).eventsCount
    assert [e.dbName for e in events] == [unique_db] * 2  # the primary's two; ops' three left out
    assert count == 0
    assert (merged.metric("waggle_access_filtered_total", kind="events") or 0) >= 3


def test_a_member_killed_for_20_s_delays_only_its_own_events(ops: Any, federation_data: dict[str, Any],
                                                             tmp_path: Any) -> None:
    """A federation of its own (``ops`` as the primary, so its journal is not the module's; ``lake`` a member of
    its own, killed): the primary's events go on arriving while lake is down, and lake's, written before the
    kill and after the restart, all arrive once it is back, each once."""
    import time

    from tests.support.federation import prefixed
    from waggle.local.metastore import LocalMetastore
    from waggle.local.seed import ensure_database

    lake = LocalMetastore(tmp_path / "lake").start().wait_ready()
    proc = None
    try:
        with hive2_client(lake.port) as direct:
            ensure_database(direct, "d", f"file://{lake.warehouse}/d.db")
        text = prefixed(ops.uri, ("lake", lake.uri, "lake_"))
        proc = WaggleProcess(tmp_path / "w", text, SERVER).start()
        wait_merging(proc, ops.port, ("primary", "lake"))
        start = _current(proc.port)
        ours = [_name() for _ in range(6)]
        theirs = [_name() for _ in range(3)]

        def arrived(after: int, names: list[str]) -> list[Any]:
            return _mine(_events(proc.port, after), set(names))

        with hive2_client(lake.port) as direct:
            direct.create_table(_table(theirs[0], "d"))
        with hive2_client(ops.port) as primary:
            primary.create_table(_table(ours[0], "scratch"))
        wait_for(lambda: len(arrived(start, [ours[0], theirs[0]])) == 2, timeout=20)
        with hive2_client(lake.port) as direct:
            direct.create_table(_table(theirs[1], "d"))  # just before the kill: merged before it, or after
        lake.kill()
        down_at = time.monotonic()
        for name in ours[1:5]:  # the primary's events keep arriving, each within seconds
            with hive2_client(ops.port) as primary:
                primary.create_table(_table(name, "scratch"))
            wait_for(lambda n=name: arrived(start, [n]), timeout=10, message=f"{name} while lake is down")
        time.sleep(max(0.0, 20 - (time.monotonic() - down_at)))
        lake.start().wait_ready()
        with hive2_client(lake.port) as direct:
            direct.create_table(_table(theirs[2], "d"))
        with hive2_client(ops.port) as primary:
            primary.create_table(_table(ours[5], "scratch"))
        seen = wait_for(lambda: (lambda f: f if len(f) == 9 else None)(arrived(start, ours + theirs)), timeout=60,
                        message=lambda: proc.log()[-3000:])
        assert sorted(e.tableName for e in seen) == sorted(ours + theirs)  # each once
        assert [e.tableName for e in seen if e.dbName == "lake_d"] == theirs  # lake's, in lake's order
        assert [e.tableName for e in seen if e.dbName == "scratch"] == ours
        ids = [e.eventId for e in seen]
        assert ids == sorted(set(ids))
    finally:
        if proc is not None:
            proc.stop()
        lake.stop()


def test_a_reload_that_adds_a_member_keeps_the_ids_given_and_merges_the_new_one(
        merged: WaggleProcess, primary: Any, ops: Any, analytics: Any, unique_db: str) -> None:
    start, names, before = _changed(merged, primary, ops, unique_db)
    reloads = len(merged.events("config.reloaded"))
    merged.write_federation(federation_yaml(primary.uri, _members(ops) + (
        f"- name: analytics\n  remote-meta-store-uris: {analytics.uri}\n  database-prefix: analytics_\n")))
    try:
        wait_for(lambda: len(merged.events("config.reloaded")) > reloads, timeout=30,
                 message=lambda: merged.log()[-3000:])
        wait_merging(merged, primary.port, ("analytics",))
        later = _name()
        with hive2_client(analytics.port) as a:
            a.create_table(_table(later, "default"))
        found = wait_for(lambda: _mine(_events(merged.port, start), {later}), timeout=20)
        assert [(e.eventType, e.dbName) for e in found] == [("CREATE_TABLE", "analytics_default")]
        again = _mine(_events(merged.port, start), set(names))
        assert [(e.eventId, e.message) for e in again] == [(e.eventId, e.message) for e in before]  # ids kept
        assert found[0].eventId > before[-1].eventId
    finally:
        merged.write_federation(federation_yaml(primary.uri, _members(ops)))
        wait_for(lambda: len(merged.events("config.reloaded")) > reloads + 1, timeout=30)


def test_workers_serve_the_log_their_supervisor_merges(merged: WaggleProcess, primary: Any, ops: Any,
                                                       unique_db: str, tmp_path: Any) -> None:
    """With workers, the supervisor reads the logs (and may merge); each worker answers from the journal, fetching
    the events from their members: the same events under the same ids as the module's waggle."""
    workers = WaggleProcess(tmp_path / "workers", federation_yaml(primary.uri, _members(ops)), SERVER,
                            args=("--workers", "2")).start()
    try:
        start, names, mine = _changed(merged, primary, ops, unique_db)
        for _ in range(4):  # connections land on either worker
            found = _mine(_events(workers.port, start), set(names))
            assert [(e.eventId, e.dbName, e.message) for e in found] == [(e.eventId, e.dbName, e.message) for e in mine]
    finally:
        workers.stop()
