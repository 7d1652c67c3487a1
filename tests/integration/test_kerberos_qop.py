"""SASL GSSAPI with real Kerberos tickets: every protection level, and a refused one, over a socket pair."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from waggle.config.hive_values import parse_qop
from waggle.security import sasl
from waggle.security.gss import GssapiClient, GssapiServer, KerberosLogin

pytestmark = [pytest.mark.integration, pytest.mark.kerberos]


def negotiate(kdc: Any, offered: tuple[str, ...], wanted: tuple[str, ...]) -> tuple[Any, Any, dict[str, Any]]:
    server_login = KerberosLogin(kdc.principal("waggle/localhost"), str(kdc.keytab_path("waggle/localhost")))
    alice = KerberosLogin(kdc.principal("alice"), str(kdc.keytab_path("alice")))
    a, b = socket.socketpair()
    out: dict[str, Any] = {}

    def serve() -> None:
        try:
            out["mech"] = sasl.accept(a, {"GSSAPI": lambda: GssapiServer(server_login.acceptor(), offered)})
        except sasl.SaslError as exc:
            out["error"] = str(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    client = GssapiClient(alice.initiator(), kdc.principal("waggle/localhost"), wanted)
    try:
        sasl.initiate(b, client)
    finally:
        thread.join(10)
    return (a, b), client, out


@pytest.mark.parametrize("qop", ["auth", "auth-int", "auth-conf"])
def test_each_protection_level_carries_messages(kdc, qop):
    (a, b), client, out = negotiate(kdc, ("auth", "auth-int", "auth-conf"), (qop,))
    server = out["mech"]
    assert (client.qop, server.qop, server.principal) == (qop, qop, kdc.principal("alice"))
    left, right = sasl.SaslSocket(a, server, 1 << 20), sasl.SaslSocket(b, client, 1 << 20)
    right.send(b"get_all_databases" * 100)
    got = b""
    while len(got) < 1700:
        got += left.recv(4096)
    assert got == b"get_all_databases" * 100
    left.send(b"reply")
    assert right.recv(10) == b"reply"
    if qop == "auth-conf":  # the bytes on the wire are not the message
        wrapped = server.wrap(b"secret-table-name")
        assert b"secret-table-name" not in wrapped


def test_a_client_that_wants_less_than_the_server_offers_is_refused(kdc):
    with pytest.raises(sasl.SaslError, match="offers protection auth-conf; waggle is configured for auth"):
        negotiate(kdc, ("auth-conf",), ("auth",))


def test_hadoop_rpc_protection_names_map_to_qops():
    assert parse_qop("privacy, integrity,authentication") == ("auth-conf", "auth-int", "auth")
    with pytest.raises(ValueError, match="'secret' is not a protection level"):
        parse_qop("secret")
