"""The socket stream over gevent's public API: a close wakes a greenlet waiting to read, a timeout ends the wait, a
shutdown reads as the end, and TLS or SASL socket-likes (which may hold bytes already read) are not waited for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gevent
import gevent.socket
import pytest
from gevent.exceptions import ConcurrentObjectUseError
from thrift.Thrift import TMessageType

from waggle.common.streams import SocketStream
from waggle.config.model import Limits, WireFormat
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as T
from waggle.hms.wire import PeerClosed, Wire

LIMITS = Limits(1 << 20, 1 << 16, 1000)


@pytest.fixture
def socks() -> Iterator[tuple[Any, Any]]:
    a, b = gevent.socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_a_round_trip_through_wires_on_two_socket_streams(socks):
    a, b = socks
    ours, theirs = Wire(SocketStream(a), WireFormat(), LIMITS), Wire(SocketStream(b), WireFormat(), LIMITS)
    args = T.get_table_args(dbname="sales", tbl_name="orders")

    def serve() -> None:
        header = theirs.read_begin()
        assert theirs.read_struct(T.get_table_args) == args
        theirs.read_end()
        theirs.send(header.name, TMessageType.REPLY, header.seqid, T.get_table_result())

    server = gevent.spawn(serve)
    ours.send("get_table", TMessageType.CALL, 3, args)
    assert ours.read_begin() == ("get_table", TMessageType.REPLY, 3)
    ours.skip_struct()
    ours.read_end()
    server.get(timeout=5)


def test_recv_and_send_are_the_sockets_own(socks):
    a, _ = socks
    stream = SocketStream(a)
    assert stream.recv == a.recv and stream.send == a.send and stream.sendall == a.sendall


def test_closing_the_stream_wakes_a_greenlet_waiting_to_read(socks):
    _, b = socks
    stream = SocketStream(b)
    wire = Wire(stream, WireFormat(), LIMITS)
    reader = gevent.spawn(wire.read_begin)
    gevent.sleep(0.01)
    assert not reader.ready()  # waiting on the stream's watcher
    stream.close()
    reader.join(timeout=2)
    assert reader.ready(), "the close did not wake the reader"
    assert isinstance(reader.exception, OSError)  # as a recv on a socket closed in another greenlet
    assert b.fileno() == -1
    stream.close()  # twice is harmless
    assert stream.readable()  # a closed stream reads (an error), so it is never reused


def test_a_wait_on_a_closed_stream_is_left_to_recv_to_report(socks):
    _, b = socks
    stream = SocketStream(b)
    stream.close()
    stream.wait_readable()  # returns at once
    with pytest.raises(OSError):
        stream.recv(1)


def test_a_timeout_ends_the_wait_as_recv_would(socks):
    _, b = socks
    stream = SocketStream(b)
    stream.settimeout(0.05)
    with gevent.Timeout(2), pytest.raises(TimeoutError):
        Wire(stream, WireFormat(), LIMITS).read_begin()
    stream.settimeout(None)  # and no timeout: it waits until the bytes come
    gevent.spawn_later(0.05, socks[0].sendall, b"x")
    stream.wait_readable()
    assert stream.recv(1) == b"x"


def test_the_sockets_own_timeout_is_the_streams_at_first(socks):
    _, b = socks
    b.settimeout(0.05)
    with gevent.Timeout(2), pytest.raises(TimeoutError):
        SocketStream(b).wait_readable()


def test_a_shutdown_from_another_greenlet_reads_as_the_end(socks):
    _, b = socks
    stream = SocketStream(b)
    wire = Wire(stream, WireFormat(), LIMITS)
    gevent.spawn_later(0.01, stream.shutdown)
    with gevent.Timeout(2), pytest.raises(PeerClosed):
        wire.read_begin()
    stream.shutdown()  # again, on a socket already shut down: nothing raised


def test_readable_says_whether_recv_has_something_without_waiting(socks):
    a, b = socks
    stream = SocketStream(b)
    assert not stream.readable()
    a.sendall(b"x")
    gevent.sleep(0)
    assert stream.readable()
    assert stream.recv(1) == b"x" and not stream.readable()
    a.close()
    assert stream.readable()  # the end is something to read


def test_two_greenlets_waiting_on_one_stream_is_an_error(socks):
    _, b = socks
    stream = SocketStream(b)
    first = gevent.spawn(stream.wait_readable)
    gevent.sleep(0.01)
    with pytest.raises(ConcurrentObjectUseError):
        stream.wait_readable()
    stream.close()
    first.join(timeout=2)
    assert first.ready()  # woken: with the OSError of a closed socket, or to find it closed when it reads


class SocketLike:
    """A TLS or SASL socket stand-in: it has bytes read already, which no watcher on the descriptor would see."""

    def __init__(self, sock: Any, held: bytes) -> None:
        self.sock = sock
        self.held = held
        self.closed = False

    def recv(self, n: int) -> bytes:
        data, self.held = self.held[:n], self.held[n:]
        return data or self.sock.recv(n)

    def send(self, data: bytes) -> int:
        return int(self.sock.send(data))

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def gettimeout(self) -> float | None:
        return float(self.sock.gettimeout() or 0) or None

    def settimeout(self, seconds: float | None) -> None:
        self.sock.settimeout(seconds)

    def fileno(self) -> int:
        return int(self.sock.fileno())

    def close(self) -> None:
        self.closed = True
        self.sock.close()


def test_a_socket_like_is_not_waited_for(socks):
    _, b = socks
    held = Wire(None, WireFormat(), LIMITS).encode(  # type: ignore[arg-type]
        "get_all_databases", TMessageType.CALL, 1, T.get_all_databases_args())
    like = SocketLike(b, held)  # nothing on the descriptor: all of the message was read ahead
    stream = SocketStream(like)
    with gevent.Timeout(2):
        stream.wait_readable()  # at once
        wire = Wire(stream, WireFormat(), LIMITS)
        assert wire.read_begin().name == "get_all_databases"
    stream.close()
    assert like.closed


def test_a_subclass_of_the_gevent_socket_is_a_socket_like(socks):
    """gevent's TLS socket subclasses its socket, and may hold decrypted bytes: only the plain class is waited
    for."""

    class Sub(gevent.socket.socket):  # type: ignore[misc]
        pass

    sub = Sub(fileno=socks[1].detach())
    try:
        sub.settimeout(0.05)
        SocketStream(sub).wait_readable()  # no wait, so no timeout either
    finally:
        sub.close()
