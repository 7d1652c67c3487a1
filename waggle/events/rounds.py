"""What one read of a member's log adds to the merged log, and the round that the reads of every member make.
Pure: the merger (:mod:`waggle.events.merger`) does the reading and the writing.

A member's read starts at its position: the last event id merged, read again with the events after it (a Hive 2
metastore may give two events one id, HIVE-16886: the second may commit just after the first was read). The
events taken are those that follow without a hole. A hole right after the position is either an id handed out
whose change has not committed yet (the event at the position is still held: the hole is waited for,
:data:`HOLE_SECONDS` at most, then passed) or events purged before the merger read them (the event at the position
is gone: one lost id is journaled, and the merger goes on). A log whose newest id is below the position, or whose
event at the position is another event than the one merged, has started again: a new epoch, from id 1, after one
lost id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from waggle.events.journal import Position, Round, Run, Span, Tail, runs_of

__all__ = ["HOLE_SECONDS", "Probe", "Step", "compose", "split", "step"]

#: how long a hole after a member's position is waited for before it is passed (as the cache's readers wait)
HOLE_SECONDS = 10.0


class Probe(NamedTuple):
    """The event at a member's position, read again: ``time`` is its time, or None when it is no longer held."""

    time: int | None


def split(position: Position, page: Sequence[Any]) -> tuple[Probe, list[Any]]:
    """A page read from the position's id on: the event at the position as read again, and the events not taken
    yet (those after the position, and more of its id than were taken)."""
    at = [e for e in page if e.eventId == position.last]
    # the one merged first, when that id holds two events (in whichever order the metastore lists them)
    merged = next((e for e in at if int(e.eventTime or 0) == position.time), at[0] if at else None)
    probe = Probe(None if merged is None else int(merged.eventTime or 0))
    others = [e for e in at if e is not merged]
    return probe, others[position.same - 1:] + [e for e in page if e.eventId > position.last]


class Step(NamedTuple):
    """One member's part of the next round."""

    position: Position
    taken: tuple[Any, ...] = ()  # NotificationEvents, ascending, without holes
    lost: int = 0  # ids journaled for events lost before them
    waiting_since: float | None = None  # when a hole right after the position was first seen


def step(position: Position | None, current: int, page: Sequence[Any], probe: Probe | None, now: float,
         waiting_since: float | None = None) -> Step:
    """One member's step, from its position (None: the member is new to the merged log, which starts at its
    newest event), the log's newest id, the events not taken yet (:func:`split`), the event at the position read
    again (None: not read) and when a hole after it was first seen."""
    if position is None:
        return Step(Position(0, current, 0))
    restarted = current < position.last or (
        probe is not None and probe.time is not None and position.time and probe.time != position.time)
    if restarted:
        return Step(Position(position.epoch + 1, 0, 0), lost=1)
    if not page:
        return Step(position)
    first = int(page[0].eventId)
    lost = 0
    if first not in (position.last, position.last + 1) and position.last > 0:
        if probe is None:
            raise ValueError("a hole after the position needs the event at the position probed")
        if probe.time is None:
            lost = 1  # purged past the position
        elif waiting_since is None:
            return Step(position, waiting_since=now)
        elif now - waiting_since < HOLE_SECONDS:
            return Step(position, waiting_since=waiting_since)
    taken = [page[0]]
    for event in page[1:]:
        if event.eventId not in (taken[-1].eventId, taken[-1].eventId + 1):
            break
        taken.append(event)
    last = int(taken[-1].eventId)
    same = sum(1 for e in taken if e.eventId == last)
    if last == position.last:  # more events of the position's id
        return Step(position._replace(same=position.same + same), tuple(taken), lost)
    first_of_last = next(e for e in taken if e.eventId == last)
    return Step(Position(position.epoch, last, int(first_of_last.eventTime or 0), same), tuple(taken), lost)


def compose(tail: Tail, steps: Mapping[str, Step], shown: Callable[[str, Any], bool], now: float
            ) -> tuple[Round | None, Tail]:
    """The round the members' steps make (members in the order given; only the events ``shown(member, event)``
    get ids), or None when none has an id to give; and the tail it leaves."""
    spans: list[Span] = []
    positions = dict(tail.positions)
    for member, found in steps.items():
        positions[member] = found.position
        runs: list[Run] = [(0, -found.lost)] if found.lost else []
        runs.extend(runs_of(int(e.eventId) for e in found.taken if shown(member, e)))
        if runs:
            spans.append(Span(member, found.position.epoch, tuple(runs)))
    if not spans:
        return None, Tail(tail.next, positions)
    made = Round(tail.next, int(now), tuple(spans))
    return made, Tail(made.end, positions)
