"""Spark with Kerberos in a subprocess: a fresh local Spark session (its built-in Hive 2.3 client) that logs in to
a Kerberized waggle from a keytab, or with ``--proxy-user`` through a delegation token from waggle.

The JVM needs Kerberos settings from the start: the keytab login (``--principal``/``--keytab``), the KDC's
``krb5.conf`` and a ``core-site.xml`` that turns Hadoop security on. A ticket cache alone does not make Spark's Hive
client use SASL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import ROOT, java_available, require
from tests.support.proxy import WaggleProcess

#: where the Spark scripts are (spark_query.py, and its variants)
SCRIPTS = ROOT / "tests" / "integration"
SPARK_TIMEOUT = 150


def run_kerberized_spark(kdc: Any, waggle: WaggleProcess, work: Path, queries: list[str],
                         principal: str = "alice", proxy_user: str | None = None,
                         script: str = "spark_query.py") -> Any:
    """Each query's rows, from a fresh local Spark session logged in as ``principal`` with its keytab; or, with
    ``proxy_user``, from ``principal``'s ticket cache, acting for ``proxy_user`` (spark-submit's
    ``--proxy-user``, which cannot be combined with a keytab). ``script``: the Spark script of
    tests/integration that runs the queries (what it prints after ``RESULT`` is returned, decoded)."""
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
    java_options = f"--driver-java-options -Djava.security.krb5.conf={kdc.krb5_conf} pyspark-shell"
    if proxy_user is None:
        login = f"--principal {kdc.principal(principal)} --keytab {kdc.keytab_path(principal)}"
        ccache = work / "no-such-ccache"  # the keytab, not some ticket cache, is the login
    else:
        login = f"--proxy-user {proxy_user}"
        ccache = kdc.kinit(principal, kdc.keytab_path(principal), work / f"{principal}.ccache")
    env = {
        **os.environ, **kdc.env(),
        "HADOOP_CONF_DIR": str(hadoop_conf),
        "PYSPARK_SUBMIT_ARGS": f"{login} {java_options}",
        "KRB5CCNAME": f"FILE:{ccache}",
    }
    settings = {
        "spark.hadoop.hive.metastore.sasl.enabled": "true",
        "spark.hadoop.hive.metastore.kerberos.principal": f"waggle/localhost@{kdc.realm}",
        "spark.driver.memory": "1g",
    }
    conf_args = [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPTS / script), *conf_args, f"thrift://localhost:{waggle.port}",
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
    return json.loads(result[len("RESULT "):])
