"""What the follower and the service that runs it say to each other: one policy's batch of work
(:class:`Execution`) and where a policy stands (:class:`PolicyState`).

The follower (:mod:`waggle.sync.follow`) produces them; the service (:mod:`waggle.sync.service`) turns them into
rows of ``waggle_sys.replication_metrics``, Prometheus series, ``--status`` lines and JSON log lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

BOOTSTRAP, INCREMENTAL = "bootstrap", "incremental"
SUCCEEDED, FAILED, PARTIAL = "succeeded", "failed", "partial"  # partial: some tables failed, the rest applied


@dataclass(frozen=True, slots=True)
class Execution:
    """One batch of a policy: a bootstrap, or one page of events applied and checkpointed."""

    policy: str
    phase: str  # BOOTSTRAP or INCREMENTAL
    from_event: int  # the checkpoint before the batch
    to_event: int  # the checkpoint after it
    objects: int = 0  # tables and databases created, altered, renamed or dropped
    partitions: int = 0  # partitions added, altered or dropped
    bytes: int = 0  # bytes copied (copy mode)
    seconds: float = 0.0
    status: str = SUCCEEDED
    error: str | None = None
    started_at: str = ""  # UTC, ISO 8601
    #: events read in the batch, by (event type, outcome); outcome: applied, skipped (out of scope, or no
    #: change), failed
    events: Mapping[tuple[str, str], int] = field(default_factory=dict)
    #: why a bootstrap ran: "first run", "gap: events 11-40 were purged", "policy changed", "requested"
    bootstrap_reason: str | None = None
    #: target tables (db.table) that failed in this batch, with the error
    failed_tables: Mapping[str, str] = field(default_factory=dict)
    #: seconds from the newest applied event's commit at the source (its eventTime) to the batch's end
    lag_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class PolicyState:
    """Where a policy stands, for ``--status``, ``/metrics`` and ``/healthz``."""

    policy: str
    source: str
    checkpoint: int | None  # None: never bootstrapped
    source_event: int | None  # the source's current notification event id, when last read
    lag_events: int | None
    lag_seconds: float | None
    failed_tables: Mapping[str, str] = field(default_factory=dict)


class WriteBudget(Protocol):
    """What a policy's writes wait on: a share of the target's write budget (``Metastore._turn`` calls
    ``acquire`` before each write call)."""

    def acquire(self) -> None: ...
