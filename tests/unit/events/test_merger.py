"""One round of the merger (waggle.events.merger.Merger.merge_once) over in-memory member logs and an in-memory
journal store: what it writes, and what it hands to the process's merged log."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.unit.events.fakes import Clock, MemberLog, Pool, Store, block_of, event, full, shown_for, span
from waggle.events.journal import Block, Position, Round, Span, Tail
from waggle.events.merger import LEASE_SECONDS, PRUNE_SECONDS, SAVE_SECONDS, Merger
from waggle.events.rounds import HOLE_SECONDS
from waggle.events.store import JournalError

T0 = 1_700_000_000.0


class Setup:
    def __init__(self, tmp: Path, *blocks: Block, retention: float = float("inf")) -> None:
        self.store = Store(*blocks)
        self.pools = {"main": Pool("main"), "fed": Pool("fed")}
        self.clock = Clock(T0)
        self.published: list[tuple[Block, dict[str, tuple[int, Sequence[Any]]]]] = []
        self.retention = retention
        shown = shown_for(tmp)
        self.merger = Merger(self.store, lambda: list(self.pools.items()),  # type: ignore[arg-type]
                             shown.event, lambda b, r: self.published.append((b, r)), lambda: self.retention,
                             clock=self.clock)
        self.merger.holding = True

    def member(self, name: str) -> MemberLog:
        return self.pools[name].log

    def merge(self, seconds: float = 1.0) -> None:
        """A round, ``seconds`` after the last."""
        self.clock.now += seconds
        self.merger.merge_once()

    def last(self) -> Block:
        return self.store.last()

    def refs(self) -> list[tuple[str, int, int]]:
        return [(r.member, r.epoch, r.event) for b in self._blocks() for r in _refs(b)]

    def _blocks(self) -> list[Block]:
        found = [self.store.read(f) for f in self.store.firsts()]
        return [b for b in found if b is not None]


def _refs(block: Block) -> list[Any]:
    return [r for made in block.rounds for r in made.refs()]


@pytest.fixture
def joined(tmp_path: Path) -> Setup:
    """Both members joined at once: main at its event 10, fed at its event 20."""
    setup = Setup(tmp_path)
    setup.member("main").add(*(event(i) for i in range(1, 11)))
    setup.member("fed").add(*(event(i) for i in range(1, 21)))
    setup.merge()
    return setup


def test_new_members_positions_are_written_at_once(joined: Setup) -> None:
    assert joined.store.writes == [(1, True)]
    last = joined.last()
    assert last.rounds == ()
    assert last.tail == Tail(1, {"main": Position(0, 10, 0), "fed": Position(0, 20, 0)})
    assert joined.member("main").fetches() == []  # the events before a member joins are never merged


def test_a_members_new_events_shown_make_a_round(joined: Setup) -> None:
    joined.member("fed").add(event(21), event(22, db="web", table="visits"))
    joined.member("main").add(event(11))
    joined.merge()
    assert joined.store.writes[-1] == (1, False)
    last = joined.last()
    assert last.rounds == (Round(1, int(T0 + 2), (Span("main", 0, ((11, 11),)), Span("fed", 0, ((21, 22),)))),)
    assert last.tail == Tail(4, {"main": Position(0, 11, 1011), "fed": Position(0, 22, 1022)})
    block, read = joined.published[-1]
    assert block == last
    assert {m: (epoch, [e.eventId for e in events]) for m, (epoch, events) in read.items()} == {
        "main": (0, [11]), "fed": (0, [21, 22])}


def test_rounds_follow_each_other(joined: Setup) -> None:
    for n in range(3):
        joined.member("fed").add(event(21 + n))
        joined.merge()
    assert [r.start for r in joined.last().rounds] == [1, 2, 3]
    assert joined.refs() == [("fed", 0, 21), ("fed", 0, 22), ("fed", 0, 23)]


def test_hidden_events_get_no_id_and_are_handed_over_all_the_same(joined: Setup) -> None:
    joined.member("fed").add(event(21, db="tmp"), event(22), event(23, db="web", table="clicks"), event(24))
    joined.merge()
    assert joined.last().rounds[0].spans == (Span("fed", 0, ((22, 22), (24, 24))),)
    assert joined.last().tail.positions["fed"] == Position(0, 24, 1024)
    assert [e.eventId for e in joined.published[-1][1]["fed"][1]] == [21, 22, 23, 24]


def test_positions_moved_only_by_hidden_events_are_saved_every_save_seconds(joined: Setup) -> None:
    joined.member("fed").add(event(21, db="tmp"))
    joined.merge()
    assert joined.store.writes == [(1, True)]  # not yet
    assert joined.last().tail.positions["fed"] == Position(0, 20, 0)
    joined.merge(SAVE_SECONDS - 2)
    assert joined.store.writes == [(1, True)]
    joined.merge(1)  # a minute after the last write
    assert joined.store.writes == [(1, True), (1, False)]
    assert joined.last().tail == Tail(1, {"main": Position(0, 10, 0), "fed": Position(0, 21, 1021)})
    assert joined.last().rounds == ()


def test_an_event_shown_after_hidden_ones_unsaved_is_journaled_from_the_saved_position(joined: Setup) -> None:
    joined.member("fed").add(event(21, db="tmp"))
    joined.merge()
    joined.member("fed").add(event(22))
    joined.merge()
    assert joined.refs() == [("fed", 0, 22)]
    assert joined.last().tail.positions["fed"] == Position(0, 22, 1022)


def test_a_block_written_by_another_process_stops_the_merger_before_it_writes(joined: Setup) -> None:
    other = block_of(1, span("fed", (21, 21)), positions={"main": Position(0, 10, 0), "fed": Position(0, 21, 1021)})
    joined.store.put(other)
    joined.member("fed").add(event(21), event(22))
    published = len(joined.published)
    with pytest.raises(JournalError, match="another process"):
        joined.merge()
    assert joined.store.writes == [(1, True)]
    assert joined.last() == other
    assert len(joined.published) == published


def test_a_block_made_by_another_process_before_the_first_write_stops_the_merger(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    setup.member("fed").add(event(1))
    setup.pools["fed"].down = True  # nothing to write yet
    del setup.pools["main"]
    setup.merge()
    assert setup.store.writes == []
    setup.store.put(block_of(1, positions={"fed": Position(0, 1, 0)}))
    setup.pools["fed"].down = False
    with pytest.raises(JournalError):
        setup.merge()


def test_a_member_that_cannot_be_read_is_left_for_the_next_round(joined: Setup) -> None:
    joined.pools["fed"].down = True
    joined.member("fed").add(event(21))
    joined.member("main").add(event(11))
    joined.merge()
    assert joined.refs() == [("main", 0, 11)]
    assert joined.last().tail.positions["fed"] == Position(0, 20, 0)
    assert "fed" not in joined.published[-1][1]
    joined.pools["fed"].down = False
    joined.merge()
    assert joined.refs() == [("main", 0, 11), ("fed", 0, 21)]
    assert (19, 1000) in joined.member("fed").fetches()  # read again from the event at its position


def test_a_member_whose_log_started_again_while_it_could_not_be_read_gets_a_new_epoch(joined: Setup) -> None:
    joined.member("fed").add(event(21))
    joined.merge()
    joined.pools["fed"].down = True
    joined.merge()
    joined.member("fed").restart()
    joined.member("fed").add(*(event(i, time=5000 + i) for i in range(1, 26)))  # past its old position already
    joined.pools["fed"].down = False
    joined.merge()
    assert joined.last().tail.positions["fed"] == Position(1, 0, 0)
    assert joined.refs()[-1] == ("fed", 1, 0)
    joined.merge()
    assert joined.refs()[-25:] == [("fed", 1, i) for i in range(1, 26)]


def test_a_log_started_again_below_the_position_is_a_lost_id_then_its_events(joined: Setup) -> None:
    joined.member("fed").restart()
    joined.member("fed").add(event(1), event(2))
    joined.merge()
    assert joined.refs() == [("fed", 1, 0)]
    joined.merge()
    assert joined.refs() == [("fed", 1, 0), ("fed", 1, 1), ("fed", 1, 2)]
    assert joined.last().tail.positions["fed"] == Position(1, 2, 1002)


def test_events_purged_before_they_were_read_are_one_lost_id(joined: Setup) -> None:
    joined.member("fed").add(*(event(i) for i in range(21, 31)))
    for gone in range(1, 26):
        del joined.member("fed").events[gone]
    joined.merge()
    assert joined.refs() == [("fed", 0, 0), *(("fed", 0, i) for i in range(26, 31))]


def test_a_hole_after_the_position_is_waited_for_then_passed(joined: Setup) -> None:
    joined.member("fed").add(event(22))  # 21 not committed yet
    joined.merge()
    assert joined.refs() == []
    joined.merge(HOLE_SECONDS - 2)
    assert joined.refs() == []
    joined.merge(2)
    assert joined.refs() == [("fed", 0, 22)]


def test_a_hole_filled_while_waited_for_is_merged_in_order(joined: Setup) -> None:
    joined.member("fed").add(event(22))
    joined.merge()
    joined.member("fed").add(event(21))
    joined.merge()
    assert joined.refs() == [("fed", 0, 21), ("fed", 0, 22)]


def test_a_merger_starting_over_a_journal_goes_on_from_its_last_block(tmp_path: Path) -> None:
    positions = {"main": Position(0, 10, 1010), "fed": Position(0, 20, 1020)}
    setup = Setup(tmp_path, block_of(5, span("fed", (20, 20)), positions=positions))
    setup.member("main").add(*(event(i) for i in range(1, 12)))
    setup.member("fed").add(*(event(i) for i in range(1, 21)))
    setup.merge()
    assert setup.store.writes == [(5, False)]
    assert [r.start for r in setup.last().rounds] == [5, 6]
    assert setup.refs() == [("fed", 0, 20), ("main", 0, 11)]


def test_a_full_block_makes_the_next_round_start_a_new_block(tmp_path: Path) -> None:
    positions = {"main": Position(0, 10, 1010), "fed": Position(0, 20, 1020)}
    first = full(block_of(1, span("fed", (20, 20)), positions=positions))
    setup = Setup(tmp_path, first)
    setup.member("main").add(*(event(i) for i in range(1, 11)))
    setup.member("fed").add(*(event(i) for i in range(1, 22)))
    setup.merge()
    assert setup.store.writes == [(first.tail.next, True)]
    second = setup.last()
    assert second.first == first.tail.next
    assert second.rounds == (Round(first.tail.next, int(T0 + 1), span("fed", (21, 21))),)
    assert setup.published[-1][0] == second
    setup.member("fed").add(event(22))
    setup.merge()
    assert setup.store.writes[-1] == (first.tail.next, False)


def test_a_full_blocks_positions_are_saved_in_it(tmp_path: Path) -> None:
    positions = {"main": Position(0, 10, 1010), "fed": Position(0, 20, 1020)}
    first = full(block_of(1, span("fed", (20, 20)), positions=positions))
    setup = Setup(tmp_path, first)
    setup.member("main").add(*(event(i) for i in range(1, 11)))
    setup.member("fed").add(*(event(i) for i in range(1, 21)), event(21, db="tmp"))
    setup.merge()
    assert setup.store.writes == [(1, False)]
    assert setup.last().tail.positions["fed"] == Position(0, 21, 1021)


def test_old_blocks_are_pruned_but_never_the_last(tmp_path: Path) -> None:
    old = T0 - 7200
    first = full(block_of(1, span("fed", (1, 1)), time=int(old)), time=int(old))
    second = full(block_of(first.tail.next, span("fed", (2, 2)), time=int(old)), time=int(old))
    third = block_of(second.tail.next, span("fed", (3, 3)), time=int(old))
    setup = Setup(tmp_path, first, second, third, retention=3600)
    setup.merge()
    assert setup.store.dropped == [1, second.first]
    assert setup.store.firsts() == [third.first]
    setup.merge(PRUNE_SECONDS)
    assert setup.store.dropped == [1, second.first]


def test_pruning_stops_at_the_first_block_within_the_retention(tmp_path: Path) -> None:
    old, recent = int(T0 - 7200), int(T0 - 60)
    first = full(block_of(1, span("fed", (1, 1)), time=old), time=old)
    second = full(block_of(first.tail.next, span("fed", (2, 2)), time=old), time=recent)
    third = full(block_of(second.tail.next, span("fed", (3, 3)), time=old), time=old)
    fourth = block_of(third.tail.next, span("fed", (4, 4)), time=old)
    setup = Setup(tmp_path, first, second, third, fourth, retention=3600)
    setup.merge()
    assert setup.store.dropped == [1]


def test_blocks_are_looked_at_for_pruning_every_prune_seconds(tmp_path: Path) -> None:
    old = int(T0 - 7200)
    first = full(block_of(1, span("fed", (1, 1)), time=old), time=old)
    setup = Setup(tmp_path, first, retention=3600)
    setup.merge()
    second = block_of(first.tail.next, span("fed", (2, 2)), time=old)
    setup.store.put(second)
    setup.merge(PRUNE_SECONDS - 2)
    assert setup.store.dropped == []
    setup.merge(2)
    assert setup.store.dropped == [1]


def test_nothing_is_pruned_without_a_retention(tmp_path: Path) -> None:
    first = full(block_of(1, span("fed", (1, 1)), time=0), time=0)
    setup = Setup(tmp_path, first, block_of(first.tail.next, span("fed", (2, 2)), time=0))
    setup.merge()
    assert setup.store.dropped == []


# -- the lease -----------------------------------------------------------------------------------------------------
def test_a_lease_held_by_another_live_process_is_left_alone(tmp_path: Path) -> None:
    setup = Setup(tmp_path)
    setup.merger.holding = False
    other = f"elsewhere:1:abcdef {time.time() + 100:.0f}"
    setup.store.lease_value = other
    assert not setup.merger._hold()
    assert (setup.merger.holding, setup.store.lease_value) == (False, other)
    assert not setup.merger._hold()  # not looked at again within a third of the lease
    assert setup.store.ensured == 1


def test_a_free_lease_is_taken_and_renewed_a_third_of_it_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    monkeypatch.setattr("waggle.events.merger.gevent.sleep", lambda seconds: None)
    setup = Setup(tmp_path)
    setup.merger.holding = False
    assert setup.merger._hold()
    assert setup.merger.holding
    assert setup.store.lease_value == f"{setup.merger.me} {T0 + LEASE_SECONDS:.0f}"
    setup.clock.now += LEASE_SECONDS / 3 - 1
    assert setup.merger._hold()
    assert setup.store.ensured == 1
    setup.clock.now += 1
    assert setup.merger._hold()
    assert setup.store.lease_value == f"{setup.merger.me} {setup.clock.now + LEASE_SECONDS:.0f}"


def test_a_lease_taken_by_another_stops_the_merging_and_forgets_the_block(joined: Setup) -> None:
    assert joined.merger.block is not None
    joined.merger._renewed = -LEASE_SECONDS
    joined.store.lease_value = f"elsewhere:1:abcdef {time.time() + 100:.0f}"
    assert not joined.merger._hold()
    assert (joined.merger.holding, joined.merger.block) == (False, None)


def test_stop_gives_the_lease_back(joined: Setup) -> None:
    joined.store.lease_value = f"{joined.merger.me} {time.time() + 100:.0f}"
    joined.merger.stop()
    assert joined.store.lease_value is None
    assert not joined.merger.holding


def test_a_second_event_of_an_id_already_merged_is_merged_too(joined: Setup) -> None:
    """HIVE-16886: the second event of an id commits after the first was read, the newest id unchanged: the
    merger reads its last id again for a while after it took events."""
    joined.member("fed").add(event(21))
    joined.merge()
    joined.member("fed").add_again(event(21, table="other"))
    joined.merge()
    assert joined.refs() == [("fed", 0, 21), ("fed", 0, 21)]
    assert joined.last().tail.positions["fed"] == Position(0, 21, 1021, 2)
    joined.merge()
    assert joined.refs() == [("fed", 0, 21), ("fed", 0, 21)]  # each once
