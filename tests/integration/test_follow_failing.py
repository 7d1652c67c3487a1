"""``waggle sync --follow`` tells the truth about a source that hangs: a real Hive 2.3 metastore of its own as the
source, its JVM stopped with SIGSTOP under a running follower. Its calls time out (the member's ``read-timeout``,
2 s here, bounds the follower's), the batches fail, ``/healthz`` and ``--status`` say ``failing`` since when
and with which error (``--status`` exits 2, from the running follower and from the rows alike), the log says so
a few times rather than at every batch, and after SIGCONT the follower catches up. And a policy whose tables
match nothing is refused at the start, in the batch run's words."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import ROOT, java_available, require
from tests.support.federation import federation_yaml
from tests.support.follower import FollowerProcess, partition_names, sync_file
from waggle.local.client import hms_client
from waggle.local.jvm import free_port
from waggle.local.seed import ensure_database, ensure_table, text_sd

pytestmark = pytest.mark.integration
COLS = [("id", "int")]
KEYS = [("day", "string")]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A metastore of its own, to be frozen: the session's are shared with every other test."""
    require(java_available(), "Java 17 is needed to run a local Hive metastore")
    from waggle.local.metastore import LocalMetastore

    store = LocalMetastore(tmp_path_factory.mktemp("frozen-source")).start().wait_ready()
    yield store
    if store.process is not None:
        os.kill(store.process.pid, signal.SIGCONT)
    store.stop()


def _status(config: Path) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "waggle", "sync", "--status", "--config", str(config)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60, env=dict(os.environ))
    return done.returncode, done.stdout + done.stderr


