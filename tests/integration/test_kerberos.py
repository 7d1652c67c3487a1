"""Kerberos through waggle, with real parts: an MIT KDC, a Kerberized Hive 2.3 metastore as the primary (waggle
acts for each caller there), and a plain metastore beside it behind a prefix.

Clients log in to waggle with GSSAPI from a ticket cache or with a waggle delegation token over DIGEST-MD5;
whoever cannot is refused before a call is read.
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import SECURE_TOKEN_RENEW_SECONDS as RENEW_SECONDS
from conftest import hive2_client
from hmsclient.genthrift.hive_metastore import ttypes as t
from sasl_clients import digest_client, gssapi_client
from thrift.transport.TTransport import TTransportException

from waggle.security.tokens import decode_token, encode_token

pytestmark = [pytest.mark.integration, pytest.mark.kerberos]
REFUSED = (TTransportException, OSError, EOFError)


def audit_line(store: Any, pattern: str, timeout: float = 10.0) -> str:
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        for line in store.log_path.read_text(errors="replace").splitlines():
            if " audit: " in line and regex.search(line):
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no audit line matching {pattern!r} in {store.log_path}")
        time.sleep(0.1)


def ticket_cache(kdc: Any, name: str, tmp_path: Path) -> str:
    return str(kdc.kinit(name, kdc.keytab_path(name), tmp_path / f"{name.replace('/', '_')}.ccache"))


def as_user(secure_waggle: Any, kdc: Any, name: str, tmp_path: Path) -> Any:
    return gssapi_client("127.0.0.1", secure_waggle.port, service="waggle",
                         ccache=ticket_cache(kdc, name, tmp_path))


def new_database(client: Any) -> str:
    name = f"krb_{uuid.uuid4().hex[:10]}"
    client.create_database(t.Database(name=name, description="through waggle", parameters={}))
    return name


def test_a_kerberos_client_lists_and_creates_as_itself(secure_waggle, kdc, kerberized_metastore, analytics,
                                                       federation_data, tmp_path):
    with as_user(secure_waggle, kdc, "alice", tmp_path) as c:
        names = c.get_all_databases()
        assert "default" in names and "analytics_sales" in names
        created = new_database(c)
        c.set_ugi("bob", ["admins"])  # an authenticated identity cannot be changed
        assert c.get_database(created).name == created
        c.drop_database(created, True, True)
        assert c.get_database("analytics_sales").name.startswith("analytics_")
    line = audit_line(kerberized_metastore, rf"cmd=create_database: Database\(name:{created},")
    assert "ugi=alice\t" in line  # waggle acted for alice with her delegation token from the metastore
    dropped = audit_line(kerberized_metastore, rf"cmd=drop_database: {created}\b")
    assert "ugi=alice\t" in dropped and "bob" not in dropped
    audit_line(analytics, r"ugi=alice\t.*get_database: sales\b")
    event = secure_waggle.events("client.authenticated")[-1]
    assert event["user"] == "alice" and event["principal"] == f"alice@{kdc.realm}" and event["mechanism"] == "GSSAPI"


def test_a_client_without_sasl_is_refused_before_any_call(secure_waggle, kerberized_metastore):
    before = kerberized_metastore.log_path.read_text(errors="replace").count(" audit: ")
    with pytest.raises(REFUSED), hive2_client(secure_waggle.port, 10) as c:
        c.get_all_databases()
    refused = secure_waggle.events("client.unauthenticated")
    assert refused and "SASL" in refused[-1]["reason"]
    time.sleep(0.5)
    assert kerberized_metastore.log_path.read_text(errors="replace").count(" audit: ") == before


def test_a_token_from_waggle_logs_in_over_digest_md5(secure_waggle, kdc, kerberized_metastore, tmp_path):
    with as_user(secure_waggle, kdc, "alice", tmp_path) as c:
        token = c.get_delegation_token("alice", "alice")
    assert decode_token(token).kind == "HIVE_DELEGATION_TOKEN"
    with digest_client("127.0.0.1", secure_waggle.port, token) as d:
        assert "default" in d.get_all_databases()
        created = new_database(d)
        with pytest.raises(t.MetaException, match="Kerberos-authenticated"):
            d.get_delegation_token("alice", "alice")  # a token login gets no further tokens
        d.drop_database(created, True, True)
    assert "ugi=alice\t" in audit_line(kerberized_metastore, rf"cmd=create_database: Database\(name:{created},")
    event = secure_waggle.events("client.authenticated")[-1]
    assert event["user"] == "alice" and event["mechanism"] == "DIGEST-MD5"


def test_renewed_tokens_live_on_and_cancelled_or_expired_ones_do_not(secure_waggle, kdc, tmp_path):
    with as_user(secure_waggle, kdc, "alice", tmp_path) as c:
        kept = c.get_delegation_token("alice", "alice")
        lapsed = c.get_delegation_token("alice", "alice")
        cancelled = c.get_delegation_token("alice", "alice")
        c.cancel_delegation_token(cancelled)
        time.sleep(RENEW_SECONDS / 2)
        until = c.renew_delegation_token(kept)
        assert until > (time.time() + RENEW_SECONDS / 2) * 1000
    with pytest.raises(REFUSED), digest_client("127.0.0.1", secure_waggle.port, cancelled) as d:
        d.get_all_databases()
    assert "cancelled" in secure_waggle.events("client.unauthenticated")[-1]["reason"]
    time.sleep(RENEW_SECONDS / 2 + 1)
    with digest_client("127.0.0.1", secure_waggle.port, kept) as d:
        assert "default" in d.get_all_databases()
    with pytest.raises(REFUSED), digest_client("127.0.0.1", secure_waggle.port, lapsed) as d:
        d.get_all_databases()
    assert "expired" in secure_waggle.events("client.unauthenticated")[-1]["reason"]


def test_a_forged_token_is_refused(secure_waggle, kdc, tmp_path):
    with as_user(secure_waggle, kdc, "alice", tmp_path) as c:
        token = decode_token(c.get_delegation_token("alice", "alice"))
    forged = encode_token(token.identifier.replace(b"alice", b"admin"), token.password, token.kind, token.service)
    with pytest.raises(REFUSED), digest_client("127.0.0.1", secure_waggle.port, forged) as d:
        d.get_all_databases()
    guessed = encode_token(token.identifier, bytes(20), token.kind, token.service)
    with pytest.raises(REFUSED), digest_client("127.0.0.1", secure_waggle.port, guessed) as d:
        d.get_all_databases()


def test_a_client_of_an_untrusted_realm_is_refused(secure_waggle, kdc, tmp_path):
    from conftest import PARTNER_REALM

    from waggle.local.kdc import LocalKdc

    with LocalKdc(tmp_path / "partner", realm=PARTNER_REALM) as partner:
        keytab = partner.add_principal("carol")
        kdc.add_trusted_realm(partner)
        cache = partner.kinit("carol", keytab, tmp_path / "carol.ccache")
        with pytest.raises(REFUSED), gssapi_client("127.0.0.1", secure_waggle.port, service="waggle",
                                                   ccache=str(cache), server_realm=kdc.realm) as c:
            c.get_all_databases()
    reason = secure_waggle.events("client.unauthenticated")[-1]["reason"]
    assert f"carol@{PARTNER_REALM}" in reason and "does not trust" in reason
