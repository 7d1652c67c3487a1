"""Member health as plain values, for the pure core's tests: the planner reads health as it reads everything
else, so a test names the members that are down."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PlainHealth:
    down: set[str] = field(default_factory=set)

    def is_up(self, name: str) -> bool:
        return name not in self.down

    def down_message(self, name: str) -> str:
        return f"metastore '{name}' is down"
