"""Kerberos through waggle, with real parts: an MIT KDC, a Kerberized Hive 2.3 metastore as the primary (waggle
acts for each caller there), and a plain metastore beside it behind a prefix.

Clients log in to waggle with GSSAPI from a ticket cache or with a waggle delegation token over DIGEST-MD5;
whoever cannot is refused before a call is read.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as t
from thrift.transport.TTransport import TTransportException

from tests.support.audit import audit_line, audit_lines
from tests.support.clients import hive2_client
from tests.support.kerberos import SECURE_TOKEN_RENEW_SECONDS as RENEW_SECONDS
from tests.support.kerberos import secure_waggle_process
from tests.support.proxy import WaggleProcess
from tests.support.sasl_clients import digest_client, gssapi_client
from tests.support.waits import wait_for
from waggle.security.tokens import decode_token, encode_token

pytestmark = [pytest.mark.integration, pytest.mark.kerberos]
REFUSED = (TTransportException, OSError, EOFError)


def refusal(waggle: Any, text: str, timeout: float = 10.0) -> str:
    """The reason of a ``client.unauthenticated`` log entry containing ``text`` (waggle logs it after answering)."""
    deadline = time.monotonic() + timeout
    while True:
        reasons = [e["reason"] for e in waggle.events("client.unauthenticated") if text in e["reason"]]
        if reasons:
            return str(reasons[-1])
        if time.monotonic() > deadline:
            raise AssertionError(f"waggle logged no refusal mentioning {text!r}")
        time.sleep(0.1)


def ticket_cache(kdc: Any, name: str, tmp_path: Path) -> str:
    return str(kdc.kinit(name, kdc.keytab_path(name), tmp_path / f"{name.replace('/', '_')}.ccache"))


@pytest.fixture(scope="module")
def replica(kdc: Any, kerberized_metastore: Any, analytics: Any, secure_waggle: Any,
            tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A second waggle like ``secure_waggle``, with the same signing key: another replica behind one Service."""
    proc = secure_waggle_process(kdc, kerberized_metastore, analytics, tmp_path_factory.mktemp("replica"))
    try:
        yield proc
    finally:
        proc.stop()


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


def test_a_client_without_sasl_is_refused_before_any_call(secure_waggle, kerberized_metastore, kdc, tmp_path):
    before = len(audit_lines(kerberized_metastore, "", timeout=0))
    with pytest.raises(REFUSED), hive2_client(secure_waggle.port, 10) as c:
        c.get_all_databases()
    refusal(secure_waggle, "expected a SASL START message")
    marker = f"marker_{uuid.uuid4().hex[:10]}"
    with as_user(secure_waggle, kdc, "alice", tmp_path) as c, pytest.raises(t.NoSuchObjectException):
        c.get_database(marker)  # audited after anything the refused client could have caused
    audit_line(kerberized_metastore, rf"get_database: {marker}\b")
    since = audit_lines(kerberized_metastore, "", timeout=0)[before:]
    # only alice's call (and the metastore closing connections of earlier tests' users)
    assert not [line for line in since if "ugi=alice\t" not in line and "RawStore" not in line], since


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


def test_renewed_tokens_log_in_and_cancelled_ones_do_not(secure_waggle, kdc, tmp_path):
    """Issued, renewed and cancelled through a running waggle. When tokens expire is decided on an injected
    clock, through the same front door and token service, in tests/unit/security/test_token_logins.py."""
    with as_user(secure_waggle, kdc, "alice", tmp_path) as c:
        kept = c.get_delegation_token("alice", "alice")
        cancelled = c.get_delegation_token("alice", "alice")
        c.cancel_delegation_token(cancelled)
        asked = time.time()
        until = c.renew_delegation_token(kept)
        assert (asked + RENEW_SECONDS) * 1000 - 1 <= until <= (time.time() + RENEW_SECONDS) * 1000 + 1
    with pytest.raises(REFUSED), digest_client("127.0.0.1", secure_waggle.port, cancelled) as d:
        d.get_all_databases()
    refusal(secure_waggle, "was cancelled")
    with digest_client("127.0.0.1", secure_waggle.port, kept) as d:
        assert "default" in d.get_all_databases()


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
    from tests.support.kerberos import PARTNER_REALM
    from waggle.local.kdc import LocalKdc

    with LocalKdc(tmp_path / "partner", realm=PARTNER_REALM) as partner:
        keytab = partner.add_principal("carol")
        kdc.add_trusted_realm(partner)
        cache = partner.kinit("carol", keytab, tmp_path / "carol.ccache")
        with pytest.raises(REFUSED), gssapi_client("127.0.0.1", secure_waggle.port, service="waggle",
                                                   ccache=str(cache), server_realm=kdc.realm) as c:
            c.get_all_databases()
    assert "does not trust" in refusal(secure_waggle, f"principal carol@{PARTNER_REALM} is of realm")


