"""Our delegation tokens are Hadoop's: Java's ``Token`` and Hive's ``DelegationTokenIdentifier`` and secret
manager read, verify and renew tokens waggle issued, and waggle reads and verifies tokens Hive's classes wrote.

``java/TokenCheck.java`` is compiled once per session against pyspark's Hadoop and Hive jars.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import java_available, require

from waggle.local.metastore import java_executable, pyspark_jars_dir
from waggle.security.tokens import KIND, TokenAuthority, TokenIdentifier, decode_token

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).parent / "java" / "TokenCheck.java"
KEY_ID = 3
KEY = bytes(range(7, 39))
DAY_MS = 24 * 3600 * 1000


@pytest.fixture(scope="session")
def token_check(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command line that runs the compiled checker."""
    require(java_available() and shutil.which("javac") is not None, "Java (java and javac) is not installed")
    classes = tmp_path_factory.mktemp("token-check")
    classpath = f"{pyspark_jars_dir()}/*"
    subprocess.run(["javac", "-cp", classpath, "-d", str(classes), str(SOURCE)], check=True, timeout=120)
    return [java_executable(), "-cp", f"{classes}:{classpath}", "TokenCheck"]


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
