"""waggle's notification log listener (``java/waggle/listener/NotificationLogListener.java``), built once per
machine: compiled with the JDK against the Hive jars pyspark ships, and kept as a jar in waggle's cache.

Local metastores install it as a transactional listener (:class:`waggle.local.metastore.LocalMetastore`), so they
write notification events as production metastores with hcatalog's ``DbNotificationListener`` do. The set-up
(``scripts/setup.sh``) builds it with ``python -m waggle.local.listener``, which prints the jar's path; the same jar
can be put on a real Hive 2.3 metastore's class path.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from waggle.local.jvm import LocalMetastoreError, cache_dir, java_executable, pyspark_jars_dir

#: the listener's class, for ``hive.metastore.transactional.event.listeners``
LISTENER_CLASS = "waggle.listener.NotificationLogListener"
#: how often (seconds) it deletes events older than ``hive.metastore.event.db.listener.timetolive``
CLEANER_INTERVAL_KEY = "waggle.listener.cleaner.interval"
TTL_KEY = "hive.metastore.event.db.listener.timetolive"
LISTENERS_KEY = "hive.metastore.transactional.event.listeners"

SOURCE = Path(__file__).parent / "java" / "waggle" / "listener" / "NotificationLogListener.java"


def _jdk_tool(name: str) -> str:
    """``javac`` or ``jar``, next to the Java runtime waggle uses."""
    beside = Path(java_executable()).resolve().parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise LocalMetastoreError(f"no {name} found: the notification log listener is compiled at set-up, which "
                                  "needs a Java 17 JDK (not only a runtime)")
    return found


def listener_jar() -> Path:
    """The listener's jar, compiled on first use (per source version and Hive release; safe from several
    processes at once)."""
    jars = pyspark_jars_dir()
    release = next(jars.glob("hive-metastore-*.jar")).stem
    key = hashlib.sha256(SOURCE.read_bytes() + release.encode()).hexdigest()[:12]
    jar = cache_dir() / f"listener-{key}" / "waggle-notification-listener.jar"
    if jar.exists():
        return jar
    jar.parent.parent.mkdir(parents=True, exist_ok=True)
    with open(jar.parent.parent / f"listener-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if jar.exists():
            return jar
        build = Path(tempfile.mkdtemp(prefix=f"listener-{key}.", dir=jar.parent.parent))
        try:
            classes = build / "classes"
            _run([_jdk_tool("javac"), "-nowarn", "-Xlint:-options", "--release", "8", "-cp", f"{jars}{os.sep}*",
                  "-d", str(classes), str(SOURCE)], "compiling the notification log listener")
            _run([_jdk_tool("jar"), "cf", str(build / jar.name), "-C", str(classes), "."],
                 "packing the notification log listener")
            shutil.rmtree(jar.parent, ignore_errors=True)
            build.rename(jar.parent)
        finally:
            shutil.rmtree(build, ignore_errors=True)
    return jar


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    if done.returncode != 0:
        raise LocalMetastoreError(f"{what} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")


def main() -> int:
    try:
        print(listener_jar())
    except LocalMetastoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
