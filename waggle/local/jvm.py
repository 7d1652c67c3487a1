"""What every local Java part needs: the Hive jars pyspark ships, a Java runtime, free loopback ports and
waggle's cache directory (prepared metastore templates, the built listener)."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path


class LocalMetastoreError(RuntimeError):
    """A local metastore could not be started."""


class PortTaken(LocalMetastoreError):
    """A local metastore's port is one another process listens on."""


def pyspark_jars_dir() -> Path:
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - pyspark is a core dependency
        raise LocalMetastoreError("pyspark is not installed; it provides the Hive metastore jars") from exc
    jars = Path(pyspark.__file__).parent / "jars"
    if not any(jars.glob("hive-metastore-*.jar")):
        raise LocalMetastoreError(f"no hive-metastore jar under {jars}")
    return jars


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise LocalMetastoreError("no Java runtime found: install Java 17 (JAVA_HOME or java on PATH)")
    return found


class _Ports:
    """Where :func:`free_port` takes ports from: the kernel's ephemeral range, or a range of this process's own.

    The kernel may hand a port it gave one caller to the next as soon as the first caller's probe socket closes,
    before the component meant to listen on it has bound it; processes that each start components (pytest
    workers, say) then race for one port, and a metastore that loses finds its port answering, by the other's
    metastore. A range given with :func:`use_ports` is this process's alone: ports are handed out in turn, each
    once (until the range wraps) and only when nothing listens on it. Ranges below the kernel's ephemeral ones
    (32768 and up on Linux) never meet a port the kernel chooses.
    """

    def __init__(self) -> None:
        self.span: range | None = None
        self.next = 0

    def take(self, hosts: tuple[str, ...]) -> int:
        """A port free on every one of ``hosts``."""
        if self.span is None:
            for _ in range(200):
                with socket.socket() as s:
                    s.bind((hosts[0], 0))
                    port = int(s.getsockname()[1])
                if all(port_taken(port, host) is None for host in hosts[1:]):
                    return port
            raise LocalMetastoreError(f"no port free on all of {', '.join(hosts)}")
        for _ in range(len(self.span)):
            port = self.span[self.next % len(self.span)]
            self.next += 1
            if port_taken(port) is None:  # free on every address, so on each of ``hosts``
                return port
        raise LocalMetastoreError(f"no port free in {self.span.start}-{self.span.stop - 1}")


_PORTS = _Ports()


def use_ports(first: int, last: int) -> None:
    """From now on :func:`free_port` hands out the ports ``first``..``last`` of this process's own (see
    :class:`_Ports`); the test suite gives each of its workers one range."""
    _PORTS.span, _PORTS.next = range(first, last + 1), 0


def free_port(host: str = "127.0.0.1", *more_hosts: str) -> int:
    """A TCP port nothing listens on at ``host`` (and each of ``more_hosts``), for a local component to bind."""
    return _PORTS.take((host, *more_hosts))


def port_taken(port: int, host: str = "0.0.0.0", *, reuse_address: bool = False) -> str | None:
    """Why ``port`` cannot be listened on (another process has it), or None when it is free. A metastore started
    on a taken port would find its own port answering: the other process's. With ``reuse_address`` the port is
    asked for as a JVM's server socket asks (``SO_REUSEADDR``): only a listener makes it taken, not connections
    still closing from a process that had it (a metastore killed and started again on its port)."""
    with socket.socket() as s:
        if reuse_address:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def cache_dir() -> Path:
    """``WAGGLE_CACHE_DIR``, else ``waggle`` under the user's cache directory."""
    base = os.environ.get("WAGGLE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "waggle")
    return Path(base)
