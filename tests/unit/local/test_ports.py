"""Ports for local components (``waggle.local.jvm.free_port``): from the kernel, or from a range of the process's own,
handed out in turn, never one something listens on, never the same one twice before the range wraps."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from waggle.local import jvm

FIRST = 28990  # in no worker's range of the suite (tests/conftest.py)


@pytest.fixture
def own_range() -> Iterator[None]:
    saved = jvm._PORTS.span, jvm._PORTS.next
    jvm.use_ports(FIRST, FIRST + 3)
    yield
    jvm._PORTS.span, jvm._PORTS.next = saved


def test_a_range_hands_out_each_port_once_in_turn_then_wraps(own_range: None) -> None:
    assert [jvm.free_port() for _ in range(6)] == [FIRST, FIRST + 1, FIRST + 2, FIRST + 3, FIRST, FIRST + 1]


def test_a_port_something_listens_on_is_passed_over_on_any_of_its_addresses(own_range: None) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.2", FIRST + 1))
        taken.listen()
        assert [jvm.free_port() for _ in range(3)] == [FIRST, FIRST + 2, FIRST + 3]
        assert jvm.free_port("127.0.0.1", "127.0.0.3") == FIRST


def test_a_range_with_every_port_taken_says_so(own_range: None) -> None:
    listening = []
    try:
        for port in range(FIRST, FIRST + 4):
            s = socket.socket()
            s.bind(("127.0.0.1", port))
            s.listen()
            listening.append(s)
        with pytest.raises(jvm.LocalMetastoreError, match=f"no port free in {FIRST}-{FIRST + 3}"):
            jvm.free_port()
    finally:
        for s in listening:
            s.close()


def test_without_a_range_the_kernel_chooses_a_port_free_on_every_host_asked() -> None:
    saved = jvm._PORTS.span
    jvm._PORTS.span = None
    try:
        port = jvm.free_port("127.0.0.1", "127.0.0.2")
        for host in ("127.0.0.1", "127.0.0.2"):
            assert jvm.port_taken(port, host) is None
    finally:
        jvm._PORTS.span = saved


def test_a_metastore_is_not_started_on_a_port_another_process_listens_on(tmp_path: Path) -> None:
    """Its readiness check would find the other process answering (a restart on its old port, say)."""
    from waggle.local.metastore import LocalMetastore

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        store = LocalMetastore(tmp_path / "hms", port=port)
        with pytest.raises(jvm.LocalMetastoreError, match=f"port {port} is taken"):
            store.start()
        assert store.process is None


def test_connections_still_closing_on_a_port_do_not_make_it_taken_for_a_server() -> None:
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server's side closes first: its end lingers in TIME_WAIT on the port
        client.close()
    assert jvm.port_taken(port, "127.0.0.1") is not None  # a plain bind is refused while it lingers
    assert jvm.port_taken(port, "127.0.0.1", reuse_address=True) is None
