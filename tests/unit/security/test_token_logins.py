"""Token logins through waggle's front door, on a clock the test turns: a real DIGEST-MD5 client on a real socket
logs in with the tokens waggle's token service issued, renewed and cancelled. Expiry is decided by the clock
injected into the token service, so no test waits for a token to lapse."""

from __future__ import annotations

import base64
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from thrift.transport.TTransport import TTransportException

from tests.support.sasl_clients import digest_client
from tests.support.tokens import Clock, MemoryStore
from waggle.config.model import KerberosServer, Limits, ServerSecurity
from waggle.security import token_service
from waggle.security.frontdoor import Authenticated, FrontDoor, Refused
from waggle.security.gss import KerberosLogin

RENEW_MS = 6_000
MAX_LIFETIME_MS = 60_000


@dataclass
class Door:
    """waggle's front door with DIGEST-MD5 logins on a listening socket, answering one client at a time."""

    tokens: token_service.TokenService
    clock: Clock
    door: FrontDoor
    server: socket.socket

    def login(self, token: str) -> Authenticated | str:
        """Who the front door let in with ``token``, or why it refused (also seen by the client as a failure)."""
        outcome: list[Authenticated | str] = []

        def serve() -> None:
            conn, _ = self.server.accept()
            try:
                outcome.append(self.door.open(conn)[1] or "no identity")
            except Refused as exc:
                outcome.append(str(exc))
            finally:
                conn.close()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            with digest_client("127.0.0.1", self.server.getsockname()[1], token, timeout=10):
                pass
        except TTransportException:
            pass  # refused: the reason is the server's
        thread.join(10)
        assert outcome, "the front door answered nothing"
        return outcome[0]


@pytest.fixture
def door(tmp_path: Path) -> Iterator[Door]:
    keys = tmp_path / "token-keys"
    keys.write_text("1:" + base64.b64encode(b"k" * 32).decode() + "\n")
    # no keytab is read: GSSAPI is offered, but these clients log in with DIGEST-MD5
    kerberos = KerberosServer(principal="waggle/localhost@WAGGLE.TEST", keytab=str(tmp_path / "unused.keytab"),
                              token_key_file=str(keys), token_renew_interval_ms=RENEW_MS,
                              token_max_lifetime_ms=MAX_LIFETIME_MS)
    clock = Clock()
    tokens = token_service.build(kerberos, {}, MemoryStore(), clock=clock)
    front = FrontDoor(ServerSecurity(kerberos=kerberos), Limits(1 << 20, 1 << 20, 10_000),
                      KerberosLogin(kerberos.principal, kerberos.keytab), tokens)
    server = socket.create_server(("127.0.0.1", 0))
    try:
        yield Door(tokens, clock, front, server)
    finally:
        server.close()


def test_renewed_tokens_live_on_and_cancelled_or_expired_ones_do_not(door: Door) -> None:
    issue = lambda: door.tokens.issue("alice", False, "127.0.0.1", "alice", "alice")  # noqa: E731
    kept, lapsed, cancelled = issue(), issue(), issue()
    door.tokens.cancel("alice", cancelled)
    door.clock.advance(RENEW_MS // 2)
    assert door.tokens.renew("alice", kept) == door.clock.now + RENEW_MS
    refused = door.login(cancelled)
    assert isinstance(refused, str) and "was cancelled" in refused, refused
    door.clock.advance(RENEW_MS // 2 + 1)  # past the first expiry of all three; within the renewal of one
    who = door.login(kept)
    assert isinstance(who, Authenticated), who
    assert (who.user, who.mechanism) == ("alice", "DIGEST-MD5")
    refused = door.login(lapsed)
    assert isinstance(refused, str) and "expired at" in refused, refused


def test_a_token_is_good_up_to_its_expiry_and_not_a_millisecond_past_it(door: Door) -> None:
    token = door.tokens.issue("alice", False, "127.0.0.1", "alice", "alice")
    door.clock.advance(RENEW_MS)
    assert isinstance(door.login(token), Authenticated)
    door.clock.advance(1)
    refused = door.login(token)
    assert isinstance(refused, str) and "expired at" in refused, refused


def test_renewals_stop_at_the_max_lifetime(door: Door) -> None:
    token = door.tokens.issue("alice", False, "127.0.0.1", "alice", "alice")
    issued = door.clock.now
    while door.clock.now + (RENEW_MS - 1) + RENEW_MS <= issued + MAX_LIFETIME_MS:
        door.clock.advance(RENEW_MS - 1)  # renewed just before each expiry
        assert door.tokens.renew("alice", token) == door.clock.now + RENEW_MS
    door.clock.advance(RENEW_MS - 1)
    assert door.tokens.renew("alice", token) == issued + MAX_LIFETIME_MS  # capped, not extended
    door.clock.advance(issued + MAX_LIFETIME_MS - door.clock.now)
    assert isinstance(door.login(token), Authenticated)
    door.clock.advance(1)
    refused = door.login(token)
    assert isinstance(refused, str) and "max date" in refused, refused
