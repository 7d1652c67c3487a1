"""A page of events as per-table, per-database and per-function work, and gaps in the log
(waggle.sync.follow.plan); the databases a policy covers (waggle.sync.follow.scope): pure, no I/O."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from waggle.hms.gen.hive_metastore.ttypes import Function, NotificationEvent
from waggle.sync.follow.plan import DatabaseWork, FunctionWork, Scope, Work, gap, plan
from waggle.sync.follow.scope import could_start

SCOPE = Scope.of([r"sales\..*", r"web\.clicks"])


def _message(db: str, table: str, **extra: object) -> str:
    return json.dumps({"server": "", "servicePrincipal": "", "db": db, "table": table, "timestamp": 1, **extra})


def _table_json(db: str, table: str) -> str:
    return json.dumps({"1": {"str": table}, "2": {"str": db}})


def ev(event_id: int, kind: str, table: str, *days: str, db: str = "sales", message: str | None = None,
       before: tuple[str, str] | None = None) -> NotificationEvent:
    """An event as Hive 2.3 writes it (json-0.2): partitions by value of ``dt``; ``before``: a rename's old name."""
    if message is None:
        if kind in ("ADD_PARTITION", "DROP_PARTITION"):
            message = _message(db, table, partitions=[{"dt": d} for d in days])
        elif kind == "ALTER_PARTITION":
            message = _message(db, table, keyValues={"dt": days[0]})
        elif kind == "INSERT":
            message = _message(db, table, files=[], partKeyVals={"dt": days[0]} if days else {})
        elif kind == "ALTER_TABLE":
            old = before or (db, table)
            message = _message(old[0], old[1], tableObjBeforeJson=_table_json(*old),
                               tableObjAfterJson=_table_json(db, table))
        else:
            message = _message(db, table)
    return NotificationEvent(eventId=event_id, eventTime=100 + event_id, eventType=kind, dbName=db,
                             tableName=table, message=message, messageFormat="json-0.2")


def day(*values: str) -> dict[tuple[tuple[str, str], ...], None]:
    return {(("dt", v),): None for v in values}


def summary(works: tuple[Work, ...]) -> list[tuple[object, ...]]:
    return [(w.name, w.whole, list(w.partitions), w.renamed_from, w.events) for w in works]


def test_consecutive_partition_events_of_a_table_are_one_work_with_all_partitions() -> None:
    page = plan([ev(1, "ADD_PARTITION", "orders", "d1", "d2"), ev(2, "ALTER_PARTITION", "orders", "d1"),
                 ev(3, "INSERT", "orders", "d3"), ev(4, "DROP_PARTITION", "orders", "d4"),
                 ev(5, "ADD_PARTITION", "orders", "d2")], SCOPE)
    assert summary(page.work) == [(("sales", "orders"), False, list(day("d1", "d2", "d3", "d4")), None,
                                   [1, 2, 3, 4, 5])]
    assert page.skipped == () and page.unreadable == ()


def test_a_table_event_absorbs_the_partition_events_before_and_after_it() -> None:
    page = plan([ev(1, "ADD_PARTITION", "orders", "d1"), ev(2, "ALTER_TABLE", "orders"),
                 ev(3, "ADD_PARTITION", "orders", "d2"), ev(4, "INSERT", "clicks", db="web")], SCOPE)
    assert summary(page.work) == [(("sales", "orders"), True, [], None, [1, 2, 3]),
                                  (("web", "clicks"), True, [], None, [4])]  # an insert without partitions


def test_tables_keep_the_order_they_first_appear_in() -> None:
    page = plan([ev(1, "ADD_PARTITION", "b", "d1"), ev(2, "CREATE_TABLE", "a"), ev(3, "ADD_PARTITION", "b", "d2"),
                 ev(4, "DROP_TABLE", "c")], SCOPE)
    assert [w.name[1] for w in page.work] == ["b", "a", "c"]
    assert summary(page.work)[0] == (("sales", "b"), False, list(day("d1", "d2")), None, [1, 3])


def test_a_rename_is_the_new_names_work_with_renamed_from_then_the_old_names() -> None:
    page = plan([ev(1, "ADD_PARTITION", "orders", "d1"),
                 ev(2, "ALTER_TABLE", "orders2", before=("sales", "orders")),
                 ev(3, "ADD_PARTITION", "orders2", "d2")], SCOPE)
    assert summary(page.work) == [
        (("sales", "orders2"), True, [], ("sales", "orders"), [2, 3]),
        (("sales", "orders"), True, [], None, [1, 2]),
    ]


def test_a_rename_into_the_scope_and_out_of_it() -> None:
    into = plan([ev(1, "ALTER_TABLE", "orders", before=("tmp", "staging"), db="sales")], SCOPE)
    assert summary(into.work) == [(("sales", "orders"), True, [], ("tmp", "staging"), [1])]
    out = plan([ev(2, "ALTER_TABLE", "old_orders", before=("sales", "orders"), db="archive")], SCOPE)
    assert summary(out.work) == [(("sales", "orders"), True, [], None, [2])]  # the old name's target goes
    assert out.skipped == ()


