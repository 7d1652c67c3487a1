"""Per-user and per-group grants through real metastores: listings filtered per caller, hidden objects answered
as missing, writes refused naming the rule, all before anything reaches a metastore; the merged log and the
Iceberg REST port under the same grants; new grants on reload. Callers name themselves with ``set_ugi``
(``trust-set-ugi``, an estate without Kerberos); the Kerberos doors are tested in test_grants_kerberos.py."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hmsclient.genthrift.hive_metastore.ttypes import Database, MetaException, NoSuchObjectException

from tests.support.audit import audit_lines
from tests.support.clients import hive2_client
from tests.support.federation import federated_members, federation_yaml
from tests.support.proxy import WaggleProcess

pytestmark = pytest.mark.integration

SECRET = "grants-rest-secret-0123456789"
RULES = """\
authorization:
  trust-set-ugi: true
  default: deny
  audit-writes: true
  groups: {{source: file, file: {groups}, ttl: 2}}
  rules:
  - name: analysts read analytics sales
    groups: [analysts]
    databases: [analytics_sales]
    privileges: [select]
  - name: bob owns ops scratch
    users: [bob]
    databases: [ops_scratch]
    privileges: [all]
  - name: everyone reads ops
    users: ['*']
    databases: ['ops_*']
    privileges: [select]
  - name: no one sees refunds
    users: ['*']
    databases: [ops_sales]
    tables: [refunds]
    privileges: [all]
    effect: deny
