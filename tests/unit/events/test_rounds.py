"""One member's step and the round the steps make (waggle.events.rounds). Pure."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.events.fakes import event
from waggle.events.journal import Position, Round, Span, Tail
from waggle.events.rounds import HOLE_SECONDS, Probe, Step, compose, split, step

AT = Position(0, 10, 1010)  # read up to event 10 (time 1010)


def _ids(found: Step) -> list[int]:
    return [e.eventId for e in found.taken]


def test_a_new_member_starts_at_its_newest_event_and_takes_none() -> None:
    assert step(None, 42, [], None, 5.0) == Step(Position(0, 42, 0))


def test_a_new_member_with_an_empty_log_starts_at_zero() -> None:
    assert step(None, 0, [], None, 5.0) == Step(Position(0, 0, 0))


def test_no_new_events_leave_the_position() -> None:
    assert step(AT, 10, [], None, 5.0) == Step(AT)


def test_events_that_follow_the_position_are_taken_and_move_it() -> None:
    found = step(AT, 13, [event(11), event(12), event(13)], None, 5.0)
    assert _ids(found) == [11, 12, 13]
    assert found.position == Position(0, 13, 1013)
    assert (found.lost, found.waiting_since) == (0, None)


def test_a_hole_inside_the_page_ends_what_is_taken() -> None:
    found = step(AT, 15, [event(11), event(12), event(14), event(15)], None, 5.0)
    assert _ids(found) == [11, 12]
    assert found.position == Position(0, 12, 1012)


def test_the_first_events_of_an_epoch_are_taken_whatever_their_first_id() -> None:
    found = step(Position(2, 0, 0), 7, [event(5), event(6)], None, 5.0)
    assert _ids(found) == [5, 6]
    assert found.position == Position(2, 6, 1006)


def test_a_hole_after_the_position_needs_the_event_at_the_position_read_again() -> None:
    with pytest.raises(ValueError, match="probed"):
        step(AT, 12, [event(12)], None, 5.0)


def test_a_page_read_from_the_position_gives_the_event_there_and_what_is_not_taken_yet() -> None:
    assert split(AT, [event(10), event(11), event(12)]) == (Probe(1010), [event(11), event(12)])
    assert split(AT, [event(12)]) == (Probe(None), [event(12)])  # the event at the position is gone
    assert split(AT, []) == (Probe(None), [])


def test_a_second_event_of_the_positions_id_is_taken_and_counted() -> None:
    """HIVE-16886: two writes of a Hive 2 metastore may read the same next id; the second commits after the
    first was read, with the newest id unchanged."""
    second = event(10)
    second.eventTime = 1011
    probe, rest = split(AT, [event(10), second, event(11)])
    assert probe == Probe(1010) and rest == [second, event(11)]
    found = step(AT, 11, rest, probe, 5.0)
    assert _ids(found) == [10, 11]
    assert found.position == Position(0, 11, 1011, 1)
    only = step(AT, 10, [second], probe, 5.0)
    assert _ids(only) == [10] and only.position == Position(0, 10, 1010, 2)
    assert split(only.position, [event(10), second]) == (Probe(1010), [])  # both taken: nothing new


def test_two_events_of_one_id_inside_a_page_are_both_taken() -> None:
    found = step(AT, 12, [event(11), event(11), event(12)], Probe(1010), 5.0)
    assert _ids(found) == [11, 11, 12]
    assert found.position == Position(0, 12, 1012, 1)
    twice = step(AT, 11, [event(11), event(11)], Probe(1010), 5.0)
    assert twice.position == Position(0, 11, 1011, 2)


def test_a_hole_after_a_held_event_is_waited_for_then_passed() -> None:
    page = [event(12), event(13)]
    held = Probe(1010)
    first = step(AT, 13, page, held, 100.0)
    assert first == Step(AT, waiting_since=100.0)  # nothing taken yet
    later = step(AT, 13, page, held, 100.0 + HOLE_SECONDS - 0.5, first.waiting_since)
    assert later == Step(AT, waiting_since=100.0)
    passed = step(AT, 13, page, held, 100.0 + HOLE_SECONDS, later.waiting_since)
    assert _ids(passed) == [12, 13]
    assert (passed.lost, passed.waiting_since) == (0, None)  # the hole is no event of the merged log
    assert passed.position == Position(0, 13, 1013)


def test_a_hole_filled_while_waited_for_is_taken_in_order() -> None:
    waiting = step(AT, 13, [event(12), event(13)], Probe(1010), 100.0)
    found = step(AT, 13, [event(11), event(12), event(13)], None, 101.0, waiting.waiting_since)
    assert _ids(found) == [11, 12, 13]
    assert found.waiting_since is None


def test_a_purge_past_the_position_loses_one_id_then_takes_the_events() -> None:
    found = step(AT, 40, [event(30), event(31)], Probe(None), 5.0)
    assert found.lost == 1
    assert _ids(found) == [30, 31]
    assert found.position == Position(0, 31, 1031)


def test_a_log_whose_newest_id_is_below_the_position_started_again() -> None:
    found = step(Position(3, 10, 1010), 2, [event(1), event(2)], None, 5.0)
    assert found == Step(Position(4, 0, 0), lost=1)


def test_a_log_whose_event_at_the_position_is_another_one_started_again() -> None:
    found = step(AT, 30, [event(12)], Probe(555), 5.0)
    assert found == Step(Position(1, 0, 0), lost=1)


def test_a_probe_is_not_a_restart_when_the_positions_time_is_unknown() -> None:
    found = step(Position(0, 10, 0), 11, [event(11)], Probe(555), 5.0)
    assert _ids(found) == [11]
    assert found.lost == 0


def test_a_probe_finding_the_same_event_is_no_restart() -> None:
    found = step(AT, 11, [event(11)], Probe(1010), 5.0)
    assert _ids(found) == [11]


# -- compose -------------------------------------------------------------------------------------------------------
def _shown(member: str, found: Any) -> bool:
    return bool(found.dbName != "hidden")


def test_a_round_gives_ids_to_the_members_events_in_the_order_of_the_members() -> None:
    tail = Tail(100, {"a": Position(0, 4, 0), "b": Position(0, 20, 0)})
    steps = {"b": Step(Position(0, 22, 1022), (event(21), event(22))),
             "a": Step(Position(0, 5, 1005), (event(5),))}
    made, after = compose(tail, steps, _shown, 1234.9)
    assert made == Round(100, 1234, (Span("b", 0, ((21, 22),)), Span("a", 0, ((5, 5),))))
    assert [r.merged for r in made.refs()] == [100, 101, 102]
    assert after == Tail(103, {"a": Position(0, 5, 1005), "b": Position(0, 22, 1022)})


def test_hidden_events_get_no_id_but_move_the_position() -> None:
    tail = Tail(7, {"a": Position(0, 4, 0)})
    taken = (event(5), event(6, db="hidden"), event(7), event(8, db="hidden"))
    made, after = compose(tail, {"a": Step(Position(0, 8, 1008), taken)}, _shown, 0)
    assert made == Round(7, 0, (Span("a", 0, ((5, 5), (7, 7))),))
    assert after == Tail(9, {"a": Position(0, 8, 1008)})


def test_only_hidden_events_make_no_round_but_new_positions() -> None:
    tail = Tail(7, {"a": Position(0, 4, 0)})
    made, after = compose(tail, {"a": Step(Position(0, 5, 1005), (event(5, db="hidden"),))}, _shown, 0)
    assert made is None
    assert after == Tail(7, {"a": Position(0, 5, 1005)})


def test_lost_ids_come_before_the_members_events() -> None:
    tail = Tail(1, {"a": Position(0, 10, 0)})
    made, after = compose(tail, {"a": Step(Position(0, 31, 1031), (event(30), event(31)), lost=1)}, _shown, 0)
    assert made is not None and made.spans == (Span("a", 0, ((0, -1), (30, 31))),)
    assert after.next == 4


def test_a_restart_is_a_lost_id_in_the_new_epoch() -> None:
    made, after = compose(Tail(5, {"a": Position(0, 10, 0)}), {"a": Step(Position(1, 0, 0), lost=1)}, _shown, 0)
    assert made == Round(5, 0, (Span("a", 1, ((0, -1),)),))
    assert after == Tail(6, {"a": Position(1, 0, 0)})


def test_no_events_make_no_round_and_leave_the_tail() -> None:
    tail = Tail(5, {"a": Position(0, 10, 0)})
    assert compose(tail, {"a": Step(Position(0, 10, 0))}, _shown, 0) == (None, tail)
    assert compose(tail, {}, _shown, 0) == (None, tail)


def test_a_new_member_gets_a_position_and_no_ids() -> None:
    tail = Tail(5, {"a": Position(0, 10, 0)})
    made, after = compose(tail, {"b": Step(Position(0, 77, 0))}, _shown, 0)
    assert made is None
    assert after == Tail(5, {"a": Position(0, 10, 0), "b": Position(0, 77, 0)})


def test_the_ids_of_rounds_follow_each_other() -> None:
    tail = Tail(1)
    ids: list[int] = []
    for n in range(3):
        base = 10 * n + 1
        made, tail = compose(tail, {"a": Step(Position(0, base + 2, 0), (event(base), event(base + 1, db="hidden"),
                                                                          event(base + 2)))}, _shown, 0)
        assert made is not None
        ids.extend(r.merged for r in made.refs())
    assert ids == list(range(1, 7))
    assert tail.next == 7


def test_two_events_of_the_positions_id_listed_in_another_order_are_no_restart() -> None:
    second = event(10)
    second.eventTime = 1011
    probe, rest = split(AT, [second, event(10), event(11)])
    assert probe == Probe(1010)  # the event merged, wherever the metastore lists it
    assert rest == [second, event(11)]
    found = step(AT, 11, rest, probe, 5.0)
    assert found.position.epoch == 0 and found.lost == 0