def test_events_out_of_scope_are_skipped_before_their_messages_are_read() -> None:
    garbage = "\x00 not json at all"
    page = plan([ev(1, "ADD_PARTITION", "other", db="hr", message=garbage),
                 ev(2, "INSERT", "views", db="web", message=garbage),
                 ev(3, "ADD_PARTITION", "orders", "d1")], SCOPE)
    assert [(s.event_id, s.kind, s.reason) for s in page.skipped] == [
        (1, "ADD_PARTITION", "out of scope"), (2, "INSERT", "out of scope")]
    assert page.unreadable == () and [w.name for w in page.work] == [("sales", "orders")]


def test_an_alter_table_out_of_scope_with_garbage_is_skipped_and_one_renamed_elsewhere_too() -> None:
    page = plan([ev(1, "ALTER_TABLE", "other", db="hr", message="{oops"),
                 ev(2, "ALTER_TABLE", "b", before=("hr", "a"), db="hr")], SCOPE)
    assert [(s.event_id, s.reason) for s in page.skipped] == [(1, "out of scope"), (2, "out of scope")]
    assert page.work == ()


# -- databases and functions --------------------------------------------------------------------------------------
def _function_json(db: str, name: str) -> str:
    """A Function in Thrift's JSON encoding (TJSONProtocol), as CREATE_FUNCTION's ``functionObjJson`` holds it."""
    from thrift.protocol.TJSONProtocol import TJSONProtocolFactory
    from thrift.TSerialization import serialize

    return serialize(Function(functionName=name, dbName=db, className="com.example.Udf", ownerName="alice",
                              ownerType=1, createTime=1, functionType=1, resourceUris=[]),
                     TJSONProtocolFactory()).decode()


def dbev(event_id: int, kind: str, db: str = "sales", function: str | None = None, message: str | None = None,
         fmt: str = "json-0.2") -> NotificationEvent:
    """A database or function event as Hive writes it (no table)."""
    if message is None:
        extra: dict[str, object] = {}
        if kind == "CREATE_FUNCTION":
            extra["functionObjJson"] = _function_json(db, function or "")
        elif kind == "DROP_FUNCTION":
            extra["functionName"] = function
        message = json.dumps({"server": "", "servicePrincipal": "", "db": db, "timestamp": 1, **extra})
    if fmt.startswith("gzip"):
        message = base64.b64encode(gzip.compress(message.encode(), mtime=0)).decode()
    return NotificationEvent(eventId=event_id, eventTime=100 + event_id, eventType=kind, dbName=db, tableName=None,
                             message=message, messageFormat=fmt)


def test_a_covered_databases_events_are_one_work_for_it_in_the_order_they_first_appear() -> None:
    page = plan([dbev(1, "CREATE_DATABASE", "web"), dbev(2, "CREATE_DATABASE"), dbev(3, "ALTER_DATABASE"),
                 dbev(4, "DROP_DATABASE", "web"), dbev(5, "DROP_DATABASE", "SALES")], SCOPE)
    assert page.databases == (DatabaseWork("web", [1, 4]), DatabaseWork("sales", [2, 3, 5]))
    assert page.work == () and page.functions == () and page.skipped == () and page.unreadable == ()


def test_a_functions_events_are_one_work_for_it() -> None:
    page = plan([dbev(1, "CREATE_FUNCTION", function="Upper"), dbev(2, "CREATE_FUNCTION", "web", function="g"),
                 dbev(3, "DROP_FUNCTION", function="UPPER"), dbev(4, "CREATE_FUNCTION", function="upper")], SCOPE)
    assert page.functions == (FunctionWork("sales", "upper", [1, 3, 4]), FunctionWork("web", "g", [2]))
    assert page.databases == () and page.work == ()


def test_gzip_json_2_messages_plan_as_json_0_2_ones() -> None:
    events = [dbev(1, "CREATE_DATABASE"), dbev(2, "CREATE_FUNCTION", function="f"), dbev(3, "DROP_FUNCTION",
                                                                                         function="f")]
    gzipped = [dbev(e.eventId, e.eventType, function="f", message=e.message, fmt="gzip(json-2.0)") for e in events]
    partitions = ev(4, "ADD_PARTITION", "orders", "d1")
    partitions.message = base64.b64encode(gzip.compress(partitions.message.encode(), mtime=0)).decode()
    partitions.messageFormat = "gzip(json-2.0)"
    page = plan([*gzipped, partitions], SCOPE)
    assert page == plan([*events, ev(4, "ADD_PARTITION", "orders", "d1")], SCOPE)
    assert page.unreadable == () and page.databases and page.functions and page.work


