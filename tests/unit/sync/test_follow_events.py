"""Notification events read as changes (waggle.sync.follow.events): messages in Hive 2.3's ``json-0.2`` shape,
as a local metastore with the notification listener writes them (``get_next_notification``), with the Thrift
JSON objects inside cut down to the fields that name the table; and the same messages in Hive 4's
``gzip(json-2.0)`` (base64 of the gzipped JSON), which no local metastore writes."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from waggle.hms.gen.hive_metastore.ttypes import Function, NotificationEvent, ResourceUri
from waggle.sync.follow.events import (
    Change,
    MessageError,
    concerns_database,
    concerns_function,
    concerns_tables,
    decode,
)

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
#: a function as Hive's JSONMessageFactory writes it (a Thrift Function in TJSONProtocol), and its events
UPPER_JSON = ('{"1":{"str":"Upper"},"2":{"str":"sales"},"3":{"str":"com.example.Upper"},"4":{"str":"alice"},'
              '"5":{"i32":1},"6":{"i32":1795642198},"7":{"i32":1},"8":{"lst":["rec",1,{"1":{"i32":1},'
              '"2":{"str":"file:/jars/udf.jar"}}]}}')
FUNCTIONS = {
    "CREATE_FUNCTION": (12, None, '{"server":"","servicePrincipal":"","db":"sales","functionObjJson":'
                        + json.dumps(UPPER_JSON) + ',"timestamp":1795642198}'),
    "DROP_FUNCTION": (13, None, '{"server":"","servicePrincipal":"","db":"sales","functionName":"Upper",'
                      '"timestamp":1795642199}'),
}
#: database events as Hive 2.3 (create, drop) and Hive 3 (alter, with the database before and after) write them
DATABASES = {
    "CREATE_DATABASE": MESSAGES["CREATE_DATABASE"],
    "ALTER_DATABASE": (14, None, '{"server":"","servicePrincipal":"","db":"sales","dbObjBeforeJson":'
                       + json.dumps('{"1":{"str":"sales"},"2":{"str":""}}') + ',"dbObjAfterJson":'
                       + json.dumps('{"1":{"str":"sales"},"2":{"str":"orders and lines"}}')
                       + ',"timestamp":1795642199}'),
    "DROP_DATABASE": (15, None, '{"server":"","servicePrincipal":"","db":"sales","timestamp":1795642200}'),
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
    ("DROP_TABLE", "H4sIAAAAAAAA", "gzip(json-2.0)", "the message is not base64 of gzipped JSON (gzip(json-2.0))"),
    ("DROP_TABLE", "not base64 at all!", "gzip(json-2.0)", "the message is not base64 of gzipped JSON"),
    ("DROP_TABLE", base64.b64encode(gzip.compress(b"{cut", mtime=0)).decode(), "gzip(json-2.0)",
     "the message is not JSON"),
    ("DROP_TABLE", "{}", "avro", "message format 'avro' is not read (json-0.2 and gzip(json-2.0) are)"),
])
def test_an_unreadable_message_is_a_message_error_naming_the_event(kind: str, message: str, fmt: str,
                                                                   says: str) -> None:
    with pytest.raises(MessageError) as caught:
        decode(event(kind, (77, "orders", message), fmt=fmt))
    text = str(caught.value)
    assert text.startswith(f"event 77 ({kind} of sales.orders): ") and says in text, text
    assert "Traceback" not in text and "File " not in text


# -- Hive 4's gzip(json-2.0) --------------------------------------------------------------------------------------
def gzipped(text: str) -> str:
    """A message as Hive 4's GzipJSONMessageEncoder writes it: the JSON gzipped, then base64."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")


@pytest.mark.parametrize("kind", [*MESSAGES, *FUNCTIONS, "ALTER_DATABASE", "DROP_DATABASE", "RENAME", "PLAIN"])
def test_a_gzip_json_2_message_decodes_as_its_json_0_2_twin(kind: str) -> None:
    spec = {**MESSAGES, **FUNCTIONS, **DATABASES, "RENAME": RENAME, "PLAIN": PLAIN_INSERT}[kind]
    kind = {"RENAME": "ALTER_TABLE", "PLAIN": "INSERT"}.get(kind, kind)
    body = gzipped(spec[2])
    assert body.startswith("H4sI")
    assert decode(event(kind, (spec[0], spec[1], body), fmt="gzip(json-2.0)")) == decode(event(kind, spec))


