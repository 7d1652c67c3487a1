"""A federated member that dies or crawls never stalls the primary or the others, and comes back by itself."""

from __future__ import annotations

import threading
import time

import pytest
from hmsclient.genthrift.hive_metastore import ttypes

from tests.support.clients import hive2_client
from tests.support.federation import federation_yaml
from tests.support.proxy import WaggleProcess
from waggle.local.metastore import LocalMetastore
from waggle.local.seed import ensure_database, ensure_table


class PrimaryProbe(threading.Thread):
    """Calls the primary through waggle in a loop and records the slowest answer."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.slowest = 0.0
        self.calls = 0
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        with hive2_client(self.port) as c:
            while not self.stopping.is_set():
                started = time.monotonic()
                try:
                    c.get_database("default")
                except Exception as exc:  # recorded and asserted on
                    self.errors.append(repr(exc))
                self.slowest = max(self.slowest, time.monotonic() - started)
                self.calls += 1
                time.sleep(0.02)

    def stop(self) -> None:
        self.stopping.set()
        self.join(10)


def _eventually(check, within: float, step: float = 0.2):
    deadline = time.monotonic() + within
    while True:
        try:
            return check()
        except (AssertionError, pytest.fail.Exception, ttypes.MetaException, ttypes.NoSuchObjectException):
            if time.monotonic() > deadline:
                raise
            time.sleep(step)


def test_member_killed_mid_run_and_a_slow_member(primary, analytics, federation_data, tmp_path):
    from tests.support.faults import SlowLink

    flaky = LocalMetastore(tmp_path / "flaky").start().wait_ready()
    slow = SlowLink(analytics.port, delay=3.0)
    with hive2_client(flaky.port) as c:
        ensure_database(c, "logs", f"file://{flaky.warehouse}/logs.db")
        ensure_table(c, "logs", "lines", f"file://{flaky.warehouse}/logs.db/lines", [("id", "int")], rows=["1"])
    members = (f"federated-meta-stores:\n"
               f"- name: flaky\n  remote-meta-store-uris: {flaky.uri}\n"
               f"- name: slow\n  remote-meta-store-uris: thrift://127.0.0.1:{slow.port}\n")
    proxy = WaggleProcess(tmp_path / "waggle", federation_yaml(primary.uri, members),
                          "database-resolution: PREFIXED\nfan-out-timeout: 1000\ndown-member-retry: 1\n").start()
    probe = PrimaryProbe(proxy.port)
    probe.start()
    try:
        with hive2_client(proxy.port) as c:
            # the slow member is left out of the merge after its 1 s, and said so in the log
            started = time.monotonic()
            names = c.get_all_databases()
            assert time.monotonic() - started < 2.5
            assert "flaky_logs" in names and "default" in names
            assert not any(n.startswith("slow_") for n in names)
            assert "fanout.member_omitted" in proxy.log() and "slow" in proxy.log()

            flaky.kill()
            with pytest.raises(ttypes.MetaException, match="metastore 'flaky'"):
                c.get_table("flaky_logs", "lines")
            # once known down: at once, naming it, and its databases drop out of listings
            started = time.monotonic()
            _eventually(lambda: _fails_fast(c), within=5)
            assert "flaky_logs" not in c.get_all_databases()
            assert time.monotonic() - started < 6

            flaky.start().wait_ready()
            table = _eventually(lambda: c.get_table("flaky_logs", "lines"), within=10)
            assert table.dbName == "flaky_logs"
            assert "flaky_logs" in c.get_all_databases()
        log = proxy.log()
        assert "metastore.down" in log and "metastore.up" in log
    finally:
        probe.stop()
        proxy.stop()
        flaky.stop()
        slow.close()
    assert probe.calls > 20 and not probe.errors, probe.errors
    assert probe.slowest < 1.0, f"the primary stalled for {probe.slowest:.2f}s"


def _fails_fast(c) -> None:
    started = time.monotonic()
    with pytest.raises(ttypes.MetaException, match="metastore 'flaky' is unavailable"):
        c.get_database("flaky_logs")
    assert time.monotonic() - started < 0.5
