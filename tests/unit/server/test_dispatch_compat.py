"""Dispatch without Java: Hive versions bridged per member, and catalog names for members without catalogs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.memory_metastore import HIVE2_MISSING, HIVE4_0_1_MISSING, Harness, MemoryMetastore
from waggle.hms.gen.hive_metastore.ttypes import GetDatabaseRequest, NoSuchObjectException


def with_member(make: Callable[..., Harness], fed: MemoryMetastore, settings: dict[str, Any] | None = None
                ) -> tuple[Harness, MemoryMetastore, MemoryMetastore]:
    primary = MemoryMetastore("primary").add_database("default")
    fed.add_database("sales").add_table("sales", "orders")
    return make((primary, {}), [(fed, {"database-prefix": "fed_", **(settings or {})})]), primary, fed


def trail(store: MemoryMetastore) -> list[tuple[str, bool]]:
    """(method, answered UNKNOWN_METHOD) of every call that reached ``store``, set_ugi left out."""
    return [(c.method, c.refused) for c in store.calls if c.method != "set_ugi"]


# -- bridges -------------------------------------------------------------------------------------------------
def test_get_table_reaches_a_hive_4_0_1_member_through_get_table_req_and_the_pool_learns_it(make):
    h, primary, fed = with_member(make, MemoryMetastore("fed", catalogs=True, missing=HIVE4_0_1_MISSING))
    client = h.client()
    table = client.ok("get_table", dbname="fed_sales", tbl_name="orders")
    assert (table.dbName, table.tableName, table.catName) == ("fed_sales", "orders", "hive")
    assert trail(fed) == [("get_table", True), ("get_table_req", False)]
    request = fed.received("get_table_req")[0].args[0]
    assert (request.dbName, request.tblName) == ("sales", "orders")
    assert "get_table" in h.runtime.routes.pools["fed"].caps.missing
    # learned once for the pool: the next call, from any client, goes straight to the bridge
    again = h.client().ok("get_table", dbname="fed_sales", tbl_name="orders")
    assert again.dbName == "fed_sales"
    assert trail(fed) == [("get_table", True), ("get_table_req", False), ("get_table_req", False)]
    assert primary.calls == []


def test_a_hive_version_hint_sends_get_table_to_the_bridge_from_the_first_call(make):
    h, _, fed = with_member(make, MemoryMetastore("fed", catalogs=True, missing=HIVE4_0_1_MISSING),
                            {"hive-version": "4.0.1"})
    assert h.client().ok("get_table", dbname="fed_sales", tbl_name="orders").dbName == "fed_sales"
    assert trail(fed) == [("get_table_req", False)]


def test_a_missing_table_through_the_bridge_is_the_members_no_such_object(make):
    h, _, _fed = with_member(make, MemoryMetastore("fed", catalogs=True, missing=HIVE4_0_1_MISSING))
    result = h.client().call("get_table", dbname="fed_sales", tbl_name="nope")
    assert isinstance(result.o2, NoSuchObjectException) and "sales.nope" in result.o2.message


def test_get_database_req_reaches_a_hive_2_member_through_get_database(make):
    h, primary, fed = with_member(make, MemoryMetastore("fed", missing=HIVE2_MISSING))
    client = h.client()
    db = client.ok("get_database_req", request=GetDatabaseRequest(name="fed_sales", catalogName="hive"))
    assert (db.name, db.catalogName) == ("fed_sales", "hive")
    # the catalog is asked about once (get_catalogs), the Hive 4 method once, then its bridge
    assert trail(fed) == [("get_catalogs", True), ("get_database_req", True), ("get_database", False)]
    assert fed.received("get_database")[0].args == ("sales",)
    db = client.ok("get_database_req", request=GetDatabaseRequest(name="fed_sales"))
    assert (db.name, db.catalogName) == ("fed_sales", None)  # no catalog named: none filled
    assert trail(fed)[3:] == [("get_database", False)]
    assert primary.calls == []


# -- catalogs ------------------------------------------------------------------------------------------------
def test_a_hive_2_member_gets_plain_names_and_its_replies_the_catalog_the_client_named(make):
    h, primary, fed = with_member(make, MemoryMetastore("fed"))
    client = h.client()
    db = client.ok("get_database", name="@hive#fed_sales")
    assert (db.name, db.catalogName) == ("fed_sales", "hive")
    assert trail(fed) == [("get_catalogs", True), ("get_database", False)]
    assert fed.received("get_database")[0].args == ("sales",)
    assert h.runtime.routes.pools["fed"].caps.catalogs is False
    client.ok("get_database", name="@hive#fed_sales")
    assert trail(fed)[2:] == [("get_database", False)]  # asked once per pool
    assert primary.calls == []


def test_another_catalog_does_not_exist_in_a_hive_2_member(make):
    h, _, fed = with_member(make, MemoryMetastore("fed"))
    client = h.client()
    result = client.call("get_database", name="@spark#fed_sales")
    assert isinstance(result.o1, NoSuchObjectException)
    assert result.o1.message == ("catalog 'spark' does not exist in metastore 'fed' (a Hive 2 metastore has only "
                                 "'hive')")
    assert trail(fed) == [("get_catalogs", True)]  # the probe only: the call itself never reached it
    assert isinstance(client.call("get_database", name="@spark#fed_sales").o1, NoSuchObjectException)
    assert trail(fed) == [("get_catalogs", True)]


def test_a_hive_3_member_gets_catalog_qualified_names_as_they_are(make):
    h, _, fed = with_member(make, MemoryMetastore("fed", catalogs=True))
    db = h.client().ok("get_database", name="@hive#fed_sales")
    assert (db.name, db.catalogName) == ("fed_sales", "hive")
    assert trail(fed) == [("get_catalogs", False), ("get_database", False)]
    assert fed.received("get_database")[0].args == ("@hive#sales",)


def test_a_catalog_qualified_listing_pattern_reaches_hive_2_members_plain(make):
    h, primary, fed = with_member(make, MemoryMetastore("fed"))
    assert h.client().ok("get_databases", pattern="@hive#fed_*") == ["fed_sales"]
    assert [c.args for c in fed.received("get_databases")] == [("*",)]
    assert [c.args for c in primary.received("get_databases")] == [("fed_*",)]