def _health(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _add_partition(port: int, db: str, table: str, day: str, root: Path) -> None:
    from waggle.hms.gen.hive_metastore import ttypes

    with hms_client("127.0.0.1", port) as c:
        c.add_partition(ttypes.Partition(values=[day], dbName=db, tableName=table, parameters={},
                                         sd=text_sd(f"file://{root}/{table}/day={day}", COLS)))


def test_a_hung_source_makes_the_follower_say_failing_then_it_catches_up(source: Any, primary: Any,
                                                                          tmp_path: Path) -> None:
    db = f"hang_{uuid.uuid4().hex[:8]}"
    target = f"{db}_t"
    with hms_client("127.0.0.1", source.port) as c:
        ensure_database(c, db, f"file://{tmp_path}/src")
        ensure_table(c, db, "t", f"file://{tmp_path}/src/t", COLS, KEYS)
    _add_partition(source.port, db, "t", "d1", tmp_path / "src")
    federation = tmp_path / "federation.yml"
    federation.write_text(federation_yaml(primary.uri, "federated-meta-stores:\n- name: flaky\n"
                                                       f"  remote-meta-store-uris: {source.uri}\n"
                                                       "  read-timeout: 2000\n"))
    port = free_port()
    jobs = [{"name": db, "tables": f"{db}\\..*", "target-database": target, "follow": True}]
    config = sync_file(tmp_path / "sync.yml", federation, jobs, source="flaky",
                       **{"http-port": port, "lease-seconds": 3, "poll-interval-max": 0.2,
                          "execution-window": "1s"})
    rows_only = sync_file(tmp_path / "rows.yml", federation, jobs, source="flaky", **{"http-port": 0})
    follower = FollowerProcess(config, tmp_path / "follower.log").start().wait_started()
    assert source.process is not None
    pid = source.process.pid
    try:
        follower.until(lambda: partition_names(primary.port, target, "t") == ["day=d1"], 60, "the bootstrap")
        assert _health(port)[0] == 200

        os.kill(pid, signal.SIGSTOP)  # the source hangs: it accepts connections and never answers
        frozen = time.monotonic()
        code, body = follower.until(lambda: (h := _health(port))[0] == 503 and h, 30, "/healthz saying failing")
        noticed = time.monotonic() - frozen
        entry = body["policies"][0]
        assert body["status"] == "failing" and body["failing"] == [db], body
        assert entry["failing"] is True and entry["failing_since"] and "metastore 'flaky'" in entry["error"], entry
        assert noticed < 10, f"a hung source was noticed after {noticed:.1f}s"

        code, text = _status(config)  # from the running follower
        assert code == 2, text
        assert f"  state: failing since {entry['failing_since']}" in text, text
        assert f"(says the running follower, port {port})" in text and "metastore 'flaky'" in text, text
        assert "source: " in text and "did not answer" in text, text  # --status's own calls time out too

        code, text = _status(rows_only)  # from the rows, as on another host
        assert code == 2 and "  state: failing since " in text, text
        assert "(says waggle_sys.replication_metrics)" in text, text

        follower.until(lambda: _health(port)[1]["policies"][0]["failed_batches"] >= 4, 30, "four failed batches")
        os.kill(pid, signal.SIGCONT)
        hung = time.monotonic() - frozen
        # the source returns: a change made there arrives, and the policy is healthy again
        _add_partition(source.port, db, "t", "d2", tmp_path / "src")
        follower.until(lambda: partition_names(primary.port, target, "t") == ["day=d1", "day=d2"], 60,
                       "the change made at the source after it came back")
        follower.until(lambda: _health(port)[0] == 200, 30, "/healthz ok again")
        code, text = _status(config)
        assert code == 0 and "  state: ok (says the running follower" in text, text
    finally:
        os.kill(pid, signal.SIGCONT)
        assert follower.stop() == 0

    lines = follower.lines()
    failed = [ln for ln in lines if ln.get("event") == "sync.policy_failing"]
    recovered = [ln for ln in lines if ln.get("event") == "sync.policy_recovered"]
    assert len(failed) == 1 and len(recovered) == 1, [ln.get("event") for ln in lines]
    assert recovered[0]["failed_batches"] >= 4
    # the whole hang, several failed batches, took a few lines: no line per batch, no backoff-free flood
    warnings = [ln for ln in lines if ln.get("level") in ("warning", "error")]
    assert len(warnings) <= 4, (f"{len(warnings)} warnings in {hung:.0f}s of hang:\n"
                                + "\n".join(json.dumps(w) for w in warnings))
    assert not [ln for ln in lines if ln.get("event") == "sync.batch" and ln.get("status") == "failed"]


def test_a_policy_whose_tables_match_nothing_is_refused_at_its_start(primary: Any, analytics: Any,
                                                                     tmp_path: Path) -> None:
    federation = tmp_path / "federation.yml"
    federation.write_text(federation_yaml(primary.uri, "federated-meta-stores:\n- name: analytics\n"
                                                       f"  remote-meta-store-uris: {analytics.uri}\n"))
    pattern = f"nomatch_{uuid.uuid4().hex[:6]}\\..*"
    config = sync_file(tmp_path / "sync.yml", federation, [
        {"name": "nothing", "tables": pattern, "follow": True}], source="analytics", **{"http-port": 0})
    said = f"policy 'nothing' (analytics:{pattern}): no source table matches"

    follower = FollowerProcess(config, tmp_path / "follower.log").start()
    assert follower.wait(60) == 2
    assert f"error: {said}" in follower.output(), follower.output()[-3000:]
    assert "sync.service_started" not in follower.output()

    # a run of the policy without a service (its bootstrap) fails in the same words
    done = subprocess.run([sys.executable, "-m", "waggle", "sync", "--run-now", "nothing", "--config", str(config)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, env=dict(os.environ))
    assert done.returncode == 2 and "policy 'nothing': failed, 1 batch(es)" in done.stdout, done.stdout
    assert said in done.stdout, done.stdout + done.stderr

    # as a batch run of the same job says it
    done = subprocess.run([sys.executable, "-m", "waggle", "sync", "--config", str(config), "--no-progress"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, env=dict(os.environ))
    assert done.returncode == 2 and f"analytics:{pattern} -> -: no source table matches" in done.stdout, \
        done.stdout + done.stderr
