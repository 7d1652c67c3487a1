"""The bound on client connections (``max-connections``): one process's own (:class:`ConnectionBudget`), or
the pod's, shared by its workers (:class:`PodBudget`). The server admits against either; it never needs to know
about workers.

Each worker counts its own open client connections in its slot of one shared page (a memfd the supervisor
made and every worker maps); the pod's count is the sum of the slots. A worker admits a connection while that
sum is under the limit, so the bound holds for the pod, whichever worker the kernel hands a connection to. A
slot has one writer, its worker, so no lock is needed: two workers admitting at the same instant may each see
the other's count a moment late, which lets the pod exceed the limit by at most ``workers - 1`` connections.
The supervisor clears a dead worker's slot before it starts its replacement.
"""

from __future__ import annotations

import mmap
import os
import struct


class ConnectionBudget:
    """One process's bound: its own count against the limit (a single waggle process)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def admit(self) -> bool:
        if self.open() >= self.limit:
            return False
        self._add(1)
        return True

    def release(self) -> None:
        self._add(-1)

    def open(self) -> int:
        """Client connections open now, over everything that shares this bound."""
        return self.count

    def _add(self, n: int) -> None:
        self.count += n


class PodBudget(ConnectionBudget):
    """A worker's view of the pod's bound: its slot in the shared page, and the sum of all slots."""

    def __init__(self, fd: int, slots: int, index: int, limit: int) -> None:
        super().__init__(limit)
        self._map = mmap.mmap(fd, slots * 8)
        self._slots = memoryview(self._map).cast("q")
        self.index = index

    def open(self) -> int:
        return sum(self._slots)

    def _add(self, n: int) -> None:
        self.count += n
        self._slots[self.index] = self.count


def shared_page(slots: int) -> int:
    """A new shared page of ``slots`` zeroed counters, as a file descriptor workers inherit."""
    fd = os.memfd_create("waggle-connections", 0)
    os.ftruncate(fd, slots * 8)
    return fd


def clear_slot(fd: int, slots: int, index: int) -> None:
    """Zero a dead worker's count (its connections died with it)."""
    with mmap.mmap(fd, slots * 8) as page:
        struct.pack_into("q", page, index * 8, 0)
