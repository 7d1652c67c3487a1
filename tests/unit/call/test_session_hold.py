"""What a connection holds between its calls (waggle.call.values.Session.hold): locks and a transaction, read from
the method table; while it holds either, or a link's cascade is under way, its reads skip waggle's cache."""

from __future__ import annotations

from waggle.call.values import Session
from waggle.hms.methods import METHODS

LOCK, UNLOCK = METHODS["lock"], METHODS["unlock"]
OPEN, COMMIT, ABORT = METHODS["open_txns"], METHODS["commit_txn"], METHODS["abort_txn"]


def test_a_new_session_may_remember() -> None:
    session = Session()
    assert (session.locks_held, session.in_transaction, session.cascading) == (0, False, None)
    assert session.may_remember


def test_each_lock_is_held_until_it_is_released() -> None:
    session = Session()
    session.hold(LOCK)
    session.hold(LOCK)
    assert session.locks_held == 2 and not session.may_remember
    session.hold(UNLOCK)
    assert session.locks_held == 1 and not session.may_remember
    session.hold(UNLOCK)
    assert session.locks_held == 0 and session.may_remember
    session.hold(UNLOCK)  # an unlock of a lock this session did not count: never below none
    assert session.locks_held == 0
    session.hold(LOCK)
    assert session.locks_held == 1 and not session.may_remember


def test_a_transaction_is_held_until_it_is_committed_or_aborted() -> None:
    session = Session()
    session.hold(OPEN)
    assert session.in_transaction and not session.may_remember
    session.hold(COMMIT)
    assert not session.in_transaction and session.may_remember
    session.hold(OPEN)
    session.hold(ABORT)
    assert not session.in_transaction and session.may_remember


def test_ending_a_transaction_releases_its_locks() -> None:
    session = Session()
    session.hold(OPEN)
    session.hold(LOCK)
    session.hold(LOCK)
    session.hold(COMMIT)
    assert session.locks_held == 0 and not session.in_transaction and session.may_remember


def test_other_calls_hold_nothing() -> None:
    session = Session()
    for name in ("get_table", "check_lock", "heartbeat", "show_locks", "alter_table", "get_open_txns"):
        session.hold(METHODS[name])
    session.hold(None)  # a method waggle's IDL does not have
    assert (session.locks_held, session.in_transaction) == (0, False) and session.may_remember
    session.hold(LOCK)
    session.hold(OPEN)
    for name in ("get_table", "check_lock", "heartbeat", "alter_table"):
        session.hold(METHODS[name])
    session.hold(None)
    assert (session.locks_held, session.in_transaction) == (1, True)


def test_a_cascade_under_way_stops_remembering() -> None:
    session = Session()
    session.cascading = "lake_sales"
    assert not session.may_remember
    session.cascading = None
    assert session.may_remember
