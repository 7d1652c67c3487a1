"""Per-user grants behind waggle's Kerberos door, with Spark as the client: a real KDC, the principals alice and bob,
and one waggle whose ``authorization`` block lets alice read the member's ``sales`` (``analytics_sales``) and no
one write it, and bob nothing of it.

* Spark as alice (keytab, GSSAPI) sees and reads ``analytics_sales`` but cannot insert into it;
* Spark as bob (keytab) does not see it: not in ``SHOW DATABASES``, "table or view not found" on a read;
* the same through waggle's delegation tokens (``--proxy-user``: the Hive client logs in with DIGEST-MD5 as the
  token's owner);
* nothing refused reaches the member (its audit log), and waggle's ``access.refused`` lines name the caller, the
  object and the rule.

Every Spark session reads ``default`` at its start (``get_database('default')``, and creates it when it looks
missing): the rule "everyone reads default" lets each session start under ``default: deny``. The grants with
``trust-set-ugi`` callers are tested in test_grants.py.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.support.audit import audit_text
from tests.support.kerberos import secure_waggle_process
from tests.support.kerberos_spark import run_kerberized_spark
from tests.support.proxy import WaggleProcess

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.kerberos]

RULES = """\
authorization:
  default: deny
  audit-writes: true
  rules:
  - name: everyone reads default
    users: ['*']
    databases: [default]
    privileges: [select]
  - name: alice reads analytics sales
    users: [alice]
    databases: [analytics_sales]
    privileges: [select]
  - name: analytics is read-only
    users: ['*']
    databases: ['analytics_*']
    privileges: [create, alter, update, drop]
    effect: deny
