"""Spark with Kerberos through waggle: a local Spark session (its built-in Hive 2.3 client) logs in to waggle as
alice from her keytab (SASL GSSAPI to ``waggle/localhost``), and waggle acts for her at the Kerberized primary.

Spark runs in a subprocess (``spark_query.py``) because its JVM needs Kerberos settings from the start: the
keytab login (``--principal``/``--keytab``), the KDC's ``krb5.conf`` and a ``core-site.xml`` that turns Hadoop
security on. A ticket cache alone does not make Spark's Hive client use SASL.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import WaggleProcess, java_available, require

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kerberos]
HERE = Path(__file__).resolve().parent
SPARK_TIMEOUT = 150


def audit_lines(store: Any, pattern: str, timeout: float = 10.0) -> list[str]:
    """The metastore's audit lines matching ``pattern`` (waiting a little for the first one)."""
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        found = [line for line in store.log_path.read_text(errors="replace").splitlines()
                 if " audit: " in line and regex.search(line)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def run_kerberized_spark(kdc: Any, waggle: WaggleProcess, work: Path, queries: list[str],
                         principal: str = "alice") -> list[list[list[str]]]:
    """Each query's rows, from a fresh local Spark session logged in as ``principal`` with its keytab."""
    require(java_available(), "Java 17 is needed for Spark")
    pytest.importorskip("pyspark")
    hadoop_conf = work / "hadoop-conf"
    hadoop_conf.mkdir(parents=True, exist_ok=True)
    (hadoop_conf / "core-site.xml").write_text(
        '<?xml version="1.0"?>\n<configuration>\n'
        "  <property><name>hadoop.security.authentication</name><value>kerberos</value></property>\n"
        # Hadoop's input formats ask for file-system tokens on a secure cluster and want a renewer for them
        # (none are needed for local files, but without a renewer the listing fails)
        f"  <property><name>yarn.resourcemanager.principal</name><value>yarn/localhost@{kdc.realm}</value>"
        "</property>\n"
        "</configuration>\n")
    env = {
        **os.environ, **kdc.env(),
        "HADOOP_CONF_DIR": str(hadoop_conf),
        "PYSPARK_SUBMIT_ARGS": (f"--principal {kdc.principal(principal)} --keytab {kdc.keytab_path(principal)} "
                                f"--driver-java-options -Djava.security.krb5.conf={kdc.krb5_conf} pyspark-shell"),
        "KRB5CCNAME": f"FILE:{work / 'no-such-ccache'}",  # the keytab, not some ticket cache, is the login
    }
    settings = {
        "spark.hadoop.hive.metastore.sasl.enabled": "true",
        "spark.hadoop.hive.metastore.kerberos.principal": f"waggle/localhost@{kdc.realm}",
        "spark.driver.memory": "1g",
    }
    conf_args = [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]
    try:
        done = subprocess.run(
            [sys.executable, str(HERE / "spark_query.py"), *conf_args, f"thrift://localhost:{waggle.port}",
             str(work / "warehouse"), *queries],
            capture_output=True, text=True, timeout=SPARK_TIMEOUT, env=env, cwd=work,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        pytest.fail(f"Spark did not finish in {SPARK_TIMEOUT}s; its stderr ends:\n{stderr[-6000:]}\n"
                    f"waggle's log ends:\n{waggle.log()[-3000:]}")
    result = next((line for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    assert done.returncode == 0 and result is not None, (
        f"Spark exited with {done.returncode}; its stderr ends:\n{done.stderr[-6000:]}\n"
        f"waggle's log ends:\n{waggle.log()[-3000:]}")
    rows: list[list[list[str]]] = json.loads(result[len("RESULT "):])
    return rows


def test_spark_with_a_keytab_reads_and_writes_through_a_kerberized_waggle(
        kdc, kerberized_metastore, analytics, federation_data, secure_waggle, tmp_path):
    db = f"krbspark_{uuid.uuid4().hex[:8]}"
    before = len(secure_waggle.log())
    shown, _, _, _, selected, federated, _ = run_kerberized_spark(kdc, secure_waggle, tmp_path, [
        "SHOW DATABASES",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.people (id INT, name STRING) STORED AS PARQUET",
        f"INSERT INTO {db}.people VALUES (1, 'ann'), (2, 'ben')",
        f"SELECT id, name FROM {db}.people ORDER BY id",
        "SELECT id, customer FROM analytics_sales.orders ORDER BY id",
        f"DROP DATABASE {db} CASCADE",
    ])
    databases = {row[0] for row in shown}
    assert {"default", "analytics_sales"} <= databases
    assert selected == [["1", "ann"], ["2", "ben"]]
    assert federated == [["1", "alice"], ["2", "bob"], ["3", "alice"]]

    # Spark logged in to waggle as alice with Kerberos, and waggle acted for her at the Kerberized primary.
    logins = [e for e in secure_waggle.events("client.authenticated", since=before) if e.get("user") == "alice"]
    assert logins and {e["mechanism"] for e in logins} == {"GSSAPI"}
    assert all(e["principal"] == f"alice@{kdc.realm}" for e in logins)
    for pattern in (rf"cmd=create_database: Database\(name:{db},", rf"cmd=create_table: Table\(tableName:people, "
                    rf"dbName:{db},", rf"cmd=drop_database: {db}\b"):
        lines = audit_lines(kerberized_metastore, pattern)
        assert lines, f"no audit line matching {pattern!r} in {kerberized_metastore.log_path}"
        assert all("ugi=alice\t" in line for line in lines), lines
    assert audit_lines(analytics, r"ugi=alice\t.*get_table.*tbl=orders\b")
