"""``waggle sync --follow`` with the batch run's flags instead of a sync file: one continuous policy, named from its
tables, with its checkpoint and HTTP port as a file's policy has them; ``--status`` and ``--run-now`` take the same
flags. Real Hive 2.3 metastores (the session's), a real follower process."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import ROOT
from tests.support.federation import federation_yaml
from tests.support.follower import FollowerProcess, partition_names
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.seed import ensure_database, ensure_table, text_sd

pytestmark = pytest.mark.integration
COLS = [("id", "int")]


def _add_partition(port: int, db: str, day: str, root: Path) -> None:
    from waggle.hms.gen.hive_metastore import ttypes

    with hms_client("127.0.0.1", port) as c:
        c.add_partition(ttypes.Partition(values=[day], dbName=db, tableName="t", parameters={},
                                         sd=text_sd(f"file://{root}/t/day={day}", COLS)))


def _sync(*args: str) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "waggle", "sync", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_follow_status_and_run_now_with_the_batch_runs_flags(primary: Any, analytics: Any, tmp_path: Path) -> None:
    db = f"flags_{uuid.uuid4().hex[:8]}"
    with hms_client("127.0.0.1", analytics.port) as c:
        ensure_database(c, db, f"file://{tmp_path}/src")
        ensure_table(c, db, "t", f"file://{tmp_path}/src/t", COLS, [("day", "string")])
    _add_partition(analytics.port, db, "d1", tmp_path / "src")
    federation = tmp_path / "federation.yml"
    federation.write_text(federation_yaml(primary.uri, f"federated-meta-stores:\n- name: analytics\n"
                                                       f"  remote-meta-store-uris: {analytics.uri}\n"))
    port = free_port()
    flags = ("--federation-config", str(federation), "--source", "analytics", "--tables", f"{db}.t",
             "--target-database", f"{db}_copy", "--http-port", str(port))
    follower = FollowerProcess(None, tmp_path / "follower.log", *flags).start().wait_started()
    name = f"{db}_t"  # from --tables
    try:
        follower.until(lambda: partition_names(primary.port, f"{db}_copy", "t") == ["day=d1"], 90, "the bootstrap")
        _add_partition(analytics.port, db, "d2", tmp_path / "src")
        follower.until(lambda: partition_names(primary.port, f"{db}_copy", "t") == ["day=d1", "day=d2"], 60,
                       "the change made at the source")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            health = json.loads(r.read())
        assert [p["policy"] for p in health["policies"]] == [name], health
        code, text = _sync("--status", *flags)
        assert code == 0, text
        assert name in text and f"(says the running follower, port {port})" in text, text
        code, text = _sync("--run-now", name, *flags)
        assert code == 0, text
    finally:
        assert follower.stop() == 0
    started = [line for line in follower.lines() if line.get("event") == "sync.service_started"]
    assert started and started[0]["policies"] == [name] and started[0]["file"] == "(the command line)", started


def test_follow_without_a_sync_file_names_the_flags_it_lacks() -> None:
    code, text = _sync("--follow", "--source", "analytics")
    assert code == 1
    assert text.strip() == "error: --follow, --run-now and --status need --config FILE, or --federation-config, " \
                           "--tables"
