"""Database and function work at the target (waggle.sync.follow.databases), against in-memory metastores: what is
created, carried, kept and dropped, and that applying the same work twice writes nothing the second time."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from waggle.hms.gen.hive_metastore.ttypes import (
    AlreadyExistsException,
    Database,
    Function,
    InvalidOperationException,
    NoSuchObjectException,
    ResourceUri,
    Table,
)
from waggle.sync.follow.databases import FUNCTION, Catalog, carried
from waggle.sync.follow.plan import DatabaseWork, FunctionWork
from waggle.sync.hms import Metastore
from waggle.sync.job import SyncError
from waggle.sync.runner import TableSpec
from waggle.synced import objects as o


class FakeClient:
    """The metastore calls the catalog work makes, in memory; ``writes`` names each write call."""

    def __init__(self) -> None:
        self.dbs: dict[str, Database] = {}
        self.tabs: dict[tuple[str, str], Table] = {}
        self.fns: dict[tuple[str, str], Function] = {}
        self.writes: list[str] = []

    def get_database(self, name: str) -> Database:
        if name not in self.dbs:
            raise NoSuchObjectException(f"{name} not found")
        return copy.deepcopy(self.dbs[name])

    def create_database(self, db: Database) -> None:
        if db.name in self.dbs:
            raise AlreadyExistsException(db.name)
        self.writes.append("create_database")
        self.dbs[db.name] = copy.deepcopy(db)
        self.dbs[db.name].locationUri = self.dbs[db.name].locationUri or f"file:/target/{db.name}.db"

    def alter_database(self, name: str, db: Database) -> None:
        self.writes.append("alter_database")
        self.dbs[name] = copy.deepcopy(db)

    def drop_database(self, name: str, delete_data: bool, cascade: bool) -> None:
        assert (delete_data, cascade) == (False, False)
        if any(d == name for d, _ in [*self.tabs, *self.fns]):
            raise InvalidOperationException(f"Database {name} is not empty")
        self.writes.append("drop_database")
        del self.dbs[name]

    def get_all_tables(self, db: str) -> list[str]:
        return [t for d, t in self.tabs if d == db]

    def get_table(self, db: str, name: str) -> Table:
        if (db, name) not in self.tabs:
            raise NoSuchObjectException(name)
        return copy.deepcopy(self.tabs[db, name])

    def drop_table(self, db: str, name: str, delete_data: bool) -> None:
        self.writes.append("drop_table")
        del self.tabs[db, name]

    def get_functions(self, db: str, pattern: str) -> list[str]:
        return [f for d, f in self.fns if d == db]

    def get_function(self, db: str, name: str) -> Function:
        if (db, name) not in self.fns:
            raise NoSuchObjectException(f"Function {db}.{name} does not exist")
        return copy.deepcopy(self.fns[db, name])

    def create_function(self, f: Function) -> None:
        self.writes.append("create_function")
        self.fns[f.dbName, f.functionName] = copy.deepcopy(f)

    def alter_function(self, db: str, name: str, f: Function) -> None:
        self.writes.append("alter_function")
        self.fns[db, name] = copy.deepcopy(f)

    def drop_function(self, db: str, name: str) -> None:
        self.writes.append("drop_function")
        del self.fns[db, name]


def policy(**extra: Any) -> TableSpec:
    return TableSpec(source="analytics", patterns=(r"sales\..*",), **{"propagate_deletes": True, **extra})


def catalog(spec: TableSpec, source: FakeClient, target: FakeClient) -> Catalog:
    return Catalog(spec, Metastore(source), Metastore(target), {}, lambda db: None)


def sales(**changes: Any) -> Database:
    fields: dict[str, Any] = {"name": "sales", "description": "orders and lines", "locationUri": "hdfs://src/sales.db",
                              "parameters": {"team": "data"}, "ownerName": "alice", "ownerType": 1, **changes}
    return Database(**fields)


def upper(class_name: str = "com.example.Upper", db: str = "sales") -> Function:
    return Function(functionName="upper", dbName=db, className=class_name, ownerName="alice", ownerType=1,
                    createTime=1, functionType=1, resourceUris=[ResourceUri(1, "hdfs://src/jars/udf.jar")])


def copy_of(name: str, source_object: str, mode: str = o.MIRROR) -> Table:
    return Table(tableName=name, dbName="sales", parameters={o.SOURCE: "analytics", o.SOURCE_OBJECT: source_object,
                                                             o.MODE: mode})


@pytest.fixture
def sides() -> tuple[FakeClient, FakeClient]:
    source, target = FakeClient(), FakeClient()
    source.dbs["sales"] = sales()
    return source, target


# -- created and altered ----------------------------------------------------------------------------------------
def test_a_created_database_is_made_with_the_sources_description_parameters_and_owner_not_its_location(
        sides: tuple[FakeClient, FakeClient]) -> None:
    source, target = sides
    c = catalog(policy(), source, target)
    assert c.present(DatabaseWork("sales", [1]), source.get_database("sales")) == 1
    made = target.dbs["sales"]
    assert (made.description, made.ownerName, made.ownerType) == ("orders and lines", "alice", 1)
    assert made.parameters == {"team": "data", o.SOURCE: "analytics", o.SOURCE_OBJECT: "sales"}
    assert made.locationUri == "file:/target/sales.db"  # the target's own, as the batch sync makes it
    target.writes.clear()
    assert c.present(DatabaseWork("sales", [1]), source.get_database("sales")) == 0  # applied again: nothing
    assert target.writes == []


def test_an_altered_database_gets_the_new_properties_and_keeps_its_location_and_the_syncs_parameters(
        sides: tuple[FakeClient, FakeClient]) -> None:
    source, target = sides
    c = catalog(policy(), source, target)
    c.present(DatabaseWork("sales", [1]), source.get_database("sales"))
    target.dbs["sales"].parameters[FUNCTION + "f"] = "analytics:sales.f"
    source.dbs["sales"] = sales(description="new", parameters={"team": "bi"}, ownerName="ops", ownerType=2,
                                locationUri="hdfs://elsewhere/sales.db")
    assert c.present(DatabaseWork("sales", [2]), source.get_database("sales")) == 1
    altered = target.dbs["sales"]
    assert (altered.description, altered.ownerName, altered.ownerType) == ("new", "ops", 2)
    assert altered.parameters == {"team": "bi", o.SOURCE: "analytics", o.SOURCE_OBJECT: "sales",
                                  FUNCTION + "f": "analytics:sales.f"}
    assert altered.locationUri == "file:/target/sales.db"


def test_a_database_made_by_a_batch_run_is_the_syncs_by_its_description(sides: tuple[FakeClient, FakeClient]) -> None:
    source, target = sides
    target.dbs["sales"] = Database(name="sales", description="synced by waggle from analytics:sales",
                                   locationUri="file:/t", parameters={o.SOURCE: "analytics"})
    c = catalog(policy(), source, target)
    assert c.present(DatabaseWork("sales", [1]), source.get_database("sales")) == 1
    assert target.dbs["sales"].description == "orders and lines"


def test_a_database_the_sync_did_not_make_keeps_its_own_properties_and_is_never_dropped(
        sides: tuple[FakeClient, FakeClient]) -> None:
    source, target = sides
    target.dbs["sales"] = Database(name="sales", description="mine", locationUri="file:/t", parameters={},
                                   ownerName="bob")
    c = catalog(policy(), source, target)
    assert c.present(DatabaseWork("sales", [1]), source.get_database("sales")) == 0
    kept = target.dbs["sales"]
    assert (kept.description, kept.ownerName, kept.parameters) == ("mine", "bob", {o.SOURCE: "analytics"})  # marked
    del source.dbs["sales"]
    with pytest.raises(SyncError, match="target database sales was not created by waggle sync from "
                                        "analytics:sales; refusing to drop it"):
        c.gone(DatabaseWork("sales", [2]))
    assert "sales" in target.dbs


def test_a_target_database_of_many_is_made_but_never_carried_or_dropped(sides: tuple[FakeClient, FakeClient]) -> None:
    source, target = sides
    c = catalog(policy(target_database="gathered"), source, target)
    assert c.present(DatabaseWork("sales", [1]), source.get_database("sales")) == 1
    assert target.dbs["gathered"].description == "synced by waggle from analytics:sales"
    del source.dbs["sales"]
    assert c.gone(DatabaseWork("sales", [2])) == 0 and "gathered" in target.dbs


# -- dropped -------------------------------------------------------------------------------------------------------
def test_a_dropped_database_goes_with_the_syncs_copies_and_functions_in_it(sides: tuple[FakeClient, FakeClient]
                                                                           ) -> None:
    source, target = sides
    c = catalog(policy(), source, target)
    c.present(DatabaseWork("sales", [1]), source.get_database("sales"))
    source.fns["sales", "upper"] = upper()
    c.function(FunctionWork("sales", "upper", [2]))
    target.tabs["sales", "orders"] = copy_of("orders", "sales.orders")
    del source.dbs["sales"], source.fns["sales", "upper"]
    target.writes.clear()
    assert c.gone(DatabaseWork("sales", [3])) == 3
    assert target.writes == ["drop_table", "drop_function", "drop_database"]
    assert target.dbs == {} and target.tabs == {} and target.fns == {}
    assert c.gone(DatabaseWork("sales", [3])) == 0  # applied again: nothing


@pytest.mark.parametrize(("what", "add"), [
    ("table report", lambda t: t.tabs.__setitem__(("sales", "report"), Table(tableName="report", dbName="sales",
                                                                             parameters={}))),
    ("table other", lambda t: t.tabs.__setitem__(("sales", "other"), copy_of("other", "web.other"))),
    ("function mine", lambda t: t.fns.__setitem__(("sales", "mine"), upper())),
])
def test_a_dropped_database_holding_what_the_sync_did_not_make_is_kept_and_reported(
        sides: tuple[FakeClient, FakeClient], what: str, add: Any) -> None:
    source, target = sides
    c = catalog(policy(), source, target)
    c.present(DatabaseWork("sales", [1]), source.get_database("sales"))
    target.tabs["sales", "orders"] = copy_of("orders", "sales.orders")
    add(target)
    del source.dbs["sales"]
    with pytest.raises(SyncError, match=f"target database sales is kept: it holds what waggle sync did not create "
                                        f"from analytics:sales \\({what}\\)"):
        c.gone(DatabaseWork("sales", [2]))
    assert "sales" in target.dbs and ("sales", "orders") not in target.tabs  # the sync's own copy went


def test_without_propagate_deletes_a_dropped_database_is_kept(sides: tuple[FakeClient, FakeClient]) -> None:
    source, target = sides
    c = catalog(policy(propagate_deletes=False), source, target)
    c.present(DatabaseWork("sales", [1]), source.get_database("sales"))
    del source.dbs["sales"]
    assert c.gone(DatabaseWork("sales", [2])) == 0 and "sales" in target.dbs


def test_carried_leaves_the_sources_own_sync_parameters_out() -> None:
    target = Database(name="sales", locationUri="file:/t", parameters={o.SOURCE: "analytics", "old": "1"})
    wanted = carried(target, sales(parameters={"a": "b", o.FINGERPRINT: "x"}), "analytics", "sales")
    assert wanted.parameters == {"a": "b", o.SOURCE: "analytics", o.SOURCE_OBJECT: "sales"}
    assert (wanted.name, wanted.locationUri) == ("sales", "file:/t")


# -- functions -----------------------------------------------------------------------------------------------------
def test_a_function_is_created_altered_and_dropped_as_the_sources_is(sides: tuple[FakeClient, FakeClient]) -> None:
    source, target = sides
    c = catalog(policy(target_database="sales_copy"), source, target)
    source.fns["sales", "upper"] = upper()
    work = FunctionWork("sales", "upper", [1])
    assert c.function(work) == 1
    assert target.fns["sales_copy", "upper"] == upper(db="sales_copy")
    assert target.dbs["sales_copy"].parameters[FUNCTION + "upper"] == "analytics:sales.upper"
    assert target.writes == ["create_database", "alter_database", "create_function"]  # said the sync's first
    target.writes.clear()
    assert c.function(work) == 0 and target.writes == []  # applied again: nothing
    source.fns["sales", "upper"] = upper("com.example.Upper2")
    assert c.function(work) == 1 and target.writes == ["alter_function"]
    assert target.fns["sales_copy", "upper"].className == "com.example.Upper2"
    del source.fns["sales", "upper"]
    assert c.function(work) == 1
    assert target.fns == {} and FUNCTION + "upper" not in target.dbs["sales_copy"].parameters
    assert c.function(work) == 0


def test_a_function_the_sync_did_not_make_is_never_changed_or_dropped(sides: tuple[FakeClient, FakeClient]) -> None:
    source, target = sides
    target.dbs["sales"] = Database(name="sales", locationUri="file:/t", parameters={o.SOURCE: "analytics"})
    target.fns["sales", "upper"] = upper("com.theirs.Upper")
    source.fns["sales", "upper"] = upper()
    c = catalog(policy(), source, target)
    with pytest.raises(SyncError, match=r"target function sales\.upper exists and was not created by waggle sync"):
        c.function(FunctionWork("sales", "upper", [1]))
    del source.fns["sales", "upper"]
    with pytest.raises(SyncError, match="refusing to drop it"):
        c.function(FunctionWork("sales", "upper", [2]))
    assert target.fns["sales", "upper"].className == "com.theirs.Upper" and target.writes == []
