"""``waggle demo``, as the quick start (README.md, docs/getting-started/quick-start.md) runs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.clients import hive2_client
from tests.support.env import ROOT, java_available, require
from waggle.local.jvm import free_port

pytestmark = pytest.mark.integration


def _bare_environment(home: Path) -> dict[str, str]:
    """A new shell's environment without this clone's .venv on the PATH (Java stays reachable)."""
    java = shutil.which("java")
    path = ":".join(dict.fromkeys([*([os.path.dirname(java)] if java else []), "/usr/bin", "/bin"]))
    return {"PATH": path, "HOME": str(home), **{k: v for k, v in os.environ.items() if k == "JAVA_HOME"}}


def _docs_snippets_run_against_the_demo(port: int, http_port: int, workdir: Path, activate: str, home: Path) -> None:
    """The command snippets of the docs that can run against the demo do, as printed but for the demo's files and
    port: waggle check (docs/getting-started/your-own-metastores.md), hmsclient (docs/getting-started/clients.md)
    and the readiness check (docs/operations/http-endpoints.md, on the demo's HTTP port: a free one, not the default,
    so that the tutorial's test, which runs the demo on its default ports, may run beside this one).
    The page's Spark snippet is left out: a Spark session of its own costs over a minute on a 2-core machine."""
    page = (ROOT / "docs" / "getting-started" / "your-own-metastores.md").read_text()
    checks = [block.strip() for block in re.findall(r"^```console\n(.*?)^```", page, re.M | re.S)
              if block.startswith("waggle check")]
    assert len(checks) == 2, checks
    files = {"waggle-server.yml": str(workdir / "waggle-server.yml"),
             "waggle-federation.yml": str(workdir / "waggle-federation.yml")}
    said = re.search(r"It prints `(ok: [^`]+)`", page)
    assert said, "the page says what waggle check prints"
    for command in checks:
        command = re.sub(r"waggle-(server|federation)\.yml", lambda m: files[m.group(0)], command)
        ran = subprocess.run(["bash", "-c", f"{activate} && cd / && {command}"], capture_output=True, text=True,
                             timeout=120, env=_bare_environment(home))
        assert ran.returncode == 0, command + "\n" + ran.stdout + ran.stderr[-3000:]
        assert said.group(1).replace("48870", str(port)) in ran.stdout, ran.stdout
        if command.endswith("--connect"):
            assert "ok: metastore 'primary'" in ran.stdout and "ok: metastore 'analytics'" in ran.stdout
    clients = (ROOT / "docs" / "getting-started" / "clients.md").read_text()
    snippet = re.search(r'`(HMSClient\(host="waggle-host", port=48869\))`', clients)
    assert snippet, "the clients page shows hmsclient"
    call = snippet.group(1).replace('"waggle-host"', '"127.0.0.1"').replace("48869", str(port))
    ran = subprocess.run([sys.executable, "-c", f"from hmsclient import HMSClient\nwith {call} as c:\n"
                          "    print(sorted(c.get_all_databases()))"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "'analytics_web'" in ran.stdout and "'sales'" in ran.stdout, ran.stdout
    endpoints = (ROOT / "docs" / "operations" / "http-endpoints.md").read_text()
    ready = re.search(r"^\$ (curl -s localhost:18000/readyz)\n(\{.*\})$", endpoints, re.M)
    assert ready, "the endpoints page shows a readiness check and its answer"
    answered = subprocess.run(["bash", "-c", ready.group(1).replace("18000", str(http_port))], capture_output=True,
                              text=True, timeout=30)
    shown, got = json.loads(ready.group(2)), json.loads(answered.stdout)
    assert {k: got[k] for k in ("ready", "reason")} == {k: shown[k] for k in ("ready", "reason")}, answered.stdout


def test_demo_serves_seeded_metastores_and_stops_on_ctrl_c(tmp_path):
    require(java_available(), "Java 17 is needed for the demo's metastores")
    port, http_port, rest_port = free_port(), free_port(), free_port()
    log = tmp_path / "demo.log"
    proc = subprocess.Popen([sys.executable, "-m", "waggle", "demo", "--port", str(port), "--http-port",
                             str(http_port), "--rest-port", str(rest_port), "--workdir", str(tmp_path / "demo")],
                            stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, cwd=ROOT)
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
            seeded = [f"sales.{t}" for t in c.get_all_tables("sales")] + \
                [f"web.{t}" for t in c.get_all_tables("analytics_web")]
        # the quick start names every table the demo seeds, and those its banner syncs
        quick_start = (ROOT / "docs" / "getting-started" / "quick-start.md").read_text()
        synced = re.findall(r"--tables '?([\w.*]+)'? --target-database (\w+)", text)
        assert synced == [("web.*", "web_mirror"), ("web.clicks", "web_copy")], synced
        for name in [*seeded, *(t for t, _ in synced), *(db for _, db in synced)]:
            assert f"`{name}`" in quick_start, f"the quick start does not name {name}"
        # the Iceberg example runs as printed
        example = text.split("Iceberg tables, with pyiceberg")[1].split("\n\n")[1]
        ran = subprocess.run([sys.executable, "-c", textwrap.dedent(example)], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "'kind': 'click'" in ran.stdout
        with hive2_client(port) as c:
            assert c.get_table("lake", "events").parameters["table_type"] == "ICEBERG"
        # the same table through the Iceberg REST port, as printed
        rest = text.split("through the Iceberg REST port")[1].split("\n\n")[1]
        ran = subprocess.run([sys.executable, "-c", textwrap.dedent(rest)], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert "('lake',)" in ran.stdout and ran.stdout.strip().endswith("2"), ran.stdout
        # the sync command runs as printed, in a new shell that sources the printed activate script
        activate = next(line.strip() for line in text.splitlines() if line.strip().startswith("source "))
        commands = text.split("Bring federated tables into the primary")[1].split("\n\n")[1]
        mirror = commands.split("\n  waggle sync")[0].strip()
        synced = subprocess.run(["bash", "-c", f"{activate} && cd / && {mirror}"], capture_output=True, text=True,
                                timeout=300, env=_bare_environment(tmp_path))
        assert synced.returncode == 0, synced.stdout[-2000:] + synced.stderr[-3000:]
        with hive2_client(port) as c:
            assert "visits" in c.get_all_tables("web_mirror")
        _docs_snippets_run_against_the_demo(port, http_port, tmp_path / "demo", activate, tmp_path)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        metastores = subprocess.run(["pgrep", "-f", str(tmp_path / "demo")], capture_output=True, text=True)
        assert metastores.stdout.strip() == "", "the demo's metastores outlived it"
    finally:
        if proc.poll() is None:
            proc.kill()
