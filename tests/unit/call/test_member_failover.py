"""A metastore that dies or hangs is known in the call that finds it: the call is planned again with the member
down (a copy answers), waiting calls are let go once a check fails, a write left waiting says its outcome is
unknown, and a member down at start is known before waggle serves. Driven through waggle's runtime and driver,
against in-memory metastores (:mod:`tests.support.memory_metastore`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import gevent
import pytest
import structlog

from tests.support.memory_metastore import Harness, MemoryMetastore, failure, harnesses
from tests.support.waits import wait_until
from waggle.common import metrics
from waggle.copies.catalog import Copies, Copy
from waggle.copies.serve import SERVED_FROM, SERVED_REASON
from waggle.hms.gen.hive_metastore.ttypes import MetaException, Table
from waggle.synced import objects as o
from waggle.upstream.client import Lost, UpstreamError
from waggle.upstream.deadlines import Deadlines

#: a PREFIXED member ``lake`` whose reads come from copies while it is down, writable in ``ice``
LAKE = {"database-prefix": "lake_", "read-from-copies": "when-down",
        "access-control-type": "READ_AND_WRITE_ON_DATABASE_WHITELIST", "writable-database-white-list": ["ice"]}
#: quick checks: a call that waits 0.3 s has its member checked, and a check waits 0.3 s for its answer
QUICK = {"hung-member-check-after": 0.3, "health-check-timeout": 300, "copies-refresh-seconds": 3600}


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    with harnesses(tmp_path) as build:
        yield build


def lake_with_copy(make: Callable[..., Harness], **server: Any) -> tuple[Harness, MemoryMetastore, MemoryMetastore]:
    """The primary ``main`` holds ``ice_copy.t2``, the copy of lake's ``ice.t2``; lake also has ``ice.own``,
    which has no copy."""
    main = MemoryMetastore("main").add_database("default", "ice_copy").add_table("ice_copy", "t2")
    lake = MemoryMetastore("lake").add_database("ice").add_table("ice", "t2", "own")
    h = make((main, {}), [(lake, LAKE)], server={**QUICK, **server})
    copy = Copy("lake", "ice", "t2", "ice_copy", "t2", o.COPY, time.time() - 5)
    h.runtime.routes = replace(h.runtime.routes, copies=Copies.of([copy]))
    return h, main, lake


def served_from_copy(table: Table) -> bool:
    return (table.parameters or {}).get(SERVED_FROM) == "ice_copy.t2" and table.parameters[SERVED_REASON] == "down"


def test_a_read_whose_member_is_found_gone_is_answered_from_the_copy_in_that_call(make):
    h, _main, lake = lake_with_copy(make)
    client = h.client()
    table = client.ok("get_table", dbname="lake_ice", tbl_name="t2")
    assert not served_from_copy(table)  # lake is up: lake answers
    lake.close()  # lake dies: its connections close, and new ones are refused
    lake.down = True
    with structlog.testing.capture_logs() as logs:
        table = client.ok("get_table", dbname="lake_ice", tbl_name="t2")
    assert served_from_copy(table) and table.dbName == "lake_ice"
    assert not h.runtime.health.is_up("lake")
    down = [e for e in logs if e["event"] == "metastore.down"]
    assert len(down) == 1 and "Connection refused" in down[0]["reason"]
    assert any(e["event"] == "copies.serving" and e["reason"] == "down" for e in logs)  # said at once
    # a table without a copy: the member's down message, at once
    error = failure(client.call("get_table", dbname="lake_ice", tbl_name="own"))
    assert isinstance(error, MetaException) and error.message.startswith("metastore 'lake' is unavailable since ")


def test_a_member_found_gone_is_checked_again_after_down_member_retry_not_at_once(make):
    h, _main, lake = lake_with_copy(make, **{"down-member-retry": 1})
    lake.down = True
    checks = lake.status_checks
    found = time.monotonic()
    h.runtime.health.found_down("lake", "is unreachable: refused")
    assert not h.runtime.health.is_up("lake")
    lake.down = False  # back at once: only the next check, a down-member-retry later, finds it up
    wait_until(lambda: h.runtime.health.is_up("lake"), timeout=3)
    assert time.monotonic() - found >= 0.9  # the refusal is news enough: not checked again at once
    assert lake.status_checks == checks + 1


def test_a_read_whose_connection_drops_is_sent_once_more(make):
    h, _main, lake = lake_with_copy(make)
    client = h.client()
    client.ok("get_table", dbname="lake_ice", tbl_name="own")  # an idle pooled connection to lake
    lake.delay["get_table"] = 0.3
    killer = gevent.spawn_later(0.1, lake.close)  # closes the connection under the call (lake itself is fine)
    table = client.ok("get_table", dbname="lake_ice", tbl_name="own")
    killer.join()
    assert table.tableName == "own" and not served_from_copy(table)
    assert h.runtime.health.is_up("lake")
    assert [c.method for c in lake.calls].count("get_table") == 3  # the first, the dropped one, and its resend


def test_a_read_whose_connection_drops_twice_finds_its_member_down_and_is_answered_from_the_copy(make):
    h, _main, lake = lake_with_copy(make)
    client = h.client()
    client.ok("get_table", dbname="lake_ice", tbl_name="t2")
    lake.delay["get_table"] = 0.3
    killers = [gevent.spawn_later(0.1, lake.close), gevent.spawn_later(0.3, lake.close)]  # the read, and its resend
    table = client.ok("get_table", dbname="lake_ice", tbl_name="t2")
    gevent.joinall(killers)
    assert served_from_copy(table) and not h.runtime.health.is_up("lake")
    assert [c.method for c in lake.calls].count("get_table") == 3


def test_a_hung_member_lets_its_waiting_calls_go_once_a_check_fails(make):
    h, _main, lake = lake_with_copy(make)
    readers = [h.client() for _ in range(2)]
    writer = h.client()
    for client in (*readers, writer):
        client.ok("get_table", dbname="lake_ice", tbl_name="own")
    lake.delay.update(get_table=30.0, create_table=30.0, getStatus=30.0)  # lake hangs
    released, again = _count("waggle_released_calls_total"), _count("waggle_calls_planned_again_total", "released")
    started = time.monotonic()
    with structlog.testing.capture_logs() as logs:
        copied = gevent.spawn(readers[0].call, "get_table", dbname="lake_ice", tbl_name="t2")
        uncopied = gevent.spawn(readers[1].call, "get_table", dbname="lake_ice", tbl_name="own")
        written = gevent.spawn(writer.call, "create_table", tbl=Table(dbName="lake_ice", tableName="fresh"))
        gevent.joinall([copied, uncopied, written], timeout=5)
    took = time.monotonic() - started
    assert took < 2.0, took  # 0.3 s waiting, a 0.3 s check, the rounds of the watchdog
    assert served_from_copy(copied.value.success)
    error = failure(uncopied.value)
    assert isinstance(error, MetaException) and error.message.startswith("metastore 'lake' is unavailable since ")
    error = failure(written.value)
    assert isinstance(error, MetaException)
    assert "was found down while the call waited for it" in error.message
    assert "The outcome of create_table is unknown: metastore 'lake' may have applied it" in error.message
    down = [e for e in logs if e["event"] == "metastore.down"]
    assert len(down) == 1 and down[0]["released_calls"] >= 3
    assert _count("waggle_released_calls_total") - released == down[0]["released_calls"]
    assert _count("waggle_calls_planned_again_total", "released") - again == 2  # the two reads
    unknown = [e for e in logs if e.get("outcome") == "unknown_outcome"]
    assert len(unknown) == 1 and unknown[0]["log_level"] == "warning" and unknown[0]["method"] == "create_table"
    # lake answers again: back after down-member-retry and one check
    lake.delay.clear()
    deadline = time.monotonic() + 3
    while not h.runtime.health.is_up("lake") and time.monotonic() < deadline:
        gevent.sleep(0.05)
    assert h.runtime.health.is_up("lake")
    assert not served_from_copy(readers[0].ok("get_table", dbname="lake_ice", tbl_name="t2"))


def _count(sample: str, lost: str | None = None) -> float:
    labels = {"metastore": "lake"} if lost is None else {"metastore": "lake", "lost": lost}
    return metrics.REGISTRY.get_sample_value(sample, labels) or 0.0


def test_a_long_call_to_a_member_that_passes_its_checks_runs_to_its_end(make):
    h, _main, lake = lake_with_copy(make)
    client = h.client()
    lake.delay["get_table"] = 1.2  # four times hung-member-check-after; getStatus answers at once
    checks = lake.status_checks
    table = client.ok("get_table", dbname="lake_ice", tbl_name="own")
    assert table.tableName == "own" and h.runtime.health.is_up("lake")
    assert lake.status_checks - checks >= 2  # checked while the call waited


def test_a_write_that_never_reached_its_member_says_only_that_it_failed(make):
    h, _main, lake = lake_with_copy(make)
    lake.down = True
    error = failure(h.client().call("create_table", tbl=Table(dbName="lake_ice", tableName="fresh")))
    assert isinstance(error, MetaException) and "Connection refused" in error.message
    assert "unknown" not in error.message


def test_every_member_is_checked_before_waggle_serves_and_one_down_starts_down(make):
    main = MemoryMetastore("main").add_database("default")
    lake = MemoryMetastore("lake").add_database("ice")
    lake.down = True
    with structlog.testing.capture_logs() as logs:
        h = make((main, {}), [(lake, LAKE)], server=QUICK)
    assert main.status_checks == 1 and h.runtime.health.is_up("main")
    assert not h.runtime.health.is_up("lake")
    down = [e for e in logs if e["event"] == "metastore.down"]
    assert [e["member"] for e in down] == ["lake"] and "Connection refused" in down[0]["reason"]


def test_the_first_checks_run_in_parallel(make):
    stores = [MemoryMetastore(name).add_database("default") for name in ("main", "a", "b", "c")]
    for store in stores:
        store.delay["getStatus"] = 0.2
    started = time.monotonic()
    h = make((stores[0], {}), [(s, {"database-prefix": f"{s.name}_"}) for s in stores[1:]],
             server={"health-check-timeout": 1000})
    assert time.monotonic() - started < 0.6
    assert all(s.status_checks == 1 for s in stores) and all(h.runtime.health.is_up(s.name) for s in stores)


# -- the watchdog: which calls waited too long, and letting a member's calls go ----------------------------------
class _Waiting:
    def __init__(self, member: str) -> None:
        self.member = member
        self.deadline = self.suspect_at = 0.0
        self.timed_out = False
        self.released = ""
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


def test_the_watchdog_suspects_a_member_once_a_round_and_never_for_short_calls():
    d = Deadlines()
    d.suspect_after = 3.0
    slow: list[str] = []
    d.on_slow = slow.append
    a1, a2, b, short = _Waiting("a"), _Waiting("a"), _Waiting("b"), _Waiting("c")
    for call in (a1, a2, b):
        d.watch(call, 60.0)
    d.watch(short, 2.0)  # over before anyone would suspect its member
    now = time.monotonic()
    assert d.expire(now + 1) == 0 and slow == []
    d.expire(now + 3.5)
    assert sorted(slow) == ["a", "b"]
    d.expire(now + 4.0)
    assert sorted(slow) == ["a", "b"]  # again only after another suspect_after
    d.expire(now + 7.0)
    assert sorted(slow) == ["a", "a", "b", "b"]
    assert not any(c.aborted for c in (a1, a2, b)) and short.timed_out  # only its own deadline ended it
    d.close()


def test_release_lets_only_the_members_calls_go():
    d = Deadlines()
    a, b = _Waiting("a"), _Waiting("b")
    d.watch(a, 60.0)
    d.watch(b, 60.0)
    assert d.release("a", "getStatus timed out") == 1
    assert a.aborted and a.released == "getStatus timed out" and not a.timed_out
    assert not b.aborted
    assert d.expire(time.monotonic() + 100) == 1 and b.timed_out  # a is no longer watched
    d.close()


def test_only_a_connection_that_could_not_be_opened_marks_a_member_down_at_once(make):
    h, _main, _lake = lake_with_copy(make)
    health = h.runtime.health
    health.call_failed("lake", UpstreamError("lake", "closed the connection", lost=Lost.DROPPED))
    health.call_failed("lake", UpstreamError("lake", "did not answer within 600s", lost=Lost.TIMED_OUT))
    health.call_failed("lake", UpstreamError("lake", "answered get_table with MetaException: boom"))
    assert health.is_up("lake")
    health.call_failed("lake", UpstreamError("lake", "is unreachable: refused", lost=Lost.UNREACHABLE))
    assert not health.is_up("lake")


def test_a_workers_call_that_finds_a_member_gone_tells_the_supervisor_and_its_news_lets_calls_go(make):
    from waggle.workers.shared import FollowedHealth

    h, _main, _lake = lake_with_copy(make)
    deadlines = Deadlines()
    health = FollowedHealth(h.config.federation.members, h.config.server, deadlines)
    told: list[tuple[str, str]] = []
    health.tell_down = lambda name, reason: told.append((name, reason))
    waiting = _Waiting("lake")
    deadlines.watch(waiting, 60.0)
    with structlog.testing.capture_logs() as logs:
        health.found_down("lake", "is unreachable: refused")
    assert not health.is_up("lake") and told == [("lake", "is unreachable: refused")]
    assert waiting.released == "is unreachable: refused"
    assert not [e for e in logs if e["event"] == "metastore.down"]  # the supervisor says it, once for the pod
    # the supervisor's news: back up, then down again (a failed check): calls waiting on it in this worker go
    health.follow("lake", True, time.time(), "")
    assert health.is_up("lake")
    waiting = _Waiting("lake")
    deadlines.watch(waiting, 60.0)
    health.follow("lake", False, time.time(), "getStatus: did not answer within 2s")
    assert waiting.aborted and waiting.released == "getStatus: did not answer within 2s"
    deadlines.close()
