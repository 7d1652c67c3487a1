"""Lock ids that name the metastore that granted them. Pure: numbers and names in, numbers and names out.

A metastore's lock ids are its own: two members grant the same ids, and only the one that granted an id can check,
heartbeat or release it. A client shows waggle an id on any of its connections (Iceberg's Java catalog locks on one
connection of its pool and checks and unlocks on another; ``waggle serve --workers N`` puts one client's
connections in several processes), so the id itself says whose it is:

- the primary's ids are shown as they are (slot 0), as Waggle Dance does;
- a federated member's id ``n`` is shown as ``(slot << 48) | n``: the member's slot (1 to 32767) in the top bits;
  a call carrying it is sent to that member with ``n`` (:func:`decode`), and an id whose slot names no member of
  the federation is refused;
- an id of a member that does not fit in 48 bits (or is negative) cannot carry a slot: it is shown as it is and
  remembered on the client connection that took it (:attr:`waggle.call.values.Session.lock_owners`), as before.

**Slots** (:func:`assign`). A member's slot is ``zlib.crc32(name) % 32767 + 1`` (its configured name, UTF-8). When
members collide, they take their slots in the order of their names (sorted): the first keeps its slot, each next one
probes on (slot + 1, wrapping from 32767 to 1) to the first slot no earlier member took. The rule depends on the
configured names only, so every worker and every replica with the same federation agrees, across restarts.

**Reloads.** A member keeps its slot as long as no member whose name sorts before it and collides with it comes or
goes. A reload that removes a member refuses its ids (no guess: the lock is gone with it). A reload that moves a
colliding member's slot (a colliding member added before it, or removed) changes what its ids in flight name: they
are refused, or, should the slot now be another colliding member's, sent there, where the id is not a lock of that
member's (NoSuchLockException) or, rarely, another lock. Such a client's lock is then lost as if the member had
restarted: Hive's lock timeout frees it. A collision needs two members among 32767 slots (about 1 in 3,000 for 10
members), and a reload changing one while a lock is held is rarer still.
"""

from __future__ import annotations

import copy
import functools
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: the bits of a member's own lock id; the slot sits above them
ID_BITS = 48
#: the greatest slot: 15 bits, so that a shown id stays a positive i64
MAX_SLOT = (1 << 15) - 1
_ID_MASK = (1 << ID_BITS) - 1

#: a path of attribute names into a decoded Thrift struct (lists along the way are walked)
Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Slots:
    """The slots of a federation's members (the primary has none: its ids are slot 0)."""

    #: member's name -> its slot
    of: Mapping[str, int]
    #: slot -> member's name
    named: Mapping[int, str]


def natural_slot(name: str) -> int:
    """Where a member's slot is when no other member collides with it."""
    return zlib.crc32(name.encode("utf-8")) % MAX_SLOT + 1


def assign(names: Iterable[str]) -> Slots:
    """The slots of the federated members named (see the module's docstring for the rule)."""
    return _assign(tuple(sorted(set(names))))


@functools.lru_cache(maxsize=16)
def _assign(names: tuple[str, ...]) -> Slots:
    if len(names) > MAX_SLOT:
        raise ValueError(f"{len(names)} federated metastores: lock ids have room for {MAX_SLOT}")
    of: dict[str, int] = {}
    named: dict[int, str] = {}
    for name in names:
        slot = natural_slot(name)
        while slot in named:
            slot = slot % MAX_SLOT + 1
        of[name], named[slot] = slot, name
    return Slots(of, named)


def encode(slot: int, own: int) -> int | None:
    """The id a client is shown for a member's lock id ``own``; None when ``own`` has no room for a slot."""
    if not 0 <= own <= _ID_MASK:
        return None
    return (slot << ID_BITS) | own


def decode(shown: int) -> tuple[int, int]:
    """(slot, the member's own id) of an id a client shows (slot 0: the primary's, as it is)."""
    if shown < 0:
        return 0, shown
    return shown >> ID_BITS, shown & _ID_MASK


def shown_ids(result: Any, paths: Iterable[Path], slot: int) -> None:
    """Make the lock ids at ``paths`` of a member's decoded ``result`` the ones a client is shown (in place); an id
    that has no room for a slot stays as it is."""
    def show(own: int) -> int:
        shown = encode(slot, own)
        return own if shown is None else shown

    for path in paths:
        _rewrite(result, path, show)


def with_id(args: Any, path: Path, own: int) -> Any:
    """A copy of a call's ``args`` carrying the member's own lock id at ``path``; ``args`` stay as they came."""
    out = copy.copy(args)
    parent = out
    for attr in path[:-1]:
        child = copy.copy(getattr(parent, attr))
        setattr(parent, attr, child)
        parent = child
    setattr(parent, path[-1], own)
    return out


def _rewrite(obj: Any, path: Path, fn: Callable[[int], int]) -> None:
    if obj is None:
        return
    if isinstance(obj, list):
        for item in obj:
            _rewrite(item, path, fn)
        return
    attr = path[0]
    value = getattr(obj, attr, None)
    if len(path) > 1:
        _rewrite(value, path[1:], fn)
    elif value is not None:
        setattr(obj, attr, fn(int(value)))