"""
#: alice may get tokens for bob, and bob for alice (each --proxy-user run logs in as the other)
PROXY_USERS = ("  hadoop.proxyuser.alice.users: bob\n  hadoop.proxyuser.alice.hosts: 127.0.0.1\n"
               "  hadoop.proxyuser.bob.users: alice\n  hadoop.proxyuser.bob.hosts: 127.0.0.1\n")
READ_ONLY = "'analytics is read-only'"
DEFAULT_DENY = "authorization.default (deny)"
ORDERS = [["1", "alice"], ["2", "bob"], ["3", "alice"]]
#: what alice asks: the last one refused
ALICE_QUERIES = ["SHOW DATABASES", "SHOW TABLES IN analytics_sales",
                 "SELECT id, customer FROM analytics_sales.orders ORDER BY id",
                 "SELECT id FROM analytics_sales.orders_view ORDER BY id",
                 "INSERT INTO analytics_sales.orders VALUES (4, 'mallory')"]
#: what bob asks: the last two answered by Spark as if analytics_sales did not exist
BOB_QUERIES = ["SHOW DATABASES", "SELECT id, customer FROM analytics_sales.orders",
               "SHOW TABLES IN analytics_sales"]
#: a write of the member's metadata, in its audit log (``cmd=source:127.0.0.1 alter_table: ...``)
MEMBER_WRITE = r"cmd=(source:\S+ )?(alter_|add_partition|append_partition|create_|drop_|rename_)"


@pytest.fixture(scope="module")
def guarded(kdc: Any, kerberized_metastore: Any, analytics: Any, federation_data: dict[str, Any],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    """A Kerberized waggle (tokens that live an hour) with the grants of :data:`RULES`."""
    proc = secure_waggle_process(kdc, kerberized_metastore, analytics, tmp_path_factory.mktemp("waggle-grants-krb"),
                                 renew_seconds=3600, extra_properties=PROXY_USERS, server_extra=RULES)
    try:
        yield proc
    finally:
        proc.stop()


def member_audit(store: Any, since: int, pattern: str, timeout: float = 10.0) -> list[str]:
    """The member's audit lines after character ``since`` of its log that match ``pattern``, waiting up to
    ``timeout`` seconds for the first one."""
    regex = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        found = [line for line in audit_text(store)[since:].splitlines() if " audit: " in line and regex.search(line)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def alice_and_bob(kdc: Any, proc: WaggleProcess, work: Path, alice: dict[str, str], bob: dict[str, str]
                  ) -> tuple[Any, Any]:
    """The results of :data:`ALICE_QUERIES` in alice's Spark session and of :data:`BOB_QUERIES` in bob's, the two
    run at once (each a JVM of its own, in a directory of its own); ``alice`` and ``bob`` give each run's
    ``principal`` and ``proxy_user`` (:func:`run_kerberized_spark`)."""
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(run_kerberized_spark, kdc, proc, work / user, queries, script="spark_grants_query.py",
                            **login) for user, queries, login in (("alice", ALICE_QUERIES, alice),
                                                                  ("bob", BOB_QUERIES, bob))]
        return runs[0].result(), runs[1].result()


def databases(result: dict[str, Any]) -> set[str]:
    assert "rows" in result, result
    return {row[0] for row in result["rows"]}


def refused(proc: WaggleProcess, since: int, user: str) -> list[dict[str, Any]]:
    return [e for e in proc.events("access.refused", since=since) if e.get("user") == user]


def logins(proc: WaggleProcess, since: int) -> set[tuple[str, str]]:
    return {(e["user"], e["mechanism"]) for e in proc.events("client.authenticated", since=since)}


def assert_alice_reads_but_cannot_insert(results: list[dict[str, Any]]) -> None:
    shown, tables, selected, view, inserted = results
    assert {"default", "analytics_sales"} <= databases(shown)
    assert not databases(shown) & {"analytics_web", "analytics_secret"}, "not alice's"
    assert {row[1] for row in tables["rows"]} >= {"orders", "daily", "orders_view"}
    assert selected == {"rows": ORDERS}
    assert view == {"rows": [["2"], ["3"]]}
    assert "error" in inserted, inserted
    assert re.search(r"alter_table_with_environment_context refused: user 'alice' \(groups: none\) has no alter "
                     rf"privilege on table 'analytics_sales\.orders' \(.*{READ_ONLY}\)", inserted["error"]), inserted


def assert_bob_sees_no_sales(results: list[dict[str, Any]]) -> None:
    shown, selected, tables = results
    assert "default" in databases(shown)
    assert not {d for d in databases(shown) if d.startswith("analytics_")}, "bob may see none of analytics"
    assert "error" in selected and "[TABLE_OR_VIEW_NOT_FOUND]" in selected["error"], selected
    assert "`analytics_sales`.`orders` cannot be found" in selected["error"], selected
    assert "error" in tables and "[SCHEMA_NOT_FOUND]" in tables["error"], tables


def assert_nothing_refused_reached_the_member(analytics: Any, audited: int) -> None:
    """alice's read reached the member as alice, her refused write did not; bob's listing of databases reached it
    as bob (so his calls are in its log), nothing about sales did."""
    assert member_audit(analytics, audited, r"ugi=alice\t.*get_table : db=sales tbl=orders\b")
    assert member_audit(analytics, audited, r"ugi=bob\t.*get_databases")
    assert member_audit(analytics, audited, rf"ugi=alice\t.*{MEMBER_WRITE}", timeout=0) == []
    assert member_audit(analytics, audited, r"ugi=bob\t.*\bsales\b", timeout=0) == []


def assert_refusals_audited(guarded: WaggleProcess, before: int) -> None:
    """alice's write refused naming the deny rule; bob's reads answered as missing, by the default."""
    alice = refused(guarded, before, "alice")
    assert [(e["method"], e["object"], e["privilege"], e["hidden"]) for e in alice] == [
        ("alter_table_with_environment_context", "analytics_sales.orders", "alter", False)]
    assert alice[0]["rule"].endswith(f"authorization.rules[2] {READ_ONLY}") and alice[0]["groups"] == []
    bob = refused(guarded, before, "bob")
    assert bob and all(e["hidden"] and e["rule"] == DEFAULT_DENY for e in bob), bob
    assert {(e["method"], e["object"]) for e in bob} >= {("get_table", "analytics_sales.orders"),
                                                         ("get_database", "analytics_sales")}
    assert not {e["user"] for e in guarded.events("access.refused", since=before)} - {"alice", "bob"}


@pytest.fixture
def orders_files(analytics: Any) -> Iterator[None]:
    """Spark writes an insert's files into the table's directory before it asks the metastore to record them (Hive's
    ``loadTable``: the files, then ``alter_table``), and the grants can only refuse the second: what a refused
    insert left there is removed, so the member's ``orders`` stays as seeded for the other tests."""
    orders = Path(analytics.warehouse) / "sales.db" / "orders"
    before = set(orders.iterdir())
    yield
    for path in set(orders.iterdir()) - before:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def test_with_keytabs_alice_reads_sales_and_bob_does_not_see_it(
        kdc: Any, analytics: Any, guarded: WaggleProcess, orders_files: None, tmp_path: Path) -> None:
    before, audited = len(guarded.log()), len(audit_text(analytics))
    alice, bob = alice_and_bob(kdc, guarded, tmp_path, alice={"principal": "alice"}, bob={"principal": "bob"})
    assert_alice_reads_but_cannot_insert(alice)
    assert_bob_sees_no_sales(bob)
    assert {("alice", "GSSAPI"), ("bob", "GSSAPI")} <= logins(guarded, before)
    assert_nothing_refused_reached_the_member(analytics, audited)
    assert_refusals_audited(guarded, before)


def test_through_delegation_tokens_the_same_holds(
        kdc: Any, analytics: Any, guarded: WaggleProcess, orders_files: None, tmp_path: Path) -> None:
    """spark-submit --proxy-user: bob's session from alice's tickets, alice's from bob's. The token provider asks
    waggle (over GSSAPI) for a token owned by the proxy user; the Hive client logs in with it over DIGEST-MD5, and
    the token's owner is who the grants see."""
    before, audited = len(guarded.log()), len(audit_text(analytics))
    alice, bob = alice_and_bob(kdc, guarded, tmp_path, alice={"principal": "bob", "proxy_user": "alice"},
                               bob={"principal": "alice", "proxy_user": "bob"})
    assert_alice_reads_but_cannot_insert(alice)
    assert_bob_sees_no_sales(bob)
    issued = guarded.events("token.issued", since=before)
    assert sorted((e["owner"], e["real_user"]) for e in issued) == [("alice", "bob"), ("bob", "alice")]
    assert {("alice", "DIGEST-MD5"), ("bob", "DIGEST-MD5")} <= logins(guarded, before)
    assert_nothing_refused_reached_the_member(analytics, audited)
    assert_refusals_audited(guarded, before)
