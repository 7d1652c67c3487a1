"""SASL framing as Hive frames it, over a socket pair: negotiation messages, refusals, data frames."""

from __future__ import annotations

import socket
import struct
import threading
from typing import Any

import pytest

from waggle.security import sasl


class Echo:
    """A toy mechanism: the server answers ``ok:<data>`` twice, then is complete; the client mirrors it."""

    name = "ECHO"

    def __init__(self, rounds: int = 2, wraps: bool = False) -> None:
        self.rounds = rounds
        self.seen: list[bytes] = []
        self._wraps = wraps

    @property
    def complete(self) -> bool:
        return len(self.seen) >= self.rounds

    @property
    def wraps(self) -> bool:
        return self._wraps

    def initial(self) -> bytes:
        return b"hello"

    def step(self, data: bytes) -> bytes:
        if data == b"bad":
            raise sasl.SaslError("bad input")
        self.seen.append(data)
        return b"ok:" + data

    def wrap(self, data: bytes) -> bytes:
        return bytes(b ^ 0x5A for b in data)

    def unwrap(self, data: bytes) -> bytes:
        return bytes(b ^ 0x5A for b in data)


def run_server(sock: socket.socket, factories: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def serve() -> None:
        try:
            out["mech"] = sasl.accept(sock, factories)
        except sasl.SaslError as exc:
            out["error"] = str(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    out["thread"] = thread
    return out


def test_a_negotiation_completes_and_frames_carry_the_bytes():
    a, b = socket.socketpair()
    server = run_server(a, {"ECHO": lambda: Echo(2, wraps=True)})
    client = Echo(1, wraps=True)
    sasl.initiate(b, client)
    server["thread"].join(5)
    mech = server["mech"]
    assert mech.seen == [b"hello", b"ok:ok:hello"] and client.seen == [b"ok:hello"]
    left, right = sasl.SaslSocket(a, mech, 1 << 20), sasl.SaslSocket(b, client, 1 << 20)
    right.send(b"x" * 70000)
    got = b""
    while len(got) < 70000:
        got += left.recv(4096)
    assert got == b"x" * 70000 and not left.pending()
    b.sendall(struct.pack("!I", 3) + client.wrap(b"abc"))
    assert left.recv(100) == b"abc"


def test_a_plain_thrift_client_is_answered_bad_before_anything_else_is_read():
    a, b = socket.socketpair()
    server = run_server(a, {"GSSAPI": Echo})
    b.sendall(struct.pack("!I", 0x80010001) + b"\x00\x00\x00\x10get_all_databases")
    status, payload = sasl.read_message(b)
    server["thread"].join(5)
    assert status == sasl.BAD and b"requires SASL" in payload
    assert "expected a SASL START" in server["error"]


def test_a_client_whose_mechanism_fails_before_start_is_reported_with_its_reason():
    """Java's TSaslClientTransport sends BAD with its error when its GSSAPI client fails (no ticket)."""
    a, b = socket.socketpair()
    server = run_server(a, {"GSSAPI": Echo})
    sasl.send_message(b, sasl.BAD, b"GSS initiate failed")
    server["thread"].join(5)
    assert server["error"] == ("the client gave up before starting the SASL negotiation (BAD): "
                               "GSS initiate failed")


def test_an_unknown_mechanism_and_a_failing_step_are_refused_with_reasons():
    a, b = socket.socketpair()
    server = run_server(a, {"GSSAPI": Echo})
    sasl.send_message(b, sasl.START, b"PLAIN")
    status, payload = sasl.read_message(b)
    server["thread"].join(5)
    assert status == sasl.BAD and b"unsupported SASL mechanism 'PLAIN'" in payload

    a, b = socket.socketpair()
    server = run_server(a, {"ECHO": Echo})
    sasl.send_message(b, sasl.START, b"ECHO")
    sasl.send_message(b, sasl.OK, b"bad")
    status, payload = sasl.read_message(b)
    server["thread"].join(5)
    assert status == sasl.BAD and payload == b"bad input" and server["error"] == "bad input"


def test_the_client_reports_the_servers_refusal():
    a, b = socket.socketpair()
    threading.Thread(target=lambda: (sasl.read_message(a), sasl.read_message(a),
                                     sasl.send_message(a, sasl.BAD, b"no such principal"))).start()
    with pytest.raises(sasl.SaslError, match="no such principal"):
        sasl.initiate(b, Echo(1))


def test_oversized_negotiation_messages_and_frames_are_refused():
    a, b = socket.socketpair()
    b.sendall(struct.pack("!BI", sasl.OK, sasl.MAX_NEGOTIATION_BYTES + 1))
    with pytest.raises(sasl.SaslError, match="over the limit"):
        sasl.read_message(a)
    a, b = socket.socketpair()
    wrapped = sasl.SaslSocket(a, Echo(0), 1024)
    b.sendall(struct.pack("!I", 4096))
    with pytest.raises(ConnectionError, match="over the limit"):
        wrapped.recv(10)
