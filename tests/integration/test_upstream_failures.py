"""A metastore that is down, silent, hangs up or dies becomes a MetaException naming it, in bounded time,
and the client's connection stays usable."""

from __future__ import annotations

import time

import pytest
from hmsclient.genthrift.hive_metastore import ttypes

from tests.support.faults import BlackHole, HangUp
from tests.support.federation import federation_yaml
from tests.support.proxy import WaggleProcess
from waggle.local.jvm import free_port
from waggle.local.metastore import LocalMetastore

pytestmark = pytest.mark.integration


def _expect_meta_exception(call, *fragments: str, within: float) -> float:
    started = time.monotonic()
    with pytest.raises(ttypes.MetaException) as info:
        call()
    elapsed = time.monotonic() - started
    for fragment in fragments:
        assert fragment in info.value.message, info.value.message
    assert elapsed < within, f"took {elapsed:.1f}s"
    return elapsed


def test_stopped_upstream_fails_fast_with_a_clear_error(tmp_path):
    dead = free_port()
    proxy = WaggleProcess(tmp_path, federation_yaml(f"thrift://127.0.0.1:{dead}")).start()
    try:
        with proxy.client() as c:
            for _ in range(2):  # the connection survives the failure
                _expect_meta_exception(c.get_all_databases, "metastore 'primary'", "unreachable",
                                       f"127.0.0.1:{dead}", within=3)
    finally:
        proxy.stop()


def test_a_silent_upstream_is_down_from_its_first_check_and_calls_fail_at_once(tmp_path):
    hole = BlackHole()
    fed = federation_yaml(f"thrift://127.0.0.1:{hole.port}", "  read-timeout: 1500\n")
    proxy = WaggleProcess(tmp_path, fed, "health-check-timeout: 1000\n").start()
    try:
        down = proxy.events("metastore.down")
        assert [e["member"] for e in down] == ["primary"] and "did not answer within 1s" in down[0]["reason"]
        with proxy.client() as c:
            _expect_meta_exception(lambda: c.get_database("default"), "metastore 'primary' is unavailable since",
                                   "did not answer within 1s", within=1)
    finally:
        proxy.stop()
        hole.close()


def test_upstream_hanging_up_mid_call(tmp_path):
    peer = HangUp()
    proxy = WaggleProcess(tmp_path, federation_yaml(f"thrift://127.0.0.1:{peer.port}")).start()
    try:
        with proxy.client() as c:
            _expect_meta_exception(lambda: c.get_table("db", "t"), "metastore 'primary'", within=5)
            _expect_meta_exception(lambda: c.get_table("db", "t"), "metastore 'primary'", within=5)
    finally:
        proxy.stop()
        peer.close()


def test_uris_are_tried_in_order(primary, tmp_path):
    dead = free_port()
    fed = federation_yaml(f"thrift://127.0.0.1:{dead},{primary.uri}")
    proxy = WaggleProcess(tmp_path, fed).start()
    try:
        with proxy.client() as c:
            assert "default" in c.get_all_databases()
    finally:
        proxy.stop()


def test_metastore_killed_and_restarted(tmp_path):
    """A real metastore dies under waggle: calls fail naming it; after a restart they work again by themselves
    (the health check retries a down metastore every `down-member-retry` seconds, 1 here)."""
    store = LocalMetastore(tmp_path / "hms").start().wait_ready()
    proxy = WaggleProcess(tmp_path / "waggle", federation_yaml(store.uri), "down-member-retry: 1\n").start()
    try:
        with proxy.client() as c:
            assert "default" in c.get_all_databases()
            store.kill()
            _expect_meta_exception(c.get_all_databases, "metastore 'primary'", within=5)
            _expect_meta_exception(lambda: c.get_database("default"), "metastore 'primary'", within=1)
            store.start().wait_ready()
            deadline = time.monotonic() + 5
            while True:
                try:
                    assert "default" in c.get_all_databases()
                    break
                except ttypes.MetaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        assert "metastore.down" in proxy.log() and "metastore.up" in proxy.log()
    finally:
        proxy.stop()
        store.stop()


def test_metastore_failing_in_the_middle_of_a_streamed_reply_closes_only_that_client(tmp_path):
    """Half a reply has reached the client: it cannot be answered any more, so its connection is closed
    (Hive clients reconnect and retry); waggle goes on serving."""
    from thrift.transport.TTransport import TTransportException

    from tests.support.faults import TruncatedReply

    peer = TruncatedReply()
    # PREFIXED: no database listing at start, which would find this metastore broken before the call
    proxy = WaggleProcess(tmp_path, federation_yaml(f"thrift://127.0.0.1:{peer.port}"),
                          "database-resolution: PREFIXED\n").start()
    try:
        with proxy.client(timeout=10) as c:
            started = time.monotonic()
            with pytest.raises((TTransportException, EOFError, OSError)):
                c.get_all_tables("default")  # relayed as it arrives: half of it reaches the client
            assert time.monotonic() - started < 5
        # the next client is answered (the metastore is now known bad)
        with proxy.client(timeout=10) as c, pytest.raises((TTransportException, EOFError, OSError,
                                                            ttypes.MetaException)):
            c.get_all_tables("default")
        assert "call.failed_mid_reply" in proxy.log()
        assert proxy.proc is not None and proxy.proc.poll() is None
    finally:
        proxy.stop()
        peer.close()
