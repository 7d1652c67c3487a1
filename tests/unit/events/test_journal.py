"""The journal's values and their text (waggle.events.journal): spans, rounds, tails, blocks, and the refs they give."""

from __future__ import annotations

import json

import pytest

from tests.unit.events.fakes import filler, full
from waggle.events.journal import (
    BLOCK_PAGES,
    PAGE_CHARS,
    Block,
    Position,
    Ref,
    Round,
    Span,
    Tail,
    block_first,
    block_name,
    refs_after,
    runs_of,
)


def test_a_span_counts_its_ids_and_lost_runs() -> None:
    span = Span("fed", 2, ((5, 9), (12, 12), (0, -3)))
    assert span.count == 9
    assert list(span.events()) == [5, 6, 7, 8, 9, 12, 0, 0, 0]


def test_a_span_is_written_as_runs_with_lost_ones_as_tilde() -> None:
    assert Span("fed", 2, ((0, -3), (5, 9), (12, 12))).text() == "fed@2:~3,5-9,12"


@pytest.mark.parametrize("member", ["fed", "a@b:c;d e", "x,y-z~1", "%41", "ü/ß\n", "@", ":"])
def test_a_span_reads_back_as_written_whatever_its_member_is_named(member: str) -> None:
    span = Span(member, 7, ((0, -1), (3, 4), (10, 10)))
    text = span.text()
    assert "\n" not in text and " " not in text and ";" not in text
    assert Span.parse(text) == span


def test_a_round_reads_back_from_its_start_and_ends_after_its_ids() -> None:
    made = Round(41, 1_700_000_000, (Span("a@b:c;d e", 0, ((5, 6),)), Span("fed", 3, ((0, -2), (9, 9)))))
    assert made.end == 46
    assert made.text() == "1700000000 a%40b%3Ac%3Bd%20e@0:5-6;fed@3:~2,9"
    assert Round.parse(41, made.text()) == made


def test_a_rounds_refs_are_its_ids_in_span_order() -> None:
    made = Round(10, 0, (Span("main", 0, ((7, 8),)), Span("fed", 1, ((0, -1), (3, 3)))))
    assert list(made.refs()) == [Ref(10, "main", 0, 7), Ref(11, "main", 0, 8), Ref(12, "fed", 1, 0),
                                 Ref(13, "fed", 1, 3)]


def test_a_round_without_spans_reads_back_empty() -> None:
    assert Round.parse(5, "123 ") == Round(5, 123, ())
    assert Round(5, 123, ()).end == 5


def test_a_tail_reads_back_and_is_written_in_member_order() -> None:
    tail = Tail(17, {"z": Position(1, 40, 1234), "a@b:c;d e": Position(0, 0, 0)})
    text = tail.text()
    assert list(json.loads(text)["positions"]) == ["a@b:c;d e", "z"]
    assert Tail.parse(text) == tail
    assert Tail.parse('{"next": 3}') == Tail(3, {})


def test_block_names_sort_as_their_first_ids_and_read_back() -> None:
    assert block_name(42) == "merged_log_0000000000000000042"
    assert block_first(block_name(42)) == 42
    assert sorted([block_name(100), block_name(9)]) == [block_name(9), block_name(100)]
    assert block_first("merged_log") is None
    assert block_first("merged_log_x1") is None
    assert block_first("other_0001") is None


def _block(first: int = 1) -> Block:
    """A block of three rounds: main 5-6, then fed's lost id and 3, then main 9."""
    block = Block.empty(Tail(first))
    rounds = [(Span("main", 0, ((5, 6),)),), (Span("fed", 1, ((0, -1), (3, 3))),), (Span("main", 0, ((9, 9),)),)]
    for n, spans in enumerate(rounds):
        made = Round(block.tail.next, 100 + n, spans)
        block = block.with_round(made, Tail(made.end, {"main": Position(0, 9, 1009), "fed": Position(1, 3, 0)}))
    return block


def test_a_block_reads_back_from_its_parameters() -> None:
    block = _block(7)
    params = block.parameters()
    assert sorted(params) == ["page.000", "tail"]
    assert params["page.000"].count("\n") == 2
    again = Block.parse(7, params)
    assert again == block
    assert [r.start for r in again.rounds] == [7, 9, 11]
    assert again.tail.next == 12
    assert again.name == block_name(7)


def test_a_block_without_a_tail_ends_after_its_rounds() -> None:
    params = _block(7).parameters()
    del params["tail"]
    assert Block.parse(7, params).tail == Tail(12)