def test_a_gzipped_body_without_a_format_is_read_as_gzip_json() -> None:
    spec = MESSAGES["ADD_PARTITION"]
    change = decode(event("ADD_PARTITION", (spec[0], spec[1], gzipped(spec[2])), fmt=None))
    assert change.partitions == (DAY,)


# -- databases and functions -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(DATABASES))
def test_a_database_event_names_its_database_alone(kind: str) -> None:
    spec = DATABASES[kind]
    change = decode(event(kind, spec, db="Sales"))
    assert change == Change(spec[0], 1795642199, kind, "sales", "")
    assert (change.function, change.whole_table) == (None, False)


def test_create_function_is_read_with_thrifts_json_protocol() -> None:
    change = decode(event("CREATE_FUNCTION", FUNCTIONS["CREATE_FUNCTION"]))
    assert (change.kind, change.db, change.table, change.function) == ("CREATE_FUNCTION", "sales", "", "upper")
    assert change.function_obj == Function(
        functionName="Upper", dbName="sales", className="com.example.Upper", ownerName="alice", ownerType=1,
        createTime=1795642198, functionType=1, resourceUris=[ResourceUri(resourceType=1, uri="file:/jars/udf.jar")])


def test_drop_function_is_read_by_its_name() -> None:
    change = decode(event("DROP_FUNCTION", FUNCTIONS["DROP_FUNCTION"]))
    assert (change.kind, change.db, change.function, change.function_obj) == ("DROP_FUNCTION", "sales", "upper", None)


@pytest.mark.parametrize(("kind", "message", "says"), [
    ("CREATE_FUNCTION", '{"db":"sales"}', "unexpected message: KeyError: 'functionObjJson'"),
    ("CREATE_FUNCTION", '{"db":"sales","functionObjJson":"{\\"1\\":"}', "not a Function in Thrift's JSON"),
    ("CREATE_FUNCTION", '{"db":"sales","functionObjJson":{"1":{"str":"f"}}}', "expected a Function"),
    ("DROP_FUNCTION", '{"db":"sales"}', "unexpected message: KeyError: 'functionName'"),
    ("DROP_FUNCTION", '{"db":"sales","functionName":""}', "expected a function name"),
    ("CREATE_DATABASE", "{oops", "the message is not JSON"),
])
def test_an_unreadable_database_or_function_message_names_the_event_and_database(kind: str, message: str,
                                                                                   says: str) -> None:
    with pytest.raises(MessageError) as caught:
        decode(event(kind, (78, None, message)))
    text = str(caught.value)
    assert text.startswith(f"event 78 ({kind} of sales): ") and says in text, text


def test_database_and_function_events_are_told_apart() -> None:
    for kind, spec in DATABASES.items():
        assert concerns_database(event(kind, spec)) and not concerns_function(event(kind, spec))
        assert not concerns_tables(event(kind, spec))
    for kind, spec in FUNCTIONS.items():
        assert concerns_function(event(kind, spec)) and not concerns_database(event(kind, spec))
    assert not concerns_database(event("CREATE_TABLE", MESSAGES["CREATE_TABLE"]))
    assert not concerns_database(NotificationEvent(eventId=1, eventType="CREATE_DATABASE", dbName=None, message=""))


def test_only_table_and_partition_events_concern_tables() -> None:
    assert not concerns_tables(event("CREATE_DATABASE", MESSAGES["CREATE_DATABASE"]))
    assert not concerns_tables(NotificationEvent(eventId=3, eventType="CREATE_FUNCTION", dbName="sales",
                                                 tableName=None, message="{}"))
    for kind, spec in MESSAGES.items():
        if kind != "CREATE_DATABASE":
            assert concerns_tables(event(kind, spec)), kind
