"""Rate limits (``limits.rates``) in front of a real metastore, through one waggle process: a user over its limit
gets the limit's error and nothing reaches the metastore, another user is served meanwhile, what keeps a client
going is never limited, a hot reload that raises the rate lets the user through, and the metrics count it all.

Hive 2.3's own client, made as Hive makes it (``RetryingMetaStoreClient.getProxy``; ``java/RetryCheck.java``),
retries a limited call after ``hive.metastore.client.connect.retry.delay`` and succeeds: the error's message holds
``TTransportException``, which ``RetryingMetaStoreClient.invoke`` treats as recoverable.
"""

from __future__ import annotations

import getpass
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes

from tests.support.audit import audit_count, audit_line, audit_lines
from tests.support.federation import prefixed
from tests.support.java import compiled
from tests.support.proxy import WaggleProcess
from tests.support.waits import wait_for

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).parent / "java" / "RetryCheck.java"


def server_yaml(alice_rate: float) -> str:
    return ("database-resolution: PREFIXED\nlogging:\n  format: json\nlimits:\n  rates:\n"
            f"    - {{name: alice-reads, users: [alice], methods: [reads], rate: {alice_rate}, burst: 2}}\n"
            f"    - {{name: java-retry, users: [{getpass.getuser()}], methods: [reads], rate: 0.5, burst: 1}}\n")


class Compiling(threading.Thread):
    """The Java checker, compiled in the background while the test runs."""

    def __init__(self, source: Path, classes: Path) -> None:
        super().__init__(daemon=True)
        self.source, self.classes = source, classes
        self.result: list[str] | BaseException = []
        self.start()

    def run(self) -> None:
        try:
            self.result = compiled(self.source, self.classes)
        except BaseException as exc:  # a missing javac skips (or, in CI, fails) the test in its own thread
            self.result = exc

    def command(self) -> list[str]:
        self.join(180)
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


def answer(call: Any) -> str:
    """What a call was answered with: its value, or its exception."""
    try:
        return repr(call())
    except Exception as exc:
        return repr(exc)


def generation(proxy: WaggleProcess) -> int:
    import json

    return int(json.loads(proxy.http("/api/admin/federations"))["generation"])


def test_a_user_over_its_limit_is_refused_before_the_metastore_and_others_are_served(primary: Any, tmp_path: Path):
    probe = f"limits_probe_{uuid.uuid4().hex[:8]}"  # a database nobody has: each call that arrives is audited
    java = Compiling(SOURCE, tmp_path / "classes")  # meanwhile
    proxy = WaggleProcess(tmp_path, prefixed(primary.uri), server_yaml(0.01)).start()
    try:
        with proxy.client() as alice, proxy.client() as bob:
            alice.set_ugi("alice", [])
            bob.set_ugi("bob", [])
            for _ in range(2):  # the burst
                with pytest.raises(ttypes.NoSuchObjectException):
                    alice.get_database(probe)
            for _ in range(2):
                with pytest.raises(ttypes.MetaException) as limited:
                    alice.get_database(probe)
            message = limited.value.message
            assert message.startswith("waggle rate limit 'alice-reads' reached by user 'alice' (reads: 0.01 calls/s, "
                                      "burst 2); retry in "), message
            assert "TTransportException" in message and "nothing reached a metastore" in message
            # never limited: the identity, and lock checks, keep-alives and releases (the metastore answers them)
            assert alice.set_ugi("alice", []) is not None
            answers = [answer(lambda: alice.check_lock(ttypes.CheckLockRequest(lockid=987654321))),
                       answer(lambda: alice.heartbeat(ttypes.HeartbeatRequest(lockid=987654321))),
                       answer(lambda: alice.unlock(ttypes.UnlockRequest(lockid=987654321)))]
            assert not [a for a in answers if "rate limit" in a], answers
            assert "default" in alice.get_all_databases()  # listings are not what the rule counts
            for _ in range(5):  # another user is served meanwhile
                assert bob.get_database("default").name == "default"
            # only the burst reached the metastore: a later call's audit line is written, so theirs would be too
            assert len(audit_lines(primary, rf"ugi=alice\t.*get_database: {probe}\b")) >= 1
            marker = f"limits_marker_{uuid.uuid4().hex[:8]}"
            with pytest.raises(ttypes.NoSuchObjectException):
                bob.get_database(marker)
            audit_line(primary, rf"ugi=bob\t.*get_database: {marker}\b")
            assert audit_count(primary, f"get_database: {probe}") == 2

            # the metrics count every limited call; the log says it once a second at most
            assert proxy.metric("waggle_limited_calls_total", limit="alice-reads", family="reads") == 2.0
            assert proxy.metric("waggle_call_errors_total", method="get_database", metastore="-", kind="shed") == 2.0
            assert proxy.metric("waggle_limit_buckets", limit="alice-reads") == 1.0
            logged = wait_for(lambda: proxy.events("call.limited"), 10.0, "a call.limited line")
            assert 1 <= len(logged) <= 2 and logged[0]["limit"] == "alice-reads" and logged[0]["user"] == "alice"
            assert logged[0]["method"] == "get_database" and logged[0]["family"] == "reads"

            # a hot reload that raises the rate lets alice through at once, on the same connection
            proxy.server_file.write_text(proxy.server_file.read_text().replace("rate: 0.01", "rate: 1000"))
            wait_for(lambda: generation(proxy) == 2, 20.0, "the reload")
            for _ in range(3):
                assert alice.get_database("default").name == "default"
        assert proxy.metric("waggle_limited_calls_total", limit="alice-reads", family="reads") == 2.0

        # Hive 2.3's client retries a limited call (RetryingMetaStoreClient) and so gets its answers
        done = subprocess.run([*java.command(), f"thrift://127.0.0.1:{proxy.port}", "default",
                               "2", "4"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        elapsed_ms = int(done.stdout.split("ms=")[1].split()[0])
        assert elapsed_ms >= 900, done.stdout  # the second call was refused, and retried 1 s apart until served
        assert (proxy.metric("waggle_limited_calls_total", limit="java-retry", family="reads") or 0) >= 1
    finally:
        proxy.stop()
