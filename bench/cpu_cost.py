"""CPU a server process spends per call: its CPU time (every thread, from ``/proc/PID/task/*/schedstat``) before
and after a run of calls, divided by their number. The client's own CPU is not counted, nor the metastore's.

Several servers are measured in one run, in random order within each repeat, and each keeps the best of its
repeats: on a shared machine noise only ever adds CPU time (a cache cold after someone else ran), so the
minimum is the estimate closest to the server's own cost.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of process ``pid`` so far, to the nanosecond."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended meanwhile
    return total / 1e9


@dataclass
class Server:
    label: str
    pid: int
    client: Any
    db: str  # the database's name as this server's clients write it


def per_call(servers: list[Server], call: Callable[[Any, str], Any], calls: int, repeats: int) -> dict[str, float]:
    """Seconds of each server's CPU per ``call``: the best of ``repeats`` runs of ``calls`` calls each."""
    best = {s.label: float("inf") for s in servers}
    for s in servers:  # warm up: connections open, code paths taken, caches filled
        for _ in range(max(20, calls // 10)):
            call(s.client, s.db)
    for _ in range(repeats):
        for s in random.sample(servers, len(servers)):
            before = cpu_seconds(s.pid)
            for _ in range(calls):
                call(s.client, s.db)
            best[s.label] = min(best[s.label], (cpu_seconds(s.pid) - before) / calls)
    return best
