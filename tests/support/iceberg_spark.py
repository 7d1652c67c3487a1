"""Spark with Apache Iceberg's runtime, as the Iceberg tests use it: ``scripts/iceberg_spark.sh`` prepares it in
``.venv-iceberg-spark`` (pyspark 3.5, Iceberg's runtime jar and Jackson relocated for it)."""

from __future__ import annotations

import os
import shlex
import subprocess
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support import spark_steps
from waggle.local.jvm import java_executable

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-iceberg-spark"
JARS = VENV / "iceberg-jars"
JAVA = ROOT / "tests" / "integration" / "java"


def available() -> bool:
    return (JARS / "READY").exists() and (VENV / "bin" / "python").exists()


def iceberg_jars() -> list[Path]:
    """Iceberg's Spark runtime and the Jackson (and, once :func:`rest_jars` made it, HttpCore) relocated for it."""
    return sorted(JARS.glob("*.jar"))


def pyspark_jars() -> Path:
    """The jars of the iceberg venv's pyspark 3.5 (Hadoop 3.3, Hive 2.3.9), which Iceberg's runtime is built for."""
    found = sorted(VENV.glob("lib/python*/site-packages/pyspark/jars"))
    if not found:
        raise FileNotFoundError(f"no pyspark jars under {VENV}")
    return found[0]


def classpath() -> str:
    """Iceberg's runtime with its Jackson, and the Hive, Hadoop and Spark jars of the pyspark it was built for."""
    return ":".join([*map(str, iceberg_jars()), f"{pyspark_jars()}/*"])


#: Apache HttpCore 5 (Debian's ``libhttpcore5-java``): Iceberg's REST classes use it (``Endpoint``, ``HTTPRequest``)
#: and the runtime jar of ``snowpark-connect-deps-iceberg`` lacks it, as it lacks Jackson
HTTPCORE = Path("/usr/share/java/httpcore5.jar")
JARJAR = Path("/usr/share/java/jarjar.jar")


def rest_jars() -> list[Path] | None:
    """HttpCore 5 relocated where Iceberg's REST client looks for it (``org.apache.iceberg.shaded``), made once
    next to the relocated Jackson; None when Debian's HttpCore 5 or jarjar is not installed."""
    made = JARS / "relocated-httpcore5.jar"
    if made.exists():
        return [made]
    if not JARJAR.exists() or not HTTPCORE.exists():
        return None
    rules = JARS / f"httpcore5.{os.getpid()}.rules"
    rules.write_text("rule org.apache.hc.** org.apache.iceberg.shaded.org.apache.hc.@1\n")
    partial = made.with_suffix(f".{os.getpid()}.part")  # two workers may make it at once: the last rename wins
    subprocess.run([java_executable(), "-jar", str(JARJAR), "process", str(rules), str(HTTPCORE), str(partial)],
                   check=True, capture_output=True, timeout=300)
    if not partial.exists() or partial.stat().st_size == 0:  # jarjar reports some failures with exit code 0
        raise RuntimeError(f"relocating {HTTPCORE} with jarjar failed")
    rules.unlink()
    partial.rename(made)
    return [made]


#: Iceberg's ``RESTCatalog`` over the JDK's HTTP client, for Spark's ``catalog-impl`` (its source says why)
REST_CATALOG_IMPL = "IcebergJdkRest$Catalog"


def compile_java(classes: Path, *sources: str) -> Path:
    """Compile ``tests/integration/java/<source>.java`` (with ``IcebergJdkRest``) against :func:`classpath` into
    ``classes``, and pack them as ``classes.jar`` beside it (for ``spark.jars``)."""
    names = dict.fromkeys(["IcebergJdkRest", *sources])
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-nowarn", "-cp", classpath(), "-d", str(classes),
                    *(str(JAVA / f"{name}.java") for name in names)], check=True, timeout=300, capture_output=True)
    jar = classes.with_suffix(".jar")
    with zipfile.ZipFile(jar, "w") as out:
        for item in sorted(classes.rglob("*.class")):
            out.write(item, str(item.relative_to(classes)))
    return jar


def _submit_args(catalogs: Mapping[str, Mapping[str, str]]) -> str:
    """``PYSPARK_SUBMIT_ARGS`` declaring more Spark catalogs: each ``name`` an Iceberg ``SparkCatalog`` with these
    properties (``type``, ``uri``, ``credential``, ...), and ``lake`` (the script's own) taking extra ones."""
    conf: list[str] = []
    for name, props in catalogs.items():
        if name != "lake":
            conf += ["--conf", f"spark.sql.catalog.{name}=org.apache.iceberg.spark.SparkCatalog"]
        conf += [part for key, value in props.items() for part in ("--conf", f"spark.sql.catalog.{name}.{key}={value}")]
    return shlex.join([*conf, "pyspark-shell"])


def run_steps(uri: str, warehouse: str, steps: list[tuple[str, str]], timeout: float = 900,
              catalogs: Mapping[str, Mapping[str, str]] | None = None, jars: tuple[Path, ...] = ()
              ) -> dict[str, Any]:
    """Run SQL steps in one Spark session whose Iceberg catalog ``lake`` is the metastore at ``uri``; ``catalogs``:
    more Iceberg catalogs of the same session by name (say a REST catalog), or extra properties of ``lake``;
    ``jars``: more jars for Spark (a catalog's ``catalog-impl``, say)."""
    spec = {"uri": uri, "warehouse": warehouse, "jars": [str(j) for j in [*iceberg_jars(), *jars]], "steps": steps}
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "SPARK_HOME", "VIRTUAL_ENV", "PYSPARK_SUBMIT_ARGS")}
    if catalogs:
        env["PYSPARK_SUBMIT_ARGS"] = _submit_args(catalogs)
    return spark_steps.run(spec, str(VENV / "bin" / "python"), timeout, env)
