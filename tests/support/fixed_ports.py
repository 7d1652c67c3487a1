"""The fixed ports a page of the docs prints (the tutorial's), kept from the kernel's choice for a test session.

The tutorial runs ``waggle demo`` on its default port, 48869, and a federation of its own on 48870: ports inside
the kernel's ephemeral range (32768-60999 on Linux). Any process of the run (a Spark driver's block manager, a
client's outgoing connection) may be handed one of them by the kernel, and the tutorial, run as printed, then finds
its port taken. Linux keeps the ports listed in ``ip_local_reserved_ports`` out of its own choice (a bind to port 0,
a connect's local port) while leaving them free to bind by number, which is what the tutorial does.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

RESERVED = Path("/proc/sys/net/ipv4/ip_local_reserved_ports")
TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "getting-started" / "tutorial.md"


def page_ports(page: str) -> list[int]:
    """The ports of a page's table of ports: its rows that start with numbers (``| 18000, 48869 | ...``)."""
    return [int(p) for row in re.findall(r"^\| ([\d, ]+) \|", page, re.M) for p in row.split(",")]


def parse(listed: str) -> set[int]:
    """The ports of the kernel's list: ``48869-48870,50000`` (empty when none)."""
    ports: set[int] = set()
    for item in filter(None, (part.strip() for part in listed.split(","))):
        first, _, last = item.partition("-")
        ports.update(range(int(first), int(last or first) + 1))
    return ports


def listing(ports: Iterable[int]) -> str:
    """The kernel's list of ``ports``, runs of neighbours written as ranges."""
    runs: list[list[int]] = []
    for port in sorted(set(ports)):
        if runs and port == runs[-1][1] + 1:
            runs[-1][1] = port
        else:
            runs.append([port, port])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def reserve(ports: Iterable[int], path: Path = RESERVED) -> Callable[[], None] | None:
    """Add ``ports`` to the kernel's reserved ports; returns what puts the list back as it was, or None when the
    list cannot be written (not root, or ``/proc/sys`` read-only): the tests that need the ports then say why."""
    try:
        before = path.read_text().strip()
        path.write_text(listing(parse(before) | set(ports)) + "\n")
    except OSError:
        return None

    def restore() -> None:
        try:
            path.write_text((before or "") + "\n")
        except OSError:
            pass

    return restore


def reserved(path: Path = RESERVED) -> set[int]:
    """The ports the kernel keeps out of its own choice now (none when the list cannot be read)."""
    try:
        return parse(path.read_text())
    except OSError:
        return set()


def holders(port: int) -> str:
    """Who has ``port``, as ``ss`` says (its sockets and their processes), for a failure's message."""
    try:
        shown = subprocess.run(["ss", "-Htanp", f"( sport = :{port} )"], capture_output=True, text=True,
                               timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(ss could not say: {exc})"
    return shown or "(no socket listed by ss)"
