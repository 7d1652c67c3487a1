"""fire_listener_event keeps its files through waggle, whatever release numbers InsertEventRequestData: a client of
Hive 2.3, 3.1 or 4.x fires an INSERT event at a real Hive 2.3 metastore and at a stub Hive 4 one, relayed (the
primary) and with its database name rewritten (a PREFIXED member), and the member's own notification log (the real
2.3 metastore's, under the stub too) lists the files. The stub also shows what a Hive 4 metastore reads.
See waggle/hms/insert_event.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.clients import hive2_client, release_client
from tests.support.compat import CompatFederation
from tests.support.proxy import WaggleProcess

pytestmark = pytest.mark.integration

TABLE = "fired"


@dataclass(frozen=True)
class Target:
    """Where an event is fired: through waggle at ``port`` into database ``db``, which is ``member_db`` of the real
    Hive 2.3 metastore ``store`` (behind ``stub``, a Hive 4 stub, if any)."""

    name: str
    port: int
    db: str
    store: Any
    member_db: str
    stub: Any = None


def _ensure_table(store: Any, db: str) -> None:
    """Table ``TABLE`` in database ``db`` (which the session's seeding made) of the metastore, unless it is there."""
    from hmsclient.genthrift.hive_metastore import ttypes as h2

    with hive2_client(store.port) as c:
        try:
            c.get_table(db, TABLE)
        except h2.NoSuchObjectException:
            table = c.get_table(db, "plain") if db != "scratch" else None
            if table is None:
                table = h2.Table(dbName=db, parameters={"EXTERNAL": "TRUE"}, tableType="EXTERNAL_TABLE",
                                 partitionKeys=[], sd=h2.StorageDescriptor(
                                     cols=[h2.FieldSchema("id", "int", "")],
                                     inputFormat="org.apache.hadoop.mapred.TextInputFormat",
                                     outputFormat="org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
                                     serdeInfo=h2.SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy."
                                                                             "LazySimpleSerDe", parameters={}),
                                     parameters={}))
            table.tableName = TABLE
            table.sd.location = f"file://{store.warehouse}/{db}.db/{TABLE}"
            c.create_table(table)


@pytest.fixture(scope="module")
def targets(compat: CompatFederation, waggle: WaggleProcess, hive4_primary: tuple[WaggleProcess, Any],
            primary: Any, ops: Any) -> Iterator[list[Target]]:
    four, stub4 = hive4_primary
    compat23, _ = compat.databases["2.3"]
    v4_db, compat4 = compat.databases["4.x"]
    for store, db in ((primary, compat23), (ops, "scratch"), (ops, compat4)):
        _ensure_table(store, db)
    yield [
        Target("hive 2.3, relayed", compat.waggle.port, compat23, primary, compat23),
        Target("hive 2.3, prefixed", waggle.port, "ops_scratch", ops, "scratch"),
        Target("hive 4, relayed", four.port, compat23, primary, compat23, stub4),
        Target("hive 4, prefixed", compat.waggle.port, v4_db, ops, compat4, compat.stubs["4.x"]),
    ]


def _last_event(store: Any) -> int:
    with hive2_client(store.port) as c:
        return int(c.get_current_notificationEventId().eventId)


def _files_logged(store: Any, after: int, db: str) -> list[list[str]]:
    """The files of each INSERT event on ``db``.``TABLE`` in the metastore's log after event ``after``."""
    from hmsclient.genthrift.hive_metastore.ttypes import NotificationEventRequest

    with hive2_client(store.port) as c:
        events = c.get_next_notification(NotificationEventRequest(lastEvent=after, maxEvents=1000)).events or []
    return [json.loads(e.message)["files"] for e in events
            if e.eventType == "INSERT" and (e.dbName, e.tableName) == (db, TABLE)]


@pytest.mark.parametrize("client", ["2.3", "3.1", "4.x"])
def test_an_insert_event_keeps_its_files(targets: list[Target], client: str) -> None:
    lost = []
    for target in targets:
        files = [f"file:/tmp/fired/{uuid.uuid4().hex}/part-0"]
        after = _last_event(target.store)
        before = len(target.stub.received("fire_listener_event")) if target.stub is not None else 0
        with release_client(client, target.port) as (c, T):
            insert = T.InsertEventRequestData(filesAdded=files)
            request = T.FireEventRequest(successful=True, dbName=target.db, tableName=TABLE,
                                         data=T.FireEventRequestData(insertData=insert))
            if client != "2.3":  # as Hive 3+ clients send it
                request.catName = "hive"
                insert.replace = False
            try:
                c.fire_listener_event(request)
            except Exception as exc:  # reported with the others below
                lost.append(f"{target.name}: {type(exc).__name__}: {exc}")
                continue
            assert c.get_database("default").name == "default"  # the connection is still in step
        if target.stub is not None:  # what a Hive 4 metastore reads
            sent = target.stub.received("fire_listener_event")[before:]
            read = [s.args.rqst.data.insertData.filesAdded for s in sent if not s.refused]
            if read != [files]:
                lost.append(f"{target.name}: the Hive 4 metastore read {read}")
        logged = _files_logged(target.store, after, target.member_db)
        if logged != [files]:
            lost.append(f"{target.name}: the log has {logged}, not {files}")
    assert not lost, "\n".join(lost)
