"""What the delegation-token tests share: a clock the test turns, and the token store in memory (waggle keeps it in
the primary's token store, waggle.upstream.token_store)."""

from __future__ import annotations


class Clock:
    """Milliseconds since the epoch, moved only by the test."""

    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class MemoryStore:
    """The token store's three calls, over a dict."""

    def __init__(self) -> None:
        self.records: dict[str, str] = {}

    def put(self, key: str, value: str) -> None:
        self.records[key] = value

    def get(self, key: str) -> str | None:
        return self.records.get(key)

    def remove(self, key: str) -> bool:
        return self.records.pop(key, None) is not None
