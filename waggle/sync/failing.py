"""A policy that fails: its run of failed batches, how long to wait before the next batch, and which of them to
log.

A policy is **failing** from its first failed batch (status ``failed``: the batch did not run to its end, say a
source or target that refused the connection or did not answer in time (:func:`waggle.sync.hms.call_timeout`),
a lease another follower holds, or a bootstrap whose tables match nothing at the source) until a batch does not
fail (``partial`` counts as not failing: its failed tables are listed, the rest applied) or the follower finds
its source caught up (both metastores answered). ``/healthz``, ``--status`` and the log all use this one
definition.

After the n-th failed batch in a row a continuous policy waits ``poll-interval-max`` x 2^(n-1), at most
:data:`BACKOFF` x ``poll-interval-max`` (:func:`failure_wait`). The log says when the policy starts failing,
when its error changes to one not seen in this run (:func:`error_shape`), every :data:`REMIND_SECONDS` while it
goes on, and when it recovers (:class:`Failing` returns each of those as a :class:`Note`); the failed batches in
between are counted, not logged.

Pure: times are given (monotonic ``now`` for durations, ``at`` as UTC ISO text for what is shown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: failed batches back off up to ``poll-interval-max`` times this
BACKOFF = 4.0
#: a policy that goes on failing says so again this often (seconds)
REMIND_SECONDS = 60.0
#: distinct errors of one run of failures each logged when first seen; past them, the reminders carry the error
DISTINCT_ERRORS = 5

STARTED = "sync.policy_failing"
CHANGED = "sync.policy_error_changed"
REMINDER = "sync.policy_still_failing"
RECOVERED = "sync.policy_recovered"


def error_shape(error: str) -> str:
    """An error with its numbers blanked: the same error, timed differently (``... refused after 3 ms``), is not a
    new one."""
    return _NUMBERS.sub("#", error)


_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


def failure_wait(failed_batches: int, poll_interval_max: float, backoff: float = BACKOFF) -> float:
    """Seconds to wait after the ``failed_batches``-th failed batch in a row: ``poll_interval_max`` doubling from
    the first, up to ``backoff`` times it."""
    doublings = min(max(failed_batches - 1, 0), 32)
    return min(poll_interval_max * 2.0 ** doublings, poll_interval_max * backoff)


@dataclass(frozen=True, slots=True)
class Note:
    """A line to log: its event name and fields (``warning`` unless it says the policy recovered)."""

    event: str
    fields: dict[str, object]

    @property
    def level(self) -> str:
        return "info" if self.event == RECOVERED else "warning"


@dataclass(slots=True)
class Failing:
    """One policy's run of failed batches, if it is in one."""

    remind_every: float = REMIND_SECONDS
    since: float | None = None  # monotonic time of the run's first failed batch
    since_at: str | None = None  # the same, as UTC ISO text
    batches: int = 0  # failed batches in the run
    error: str | None = None  # the last one's
    last_at: str | None = None  # when the last one started
    _reminded: float = 0.0
    _errors: set[str] = field(default_factory=set)

    @property
    def failing(self) -> bool:
        return self.since is not None

    def seconds(self, now: float) -> float:
        """How long the policy has been failing (0 when it is not)."""
        return 0.0 if self.since is None else max(0.0, now - self.since)

    def failed(self, now: float, at: str, error: str, began: float | None = None) -> Note | None:
        """A batch that started at ``at`` (``began`` on the monotonic clock, ``now`` when not given) failed with
        ``error``, ending at ``now``; what to log, if anything."""
        self.batches += 1
        self.last_at = at
        previous, self.error = self.error, error
        shape = error_shape(error)
        if self.since is None:
            self.since, self.since_at, self._reminded = now if began is None else began, at, now
            self._errors = {shape}
            return Note(STARTED, {"since": at, "error": error})
        if shape not in self._errors and len(self._errors) < DISTINCT_ERRORS:
            self._errors.add(shape)
            self._reminded = now
            return Note(CHANGED, {"since": self.since_at, "failed_batches": self.batches, "error": error,
                                  "previous_error": previous})
        if now - self._reminded >= self.remind_every:
            self._reminded = now
            return Note(REMINDER, {"since": self.since_at, "failing_seconds": round(self.seconds(now), 1),
                                   "failed_batches": self.batches, "error": error})
        return None

    def recovered(self, now: float) -> Note | None:
        """A batch did not fail, or the source was found caught up: the run ends (a note when there was one)."""
        if self.since is None:
            return None
        note = Note(RECOVERED, {"failed_since": self.since_at, "failing_seconds": round(self.seconds(now), 1),
                                "failed_batches": self.batches, "last_error": self.error})
        self.since = self.since_at = self.error = self.last_at = None
        self.batches = 0
        self._errors = set()
        return note

    def as_json(self, now: float) -> dict[str, object]:
        """What ``/healthz`` says of it, for each policy."""
        return {"failing": self.failing, "failing_since": self.since_at, "failing_seconds": round(self.seconds(now), 1),
                "failed_batches": self.batches}
