"""Java checkers of the tests (``tests/integration/java/*.java``): compiled against pyspark's Hive and Hadoop jars,
run as Java runs them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.env import java_available, require
from waggle.local.jvm import java_executable, pyspark_jars_dir


def compiled(source: Path, classes: Path) -> list[str]:
    """Compile ``source`` into ``classes``; the command line that runs its main class."""
    require(java_available() and shutil.which("javac") is not None, "Java (java and javac) is not installed")
    classpath = f"{pyspark_jars_dir()}/*"
    subprocess.run(["javac", "-cp", classpath, "-d", str(classes), str(source)], check=True, timeout=120)
    return [java_executable(), "-cp", f"{classes}:{classpath}", source.stem]