def test_logs_never_contain_keys_tickets_tokens_or_passwords(secure_waggle, kdc, tmp_path):
    with as_user(secure_waggle, kdc, "alice", tmp_path) as c:
        token = c.get_delegation_token("alice", "alice")
        c.renew_delegation_token(token)
    with digest_client("127.0.0.1", secure_waggle.port, token) as d:
        d.get_all_databases()
    decoded = decode_token(token)
    forged = encode_token(decoded.identifier, bytes(20), decoded.kind, decoded.service)
    with pytest.raises(REFUSED), digest_client("127.0.0.1", secure_waggle.port, forged) as d:
        d.get_all_databases()
    with as_user(secure_waggle, kdc, "alice", tmp_path) as c:
        c.cancel_delegation_token(token)
    log = secure_waggle.log()
    secrets = {
        "token": token, "forged token": forged,
        "token identifier (the DIGEST user name)": base64.b64encode(decoded.identifier).decode(),
        "token password": base64.b64encode(decoded.password).decode(),
        "signing key": base64.b64encode(b"k" * 32).decode(),
        "ticket cache": Path(ticket_cache(kdc, "alice", tmp_path)).read_bytes()[-64:].hex(),
    }
    for what, secret in secrets.items():
        assert secret not in log, f"waggle's log contains the {what}"
    keytab = kdc.keytab_path("waggle/localhost").read_bytes()
    assert keytab[-32:].hex() not in log and "password=" not in log.lower()
    assert secure_waggle.events("token.issued") and secure_waggle.events("token.cancelled")


def test_a_kerberized_member_behind_an_ssh_tunnel_is_reached_as_waggle(kdc, kerberized_metastore, primary,
                                                                        tmp_path_factory):
    """No Kerberos front door here: waggle reaches a Kerberized member as itself, through an SSH hop whose local
    end (127.0.0.1) is not the metastore's host (localhost): the principal must name the metastore's."""
    from test_tunnels import start_hops, tunnel_yaml

    hops = start_hops(tmp_path_factory.mktemp("krb-ssh"), ("127.0.0.4",))
    try:
        member = tunnel_yaml("krb", f"thrift://localhost:{kerberized_metastore.port}", hops, hops.servers,
                             str(hops.key), hops.known_hosts, extra=(
                                 "  configuration-properties:\n"
                                 "    hive.metastore.sasl.enabled: true\n"
                                 f"    hive.metastore.kerberos.principal: hive/_HOST@{kdc.realm}\n"))
        member = member.replace("  metastore-tunnel:\n", "  metastore-tunnel:\n    localhost: 127.0.0.1\n")
        federation = (f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary.uri}\n"
                      "federated-meta-stores:\n" + "\n".join("  " + line for line in member.splitlines()) + "\n")
        server = ("database-resolution: PREFIXED\nconfiguration-properties:\n"
                  f"  hive.metastore.kerberos.principal: waggle/localhost@{kdc.realm}\n"
                  f"  hive.metastore.kerberos.keytab.file: {kdc.keytab_path('waggle/localhost')}\n")
        proc = WaggleProcess(tmp_path_factory.mktemp("waggle-krb-ssh"), federation, server).start()
        try:
            with proc.client() as c:
                assert "krb_default" in c.get_all_databases()
                assert c.get_database("krb_default").name == "krb_default"
                assert "default" in c.get_all_databases()  # the plain primary beside it
        finally:
            proc.stop()
        line = audit_line(kerberized_metastore, r"ugi=waggle/localhost@WAGGLE.TEST\t.*get_database: default")
        assert "127.0.0.1" in line
    finally:
        for s in hops.servers:
            s.stop()


