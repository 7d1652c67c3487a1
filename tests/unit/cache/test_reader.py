"""One read of a member's notification log (LogReader.read_once) against a log held in memory: what its sinks
hear, and how many calls it costs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.federation import loaded_federation
from waggle.cache.events import Drop
from waggle.cache.reader import LogReader
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.gen.hive_metastore.ttypes import (
    CurrentNotificationEventId,
    NotificationEvent,
    NotificationEventResponse,
)
from waggle.upstream.client import UpstreamError
from waggle.upstream.log_calls import PAGE


class Log:
    """A metastore's log as the reader's connection answers it: ``events`` by id, ``newest`` the current id."""

    def __init__(self) -> None:
        self.events: dict[int, NotificationEvent] = {}
        self.newest = 0
        self.calls: list[str] = []
        self.fail = False

    def add(self, event_id: int, kind: str = "ALTER_PARTITION", db: str = "sales", table: str = "orders") -> None:
        self.events[event_id] = NotificationEvent(eventId=event_id, eventTime=0, eventType=kind, dbName=db,
                                                  tableName=table, message="{}")
        self.newest = max(self.newest, event_id)

    def invoke(self, name: str, args: Any, result_class: type, seqid: int = 0, timeout: float | None = None) -> Any:
        self.calls.append(name)
        if self.fail:
            raise UpstreamError("lake", "did not answer within 10s")
        if name == "get_current_notificationEventId":
            return T.get_current_notificationEventId_result(success=CurrentNotificationEventId(self.newest))
        after, most = args.rqst.lastEvent, args.rqst.maxEvents
        found = [self.events[i] for i in sorted(self.events) if i > after][:most]
        return T.get_next_notification_result(success=NotificationEventResponse(found))

    def close(self) -> None:
        pass


class Heard:
    def __init__(self) -> None:
        self.said: list[tuple[Any, ...]] = []

    def read_through(self, member: str, as_of: float, drops: Any, newest_event: float | None = None) -> None:
        self.said.append(("through", as_of, tuple(drops)))

    def unreadable(self, member: str, cause: str) -> None:
        self.said.append(("unreadable", cause))


@pytest.fixture
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[LogReader, Log, Heard]:
    fed = loaded_federation(tmp_path_factory, "primary-meta-store:\n  name: lake\n  remote-meta-store-uris: "
                                              "thrift://h:1\n  cache: events\n")
    log, heard = Log(), Heard()
    reader = LogReader(fed.primary, lambda: log, 5.0, [heard], clock=lambda: 100.0)  # type: ignore[arg-type,return-value]
    return reader, log, heard


def test_a_first_read_starts_from_the_newest_event_and_forgets_what_was_held(setup: Any) -> None:
    reader, log, heard = setup
    log.add(7)
    assert reader.read_once(100.0)
    assert heard.said == [("unreadable", "restart"), ("through", 100.0, ())]
    assert log.calls == ["get_current_notificationEventId"]  # the events before it are not read


def test_while_nothing_changes_a_read_costs_one_call(setup: Any) -> None:
    reader, log, _ = setup
    reader.read_once(100.0)
    log.calls.clear()
    for _ in range(3):
        assert reader.read_once(100.0)
    assert log.calls == ["get_current_notificationEventId"] * 3


def test_new_events_are_forgotten_and_the_log_read_through(setup: Any) -> None:
    reader, log, heard = setup
    reader.read_once(100.0)
    log.add(1)
    log.add(2, "DROP_TABLE", "web", "clicks")
    heard.said.clear()
    assert reader.read_once(101.0)
    assert heard.said == [("through", 101.0, (Drop("sales", "orders"), Drop("web", "clicks")))]


def test_a_full_page_is_read_again_at_once_and_not_yet_known_true(setup: Any) -> None:
    reader, log, heard = setup
    reader.read_once(100.0)
    for i in range(1, PAGE + 6):
        log.add(i)
    heard.said.clear()
    assert not reader.read_once(101.0)  # more to read
    assert heard.said[-1][:2] == ("through", float("-inf"))
    assert reader.read_once(101.5)
    assert heard.said[-1][:2] == ("through", 101.5)


def test_a_log_purged_past_the_last_event_read_is_a_gap_at_once(setup: Any) -> None:
    reader, log, heard = setup
    log.add(1)
    log.add(2)
    reader.read_once(100.0)  # read to event 2
    log.add(3)
    log.add(4)
    for gone in (2, 3):
        del log.events[gone]  # purged before the reader read 3
    heard.said.clear()
    reader.read_once(101.0)
    assert ("unreadable", "gap") in heard.said


def test_a_hole_whose_last_event_is_still_held_is_not_a_gap(setup: Any) -> None:
    reader, log, heard = setup
    log.add(1)
    log.add(2)
    reader.read_once(100.0)
    log.add(4)  # 3 handed out, not committed yet
    heard.said.clear()
    reader.read_once(101.0)
    assert ("unreadable", "gap") not in heard.said
    assert heard.said[-1] == ("through", 101.0, (Drop("sales", "orders"),))


def test_a_log_that_started_again_is_a_gap(setup: Any) -> None:
    reader, log, heard = setup
    log.add(50)
    reader.read_once(100.0)
    log.events.clear()
    log.newest = 0
    log.add(1)
    heard.said.clear()
    reader.read_once(101.0)
    assert heard.said[0] == ("unreadable", "gap")


def test_a_failed_read_is_said_and_the_next_one_starts_over(setup: Any) -> None:
    reader, log, heard = setup
    reader.read_once(100.0)
    log.fail = True
    with pytest.raises(UpstreamError):
        reader.read_once(101.0)
    reader._lost("down")  # what the reader's loop does with it
    assert heard.said[-1] == ("unreadable", "unreadable")
    log.fail = False
    heard.said.clear()
    assert reader.read_once(102.0)
    assert heard.said == [("unreadable", "restart"), ("through", 102.0, ())]
