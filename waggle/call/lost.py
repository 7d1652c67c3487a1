"""A call whose metastore was lost under it: planned again, or answered saying what is known. Pure.

What the failure says decides (:class:`~waggle.upstream.client.Lost`):

- **A read** whose metastore turned out gone (no connection could be opened), was found down while the call
  waited (a hung metastore), or dropped its connection before any reply, is planned again at once. The health
  checks now say the metastore is down (except after a dropped connection, which is sent once more on a fresh
  connection): a copy answers where ``read-from-copies`` allows, else the metastore's down message. A read is
  planned again at most :data:`MAX_AGAIN` times, and sent again after a dropped connection once.
- **A write** whose request reached the metastore, and that got no reply (dropped, let go, timed out), may have
  been applied: its answer says that the outcome is unknown, naming the metastore, so the client checks before
  it retries. A write that never left waggle (no connection) failed, and says only that.
"""

from __future__ import annotations

from waggle.call.values import Call
from waggle.hms.methods import Access
from waggle.upstream.client import Lost, UpstreamError

#: a read is planned again at most this many times after its metastore was lost
MAX_AGAIN = 2
#: outcomes recorded for such answers (waggle.call.finish.ERROR_KINDS counts both against the metastore)
UPSTREAM_ERROR, UNKNOWN_OUTCOME = "upstream_error", "unknown_outcome"

_PLAN_AGAIN = (Lost.UNREACHABLE, Lost.RELEASED, Lost.DROPPED)
_MAY_HAVE_APPLIED = (Lost.DROPPED, Lost.RELEASED, Lost.TIMED_OUT)


def is_read(call: Call) -> bool:
    spec = call.spec
    return spec is not None and spec.access is Access.READ and not call.oneway


def again(call: Call, error: UpstreamError) -> bool:
    """Whether ``call``, which failed with ``error``, is planned again (the health checks know of the failure)."""
    lost = error.lost
    if lost not in _PLAN_AGAIN or error.partial_reply_sent or not is_read(call) or call.attempt >= MAX_AGAIN:
        return False
    return lost is not Lost.DROPPED or call.attempt == 0


def answer(call: Call, error: UpstreamError) -> tuple[str, str]:
    """(the message, the outcome) of a call that failed with ``error`` and is not planned again."""
    if error.sent and error.lost in _MAY_HAVE_APPLIED and not is_read(call):
        return (f"{error}. The outcome of {call.name} is unknown: metastore '{error.member}' may have applied it. "
                f"Check its state before you retry", UNKNOWN_OUTCOME)
    return str(error), UPSTREAM_ERROR
