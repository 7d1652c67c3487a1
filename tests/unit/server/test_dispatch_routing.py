"""Dispatch without Java: routing by database name and refusals, over in-memory metastores (a real Thrift wire).

Every test asserts both what the client got and what reached which metastore (``MemoryMetastore.calls``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thrift.Thrift import TApplicationException

from tests.support.memory_metastore import Harness, MemoryMetastore, failure
from waggle.hms.gen.hive_metastore import ThriftHiveMetastore as H
from waggle.hms.gen.hive_metastore.ttypes import Database, MetaException, NoSuchObjectException, Table


def stores() -> tuple[MemoryMetastore, MemoryMetastore]:
    primary = MemoryMetastore("primary").add_database("default", "web").add_table("default", "t")
    fed = MemoryMetastore("fed").add_database("sales", "secret").add_table("sales", "orders")
    return primary, fed


def prefixed(make: Callable[..., Harness], fed_settings: dict[str, Any] | None = None,
             primary_settings: dict[str, Any] | None = None) -> tuple[Harness, MemoryMetastore, MemoryMetastore]:
    primary, fed = stores()
    harness = make((primary, {"access-control-type": "READ_AND_WRITE_AND_CREATE", **(primary_settings or {})}),
                   [(fed, {"database-prefix": "fed_", **(fed_settings or {})})])
    return harness, primary, fed


# -- PREFIXED routing ---------------------------------------------------------------------------------------------
def test_a_prefixed_name_reaches_its_member_without_the_prefix_and_comes_back_with_it(make):
    h, primary, fed = prefixed(make)
    db = h.client().ok("get_database", name="fed_sales")
    assert db.name == "fed_sales" and db.description == "sales in fed"
    assert [(c.method, c.args) for c in fed.calls] == [("get_database", ("sales",))]
    assert primary.calls == []


def test_a_reply_answers_in_the_spelling_the_client_used(make):
    h, _, fed = prefixed(make)
    assert h.client().ok("get_database", name="FED_Sales").name == "FED_Sales"
    assert fed.received("get_database")[0].args == ("sales",)


def test_an_unprefixed_name_reaches_the_primary_unchanged(make):
    h, primary, fed = prefixed(make)
    assert h.client().ok("get_database", name="default").name == "default"
    assert [(c.method, c.args) for c in primary.calls] == [("get_database", ("default",))]
    assert fed.calls == []


def test_get_table_is_routed_by_its_database_and_the_reply_table_carries_the_client_name(make):
    h, primary, fed = prefixed(make)
    table = h.client().ok("get_table", dbname="fed_sales", tbl_name="orders")
    assert (table.dbName, table.tableName) == ("fed_sales", "orders")
    assert [(c.method, c.args) for c in fed.calls] == [("get_table", ("sales", "orders"))]
    assert primary.calls == []


def test_a_members_declared_exception_is_relayed_to_the_client(make):
    h, _, fed = prefixed(make)
    result = h.client().call("get_database", name="fed_nope")
    assert isinstance(result.o1, NoSuchObjectException) and "in fed" in result.o1.message
    assert fed.received("get_database")[0].args == ("nope",)


def test_a_write_the_rules_allow_reaches_the_member_in_its_own_names(make):
    h, _, fed = prefixed(make, {"access-control-type": "READ_AND_WRITE_ON_DATABASE_WHITELIST",
                                "writable-database-white-list": ["sales"]})
    h.client().ok("create_table", tbl=Table(dbName="fed_sales", tableName="fresh"))
    assert ("sales", "fresh") in fed.tables
    assert fed.received("create_table")[0].args[0].dbName == "sales"


# -- MANUAL routing ------------------------------------------------------------------------------------------------
def manual(make: Callable[..., Harness]) -> tuple[Harness, MemoryMetastore, MemoryMetastore]:
    primary = MemoryMetastore("primary").add_database("default", "shared")
    fed = MemoryMetastore("fed").add_database("sales", "shared")
    harness = make((primary, {}), [(fed, {})], server={"database-resolution": "MANUAL"})
    return harness, primary, fed


def test_manual_a_database_is_routed_to_the_member_whose_listing_has_it(make):
    h, primary, fed = manual(make)
    # the runtime listed every member once at start
    assert primary.methods() == ["get_all_databases"] and fed.methods() == ["get_all_databases"]
    assert h.client().ok("get_database", name="sales").name == "sales"
    assert fed.methods() == ["get_all_databases", "get_database"]
    assert fed.received("get_database")[0].args == ("sales",)
    assert primary.methods() == ["get_all_databases"]


def test_manual_a_name_in_two_members_belongs_to_the_first_and_an_unknown_one_to_the_primary(make):
    h, primary, fed = manual(make)
    client = h.client()
    assert client.ok("get_database", name="shared").description == "shared in primary"
    unknown = client.call("get_database", name="nowhere")
    assert isinstance(unknown.o1, NoSuchObjectException) and "in primary" in unknown.o1.message
    assert [c.args for c in primary.received("get_database")] == [("shared",), ("nowhere",)]
    assert fed.received("get_database") == []
    assert client.ok("get_all_databases") == ["default", "shared", "sales"]


# -- refusals: nothing reaches any metastore -------------------------------------------------------------------
def test_writes_to_a_read_only_member_are_refused_before_reaching_any_metastore(make):
    h, _primary, fed = prefixed(make)
    client = h.client()
    created = failure(client.call("create_table", tbl=Table(dbName="fed_sales", tableName="x")))
    dropped = failure(client.call("drop_table", dbname="fed_sales", name="orders", deleteData=True))
    for refusal, method in ((created, "create_table"), (dropped, "drop_table")):
        assert isinstance(refusal, MetaException)
        assert refusal.message == (f"{method} refused: database 'fed_sales' in metastore 'fed' is read-only "
                                   f"(access-control-type READ_ONLY)")
    assert h.all_calls() == {"primary": [], "fed": []}
    assert ("sales", "orders") in fed.tables and ("sales", "x") not in fed.tables


def test_a_write_outside_the_white_list_is_refused_naming_the_rule(make):
    h, _, fed = prefixed(make, {"access-control-type": "READ_AND_WRITE_ON_DATABASE_WHITELIST",
                                "writable-database-white-list": ["sales"]})
    refusal = failure(h.client().call("drop_table", dbname="fed_secret", name="t", deleteData=False))
    assert isinstance(refusal, MetaException)
    assert "'fed_secret'" in refusal.message and "writable-database-white-list" in refusal.message
    assert fed.calls == []


def test_a_hidden_database_does_not_exist_for_clients(make):
    h, _primary, _fed = prefixed(make, {"mapped-databases": ["sales"]})
    client = h.client()
    result = client.call("get_database", name="fed_secret")
    assert isinstance(result.o1, NoSuchObjectException)
    assert result.o1.message == "database 'fed_secret' does not exist (or is not visible through waggle)"
    assert h.all_calls() == {"primary": [], "fed": []}
    assert client.ok("get_all_databases") == ["default", "web", "fed_sales"]


def test_a_call_naming_databases_of_two_metastores_is_refused_naming_both(make):
    h, _primary, _fed = prefixed(make)
    refusal = failure(h.client().call("exchange_partition", partitionSpecs={"p": "1"}, source_db="default",
                                      source_table_name="t", dest_db="fed_sales", dest_table_name="orders"))
    assert isinstance(refusal, MetaException)
    assert refusal.message == ("exchange_partition names databases of two metastores: 'default' ('primary') and "
                               "'fed_sales' ('fed'); waggle sends a call to one metastore")
    assert h.all_calls() == {"primary": [], "fed": []}


def test_create_database_behind_a_federated_prefix_is_refused_and_on_the_primary_allowed(make):
    h, primary, fed = prefixed(make, {"mapped-databases": ["sales"]})
    client = h.client()
    refusal = failure(client.call("create_database", database=Database(name="fed_new")))
    assert isinstance(refusal, MetaException)
    assert refusal.message == "databases can only be created in the primary metastore, not in 'fed'"
    assert h.all_calls() == {"primary": [], "fed": []}
    client.ok("create_database", database=Database(name="fresh"))
    assert "fresh" in primary.databases and fed.calls == []


def test_create_database_of_a_name_a_federated_prefix_shows_goes_to_the_primary_as_it_is(make):
    """Pinned as it is today (suspect): when the member does not hide the name (no mapped-databases), the
    create is not refused; the PRIMARY creates 'fed_new', a database clients cannot reach afterwards (the name
    resolves to member 'fed')."""
    h, primary, fed = prefixed(make)
    client = h.client()
    client.ok("create_database", database=Database(name="fed_new"))
    assert [(c.method, c.args[0].name) for c in primary.calls] == [("create_database", "fed_new")]
    assert "fed_new" in primary.databases and fed.calls == []
    assert isinstance(client.call("get_database", name="fed_new").o1, NoSuchObjectException)
    assert fed.received("get_database")[0].args == ("new",)


def test_create_database_is_refused_when_the_primary_may_not_create(make):
    h, primary, _ = prefixed(make, primary_settings={"access-control-type": "READ_ONLY"})
    refusal = failure(h.client().call("create_database", database=Database(name="fresh")))
    assert isinstance(refusal, MetaException) and "READ_ONLY" in refusal.message
    assert primary.calls == []


# -- methods waggle's IDL does not have --------------------------------------------------------------------------
def test_an_unknown_method_is_relayed_to_the_primary_byte_for_byte(make):
    h, primary, fed = prefixed(make)
    primary.extra["get_database_v9"] = (H.get_database_args, H.get_database_result,
                                        lambda args: Database(name=f"v9:{args.name}"))
    result = h.client().send("get_database_v9", H.get_database_args(name="default"), H.get_database_result)
    assert result.success.name == "v9:default"
    assert [(c.method, c.args[0].name) for c in primary.calls] == [("get_database_v9", "default")]
    assert fed.calls == []


def test_an_unknown_method_the_primary_lacks_too_gets_the_primarys_answer(make):
    h, primary, _ = prefixed(make)
    answer = h.client().send("get_nothing", H.get_database_args(name="default"), H.get_database_result)
    assert isinstance(answer, TApplicationException)
    assert answer.type == TApplicationException.UNKNOWN_METHOD
    assert answer.message == "Invalid method name: 'get_nothing'"
    assert [(c.method, c.refused) for c in primary.calls] == [("get_nothing", True)]


def test_an_unknown_method_naming_a_federated_database_is_refused_unknown_method(make):
    h, _primary, _fed = prefixed(make)
    client = h.client()
    answer = client.send("get_database_v9", H.get_database_args(name="fed_sales"), H.get_database_result)
    assert isinstance(answer, TApplicationException) and answer.type == TApplicationException.UNKNOWN_METHOD
    assert "database 'fed_sales' of metastore 'fed'" in answer.message
    assert h.all_calls() == {"primary": [], "fed": []}
    # the connection stays usable
    assert client.ok("get_database", name="fed_sales").name == "fed_sales"
