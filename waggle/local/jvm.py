"""What every local Java part needs: the Hive jars pyspark ships, a Java runtime, free loopback ports and
waggle's cache directory (prepared metastore templates, the built listener)."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path


class LocalMetastoreError(RuntimeError):
    """A local metastore could not be started."""


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


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_taken(port: int, host: str = "0.0.0.0") -> str | None:
    """Why ``port`` cannot be listened on (another process has it), or None when it is free. A metastore started
    on a taken port would find its own port answering: the other process's."""
    with socket.socket() as s:
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
