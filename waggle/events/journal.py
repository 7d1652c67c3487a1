"""The merged log's journal: which member's event each merged id stands for. Pure: the values and their text.

The merger (:mod:`waggle.events.merger`) reads every member's log, then writes one **round**: merged ids, one after
another, for the new events of each member in turn, in each member's order. A round is one line of text::

    <epoch seconds> <member>@<epoch>:<runs>;<member>@<epoch>:<runs>

``runs`` are ascending ranges of the member's event ids (``5-9``, ``12``); a run ``~N`` holds N ids for events
that are lost (purged from the member, or its log started again before the merger read them): a consumer sees
no event under those ids, so its next id jumps, the way Hive shows a gap. A member's ``epoch`` grows each time
its log starts again (its ids mean other events then).

Rounds are kept in **blocks** (:class:`Block`): the parameters of one view of the primary's ``waggle_sys``
database (a view has no files), named ``merged_log_<first id>``: the rounds in pages of text (``page.<n>``) and
the **tail** (``tail``, JSON): the next merged id and each member's position (epoch, last event id read, its
time). A block is written whole with each round, so the rounds and the positions they leave never disagree.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import quote, unquote

__all__ = ["BLOCK_PREFIX", "Block", "Position", "Ref", "Round", "Span", "Tail", "block_first", "block_name",
           "refs_after", "runs_of"]

#: the names of the blocks' views (the root view ``merged_log`` holds the merger's lease)
BLOCK_PREFIX = "merged_log_"
#: characters a page of rounds holds at most (a metastore keeps parameter values of 4000 characters)
PAGE_CHARS = 3500
#: pages a block holds before the next round starts a new block
BLOCK_PAGES = 24

Run = tuple[int, int]  # first and last member event id, inclusive; first 0 and last -N: N lost ids


class Ref(NamedTuple):
    """One merged id and the member event it stands for (``event`` 0: a lost one). A Hive 2 metastore may give two
    events one id (two writes reading the same next id, HIVE-16886): ``nth`` says which of them."""

    merged: int
    member: str
    epoch: int
    event: int
    nth: int = 0


@dataclass(frozen=True, slots=True)
class Span:
    """One member's events in a round."""

    member: str
    epoch: int
    runs: tuple[Run, ...]

    @property
    def count(self) -> int:
        return sum(-last if first == 0 else last - first + 1 for first, last in self.runs)

    def events(self) -> Iterator[int]:
        """The member's event ids, one per merged id (0 for a lost one)."""
        for first, last in self.runs:
            if first == 0:
                yield from (0 for _ in range(-last))
            else:
                yield from range(first, last + 1)

    def text(self) -> str:
        runs = ",".join(f"~{-b}" if a == 0 else (str(a) if a == b else f"{a}-{b}") for a, b in self.runs)
        return f"{quote(self.member, safe='')}@{self.epoch}:{runs}"

    @classmethod
    def parse(cls, text: str) -> Span:
        who, _, runs = text.partition(":")
        member, _, epoch = who.rpartition("@")
        parsed: list[Run] = []
        for run in runs.split(","):
            if run.startswith("~"):
                parsed.append((0, -int(run[1:])))
            else:
                a, _, b = run.partition("-")
                parsed.append((int(a), int(b or a)))
        return cls(unquote(member), int(epoch), tuple(parsed))


@dataclass(frozen=True, slots=True)
class Round:
    """The merged ids ``start`` .. ``end - 1``, given at ``time`` (epoch seconds) to ``spans`` in order."""

    start: int
    time: int
    spans: tuple[Span, ...]

    @property
    def end(self) -> int:
        return self.start + sum(s.count for s in self.spans)

    def refs(self) -> Iterator[Ref]:
        merged = self.start
        for span in self.spans:
            for event in span.events():
                yield Ref(merged, span.member, span.epoch, event)
                merged += 1

    def text(self) -> str:
        return f"{self.time} " + ";".join(s.text() for s in self.spans)

    def pieces(self, limit: int) -> tuple[Round, ...]:
        """This round as consecutive rounds whose text fits ``limit`` characters (split between runs)."""
        if len(self.text()) <= limit:
            return (self,)
        made: list[Round] = []
        spans: list[Span] = []
        start = self.start
        for span in self.spans:
            for run in span.runs:
                piece = Span(span.member, span.epoch, (run,))
                if spans and spans[-1].member == span.member and spans[-1].epoch == span.epoch:
                    piece = Span(span.member, span.epoch, (*spans[-1].runs, run))
                    candidate = [*spans[:-1], piece]
                else:
                    candidate = [*spans, piece]
                if spans and len(Round(start, self.time, tuple(candidate)).text()) > limit:
                    done = Round(start, self.time, tuple(spans))
                    made.append(done)
                    start, candidate = done.end, [Span(span.member, span.epoch, (run,))]
                spans = candidate
        made.append(Round(start, self.time, tuple(spans)))
        return tuple(made)

    @classmethod
    def parse(cls, start: int, text: str) -> Round:
        when, _, spans = text.partition(" ")
        return cls(start, int(when), tuple(Span.parse(s) for s in spans.split(";") if s))


