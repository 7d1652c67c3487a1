"""Our delegation tokens are Hadoop's: Java's ``Token`` and Hive's ``DelegationTokenIdentifier`` and secret
manager read, verify and renew tokens waggle issued, and waggle reads and verifies tokens Hive's classes wrote.
Our DIGEST-MD5 server and client log in with such a token against Java's own SASL client and server, and our
``auth_to_local`` gives the short names Hadoop's ``KerberosName`` gives.

``java/TokenCheck.java`` is compiled once per session against pyspark's Hadoop and Hive jars.
"""

from __future__ import annotations

import base64
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.java import compiled
from waggle.security.digest import DigestClient, DigestServer
from waggle.security.principals import AuthToLocal, NoMatchingRule
from waggle.security.tokens import KIND, TokenAuthority, TokenIdentifier, decode_token

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).parent / "java" / "TokenCheck.java"
KEY_ID = 3
KEY = bytes(range(7, 39))
DAY_MS = 24 * 3600 * 1000


@pytest.fixture(scope="session")
def token_check(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command line that runs the compiled checker."""
    return compiled(SOURCE, tmp_path_factory.mktemp("token-check"))


def run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_java_reads_verifies_and_renews_a_token_waggle_issued(token_check: list[str]) -> None:
    authority = TokenAuthority({1: bytes(32), KEY_ID: KEY})
    now = int(time.time() * 1000)
    token, identifier = authority.issue("alice@EXAMPLE.COM", "hive", "oozie/host1@EXAMPLE.COM", now, service="hms")
    fields = dict(line.split("=", 1) for line in run([*token_check, "read", token, str(KEY_ID), KEY.hex()]).split())
    renewed = int(fields.pop("renewed"))
    assert fields == {
        "kind": KIND,
        "service": "hms",
        "owner": "alice@EXAMPLE.COM",
        "renewer": "hive",
        "realUser": "oozie/host1@EXAMPLE.COM",
        "issueDate": str(now),
        "maxDate": str(now + 7 * DAY_MS),
        "sequence": str(identifier.sequence),
        "masterKeyId": str(KEY_ID),
        "password": decode_token(token).password.hex(),
        "reserialized": "true",  # Java writes the identifier back to exactly our bytes
        "verified": "true",  # Hive's secret manager computed the same password
    }
    assert now + DAY_MS <= renewed <= min(int(time.time() * 1000) + DAY_MS, identifier.max_date_ms)


@pytest.mark.parametrize(
    ("owner", "renewer", "real_user", "issue", "sequence"),
    [
        ("alice@EXAMPLE.COM", "hive", "", 1_700_000_000_000, 12345),
        ("zoë", "", "proxy", 0, (1 << 31) - 1),
        ("a" * 300, "hive", "b" * 200, 1 << 45, 0),
    ],
)
def test_waggle_reads_and_verifies_a_token_hive_wrote(
    token_check: list[str], owner: str, renewer: str, real_user: str, issue: int, sequence: int
) -> None:
    max_date = issue + 7 * DAY_MS
    args = [owner, renewer, real_user, str(issue), str(max_date), str(sequence), str(KEY_ID), KEY.hex(), "svc"]
    token = run([*token_check, "write", *args]).strip()
    decoded = decode_token(token)
    assert (decoded.kind, decoded.service) == (KIND, "svc")
    expected = TokenIdentifier(owner, renewer, real_user, issue, max_date, sequence, KEY_ID)
    assert TokenIdentifier.from_bytes(decoded.identifier) == expected
    assert expected.to_bytes() == decoded.identifier
    assert TokenAuthority({KEY_ID: KEY}).authenticate(token) == expected


def token_login() -> tuple[str, bytes, TokenAuthority]:
    """Hive's SASL login of a token: username base64(identifier), password base64(token password)."""
    authority = TokenAuthority({KEY_ID: KEY})
    token = decode_token(authority.issue("alice@EXAMPLE.COM", "hive", "", int(time.time() * 1000))[0])
    return base64.b64encode(token.identifier).decode(), base64.b64encode(token.password), authority


def converse(command: list[str], first: bytes | None, answer: Callable[[bytes], bytes]) -> list[str]:
    """Run the checker's SASL side, feeding it hex lines; ``answer`` turns its first line into our reply."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        if first is not None:
            proc.stdin.write(first.hex() + "\n")
            proc.stdin.flush()
        reply = answer(bytes.fromhex(proc.stdout.readline().strip()))
        out, err = proc.communicate(reply.hex() + "\n", timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-3000:]
    return out.split()


def test_java_sasl_client_logs_in_to_our_digest_server_with_a_token(token_check: list[str]) -> None:
    username, password, authority = token_login()

    def lookup(name: str) -> bytes | None:
        return base64.b64encode(authority.password_for(base64.b64decode(name)))

    server = DigestServer(lookup)
    lines = converse([*token_check, "sasl-client", username, password.decode()], server.challenge(), server.respond)
    assert lines == ["complete=true"]  # Java's client accepted our rspauth
    assert server.username == username


def test_our_digest_client_logs_in_to_java_sasl_server_with_a_token(token_check: list[str]) -> None:
    username, password, _ = token_login()
    client = DigestClient(username, password)  # digest-uri null/default, as Hive's client
    final_hex, user = converse([*token_check, "sasl-server", username, password.decode()], None, client.respond)
    client.verify(bytes.fromhex(final_hex))
    assert client.complete and user == f"user={username}"


RULES = """
RULE:[1:$1@$0](.*@YAHOO\\.COM)s/@.*//
RULE:[2:$1](johndoe)s/^.*$/guest/
RULE:[2:$1;$2](^.*;admin$)s/;admin$//
RULE:[2:$2](root)
RULE:[2:$1/$2@$0]([ndj]n/.*@EXAMPLE\\.COM)s/.*/hdfs/
RULE:[1:$1](Mixed.*)s/x/y/g/L
RULE:[2:$1-$2](svc.*)s/(.*)-(.*)/$2_$1\\$/
DEFAULT
"""
PRINCIPALS = [
    "omalley@EXAMPLE.COM",
    "hive/hms1.example.com@EXAMPLE.COM",
    "nn/h1@EXAMPLE.COM",
    "oom@YAHOO.COM",
    "johndoe/zoo@FOO.COM",
    "joe/admin@FOO.COM",
    "joe/root@FOO.COM",
    "foo@ACME.COM",
    "root/joe@FOO.COM",
    "MixedCaseXx@EXAMPLE.COM",
    "svc1/host@OTHER",
    "hdfs",
    "alice@YAHOO.COM",
]


def test_auth_to_local_agrees_with_hadoops_kerberos_name(token_check: list[str]) -> None:
    realm = ["-Djava.security.krb5.realm=EXAMPLE.COM", "-Djava.security.krb5.kdc=localhost"]
    java = run([token_check[0], *realm, *token_check[1:], "short", RULES, *PRINCIPALS]).split()
    rules = AuthToLocal(RULES, "EXAMPLE.COM")

    def ours(principal: str) -> str:
        try:
            return rules.short_name(principal)
        except NoMatchingRule:
            return "!"

    assert [ours(p) for p in PRINCIPALS] == java
