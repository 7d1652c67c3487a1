"""A call whose metastore was lost under it: planned again, or answered saying what is known. Pure.

What the failure says decides (:class:`~waggle.upstream.client.Lost`):

- **A read** whose metastore turned out gone (no connection could be opened), was found down while the call
  waited (a hung metastore), or dropped its connection before any reply, is planned again at once, at most
  :data:`MAX_AGAIN` times. The metastore is then down (:func:`gone`), and the plan answers from a copy where
  ``read-from-copies`` allows, else with the metastore's down message. A first dropped connection alone does not
  make it down (a metastore may close one connection and serve the next): the read is sent once more, on a fresh
  connection, and a second drop in the same call makes it down.
- **A write** whose request reached the metastore, and that got no reply (dropped, let go, timed out), may have
  been applied: its answer says that the outcome is unknown, naming the metastore, so the client checks before
  it retries. A write that never left waggle (no connection) failed, and says only that.
"""

from __future__ import annotations

from waggle.call.values import Call, Outcome
from waggle.hms.methods import Access
from waggle.upstream.client import Lost, UpstreamError
from waggle.upstream.pool import Overloaded

#: a read is planned again at most this many times after its metastore was lost
MAX_AGAIN = 2

_PLAN_AGAIN = (Lost.UNREACHABLE, Lost.RELEASED, Lost.DROPPED)
_MAY_HAVE_APPLIED = (Lost.DROPPED, Lost.RELEASED, Lost.TIMED_OUT)


def is_read(call: Call) -> bool:
    spec = call.spec
    return spec is not None and spec.access is Access.READ and not call.oneway


def gone(call: Call, error: UpstreamError) -> bool:
    """Whether ``error`` shows ``call``'s metastore gone: no connection could be opened, or a read's connection
    dropped a second time."""
    return error.lost is Lost.UNREACHABLE or (error.lost is Lost.DROPPED and call.attempt >= 1)


def again(call: Call, error: UpstreamError) -> bool:
    """Whether ``call``, which failed with ``error``, is planned again (the health checks know of the failure)."""
    return error.lost in _PLAN_AGAIN and not error.partial_reply_sent and is_read(call) and \
        call.attempt < MAX_AGAIN


def answer(call: Call, error: UpstreamError) -> tuple[str, Outcome]:
    """(the message, the outcome) of a call that failed with ``error`` and is not planned again: shed when the
    metastore's pool was over its limit (nothing was sent)."""
    if isinstance(error, Overloaded):
        return str(error), Outcome.SHED
    if error.sent and error.lost in _MAY_HAVE_APPLIED and not is_read(call):
        return (f"{error}. The outcome of {call.name} is unknown: metastore '{error.member}' may have applied it. "
                f"Check its state before you retry", Outcome.UNKNOWN_OUTCOME)
    return str(error), Outcome.UPSTREAM_ERROR
