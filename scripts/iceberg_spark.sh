#!/usr/bin/env bash
# Spark 3.5 with Apache Iceberg's runtime (Iceberg 1.10.2), for the Iceberg tests: its own venv,
# .venv-iceberg-spark, because the main venv's pyspark is 4.x (it brings the Hive 2.3.10 metastore jars).
# The runtime jar comes from the snowpark-connect-deps-iceberg wheel; it expects Jackson relocated under
# org.apache.iceberg.shaded, so pyspark's own Jackson jars are relocated once with jarjar (Debian libjarjar-java).
# Usage: scripts/iceberg_spark.sh PYTHON. Safe to run again: a finished environment is left as it is.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${1:-python3}
VENV=.venv-iceberg-spark
JARS=$VENV/iceberg-jars
JARJAR=/usr/share/java/jarjar.jar
[ -f "$JARS/READY" ] && exit 0
if [ ! -f "$JARJAR" ]; then
  echo "warning: $JARJAR is missing (apt-get install libjarjar-java); the Spark Iceberg tests cannot run" >&2
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q "pyspark>=3.5,<3.6" "snowpark-connect-deps-iceberg==1.0.3"
read -r SPARK_JARS ICEBERG_JARS < <("$VENV/bin/python" -c '
import os, pyspark, snowpark_connect_deps_iceberg as d
print(os.path.join(os.path.dirname(pyspark.__file__), "jars"), os.path.join(os.path.dirname(d.__file__), "jars"))')
mkdir -p "$JARS"
cp "$ICEBERG_JARS"/iceberg-spark-runtime-3.5_2.12-*.jar "$JARS/"
echo "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1" > "$JARS/jackson.rules"
for name in jackson-core jackson-databind jackson-annotations; do
  # jarjar names classes, not paths: a multi-release jar's META-INF/versions copies would collide, so drop them
  "$VENV/bin/python" - "$SPARK_JARS/$name"-2.*.jar "$JARS/$name.jar" <<'PYEOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as out:
    for item in src.infolist():
        if not item.filename.startswith("META-INF/versions/"):
            out.writestr(item, src.read(item))
PYEOF
  java -jar "$JARJAR" process "$JARS/jackson.rules" "$JARS/$name.jar" "$JARS/relocated-$name.jar"
  rm "$JARS/$name.jar"
  # jarjar reports some failures with exit code 0
  [ -s "$JARS/relocated-$name.jar" ] || { echo "error: relocating $name with jarjar failed" >&2; exit 1; }
done
date -u +%FT%TZ > "$JARS/READY"
