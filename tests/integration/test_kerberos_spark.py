"""Spark with Kerberos through waggle: a local Spark session (its built-in Hive 2.3 client) logs in to waggle as
alice from her keytab (SASL GSSAPI to ``waggle/localhost``), and waggle acts for her at the Kerberized primary.

Spark runs in a subprocess (``spark_query.py``, through tests/support/kerberos_spark.py) because its JVM needs
Kerberos settings from the start: the keytab login (``--principal``/``--keytab``), the KDC's ``krb5.conf`` and a
``core-site.xml`` that turns Hadoop security on. A ticket cache alone does not make Spark's Hive client use SASL.
"""

from __future__ import annotations

import uuid

import pytest

from tests.support.audit import audit_lines
from tests.support.kerberos import secure_waggle_process
from tests.support.kerberos_spark import run_kerberized_spark

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kerberos]


def test_spark_with_a_keytab_reads_and_writes_through_a_kerberized_waggle(
        kdc, kerberized_metastore, analytics, federation_data, secure_waggle, tmp_path):
    db = f"krbspark_{uuid.uuid4().hex[:8]}"
    before = len(secure_waggle.log())
    shown, _, _, _, selected, federated, _ = run_kerberized_spark(kdc, secure_waggle, tmp_path, [
        "SHOW DATABASES",
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.people (id INT, name STRING) STORED AS PARQUET",
        f"INSERT INTO {db}.people VALUES (1, 'ann'), (2, 'ben')",
        f"SELECT id, name FROM {db}.people ORDER BY id",
        "SELECT id, customer FROM analytics_sales.orders ORDER BY id",
        f"DROP DATABASE {db} CASCADE",
    ])
    databases = {row[0] for row in shown}
    assert {"default", "analytics_sales"} <= databases
    assert selected == [["1", "ann"], ["2", "ben"]]
    assert federated == [["1", "alice"], ["2", "bob"], ["3", "alice"]]

    # Spark logged in to waggle as alice with Kerberos, and waggle acted for her at the Kerberized primary.
    logins = [e for e in secure_waggle.events("client.authenticated", since=before) if e.get("user") == "alice"]
    assert logins and {e["mechanism"] for e in logins} == {"GSSAPI"}
    assert all(e["principal"] == f"alice@{kdc.realm}" for e in logins)
    for pattern in (rf"cmd=create_database: Database\(name:{db},", rf"cmd=create_table: Table\(tableName:people, "
                    rf"dbName:{db},", rf"cmd=drop_database: {db}\b"):
        lines = audit_lines(kerberized_metastore, pattern)
        assert lines, f"no audit line matching {pattern!r} in {kerberized_metastore.log_path}"
        assert all("ugi=alice\t" in line for line in lines), lines
    assert audit_lines(analytics, r"ugi=alice\t.*get_table.*tbl=orders\b")


@pytest.fixture(scope="module")
def proxying_waggle(kdc, kerberized_metastore, analytics, federation_data, tmp_path_factory):
    """Like ``secure_waggle``, but alice may get tokens for bob, and tokens live long enough for a Spark run."""
    proc = secure_waggle_process(kdc, kerberized_metastore, analytics, tmp_path_factory.mktemp("waggle-proxying"),
                                 renew_seconds=3600, extra_properties="  hadoop.proxyuser.alice.users: bob\n"
                                                                       "  hadoop.proxyuser.alice.hosts: 127.0.0.1\n")
    try:
        yield proc
    finally:
        proc.stop()


def test_spark_as_a_proxy_user_logs_in_with_a_delegation_token_from_waggle(
        kdc, kerberized_metastore, proxying_waggle, tmp_path):
    """spark-submit --proxy-user bob, with alice's tickets: Spark's HiveDelegationTokenProvider asks waggle (over
    GSSAPI, as alice) for a token owned by bob; Spark's Hive client then logs in with it over DIGEST-MD5, as bob."""
    db = f"krbproxy_{uuid.uuid4().hex[:8]}"
    before = len(proxying_waggle.log())
    shown, _, _ = run_kerberized_spark(kdc, proxying_waggle, tmp_path, [
        "SHOW DATABASES", f"CREATE DATABASE {db}", f"DROP DATABASE {db}"], proxy_user="bob")
    assert "analytics_sales" in {row[0] for row in shown}
    issued = proxying_waggle.events("token.issued", since=before)
    assert [(e["owner"], e["real_user"], e["renewer"]) for e in issued] == [("bob", "alice", "waggle")]
    logins = proxying_waggle.events("client.authenticated", since=before)
    assert ("alice", "GSSAPI") in {(e["user"], e["mechanism"]) for e in logins}  # the token provider
    assert ("bob", "DIGEST-MD5") in {(e["user"], e["mechanism"]) for e in logins}  # the Hive client
    for pattern in (rf"cmd=create_database: Database\(name:{db},", rf"cmd=drop_database: {db}\b"):
        lines = audit_lines(kerberized_metastore, pattern)
        assert lines and all("ugi=bob\t" in line for line in lines), lines