"""


@pytest.fixture(scope="module")
def guarded(primary: Any, analytics: Any, ops: Any, federation_data: dict[str, Any],
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[WaggleProcess]:
    from waggle.local.jvm import free_port

    work = tmp_path_factory.mktemp("waggle-grants")
    groups = work / "groups"
    groups.write_text("analysts: alice\nengineers: bob\n")
    keys = work / "signing.key"
    keys.write_text("1:" + "c2lnbmluZy1rZXktMDEyMzQ1Njc4OWFiY2RlZg==\n")
    clients = ""
    for user in ("alice", "bob"):
        (work / f"{user}.secret").write_text(f"{user}-{SECRET}\n")
        clients += f"  - id: {user}-app\n    secret-file: {work / f'{user}.secret'}\n    user: {user}\n"
    rest_port = free_port()
    server = (f"database-resolution: PREFIXED\ndelegation-tokens:\n  signing-key-file: {keys}\n"
              f"iceberg-rest:\n  port: {rest_port}\n  clients:\n{clients}" + RULES.format(groups=groups))
    proc = WaggleProcess(work, federation_yaml(primary.uri, federated_members(analytics.uri, ops.uri)), server)
    proc.rest_port = rest_port  # type: ignore[attr-defined]
    proc.start()
    yield proc
    proc.stop()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.2)


def replace_text(path: Path, text: str) -> None:
    """Replace a watched file at once (a reader never sees it half written)."""
    staged = path.with_name(f".{path.name}.new")
    staged.write_text(text)
    os.replace(staged, path)


class _As:
    """A client of a waggle that named itself ``user`` with set_ugi."""

    def __init__(self, proxy: WaggleProcess, user: str) -> None:
        self.proxy, self.user = proxy, user

    def __enter__(self) -> Any:
        self._cm = hive2_client(self.proxy.port)
        c = self._cm.__enter__()
        c.set_ugi(self.user, [])
        return c

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(*exc)


def test_listings_show_each_caller_what_it_may_see(guarded: WaggleProcess) -> None:
    with _As(guarded, "alice") as c:
        dbs = set(c.get_all_databases())
        assert "analytics_sales" in dbs and "ops_scratch" in dbs
        assert "analytics_web" not in dbs and "default" not in dbs
        assert set(c.get_all_tables("analytics_sales")) >= {"orders", "daily"}
        assert "refunds" not in c.get_all_tables("ops_sales")  # hidden from everyone
        metas = c.get_table_meta("ops_*", "*", [])
        assert metas and all(m.tableName != "refunds" for m in metas)
    with _As(guarded, "bob") as c:
        dbs = set(c.get_all_databases())
        assert "analytics_sales" not in dbs and "ops_scratch" in dbs
        assert c.get_databases("analytics_*") == []
    with _As(guarded, "mallory") as c:  # no group: only the rules for everyone
        dbs = c.get_all_databases()
        assert dbs and all(d.startswith("ops_") for d in dbs)


def test_a_hidden_object_is_missing_and_never_reaches_its_metastore(guarded: WaggleProcess, analytics: Any,
                                                                    ops: Any) -> None:
    with _As(guarded, "bob") as c:
        with pytest.raises(NoSuchObjectException, match="database 'analytics_sales' does not exist"):
            c.get_database("analytics_sales")
        with pytest.raises(NoSuchObjectException, match=r"analytics_sales\.orders table not found"):
            c.get_table("analytics_sales", "orders")
        with pytest.raises(NoSuchObjectException):
            c.get_table("ops_sales", "refunds")
    with _As(guarded, "alice") as c:
        assert c.get_table("analytics_sales", "orders").tableName == "orders"
    assert audit_lines(analytics, r"ugi=bob\t.*(get_database: sales|get_table : db=sales)", timeout=1) == []
    assert audit_lines(ops, r"ugi=bob\t.*get_table : db=sales tbl=refunds", timeout=1) == []
    refused = guarded.events("access.refused")
    assert any(e["user"] == "bob" and e["object"] == "analytics_sales.orders" and e["hidden"] for e in refused)


def test_a_write_without_its_privilege_is_refused_naming_the_rule(guarded: WaggleProcess, ops: Any) -> None:
    name = f"g_{uuid.uuid4().hex[:8]}"
    with _As(guarded, "alice") as c:
        with pytest.raises(MetaException, match=r"no drop privilege on table 'ops_scratch.t1' \(authorization"
                                                r"\.default \(deny\)\)"):
            c.drop_table("ops_scratch", "t1", False)
        with pytest.raises(MetaException, match="no create privilege on database"):
            c.create_database(Database(name=name, locationUri=f"file:///tmp/{name}", parameters={}))
    assert audit_lines(ops, r"ugi=alice\t.*drop_table", timeout=1) == []
    with _As(guarded, "bob") as c, pytest.raises(NoSuchObjectException):  # bob may write in ops_scratch
        c.drop_table("ops_scratch", f"missing_{name}", False)
    allowed = guarded.events("access.allowed")
    assert any(e["user"] == "bob" and e["rule"].endswith("'bob owns ops scratch'") for e in allowed)
    assert (guarded.metric("waggle_access_decisions_total", outcome="refused",
                           rule="authorization.default (deny)") or 0) >= 2


def test_new_grants_apply_on_reload(guarded: WaggleProcess) -> None:
    server = guarded.server_file.read_text()
    try:
        replace_text(guarded.server_file, server.replace("groups: [analysts]", "groups: [analysts, engineers]"))

        def bob_sees_sales() -> bool:
            with _As(guarded, "bob") as c:
                return "analytics_sales" in c.get_all_databases()

        wait_until(bob_sees_sales, timeout=30, what="bob sees analytics_sales after the reload")
    finally:
        replace_text(guarded.server_file, server)

    def bob_does_not() -> bool:
        with _As(guarded, "bob") as c:
            return "analytics_sales" not in c.get_all_databases()

    wait_until(bob_does_not, timeout=30, what="the grants back as they were")


def test_groups_file_changes_apply_within_the_ttl(guarded: WaggleProcess) -> None:
    groups = guarded.workdir / "groups"
    before = groups.read_text()

    def carol_sees_sales() -> bool:
        with _As(guarded, "carol") as c:
            return "analytics_sales" in c.get_all_databases()

    assert not carol_sees_sales()
    try:
        replace_text(groups, "analysts: alice, carol\nengineers: bob\n")
        wait_until(carol_sees_sales, timeout=10, what="carol, now an analyst, sees analytics_sales within the TTL")
    finally:
        replace_text(groups, before)


def test_the_iceberg_rest_port_applies_the_same_grants(guarded: WaggleProcess, ops: Any) -> None:
    from pyiceberg.exceptions import ForbiddenError, NoSuchTableError

    from tests.support.iceberg_rest import rest_catalog, schema

    alice = rest_catalog(guarded, credential=f"alice-app:alice-{SECRET}")
    bob = rest_catalog(guarded, credential=f"bob-app:bob-{SECRET}")
    assert ("analytics_sales",) in alice.list_namespaces()
    assert ("analytics_sales",) not in bob.list_namespaces()
    assert "refunds" not in {t for _, t in alice.list_tables("ops_sales")}
    with pytest.raises(NoSuchTableError):
        bob.load_table("analytics_sales.orders")
    name = f"g_{uuid.uuid4().hex[:8]}"
    with pytest.raises(ForbiddenError, match=rf"no create privilege on table 'ops_scratch\.{name}'"):
        alice.create_table(f"ops_scratch.{name}", schema())
    assert not any(name in str(p) for p in Path(ops.warehouse).rglob(f"*{name}*"))  # nothing written
    table = bob.create_table(f"ops_scratch.{name}", schema())
    try:
        assert alice.load_table(f"ops_scratch.{name}").metadata_location == table.metadata_location
    finally:
        bob.drop_table(f"ops_scratch.{name}")
    refused = guarded.events("access.refused")
    assert any(e["user"] == "alice" and e["door"] == "rest" and e["object"] == f"ops_scratch.{name}"
               for e in refused)
