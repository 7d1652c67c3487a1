"""``waggle demo``, as the README's quick start runs it."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support.clients import hive2_client
from tests.support.env import ROOT, java_available, require
from waggle.local.jvm import free_port

pytestmark = pytest.mark.integration


def test_demo_serves_seeded_metastores_and_stops_on_ctrl_c(tmp_path):
    require(java_available(), "Java 17 is needed for the demo's metastores")
    port = free_port()
    log = tmp_path / "demo.log"
    proc = subprocess.Popen([sys.executable, "-m", "waggle", "demo", "--port", str(port), "--workdir",
                             str(tmp_path / "demo")], stdout=open(log, "wb"), stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 180
        while "Ctrl-C stops" not in log.read_text(errors="replace"):
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, "demo did not come up"
            time.sleep(0.5)
        text = log.read_text()
        assert f"hive.metastore.uris=thrift://127.0.0.1:{port}" in text
        assert "spark.hadoop.hive.metastore.uris" in text
        with hive2_client(port) as c:
            assert {"default", "sales", "analytics_web"} <= set(c.get_all_databases())
            assert c.get_all_tables("sales") == ["customers", "orders"]
            assert c.get_table("analytics_web", "visits").dbName == "analytics_web"
        # the Iceberg example runs as printed
        example = text.split("Iceberg tables, with pyiceberg")[1].split("\n\n")[1]
        ran = subprocess.run([sys.executable, "-c", textwrap.dedent(example)], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "'kind': 'click'" in ran.stdout
        with hive2_client(port) as c:
            assert c.get_table("lake", "events").parameters["table_type"] == "ICEBERG"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        metastores = subprocess.run(["pgrep", "-f", str(tmp_path / "demo")], capture_output=True, text=True)
        assert metastores.stdout.strip() == "", "the demo's metastores outlived it"
    finally:
        if proc.poll() is None:
            proc.kill()