def test_an_empty_block_starts_at_its_tails_next_id() -> None:
    block = Block.empty(Tail(30, {"fed": Position(0, 4, 0)}))
    assert (block.first, block.rounds, block.pages) == (30, (), ())
    assert block.parameters() == {"tail": block.tail.text()}
    assert Block.parse(30, block.parameters()) == block


def test_rounds_fill_a_page_then_start_the_next() -> None:
    block = Block.empty(Tail(1))
    while len(block.pages) < 3:
        made = Round(block.tail.next, 1_700_000_000, (Span("fed", 0, ((0, -1),) * 100),))
        block = block.with_round(made, Tail(made.end))
    assert all(len(page) <= PAGE_CHARS for page in block.pages)
    assert len(block.pages[0]) + 1 + len(block.rounds[-1].text()) > PAGE_CHARS  # the next line would not fit
    again = Block.parse(1, block.parameters())
    assert again.rounds == block.rounds
    assert sorted(block.parameters())[:3] == ["page.000", "page.001", "page.002"]


def test_a_round_longer_than_a_page_is_written_in_pages_that_fit() -> None:
    # a page of 1000 events of a member whose every other event is hidden: 500 runs of 7-digit ids
    made = Round(1, 1_700_000_000, (Span("fed", 0, tuple((i, i) for i in range(1_000_001, 1_002_000, 2))),))
    assert len(made.text()) > PAGE_CHARS
    block = Block.empty(Tail(1)).with_round(made, Tail(made.end))
    assert all(len(page) <= PAGE_CHARS for page in block.pages)
    assert list(refs_after([Block.parse(1, block.parameters())], 0)) == list(made.refs())


def test_a_block_is_full_with_its_pages_all_used_and_the_last_half_filled() -> None:
    block = Block.empty(Tail(1))
    while len(block.pages) < BLOCK_PAGES:
        assert not block.full
        made = filler(block.tail.next)
        block = block.with_round(made, Tail(made.end))
    assert len(block.pages[-1]) >= PAGE_CHARS // 2
    assert block.full
    assert full(Block.empty(Tail(1))).full


def test_a_block_with_all_its_pages_but_a_short_last_one_is_not_full() -> None:
    block = full(Block.empty(Tail(1)))
    short = Block(block.first, block.rounds, block.tail, (*block.pages[:-1], "0 fed@0:1"))
    assert not short.full


def test_a_round_must_start_at_the_blocks_next_id() -> None:
    block = _block(1)
    with pytest.raises(ValueError, match="does not follow"):
        block.with_round(Round(block.tail.next + 1, 0, (Span("fed", 1, ((4, 4),)),)), Tail(block.tail.next + 2))
    with pytest.raises(ValueError, match="does not follow"):
        block.with_round(Round(block.tail.next - 1, 0, (Span("fed", 1, ((4, 4),)),)), Tail(block.tail.next))


def test_a_blocks_tail_can_move_its_positions_but_not_its_next_id() -> None:
    block = _block(1)
    moved = block.with_tail(Tail(block.tail.next, {"fed": Position(1, 50, 0)}))
    assert (moved.first, moved.rounds, moved.pages) == (block.first, block.rounds, block.pages)
    assert moved.tail.positions == {"fed": Position(1, 50, 0)}
    with pytest.raises(ValueError, match="next merged id"):
        block.with_tail(Tail(block.tail.next + 1, {}))


def test_refs_after_walk_every_block_from_the_id_after() -> None:
    first = _block(1)  # ids 1-5
    second = _block(first.tail.next)  # ids 6-10
    every = list(refs_after([first, second], 0))
    assert [r.merged for r in every] == list(range(1, 11))
    assert every[:5] == [Ref(1, "main", 0, 5), Ref(2, "main", 0, 6), Ref(3, "fed", 1, 0), Ref(4, "fed", 1, 3),
                         Ref(5, "main", 0, 9)]
    assert [r.merged for r in refs_after([first, second], 3)] == list(range(4, 11))  # from inside a round
    assert [r.merged for r in refs_after([first, second], 5)] == list(range(6, 11))  # a block's last id
    assert [r.merged for r in refs_after([first, second], 7)] == [8, 9, 10]
    assert list(refs_after([first, second], 10)) == []
    assert list(refs_after([first, second], 99)) == []
    assert list(refs_after([], 0)) == []


def test_runs_of_join_ascending_ids_that_follow_each_other() -> None:
    assert runs_of([]) == ()
    assert runs_of([4]) == ((4, 4),)
    assert runs_of([1, 2, 3, 5, 7, 8]) == ((1, 3), (5, 5), (7, 8))
    assert runs_of(iter(range(10, 20))) == ((10, 19),)