def test_database_and_function_events_out_of_scope_are_skipped_before_their_messages_are_read() -> None:
    garbage = "\x00 not json"
    page = plan([dbev(1, "CREATE_DATABASE", "hr", message=garbage), dbev(2, "DROP_FUNCTION", "hr", message=garbage),
                 dbev(3, "CREATE_DATABASE", "webby", message=garbage)], SCOPE)
    assert [(s.event_id, s.reason) for s in page.skipped] == [(1, "out of scope"), (2, "out of scope"),
                                                                (3, "out of scope")]
    assert page.databases == () and page.functions == () and page.unreadable == ()


def test_an_unreadable_database_or_function_event_in_scope_names_its_database() -> None:
    page = plan([dbev(7, "DROP_FUNCTION", message='{"db": "sales"}'), dbev(8, "CREATE_DATABASE", "web")], SCOPE)
    ((skipped, name),) = page.unreadable
    assert (skipped.event_id, skipped.kind, name) == (7, "DROP_FUNCTION", ("sales", ""))
    assert skipped.reason.startswith("event 7 (DROP_FUNCTION of sales): unexpected message: KeyError")
    assert page.databases == (DatabaseWork("web", [8]),)


def test_other_events_are_not_table_database_or_function_events() -> None:
    page = plan([NotificationEvent(eventId=1, eventType="CREATE_INDEX", dbName="sales", message="{}"),
                 NotificationEvent(eventId=2, eventType="OPEN_TXN", dbName=None, message="{}")], SCOPE)
    assert [(s.event_id, s.reason) for s in page.skipped] == [(1, "not a table event"), (2, "not a table event")]


@pytest.mark.parametrize(("pattern", "covered", "not_covered"), [
    (r"sales\..*", ["sales", "SALES"], ["sale", "salesx", "xsales"]),
    (r"sales.*", ["sales", "salesx", "sales_2024"], ["sale", "web"]),  # a regex: `.*` reads on past the dot
    (r"sales.order_.*", ["sales"], ["salesx", "sale", "orders"]),
    (r"web\.clicks", ["web"], ["webx", "we"]),
    (r"fl_.*\..*", ["fl_", "fl_a", "FL_B"], ["fl", "xfl_a"]),
    (r"(hr|fin)_\d+\.t", ["hr_12", "fin_3"], ["hr_x", "hr_", "ops_1"]),
    (r"^x[^y]z\.a$", ["xaz"], ["xyz", "xa"]),
    (r"(?=q)qq\..*", ["qq"], ["other"]),  # a look-ahead is not judged: what follows it is
    (r"a{2,3}\.t", ["aa", "aaa"], ["a", "aaaa"]),
    (r"(?:s|t)\.(x|y)", ["s", "t"], ["u"]),
])
def test_a_pattern_covers_the_databases_it_can_name_a_table_of(pattern: str, covered: list[str],
                                                                 not_covered: list[str]) -> None:
    scope = Scope.of([pattern])
    assert [db for db in covered if not scope.covers_database(db)] == []
    assert [db for db in not_covered if scope.covers_database(db)] == []


def test_could_start_reads_a_prefix_of_a_match() -> None:
    import re

    assert could_start(re.compile(r"ab+c"), "abbb") and not could_start(re.compile(r"ab+c"), "abd")
    assert could_start(re.compile(r"(a)\1"), "ax")  # a back reference is not judged: taken as matching


def test_an_unreadable_message_in_scope_names_its_event_and_table_and_the_rest_goes_on() -> None:
    page = plan([ev(7, "ADD_PARTITION", "orders", message="{broken"), ev(8, "ADD_PARTITION", "lines", "d1")],
                SCOPE)
    ((skipped, name),) = page.unreadable
    assert (skipped.event_id, skipped.kind, name) == (7, "ADD_PARTITION", ("sales", "orders"))
    assert skipped.reason.startswith("event 7 (ADD_PARTITION of sales.orders): the message is not JSON")
    assert [w.name for w in page.work] == [("sales", "lines")]


def test_scope_patterns_match_the_whole_name_case_insensitively() -> None:
    assert SCOPE.covers("SALES", "Orders") and SCOPE.covers("web", "clicks")
    assert not SCOPE.covers("web", "clicks2") and not SCOPE.covers("xsales", "orders")


# -- gaps --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("checkpoint", "first_read", "current", "expected"), [
    (10, 11, 15, None),  # the next event is the first read
    (10, None, 10, None),  # nothing new
    (0, 1, 1, None),
    (10, 14, 20, "events 11-13 were purged from the source before they were read"),
    (10, None, 12, "events 11-12 were purged from the source before they were read"),
    (10, None, 4, "the source's notification log restarted: its newest event is 4, the checkpoint 10"),
    (10, 3, 4, "the source's notification log restarted: its newest event is 4, the checkpoint 10"),
])
def test_gap(checkpoint: int, first_read: int | None, current: int, expected: str | None) -> None:
    assert gap(checkpoint, first_read, current) == expected
