"""Notification events read as changes (waggle.sync.follow.events): messages in Hive 2.3's ``json-0.2`` shape,
as a local metastore with the notification listener writes them (``get_next_notification``), with the Thrift
JSON objects inside cut down to the fields that name the table."""

from __future__ import annotations

import json

import pytest

from waggle.hms.gen.hive_metastore.ttypes import NotificationEvent
from waggle.sync.follow.events import Change, MessageError, concerns_tables, decode

HEAD = '{"server":"","servicePrincipal":"","db":"sales","table":"%s"'
ORDERS_JSON = '{"1":{"str":"orders"},"2":{"str":"sales"},"4":{"i32":1795642198},"12":{"str":"EXTERNAL_TABLE"}}'
#: as the metastore wrote them (event id, type, table, message), the Thrift objects cut down
MESSAGES = {
    "CREATE_DATABASE": (1, None, '{"server":"","servicePrincipal":"","db":"sales","timestamp":1795642198}'),
    "CREATE_TABLE": (2, "orders", HEAD % "orders" + ',"tableObjJson":' + json.dumps(ORDERS_JSON)
                     + ',"timestamp":1795642198,"files":[]}'),
    "ADD_PARTITION": (3, "orders", HEAD % "orders" + ',"tableObjJson":' + json.dumps(ORDERS_JSON)
                      + ',"timestamp":1795642199,"partitions":[{"dt":"2024-01-01"}],"partitionListJson":['
                      + json.dumps('{"1":{"lst":["str",1,"2024-01-01"]},"2":{"str":"sales"},"3":{"str":"orders"}}')
                      + '],"partitionFiles":[{"partitionName":"dt=2024-01-01","files":[]}]}'),
    "ALTER_PARTITION": (4, "orders", HEAD % "orders" + ',"tableObjJson":' + json.dumps(ORDERS_JSON)
                        + ',"timestamp":1795642199,"keyValues":{"dt":"2024-01-01"},"partitionObjBeforeJson":'
                        + json.dumps('{"1":{"lst":["str",1,"2024-01-01"]}}') + ',"partitionObjAfterJson":'
                        + json.dumps('{"1":{"lst":["str",1,"2024-01-01"]}}') + '}'),
    "ALTER_TABLE": (5, "orders", HEAD % "orders" + ',"tableObjBeforeJson":' + json.dumps(ORDERS_JSON)
                    + ',"tableObjAfterJson":' + json.dumps(ORDERS_JSON) + ',"timestamp":1795642199}'),
    "INSERT": (6, "orders", HEAD % "orders" + ',"timestamp":1795642199,"files":["file:/w/t/dt=2024-01-01/x"],'
               '"partKeyVals":{"dt":"2024-01-01"}}'),
    "DROP_PARTITION": (10, "orders2", HEAD % "orders2" + ',"tableObjJson":'
                       + json.dumps(ORDERS_JSON.replace('"orders"', '"orders2"'))
                       + ',"timestamp":1795642199,"partitions":[{"dt":"2024-01-01"}]}'),
    "DROP_TABLE": (11, "orders2", HEAD % "orders2" + ',"timestamp":1795642200}'),
}
#: the rename of sales.orders to orders2: the event names the new table, the message's before-object the old
RENAME = (9, "orders2", HEAD % "orders" + ',"tableObjBeforeJson":' + json.dumps(ORDERS_JSON) + ',"tableObjAfterJson":'
          + json.dumps(ORDERS_JSON.replace('"orders"', '"orders2"')) + ',"timestamp":1795642199}')
#: an INSERT into an unpartitioned table
PLAIN_INSERT = (8, "plain", HEAD % "plain" + ',"timestamp":1795642199,"files":["file:/w/plain/x"],"partKeyVals":{}}')
DAY = (("dt", "2024-01-01"),)


def event(kind: str, spec: tuple[int, str | None, str], fmt: str | None = "json-0.2", db: str = "sales"
          ) -> NotificationEvent:
    event_id, table, message = spec
    return NotificationEvent(eventId=event_id, eventTime=1795642199, eventType=kind, dbName=db, tableName=table,
                             message=message, messageFormat=fmt)


@pytest.mark.parametrize(("kind", "partitions", "whole"), [
    ("CREATE_TABLE", (), True), ("ALTER_TABLE", (), True), ("DROP_TABLE", (), True),
    ("ADD_PARTITION", (DAY,), False), ("ALTER_PARTITION", (DAY,), False), ("DROP_PARTITION", (DAY,), False),
    ("INSERT", (DAY,), False),
])
def test_each_event_type_decodes_to_its_table_and_partitions(kind: str, partitions: tuple[object, ...],
                                                             whole: bool) -> None:
    spec = MESSAGES[kind]
    change = decode(event(kind, spec))
    assert change == Change(spec[0], 1795642199, kind, "sales", str(spec[1]), partitions, None)  # type: ignore[arg-type]
    assert change.whole_table is whole


def test_an_insert_without_partitions_is_the_whole_table() -> None:
    change = decode(event("INSERT", PLAIN_INSERT))
    assert (change.table, change.partitions, change.whole_table) == ("plain", (), True)


def test_a_rename_is_read_from_the_table_before() -> None:
    change = decode(event("ALTER_TABLE", RENAME))
    assert (change.db, change.table, change.renamed_from) == ("sales", "orders2", ("sales", "orders"))
    assert change.whole_table


def test_names_are_lower_cased_and_an_alter_in_place_is_no_rename() -> None:
    change = decode(event("ALTER_TABLE", (5, "ORDERS", MESSAGES["ALTER_TABLE"][2]), db="Sales"))
    assert (change.db, change.table, change.renamed_from) == ("sales", "orders", None)


def test_a_message_without_a_format_is_read_as_json() -> None:
    assert decode(event("DROP_TABLE", MESSAGES["DROP_TABLE"], fmt=None)).kind == "DROP_TABLE"


@pytest.mark.parametrize(("kind", "message", "fmt", "says"), [
    ("ADD_PARTITION", "{not json", "json-0.2", "not JSON"),
    ("ADD_PARTITION", "[1, 2]", "json-0.2", "not a JSON object"),
    ("ALTER_PARTITION", HEAD % "orders" + "}", "json-0.2", "unexpected message: KeyError"),
    ("ADD_PARTITION", HEAD % "orders" + ',"partitions":["dt=1"]}', "json-0.2", "unexpected message"),
    ("ALTER_TABLE", HEAD % "orders" + ',"tableObjBeforeJson":"{oops"}', "json-0.2", "unexpected message"),
    ("DROP_TABLE", "H4sIAAAAAAAA", "gzip(json-2.0)", "message format 'gzip(json-2.0)' is not read"),
])
def test_an_unreadable_message_is_a_message_error_naming_the_event(kind: str, message: str, fmt: str,
                                                                   says: str) -> None:
    with pytest.raises(MessageError) as caught:
        decode(event(kind, (77, "orders", message), fmt=fmt))
    text = str(caught.value)
    assert text.startswith(f"event 77 ({kind} of sales.orders): ") and says in text, text
    assert "Traceback" not in text and "File " not in text


def test_only_table_and_partition_events_concern_tables() -> None:
    assert not concerns_tables(event("CREATE_DATABASE", MESSAGES["CREATE_DATABASE"]))
    assert not concerns_tables(NotificationEvent(eventId=3, eventType="CREATE_FUNCTION", dbName="sales",
                                                 tableName=None, message="{}"))
    for kind, spec in MESSAGES.items():
        if kind != "CREATE_DATABASE":
            assert concerns_tables(event(kind, spec)), kind