def test_the_token_store_behind_waggles_tokens_is_not_served_to_clients(secure_waggle, kdc, tmp_path):
    from thrift.Thrift import TApplicationException

    with as_user(secure_waggle, kdc, "alice", tmp_path) as c:
        with pytest.raises(TApplicationException, match="waggle keeps its own delegation-token store"):
            c.add_token("waggle:forged", str(2**62))
        with pytest.raises(TApplicationException, match="waggle keeps its own delegation-token store"):
            c.get_all_token_identifiers()
        assert "default" in c.get_all_databases()  # the connection is still served


def test_a_token_from_one_replica_works_on_another_and_a_cancel_reaches_both(secure_waggle, replica, kdc, tmp_path):
    with as_user(secure_waggle, kdc, "alice", tmp_path) as c:
        token = c.get_delegation_token("alice", "alice")
    with digest_client("127.0.0.1", replica.port, token) as d:
        assert "default" in d.get_all_databases()
    with as_user(replica, kdc, "alice", tmp_path) as c:
        assert c.renew_delegation_token(token) > time.time() * 1000
        c.cancel_delegation_token(token)
    for proc in (secure_waggle, replica):
        with pytest.raises(REFUSED), digest_client("127.0.0.1", proc.port, token) as d:
            d.get_all_databases()
        refusal(proc, "was cancelled")


def test_a_client_of_a_trusted_realm_gets_in_under_its_mapped_name(kdc, primary, tmp_path):
    from tests.support.kerberos import PARTNER_REALM
    from waggle.local.kdc import LocalKdc

    server = ("configuration-properties:\n  hive.metastore.sasl.enabled: true\n"
              f"  hive.metastore.kerberos.principal: waggle/localhost@{kdc.realm}\n"
              f"  hive.metastore.kerberos.keytab.file: {kdc.keytab_path('waggle/localhost')}\n"
              "  hadoop.security.auth_to_local: |\n"
              f"    RULE:[1:$1@$0](.*@{PARTNER_REALM.replace('.', '[.]')})s/@.*//\n"
              "    DEFAULT\n"
              f"kerberos:\n  trusted-realms: {PARTNER_REALM}\nlogging:\n  format: json\n")
    federation = f"primary-meta-store:\n  name: primary\n  remote-meta-store-uris: {primary.uri}\n"
    proc = WaggleProcess(tmp_path / "w", federation, server).start()
    try:
        with LocalKdc(tmp_path / "partner", realm=PARTNER_REALM) as partner:
            keytab = partner.add_principal("carol")
            kdc.add_trusted_realm(partner)
            cache = partner.kinit("carol", keytab, tmp_path / "carol.ccache")
            with gssapi_client("127.0.0.1", proc.port, service="waggle", ccache=str(cache),
                               server_realm=kdc.realm) as c:
                assert "default" in c.get_all_databases()
        event = proc.events("client.authenticated")[-1]
        assert (event["user"], event["principal"]) == ("carol", f"carol@{PARTNER_REALM}")
    finally:
        proc.stop()


def test_workers_sign_with_one_key_so_a_token_works_on_each(kdc, kerberized_metastore, analytics, tmp_path):
    """No signing-key file: the supervisor picks one random key for all its workers."""
    proxy = secure_waggle_process(kdc, kerberized_metastore, analytics, tmp_path / "workers", signing_key=False,
                                  args=("--workers", "2"))
    try:
        wait_for(lambda: len([w for w in json.loads(proxy.http("/healthz"))["workers"] if w["serving"]]) == 2,
                 60, "two workers serving")
        with as_user(proxy, kdc, "alice", tmp_path) as c:
            token = c.get_delegation_token("alice", "alice")
        for _ in range(16):  # the kernel spreads these over both workers
            with digest_client("127.0.0.1", proxy.port, token) as d:
                assert "default" in d.get_all_databases()
        logins = [e for e in proxy.events("client.authenticated") if e["mechanism"] == "DIGEST-MD5"]
        assert len(logins) == 16 and {e["worker"] for e in logins} == {0, 1}
        refused = [e for e in proxy.events("client.unauthenticated") if "closed the connection" not in e["reason"]]
        assert not refused  # (the start-up probe's connection, closed at once, is the only one not let in)
    finally:
        proxy.stop()
