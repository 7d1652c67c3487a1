"""Local metastores write notification events as production metastores with hcatalog's DbNotificationListener
do (waggle's listener, ``waggle/local/java/waggle/listener/NotificationLogListener.java``), and Hive's own message
deserializer reads them (``java/EventCheck.java``, compiled once per session against pyspark's Hive jars)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.support.clients import hive2_client
from tests.support.event_check import hive_reads
from tests.support.waits import wait_for

pytestmark = pytest.mark.integration


def events_after(client: Any, after: int) -> list[Any]:
    from hmsclient.genthrift.hive_metastore.ttypes import NotificationEventRequest

    return list(client.get_next_notification(NotificationEventRequest(lastEvent=after, maxEvents=1000)).events or [])


def _table(db: str, name: str, location: str, partitioned: bool = True) -> Any:
    from hmsclient.genthrift.hive_metastore.ttypes import FieldSchema, SerDeInfo, StorageDescriptor, Table

    sd = StorageDescriptor(
        cols=[FieldSchema("id", "int", ""), FieldSchema("name", "string", "")], location=location,
        inputFormat="org.apache.hadoop.mapred.TextInputFormat",
        outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
        serdeInfo=SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe", parameters={}),
        parameters={})
    return Table(tableName=name, dbName=db, sd=sd, parameters={"EXTERNAL": "TRUE"}, tableType="EXTERNAL_TABLE",
                 partitionKeys=[FieldSchema("dt", "string", "")] if partitioned else [])


def test_every_change_is_an_event_that_hive_reads(primary: Any, unique_db: str, tmp_path: Path,
                                                  event_check: list[str]) -> None:
    import hmsclient.genthrift.hive_metastore.ttypes as h

    db = unique_db
    where = tmp_path / "t"
    (where / "dt=1").mkdir(parents=True)
    (where / "dt=1" / "part-0").write_text("1\x01a\n")
    (where / "dt=1" / "_SUCCESS").write_text("")
    (where / "base.txt").write_text("x\n")
    with hive2_client(primary.port) as c:
        start = c.get_current_notificationEventId().eventId
        c.create_database(h.Database(name=db, description="", locationUri=f"file:{tmp_path}/db", parameters={}))
        table = _table(db, "t", f"file:{where}")
        c.create_table(table)
        part = h.Partition(values=["1"], dbName=db, tableName="t", sd=copy.deepcopy(table.sd), parameters={})
        part.sd.location = f"file:{where}/dt=1"
        c.add_partitions([part])
        moved = copy.deepcopy(part)
        moved.sd.location = f"file:{where}/dt=1-moved"
        c.alter_partition(db, "t", moved)
        changed = c.get_table(db, "t")
        changed.sd.cols.append(h.FieldSchema("added", "double", ""))
        c.alter_table(db, "t", changed)
        c.fire_listener_event(h.FireEventRequest(
            successful=True, dbName=db, tableName="t", partitionVals=["1"],
            data=h.FireEventRequestData(insertData=h.InsertEventRequestData(filesAdded=[f"file:{where}/dt=1/x"]))))
        c.create_function(h.Function(functionName="f1", dbName=db, className="org.example.F", ownerName="u",
                                     ownerType=h.PrincipalType.USER, createTime=0, functionType=1,
                                     resourceUris=[]))
        c.drop_function(db, "f1")
        renamed = c.get_table(db, "t")
        renamed.tableName = "t2"
        c.alter_table(db, "t", renamed)
        c.drop_partition(db, "t2", ["1"], False)
        c.drop_table(db, "t2", False)
        c.drop_database(db, False, False)
        events = events_after(c, start)
        current = c.get_current_notificationEventId().eventId

    assert [e.eventType for e in events] == [
        "CREATE_DATABASE", "CREATE_TABLE", "ADD_PARTITION", "ALTER_PARTITION", "ALTER_TABLE", "INSERT",
        "CREATE_FUNCTION", "DROP_FUNCTION", "ALTER_TABLE", "DROP_PARTITION", "DROP_TABLE", "DROP_DATABASE"]
    ids = [e.eventId for e in events]
    assert ids == list(range(start + 1, start + 1 + len(events))) and current == ids[-1]  # contiguous, in order
    assert {e.messageFormat for e in events} == {"json-0.2"}
    assert [(e.dbName, e.tableName) for e in events] == [
        (db, None), (db, "t"), (db, "t"), (db, "t"), (db, "t"), (db, "t"), (db, None), (db, None), (db, "t2"),
        (db, "t2"), (db, "t2"), (db, None)]

    read = hive_reads(event_check, events)
    assert [r["event_type"] for r in read] == [e.eventType for e in events]
    assert all(r["db"] == db for r in read)
    created, added, altered_part, altered, insert, function, _, renamed_msg, dropped_part, _, _ = read[1:]
    assert created["table"] == "t" and created["object"]["columns"] == ["id:int", "name:string"]
    assert created["files"] == [f"file:{where}/base.txt"]  # data files only: no directory, no _SUCCESS
    assert added["partitions"] == [{"dt": "1"}] and added["locations"] == [f"file:{where}/dt=1"]
    assert added["files"] == {"dt=1": [f"file:{where}/dt=1/part-0"]}
    assert altered_part["partition"] == {"dt": "1"}
    assert altered_part["location_after"] == f"file:{where}/dt=1-moved"
    assert altered["before"]["columns"] == ["id:int", "name:string"]
    assert altered["after"]["columns"] == ["id:int", "name:string", "added:double"]
    assert insert["partition"] == {"dt": "1"} and insert["files"] == [f"file:{where}/dt=1/x"]
    assert function["function"] == "f1"
    assert (renamed_msg["before"]["name"], renamed_msg["after"]["name"]) == ("t", "t2")
    assert dropped_part["partitions"] == [{"dt": "1"}]


def test_a_failed_change_writes_no_event(primary: Any) -> None:
    """The event is written in the change's own transaction: a change that fails leaves no event."""
    import hmsclient.genthrift.hive_metastore.ttypes as h

    with hive2_client(primary.port) as c:
        before = c.get_current_notificationEventId().eventId
        with pytest.raises(h.InvalidObjectException):
            c.create_table(_table("no_such_database_here", "t", "file:/tmp/nowhere"))
        assert c.get_current_notificationEventId().eventId == before


def test_events_older_than_the_time_to_live_are_deleted(short_lived_events: Any) -> None:
    """hive.metastore.event.db.listener.timetolive is honoured: old events go, the id sequence goes on."""
    import hmsclient.genthrift.hive_metastore.ttypes as h

    with hive2_client(short_lived_events.port) as c:
        c.create_database(h.Database(name="ttl_a", description="", parameters={}))
        assert [e.eventType for e in events_after(c, 0)] == ["CREATE_DATABASE"]
        wait_for(lambda: not events_after(c, 0), timeout=15, message="the expired event was not deleted")
        c.create_database(h.Database(name="ttl_b", description="", parameters={}))
        fresh = events_after(c, 0)
        assert [(e.eventId, e.dbName) for e in fresh] == [(2, "ttl_b")]
        # the log empty again, the sequence still goes on from 2
        wait_for(lambda: not events_after(c, 0), timeout=15, message="the second expired event was not deleted")
        assert c.get_current_notificationEventId().eventId == 2
