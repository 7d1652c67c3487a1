"""The merged log as a process serves it (waggle.events.served.MergedLog): the journal from an in-memory store, the
members' events from in-memory logs, renamed to the names clients see."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.events.fakes import Clock, MemberLog, Pool, Store, block_of, event, full, shown_for, span
from waggle.events.journal import Block, Position, Span, Tail
from waggle.events.served import FRESH_SECONDS, MergedLog
from waggle.upstream.client import UpstreamError


class Setup:
    def __init__(self, tmp: Path, *blocks: Block) -> None:
        self.store = Store(*blocks)
        self.pools = {"main": Pool("main"), "fed": Pool("fed")}
        self.clock = Clock()
        shown = shown_for(tmp)
        self.log = MergedLog(self.store, self.pools.get, lambda: shown, clock=self.clock)  # type: ignore[arg-type]

    def member(self, name: str) -> MemberLog:
        return self.pools[name].log

    def later(self) -> None:
        self.clock.now += 2 * FRESH_SECONDS


def _all(found: Any) -> bool:
    return True


def _served(events: list[Any]) -> list[tuple[int, str]]:
    return [(e.eventId, e.dbName) for e in events]


@pytest.fixture
def served(tmp_path: Path) -> Setup:
    """main's sales events 5 and 6 and fed's sales event 3, merged as 1 (main 5), 2 (fed 3), 3 (main 6)."""
    setup = Setup(tmp_path, block_of(1, span("main", (5, 5)) + span("fed", (3, 3)), span("main", (6, 6))))
    setup.member("main").add(event(5), event(6))
    setup.member("fed").add(event(3))
    return setup


def test_events_are_served_under_their_merged_ids_and_the_names_clients_see(served: Setup) -> None:
    assert _served(served.log.events(0, 0, _all)) == [(1, "sales"), (2, "fed_sales"), (3, "sales")]


def test_a_served_event_is_a_copy_the_kept_one_keeps_its_member_id(served: Setup) -> None:
    served.log.events(0, 0, _all)
    assert served.member("fed").events[3].eventId == 3
    assert served.member("fed").events[3].dbName == "sales"
    assert _served(served.log.events(1, 1, _all)) == [(2, "fed_sales")]


def test_events_are_served_from_the_id_after(served: Setup) -> None:
    assert [e.eventId for e in served.log.events(1, 0, _all)] == [2, 3]
    assert served.log.events(3, 0, _all) == []
    assert served.log.events(50, 0, _all) == []


def test_keep_filters_the_renamed_events(served: Setup) -> None:
    found = served.log.events(0, 0, lambda e: e.dbName == "fed_sales")
    assert _served(found) == [(2, "fed_sales")]


def test_most_caps_the_events_served(served: Setup) -> None:
    assert [e.eventId for e in served.log.events(0, 2, _all)] == [1, 2]
    assert [e.eventId for e in served.log.events(0, -1, _all)] == [1, 2, 3]


def test_a_members_events_are_fetched_once_by_range_and_kept(served: Setup) -> None:
    served.log.events(0, 0, _all)
    # 5 and 6 in one call (16 more asked for: an id may hold two events, HIVE-16886)
    assert served.member("main").fetches() == [(4, 18)]
    assert served.member("fed").fetches() == [(2, 17)]
    served.later()
    served.log.events(0, 0, _all)
    assert served.pools["main"].uses == served.pools["fed"].uses == 1


def test_a_lost_id_is_skipped(tmp_path: Path) -> None:
    setup = Setup(tmp_path, block_of(1, span("fed", (0, -2), (3, 3))))
    setup.member("fed").add(event(1), event(2), event(3))
    assert _served(setup.log.events(0, 0, _all)) == [(3, "fed_sales")]
    assert setup.member("fed").fetches() == [(2, 17)]  # lost ids are not asked for


def test_an_event_its_member_no_longer_holds_is_skipped(served: Setup) -> None:
    del served.member("fed").events[3]  # purged
    assert [e.eventId for e in served.log.events(0, 0, _all)] == [1, 3]


def test_an_event_of_an_older_epoch_of_its_member_is_skipped(tmp_path: Path) -> None:
    positions = {"fed": Position(1, 3, 0)}
    setup = Setup(tmp_path, block_of(1, span("fed", (3, 3)), span("fed", (0, -1), epoch=1),
                                     span("fed", (1, 3), epoch=1), positions=positions))
    setup.member("fed").add(event(1), event(2), event(3))  # the log started again: its 3 is another event
    assert [e.eventId for e in setup.log.events(0, 0, _all)] == [3, 4, 5]


def test_events_hidden_now_are_skipped(tmp_path: Path) -> None:
    setup = Setup(tmp_path, block_of(1, span("fed", (1, 4))))
    setup.member("fed").add(event(1, db="web", table="visits"), event(2, db="web", table="clicks"),
                            event(3, db="tmp"), event(4, db=None, table=None, kind="CREATE_CATALOG"))
    assert _served(setup.log.events(0, 0, _all)) == [(1, "fed_web"), (4, None)]


def test_events_of_a_member_no_longer_federated_are_skipped(served: Setup) -> None:
    del served.pools["fed"]
    assert [e.eventId for e in served.log.events(0, 0, _all)] == [1, 3]


def test_a_member_that_cannot_be_reached_ends_the_page_before_its_first_event(served: Setup) -> None:
    served.pools["fed"].down = True
    assert [e.eventId for e in served.log.events(0, 0, _all)] == [1]
    with pytest.raises(UpstreamError, match="'fed'"):
        served.log.events(1, 0, _all)
    assert served.log.count(0, None, _all, None) == 1
    served.pools["fed"].down = False
    assert [e.eventId for e in served.log.events(1, 0, _all)] == [2, 3]


def test_a_member_down_after_its_events_were_kept_does_not_end_the_page(served: Setup) -> None:
    served.log.events(0, 0, _all)
    served.pools["fed"].down = True
    served.later()
    assert [e.eventId for e in served.log.events(0, 0, _all)] == [1, 2, 3]


def test_a_member_down_after_events_filtered_out_raises(served: Setup) -> None:
    served.pools["fed"].down = True
    with pytest.raises(UpstreamError):
        served.log.events(0, 0, lambda e: e.dbName == "fed_sales")


def test_count_counts_the_kept_events_up_to_an_id_and_a_limit(served: Setup) -> None:
    assert served.log.count(0, None, _all, None) == 3
    assert served.log.count(0, 2, _all, None) == 2
    assert served.log.count(1, 2, _all, None) == 1
    assert served.log.count(0, None, _all, 2) == 2
    assert served.log.count(0, None, _all, 0) == 3  # no limit
    assert served.log.count(0, None, lambda e: e.dbName == "sales", None) == 2
    assert served.log.count(3, None, _all, None) == 0


def test_current_is_zero_before_any_block(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    assert setup.log.current() == 0
    assert setup.log.events(0, 0, _all) == []
    assert setup.log.count(0, None, _all, None) == 0


def test_current_is_the_newest_merged_id(served: Setup) -> None:
    assert served.log.current() == 3


def test_the_last_block_is_read_again_once_it_is_no_longer_fresh(served: Setup) -> None:
    served.log.current()
    assert (served.store.lists, served.store.reads) == (1, [1])
    served.store.put(block_of(1, span("main", (5, 6)), span("fed", (3, 3)), span("main", (7, 7))))
    assert served.log.current() == 3  # fresh: not read
    assert served.store.reads == [1]
    served.later()
    assert served.log.current() == 4
    assert (served.store.lists, served.store.reads) == (1, [1, 1])  # read again, not listed


def test_a_full_last_block_makes_it_list_the_blocks_again(tmp_path: Path) -> None:
    first = full(block_of(1, span("fed", (3, 3))))
    setup = Setup(tmp_path, first)
    setup.member("fed").add(event(3), event(4))
    assert setup.log.current() == first.tail.next - 1
    setup.store.put(block_of(first.tail.next, span("fed", (4, 4))))
    setup.later()
    assert setup.log.current() == first.tail.next
    assert setup.store.lists == 2
    assert [e.eventId for e in setup.log.events(0, 0, _all)] == [1, first.tail.next]


def test_blocks_before_the_last_are_read_once(tmp_path: Path) -> None:
    first = full(block_of(1, span("fed", (3, 3))))
    second = block_of(first.tail.next, span("fed", (4, 4)))
    setup = Setup(tmp_path, first, second)
    setup.member("fed").add(event(3), event(4))
    assert [e.eventId for e in setup.log.events(0, 0, _all)] == [1, second.first]
    setup.later()
    assert [e.eventId for e in setup.log.events(0, 0, _all)] == [1, second.first]
    assert setup.store.reads.count(1) == 1
    assert [e.eventId for e in setup.log.events(second.first - 1, 0, _all)] == [second.first]


def test_a_block_pruned_is_forgotten(tmp_path: Path) -> None:
    first = full(block_of(1, span("fed", (3, 3))))
    second = full(block_of(first.tail.next, span("fed", (4, 4))))
    setup = Setup(tmp_path, first, second)
    setup.member("fed").add(event(3), event(4), event(5))
    assert [e.eventId for e in setup.log.events(0, 0, _all)] == [1, second.first]
    del setup.store.params[1]
    setup.store.put(block_of(second.tail.next, span("fed", (5, 5))))
    setup.later()
    assert [e.eventId for e in setup.log.events(0, 0, _all)] == [second.first, second.tail.next]


def test_a_published_block_and_its_events_are_served_without_reading_the_store_or_the_member(
        tmp_path: Path) -> None:
    setup = Setup(tmp_path, block_of(1, span("fed", (3, 3))))
    assert setup.log.current() == 1
    looked = (setup.store.lists, list(setup.store.reads))
    block = block_of(1, span("fed", (3, 3)), span("fed", (4, 5)))  # as this process's merger wrote it
    setup.store.put(block)
    setup.log.publish(block, {"fed": (0, [event(3), event(4), event(5, db="tmp")])})
    assert _served(setup.log.events(0, 0, _all)) == [(1, "fed_sales"), (2, "fed_sales")]
    assert setup.log.current() == 3
    assert (setup.store.lists, setup.store.reads, setup.pools["fed"].uses) == (*looked, 0)


def test_publishing_an_empty_first_block_changes_nothing(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    setup.log.publish(Block.empty(Tail(1)), {})
    assert setup.log.current() == 0
    assert setup.store.lists == 1


def test_a_published_next_block_keeps_the_one_before(tmp_path: Path) -> None:
    first = full(block_of(1, span("fed", (3, 3))))
    setup = Setup(tmp_path, first)
    setup.member("fed").add(event(3))
    assert setup.log.current() == first.tail.next - 1
    looked = (setup.store.lists, list(setup.store.reads))
    second = block_of(first.tail.next, span("fed", (4, 4)))
    setup.store.put(second)
    setup.log.publish(second, {"fed": (0, [event(4)])})
    assert [e.eventId for e in setup.log.events(0, 0, _all)] == [1, second.first]
    assert (setup.store.lists, setup.store.reads) == looked


def test_a_block_published_first_does_not_hide_the_older_blocks(tmp_path: Path) -> None:
    first = full(block_of(1, span("fed", (3, 3))))
    second = block_of(first.tail.next, span("fed", (4, 4)))
    setup = Setup(tmp_path, first, second)  # written by the merger of another process
    setup.member("fed").add(event(3), event(4), event(5))
    # this process takes the lease over and writes the next round into the last block
    made = block_of(first.tail.next, span("fed", (4, 4)), span("fed", (5, 5)))
    setup.store.put(made)
    setup.log.publish(made, {"fed": (0, [event(5)])})
    setup.later()
    assert [e.eventId for e in setup.log.events(0, 0, _all)] == [1, second.first, second.first + 1]


def test_a_block_published_after_a_stale_last_block_does_not_hide_what_came_between(tmp_path: Path) -> None:
    setup = Setup(tmp_path, block_of(1, span("fed", (3, 3))))
    setup.member("fed").add(*(event(i) for i in range(3, 7)))
    assert setup.log.current() == 1  # read while another process merges
    first = full(block_of(1, span("fed", (3, 3)), span("fed", (4, 4))))
    second = full(block_of(first.tail.next, span("fed", (5, 5))))
    setup.store.put(first)
    setup.store.put(second)
    # much later this process takes the lease over and starts the next block
    third = block_of(second.tail.next, span("fed", (6, 6)))
    setup.store.put(third)
    setup.log.publish(third, {"fed": (0, [event(6)])})
    setup.later()
    assert [e.eventId for e in setup.log.events(0, 0, _all)] == [1, 2, second.first, third.first]


def test_events_of_many_pages_are_served_in_order(tmp_path: Path) -> None:
    setup = Setup(tmp_path, block_of(1, span("fed", (1, 1500))))
    setup.member("fed").add(*(event(i) for i in range(1, 1501)))
    found = setup.log.events(0, 0, _all)
    assert [e.eventId for e in found] == list(range(1, 1501))
    assert setup.member("fed").fetches() == [(0, 1000), (1000, 516)]
    assert setup.log.count(0, None, _all, None) == 1500


def test_a_member_failing_on_a_later_page_ends_the_page_there(tmp_path: Path) -> None:
    setup = Setup(tmp_path, block_of(1, span("main", (1, 1000)), span("fed", (1, 1))))
    setup.member("main").add(*(event(i) for i in range(1, 1001)))
    setup.member("fed").add(event(1))
    setup.pools["fed"].down = True
    found = setup.log.events(0, 0, _all)
    assert len(found) == 1000
    assert setup.log.count(0, None, _all, None) == 1000


def test_a_span_of_a_member_unknown_to_the_tail_is_skipped(tmp_path: Path) -> None:
    setup = Setup(tmp_path, block_of(1, span("fed", (3, 3)), positions={"main": Position(0, 0, 0)}))
    setup.member("fed").add(event(3))
    assert setup.log.events(0, 0, _all) == []
    assert setup.member("fed").fetches() == []


def test_a_published_round_of_spans_of_both_members_is_merged_in_order(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    block = block_of(1, (Span("fed", 0, ((3, 3),)), Span("main", 0, ((0, -1), (8, 8)))))
    setup.log.publish(block, {"fed": (0, [event(3)]), "main": (0, [event(8)])})
    assert _served(setup.log.events(0, 0, _all)) == [(1, "fed_sales"), (3, "sales")]


def test_two_events_of_one_id_are_served_under_two_ids(tmp_path: Path) -> None:
    """HIVE-16886: a Hive 2 metastore may give two events one id; the journal holds the id twice."""
    setup = Setup(tmp_path, block_of(1, span("fed", (3, 3), (3, 4))))
    second = event(3, table="other")
    setup.member("fed").add(event(3), event(4)).add_again(second)
    found = setup.log.events(0, 0, _all)
    assert [(e.eventId, e.tableName) for e in found] == [(1, "orders"), (2, "other"), (3, "orders")]
    assert [(e.eventId, e.tableName) for e in setup.log.events(1, 0, _all)] == [(2, "other"), (3, "orders")]


def test_an_id_holding_an_event_clients_do_not_see_serves_the_one_they_do(tmp_path: Path) -> None:
    """HIVE-16886 with waggle's own journal write: id 3 holds a hidden event and a shown one; the journal holds the
    shown one only, and that is the one served."""
    setup = Setup(tmp_path, block_of(1, span("fed", (3, 4))))
    setup.member("fed").add(event(3, db="hidden"), event(4)).add_again(event(3, table="other"))
    found = setup.log.events(0, 0, _all)
    assert [(e.eventId, e.dbName, e.tableName) for e in found] == [(1, "fed_sales", "other"),
                                                                   (2, "fed_sales", "orders")]
