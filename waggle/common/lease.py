"""A lease held by one process at a time, as text kept in a metastore (``HOLDER EXPIRES``: ``host:pid:nonce``
and epoch seconds): the sync's followers hold one per policy, the merger of the federated notification log one.

Pure, but for the look at this host's processes: a lease past its expiry is free, and so is one whose holder is
a process of this host that is no longer running (a process killed and started again takes its lease back at
once).
"""

from __future__ import annotations

import os
import socket
import time
import uuid

__all__ = ["holder_id", "lease_text", "live_other", "parse_lease"]


def holder_id() -> str:
    """A new holder's name: this host and process, and a nonce."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def lease_text(holder: str, seconds: float, now: float | None = None) -> str:
    """The lease as kept: held by ``holder`` for ``seconds`` from now."""
    return f"{holder} {(time.time() if now is None else now) + seconds:.0f}"


def parse_lease(value: str | None) -> tuple[str, float] | None:
    """(holder, expiry) of a kept lease, or None when there is none."""
    if not value or " " not in value:
        return None
    holder, _, expires = value.partition(" ")
    try:
        return holder, float(expires)
    except ValueError:
        return None


def live_other(value: str | None, me: str) -> str | None:
    """The holder of a kept lease when it is another live process, described; else None."""
    found = parse_lease(value)
    if found is None:
        return None
    holder, expires = found
    if holder == me or expires < time.time() or _dead_here(holder):
        return None
    return f"{holder} (until {time.strftime('%H:%M:%S', time.gmtime(expires))} UTC)"


def _dead_here(holder: str) -> bool:
    """A holder of this host whose process is gone, or this process (which takes its own lease back)."""
    host, _, rest = holder.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
