"""What a notification event makes the cache forget, and how far a member's log has been read (waggle.cache.events).
Pure: events are the generated NotificationEvent values, the clock a number."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from waggle.cache.events import EVERYTHING, HOLE_SECONDS, Cursor, Drop, drops
from waggle.hms.gen.hive_metastore.ttypes import NotificationEvent

NOW = 5000.0


def json02(**fields: object) -> str:
    return json.dumps({"server": "thrift://h:9083", "servicePrincipal": "", "timestamp": 1, **fields})


def gzip20(**fields: object) -> str:
    """A Hive 4 message: base64 of the gzipped JSON."""
    return base64.b64encode(gzip.compress(json02(**fields).encode(), mtime=0)).decode("ascii")


def event(n: int, kind: str = "CREATE_TABLE", db: str | None = "sales", table: str | None = "orders"
          ) -> NotificationEvent:
    return NotificationEvent(eventId=n, eventTime=1700000000 + n, eventType=kind, dbName=db, tableName=table,
                             message=json02(db=db, table=table), messageFormat="json-0.2")


# -- what an event drops -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["CREATE_TABLE", "ADD_PARTITION", "DROP_PARTITION", "ALTER_PARTITION",
                                  "INSERT", "DROP_TABLE"])
def test_a_table_event_drops_its_table(kind: str) -> None:
    assert drops(kind, "sales", "orders", json02(db="sales", table="orders")) == (Drop("sales", "orders"),)


def test_a_database_event_drops_its_database() -> None:
    assert drops("CREATE_DATABASE", "sales", None, json02(db="sales")) == (Drop("sales", None),)
    assert drops("DROP_DATABASE", "sales", "", "{}") == (Drop("sales"),)  # an empty table name is none


def test_names_are_lower_cased() -> None:
    assert drops("add_partition", "Sales", "ORDERS", None) == (Drop("sales", "orders"),)
    assert drops("CREATE_DATABASE", "SALES", None, None) == (Drop("sales"),)


@pytest.mark.parametrize("kind", ["OPEN_TXN", "COMMIT_TXN", "ABORT_TXN", "ALLOC_WRITE_ID"])
def test_a_transactions_bookkeeping_with_no_database_drops_nothing(kind: str) -> None:
    assert drops(kind, None, None, "{}") == ()
    assert drops(kind, "", "", "{}") == ()


def test_an_event_waggle_cannot_place_drops_the_whole_member() -> None:
    assert Drop(None, None) == EVERYTHING
    assert drops("SOMETHING_NEW", None, None, "{}") == (Drop(None),)
    assert drops("CREATE_CATALOG", "", None, "{}") == (EVERYTHING,)


def test_a_rename_within_a_database_drops_the_new_and_the_old_table() -> None:
    message = json02(db="sales", table="orders_old", tableObjBeforeJson="{}", tableObjAfterJson="{}")
    assert drops("ALTER_TABLE", "sales", "orders", message, "json-0.2") == (
        Drop("sales", "orders"), Drop("sales", "orders_old"))


def test_a_rename_across_databases_drops_both_tables_in_both_databases() -> None:
    message = json02(db="Staging", table="Orders_Tmp")
    assert drops("ALTER_TABLE", "Sales", "Orders", message, "json-0.2") == (
        Drop("sales", "orders"), Drop("staging", "orders_tmp"))


def test_a_hive_4_gzip_message_is_read() -> None:
    message = gzip20(db="STAGING", table="orders_tmp")
    assert drops("ALTER_TABLE", "sales", "orders", message, "gzip(json-2.0)") == (
        Drop("sales", "orders"), Drop("staging", "orders_tmp"))
    # a message that is not JSON text is read as gzip even when its format is not given
    assert drops("ALTER_TABLE", "sales", "orders", message) == (Drop("sales", "orders"), Drop("staging", "orders_tmp"))


def test_an_alter_that_is_no_rename_drops_its_table_alone() -> None:
    assert drops("ALTER_TABLE", "sales", "orders", json02(db="SALES", table="Orders"), "json-0.2") == (
        Drop("sales", "orders"),)
    assert drops("ALTER_TABLE", "sales", "orders", gzip20(db="sales", table="orders"), "gzip(json-2.0)") == (
        Drop("sales", "orders"),)


@pytest.mark.parametrize("message, fmt", [
    (None, "json-0.2"),
    ("", "json-0.2"),
    ("{not json", "json-0.2"),
    ("[1, 2]", "json-0.2"),  # JSON, but not an object
    ("bm90IGd6aXA=", "gzip(json-2.0)"),  # base64 of "not gzip"
    ("!!!", "gzip(json-2.0)"),
    (base64.b64encode(gzip.compress(b"{broken", mtime=0)).decode(), "gzip(json-2.0)"),  # mtime 0: one test id
])
def test_a_rename_whose_message_cannot_be_read_drops_the_whole_member(message: str | None, fmt: str) -> None:
    assert drops("ALTER_TABLE", "sales", "orders", message, fmt) == (EVERYTHING,)


def test_a_database_rename_drops_both_databases() -> None:
    assert drops("ALTER_DATABASE", "sales2", None, json02(db="Sales"), "json-0.2") == (Drop("sales2"), Drop("sales"))
    assert drops("ALTER_DATABASE", "sales", None, json02(db="sales"), "json-0.2") == (Drop("sales"),)
    assert drops("ALTER_DATABASE", "sales", None, "garbage", "json-0.2") == (EVERYTHING,)


# -- the cursor ----------------------------------------------------------------------------------------------------
def ids(events: tuple[object, ...]) -> list[int]:
    return [e.eventId for e in events]  # type: ignore[attr-defined]


def test_contiguous_pages_advance_the_cursor() -> None:
    cursor = Cursor(4)
    read = cursor.take(7, [event(5), event(6), event(7)], NOW)
    assert ids(read.events) == [5, 6, 7] and read.gap is None
    assert (cursor.last, cursor.ahead, cursor.hole_since) == (7, frozenset(), None)
    read = cursor.take(9, [event(8), event(9)], NOW + 0.5)
    assert ids(read.events) == [8, 9] and read.gap is None and cursor.last == 9
    read = cursor.take(9, [], NOW + 1)  # nothing new
    assert read.events == () and read.gap is None and cursor.last == 9


def test_events_already_applied_are_not_applied_again() -> None:
    cursor = Cursor(4)
    cursor.take(6, [event(5), event(6)], NOW)
    read = cursor.take(7, [event(5), event(6), event(7)], NOW)  # a page that reaches back
    assert ids(read.events) == [7]


def test_a_log_that_started_again_is_a_gap_and_the_cursor_restarts_there() -> None:
    cursor = Cursor(100)
    read = cursor.take(3, [], NOW)
    assert read.gap is not None and "started again" in read.gap
    assert read.events == ()
    assert (cursor.last, cursor.ahead) == (3, frozenset())
    read = cursor.take(4, [event(4)], NOW)  # read on from there
    assert ids(read.events) == [4] and read.gap is None and cursor.last == 4


def test_a_hole_is_waited_for_and_each_event_applied_once() -> None:
    cursor = Cursor(4)
    read = cursor.take(7, [event(5), event(7)], NOW)  # 6 was handed out but is not committed yet
    assert ids(read.events) == [5, 7] and read.gap is None
    assert (cursor.last, cursor.ahead, cursor.hole_since) == (5, frozenset({7}), NOW)
    read = cursor.take(7, [event(7)], NOW + 1)  # asked again from 5: 7 again, 6 still missing
    assert read.events == () and read.gap is None
    assert (cursor.last, cursor.ahead, cursor.hole_since) == (5, frozenset({7}), NOW)  # waited since the first
    read = cursor.take(8, [event(6), event(7), event(8)], NOW + 2)  # 6 committed
    assert ids(read.events) == [6, 8] and read.gap is None
    assert (cursor.last, cursor.ahead, cursor.hole_since) == (8, frozenset(), None)


def test_a_hole_that_never_fills_is_a_gap() -> None:
    cursor = Cursor(4)
    cursor.take(7, [event(5), event(7)], NOW)
    read = cursor.take(7, [event(7)], NOW + HOLE_SECONDS - 0.1)
    assert read.gap is None and cursor.last == 5
    read = cursor.take(7, [event(7)], NOW + HOLE_SECONDS)
    assert read.gap is not None and "6-6" in read.gap
    assert read.events == ()  # 7 was applied already
    assert (cursor.last, cursor.ahead, cursor.hole_since) == (7, frozenset(), None)
    read = cursor.take(8, [event(8)], NOW + HOLE_SECONDS + 1)  # read on past it
    assert ids(read.events) == [8] and read.gap is None


def test_a_hole_ahead_of_a_page_is_waited_for_from_its_first_sight() -> None:
    cursor = Cursor(4)
    read = cursor.take(9, [event(5), event(8), event(9)], NOW)
    assert ids(read.events) == [5, 8, 9]
    assert (cursor.last, cursor.ahead) == (5, frozenset({8, 9}))
    read = cursor.take(9, [event(6), event(8), event(9)], NOW + 3)  # 6 came, 7 has not
    assert ids(read.events) == [6]
    assert (cursor.last, cursor.ahead) == (6, frozenset({8, 9}))
    read = cursor.take(9, [event(7), event(8), event(9)], NOW + 4)
    assert ids(read.events) == [7] and cursor.last == 9 and cursor.ahead == frozenset()
