"""Names translated through one :class:`~waggle.routing.federation.Naming`, remembered while its map lives.

A naming and its database map never change (a reload, or a new map, makes new ones), and calls name the same few
databases over and over: a translation looked up once per map costs a dictionary lookup afterwards instead of
a parse and a walk through the map. Bounded per naming, since names are the clients' and databases come and go.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from waggle.routing.federation import Naming

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
