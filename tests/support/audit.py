"""A real metastore's audit log (``<date> ... audit: ugi=... cmd=...``), read as it is written."""

from __future__ import annotations

import re
import time
from typing import Any


def audit_text(store: Any) -> str:
    """The metastore's whole log so far."""
    return str(store.log_path.read_text(errors="replace"))


def audit_lines(store: Any, pattern: str, timeout: float = 10.0) -> list[str]:
    """The audit lines matching ``pattern``, waiting up to ``timeout`` seconds for the first one (a metastore writes
    its audit line as the call starts, through a buffer); an empty list when none came."""
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        found = [line for line in audit_text(store).splitlines() if " audit: " in line and regex.search(line)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def audit_line(store: Any, pattern: str, timeout: float = 10.0) -> str:
    """The first audit line matching ``pattern``; fails after ``timeout`` seconds without one."""
    found = audit_lines(store, pattern, timeout)
    if not found:
        raise AssertionError(f"no audit line matching {pattern!r} in {store.log_path}")
    return found[0]


def audit_count(store: Any, text: str) -> int:
    """How many audit lines so far contain ``text``."""
    return sum(1 for line in audit_text(store).splitlines() if " audit: " in line and text in line)
