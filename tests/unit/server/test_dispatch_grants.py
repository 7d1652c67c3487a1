"""Dispatch without Java under grants (``authorization``): each path a call can take (a plain relay, the full core,
a merged listing, the cache, a streamed reply) filters listings for its caller, and what the grants refuse never
reaches a metastore."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.memory_metastore import Harness, MemoryMetastore, failure
from waggle.hms.gen.hive_metastore.ttypes import (
    Database,
    LockComponent,
    LockLevel,
    LockRequest,
    LockState,
    LockType,
    MetaException,
    NoSuchObjectException,
    Role,
)

RULES = [
    {"name": "analysts read sales", "groups": ["analysts"], "databases": ["fed_sales"], "privileges": ["select"]},
    {"name": "no secrets", "users": ["*"], "databases": ["fed_sales"], "tables": ["secret_*"], "privileges": "all",
     "effect": "deny"},
    {"name": "bob owns scratch", "users": ["bob"], "databases": ["scratch"], "privileges": "all"},
    {"name": "everyone reads default", "users": ["*"], "databases": ["default"], "privileges": ["select"]},
    {"name": "admins", "groups": ["admins"], "privileges": ["admin"]},
    {"name": "no t9", "users": ["*"], "databases": ["default"], "tables": ["t9"], "privileges": "all",
     "effect": "deny"},
]


def federation(make: Callable[..., Harness], tmp_path: Path, fed_settings: dict[str, Any] | None = None,
               server: dict[str, Any] | None = None) -> tuple[Harness, MemoryMetastore, MemoryMetastore]:
    groups = tmp_path / "groups"
    groups.write_text("analysts: alice\nadmins: root\n")
    primary = MemoryMetastore("primary", lock_ids_from=1).add_database("default", "scratch")
    primary.add_table("default", "t1", "t9").add_table("scratch", "s1")
    fed = MemoryMetastore("fed", lock_ids_from=1000).add_database("sales", "web")
    fed.add_table("sales", "orders", "daily", "secret_pay").add_table("web", "visits")
    authorization = {"trust-set-ugi": True, "groups": {"file": str(groups)}, "rules": RULES}
    harness = make((primary, {"access-control-type": "READ_AND_WRITE_AND_CREATE"}),
                   [(fed, {"database-prefix": "fed_", "access-control-type": "READ_AND_WRITE_ON_DATABASE_WHITELIST",
                           "writable-database-white-list": ["sales"], **(fed_settings or {})})],
                   {"authorization": authorization, **(server or {})})
    return harness, primary, fed


def as_user(h: Harness, user: str) -> Any:
    client = h.client()
    client.ok("set_ugi", user_name=user, group_names=[])
    return client


def test_listings_keep_what_the_caller_may_see_on_every_path(make, tmp_path):
    h, _, _fed = federation(make, tmp_path, {"cache": "ttl"}, {"limits.stream-replies-after-bytes": 1})
    alice, bob = as_user(h, "alice"), as_user(h, "bob")
    assert sorted(alice.ok("get_all_databases")) == ["default", "fed_sales"]
    assert sorted(bob.ok("get_all_databases")) == ["default", "scratch"]
    for _ in range(2):  # the second answer is the cache's, shared across users and filtered for each
        assert sorted(alice.ok("get_all_tables", db_name="fed_sales")) == ["daily", "orders"]
        assert bob.ok("get_all_tables", db_name="fed_sales") == []
    tables = alice.ok("get_table_objects_by_name", dbname="fed_sales", tbl_names=["orders", "secret_pay"])
    assert [t.tableName for t in tables] == ["orders"]
    metas = alice.ok("get_table_meta", db_patterns="*", tbl_patterns="*", tbl_types=[])
    assert sorted((m.dbName, m.tableName) for m in metas) == [
        ("default", "t1"), ("fed_sales", "daily"), ("fed_sales", "orders")]
    assert bob.ok("get_databases", pattern="fed_*") == []


def test_a_hidden_object_is_missing_and_nothing_reaches_the_metastore(make, tmp_path):
    h, _, fed = federation(make, tmp_path)
    bob = as_user(h, "bob")
    before = len(fed.calls)
    err = failure(bob.call("get_database", name="fed_sales"))
    assert isinstance(err, NoSuchObjectException) and err.message == "database 'fed_sales' does not exist"
    err = failure(bob.call("get_table", dbname="fed_sales", tbl_name="orders"))
    assert isinstance(err, NoSuchObjectException) and err.message == "fed_sales.orders table not found"
    alice = as_user(h, "alice")
    assert isinstance(failure(alice.call("get_table", dbname="fed_sales", tbl_name="secret_pay")),
                      NoSuchObjectException)
    assert alice.ok("get_table", dbname="fed_sales", tbl_name="orders").tableName == "orders"
    # a relayed listing (no cache, no renaming: the plain lane) is filtered too, unless every table is visible
    assert sorted(alice.ok("get_all_tables", db_name="fed_sales")) == ["daily", "orders"]
    assert bob.ok("get_all_tables", db_name="scratch") == ["s1"]
    assert alice.ok("get_all_tables", db_name="default") == ["t1"]  # the primary's: relayed as it came, filtered
    assert [c.method for c in fed.calls[before:] if c.method != "set_ugi"] == ["get_table", "get_all_tables"]


def test_a_write_without_its_privilege_is_refused_naming_the_rule(make, tmp_path):
    h, primary, fed = federation(make, tmp_path)
    alice, bob = as_user(h, "alice"), as_user(h, "bob")
    before = len(fed.calls)
    err = failure(alice.call("drop_table", dbname="fed_sales", name="orders", deleteData=False))
    assert isinstance(err, MetaException)
    assert err.message == ("drop_table refused: user 'alice' (groups: analysts) has no drop privilege on table "
                           "'fed_sales.orders' (authorization.default (deny))")
    assert [c.method for c in fed.calls[before:]] == []
    err = failure(bob.call("create_database", database=Database(name="bobs", parameters={})))
    assert isinstance(err, MetaException) and "no create privilege on database 'bobs'" in err.message
    assert bob.ok("get_all_tables", db_name="scratch") == ["s1"]
    assert alice.ok("get_all_tables", db_name="default") == ["t1"]  # the primary's: relayed as it came, filtered
    bob.ok("drop_table", dbname="scratch", name="s1", deleteData=False)  # bob owns scratch
    assert "drop_table" in primary.methods()
    assert "create_database" not in primary.methods()


def test_locks_need_select_to_share_and_update_to_hold_alone(make, tmp_path):
    h, _, fed = federation(make, tmp_path)
    alice = as_user(h, "alice")

    def lock(kind: int) -> Any:
        component = LockComponent(type=kind, level=LockLevel.TABLE, dbname="fed_sales", tablename="orders")
        return alice.call("lock", rqst=LockRequest(component=[component], user="alice", hostname="h"))

    refused = lock(LockType.EXCLUSIVE)
    assert refused.success.state == LockState.NOT_ACQUIRED and "no update privilege" in refused.success.errorMessage
    assert "lock" not in fed.methods()
    assert lock(LockType.SHARED_READ).success.state == LockState.ACQUIRED


def test_an_administrators_call_needs_admin(make, tmp_path):
    h, primary, _ = federation(make, tmp_path)
    err = failure(as_user(h, "alice").call("create_role", role=Role(roleName="r")))
    assert isinstance(err, MetaException) and "no admin privilege on database '*'" in err.message
    assert "create_role" not in primary.methods()
    err = failure(as_user(h, "root").call("create_role", role=Role(roleName="r")))  # sent: the store lacks it
    assert not isinstance(err, MetaException), err


def test_without_trust_set_ugi_a_caller_that_proved_nothing_is_anonymous(make, tmp_path):
    h, _, _ = federation(make, tmp_path)
    h.runtime.grants.config = type(h.runtime.grants.config)(rules=h.runtime.grants.config.rules,
                                                            groups=h.runtime.grants.config.groups)
    h.runtime.grants.reload(h.runtime.grants.config)
    alice = as_user(h, "alice")
    assert alice.ok("get_all_databases") == ["default"]  # only the rule for everyone applies
