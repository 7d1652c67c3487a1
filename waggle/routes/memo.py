"""What the call core remembers between calls, kept with the routes snapshot
(:attr:`waggle.routes.snapshot.Routes.memo`) rather than in module globals: a routes snapshot made for a new
configuration or database map brings an empty one, and each part also checks the planner or map it was filled
for, since a snapshot made by ``replace`` (new links) shares its predecessor's.

Names translated through one :class:`~waggle.routing.federation.Naming` are remembered while its map lives. A
naming and its database map never change (a reload, or a new map, makes new ones), and calls name the same few
databases over and over: a translation looked up once per map costs a dictionary lookup afterwards instead of
a parse and a walk through the map. Bounded per naming, since names are the clients'.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from waggle.hms.methods import MethodSpec
from waggle.routing.federation import Decision, Naming, Planner

T = TypeVar("T")


class NameMemo(Generic[T]):
    """Translations of names through a naming, remembered per naming for the database map of the last naming
    asked. The caller looks a name up in :meth:`of`'s dictionary and adds what is missing (inline: a call per
    name would cost as much as part of what it saves)."""

    LIMIT = 65536

    def __init__(self) -> None:
        self._dbmap: object = None
        self._by_naming: dict[Naming, dict[str, T]] = {}

    def of(self, naming: Naming) -> dict[str, T]:
        """The translations remembered for ``naming``, emptied when the map changed."""
        if naming.dbmap is not self._dbmap:
            self._dbmap, self._by_naming = naming.dbmap, {}
        known = self._by_naming.get(naming)
        if known is None or len(known) >= self.LIMIT:
            known = self._by_naming[naming] = {}
        return known


class ReadDecisions:
    """The planner's decisions for reads, remembered: a read names no lock and no table to check, and the
    planner's answer to it depends only on the method and the names (not on the whitelist, which only writes
    consult). The same few databases are read over and over; a remembered decision saves about 3 us of the
    5.5 us a relayed call's plan took (measured on get_table, names unchanged). Remembered per planner (a
    reload or a new database map makes a new one); at most ``LIMIT`` of them, since names are the clients'."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._planner: Planner | None = None
        self._decided: dict[tuple[str, tuple[str, ...]], Decision] = {}

    def decide(self, planner: Planner, spec: MethodSpec, names: list[str]) -> Decision:
        if planner is not self._planner:
            self._planner, self._decided = planner, {}
        key = (spec.name, tuple(names))
        decision = self._decided.get(key)
        if decision is None:
            decision = planner.decide(spec, names)
            if len(self._decided) >= self.LIMIT:
                self._decided = {}
            self._decided[key] = decision
        return decision


class BySnapshot(Generic[T]):
    """Values by method name, kept for the one routes snapshot they were decided under (a snapshot made by
    ``replace`` shares its predecessor's memo, so the snapshot itself is checked)."""

    __slots__ = ("_by_name", "_routes")

    def __init__(self) -> None:
        self._routes: object = None
        self._by_name: dict[str, T] = {}

    def of(self, routes: object) -> dict[str, T]:
        if routes is not self._routes:
            self._routes, self._by_name = routes, {}
        return self._by_name


class Memo:
    """Everything the core remembers for one routes snapshot."""

    __slots__ = ("lanes", "member_names", "reads", "shown")

    def __init__(self) -> None:
        #: the plain relays decided per method (:mod:`waggle.call.lane`)
        self.lanes: BySnapshot[object] = BySnapshot()
        #: the planner's decisions for reads
        self.reads = ReadDecisions()
        #: a client's name as a member knows it
        self.member_names: NameMemo[str] = NameMemo()
        #: the names clients see for a member's database (merging a one-member listing of four databases: 3.5 us
        #: with the map walked for each, 2.6 us with them remembered; measured)
        self.shown: NameMemo[tuple[str, ...]] = NameMemo()