class Position(NamedTuple):
    """How far the merger has read one member's log."""

    epoch: int
    last: int  # the last event id read (0: none yet in this epoch)
    time: int  # the time of the first event of that id (epoch seconds), 0 when unknown
    same: int = 1  # how many events of that id were read (more than one: HIVE-16886)


@dataclass(frozen=True, slots=True)
class Tail:
    """What a block leaves: the next merged id, and each member's position."""

    next: int
    positions: Mapping[str, Position] = field(default_factory=dict)

    def text(self) -> str:
        return json.dumps({"next": self.next, "positions": {m: list(p) for m, p in sorted(self.positions.items())}},
                          separators=(",", ":"))

    @classmethod
    def parse(cls, text: str) -> Tail:
        data = json.loads(text)
        return cls(int(data["next"]), {str(m): Position(*(int(v) for v in p))
                                       for m, p in (data.get("positions") or {}).items()})


@dataclass(frozen=True, slots=True)
class Block:
    """Rounds from merged id ``first`` on, and the tail they leave."""

    first: int
    rounds: tuple[Round, ...]
    tail: Tail
    #: the pages' text as written (a round is appended to the last page that has room)
    pages: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return block_name(self.first)

    @property
    def full(self) -> bool:
        return len(self.pages) >= BLOCK_PAGES and len(self.pages[-1]) >= PAGE_CHARS // 2

    @classmethod
    def empty(cls, tail: Tail) -> Block:
        return cls(tail.next, (), tail)

    def with_round(self, added: Round, tail: Tail) -> Block:
        """This block with one more round (starting at its tail's next id), leaving ``tail``."""
        if added.start != self.tail.next:
            raise ValueError(f"a round from id {added.start} does not follow the block's next id {self.tail.next}")
        pages = list(self.pages)
        pieces = added.pieces(PAGE_CHARS)  # a page never holds more than a metastore keeps of a parameter
        for piece in pieces:
            line = piece.text()
            if pages and len(pages[-1]) + 1 + len(line) <= PAGE_CHARS:
                pages[-1] = pages[-1] + "\n" + line
            else:
                pages.append(line)
        return Block(self.first, (*self.rounds, *pieces), tail, tuple(pages))

    def with_tail(self, tail: Tail) -> Block:
        """This block leaving other positions (a member's events read that no client is shown)."""
        if tail.next != self.tail.next:
            raise ValueError("positions alone cannot move the next merged id")
        return Block(self.first, self.rounds, tail, self.pages)

    def parameters(self) -> dict[str, str]:
        params = {f"page.{n:03d}": page for n, page in enumerate(self.pages)}
        params["tail"] = self.tail.text()
        return params

    @classmethod
    def parse(cls, first: int, params: Mapping[str, str]) -> Block:
        pages = tuple(params[k] for k in sorted(k for k in params if k.startswith("page.")))
        rounds: list[Round] = []
        start = first
        for page in pages:
            for line in page.split("\n"):
                if line:
                    found = Round.parse(start, line)
                    rounds.append(found)
                    start = found.end
        tail = Tail.parse(params["tail"]) if "tail" in params else Tail(start)
        return cls(first, tuple(rounds), tail, pages)


def block_name(first: int) -> str:
    """The name of the view of the block whose first merged id is ``first``."""
    return f"{BLOCK_PREFIX}{first:019d}"


def block_first(name: str) -> int | None:
    """The first merged id of a block's view, from its name; None for another name."""
    if not name.startswith(BLOCK_PREFIX):
        return None
    digits = name[len(BLOCK_PREFIX):]
    return int(digits) if digits.isdigit() else None


def refs_after(blocks: Sequence[Block], after: int) -> Iterator[Ref]:
    """Every merged id above ``after`` with its member event, in order (blocks in order of their first id)."""
    seen: dict[tuple[str, int, int], int] = {}  # a member's event id given more than one merged id: which
    previous: Round | None = None
    for block in blocks:
        if block.tail.next <= after + 1:
            previous = block.rounds[-1] if block.rounds else previous
            continue
        for found in block.rounds:
            if found.end <= after + 1:
                previous = found
                continue
            if previous is not None:  # events of one id are taken in one round or the next
                for ref in previous.refs():
                    seen[(ref.member, ref.epoch, ref.event)] = seen.get((ref.member, ref.epoch, ref.event), 0) + 1
                previous = None
            for ref in found.refs():
                key = (ref.member, ref.epoch, ref.event)
                nth = seen.get(key, 0)
                seen[key] = nth + 1
                if ref.merged > after:
                    yield ref._replace(nth=nth) if nth else ref


def runs_of(ids: Iterable[int]) -> tuple[Run, ...]:
    """Ascending member event ids as runs (an id given twice starts a run again)."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return tuple((a, b) for a, b in runs)
