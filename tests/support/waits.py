"""Waiting on a condition, polled: a test waits until something it can observe is true, never for a while.
``wait_for`` sleeps between polls (a test beside real processes); ``wait_until`` yields to gevent's hub (a test
of greenlets in this process)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(what: Any, timeout: float = 30.0, message: str | Callable[[], str] = "") -> Any:
    """Poll ``what()`` until it returns something true, and return that; fail after ``timeout`` seconds with
    ``message`` (or what ``message()`` says then, such as the end of a log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g}s: {message() if callable(message) else message}")


def wait_until(condition: Callable[[], Any], timeout: float = 2.0) -> None:
    """Yield to the hub until ``condition()`` is true (fails after ``timeout`` seconds)."""
    import gevent

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        gevent.sleep(0.002)
