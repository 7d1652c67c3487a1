"""The local Kerberos parts are real: an MIT KDC, a Kerberized Hive 2.3 metastore, and SASL clients (GSSAPI from a
ticket cache, DIGEST-MD5 with a delegation token) whose callers the metastore's audit log names."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore import ttypes as t
from thrift.transport.TTransport import TTransportException

from tests.support.audit import audit_line
from tests.support.clients import hive2_client
from tests.support.sasl_clients import HadoopToken, digest_client, gssapi_client

pytestmark = [pytest.mark.integration, pytest.mark.kerberos]


def ticket_cache(kdc: Any, name: str, tmp_path: Path) -> str:
    return str(kdc.kinit(name, kdc.keytab_path(name), tmp_path / f"{name.replace('/', '_')}.ccache"))


def new_database(client: Any) -> str:
    name = f"krb_{uuid.uuid4().hex[:10]}"
    client.create_database(t.Database(name=name, description="kerberos test", parameters={}))
    return name


def test_the_metastore_logs_in_from_its_keytab(kerberized_metastore, kdc):
    log = kerberized_metastore.log_path.read_text(errors="replace")
    assert f"Login successful for user hive/localhost@{kdc.realm} using keytab file" in log


def test_a_kerberos_client_lists_and_creates_databases_as_itself(kerberized_metastore, kdc, tmp_path):
    with gssapi_client("127.0.0.1", kerberized_metastore.port, ccache=ticket_cache(kdc, "alice", tmp_path)) as c:
        assert "default" in c.get_all_databases()
        name = new_database(c)
        assert c.get_database(name).name == name
        c.drop_database(name, True, True)
    line = audit_line(kerberized_metastore, rf"cmd=create_database: Database\(name:{name},")
    assert f"ugi=alice@{kdc.realm}\t" in line


def test_a_client_without_sasl_gets_nothing(kerberized_metastore):
    with pytest.raises((TTransportException, OSError, EOFError)), hive2_client(kerberized_metastore.port, 10) as c:
        c.get_all_databases()


def test_a_proxy_user_gets_a_token_for_alice_and_a_digest_client_acts_as_alice(kerberized_metastore, kdc,
                                                                               tmp_path):
    renewer = kdc.principal("waggle/localhost")
    waggle_cache = ticket_cache(kdc, "waggle/localhost", tmp_path)
    with gssapi_client("127.0.0.1", kerberized_metastore.port, ccache=waggle_cache) as c:
        token = c.get_delegation_token("alice", renewer)
    decoded = HadoopToken.decode(token)
    assert (decoded.kind, decoded.owner()) == ("HIVE_DELEGATION_TOKEN", "alice")
    assert f"ugi={renewer}\t" in audit_line(kerberized_metastore, r"cmd=get_delegation_token")

    with digest_client("127.0.0.1", kerberized_metastore.port, token) as c:
        name = new_database(c)
        assert c.get_database(name).name == name
    line = audit_line(kerberized_metastore, rf"cmd=create_database: Database\(name:{name},")
    assert "ugi=alice\t" in line and "waggle" not in line

    # the renewer may cancel it; then it opens nothing
    with gssapi_client("127.0.0.1", kerberized_metastore.port, ccache=waggle_cache) as c:
        c.cancel_delegation_token(token)
    with pytest.raises(TTransportException), digest_client("127.0.0.1", kerberized_metastore.port, token) as c:
        c.get_all_databases()


def test_digest_md5_wants_the_uri_null_slash_default(kerberized_metastore, kdc, tmp_path):
    with gssapi_client("127.0.0.1", kerberized_metastore.port, ccache=ticket_cache(kdc, "alice", tmp_path)) as c:
        token = c.get_delegation_token("alice", kdc.principal("waggle/localhost"))
    with pytest.raises(TTransportException, match="Mismatched URI: hive/localhost; expecting: null/default"), \
            digest_client("127.0.0.1", kerberized_metastore.port, token, service="hive", server_host="localhost"):
        pass


def test_only_proxy_users_get_tokens_for_others(kerberized_metastore, kdc, tmp_path):
    with gssapi_client("127.0.0.1", kerberized_metastore.port, ccache=ticket_cache(kdc, "alice", tmp_path)) as c, \
            pytest.raises(t.MetaException, match="is not allowed to impersonate bob"):
        c.get_delegation_token("bob", "alice")


def test_a_user_of_a_trusted_realm_reaches_the_metastore(kerberized_metastore, kdc, tmp_path):
    from tests.support.kerberos import PARTNER_REALM
    from waggle.local.kdc import LocalKdc

    with LocalKdc(tmp_path / "partner", realm=PARTNER_REALM) as partner:
        keytab = partner.add_principal("carol")
        kdc.add_trusted_realm(partner)
        cache = partner.kinit("carol", keytab, tmp_path / "carol.ccache")
        # a ticket from the partner's KDC, then a cross-realm one for hive/localhost@WAGGLE.TEST from the session's
        with gssapi_client("127.0.0.1", kerberized_metastore.port, ccache=str(cache), server_realm=kdc.realm) as c:
            name = new_database(c)
    line = audit_line(kerberized_metastore, rf"cmd=create_database: Database\(name:{name},")
    assert f"ugi=carol@{PARTNER_REALM}\t" in line
