"""Which events of a member clients see through waggle, and under which database names: the federation's names
(:class:`waggle.routing.federation.Naming`) and ``mapped-tables``, as every call answers them. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from waggle.config.model import MetastoreConfig
from waggle.events.store import SYS_DB
from waggle.routing.access import table_visible
from waggle.routing.federation import Planner

__all__ = ["Shown"]


class Shown:
    """The names clients see, for one configuration (made again when the routes change)."""

    def __init__(self, planner: Planner, members: Mapping[str, MetastoreConfig]) -> None:
        self._namings = {name: planner.naming(member) for name, member in members.items()}
        self._members = members
        self._primary = planner.primary.name

    def db(self, member: str, name: str) -> str | None:
        """The name clients see for a member's database, or None when it is hidden (or waggle's own)."""
        naming = self._namings.get(member)
        lowered = name.lower()
        if naming is None or (member == self._primary and lowered == SYS_DB):
            return None
        names = naming.client_names(lowered)
        return names[0] if names else None

    def event(self, member: str, event: Any) -> bool:
        """Whether clients see the event: it names no database, or one they see, and a table they see."""
        db = event.dbName
        if not db:
            return member in self._namings
        if self.db(member, db) is None:
            return False
        table = event.tableName
        return not table or table_visible(self._members[member], db, table)
