"""waggle with a Kerberos front door over the session's Kerberized metastore, and the realms' names."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from tests.support.proxy import WaggleProcess

KERBEROS_PRINCIPALS = ("waggle/localhost", "hive/localhost", "alice", "bob")
#: a second realm that trusts the session's (and is trusted by it), for cross-realm tests
PARTNER_REALM = "PARTNER.TEST"

#: how long waggle's delegation tokens live unless renewed (expiry itself is tested on an injected clock:
#: tests/unit/security/test_token_logins.py)
SECURE_TOKEN_RENEW_SECONDS = 6


def secure_waggle_process(kdc: Any, kerberized_metastore: Any, analytics: Any, work: Path,
                          renew_seconds: float = SECURE_TOKEN_RENEW_SECONDS,
                          extra_properties: str = "", signing_key: bool = True,
                          args: tuple[str, ...] = (), server_extra: str = "") -> WaggleProcess:
    """A started waggle with a Kerberos front door (SASL GSSAPI as waggle/localhost, DIGEST-MD5 with its own
    delegation tokens, which live ``renew_seconds`` unless renewed): the Kerberized primary ``secure``, reached
    as each caller (impersonation), and the plain member ``analytics`` behind the prefix ``analytics_``.
    ``extra_properties`` are more YAML lines of its configuration-properties (indented two spaces); without
    ``signing_key`` waggle signs with a random key; ``args``: more ``waggle serve`` arguments; ``server_extra``:
    more top-level YAML of its server file (an ``authorization`` block, say)."""
    work.mkdir(parents=True, exist_ok=True)
    key_file = work / "token-keys"
    key_file.write_text("1:" + base64.b64encode(b"k" * 32).decode() + "\n")
    server = (
        "database-resolution: PREFIXED\n"
        + (f"delegation-tokens:\n  signing-key-file: {key_file}\n" if signing_key else "") +
        "configuration-properties:\n"
        "  hive.metastore.sasl.enabled: true\n"
        f"  hive.metastore.kerberos.principal: waggle/localhost@{kdc.realm}\n"
        f"  hive.metastore.kerberos.keytab.file: {kdc.keytab_path('waggle/localhost')}\n"
        f"  hive.cluster.delegation.token.renew-interval: {renew_seconds:g}s\n"
        f"{extra_properties}"
        "logging:\n  format: json\n"
        f"{server_extra}"
    )
    federation = (
        "primary-meta-store:\n"
        "  name: secure\n"
        f"  remote-meta-store-uris: thrift://localhost:{kerberized_metastore.port}\n"
        "  access-control-type: READ_AND_WRITE_AND_CREATE\n"
        "  impersonation-enabled: true\n"
        "  configuration-properties:\n"
        "    hive.metastore.sasl.enabled: true\n"
        f"    hive.metastore.kerberos.principal: hive/_HOST@{kdc.realm}\n"
        "federated-meta-stores:\n"
        "  - name: analytics\n"
        f"    remote-meta-store-uris: {analytics.uri}\n"
    )
    return WaggleProcess(work, federation, server, args).start()
